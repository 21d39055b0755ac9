"""DIV with numpy broadcasting (tflite/kernels/div.cc, internal/reference/div.h).

float32 divides in float32 (a zero divisor gives inf/NaN, clamped like every float output);
int32 truncates toward zero; quantized DIV is reference_ops::DivElementwise: the divisor's
reciprocal by gemmlowp's one_over_one_plus_x_for_x_in_0_1 (GetReciprocal), rescaled with the
x86 behaviour of RoundingDivideByPOT for out-of-range exponents. 8-bit DIV is a 256x256 table;
int16 tabulates the divisor terms over all 65536 values. An int32 divisor of zero, or a
quantized one equal to its zero point, fails the invoke, and makes the node unsupported when
constant.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.binary_common import (
    FLOATS,
    I8,
    I16,
    I32,
    QUANT8,
    U8,
    activation,
    binary_operands,
    blocked,
    clamp_int,
    clip_ufunc,
    float_clamp,
    float_dtypes,
    lut8_kernel,
    operand_qparams,
    qparams,
    rdbpot_vec,
    scalar_safe,
    srdhm,
)
from acelera.core.kernels.common import domain, quantized_activation_range
from acelera.core.kernels.registry import Kernel, NodeContext, check_divisor, register
from acelera.core.quant import INT32_MAX, INT32_MIN, quantize_multiplier, wrap_int32


def bit_length(x: np.ndarray) -> np.ndarray:
    """Number of significant bits of non-negative int64 values below 2**53."""
    return np.frexp(np.asarray(x, np.float64))[1].astype(np.int64)


def sat_shl(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent > 0> on int32 raw values."""
    threshold = (1 << (31 - exponent)) - 1
    r = wrap_int32(x << exponent)
    r = np.where(x > threshold, INT32_MAX, r)
    return np.where(x < -threshold, INT32_MIN, r)


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp one_over_one_plus_x_for_x_in_0_1 on FixedPoint<int32, 0> raw values."""
    s = a + INT32_MAX  # RoundingHalfSum(a, F0::One())
    half_den = np.where(s >= 0, s + 1, s - 1)
    half_den = np.where(half_den >= 0, half_den >> 1, -((-half_den) >> 1))
    x = wrap_int32(1515870810 + srdhm(half_den, -1010580540))
    for _ in range(3):
        hdx = srdhm(half_den, x)
        one_minus = wrap_int32((1 << 29) - hdx)
        x = wrap_int32(x + sat_shl(srdhm(x, one_minus), 2))
    return sat_shl(x, 1)


@register("DIV", max_version=2, dtypes=("FLOAT32", "INT32", "UINT8", "INT8", "INT16"))
def div(node: NodeContext) -> Kernel:
    act = activation(node)
    a, b, out = binary_operands(node, {I32, U8, I8, I16} | float_dtypes())
    dt = a.dtype
    if b.data is not None and dt not in FLOATS:
        zero = qparams(node, b, "input 2")[1] if dt != I32 else 0
        if np.any(b.data == zero):
            raise node.unsupported("division by zero (constant divisor holds zero)")

    if dt in FLOATS:
        clamp = float_clamp(act, dt)

        def run(x, y):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return clamp(np.divide(x, y))
        return run
    if dt == I32:
        def run(x, y):
            # C++ integer division truncates toward zero; a zero divisor fails the invoke (the
            # shape pass's all-zero inputs give 0).
            check_divisor(y)
            with np.errstate(divide="ignore", over="ignore"):
                q = np.floor_divide(x, y)
                q += (q * y != x) & ((x < 0) != (y < 0)) & (y != 0)
            return clamp_int(q, act)
        return scalar_safe(blocked(run, I32))

    s1, z1, s2, z2, so, zo = operand_qparams(node, a, b, out)
    lo, hi = quantized_activation_range(act, so, zo, dt)
    real = float(np.float32(s1) / np.float32(np.float32(s2) * np.float32(so)))
    m, sh = quantize_multiplier(real)

    if dt in QUANT8:
        def f(x, y):
            sgn, inv, rs = divisor_terms(y - z2)
            return div_core((x - z1) * sgn, inv, rs, m, sh, zo, lo, hi)
        table = lut8_kernel(dt, f)

        def run8(x, y):
            check_divisor(y, z2, "division by zero (divisor equal to its zero point)")
            return table(x, y)
        return run8

    # int16: the divisor-dependent terms are tabulated over all 65536 divisor values.
    t_sgn, t_inv, t_rs = divisor_terms(domain(I16) - z2)

    def run16(x, y):
        check_divisor(y, z2, "division by zero (divisor equal to its zero point)")
        idx = y.view(np.uint16).astype(np.intp)
        x1 = np.multiply(x.astype(np.int64), t_sgn.take(idx))
        return div_core(x1, t_inv.take(idx), t_rs.take(idx), m, sh, zo, lo, hi).astype(I16)
    return scalar_safe(blocked(run16, I16))


def divisor_terms(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sign, GetReciprocal(|x2|, 31) multiplier, its shift) of offset divisor values."""
    x2 = np.asarray(x2, np.int64)
    sgn = np.where(x2 < 0, -1, 1)
    x2 = np.abs(x2)
    x2 = np.where(x2 == 0, 1, x2)  # LiteRT rejects divisors equal to the zero point
    clz = 32 - bit_length(x2)
    inv = one_over_one_plus_x_for_x_in_0_1((x2 << clz) - (1 << 31))
    return sgn, inv, 31 - clz


def div_core(x1, inv, recip_shift, m: int, sh: int, zo: int, lo: int, hi: int) -> np.ndarray:
    """reference_ops::DivElementwise after the divisor's sign moved onto x1 (int64 arrays)."""
    x1 = np.asarray(x1, np.int64)
    headroom = bit_length(x1 ^ (x1 >> 63))  # CountLeadingSignBits = 31 - this
    np.subtract(31, headroom, out=headroom)
    r = srdhm(x1 << headroom, inv, saturate=False)  # inv > 0: MBQMGreaterThanOne
    exponent = headroom + recip_shift
    exponent -= sh
    r *= m
    r += 1 << 30
    r >>= 31
    r = rdbpot_x86(r, exponent)
    r += zo
    return clip_ufunc(r, lo, hi, out=r)


def rdbpot_x86(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT as compiled for x86, also for exponents outside [0, 31].

    There the mask (1ll << e) - 1 is truncated to int32 and the int32 shift uses e mod 32 (SAR);
    such elements (e.g. a zero dividend, whose headroom is 31) are patched separately.
    """
    e = np.asarray(exponent, np.int64)
    x, e = np.broadcast_arrays(x, e)
    ec = clip_ufunc(e, 0, 31)
    r = rdbpot_vec(x, ec)
    odd = np.nonzero(ec != e)
    if odd[0].size:
        xo, eo = x[odd], e[odd]
        mask = wrap_int32((np.int64(1) << (eo & 63)) - 1)  # 64-bit SHL masks its count too
        threshold = (mask >> 1) + (xo < 0)
        r[odd] = (xo >> (eo & 31)) + ((xo & mask) > threshold)
    return r
