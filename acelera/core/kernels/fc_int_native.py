"""numba loop of the quantized FULLY_CONNECTED with constant weights and bias (fully_connected.py's
`_constant_run`): per row and unit, the exact integer dot product of the raw inputs with the
offset weights plus the folded bias (bias - input_zero_point * row_sum(W)), then the
double-precision requantization of tflite/kernels/internal/reference/fully_connected.h
(and reference_integer_ops/fully_connected.h): round(double(acc) * scale) (std::round, halves
away from zero) + output_zero_point, clamped to the activation range.

The caller guarantees what `_constant_run` does: the accumulator can neither wrap nor leave
int32 once scaled, and |acc| < 2**52, so int64 accumulation followed by a conversion to double
is exact. Small problems only: the caller keeps its BLAS path for large ones.

Every jitted function lives in this module and calls none of another module (numba's cache
watches only the defining file). numba is imported, and the loop compiled (or loaded from numba's
on-disk cache), on first use: `fc_int_kernel()` (int64 accumulation) and `fc_f32_kernel()` (float32
accumulation, reassociated to vectorize, for products whose sums are exact in float32) return
them, or None when numba cannot be imported (the caller then runs its numpy path).
"""
from __future__ import annotations

from typing import Any

import numpy as np

_BELOW_HALF = float(np.nextafter(0.5, 0.0))


def _fc_int_const(x, w, fold, eff, zp, lo, hi, out):  # pragma: no cover - compiled
    """x (B, K) integer inputs, w (U, K) int32 offset weights, fold (U,) int64, eff (U,)
    float64 scales, zp / lo / hi float64, out (B, U) integer output, written in place."""
    n_rows, k_depth = x.shape
    for b in range(n_rows):
        for u in range(w.shape[0]):
            acc = np.int64(0)
            for k in range(k_depth):
                acc += np.int64(x[b, k]) * np.int64(w[u, k])
            out[b, u] = _requantize(np.float64(acc + fold[u]) * eff[u], zp, lo, hi)


def _dot_f32(xr, w, u):  # pragma: no cover - compiled
    """sum(xr * w[u]) in float32 in any order (reassociated to vectorize): exact when every
    partial sum stays below 2**24, which the caller guarantees."""
    acc = np.float32(0.0)
    for k in range(xr.shape[0]):
        acc += xr[k] * w[u, k]
    return acc


def _fc_f32_const(x, w, fold, eff, zp, lo, hi, out):  # pragma: no cover - compiled
    """_fc_int_const with float32 weights w, for products whose integer sums are exact in
    float32."""
    n_rows, k_depth = x.shape
    xr = np.empty(k_depth, np.float32)
    for b in range(n_rows):
        for k in range(k_depth):
            xr[k] = x[b, k]
        for u in range(w.shape[0]):
            acc = _dot_f32(xr, w, u)
            out[b, u] = _requantize(np.float64(np.int64(acc) + fold[u]) * eff[u], zp, lo, hi)


def _requantize(r, zp, lo, hi):  # pragma: no cover - compiled
    """std::round(r) (halves away from zero) + zp, clamped to [lo, hi]."""
    t = np.trunc(r + _BELOW_HALF) if r >= 0.0 else np.trunc(r - _BELOW_HALF)
    t += zp
    if t < lo:
        return lo
    if t > hi:
        return hi
    return t


_KERNELS: tuple[Any, Any] | None = None
_FAILED = False


def _kernels() -> tuple[Any, Any] | None:
    global _KERNELS, _FAILED, _dot_f32, _requantize
    if _KERNELS is None and not _FAILED:
        try:
            import numba
        except Exception:  # pragma: no cover - numba is a dependency
            _FAILED = True
            return None
        jit = numba.njit(cache=True, nogil=True, error_model="numpy")
        _requantize = jit(_requantize)
        _dot_f32 = numba.njit(cache=True, nogil=True, error_model="numpy",
                              fastmath={"reassoc", "contract"})(_dot_f32)
        _KERNELS = (jit(_fc_int_const), jit(_fc_f32_const))
    return _KERNELS


def fc_int_kernel() -> Any:
    """The compiled quantized FULLY_CONNECTED loop with int64 accumulation (None without numba)."""
    k = _kernels()
    return None if k is None else k[0]


def fc_f32_kernel() -> Any:
    """The compiled loop accumulating in float32, for sums exact there (None without numba)."""
    k = _kernels()
    return None if k is None else k[1]
