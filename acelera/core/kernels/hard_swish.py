"""HARD_SWISH (tflite/kernels/activations.cc, internal/reference/hard_swish.h).

float32: x * relu6(x + 3) / 6 in float32. Quantized uint8/int8: reference_ops::HardSwish's
int16 fixed-point arithmetic (gemmlowp on int16_t), evaluated over the 256 input values.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import domain
from acelera.core.kernels.registry import Kernel, NodeContext, is_float32, register
from acelera.core.kernels.unary_common import (
    F32,
    float_kernel,
    lut_kernel,
    ndarray_kernel,
    quantized_io,
    to_table,
    unary_io,
    wrap16,
)
from acelera.core.quant import INT32_MAX, quantize_multiplier

# --- int16 fixed point (gemmlowp on int16_t) --------------------------------------------

def srdhm16(a, b) -> np.ndarray:
    """gemmlowp::SaturatingRoundingDoublingHighMul<int16_t>."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    s = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(s >= 0, s >> 15, -((-s) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, wrap16(q))


def sdhm16(a, b) -> np.ndarray:
    """reference_ops::SaturatingDoublingHighMul (truncating) on int16."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    q = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, wrap16(q))


def rdbpot16(x, exponent: int) -> np.ndarray:
    """gemmlowp::RoundingDivideByPOT<int16_t> (its mask is narrowed to int16)."""
    x = np.asarray(x, np.int64)
    mask = int(wrap16((1 << exponent) - 1))
    remainder = x & mask
    threshold = wrap16((mask >> 1) + (x < 0))
    return wrap16((x >> exponent) + (remainder > threshold))


def sat_lshift16(x, amount: int) -> np.ndarray:
    return np.clip(np.asarray(x, np.int64) * (1 << amount), -32768, 32767)


def _downscale_to_int16(m: int) -> int:
    """DownScaleInt32ToInt16Multiplier."""
    if m >= INT32_MAX - (1 << 15):
        return 32767
    return (m + (1 << 15)) >> 16


@register("HARD_SWISH", max_version=1, dtypes=("FLOAT32", "UINT8", "INT8"))
@ndarray_kernel
def hard_swish(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    x, y = unary_io(node, (np.float32, np.uint8, np.int8))
    if is_float32(x):
        ft = x.dtype.type

        def run(a):
            t = a + ft(3)
            np.clip(t, ft(0), ft(6), out=t)
            t *= a
            t /= ft(6)
            return t
        return float_kernel(run)
    in_s, in_zp, out_s, out_zp = quantized_io(node, x, y)
    with np.errstate(all="ignore"):
        hires_input_scale = F32(1.0 / 128.0) * F32(in_s)
        reluish_scale = F32(3.0) / F32(32768.0)
        out_m32, out_exp = quantize_multiplier(float(hires_input_scale / F32(out_s)))
        rel_m32, rel_exp = quantize_multiplier(float(hires_input_scale / reluish_scale))
    if out_exp > 0:
        raise node.unsupported("HARD_SWISH output multiplier exponent > 0 (output scale too small)")
    out_m16, rel_m16 = _downscale_to_int16(out_m32), _downscale_to_int16(rel_m32)

    v = wrap16(domain(x.dtype) - in_zp)
    hires = wrap16(v * 128)
    preshift_out = srdhm16(hires, out_m16)
    reluish = hires
    if rel_exp > 0:
        reluish = sat_lshift16(reluish, rel_exp - 1)
    reluish = srdhm16(reluish, rel_m16)
    if rel_exp > 0:
        reluish = sat_lshift16(reluish, 1)
    if rel_exp < 0:
        reluish = rdbpot16(reluish, -rel_exp)
    reluish = wrap16((reluish + (1 << 15)) >> 1)
    pre = sdhm16(reluish, preshift_out)
    out = wrap16(rdbpot16(pre, -out_exp) + out_zp)
    table = to_table(out, x.dtype)
    return lut_kernel(table)
