"""Activation kernels: RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, LEAKY_RELU, PRELU, ELU,
HARD_SWISH, GELU, LOGISTIC, TANH.

Matches LiteRT's BUILTIN_REF kernels (tflite/kernels/activations.cc, kReference paths):

* float32 math in float32 with LiteRT's formulas (LOGISTIC's cut-offs, GELU's erfc form);
  float16 GELU (v3) rounds to half after every operation, as Eigen::half arithmetic does,
  tabulated over all 65536 half values. float16 and bfloat16 LOGISTIC and TANH compute each
  value in float32 (tanhf; LOGISTIC's reference formula with its cut-offs and expf) and round
  it once to the 16-bit type, also tabulated over every bit pattern.
* 8-bit and 16-bit quantized ops are elementwise functions of one integer, so prepare
  evaluates LiteRT's integer algorithm (or its LUTPopulate table) once over the whole input
  domain (256 or 65536 values) and run() is a single table lookup.

This module also holds what the sibling families (softmax.py, unary.py) share: the checks of
one-input ops, TFLite's LUTPopulate for 8-bit and interpolated 16-bit tables, glibc's float math (LiteRT calls
expf/tanhf/...; a one-ulp difference can move a table entry) and the "legacy" per-tensor
quantization parameters that TFLite kernels read (`tensor->params`).

While widening (registry.widening) the float32 paths (and unary_io, for the families sharing
it) take FLOAT64 and compute in float64; GELU's float64 path uses math.erfc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from typing import Callable

import numpy as np

from acelera.core.kernels.common import domain, lut_apply
from acelera.core.kernels.float_formats import ALIASED_TYPES, table16
from acelera.core.kernels.registry import NodeContext, float_type_names, is_float32, register
from acelera.core.model import Tensor
from acelera.core.quant import multiply_by_quantized_multiplier, quantize_multiplier, round_half_away, wrap_int32

F32 = np.float32
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def legacy_qparams(t: Tensor) -> tuple[float, int]:
    """TFLite's `tensor->params`: (scale, zero_point) of per-tensor quantization, else (0, 0).

    Per-channel quantized tensors get (0, 0) (tflite/core/subgraph.cc GetLegacyQuantization),
    which is what kernels reading `params.scale` (PRELU's alpha, for one) really see.
    """
    q = t.quantization
    if q.scale.size != 1 or q.zero_point.size < 1:
        return 0.0, 0
    return float(F32(q.scale[0])), int(q.zero_point[0])


def require_per_tensor(node: NodeContext, *tensors: Tensor | None) -> None:
    for t in tensors:
        if t is not None and not t.quantization.is_set:
            raise node.unsupported(
                f"quantized {t.type_name} tensor '{t.name}' has no quantization parameters")


def check_same_type(node: NodeContext, a: Tensor, b: Tensor) -> None:
    if a.type != b.type:
        raise node.unsupported(f"input type {a.type_name} and output type {b.type_name} differ")


def unary_io(node: NodeContext, allowed: tuple) -> tuple[Tensor, Tensor]:
    """(input, output) of a one-input elementwise op: same type, one of the `allowed` dtypes
    (float64 too where float32 is allowed, while widening: see registry.widening)."""
    x, y = node.inputs[0], node.outputs[0]
    if x is None:
        raise node.unsupported("missing input")
    check_same_type(node, x, y)
    dts = [np.dtype(d) for d in allowed]
    if np.dtype(F32) in dts and len(float_type_names()) > 1:
        dts.append(np.dtype(np.float64))
    if x.dtype not in dts or x.type_name in ALIASED_TYPES:
        raise node.unsupported(f"input type {x.type_name} is not supported")
    return x, y


def wrap16(x):
    return ((np.asarray(x, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def clz32(x) -> np.ndarray:
    """CountLeadingZeros of uint32 values (given as int64 holding the bit pattern)."""
    u = np.asarray(x, np.int64) & 0xFFFFFFFF
    _, e = np.frexp(u.astype(np.float64))  # exact: u < 2**53; frexp(0) gives exponent 0
    return (32 - e).astype(np.int64)


def cvt_f2i32(x) -> np.ndarray:
    """static_cast<int32_t>(float) as LiteRT's build computes it: truncation toward zero,
    saturating out-of-range values (the compiler clamps in float before converting; an
    infinite EXP table entry becomes the type's maximum, as LiteRT gives), NaN as INT32_MIN."""
    x = np.asarray(x, np.float64)
    nan = np.isnan(x)
    clipped = np.clip(np.where(nan, 0.0, x), INT32_MIN, INT32_MAX)
    return np.where(nan, INT32_MIN, np.trunc(clipped)).astype(np.int64)


def to_table(values, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(values, info.min, info.max).astype(dtype)


def ndarray_kernel(prepare):
    """Wrap a prepare function so its kernel always returns an ndarray (numpy ufuncs and
    fancy indexing return scalars for 0-d inputs)."""
    @functools.wraps(prepare)
    def wrapped(node: NodeContext):
        fn = prepare(node)

        def run(*args):
            r = fn(*args)
            return r if type(r) is np.ndarray else np.asarray(r)
        return run
    return wrapped


def float_kernel(fn):
    """A float32 kernel written with in-place numpy ops: give it >= 1-D arrays (ufuncs on
    0-d arrays return scalars, which `out=` rejects) and silence IEEE warnings (inf/NaN
    results are LiteRT's too)."""
    def run(a: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            if a.ndim == 0:
                return fn(a.reshape(1)).reshape(())
            return fn(a)
    return run


# --- glibc math, called like LiteRT's C++ does -----------------------------------------

def _load_libm():
    for name in (ctypes.util.find_library("m"), "libm.so.6"):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                pass
    return None


_LIBM = _load_libm()


def _erfc64(x: np.ndarray) -> np.ndarray:
    """erfc in float64 (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7)."""
    x = np.asarray(x, np.float64)
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277)))))))))
    r = t * np.exp(poly)
    return np.where(x >= 0, r, 2.0 - r)


_NUMPY_MATH = {"exp": np.exp, "expm1": np.expm1, "tanh": np.tanh, "log": np.log,
               "sqrt": np.sqrt, "erfc": _erfc64}


def libm(name: str, single: bool = True) -> Callable[[np.ndarray], np.ndarray]:
    """Elementwise libm function: `libm('exp')` is expf (float32), `libm('exp', False)` exp.

    Used only at prepare time to build lookup tables (a Python loop over at most 1,539
    values); falls back to numpy where no C math library can be loaded.
    """
    ctype, dt = (ctypes.c_float, np.float32) if single else (ctypes.c_double, np.float64)
    fn = None
    if _LIBM is not None:
        try:
            fn = getattr(_LIBM, name + ("f" if single else ""))
            fn.restype = ctype
            fn.argtypes = [ctype]
        except AttributeError:
            fn = None

    def call(x):
        x = np.asarray(x, dt)
        if fn is None:
            with np.errstate(all="ignore"):
                return np.asarray(_NUMPY_MATH[name](x), dt)
        return np.array([fn(v) for v in x.ravel().tolist()], dt).reshape(x.shape)
    return call


def half_table(fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """`fn` (float32 in, float32 out) over every float16 value, rounded to float16: an
    elementwise float16 op is a function of 16 bits, so the table (used with lut_apply)
    holds exactly what computing each value in float and storing it as half gives."""
    v = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(F32)
    with np.errstate(all="ignore"):
        return np.asarray(fn(v), F32).astype(np.float16)


# --- LUTPopulate (tflite/kernels/internal/common.h) --------------------------------------

def lut8(in_scale: float, in_zp: int, out_scale: float, out_zp: int, dtype,
         transform: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """LUTPopulateInt8: a 256-entry table over domain(dtype); `transform` works in float32."""
    info = np.iinfo(dtype)
    vals = domain(dtype)
    with np.errstate(all="ignore"):
        deq = F32(in_scale) * (vals - in_zp).astype(F32)
        t = np.asarray(transform(deq), F32)
        inverse_scale = F32(1) / F32(out_scale)
        rescaled = round_half_away(t * inverse_scale)
        q = cvt_f2i32(rescaled + F32(out_zp))
    return np.clip(q, info.min, info.max).astype(dtype)


def _lut16_int(v, ft) -> np.ndarray:
    """static_cast<int16_t>(std::min(std::max(v, -32768), 32767)) with NaN giving 0."""
    v = np.asarray(v, np.float64)
    nan = np.isnan(v)
    c = np.clip(np.where(nan, 0.0, v), -32768.0, 32767.0)
    return np.where(nan, 0, np.trunc(c)).astype(np.int64)


def lut16(in_scale: float, in_zp: int, out_scale: float, out_zp: int,
          transform: Callable[[np.ndarray], np.ndarray], ftype=np.float32) -> np.ndarray:
    """LUTPopulateInt16<FloatT>: the 513-entry interpolation table (FloatT = ftype)."""
    ft = np.dtype(ftype).type
    with np.errstate(all="ignore"):
        in_scale, out_scale = ft(in_scale), ft(out_scale)
        input_min = in_scale * ft(-32768 - in_zp)
        input_max = in_scale * ft(32767 - in_zp)
        output_min = out_scale * ft(-32768 - out_zp)
        output_max = out_scale * ft(32767 - out_zp)
        step = (input_max - input_min) / ft(512)
        half_step = step / ft(2)
        inv = ft(65536) / (output_max - output_min)
        i = np.arange(512).astype(ft)
        xs = (input_min + i * step).astype(ft)
        val = np.asarray(transform(xs), ft)
        val_mid = np.asarray(transform((xs + half_step).astype(ft)), ft)
        val_next = np.asarray(transform((input_min + (i + ft(1)) * step).astype(ft)), ft)
        sample = round_half_away(val * inv)
        mid_interp = round_half_away((val_next * inv + round_half_away(val * inv)) / ft(2))
        mid_val = round_half_away(val_mid * inv)
        bias = round_half_away((mid_interp - mid_val) / ft(2))
        lut = np.empty(513, np.int64)
        lut[:512] = _lut16_int((sample - bias).astype(ft), ft)
        last = round_half_away(np.asarray(transform(np.array([input_max], ft)), ft) * inv)
        lut[512] = _lut16_int(last, ft)[0]
    return lut


def lut16_expand(lut: np.ndarray) -> np.ndarray:
    """LUTLookup(int16, lut) for every int16 value, as a table over domain(int16)."""
    v = domain(np.int16)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = lut[index]
    slope = wrap16(lut[index + 1] - lut[index])
    delta = (slope * offset + 64) >> 7
    return wrap16(base + delta).astype(np.int16)


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


# --------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------

_Q8 = (np.int8, np.uint8)


# --- RELU family ---------------------------------------------------------------------

def _relu_like(node: NodeContext, lo: float, hi: float, allowed: tuple):
    x, y = unary_io(node, allowed)
    if is_float32(x):
        ft = x.dtype.type
        if hi == math.inf:
            return lambda a: np.maximum(a, ft(lo))
        return lambda a: np.clip(a, ft(lo), ft(hi))
    require_per_tensor(node, x, y)
    in_s, in_zp = legacy_qparams(x)
    out_s, out_zp = legacy_qparams(y)
    if x.dtype == np.int16 and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("int16 RELU needs zero points of 0")
    info = np.iinfo(x.dtype)
    with np.errstate(all="ignore"):
        mult, shift = quantize_multiplier(float(F32(in_s) / F32(out_s)))
        qmin = max(int(info.min), out_zp + int(cvt_f2i32(round_half_away(F32(lo) / F32(out_s)))))
        qmax = int(info.max) if hi == math.inf else min(
            int(info.max), out_zp + int(cvt_f2i32(round_half_away(F32(hi) / F32(out_s)))))
    v = domain(x.dtype)
    out = out_zp + multiply_by_quantized_multiplier(v - in_zp, mult, shift)
    table = np.minimum(np.maximum(out, qmin), qmax).astype(x.dtype)
    return lambda a: lut_apply(a, table)


@register("RELU", max_version=3, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def relu(node: NodeContext):
    return _relu_like(node, 0.0, math.inf, (np.float32, np.uint8, np.int8, np.int16))


@register("RELU6", max_version=3, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def relu6(node: NodeContext):
    return _relu_like(node, 0.0, 6.0, (np.float32, np.uint8, np.int8, np.int16))


@register("RELU_N1_TO_1", max_version=1, dtypes=("FLOAT32", "UINT8", "INT8"))
@ndarray_kernel
def relu_n1_to_1(node: NodeContext):
    return _relu_like(node, -1.0, 1.0, (np.float32, np.uint8, np.int8))


@register("RELU_0_TO_1", max_version=1, dtypes=("FLOAT32", "UINT8", "INT8"))
@ndarray_kernel
def relu_0_to_1(node: NodeContext):
    return _relu_like(node, 0.0, 1.0, (np.float32, np.uint8, np.int8))


# --- LEAKY_RELU ------------------------------------------------------------------------

@register("LEAKY_RELU", max_version=2, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def leaky_relu(node: NodeContext):
    x, y = unary_io(node, (np.float32, np.uint8, np.int8, np.int16))
    alpha = F32(node.options.get("alpha", 0.0))
    if is_float32(x):
        # `x > 0 ? x : x * alpha`, branch-free: for 0 <= alpha <= 1 it is max(x, alpha x),
        # for alpha > 1 min(x, alpha x); otherwise split into the two signed parts.
        if 0 <= alpha <= 1:
            return float_kernel(lambda a: np.maximum(a, a * alpha))
        if alpha > 1:
            return float_kernel(lambda a: np.minimum(a, a * alpha))
        return float_kernel(lambda a: _prelu_float(a, alpha))
    require_per_tensor(node, x, y)
    in_s, in_zp = legacy_qparams(x)
    out_s, out_zp = legacy_qparams(y)
    if x.dtype == np.int16 and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("int16 LEAKY_RELU needs zero points of 0")
    with np.errstate(all="ignore"):
        m_alpha, s_alpha = quantize_multiplier(float(F32(in_s) * alpha / F32(out_s)))
        m_id, s_id = quantize_multiplier(float(F32(in_s) / F32(out_s)))
    v = domain(x.dtype) - in_zp
    pos = multiply_by_quantized_multiplier(v, m_id, s_id)
    neg = multiply_by_quantized_multiplier(v, abs(m_alpha), s_alpha)
    neg = -neg if m_alpha < 0 else neg
    table = to_table(out_zp + np.where(v >= 0, pos, neg), x.dtype)
    return lambda a: lut_apply(a, table)


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
def prelu(node: NodeContext):
    x, alpha_t, y = node.input(0), node.input(1), node.outputs[0]
    if x is None or alpha_t is None:
        raise node.unsupported("PRELU needs an input and an alpha tensor")
    check_same_type(node, x, y)
    if np.broadcast_shapes(x.shape, alpha_t.shape) != tuple(x.shape):
        raise node.unsupported(f"alpha shape {alpha_t.shape} does not broadcast to input shape {x.shape}")
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
def elu(node: NodeContext):
    x, y = unary_io(node, (np.float32, np.int8))
    if is_float32(x):
        def run(a):
            return np.where(a < 0, np.expm1(a), a)
        return float_kernel(run)
    require_per_tensor(node, x, y)
    table = lut8(*legacy_qparams(x), *legacy_qparams(y), np.int8, _elu_transform)
    return lambda a: lut_apply(a, table)


# --- HARD_SWISH ----------------------------------------------------------------------

def _downscale_to_int16(m: int) -> int:
    """DownScaleInt32ToInt16Multiplier."""
    if m >= INT32_MAX - (1 << 15):
        return 32767
    return (m + (1 << 15)) >> 16


@register("HARD_SWISH", max_version=1, dtypes=("FLOAT32", "UINT8", "INT8"))
@ndarray_kernel
def hard_swish(node: NodeContext):
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
    require_per_tensor(node, x, y)
    in_s, in_zp = legacy_qparams(x)
    out_s, out_zp = legacy_qparams(y)
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
    return lambda a: lut_apply(a, table)


# --- GELU ----------------------------------------------------------------------------

_SQRT_2_OVER_PI = F32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5))  # M_2_SQRTPI * M_SQRT1_2
_NEG_SQRT1_2 = F32(-math.sqrt(0.5))


def _gelu_exact_f32(a: np.ndarray) -> np.ndarray:
    """0.5 x erfc(-x / sqrt 2) in float32 as max(x, 0) - 0.5 |x| erfc(|x| / sqrt 2), erfc by
    Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7): error < 1e-7 * max(1, |x|)."""
    ax = np.abs(a)
    z = ax * F32(math.sqrt(0.5))
    t = z * F32(0.3275911)
    t += F32(1)
    np.reciprocal(t, out=t)
    p = t * F32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        p += F32(c)
        p *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    p *= z
    p *= ax
    p *= F32(-0.5)
    p += np.maximum(a, F32(0))
    return p


def _gelu_exact_f64(a: np.ndarray) -> np.ndarray:
    """0.5 x erfc(-x / sqrt 2) in float64 (math.erfc per element: the float64 answer of the
    float graph, conformance/float64.py, not a hot path)."""
    e = np.frompyfunc(math.erfc, 1, 1)(a * -math.sqrt(0.5))
    return (0.5 * a) * np.asarray(e, np.float64)


def _gelu_approx_f64(a: np.ndarray) -> np.ndarray:
    return 0.5 * a * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a)))


def _gelu_transform(v):
    v = np.asarray(v, F32)
    return (F32(0.5) * v) * libm("erfc")(v * _NEG_SQRT1_2)


def _gelu_approx_transform(v):
    v = np.asarray(v, F32)
    inner = _SQRT_2_OVER_PI * (v + F32(0.044715) * v * v * v)
    return (F32(0.5) * v) * (F32(1) + libm("tanh")(inner))


def _gelu_half(v: np.ndarray, approximate: bool) -> np.ndarray:
    """reference_ops::Gelu<Eigen::half>: every Eigen operation rounds its result to half."""
    def h(a):
        return np.asarray(a, F32).astype(np.float16).astype(F32)

    if approximate:
        cube = h(h(v * v) * v)
        inner = h(h(_SQRT_2_OVER_PI) * h(v + h(h(F32(0.044715)) * cube)))
        return h(h(F32(0.5) * v) * h(F32(1) + h(libm("tanh")(inner))))
    return h(h(F32(0.5) * v) * h(libm("erfc")(h(v * h(_NEG_SQRT1_2)))))


@functools.cache
def _gelu_half_table(approximate: bool) -> np.ndarray:
    return half_table(lambda v: _gelu_half(v, approximate))


@register("GELU", max_version=3, dtypes=("FLOAT32", "FLOAT16", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def gelu(node: NodeContext):
    x, y = unary_io(node, (np.float32, np.float16, np.uint8, np.int8, np.int16))
    approximate = bool(node.options.get("approximate", False))
    if x.dtype == np.float16:
        table = _gelu_half_table(approximate)
        return lambda a: lut_apply(a, table)
    if x.dtype == np.float64 and is_float32(x):
        return float_kernel(_gelu_approx_f64 if approximate else _gelu_exact_f64)
    if x.dtype == np.float32:
        if approximate:
            def run_a(a):
                return F32(0.5) * a * (F32(1) + np.tanh(_SQRT_2_OVER_PI * (a + F32(0.044715) * a * a * a)))
            return float_kernel(run_a)

        return float_kernel(_gelu_exact_f32)
    require_per_tensor(node, x, y)
    transform = _gelu_approx_transform if approximate else _gelu_transform
    if x.dtype == np.int16:
        table = lut16_expand(lut16(*legacy_qparams(x), *legacy_qparams(y), transform))
    else:
        table = lut8(*legacy_qparams(x), *legacy_qparams(y), x.dtype, transform)
    return lambda a: lut_apply(a, table)


# --- LOGISTIC / TANH ------------------------------------------------------------------

# sigmoid(i / 24) in 0.16 fixed point (tflite/kernels/internal/common.h sigmoid_table_uint16):
# the int16 LOGISTIC and TANH kernels interpolate in this table; its entries are not a
# closed-form rounding of sigmoid, so they are data here.
_SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535], np.int64)


def _checked_log2(x: float) -> tuple[bool, int]:
    """CheckedLog2 in float32 (logf)."""
    logf = libm("log")
    with np.errstate(all="ignore"):
        x_log2 = F32(logf(np.array([x], F32))[0] * (F32(1.0) / F32(math.log(2.0))))
        rounded = F32(round_half_away(np.array([x_log2], F32))[0])
        frac = F32(x_log2 - rounded)
    if not np.isfinite(rounded):
        return False, 0
    return bool(abs(frac) < F32(1e-3)), int(rounded)


def _int16_input_rescale(node: NodeContext, x: Tensor, y: Tensor, pot_shifts: tuple[int, ...]):
    """TanhPrepare/SigmoidPrepare int16: (input_multiplier, input_left_shift)."""
    in_s, in_zp = legacy_qparams(x)
    out_s, out_zp = legacy_qparams(y)
    if in_zp != 0 or out_zp != 0:
        raise node.unsupported("int16 input and output need zero points of 0")
    pot, log2 = _checked_log2(in_s)
    left_shift = 12 + log2
    multiplier = 0
    if not (pot and left_shift in pot_shifts):
        m = float(F32(in_s)) * 4096.0 * 3.0
        left_shift = 0
        while m <= 32767.0 / 2.0 and left_shift <= 30:
            left_shift += 1
            m *= 2.0
        multiplier = wrap_int32(int(m))
    ok, out_log2 = _checked_log2(out_s)
    if not ok or out_log2 != -15:
        raise node.unsupported("int16 output scale must be 2**-15")
    if multiplier == 0:  # power-of-two case
        multiplier, left_shift = 3 << left_shift, 0
    return multiplier, left_shift


def _int16_scaled_input(multiplier: int, left_shift: int) -> np.ndarray:
    rnd = (1 << (left_shift - 1)) if left_shift > 0 else 0
    return wrap_int32(domain(np.int16) * multiplier + rnd) >> left_shift


def _logistic_int16_table(multiplier: int, left_shift: int) -> np.ndarray:
    d = _int16_scaled_input(multiplier, left_shift)
    a = np.abs(d)
    uh = a >> 9
    sat = uh >= 255
    uhc = np.minimum(uh, 254)
    ua, ub = _SIGMOID_TABLE[uhc], _SIGMOID_TABLE[uhc + 1]
    res = np.where(sat, 0x7FFF << 10, (ua << 9) + (a & 0x1FF) * (ub - ua))
    res = np.where(d >= 0, res + (1 << 9), (1 << 25) - res + (1 << 9) - 1) & 0xFFFFFFFF
    return wrap16(res >> 10).astype(np.int16)


def _tanh_int16_table(multiplier: int, left_shift: int) -> np.ndarray:
    d = _int16_scaled_input(multiplier, left_shift)
    a = np.abs(d)
    uh = a >> 8
    sat = uh >= 255
    uhc = np.minimum(uh, 254)
    ua, ub = _SIGMOID_TABLE[uhc], _SIGMOID_TABLE[uhc + 1]
    res = wrap_int32(np.where(sat, 0xFFFF << 8, (ua << 8) + (a & 0xFF) * (ub - ua)))
    res = np.where(d >= 0, res - (1 << 23) + (1 << 7), -res + (1 << 23) + (1 << 7) - 1)
    return wrap16(wrap_int32(res) >> 8).astype(np.int16)


def _sigmoid_transform(v):
    v = np.asarray(v, F32)
    with np.errstate(all="ignore"):
        return F32(1) / (F32(1) + libm("exp")(-v))


def _logistic_reference(v: np.ndarray) -> np.ndarray:
    """reference_ops::Logistic in float32: 1 above 16.619..., expf(x) below -9, else
    1 / (1 + expf(-x))."""
    v = np.asarray(v, F32)
    with np.errstate(all="ignore"):
        mid = F32(1) / (F32(1) + libm("exp")(-v))
        return np.where(v > F32(16.619047164916992188), F32(1), np.where(v < F32(-9), libm("exp")(v), mid))


@functools.cache
def _half_table(op: str, type_name: str) -> np.ndarray:
    """float16/bfloat16 LOGISTIC or TANH over every bit pattern."""
    return table16(_logistic_reference if op == "LOGISTIC" else libm("tanh"), type_name)


def _is_half(x: Tensor) -> bool:
    return x.type_name in ("FLOAT16", "BFLOAT16")


@register("LOGISTIC", max_version=3, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def logistic(node: NodeContext):
    x, y = node.inputs[0], node.outputs[0]
    if x is not None and _is_half(x):
        check_same_type(node, x, y)
        table = _half_table("LOGISTIC", x.type_name)
        return lambda a: lut_apply(a, table)
    x, y = unary_io(node, (np.float32, np.uint8, np.int8, np.int16))
    if is_float32(x):
        one = x.dtype.type(1)

        def run(a):
            # 1 / (1 + exp(-x)) everywhere: LiteRT's cut-offs (1 above 16.62, exp(x) below -9)
            # differ from it by less than 6.1e-8, far inside float tolerance.
            t = np.negative(a)
            np.exp(t, out=t)
            t += one
            return np.reciprocal(t, out=t)
        return float_kernel(run)
    require_per_tensor(node, x, y)
    if x.dtype == np.int16:
        out_s, _ = legacy_qparams(y)
        if out_s != 1.0 / 32768:
            raise node.unsupported("int16 LOGISTIC needs an output scale of 1/32768")
        table = _logistic_int16_table(*_int16_input_rescale(node, x, y, (0,)))
    else:
        out_s, _ = legacy_qparams(y)
        if out_s != 1.0 / 256:
            raise node.unsupported("8-bit LOGISTIC needs an output scale of 1/256")
        table = lut8(*legacy_qparams(x), *legacy_qparams(y), x.dtype, _sigmoid_transform)
    return lambda a: lut_apply(a, table)


@register("TANH", max_version=3, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def tanh(node: NodeContext):
    x, y = node.inputs[0], node.outputs[0]
    if x is not None and _is_half(x):
        check_same_type(node, x, y)
        table = _half_table("TANH", x.type_name)
        return lambda a: lut_apply(a, table)
    x, y = unary_io(node, (np.float32, np.uint8, np.int8, np.int16))
    if is_float32(x):
        return lambda a: np.tanh(a)
    require_per_tensor(node, x, y)
    if x.dtype == np.int16:
        table = _tanh_int16_table(*_int16_input_rescale(node, x, y, (0, 1)))
    else:
        table = lut8(*legacy_qparams(x), *legacy_qparams(y), x.dtype, libm("tanh"))
    return lambda a: lut_apply(a, table)
