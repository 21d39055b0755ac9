"""MUL with numpy broadcasting (tflite/kernels/mul.cc, internal/reference/mul.h).

float16 MUL (v8) computes in numpy's float16 (each result rounded to half, as LiteRT's `half`)
and clamps to +-65504; COMPLEX64 MUL (v6) rounds each product as libgcc's __mulsc3 does;
int16 x int16 -> int8/uint8 is the LSTM helper path. Quantized 8-bit MUL is a 256x256 table,
int16 the same fixed-point formula over int64 blocks (binary_common.py).
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import ModelError
from acelera.core.kernels.binary_common import (
    C64,
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    QUANT8,
    U8,
    U32,
    activation,
    binary_operands,
    blocked,
    clip_ufunc,
    float_binary,
    float_dtypes,
    int_binary,
    is_quantized,
    lut8_kernel,
    operand_qparams,
    qparams,
    rdbpot_inplace,
    scalar_safe,
)
from acelera.core.kernels.common import quantized_activation_range
from acelera.core.kernels.registry import Kernel, NodeContext, register
from acelera.core.model import Tensor
from acelera.core.quant import multiply_by_quantized_multiplier_scalar as mbqm
from acelera.core.quant import multiply_by_quantized_multiplier_scalar_inplace as mbqm_inplace
from acelera.core.quant import quantize_multiplier, wrap_int32


@register("MUL", max_version=8, dtypes=("FLOAT32", "FLOAT16", "INT32", "INT64", "INT16", "UINT32", "UINT8", "INT8",
                                       "COMPLEX64"))
def mul(node: NodeContext) -> Kernel:
    act = activation(node)
    a, b = node.input(0), node.input(1)
    if a is None or b is None:
        raise ModelError("MUL: expects 2 inputs")
    out = node.outputs[0]
    if a.dtype == I16 and out.dtype in QUANT8:
        return _mul_int16_to_8(node, a, b, act)
    a, b, out = binary_operands(node, {F16, I32, I64, I16, U32, U8, I8, C64} | float_dtypes())
    dt = a.dtype
    if dt == C64:
        if act:
            raise node.unsupported("a fused activation is not allowed for COMPLEX64 inputs")
        return _complex_mul

    if dt in (F32, F64, F16):
        return float_binary(np.multiply, act, dt)
    if dt in (I32, I64, U32) or (dt == I16 and not is_quantized(out)):
        return int_binary(np.multiply, act)

    s1, z1, s2, z2, so, zo = operand_qparams(node, a, b, out)
    lo, hi = quantized_activation_range(act, so, zo, dt)
    # Prepare computes the product in float: input1_scale * input2_scale / output_scale.
    real = float(np.float32(np.float32(s1) * np.float32(s2)) / np.float32(so))
    m, sh = quantize_multiplier(real)

    def f(x, y):
        r = mbqm(wrap_int32((x - z1) * (y - z2)), m, sh)
        r += zo
        return clip_ufunc(r, lo, hi, out=r)

    if dt in QUANT8:
        return lut8_kernel(dt, f)
    if z1 or z2 or zo:
        raise node.unsupported("quantized INT16 MUL requires zero points of 0")

    def run16(x, y):
        r = np.multiply(x.astype(np.int64), y)
        mbqm_inplace(r, m, sh)
        clip_ufunc(r, lo, hi, out=r)
        return r.astype(I16)
    return scalar_safe(blocked(run16, I16))


def _complex_mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """std::complex<float> products as LiteRT computes them (libgcc's __mulsc3): each float32
    product rounded before the sum (numpy's complex multiply fuses one of them), and a NaN + NaN i
    result involving an infinity recomputed as C99 Annex G says."""
    x, y = np.broadcast_arrays(x, y)
    out = np.empty(x.shape, C64)
    with np.errstate(all="ignore"):
        a, b, c, d = x.real, x.imag, y.real, y.imag
        ac, bd, ad, bc = a * c, b * d, a * d, b * c
        out.real = ac - bd
        out.imag = ad + bc
        redo = np.isnan(out.real) & np.isnan(out.imag)
        if redo.any():
            out[redo] = _annex_g(a[redo], b[redo], c[redo], d[redo],
                                 ac[redo], bd[redo], ad[redo], bc[redo])
    return out


def _annex_g(a, b, c, d, ac, bd, ad, bc) -> np.ndarray:
    def box(v, inf):  # copysign(isinf(v) ? 1 : 0, v) where `inf`
        return np.where(inf, np.copysign(np.isinf(v).astype(np.float32), v), v)

    def zero_nan(v, where):
        return np.where(where & np.isnan(v), np.copysign(np.float32(0), v), v)

    inf_x = np.isinf(a) | np.isinf(b)
    inf_y = np.isinf(c) | np.isinf(d)
    a, b = box(a, inf_x), box(b, inf_x)
    c, d = zero_nan(c, inf_x), zero_nan(d, inf_x)
    c, d = box(c, inf_y), box(d, inf_y)
    a, b = zero_nan(a, inf_y), zero_nan(b, inf_y)
    overflow = ~(inf_x | inf_y) & (np.isinf(ac) | np.isinf(bd) | np.isinf(ad) | np.isinf(bc))
    a, b, c, d = (zero_nan(v, overflow) for v in (a, b, c, d))
    recalc = inf_x | inf_y | overflow
    inf = np.float32(np.inf)
    re = np.where(recalc, inf * (a * c - b * d), np.float32(np.nan))
    im = np.where(recalc, inf * (a * d + b * c), np.float32(np.nan))
    return _pack(re, im)


def _pack(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    out = np.empty(re.shape, C64)
    out.real, out.imag = re, im
    return out


def _mul_int16_to_8(node: NodeContext, a: Tensor, b: Tensor, act: int) -> Kernel:
    """int16 x int16 -> int8/uint8 (LSTM helper path): F0 product, rounded >> 8, offset."""
    out = node.outputs[0]
    if b.dtype != I16:
        raise node.unsupported(f"input types {a.type_name} and {b.type_name} differ")
    if a.shape != b.shape:
        raise node.unsupported("broadcasting INT16 inputs to a quantized 8-bit output")
    so, zo = qparams(node, out, "output")
    lo, hi = quantized_activation_range(act, so, zo, out.dtype)

    def run(x, y):
        r = x.astype(np.int64)
        r *= y
        r += 1 << 14
        r >>= 15  # gemmlowp int16 SaturatingRoundingDoublingHighMul; only
        np.minimum(r, 32767, out=r)  # (-32768)^2 gives 32768, which saturates
        rdbpot_inplace(r, 8)
        clip_ufunc(r, lo - zo, hi - zo, out=r)
        r += zo
        return r.astype(out.dtype)
    return scalar_safe(blocked(run, out.dtype))
