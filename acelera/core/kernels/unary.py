"""Elementwise unary math: EXP, LOG, SQRT, RSQRT, ABS, NEG, SQUARE, FLOOR, CEIL, SIN, COS.

float32 is computed in float32 numpy; float16 SIN and COS (v2) are a table over every half
value of the float32 libm result rounded to half, as elementwise.cc computes them. float16 and
bfloat16 FLOOR (floor.cc) and ROUND (round.cc's RoundToNearest, halves to even, in float32) are
such tables too; their NEG (neg.cc, which negates bfloat16 through Eigen::half) flips the sign
bit. Quantized variants follow LiteRT (exp.cc, elementwise.cc, neg.cc) bit-exactly; as
elementwise functions of one 8/16-bit integer they become one table lookup, the table built in
prepare from LiteRT's own arithmetic:

* EXP int8/int16, LOG int8/int16, RSQRT int16: LUTPopulate tables (the int16 ones are
  LiteRT's 513-entry interpolated tables, expanded over all 65536 inputs).
* SQRT int8/int16: dequantize, sqrtf, truncate (LiteRT truncates, it does not round).
* RSQRT int8: GetInvSqrtQuantizedMultiplierExp fixed point.
* ABS int8/int16: |x - zp| requantized; int16 without quantization and int32 are plain abs.
* NEG: plain two's complement negation for every integer type (LiteRT ignores quantization).

LiteRT fails at invoke on negative SQRT/RSQRT inputs; acelera does not check (the executor's
shape pass feeds zeros, which would then fail a model whose zero point is positive) and
returns what LiteRT's arithmetic gives for them.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from acelera.core.fpstate import fp_errors_ignored
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import domain, lut_apply
from acelera.core.kernels.float_formats import table16
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.kernels.softmax import rdbpot, srdhm_unsaturated
from acelera.core.kernels.unary_common import (
    F32,
    INT32_MAX,
    cvt_f2i32,
    half_table,
    legacy_qparams,
    libm,
    lut8,
    lut16,
    lut16_expand,
    ndarray_kernel,
    require_per_tensor,
    to_table,
    unary_io,
)
from acelera.core.quant import multiply_by_quantized_multiplier, quantize_multiplier, wrap_int32, wrap_int32_inplace


def _one_input(prepare):
    """elementwise.cc / floor.cc / neg.cc / round.cc Prepare: exactly one input and one output
    (the kernels below are numpy functions of one array, which would take a second input as
    their `out=` buffer)."""
    @functools.wraps(prepare)
    def checked(node: NodeContext):
        check_arity(node, 1, 1)
        return prepare(node)
    return checked


def _float_op(fn):
    def run(a):
        if fp_errors_ignored():
            return fn(a)
        with np.errstate(all="ignore"):
            return fn(a)
    return run


def _qparams(node: NodeContext, x, y) -> tuple[float, int, float, int]:
    """elementwise.cc GenericPrepare of a quantized op: per-tensor parameters, zero points of 0
    for int16. Returns (input scale, input zero point, output scale, output zero point)."""
    require_per_tensor(node, x, y)
    in_s, in_zp = legacy_qparams(x)
    out_s, out_zp = legacy_qparams(y)
    if x.dtype == np.int16 and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("int16 input and output need zero points of 0")
    return in_s, in_zp, out_s, out_zp


# --- EXP -------------------------------------------------------------------------------

@register("EXP", max_version=2, dtypes=("FLOAT32", "INT8", "INT16"))
@_one_input
@ndarray_kernel
def exp(node: NodeContext):
    x, y = unary_io(node, (np.float32, np.int8, np.int16))
    if x.dtype == np.float32:
        return _float_op(np.exp)
    qp = _qparams(node, x, y)
    if x.dtype == np.int16:
        table = lut16_expand(lut16(*qp, libm("exp")))
    else:
        table = lut8(*qp, np.int8, libm("exp"))
    return lambda a: lut_apply(a, table)


# --- LOG -------------------------------------------------------------------------------

@register("LOG", max_version=2, dtypes=("FLOAT32", "INT8", "INT16"))
@_one_input
@ndarray_kernel
def log(node: NodeContext):
    x, y = unary_io(node, (np.float32, np.int8, np.int16))
    if x.dtype == np.float32:
        return _float_op(np.log)
    in_s, in_zp, out_s, out_zp = _qparams(node, x, y)
    qmin = int(np.iinfo(x.dtype).min)
    output_min = F32(qmin - out_zp) * F32(out_s)
    logf = libm("log")

    def transform(v):
        v = np.asarray(v, F32)
        return np.where(v <= 0, output_min, logf(np.where(v <= 0, F32(1), v)))

    if x.dtype == np.int16:
        table = lut16_expand(lut16(in_s, in_zp, out_s, out_zp, transform))
    else:
        table = lut8(in_s, in_zp, out_s, out_zp, np.int8, transform)
    return lambda a: lut_apply(a, table)


# --- SQRT / RSQRT ----------------------------------------------------------------------

@register("SQRT", max_version=2, dtypes=("FLOAT32", "INT8", "INT16"))
@_one_input
@ndarray_kernel
def sqrt(node: NodeContext):
    x, y = unary_io(node, (np.float32, np.int8, np.int16))
    if x.dtype == np.float32:
        return _float_op(np.sqrt)
    in_s, in_zp, out_s, out_zp = _qparams(node, x, y)
    with np.errstate(all="ignore"):
        deq = F32(in_s) * (domain(x.dtype) - in_zp).astype(F32)
        q = wrap_int32(cvt_f2i32(np.sqrt(deq) / F32(out_s)) + out_zp)
    table = to_table(q, x.dtype)
    return lambda a: lut_apply(a, table)


def _inv_sqrt_multiplier_exp(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetInvSqrtQuantizedMultiplierExp(value, kReverseShift=-1) for int32 values >= 0.

    The C++ divides the input by 4 while it is >= 2**29 and then shifts it left by bit pairs
    into [2**27, 2**29); both counts follow from its leading zeros, so every value is
    normalized at once. The Newton iteration then runs on int32 values held in int64."""
    value = np.asarray(value, np.int64)
    small = value <= 1
    v = np.maximum(value, 2)
    bits = np.frexp(v.astype(np.float64))[1].astype(np.int64)  # bit lengths (exact below 2**53)
    quarters = np.maximum((bits - 28) >> 1, 0)  # the C++ loop's divisions by 4
    pairs = ((31 - bits + 2 * quarters) >> 1) - 1  # left_shift_bit_pairs, from the leading zeros
    shift = 11 + quarters - pairs
    v >>= 2 * quarters
    v <<= 2 * pairs
    half_input = rdbpot(v >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    # Newton's iteration from 1 for an input in [0.5, 2) keeps x in (0.5, 1.5), so no step
    # saturates or wraps: each SaturatingRoundingDoublingHighMul is floor((a*b + 2**30) / 2**31)
    # and each Rescale<3> a plain shift.
    xf = np.full(v.shape, 1 << 28, np.int64)
    t, d = np.empty_like(xf), np.empty_like(xf)
    for _ in range(5):
        np.multiply(xf, xf, out=t)
        t += 1 << 30
        t >>= 31
        t *= xf
        t += 1 << 30
        t >>= 31
        t <<= 6  # x**3, Rescale<3> of a Q9 product
        t *= half_input
        t += 1 << 30
        t >>= 31
        np.multiply(xf, half_three, out=d)
        d += 1 << 30
        d >>= 31
        d -= t
        d <<= 3  # Rescale<3> of a Q6 difference
        xf, d = d, xf
    xf = srdhm_unsaturated(xf, 1518500250)
    left = np.minimum(shift, 0)  # a negative shift moves into the multiplier
    xf = wrap_int32_inplace(np.left_shift(xf, -left))
    shift -= left
    return np.where(small, INT32_MAX, xf), np.where(small, 0, -shift)


@register("RSQRT", max_version=3, dtypes=("FLOAT32", "INT8", "INT16"))
@_one_input
@ndarray_kernel
def rsqrt(node: NodeContext):
    x, y = unary_io(node, (np.float32, np.int8, np.int16))
    if x.dtype == np.float32:
        return _float_op(lambda a: F32(1) / np.sqrt(a))
    in_s, in_zp, out_s, out_zp = _qparams(node, x, y)
    if x.dtype == np.int16:
        limit = F32(32767) * F32(out_s)
        sqrtf = libm("sqrt")

        def transform(v):
            v = np.asarray(v, F32)
            return np.where(v <= 0, limit, F32(1) / sqrtf(np.where(v <= 0, F32(1), v)))
        table = lut16_expand(lut16(in_s, in_zp, out_s, out_zp, transform))
        return lambda a: lut_apply(a, table)
    with np.errstate(all="ignore"):
        real = 1.0 / float(F32(np.sqrt(F32(in_s))) * F32(out_s))
    mult, shift = quantize_multiplier(real)
    k_shift = 20
    value = domain(np.int8) - in_zp
    inv_mult, inv_shift = _inv_sqrt_multiplier_exp(value)
    data = multiply_by_quantized_multiplier(1, inv_mult, inv_shift + k_shift)
    out = multiply_by_quantized_multiplier(data, mult, shift - k_shift) + out_zp
    table = np.where(value == 0, 127, np.clip(out, -128, 127)).astype(np.int8)
    return lambda a: lut_apply(a, table)


# --- ABS / NEG / SQUARE ----------------------------------------------------------------

@register("ABS", max_version=5, dtypes=("FLOAT32", "INT8", "INT16", "INT32"))
@_one_input
@ndarray_kernel
def abs_(node: NodeContext):
    x, y = unary_io(node, (np.float32, np.int8, np.int16, np.int32))
    if x.dtype in (np.float32, np.int32):
        return np.abs
    if x.dtype == np.int16 and not x.quantization.is_set:
        return np.abs  # int16 abs(-32768) wraps to -32768, like LiteRT's static_cast
    in_s, in_zp, out_s, out_zp = _qparams(node, x, y)
    value = np.abs(domain(x.dtype) - in_zp)
    if F32(in_s) != F32(out_s):
        with np.errstate(all="ignore"):
            mult, shift = quantize_multiplier(float(F32(in_s) / F32(out_s)))
        value = multiply_by_quantized_multiplier(value, mult, shift)
    table = to_table(value + out_zp, x.dtype)
    return lambda a: lut_apply(a, table)


def _half_io(node: NodeContext):
    """(input, output) when the op's input is FLOAT16 or BFLOAT16, else None."""
    x, y = node.inputs[0], node.outputs[0]
    if x is None or x.type_name not in ("FLOAT16", "BFLOAT16"):
        return None
    if x.type != y.type:
        raise node.unsupported(f"input type {x.type_name} and output type {y.type_name} differ")
    return x, y


@functools.cache
def _half_unary_table(op: str, type_name: str) -> np.ndarray:
    fns: dict[str, Callable[[np.ndarray], np.ndarray]] = {"FLOOR": np.floor, "ROUND": _round_to_nearest}
    return table16(fns[op], type_name)


def _half_unary(node: NodeContext, op: str):
    x = node.inputs[0]
    assert x is not None  # check_arity (_one_input) refused a missing input
    table = _half_unary_table(op, x.type_name)
    return lambda a: lut_apply(a, table)


@register("NEG", max_version=1, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "INT8", "INT16", "INT32", "INT64"))
@_one_input
@ndarray_kernel
def neg(node: NodeContext):
    if _half_io(node) is not None:
        def run_half(a):
            bits = np.bitwise_xor(a.view(np.uint16), np.uint16(0x8000))
            return np.asarray(bits).view(a.dtype)
        return run_half
    unary_io(node, (np.float32, np.int8, np.int16, np.int32, np.int64))
    return np.negative


@register("SQUARE", max_version=1, dtypes=("FLOAT32",))
@_one_input
@ndarray_kernel
def square(node: NodeContext):
    unary_io(node, (np.float32,))
    return _float_op(np.square)


# --- FLOOR / CEIL / SIN / COS ----------------------------------------------------------

@register("FLOOR", max_version=1, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16"))
@_one_input
@ndarray_kernel
def floor(node: NodeContext):
    if _half_io(node) is not None:
        return _half_unary(node, "FLOOR")
    unary_io(node, (np.float32,))
    return np.floor


@register("CEIL", max_version=1, dtypes=("FLOAT32",))
@_one_input
@ndarray_kernel
def ceil(node: NodeContext):
    unary_io(node, (np.float32,))
    return np.ceil


@functools.cache
def _half_trig_table(name: str) -> np.ndarray:
    return half_table(libm(name))


def _trig(node: NodeContext, name: str, fn):
    """SIN / COS: float32, and float16 as half(sinf(float(h))) (v2)."""
    x, _ = unary_io(node, (np.float32, np.float16))
    if x.dtype == np.float16:
        table = _half_trig_table(name)
        return lambda a: lut_apply(a, table)
    return _float_op(fn)


@register("SIN", max_version=2, dtypes=("FLOAT32", "FLOAT16"))
@_one_input
@ndarray_kernel
def sin(node: NodeContext):
    return _trig(node, "sin", np.sin)


@register("COS", max_version=2, dtypes=("FLOAT32", "FLOAT16"))
@_one_input
@ndarray_kernel
def cos(node: NodeContext):
    return _trig(node, "cos", np.cos)


def _round_to_nearest(v: np.ndarray) -> np.ndarray:
    """reference_ops::RoundToNearest in float32: floor, plus one above a half or at an odd half
    (so -0.3 gives +0.0)."""
    f = np.floor(v)
    d = v - f
    odd = np.fmod(f, np.float32(2)) != 0
    return np.where((d < np.float32(0.5)) | ((d == np.float32(0.5)) & ~odd), f, f + np.float32(1))


@register("ROUND", max_version=1, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16"))
@_one_input
@ndarray_kernel
def round_(node: NodeContext):
    """ROUND: float32, halves to even (TFLite's RoundToNearest); float16/bfloat16 by table."""
    if _half_io(node) is not None:
        return _half_unary(node, "ROUND")
    x, y = node.inputs[0], node.outputs[0]
    assert x is not None  # check_arity (_one_input) refused a missing input
    if x.dtype != np.float32 or y.dtype != np.float32:
        raise node.unsupported(f"input type {x.type_name} is not supported")
    return np.rint

