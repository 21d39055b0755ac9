"""QUANTIZE and DEQUANTIZE (tflite/kernels/quantize.cc, dequantize.cc/.h).

QUANTIZE float32 -> int8/uint8/int16 (per tensor or per channel) follows
reference_ops::AffineQuantize: round(x / float(scale)) half away from zero in float32, cast to
int32 (out-of-range and NaN values become INT32_MIN, as the x86 conversion the reference relies
on does), plus the zero point, clamped to the output type; float32 -> int4/uint4 (per tensor
only, AffineQuantizeToInt4/UInt4) is the same clamped to [-8, 7] / [0, 15]. Quantized inputs
are requantized with reference_ops::Requantize: MultiplyByQuantizedMultiplier(x - zp_in) with
the multiplier of in_scale / out_scale (double), plus zp_out, clamped.

DEQUANTIZE int8/uint8/int16/int4/int2/uint4/float16 -> float32 (the packed types are held
unpacked, uint4 as 0..15: the values LiteRT's UnpackPackedIntToInt8 gives): per tensor in
double precision (float(double(scale) * (q - zp))), per channel in float32 as the reference
kernels do.
FLOAT8_E4M3FN/E5M2 inputs (LiteRT's TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS build) are widened
exactly, ignoring any per-tensor scale (DequantizeFloat8); per-channel FLOAT8 is refused.
While widening (registry.widening) a FLOAT64 output gets double(scale) * (q - zp) unrounded.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from acelera.core.fpstate import fp_errors_ignored
from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.common import domain, lut_apply, scale_zp
from acelera.core.kernels.float_formats import FLOAT8, f8_to_f32
from acelera.core.kernels.registry import NodeContext, is_float32, register
from acelera.core.model import Tensor
from acelera.core.quant import multiply_by_quantized_multiplier_scalar as mbqm
from acelera.core.quant import quantize_multiplier, round_half_away, wrap_int32

_INT32_MIN = -(1 << 31)
_BELOW_HALF = np.nextafter(np.float32(0.5), np.float32(0))  # round_half_away's offset


def _channel_params(t: Tensor, ndim: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel scales (float32) and zero points (int64) shaped to broadcast along the axis."""
    q = t.quantization
    axis = int(q.quantized_dimension)
    shape = [1] * ndim
    shape[axis] = q.scale.size
    zp = q.zero_point if q.zero_point.size == q.scale.size else np.full(q.scale.size, q.zero_point[0])
    return (np.asarray(q.scale, np.float32).reshape(shape), np.asarray(zp, np.int64).reshape(shape))


def affine_quantize(x: np.ndarray, scale, zero_point, dtype, bounds: tuple[int, int] | None = None) -> np.ndarray:
    """reference_ops::AffineQuantize / PerChannelQuantize on float32 data (scale float32), the
    result clamped to `bounds` (default: dtype's range) and held in `dtype`."""
    if bounds is None:
        info = np.iinfo(dtype)
        bounds = (int(info.min), int(info.max))
    qmin, qmax = bounds
    with np.errstate(all="ignore"):
        v = np.array(np.divide(np.asarray(x, np.float32), np.asarray(scale, np.float32), dtype=np.float32))
        r = np.asarray(round_half_away(v))  # std::round, in float32
        lo, hi = (r.min(), r.max()) if r.size else (0.0, 0.0)
        bad = None if (lo >= -2.0**31 and hi < 2.0**31) else ~((r >= -2.0**31) & (r < 2.0**31))
        # r + zp may round for |r| >= 2**24, but never across the clamp bounds.
        r += np.asarray(zero_point, np.float32)
        np.clip(r, qmin, qmax, out=r)
    out = r.astype(dtype)
    if bad is not None:
        # static_cast<int32_t> of out-of-range or NaN values gives INT32_MIN on x86; the zero
        # point is then added with int32 wraparound and the sum clamped.
        zp = np.asarray(zero_point, np.int64)
        fix = np.clip(wrap_int32(np.int64(_INT32_MIN) + zp), qmin, qmax).astype(dtype)
        out[bad] = np.broadcast_to(fix, out.shape)[bad]
    return out


_KEY_INF = 0x7F800000  # float32 +inf's bit pattern: keys run from -inf (-_KEY_INF) to +inf


def _key_floats(k: np.ndarray) -> np.ndarray:
    """The float32 of each order key (bit pattern for x >= 0, minus the magnitude's for x < 0)."""
    bits = np.where(k < 0, (-k) | (1 << 31), k).astype(np.uint32)
    return bits.view(np.float32)


def _first_true(pred, n: int) -> np.ndarray:
    """Per predicate i, the smallest float32 x (not NaN) with pred(x)[i], for predicates false
    then true as x grows and true at +inf: a bisection over the order keys."""
    lo = np.full(n, -_KEY_INF - 1, np.int64)
    hi = np.full(n, _KEY_INF, np.int64)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        ok = pred(_key_floats(mid))
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return _key_floats(hi)


@lru_cache(maxsize=64)  # a bisection of a few ms: once per quantization, not per prepare
def _quantize_steps(scale: np.float32, zp: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """affine_quantize(x, scale, zp, dtype) for an 8-bit dtype as a step function of float32 x:
    (ascending float32 bounds, values) with values[bounds.searchsorted(x, "right")] for every
    x, NaN included (it sorts after +inf, whose value it shares).

    round(x / scale) is nondecreasing in x, so the result is: the out-of-range value below the
    first x whose rounded quotient reaches -2**31, the clamped quotient plus zero point up to
    the first x whose quotient reaches 2**31, the out-of-range value from there on."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)
    lim = np.float32(2.0**31)

    def rounded(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(round_half_away(np.divide(x, scale, dtype=np.float32)))

    targets = np.arange(qmin + 1, qmax + 1, dtype=np.float32)
    zpf = np.float32(zp)

    def pred(x: np.ndarray) -> np.ndarray:
        r = rounded(x)
        with np.errstate(all="ignore"):
            q = np.clip(r + zpf, np.float32(qmin), np.float32(qmax))
        return np.concatenate([[r[0] >= -lim, r[1] >= lim], q[2:] >= targets])

    firsts = _first_true(pred, targets.size + 2)
    t_lo, t_hi = firsts[0], firsts[1]
    inner = firsts[2:][(firsts[2:] > t_lo) & (firsts[2:] < t_hi)]
    bounds = np.unique(np.concatenate([[t_lo, t_hi], inner]).astype(np.float32))
    probe = np.concatenate([[np.float32(-np.inf)], bounds]).astype(np.float32)
    with np.errstate(all="ignore"):
        values = affine_quantize(probe, scale, zp, dtype)
    bounds.setflags(write=False)
    values.setflags(write=False)
    return bounds, values


def _per_tensor_quantize(scale: np.float32, zp: int, dtype: np.dtype):
    """affine_quantize with one scale, its steps as bare ufuncs on a float32 array while every
    rounded value fits int32 (the common case); anything else takes affine_quantize."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)
    zpf, below_half, f32 = np.float32(zp), np.float32(_BELOW_HALF), np.dtype(np.float32)
    # the square of a rounded value below 2**31 in magnitude is below 2**62, and a float32 dot
    # product of squares rounds every partial sum monotonically: vdot(r, r) < 2**62 passes only
    # arrays whose every |r| < 2**31 (NaN and inf fail).
    sq_ok = np.float32(2.0**62)
    lo_a, hi_a = np.asarray(np.float32(qmin)), np.asarray(np.float32(qmax))
    vdot, divide, copysign, trunc = np.vdot, np.divide, np.copysign, np.trunc

    if np.dtype(dtype).itemsize == 1 and np.isfinite(scale) and scale > 0:
        bounds, values = _quantize_steps(scale, zp, dtype)
        search, take = bounds.searchsorted, values.take

        def run_steps(x):
            if x.dtype != f32 or x.ndim == 0 or x.size == 0:
                return affine_quantize(x, scale, zp, dtype)
            return take(search(x, "right"))
        return run_steps

    def run(x):
        if x.dtype != f32 or x.ndim == 0 or x.size == 0:
            return affine_quantize(x, scale, zp, dtype)
        if fp_errors_ignored():
            v = divide(x, scale)
            r = copysign(below_half, v)
            r += v
            trunc(r, out=r)  # round_half_away
            ok = vdot(r, r) < sq_ok
        else:
            with np.errstate(all="ignore"):
                v = divide(x, scale)
                r = copysign(below_half, v)
                r += v
                trunc(r, out=r)
                ok = vdot(r, r) < sq_ok
        if not ok:  # NaN too; -2**31 takes the exact path
            return affine_quantize(x, scale, zp, dtype)
        r += zpf
        clip_ufunc(r, lo_a, hi_a, out=r)
        return r.astype(dtype)
    return run


# float32 -> the packed types (held unpacked): their value range
_PACKED_OUT = {"INT4": (-8, 7), "UINT4": (0, 15)}


@register("QUANTIZE", max_version=6, dtypes=("FLOAT32", "INT16", "INT32", "INT8", "UINT8"))
def quantize(node: NodeContext):
    x, out = node.input(0), node.outputs[0]
    if x is None:
        raise node.unsupported("missing input")
    if not out.quantized:
        raise node.unsupported("output tensor has no affine quantization")
    if out.type_name not in ("INT8", "UINT8", "INT16", "INT32", *_PACKED_OUT):
        raise node.unsupported(f"output type {out.type_name} is not supported")

    if x.type_name == "FLOAT32":
        if out.type_name == "INT32":
            raise node.unsupported("FLOAT32 to INT32 is not supported")
        dtype = out.dtype
        bounds = _PACKED_OUT.get(out.type_name)
        if bounds is not None:
            if out.quantization.per_channel:
                raise node.unsupported(f"per-channel {out.type_name} output is not supported")
            scale4 = np.float32(out.quantization.scale[0])
            zp4 = int(out.quantization.zero_point[0])

            def run_quantize_packed(x):
                return affine_quantize(x, scale4, zp4, dtype, bounds)
            return run_quantize_packed
        scale: np.ndarray | np.float32
        zp: np.ndarray | int
        if out.quantization.per_channel:
            axis = int(out.quantization.quantized_dimension)
            if not 0 <= axis < len(x.shape) or x.shape[axis] != out.quantization.scale.size:
                raise node.unsupported("per-channel quantization does not match the input shape")
            scale, zp = _channel_params(out, len(x.shape))
        else:
            scale = np.float32(out.quantization.scale[0])
            zp = int(out.quantization.zero_point[0])
            return _per_tensor_quantize(scale, zp, dtype)

        def run_quantize(x):
            return affine_quantize(x, scale, zp, dtype)
        return run_quantize

    allowed = {"INT16": ("INT8", "INT16", "INT32"), "INT32": ("INT8", "INT16"),
               "INT8": ("UINT8", "INT8", "INT16"), "UINT8": ("UINT8", "INT8", "INT16")}
    if out.type_name not in allowed.get(x.type_name, ()):
        raise node.unsupported(f"input type {x.type_name} with output type {out.type_name} is not supported")
    if not x.quantized:
        raise node.unsupported(f"{x.type_name} input has no quantization parameters")
    if x.quantization.per_channel or out.quantization.per_channel:
        raise node.unsupported("per-channel requantization is not supported")
    s_in, zp_in = float(x.quantization.scale[0]), int(x.quantization.zero_point[0])
    s_out, zp_out = float(out.quantization.scale[0]), int(out.quantization.zero_point[0])
    if x.type_name == "INT16" and out.type_name == "INT16" and (zp_in != 0 or zp_out != 0):
        raise node.unsupported("INT16 to INT16 requantization needs zero points 0")
    if s_out == 0.0:
        raise node.unsupported("output scale is 0")
    mult, shift = quantize_multiplier(s_in / s_out)
    dtype = out.dtype
    info = np.iinfo(dtype)

    def requantize(x):
        v = wrap_int32(np.asarray(x, np.int64) - zp_in)
        q = mbqm(v, mult, shift) + zp_out
        return np.asarray(np.clip(q, info.min, info.max), dtype)

    if x.dtype.itemsize > 2:  # int32 input: compute directly
        return requantize
    table = requantize(domain(x.dtype))  # every input value, by bit pattern

    def run_requantize_lut(x):
        return np.asarray(lut_apply(np.asarray(x), table))
    return run_requantize_lut


def _float_input(node: NodeContext, x, ft):
    """DEQUANTIZE of a FLOAT16 or FLOAT8 input to float type `ft` (exact), or None."""
    if x.type_name == "FLOAT16":
        def run_fp16(x):
            return np.asarray(x, ft)
        return run_fp16
    if x.type_name in FLOAT8:
        if x.quantization.per_channel:
            raise node.unsupported(f"per-channel {x.type_name} input is not supported")
        name = x.type_name

        def run_fp8(x):
            return np.asarray(f8_to_f32(x, name), ft)
        return run_fp8
    return None


def _integer_params(node: NodeContext, x):
    """(scale, zero point) of an integer DEQUANTIZE input, per tensor or per channel (arrays
    shaped to broadcast), refusing what LiteRT's kernel refuses."""
    if x.type_name not in ("INT8", "UINT8", "INT16", "INT4", "INT2", "UINT4"):
        raise node.unsupported(f"input type {x.type_name} is not supported")
    q = x.quantization
    if q.per_channel:
        if x.type_name == "INT16":
            raise node.unsupported("per-channel INT16 input is not supported")
        axis = int(q.quantized_dimension)
        if not 0 <= axis < len(x.shape) or x.shape[axis] != q.scale.size:
            raise node.unsupported("per-channel quantization does not match the input shape")
        return _channel_params(x, len(x.shape))
    scale, zp = scale_zp(x)
    if x.type_name == "INT16" and zp != 0:
        raise node.unsupported("INT16 input needs zero_point 0")
    return scale, zp


def _dequantize_f64(node: NodeContext):
    """DEQUANTIZE to a widened output: double(scale) * (q - zp), float16/float8 exactly."""
    x = node.input(0)
    run_float = _float_input(node, x, np.float64)
    if run_float is not None:
        return run_float
    scale, zp = _integer_params(node, x)
    scale = np.asarray(scale, np.float64)
    zpf = np.asarray(zp, np.float64)

    def run(x):
        v = np.array(x, np.float64)
        v -= zpf
        v *= scale
        return v
    return run


@register("DEQUANTIZE", max_version=9, dtypes=("FLOAT16", "INT8", "UINT8", "INT16", "INT4", "INT2", "UINT4", *FLOAT8))
def dequantize(node: NodeContext):
    x, out = node.input(0), node.outputs[0]
    if x is None:
        raise node.unsupported("missing input")
    if not is_float32(out):
        raise node.unsupported(f"output type {out.type_name} is not supported (DEQUANTIZE produces FLOAT32)")
    if out.type_name == "FLOAT64":  # widening: the exact float64 values
        return _dequantize_f64(node)
    run_float = _float_input(node, x, np.float32)
    if run_float is not None:
        return run_float
    scale, zp = _integer_params(node, x)
    if x.quantization.per_channel:
        zpf = zp.astype(np.float32)

        def run_per_channel(x):
            v = np.array(x, np.float32)  # q - zp is exact in float32
            v -= zpf
            v *= scale
            return v
        return run_per_channel

    # float(double(scale) * (q - zp)) == float32(scale) * float32(q - zp): the double product of
    # a float32 and an integer below 2**24 is exact, so both round the exact product once.
    s32, zp32 = np.float32(scale), np.float32(zp)

    def run(x):
        v = np.array(x, np.float32)
        v -= zp32
        v *= s32
        return v
    if x.type_name not in ("INT8", "UINT8"):
        return run
    table = run(domain(x.dtype))  # every 8-bit value, by bit pattern, with the same float32 steps
    take, u8 = table.take, np.dtype(np.uint8)
    def run_lut8(x):
        return take(x.view(u8)) if x.ndim and x.dtype.itemsize == 1 else run(x)
    return run_lut8
