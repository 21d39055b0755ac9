"""L2_NORMALIZATION over the last axis: float32, and uint8/int8 with TFLite's fixed-point path.

Quantized outputs have the fixed scale 1/128 (zero point 128 for uint8, 0 for int8); each
row's inverse norm comes from GetInvSqrtQuantizedMultiplierExp, as in LiteRT's reference.
While widening (registry.widening) the float path takes FLOAT64 and computes in it.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.common import NONE, scale_zp
from acelera.core.kernels.registry import NodeContext, is_float32, register
from acelera.core.quant import INT32_MAX, MemoTable, multiply_by_quantized_multiplier, wrap_int32

EPSILON = np.float32(1e-6)
# Up to this many rows the inverse square roots are computed one Python int at a time (each of
# the vectorized form's ~60 numpy calls costs more than a row's scalar arithmetic).
SCALAR_ROWS = 16
# Each row's multiplier is cached by its sum of squares: directly for up to this many possible
# sums, in this many shared slots above (16 bytes a slot).
MEMO_SLOTS = 1 << 16


def _c(v: int) -> np.ndarray:
    """An int64 constant as a 0-d array (ufuncs convert Python int operands at every call)."""
    return np.asarray(np.int64(v))


_HALF = _c(1 << 30)
_K31, _K6, _K3, _K1 = _c(31), _c(6), _c(3), _c(1)
_ONE_28, _HALF_THREE, _SQRT_HALF = 1 << 28, _c((1 << 28) + (1 << 27)), _c(1518500250)


def inv_sqrt_multiplier_exp(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """unary._inv_sqrt_multiplier_exp (GetInvSqrtQuantizedMultiplierExp, kReverseShift=-1) on
    int64 values >= 0 (below 2**53): the same steps with fewer, cheaper numpy calls."""
    value = np.asarray(value, np.int64)
    small = value <= 1
    v = np.maximum(value, 2)
    bits = np.frexp(v.astype(np.float64))[1].astype(np.int64)  # bit lengths (exact below 2**53)
    quarters = np.maximum((bits - 28) >> 1, 0)
    pairs = ((31 - bits + 2 * quarters) >> 1) - 1
    shift = 11 + quarters - pairs
    v >>= 2 * quarters
    v <<= 2 * pairs
    v >>= _K1
    v += _K1
    v >>= _K1  # RoundingDivideByPOT(v >> 1, 1) of a value >= 0
    half_input_q = np.left_shift(v, _K6)  # (t << 6) * half_input == t * (half_input << 6) mod 2**64
    multiply, add, rshift, lshift, subtract = np.multiply, np.add, np.right_shift, np.left_shift, np.subtract
    xf = np.full(v.shape, _ONE_28, np.int64)
    t, d = np.empty_like(xf), np.empty_like(xf)
    for _ in range(5):
        multiply(xf, xf, out=t)
        add(t, _HALF, out=t)
        rshift(t, _K31, out=t)
        multiply(t, xf, out=t)
        add(t, _HALF, out=t)
        rshift(t, _K31, out=t)
        multiply(t, half_input_q, out=t)
        add(t, _HALF, out=t)
        rshift(t, _K31, out=t)
        multiply(xf, _HALF_THREE, out=d)
        add(d, _HALF, out=d)
        rshift(d, _K31, out=d)
        subtract(d, t, out=d)
        lshift(d, _K3, out=d)
        xf, d = d, xf
    multiply(xf, _SQRT_HALF, out=xf)
    add(xf, _HALF, out=xf)
    rshift(xf, _K31, out=xf)
    left = np.minimum(shift, 0)  # a negative shift moves into the multiplier
    xf = wrap_int32(np.left_shift(xf, -left))
    shift -= left
    return np.where(small, INT32_MAX, xf), np.where(small, 0, -shift)


def inv_sqrt_multiplier_exp_scalar(value: int) -> tuple[int, int]:
    """inv_sqrt_multiplier_exp on one value >= 0 (below 2**53): the same steps on
    Python ints."""
    if value <= 1:
        return INT32_MAX, 0
    bits = value.bit_length()
    quarters = max((bits - 28) >> 1, 0)
    pairs = ((31 - bits + 2 * quarters) >> 1) - 1
    shift = 11 + quarters - pairs
    v = (value >> (2 * quarters)) << (2 * pairs)
    half_input = ((v >> 1) + 1) >> 1  # RoundingDivideByPOT(v >> 1, 1) of a value >= 0
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28
    for _ in range(5):
        t = (x * x + (1 << 30)) >> 31
        t = (t * x + (1 << 30)) >> 31
        t = ((t << 6) * half_input + (1 << 30)) >> 31
        x = (((x * half_three + (1 << 30)) >> 31) - t) << 3
    x = (x * 1518500250 + (1 << 30)) >> 31
    left = min(shift, 0)
    return wrap_int32(x << -left), left - shift


@register("L2_NORMALIZATION", max_version=2, dtypes=("FLOAT32", "UINT8", "INT8"))
def l2_normalization(node: NodeContext):
    x, y = node.inputs[0], node.outputs[0]
    if x is None:
        raise node.unsupported("input 0 is missing")
    if node.options.get("fused_activation_function", NONE) != NONE:
        raise node.unsupported("fused activations are not supported")
    if x.dtype != y.dtype or (x.dtype not in (np.dtype(np.uint8), np.dtype(np.int8)) and not is_float32(x)):
        raise node.unsupported(f"input type {x.type_name} with output {y.type_name} is not supported")
    if is_float32(x):
        dt = x.dtype
        eps = dt.type(EPSILON)

        def run(a):
            norm = np.sqrt(np.sum(a * a, axis=-1, keepdims=True, dtype=dt))
            return (a / np.maximum(norm, eps)).astype(dt)
        return run
    out_scale, out_zp = scale_zp(y)
    want_zp = 128 if y.dtype == np.uint8 else 0
    if out_scale != 1.0 / 128.0 or out_zp != want_zp:
        raise node.unsupported(f"quantized output must have scale 1/128 and zero point {want_zp}")
    in_zp = scale_zp(x)[1]
    lo, hi = (0, 255) if x.dtype == np.uint8 else (-128, 127)
    depth = x.shape[-1] if len(x.shape) else 1
    acc_bound = max(depth, 1) * max(abs(lo - in_zp), abs(hi - in_zp)) ** 2 + 1
    memo = MemoTable(_packed_inv_sqrt, acc_bound, MEMO_SLOTS)

    def run_quantized(a):
        d = a.astype(np.int64)
        d -= in_zp
        acc = np.add.reduce(d * d, axis=-1, keepdims=True)
        if memo is not None and a.shape[-1] == depth:
            packed = memo(acc)
            shift = packed & 0xFF
            shift -= 128
            mult = packed >> 8
        elif acc.size <= SCALAR_ROWS:
            pairs = [inv_sqrt_multiplier_exp_scalar(v) for v in acc.reshape(-1).tolist()]
            mult = np.array([m for m, _ in pairs], np.int64).reshape(acc.shape)
            shift = np.array([e for _, e in pairs], np.int64).reshape(acc.shape)
        else:
            mult, shift = inv_sqrt_multiplier_exp(acc)
        if a.dtype == np.uint8:
            out = multiply_by_quantized_multiplier(128 * d, mult, shift)
            out += 128
            return clip_ufunc(out, 0, 255, out=out).astype(np.uint8)
        shift += 7
        out = multiply_by_quantized_multiplier(d, mult, shift)
        return clip_ufunc(out, -128, 127, out=out).astype(np.int8)
    return run_quantized


def _packed_inv_sqrt(values: np.ndarray) -> np.ndarray:
    """inv_sqrt_multiplier_exp of int64 values as multiplier << 8 | (shift + 128)."""
    if values.size <= SCALAR_ROWS:
        pairs = [inv_sqrt_multiplier_exp_scalar(v) for v in values.tolist()]
        mult = np.array([m for m, _ in pairs], np.int64)
        shift = np.array([e for _, e in pairs], np.int64)
    else:
        mult, shift = inv_sqrt_multiplier_exp(values)
    return (mult << 8) | (shift + 128)
