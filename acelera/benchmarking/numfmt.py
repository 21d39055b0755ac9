"""Numbers as a C++ ostream prints them, so benchmark_model's output parsers read ours.

Doubles print as `%g` (6 significant digits), the op profile tables' columns as fixed
3-decimal numbers, bools as 1/0; NaN prints as glibc prints x86's default NaN: `-nan`.
"""
from __future__ import annotations

import math
from typing import Any, SupportsFloat

import numpy as np


def _non_finite(x: float) -> str | None:
    """How glibc prints a NaN or an infinity; None for a finite number."""
    if math.isnan(x):
        return "-nan"  # x86's default NaN (0/0) has the sign bit set; glibc prints "-nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return None


def fmt_g(x: SupportsFloat) -> str:
    """A number as `std::ostream << double` prints it (printf %g, 6 significant digits)."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(int(x))
    v = float(x)
    special = _non_finite(v)
    return special if special is not None else "%g" % v


def fixed3(x: SupportsFloat) -> str:
    """A number as `std::fixed << std::setprecision(3)` prints it."""
    v = float(x)
    special = _non_finite(v)
    return special if special is not None else f"{v:.3f}"


def fmt_bool(v: bool) -> str:
    return "1" if v else "0"


def param_str(v: Any) -> str:
    """A flag value as BenchmarkParam's LogParams prints it."""
    if isinstance(v, bool):
        return fmt_bool(v)
    if isinstance(v, float):
        return fmt_g(v)
    return str(v)
