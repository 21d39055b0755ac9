"""Values as `acelera select` writes them: TOML and Python literals, microseconds, milliseconds."""
from __future__ import annotations

import json
import math
from typing import Any


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))


def _py(v: Any) -> str:
    """A Python literal, strings in double quotes."""
    return json.dumps(v) if isinstance(v, str) else repr(v)


def _num(x: float) -> float | str:
    return float(x) if math.isfinite(x) else str(x)


def _us(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f} us"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f} ms"
