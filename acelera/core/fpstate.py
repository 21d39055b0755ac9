"""numpy's floating-point error state, switched to "ignore" cheaply around kernel runs.

Kernels mirror C++ float semantics (inf and NaN results are LiteRT's too), so numpy's
warnings are silenced while a plan runs. `np.errstate` costs about 2 us per use, more than a
small node: the executor sets an ignoring state once per invoke (`quiet_fp`), and a kernel
that may also run outside an invoke asks `fp_errors_ignored()` before entering np.errstate.
"""
from __future__ import annotations

import numpy as np

try:  # numpy >= 2 keeps its floating-point error state in a context variable
    from numpy._core._ufunc_config import _extobj_contextvar as FP_STATE  # type: ignore[attr-defined]  # private, no stub
except ImportError:  # pragma: no cover - numpy 1.x
    FP_STATE = None

_fp_quiet: list = [None, None]  # [an error state, the same state with every error ignored]


def quiet_fp():
    """Ignore numpy floating-point errors until `FP_STATE.reset(token)`; returns the token, or
    None when they are already ignored (a subgraph called from a running plan). The ignoring
    state is derived once per outer state and then only set."""
    cur = FP_STATE.get()
    pair = _fp_quiet
    if cur is pair[1]:
        return None
    if cur is not pair[0]:
        with np.errstate(all="ignore"):
            quiet = FP_STATE.get()
        pair = [cur, quiet]
        _fp_quiet[:] = pair
    return FP_STATE.set(pair[1])


def fp_errors_ignored() -> bool:
    """Whether numpy's floating-point errors are already ignored (as inside Executor.run), so
    that a kernel need not enter np.errstate itself."""
    return FP_STATE is not None and FP_STATE.get() is _fp_quiet[1]
