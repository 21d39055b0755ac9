"""Quantization helpers of the convolution kernels (conv.py, conv_kernels.py, transpose_conv.py):
LiteRT's tflite/kernels/kernel_util.cc (PopulateConvolutionQuantizationParams,
GetQuantizedConvolutionMultipler), internal/quantization_util.cc (QuantizeMultiplier) and the
hybrid input quantizers of internal/optimized/neon_tensor_utils.cc (SymmetricQuantizeFloats,
AsymmetricQuantizeFloats) as LiteRT's x86 build runs them.

Requantization uses TFLite's fixed-point MultiplyByQuantizedMultiplier per output channel;
exact_dtype picks the float type in which an integer accumulation stays exact.
"""
from __future__ import annotations

import numpy as np

from acelera.core import quant
from acelera.core.errors import ModelError
from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.common import quantized_activation_range
from acelera.core.kernels.conv_im2col import opt
from acelera.core.kernels.prepared import QuantizedConvParams
from acelera.core.kernels.registry import NodeContext
from acelera.core.model import Tensor

F32_EXACT = float(1 << 24)  # every integer of magnitude <= 2**24 is exact in float32
F64_EXACT = float(1 << 53)

# TensorType codes used for checks.
T_FLOAT32, T_INT32, T_UINT8, T_INT64, T_INT16, T_INT8, T_INT4 = 0, 2, 3, 4, 7, 9, 17
# The filter types each quantized input type takes in (DEPTHWISE_)CONV_2D.
QUANT_FILTER_TYPES = {T_UINT8: (T_UINT8,), T_INT8: (T_INT8, T_INT4), T_INT16: (T_INT8, T_INT4)}


def f32_scale(t: Tensor) -> np.float32:
    q = t.quantization
    if not q.is_set:
        raise ModelError(f"tensor '{t.name}' needs quantization parameters")
    return np.float32(q.scale[0])


def zero_point(t: Tensor) -> int:
    q = t.quantization
    return int(q.zero_point[0]) if q.zero_point.size else 0


def quantized_filter_scales(w: Tensor) -> np.ndarray:
    """The filter's quantization scales as float32 (a ModelError when it has none)."""
    q = w.quantization
    if not q.is_set:
        raise ModelError(f"filter '{w.name}' needs quantization parameters")
    return np.asarray(q.scale, np.float32)


def filter_scales(node: NodeContext, w: Tensor, channels: int, allow_per_channel: bool) -> np.ndarray:
    """The filter scales broadcast to `channels` (PopulateConvolutionQuantizationParams)."""
    scales = quantized_filter_scales(w)
    if scales.size > 1:
        qd = w.quantization.quantized_dimension
        qdim_size = int(w.shape[qd]) if 0 <= qd < 4 else -1
        if not allow_per_channel:
            raise node.unsupported("per-channel filter quantization needs INT8 or INT16 input")
        if scales.size != channels or qdim_size != channels:
            raise ModelError(f"filter has {scales.size} scales for {channels} output channels")
        return scales
    return np.full(channels, scales[0], np.float32)


def conv_multipliers(x: Tensor, w_scales: np.ndarray, y: Tensor, legacy_uint8: bool,
                     bias: Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift): double(in) * double(filter) / double(out), except the
    uint8 path, which multiplies the scales in float first (GetQuantizedConvolutionMultipler)."""
    in_s, out_s = f32_scale(x), f32_scale(y)
    if legacy_uint8:
        prod = np.float32(in_s * w_scales[0])
        if bias is not None:
            b_s = float(f32_scale(bias)) if bias.quantization.is_set else 0.0
            if abs(float(in_s) * float(w_scales[0]) - b_s) / float(out_s) > 0.02:
                raise ModelError("bias scale differs from input scale * filter scale")
        m, s = quant.quantize_multiplier(float(prod) / float(out_s))
        n = w_scales.size
        return np.full(n, m, np.int64), np.full(n, s, np.int64)
    reals = float(in_s) * w_scales.astype(np.float64) / float(out_s)
    return quant.quantize_multipliers(reals)


class Requantizer:
    """acc (int64 array, channels last) -> clamped output of the declared integer dtype."""

    def __init__(self, mult: np.ndarray, shift: np.ndarray, out_zp: int, qmin: int, qmax: int,
                 dtype, wide: bool):
        if np.all(mult == mult[0]) and np.all(shift == shift[0]):
            mult, shift = mult[:1], shift[:1]
        self.mult = mult.astype(np.int64)
        self.shift = shift.astype(np.int64)
        self.out_zp, self.qmin, self.qmax = int(out_zp), int(qmin), int(qmax)
        self.dtype = np.dtype(dtype)
        self.wide = wide
        i64 = np.int64
        self.lo, self.hi, self.zp = np.asarray(i64(self.qmin)), np.asarray(i64(self.qmax)), np.asarray(i64(self.out_zp))
        # quant's multiply_by_quantized_multiplier(_int64)_inplace steps with their per-channel
        # constants computed here; None where those functions take another path.
        self.steps: tuple | None = None
        m, sh = self.mult, self.shift
        if wide:
            reduced = np.minimum((m + (1 << 15)) >> 16, 0x7FFF)
            total = 15 - sh
            if total.min() >= 1 and total.max() <= 63:
                self.steps = (reduced, np.left_shift(1, total - 1), total)
        elif not np.count_nonzero(m == quant.INT32_MIN) and (m.size > 1 or -31 <= int(sh[0]) <= 31):
            left, right = np.maximum(sh, 0), np.maximum(-sh, 0)
            self.steps = (left if np.count_nonzero(left) else None, m, np.left_shift(1, right), right + 1)
        self.c1, self.c30, self.c31, self.c63 = (np.asarray(i64(v)) for v in (1, 1 << 30, 31, 63))

    def _apply(self, acc: np.ndarray) -> np.ndarray:
        steps = self.steps
        if steps is None or acc.__class__ is not np.ndarray or not acc.ndim or \
                self.mult.size not in (1, acc.shape[-1]):
            if self.wide:
                return quant.multiply_by_quantized_multiplier_int64_inplace(acc, self.mult, self.shift)
            return quant.multiply_by_quantized_multiplier_inplace(acc, self.mult, self.shift)
        if self.wide:
            reduced, half, total = steps
            acc *= reduced
            acc += half
            acc >>= total
            return quant.wrap_int32_inplace(acc)
        left, m, pow_right, right1 = steps
        if left is not None:
            acc <<= left
            quant.wrap_int32_inplace(acc)
        acc *= m
        acc += self.c30
        acc >>= self.c31
        # RoundingDivideByPOT(t, r) = floor((2t + 2**r - [t < 0]) / 2**(r+1))
        neg = acc >> self.c63
        acc <<= self.c1
        acc += pow_right
        acc += neg
        acc >>= right1
        return acc

    def __call__(self, acc: np.ndarray) -> np.ndarray:
        """Requantize `acc`, an int64 array this kernel owns (it is overwritten)."""
        v = self._apply(acc)
        if self.out_zp:
            v += self.zp
        clip_ufunc(v, self.lo, self.hi, out=v)
        return v.astype(self.dtype)


def conv_quantization(node: NodeContext, x_t: Tensor, w_t: Tensor, b_t: Tensor | None, y_t: Tensor,
                      act: int, channels: int) -> tuple[np.ndarray, np.ndarray, int, int, int, int, int]:
    """The quantization Prepare shared by the quantized (depthwise, transposed) convolutions:
    (per-channel multipliers, shifts, input zero point, output zero point, offset added after
    the requantization, qmin, qmax). uint8 is the legacy per-tensor path; int16 needs zero
    points of 0 and requantizes without the offset."""
    xt = x_t.type
    legacy = xt == T_UINT8
    w_scales = filter_scales(node, w_t, channels, allow_per_channel=not legacy)
    in_zp, out_zp = zero_point(x_t), zero_point(y_t)
    if xt == T_INT16 and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("INT16 input and output zero points must be 0")
    mult, shift = conv_multipliers(x_t, w_scales, y_t, legacy, b_t)
    qmin, qmax = quantized_activation_range(act, float(f32_scale(y_t)), out_zp, y_t.dtype)
    return mult, shift, in_zp, out_zp, 0 if xt == T_INT16 else out_zp, int(qmin), int(qmax)


def conv_requantizer(node: NodeContext, x_t: Tensor, w_t: Tensor, b_t: Tensor | None, y_t: Tensor,
                     act: int, channels: int, wide: bool) -> tuple[Requantizer, int, int]:
    """conv_quantization as (Requantizer of the accumulator, input zero point, output zero point)."""
    mult, shift, in_zp, out_zp, offset, qmin, qmax = conv_quantization(node, x_t, w_t, b_t, y_t, act, channels)
    return Requantizer(mult, shift, offset, qmin, qmax, y_t.dtype, wide), in_zp, out_zp


def params_requantizer(p: QuantizedConvParams) -> Requantizer:
    return Requantizer(np.array(p.multiplier), np.array(p.shift), p.output_offset, p.qmin, p.qmax,
                       p.output_dtype, p.wide)


def _neon_round(v: np.ndarray) -> np.ndarray:
    """How LiteRT's x86 build rounds a flat float32 batch in its hybrid quantizers.

    x86 compiles the NEON tensor_utils through NEON_2_SSE: whole 8-value blocks use
    RoundToNearest without vcvtaq, i.e. truncate(v + (v < 0 ? -0.5f : 0.5f)) with a float32
    add, and the leftover tail uses std::round (TfLiteRound).
    """
    post = v.size & ~7
    out = np.empty(v.shape, np.float32)
    head = v[:post]
    np.add(head, np.where(head < 0, np.float32(-0.5), np.float32(0.5)), out=out[:post])
    np.trunc(out[:post], out=out[:post])
    out[post:] = quant.round_half_away(v[post:])
    return out


def symmetric_quantize(xb: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """tensor_utils::SymmetricQuantizeFloats (LiteRT x86: NeonSymmetricQuantizeFloats) of
    one batch: (int8 values, scaling factor)."""
    flat = np.ascontiguousarray(xb, np.float32).reshape(-1)
    lo, hi = np.float32(np.min(flat)), np.float32(np.max(flat))
    rng = np.float32(max(abs(lo), abs(hi)))
    if rng == 0:
        return np.zeros(xb.shape, np.int8), np.float32(1.0)
    sf = np.float32(rng / np.float32(127))
    inv = np.float32(np.float32(127) / rng)
    q = _neon_round(flat * inv)
    return np.clip(q, -127, 127).astype(np.int8).reshape(xb.shape), sf


def asymmetric_quantize(xb: np.ndarray) -> tuple[np.ndarray, np.float32, int]:
    """tensor_utils::AsymmetricQuantizeFloats (LiteRT x86: NeonAsymmetricQuantizeFloats) of
    one batch: (int8 values, scale, offset). The range is a float32 difference, the inverse
    scale 1.0 / double(scale), and the offset is added after rounding."""
    flat = np.ascontiguousarray(xb, np.float32).reshape(-1)
    rmin = min(np.float32(0), np.float32(np.min(flat)))
    rmax = max(np.float32(0), np.float32(np.max(flat)))
    if rmin == rmax:
        return np.zeros(xb.shape, np.int8), np.float32(1.0), 0
    scale = float(np.float32(rmax - rmin)) / 255.0
    lo, hi = float(rmin), float(rmax)
    zp_min = -128.0 - lo / scale
    zp_max = 127.0 - hi / scale
    err_min = 128.0 + abs(lo / scale)
    err_max = 127.0 + abs(hi / scale)
    zp = zp_min if err_min < err_max else zp_max
    if zp <= -128.0:
        offset = -128
    elif zp >= 127.0:
        offset = 127
    else:
        offset = int(quant.round_half_away(np.asarray(zp)))
    sf = np.float32(scale)
    inv = np.float32(1.0 / float(sf)) if sf != 0 else np.float32(0)
    q = _neon_round(flat * inv)
    q += np.float32(offset)
    return np.clip(q, -128, 127).astype(np.int8).reshape(xb.shape), sf, offset


def asymmetric_quantize_batches(x: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """asymmetric_quantize of each batch x[i] of a float32 array: (the values minus their
    batch's offset, as `dtype`; the float32 scaling factors)."""
    xs = np.empty(x.shape, dtype)
    factors = np.empty(x.shape[0], np.float32)
    for i in range(x.shape[0]):
        qb, sf, off = asymmetric_quantize(x[i])
        xs[i] = qb
        if off:
            xs[i] -= dtype(off)
        factors[i] = sf
    return xs, factors



def asymmetric_quantize_int8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """asymmetric_quantize of each batch x[i] of a float32 array, kept as int8: (values, float32
    scaling factors, int32 offsets); value - offset is what asymmetric_quantize_batches holds."""
    q = np.empty(x.shape, np.int8)
    factors = np.empty(x.shape[0], np.float32)
    offsets = np.zeros(x.shape[0], np.int32)
    for i in range(x.shape[0]):
        q[i], factors[i], offsets[i] = asymmetric_quantize(x[i])
    return q, factors, offsets


def symmetric_quantize_int8(x: np.ndarray, scale: np.float32) -> tuple[np.ndarray, np.ndarray]:
    """symmetric_quantize of each batch x[i]: (int8 values, float32 factors times `scale`)."""
    q = np.empty(x.shape, np.int8)
    factors = np.empty(x.shape[0], np.float32)
    for i in range(x.shape[0]):
        qb, sf = symmetric_quantize(x[i])
        q[i] = qb
        factors[i] = np.float32(sf * scale)
    return q, factors


def finish_float(out: np.ndarray, bias: np.ndarray | None, bounds: tuple[float, float] | None = None
                 ) -> np.ndarray:
    """out += bias (one value per output channel), then the clamp to the fused activation's
    `bounds`, in place in the float result (float32, or float64 while widening)."""
    if bias is not None:
        np.add(out, bias.reshape(-1).astype(out.dtype, copy=False), out=out)
    if bounds is not None:
        t = out.dtype.type
        clip_ufunc(out, t(bounds[0]), t(bounds[1]), out=out)
    return out


def exact_dtype(k_terms: int, max_x: float, max_w: float):
    """float32 when every partial sum of k products stays exactly representable, else float64."""
    bound = float(k_terms) * max_x * max_w
    if bound <= F32_EXACT:
        return np.float32
    if bound > F64_EXACT:
        raise ModelError("convolution accumulator would exceed 2**53")
    return np.float64


def dtype_range(dt) -> tuple[int, int]:
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def max_abs_shifted(dt, zp: int) -> int:
    lo, hi = dtype_range(dt)
    return max(abs(lo - zp), abs(hi - zp))


def check_rank4(node: NodeContext, *ts: Tensor) -> None:
    for t in ts:
        if len(t.shape) != 4:
            raise ModelError(f"tensor '{t.name}' must have rank 4, has shape {list(t.shape)}")



def bias_vector(node: NodeContext, b: Tensor | None, channels: int, allowed: tuple[int, ...]) -> None:
    if b is None:
        return
    if b.type not in allowed:
        x = node.inputs[0]
        raise node.unsupported(f"bias type {b.type_name} is not supported with input type "
                               f"{x.type_name if x is not None else None}")
    if int(np.prod(b.shape)) != channels:
        raise ModelError(f"bias has {int(np.prod(b.shape))} elements for {channels} output channels")


def int16_wide(node: NodeContext, b_t: Tensor | None, channels: int) -> bool:
    """int16x8: int64 accumulator unless quantized_bias_type says INT32 (CONV_2D v8,
    TRANSPOSE_CONV v5); checks the bias against it."""
    qbt = opt(node, "quantized_bias_type", T_FLOAT32)
    if qbt not in (T_FLOAT32, T_INT32, T_INT64):
        raise node.unsupported(f"quantized_bias_type {qbt} is not supported")
    if qbt == T_FLOAT32:
        if b_t is not None and b_t.type == T_INT32:
            # LiteRT would read the int32 bias as int64 (out of bounds): refuse instead.
            raise node.unsupported("INT16 input with INT32 bias needs quantized_bias_type=INT32")
        bias_vector(node, b_t, channels, (T_INT64,))
        return True
    bias_vector(node, b_t, channels, (qbt,))
    return qbt == T_INT64
