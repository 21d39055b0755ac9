"""int8 SOFTMAX of xnnpack-cpu (int8 output, as its op table takes it): the reference kernel's
arithmetic (acelera/core/kernels/softmax.py `_softmax_q8`, after LiteRT's reference
SoftmaxInt8LUT / optimized_ops::Softmax on gemmlowp fixed point) in one numba pass per row:
the exp tables of every difference from the row maximum (Q12 for the sum, Q0.31 for the
numerator) are the reference's, built at prepare; per row the sum, its reciprocal
(GetReciprocal, on int32 values held in int64), then each output
RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(scale, exp), exponent) + the output
type's minimum, clamped. Bit-exact with the reference."""
from __future__ import annotations

import numpy as np
from numba import njit

from acelera.core.errors import AceleraError
from acelera.core.kernels.registry import NodeContext, lookup
from acelera.core.kernels.softmax import exp_on_negative_values, rescale, rescaled_diffs, softmax_scaling
from acelera.core.kernels.unary_common import legacy_qparams
from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.int8_conv import QuantSpec

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


@njit(cache=True, nogil=True, boundscheck=False)
def _wrap32(v):
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


@njit(cache=True, nogil=True, boundscheck=False)
def _srdhm(a, b):
    if a == b and a == _I32_MIN:
        return np.int64(_I32_MAX)
    ab = a * b
    ab += (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return ab >> 31 if ab >= 0 else -((-ab) >> 31)


@njit(cache=True, nogil=True, boundscheck=False)
def _sat_lshift(x, e):
    thr = (np.int64(1) << (31 - e)) - 1
    if x > thr:
        return np.int64(_I32_MAX)
    if x < -thr:
        return np.int64(_I32_MIN)
    return x << e


@njit(cache=True, nogil=True, boundscheck=False)
def _reciprocal(x):
    """GetReciprocal of int32 x as FixedPoint<int32, 12>: (Q0.31 scale, num_bits_over_unit)."""
    u = x & 0xFFFFFFFF
    bits = 0
    while bits < 32 and (u >> bits) != 0:
        bits += 1
    hpo = 32 - bits
    a = _wrap32((u << hpo) - (1 << 31))
    s = a + _I32_MAX
    t = s + (1 if s >= 0 else -1)
    half = t // 2 if t >= 0 else -((-t) // 2)
    v = _wrap32(1515870810 + _srdhm(half, np.int64(-1010580540)))
    for _ in range(3):
        one_minus = _wrap32((1 << 29) - _srdhm(half, v))
        v = _wrap32(v + _sat_lshift(_srdhm(v, one_minus), 2))
    return _sat_lshift(v, 1), 12 - hpo


@njit(cache=True, nogil=True, boundscheck=False)
def softmax_q8(x, out, q12, q0, exp_shift, lo, hi):
    """x (rows, n) int8/uint8, out (rows, n) of the output type (8 or 16 bits: exp_shift is 31
    minus its width); q12, q0: int64 exp tables indexed by difference + 255."""
    rows, n = x.shape
    for r in range(rows):
        if n == 0:
            break
        xr = x[r]
        orow = out[r]
        mx = np.int64(xr[0])
        for j in range(n):
            mx = max(mx, np.int64(xr[j]))
        base = 255 - mx
        s = np.int64(0)
        for j in range(n):
            s += q12[np.int64(xr[j]) + base]
        scale, over = _reciprocal(_wrap32(s))
        e = min(max(over + exp_shift, 0), 31)
        half = (np.int64(1) << e) >> 1
        for j in range(n):
            p = _srdhm(scale, q0[np.int64(xr[j]) + base])
            v = (p if e == 0 else (p + half - (1 if p < 0 else 0)) >> e) + lo
            orow[j] = min(max(v, lo), hi)


def softmax_spec(label: str, nodes, ctx: NodeContext) -> QuantSpec | str:
    """The native step of an int8 SOFTMAX, or why there is none. The reference
    kernel is prepared first: what it refuses, this refuses with the same error."""
    lookup(ctx.op).prepare(ctx)
    if not jit.AVAILABLE:
        return f"numba kernels are off ({jit.REASON})"
    x_t, y_t = ctx.input(0), ctx.outputs[0]
    if x_t is None or len(x_t.shape) < 1:
        return "SOFTMAX without an input"
    if (x_t.type_name, y_t.type_name) != ("INT8", "INT8"):  # what xnnpack-cpu's op table takes
        return f"SOFTMAX {x_t.type_name} -> {y_t.type_name}"
    if tuple(x_t.shape) != tuple(y_t.shape):
        return "SOFTMAX with output shape != input shape"
    try:
        in_s, _ = legacy_qparams(x_t)
        beta = float(np.float32(ctx.options.get("beta", 1.0)))
        mult, left_shift, diff_min = softmax_scaling(ctx, beta, in_s)
    except AceleraError as e:
        return f"quantization: {e}"
    out_dtype = np.dtype(np.int8)
    valid = np.arange(-255, 1) >= diff_min
    exp_q0 = np.where(valid, exp_on_negative_values(rescaled_diffs(mult, left_shift), 5), 0).astype(np.int64)
    exp_q12 = np.where(valid, rescale(exp_q0, 0, 12), 0).astype(np.int64)
    info = np.iinfo(out_dtype)
    lo, hi = int(info.min), int(info.max)
    exp_shift = 31 - 8 * out_dtype.itemsize
    shape = tuple(int(d) for d in x_t.shape)
    cols = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    x_tid, out_tid = ctx.op.inputs[0], ctx.op.outputs[0]

    def build(a, _s, _p, _k):
        return jit.bind(softmax_q8, a[x_tid].reshape(rows, cols), a[out_tid].reshape(rows, cols), exp_q12, exp_q0,
                        exp_shift, lo, hi)
    return QuantSpec(label, nodes, (x_tid,), (out_tid,), build, float_io=False, op="SOFTMAX")
