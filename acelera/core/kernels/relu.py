"""The rectifier family: RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, LEAKY_RELU, PRELU, ELU
(tflite/kernels/activations.cc, kReference paths; internal/reference/prelu.h).

float32 computes in float32 (float64 while widening); quantized RELU*, LEAKY_RELU and ELU are
tables over the input domain built with LiteRT's integer arithmetic (ELU: LUTPopulate with
expm1f); PRELU tabulates 8-bit (alpha, input) pairs, and int16 inputs per value of a constant
alpha holding at most 64 distinct values.
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import domain
from acelera.core.kernels.registry import Kernel, NodeContext, is_float32, register
from acelera.core.kernels.unary_common import (
    F32,
    check_same_type,
    cvt_f2i32,
    float_kernel,
    legacy_qparams,
    libm,
    lut8,
    lut_kernel,
    ndarray_kernel,
    quantized_io,
    require_per_tensor,
    to_table,
    unary_io,
)
from acelera.core.quant import multiply_by_quantized_multiplier, quantize_multiplier, round_half_away, wrap_int32


def _relu_like(node: NodeContext, lo: float, hi: float, allowed: tuple) -> Kernel:
    x, y = unary_io(node, allowed)
    if is_float32(x):
        ft = x.dtype.type
        if hi == math.inf:
            return lambda a: np.maximum(a, ft(lo))
        return lambda a: np.clip(a, ft(lo), ft(hi))
    in_s, in_zp, out_s, out_zp = quantized_io(node, x, y)
    if x.dtype == np.int16 and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("int16 RELU needs zero points of 0")
    info = np.iinfo(x.dtype)
    with np.errstate(all="ignore"):
        mult, shift = quantize_multiplier(float(F32(in_s) / F32(out_s)))
        qmin = max(int(info.min), out_zp + int(cvt_f2i32(round_half_away(np.asarray(F32(lo) / F32(out_s))))))
        qmax = int(info.max) if hi == math.inf else min(
            int(info.max), out_zp + int(cvt_f2i32(round_half_away(np.asarray(F32(hi) / F32(out_s))))))
    v = domain(x.dtype)
    out = out_zp + multiply_by_quantized_multiplier(v - in_zp, mult, shift)
    table = np.minimum(np.maximum(out, qmin), qmax).astype(x.dtype)
    return lut_kernel(table)


@register("RELU", max_version=3, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def relu(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    return _relu_like(node, 0.0, math.inf, (np.float32, np.uint8, np.int8, np.int16))


@register("RELU6", max_version=3, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def relu6(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    return _relu_like(node, 0.0, 6.0, (np.float32, np.uint8, np.int8, np.int16))


@register("RELU_N1_TO_1", max_version=1, dtypes=("FLOAT32", "UINT8", "INT8"))
@ndarray_kernel
def relu_n1_to_1(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    return _relu_like(node, -1.0, 1.0, (np.float32, np.uint8, np.int8))


@register("RELU_0_TO_1", max_version=1, dtypes=("FLOAT32", "UINT8", "INT8"))
@ndarray_kernel
def relu_0_to_1(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    return _relu_like(node, 0.0, 1.0, (np.float32, np.uint8, np.int8))


# --- LEAKY_RELU ------------------------------------------------------------------------

def _leaky_multiplier(m) -> tuple[int, int]:
    """QuantizeMultiplier as LeakyReluPrepare gets it: an infinite or NaN multiplier (alpha +-inf
    or NaN) goes through frexp and an int64 cast to a multiplier of 0 in LiteRT's build."""
    if not np.isfinite(m):
        return 0, 0
    return quantize_multiplier(float(m))


@register("LEAKY_RELU", max_version=2, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def leaky_relu(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    x, y = unary_io(node, (np.float32, np.uint8, np.int8, np.int16))
    alpha = F32(node.options.get("alpha", 0.0))
    if is_float32(x):
        # `x > 0 ? x : x * alpha`, branch-free: for 0 <= alpha <= 1 it is max(x, alpha x),
        # for alpha > 1 min(x, alpha x); otherwise split into the two signed parts.
        if not np.isfinite(alpha):
            return float_kernel(lambda a: np.where(a > 0, a, a * alpha))
        if 0 <= alpha <= 1:
            return float_kernel(lambda a: np.maximum(a, a * alpha))
        if alpha > 1:
            return float_kernel(lambda a: np.minimum(a, a * alpha))
        return float_kernel(lambda a: _prelu_float(a, alpha))
    in_s, in_zp, out_s, out_zp = quantized_io(node, x, y)
    if x.dtype == np.int16 and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("int16 LEAKY_RELU needs zero points of 0")
    with np.errstate(all="ignore"):
        m_alpha, s_alpha = _leaky_multiplier(F32(in_s) * alpha / F32(out_s))
        m_id, s_id = _leaky_multiplier(F32(in_s) / F32(out_s))
    v = domain(x.dtype) - in_zp
    pos = multiply_by_quantized_multiplier(v, m_id, s_id)
    neg = multiply_by_quantized_multiplier(v, abs(m_alpha), s_alpha)
    neg = -neg if m_alpha < 0 else neg
    table = to_table(out_zp + np.where(v >= 0, pos, neg), x.dtype)
    return lut_kernel(table)


# --- PRELU ---------------------------------------------------------------------------

def _prelu_float(a: np.ndarray, alpha) -> np.ndarray:
    """x >= 0 ? x : x * alpha as min(x, 0) * alpha + max(x, 0) (exact; no masked select)."""
    zero = a.dtype.type(0)
    out = np.minimum(a, zero)
    out *= alpha
    out += np.maximum(a, zero)
    return out


@register("PRELU", max_version=1, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def prelu(node: NodeContext) -> Kernel:
    check_arity(node, 2, 1)
    x, alpha_t, y = node.input(0), node.input(1), node.outputs[0]
    if x is None or alpha_t is None:
        raise node.unsupported("PRELU needs an input and an alpha tensor")
    if not is_float32(x) and x.type_name not in ("UINT8", "INT8", "INT16"):
        raise node.unsupported(f"PRELU does not take {x.type_name}")
    check_same_type(node, x, y)
    try:
        fits = np.broadcast_shapes(x.shape, alpha_t.shape) == tuple(x.shape)
    except ValueError:
        fits = False
    if not fits:
        raise node.unsupported(f"alpha shape {list(alpha_t.shape)} does not broadcast to input shape "
                               f"{list(x.shape)}")
    const_alpha = node.const(1)
    if is_float32(x):
        if alpha_t.dtype != x.dtype:
            raise node.unsupported(f"alpha type {alpha_t.type_name} with {x.type_name.lower()} input")

        def run_f(a, al):
            with np.errstate(all="ignore"):
                return _prelu_float(a, al)
        return run_f
    if x.dtype == np.int16:
        want_alpha = np.dtype(np.int8)
    elif x.dtype in (np.int8, np.uint8):
        want_alpha = x.dtype
    else:
        raise node.unsupported(f"input type {x.type_name} is not supported")
    if alpha_t.dtype != want_alpha:
        raise node.unsupported(f"alpha type {alpha_t.type_name} with {x.type_name} input")
    require_per_tensor(node, x, y)
    in_s, in_zp = legacy_qparams(x)
    a_s, a_zp = legacy_qparams(alpha_t)
    out_s, out_zp = legacy_qparams(y)
    with np.errstate(all="ignore"):
        m1, s1 = quantize_multiplier(float(F32(in_s) / F32(out_s)))
        m2, s2 = quantize_multiplier(float(F32(in_s) * F32(a_s) / F32(out_s)))
    info = np.iinfo(x.dtype)

    def compute(v, av):
        """v = input - zp, av = alpha - alpha_zp (broadcastable int64)."""
        pos = multiply_by_quantized_multiplier(v, m1, s1)
        neg = multiply_by_quantized_multiplier(wrap_int32(v * av), m2, s2)
        return np.clip(np.where(v >= 0, pos, neg) + out_zp, info.min, info.max).astype(x.dtype)

    if x.dtype.itemsize == 1:
        # 2-D table over (alpha, input) bit patterns: run() is one gather.
        dv = domain(x.dtype)
        table = compute(dv[None, :] - in_zp, dv[:, None] - a_zp).reshape(-1)

        def offsets(al):
            return al.view(np.uint8).astype(np.intp) << 8

        if const_alpha is not None:
            alpha_off = offsets(np.asarray(const_alpha, x.dtype))

            def run_q8c(a, al):
                return np.take(table, alpha_off + a.view(np.uint8))
            return run_q8c

        def run_q8(a, al):
            return np.take(table, offsets(al) + a.view(np.uint8))
        return run_q8

    if const_alpha is not None:
        # Few distinct alphas (one per channel): one 65536-entry table per alpha value.
        values, inverse = np.unique(np.asarray(const_alpha, np.int64), return_inverse=True)
        if values.size <= 64:
            dv = domain(np.int16)
            table16 = compute(dv[None, :] - in_zp, values[:, None] - a_zp).reshape(-1)
            slot = (inverse.reshape(const_alpha.shape).astype(np.intp) << 16)

            def run_q16c(a, al):
                return np.take(table16, slot + a.view(np.uint16))
            return run_q16c

    def run_q16(a, al):
        return compute(a.astype(np.int64) - in_zp, al.astype(np.int64) - a_zp)
    return run_q16


# --- ELU -----------------------------------------------------------------------------

def _elu_transform(v):
    return np.where(v < 0, libm("expm1")(v), v)


@register("ELU", max_version=1, dtypes=("FLOAT32", "INT8"))
@ndarray_kernel
def elu(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    x, y = unary_io(node, (np.float32, np.int8))
    if is_float32(x):
        def run(a):
            return np.where(a < 0, np.expm1(a), a)
        return float_kernel(run)
    table = lut8(*quantized_io(node, x, y), np.int8, _elu_transform)
    return lut_kernel(table)
