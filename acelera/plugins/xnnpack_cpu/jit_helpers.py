"""numba helpers shared by the float kernels (jit_gemm.py, jit_depthwise.py, jit_pool.py,
jit_elementwise.py): the decorators, float32 constants, and the fused activation of one value
or of a row. Imported only when numba is available (jit.AVAILABLE)."""
from __future__ import annotations

import numpy as np
from numba import njit

from acelera.plugins.xnnpack_cpu.kernel_cache import drop_stale_cache

drop_stale_cache()

_Z = np.float32(0.0)  # a float32 constant: 0.0 would widen the arithmetic to float64
_U = np.uintp  # unsigned indices: no negative-index fix-ups in the inner loops
_ONE, _THREE, _SIX = np.float32(1.0), np.float32(3.0), np.float32(6.0)
# error_model="numpy": float division by zero gives inf / NaN (the reference's result) without
# a per-element test, which keeps loops with a division (means, average pools, LOGISTIC) vectorized
_jit = njit(cache=True, fastmath={"contract"}, nogil=True, boundscheck=False, error_model="numpy")


# Activations after the bias: clamp(lo1, hi1), then act2 of `kind`: 0 clamp(lo2, hi2),
# 1 PReLU (max(v, 0) + min(v, 0) * alpha: the reference formula, branch-free), 2 HARD_SWISH
# (v * clamp(v + 3, 0, 6) / 6), 3 LOGISTIC (1 / (1 + exp(-v))).
CLAMP, PRELU, HSWISH, SIGMOID = 0, 1, 2, 3


@njit(inline="always", fastmath={"contract"}, boundscheck=False)
def _act(v, kind, lo, hi, a):
    """One value (used where there is no long inner loop to keep vectorized)."""
    if kind == 0:
        return min(max(v, lo), hi)
    if kind == 1:
        return max(v, _Z) + min(v, _Z) * a
    if kind == 2:
        t = min(max(v + _THREE, _Z), _SIX)
        return (t * v) / _SIX
    return _ONE / (_ONE + np.exp(-v))


@njit(inline="always", fastmath={"contract"}, boundscheck=False)
def _act_row(x, kind, lo, hi, alpha):
    """act2 in place over a row, the kind tested once outside the (vectorized) loops."""
    n = x.shape[0]
    if kind == 0:
        for j in range(n):
            x[j] = min(max(x[j], lo), hi)
    elif kind == 1:
        for j in range(n):
            v = x[j]
            x[j] = max(v, _Z) + min(v, _Z) * alpha[j]
    elif kind == 2:
        for j in range(n):
            v = x[j]
            t = min(max(v + _THREE, _Z), _SIX)
            x[j] = (t * v) / _SIX
    else:
        for j in range(n):
            x[j] = _ONE / (_ONE + np.exp(-x[j]))


# Sums may be reassociated (vector lanes, taps in any order; float32 results then differ from
# the reference's order by rounding only), but NaN and infinity keep their meaning.
_FAST = {"contract", "reassoc", "nsz", "arcp"}
_jitf = njit(cache=True, fastmath=_FAST, nogil=True, boundscheck=False, error_model="numpy")
