"""CONV_2D and DEPTHWISE_CONV_2D reference kernels (LiteRT's tflite/kernels/conv.cc,
depthwise_conv.cc and their reference_ops / reference_integer_ops).

Float CONV_2D is im2col (one strided copy per kernel tap) plus one float32 matmul with the
weights reshaped at prepare; 1x1 stride-1 convolutions are a plain matmul. Quantized
convolutions subtract the input zero point first and pad with 0 (LiteRT skips padded taps,
which is the same as padding with the zero point), accumulate exactly (float32 BLAS when every
partial sum provably stays below 2**24, float64 otherwise), then requantize per channel with
TFLite's fixed-point MultiplyByQuantizedMultiplier. Depthwise convolutions loop over the
kh*kw taps, each tap one vectorized multiply-add over batch, space and channels.

Hybrid kernels (float input, int8 weights) quantize the input per batch exactly as LiteRT's
tensor_utils do, accumulate exactly and rescale in float32. INT4 weights are unpacked to int8
by the model loader and run the int8 code.

The quantized kernels first compute their prepared parameters (`quantized_conv_params`: a
frozen prepared.QuantizedConvParams of zero points, per-channel multipliers and shifts, clamp
range, the filter minus its zero point, the bias) and build run() from that object alone; a
delegate reads the same object through prepared.prepared_params.

These helpers (geometry, requantization, hybrid input quantization, bias and clamp) are also
used by transpose_conv.py; activation ranges and output sizes are common.py's.

While widening (registry.widening, conformance/float64.py) the float paths take FLOAT64 and
compute in it; the hybrid paths stay float32 and refuse a FLOAT64 input.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

import numpy as np

from acelera.core import quant
from acelera.core.errors import ModelError
from acelera.core.kernels.common import (
    SAME,
    check_same_type,
    float_activation_bounds,
    out_size,
    pad_before,
    quantized_activation_range,
)
from acelera.core.kernels.prepared import QuantizedConvParams, frozen_array
from acelera.core.kernels.registry import Kernel, NodeContext, is_float32, register
from acelera.core.model import Tensor

F32_EXACT = float(1 << 24)  # every integer of magnitude <= 2**24 is exact in float32
F64_EXACT = float(1 << 53)

# TensorType codes used for checks.
T_FLOAT32, T_INT32, T_UINT8, T_INT64, T_INT16, T_INT8, T_INT4 = 0, 2, 3, 4, 7, 9, 17
# The filter types each quantized input type takes in (DEPTHWISE_)CONV_2D.
QUANT_FILTER_TYPES = {T_UINT8: (T_UINT8,), T_INT8: (T_INT8, T_INT4), T_INT16: (T_INT8, T_INT4)}


# --- shared helpers --------------------------------------------------------------------------

def opt(node: NodeContext, name: str, default: int) -> int:
    v = node.options.get(name, default)
    return default if v is None else int(v)


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

    def __call__(self, acc: np.ndarray) -> np.ndarray:
        """Requantize `acc`, an int64 array this kernel owns (it is overwritten)."""
        if self.wide:
            v = quant.multiply_by_quantized_multiplier_int64_inplace(acc, self.mult, self.shift)
        else:
            v = quant.multiply_by_quantized_multiplier_inplace(acc, self.mult, self.shift)
        if self.out_zp:
            v += self.out_zp
        np.clip(v, self.qmin, self.qmax, out=v)
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


def finish_float(out: np.ndarray, bias: np.ndarray | None, bounds: tuple[float, float] | None = None
                 ) -> np.ndarray:
    """out += bias (one value per output channel), then the clamp to the fused activation's
    `bounds`, in place in the float result (float32, or float64 while widening)."""
    if bias is not None:
        out += bias.reshape(-1).astype(out.dtype, copy=False)
    if bounds is not None:
        np.clip(out, bounds[0], bounds[1], out=out)
    return out


@dataclass(frozen=True)
class Geometry:
    """Spatial bookkeeping of a (depthwise) convolution: input, taps, output, padding."""

    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    oh: int
    ow: int
    pt: int
    pl: int

    @staticmethod
    def from_options(node: NodeContext, x_shape, kh: int, kw: int) -> "Geometry":
        """The geometry of a (depthwise) CONV_2D node: its strides, dilations and padding."""
        sh, sw = opt(node, "stride_h", 1), opt(node, "stride_w", 1)
        dh, dw = opt(node, "dilation_h_factor", 1), opt(node, "dilation_w_factor", 1)
        if min(sh, sw, dh, dw) <= 0:
            raise ModelError(f"strides ({sh}, {sw}) and dilations ({dh}, {dw}) must be positive")
        return Geometry.make(x_shape, kh, kw, opt(node, "padding", SAME), sh, sw, dh, dw)

    @staticmethod
    def make(x_shape, kh: int, kw: int, padding: int, sh: int, sw: int, dh: int, dw: int) -> "Geometry":
        n, h, w, c = (int(d) for d in x_shape)
        oh = out_size(padding, h, kh, sh, dh)
        ow = out_size(padding, w, kw, sw, dw)
        return Geometry(n, h, w, c, kh, kw, sh, sw, dh, dw, oh, ow,
                        pad_before(h, kh, sh, dh, oh), pad_before(w, kw, sw, dw, ow))

    @property
    def empty(self) -> bool:
        return self.n * self.oh * self.ow == 0

    @property
    def pointwise(self) -> bool:
        """1x1 taps whose windows need no padding: the input (strided) is the im2col matrix."""
        return self.kh == 1 and self.kw == 1 and self.pt == 0 and self.pl == 0

    def pad(self, x: np.ndarray) -> np.ndarray:
        """x padded with zeros just enough for every tap slice to be in range."""
        pb = max((self.oh - 1) * self.sh + (self.kh - 1) * self.dh - self.pt - (self.h - 1), 0)
        pr = max((self.ow - 1) * self.sw + (self.kw - 1) * self.dw - self.pl - (self.w - 1), 0)
        if self.pt == 0 and self.pl == 0 and pb == 0 and pr == 0:
            return x
        xp = np.zeros((x.shape[0], self.h + self.pt + pb, self.w + self.pl + pr, x.shape[3]), x.dtype)
        xp[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w, :] = x
        return xp

    def tap(self, xp: np.ndarray, ky: int, kx: int) -> np.ndarray:
        y0, x0 = ky * self.dh, kx * self.dw
        return xp[:, y0:y0 + (self.oh - 1) * self.sh + 1:self.sh,
                  x0:x0 + (self.ow - 1) * self.sw + 1:self.sw, :]

    def im2col_rows(self, xp: np.ndarray, r0: int, r1: int) -> np.ndarray:
        """im2col (groups == 1) of output rows [r0, r1) only, from the padded input `xp`."""
        rows = r1 - r0
        cols = np.empty((self.n, rows, self.ow, self.kh, self.kw, self.c), xp.dtype)
        for ky in range(self.kh):
            for kx in range(self.kw):
                y0, x0 = ky * self.dh + r0 * self.sh, kx * self.dw
                cols[:, :, :, ky, kx, :] = xp[:, y0:y0 + (rows - 1) * self.sh + 1:self.sh,
                                               x0:x0 + (self.ow - 1) * self.sw + 1:self.sw, :]
        return cols.reshape(self.n * rows * self.ow, self.kh * self.kw * self.c)

    def band(self, xp: np.ndarray, r0: int, r1: int) -> tuple["Geometry", np.ndarray]:
        """The geometry of output rows [r0, r1) and the rows of the padded input `xp` they read."""
        return replace(self, oh=r1 - r0), xp[:, r0 * self.sh:]

    def im2col_bytes(self, itemsize: int) -> int:
        return self.n * self.oh * self.ow * self.kh * self.kw * self.c * itemsize

    def im2col(self, x: np.ndarray, groups: int = 1) -> np.ndarray:
        """(rows, kh*kw*c) patches for groups == 1, else (groups, rows, kh*kw*c/groups);
        x is already in the matmul dtype (and zero-point shifted)."""
        m = self.n * self.oh * self.ow
        if self.pointwise:
            xs = x if self.sh == 1 and self.sw == 1 else self.tap(x, 0, 0)
            if groups == 1:
                return xs.reshape(m, self.c)
            return np.ascontiguousarray(
                xs.reshape(m, groups, self.c // groups).transpose(1, 0, 2))
        xp = self.pad(x)
        if groups == 1:
            cols = np.empty((self.n, self.oh, self.ow, self.kh, self.kw, self.c), x.dtype)
            for ky in range(self.kh):
                for kx in range(self.kw):
                    cols[:, :, :, ky, kx, :] = self.tap(xp, ky, kx)
            return cols.reshape(m, self.kh * self.kw * self.c)
        ci = self.c // groups
        cols = np.empty((groups, self.n, self.oh, self.ow, self.kh, self.kw, ci), x.dtype)
        for ky in range(self.kh):
            for kx in range(self.kw):
                t = self.tap(xp, ky, kx).reshape(self.n, self.oh, self.ow, groups, ci)
                cols[:, :, :, :, ky, kx, :] = t.transpose(3, 0, 1, 2, 4)
        return cols.reshape(groups, m, self.kh * self.kw * ci)


def weight_matrix(w: np.ndarray, groups: int, dtype) -> np.ndarray:
    """OHWI filter -> (kh*kw*i, o) for groups == 1, else (groups, kh*kw*i, o/groups)."""
    o = w.shape[0]
    k = w.shape[1] * w.shape[2] * w.shape[3]
    wm = np.asarray(w).reshape(o, k).astype(dtype)
    if groups == 1:
        return np.ascontiguousarray(wm.T)
    return np.ascontiguousarray(wm.reshape(groups, o // groups, k).transpose(0, 2, 1))


def grouped_matmul(cols: np.ndarray, wm: np.ndarray, groups: int) -> np.ndarray:
    if groups == 1:
        return cols @ wm
    out = np.matmul(cols, wm)  # (groups, rows, o/groups)
    return out.transpose(1, 0, 2).reshape(out.shape[1], -1)


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


def _check_filter_type(node: NodeContext, x_t: Tensor, w_t: Tensor, allowed: tuple[int, ...]) -> None:
    if w_t.type not in allowed:
        raise node.unsupported(f"filter type {w_t.type_name} with {x_t.type_name} input is not supported")


def _conv_tensors(node: NodeContext) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """(input, filter, bias or None, output) of a (depthwise) CONV_2D, input and filter rank 4."""
    x_t, w_t, b_t = node.input(0), node.input(1), node.input(2)
    if x_t is None or w_t is None:
        raise ModelError(f"{node.op.name} needs input and filter tensors")
    check_rank4(node, x_t, w_t)
    return x_t, w_t, b_t, node.outputs[0]


def bias_vector(node: NodeContext, b: Tensor | None, channels: int, allowed: tuple[int, ...]) -> None:
    if b is None:
        return
    if b.type not in allowed:
        x = node.inputs[0]
        raise node.unsupported(f"bias type {b.type_name} is not supported with input type "
                               f"{x.type_name if x is not None else None}")
    if int(np.prod(b.shape)) != channels:
        raise ModelError(f"bias has {int(np.prod(b.shape))} elements for {channels} output channels")


# --- CONV_2D ---------------------------------------------------------------------------------

def _check_conv_2d(node: NodeContext) -> tuple:
    """CONV_2D's checks shared by its float and quantized paths: (input, filter, bias, output,
    geometry, groups, activation, output shape)."""
    x_t, w_t, b_t, y_t = _conv_tensors(node)
    o, kh, kw, ci = (int(d) for d in w_t.shape)
    c = int(x_t.shape[3])
    if min(o, kh, kw, ci) <= 0 or min(x_t.shape[1:]) <= 0:
        raise ModelError(f"CONV_2D has empty input {list(x_t.shape)} or filter {list(w_t.shape)}")
    if c % ci:
        raise ModelError(f"input channels {c} are not a multiple of filter channels {ci}")
    groups = c // ci
    if o % groups:
        raise ModelError(f"{o} filters cannot be split into {groups} groups")
    g = Geometry.from_options(node, x_t.shape, kh, kw)
    act = opt(node, "fused_activation_function", 0)
    out_shape = (g.n, g.oh, g.ow, o)
    check_same_type(node, x_t, y_t)
    return x_t, w_t, b_t, y_t, g, groups, act, out_shape


@register("CONV_2D", max_version=8, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
def conv_2d(node: NodeContext) -> Kernel:
    x_t, w_t, b_t, y_t, g, groups, act, out_shape = _check_conv_2d(node)
    if is_float32(x_t):
        xt, wt = x_t.type, w_t.type
        _check_filter_type(node, x_t, w_t, (xt, T_INT8, T_INT4))
        _hybrid_is_float32(node, x_t, w_t)
        bias_vector(node, b_t, out_shape[3], (xt,))
        if wt == xt:
            return _conv_float(node, g, groups, act, out_shape)
        return _conv_hybrid(node, g, groups, act, out_shape)
    return _conv_quant(node, _conv_2d_params(node, x_t, w_t, b_t, y_t, g, groups, act, out_shape))


def quantized_conv_params(node: NodeContext) -> QuantizedConvParams | None:
    """The prepared parameters of a quantized (DEPTHWISE_)CONV_2D node (None for float or
    hybrid input); raises what the reference kernel's prepare raises."""
    if node.op.name == "DEPTHWISE_CONV_2D":
        x_t, w_t, b_t, y_t, g, mult, act, out_shape = _check_depthwise(node)
        return None if is_float32(x_t) else _dw_params(node, x_t, w_t, b_t, y_t, g, mult, act, out_shape)
    x_t, w_t, b_t, y_t, g, groups, act, out_shape = _check_conv_2d(node)
    return None if is_float32(x_t) else _conv_2d_params(node, x_t, w_t, b_t, y_t, g, groups, act, out_shape)


def _conv_2d_params(node: NodeContext, x_t: Tensor, w_t: Tensor, b_t: Tensor | None, y_t: Tensor,
                    g: Geometry, groups: int, act: int, out_shape) -> QuantizedConvParams:
    xt = x_t.type
    o = out_shape[3]
    if xt not in QUANT_FILTER_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    _check_filter_type(node, x_t, w_t, QUANT_FILTER_TYPES[xt])
    if xt == T_INT16:
        wide = int16_wide(node, b_t, o)
    else:
        bias_vector(node, b_t, o, (T_INT32,))
        wide = False
    legacy = xt == T_UINT8
    if not legacy and np.any(w_t.quantization.zero_point != 0):
        raise node.unsupported("INT8 filter zero points must be 0")
    mult, shift, in_zp, _, offset, qmin, qmax = conv_quantization(node, x_t, w_t, b_t, y_t, act, o)
    w_zp = zero_point(w_t) if legacy else 0
    w_const = node.const(1)
    weights = None if w_const is None else np.asarray(w_const, np.int32) - np.int32(w_zp)
    max_w = (float(np.max(np.abs(weights), initial=0)) if weights is not None
             else float(max_abs_shifted(w_t.dtype, w_zp)))
    exact_dtype(g.kh * g.kw * (g.c // groups), max_abs_shifted(x_t.dtype, in_zp), max_w)  # refuses > 2**53
    return _conv_params(node, "CONV_2D", g, groups, 1, x_t, y_t, out_shape, in_zp, offset, w_zp, mult,
                        shift, qmin, qmax, wide, weights)


def _conv_params(node: NodeContext, op: str, g: Geometry, groups: int, mult: int, x_t: Tensor, y_t: Tensor,
                 out_shape, in_zp: int, offset: int, w_zp: int, multiplier: np.ndarray, shift: np.ndarray,
                 qmin: int, qmax: int, wide: bool, weights: np.ndarray | None) -> QuantizedConvParams:
    b_const = node.const(2)
    frozen_mult, frozen_shift = frozen_array(multiplier, np.int64), frozen_array(shift, np.int64)
    assert frozen_mult is not None and frozen_shift is not None  # frozen_array keeps arrays arrays
    n, h, w, c = (int(d) for d in out_shape)
    return QuantizedConvParams(
        op=op, geometry=g, groups=groups, depth_multiplier=mult, input_dtype=np.dtype(x_t.dtype),
        output_dtype=np.dtype(y_t.dtype), output_shape=(n, h, w, c),
        input_zero_point=int(in_zp), output_offset=int(offset), filter_zero_point=int(w_zp),
        multiplier=frozen_mult, shift=frozen_shift,
        qmin=int(qmin), qmax=int(qmax), wide=bool(wide), weights=frozen_array(weights, np.int32),
        bias=None if b_const is None else frozen_array(np.asarray(b_const).reshape(-1), np.int64),
        bias_from_input=node.input(2) is not None and b_const is None)


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


def _hybrid_is_float32(node: NodeContext, x_t: Tensor, w_t: Tensor) -> None:
    """The hybrid (integer filter) kernels compute in float32: refuse a widened input."""
    if w_t.type != x_t.type and x_t.type != T_FLOAT32:
        raise node.unsupported(f"{w_t.type_name} filter with {x_t.type_name} input is not supported")


def _zero_shape(out_shape, dtype) -> Kernel:
    def run(*_):
        return np.zeros(out_shape, dtype)
    return run


def _conv_float(node: NodeContext, g: Geometry, groups: int, act: int, out_shape) -> Kernel:
    dt = node.outputs[0].dtype
    if g.empty:
        return _zero_shape(out_shape, dt)
    bounds = float_activation_bounds(act)
    w_const = node.const(1)
    wm_const = None if w_const is None else weight_matrix(w_const, groups, dt)
    b_const = node.const(2)

    tiled = groups == 1 and not g.pointwise and g.im2col_bytes(np.dtype(dt).itemsize) > IM2COL_TILE_BYTES

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else weight_matrix(w, groups, dt)
        if tiled:
            out = _tiled_matmul(g, np.asarray(x, dt), wm)
        else:
            cols = g.im2col(np.asarray(x, dt), groups)
            out = grouped_matmul(cols, wm, groups)
        finish_float(out, b_const if b_const is not None else b, bounds)
        return out.reshape(out_shape)
    return run


#: an im2col matrix larger than this is built and multiplied a band of output rows at a time
IM2COL_TILE_BYTES = 64 << 20


def _tiled_matmul(g: Geometry, x: np.ndarray, wm: np.ndarray) -> np.ndarray:
    """im2col @ wm in bands of output rows, so the patch matrix stays under IM2COL_TILE_BYTES."""
    xp = g.pad(x)
    per_row = max(1, g.im2col_bytes(x.dtype.itemsize) // max(g.oh, 1))
    band = max(1, IM2COL_TILE_BYTES // per_row)
    out = np.empty((g.n, g.oh, g.ow, wm.shape[1]), wm.dtype)
    for r0 in range(0, g.oh, band):
        r1 = min(g.oh, r0 + band)
        out[:, r0:r1] = (g.im2col_rows(xp, r0, r1) @ wm).reshape(g.n, r1 - r0, g.ow, wm.shape[1])
    return out.reshape(g.n * g.oh * g.ow, wm.shape[1])


#: bytes per output element a band of the integer (quantized, hybrid) CONV_2D holds besides its
#: patch rows (the matmul result, the int64 accumulator, the requantization's temporaries), and
#: per output element of a DEPTHWISE_CONV_2D band (accumulator, tap product, int64 copy,
#: requantization); core/memory.py's _conv_scratch counts the same
CONV_BAND_ACC_BYTES = 32
DW_BAND_BYTES = 32


def conv_band_row_bytes(g: Geometry, k: int, o: int) -> int:
    """Temporaries of one output row of an integer CONV_2D band (patches counted at 8 bytes)."""
    return g.n * g.ow * (k * 8 + o * CONV_BAND_ACC_BYTES)


def row_bands(g: Geometry, row_bytes: int) -> Iterator[tuple[int, int]]:
    """[r0, r1) bands of output rows whose temporaries (row_bytes a row) stay under IM2COL_TILE_BYTES."""
    band = max(1, IM2COL_TILE_BYTES // max(row_bytes, 1))
    for r0 in range(0, g.oh, band):
        yield r0, min(g.oh, r0 + band)


def _conv_quant(node: NodeContext, p: QuantizedConvParams) -> Kernel:
    g, groups, out_shape = p.geometry, p.groups, p.output_shape
    req = params_requantizer(p)
    if g.empty:
        return _zero_shape(out_shape, p.output_dtype)
    w_t, b_t = node.input(1), node.input(2)
    assert w_t is not None  # _conv_tensors checked the filter
    in_zp, w_zp = p.input_zero_point, p.filter_zero_point
    k = g.kh * g.kw * (g.c // groups)
    max_w = (float(np.max(np.abs(p.weights), initial=0)) if p.weights is not None
             else float(max_abs_shifted(w_t.dtype, w_zp)))
    max_x = max_abs_shifted(p.input_dtype, in_zp)
    ft = exact_dtype(k, max_x, max_w)

    def wmat(w):
        return weight_matrix(np.asarray(w, np.int32) - w_zp, groups, ft)
    wm_const = None if p.weights is None else weight_matrix(p.weights, groups, ft)
    b_const = p.bias
    max_b = float(np.max(np.abs(b_const), initial=0)) if b_const is not None else \
        (0.0 if b_t is None else 2.0 ** 63)
    # The C++ int32 accumulator can only wrap if |sum + bias| may reach 2**31.
    need_wrap = not p.wide and k * max_x * max_w + max_b >= 2.0 ** 31

    o = out_shape[3]
    row_bytes = conv_band_row_bytes(g, k, o)
    tiled = groups == 1 and not g.pointwise and g.oh * row_bytes > IM2COL_TILE_BYTES

    def finish(acc: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        if bias is not None:
            acc += bias.reshape(-1).astype(np.int64)
        if need_wrap:
            quant.wrap_int32_inplace(acc)
        return req(acc)

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else wmat(w)
        xs = x.astype(ft)
        if in_zp:
            xs -= ft(in_zp)
        bias = b_const if b_const is not None else b
        if not tiled:
            acc = grouped_matmul(g.im2col(xs, groups), wm, groups).astype(np.int64)
            return finish(acc, bias).reshape(out_shape)
        xp = g.pad(xs)
        out = np.empty(out_shape, p.output_dtype)
        for r0, r1 in row_bands(g, row_bytes):
            acc = (g.im2col_rows(xp, r0, r1) @ wm).astype(np.int64)
            out[:, r0:r1] = finish(acc, bias).reshape(g.n, r1 - r0, g.ow, o)
        return out
    return run


def _conv_hybrid(node: NodeContext, g: Geometry, groups: int, act: int, out_shape) -> Kernel:
    """Float input, int8 filter: CONV_2D v2 (per-tensor) and v5 (per-channel)."""
    w_t = node.input(1)
    assert w_t is not None  # _conv_tensors checked the filter
    o = out_shape[3]
    scales = quantized_filter_scales(w_t)
    per_channel = scales.size > 1 and bool(np.any(scales != scales[0]))
    if per_channel and (scales.size != o or int(w_t.shape[w_t.quantization.quantized_dimension]) != o):
        raise ModelError(f"filter has {scales.size} scales for {o} output channels")
    if groups != 1 and not per_channel:
        raise node.unsupported("grouped hybrid convolution needs per-channel filter scales")
    bounds = float_activation_bounds(act)
    if g.empty:
        return _zero_shape(out_shape, np.float32)
    k = g.kh * g.kw * (g.c // groups)
    ft = exact_dtype(k, 255.0, 128.0)
    w_const = node.const(1)
    wm_const = None if w_const is None else weight_matrix(w_const, groups, ft)
    b_const = node.const(2)
    ch_scale = scales if per_channel else None
    tensor_scale = np.float32(scales[0])
    row_bytes = conv_band_row_bytes(g, k, o)
    tiled = groups == 1 and not g.pointwise and g.oh * row_bytes > IM2COL_TILE_BYTES

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else weight_matrix(w, groups, ft)
        x = np.asarray(x, np.float32)
        if per_channel:
            xs, factors = asymmetric_quantize_batches(x, ft)
        else:
            xs = np.empty(x.shape, ft)
            factors = np.empty(x.shape[0], np.float32)
            for i in range(x.shape[0]):
                qb, sf = symmetric_quantize(x[i])
                xs[i] = qb
                factors[i] = np.float32(sf * tensor_scale)
        bias = b_const if b_const is not None else b
        if not tiled:
            acc = grouped_matmul(g.im2col(xs, groups), wm, groups)
            return rescale(acc.astype(np.float32, copy=False).reshape(out_shape), factors, bias)
        xp = g.pad(xs)
        out = np.empty(out_shape, np.float32)
        for r0, r1 in row_bands(g, row_bytes):
            acc = (g.im2col_rows(xp, r0, r1) @ wm).astype(np.float32, copy=False)
            out[:, r0:r1] = rescale(acc.reshape(g.n, r1 - r0, g.ow, o), factors, bias)
        return out

    def rescale(acc: np.ndarray, factors: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        if per_channel:
            out = acc * ch_scale
            out *= factors[:, None, None, None]
        else:
            out = acc * factors[:, None, None, None]
        return finish_float(out, bias, bounds)
    return run


# --- DEPTHWISE_CONV_2D -----------------------------------------------------------------------

@register("DEPTHWISE_CONV_2D", max_version=7, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
def depthwise_conv_2d(node: NodeContext) -> Kernel:
    x_t, w_t, b_t, y_t, g, mult, act, out_shape = _check_depthwise(node)
    if is_float32(x_t):
        xt, wt = x_t.type, w_t.type
        bias_vector(node, b_t, out_shape[3], (xt,))
        _check_filter_type(node, x_t, w_t, (xt, T_INT8))
        _hybrid_is_float32(node, x_t, w_t)
        if wt == xt:
            return _dw_float(node, g, mult, act, out_shape)
        return _dw_hybrid(node, g, mult, act, out_shape)
    return _dw_quant(node, _dw_params(node, x_t, w_t, b_t, y_t, g, mult, act, out_shape))


def _check_depthwise(node: NodeContext) -> tuple:
    """DEPTHWISE_CONV_2D's checks shared by its float and quantized paths: (input, filter,
    bias, output, geometry, depth multiplier, activation, output shape)."""
    x_t, w_t, b_t, y_t = _conv_tensors(node)
    one, kh, kw, o = (int(d) for d in w_t.shape)
    c = int(x_t.shape[3])
    if one != 1:
        raise ModelError(f"depthwise filter must have shape [1, kh, kw, c], has {list(w_t.shape)}")
    if min(kh, kw, o) <= 0 or min(x_t.shape[1:]) <= 0:
        raise ModelError(f"DEPTHWISE_CONV_2D has empty input {list(x_t.shape)} or filter {list(w_t.shape)}")
    if o % c:
        raise ModelError(f"filter channels {o} are not a multiple of input channels {c}")
    mult = o // c
    g = Geometry.from_options(node, x_t.shape, kh, kw)
    act = opt(node, "fused_activation_function", 0)
    out_shape = (g.n, g.oh, g.ow, o)
    check_same_type(node, x_t, y_t)
    xt, wt = x_t.type, w_t.type
    if xt in (T_INT16,) or (xt == T_FLOAT32 and wt == T_INT8):
        # These LiteRT kernels index channels with the depth_multiplier *option*.
        dm = opt(node, "depth_multiplier", 1)
        if dm != mult:
            raise node.unsupported(f"depth_multiplier option {dm} does not match the filter "
                                   f"({o} channels for {c} input channels)")
    return x_t, w_t, b_t, y_t, g, mult, act, out_shape


def _dw_params(node: NodeContext, x_t: Tensor, w_t: Tensor, b_t: Tensor | None, y_t: Tensor, g: Geometry,
               mult: int, act: int, out_shape) -> QuantizedConvParams:
    xt = x_t.type
    o = out_shape[3]
    if xt not in QUANT_FILTER_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    _check_filter_type(node, x_t, w_t, QUANT_FILTER_TYPES[xt])
    bias_vector(node, b_t, o, (T_INT64,) if xt == T_INT16 else (T_INT32,))
    multiplier, shift, in_zp, _, offset, qmin, qmax = conv_quantization(node, x_t, w_t, b_t, y_t, act, o)
    w_zp = zero_point(w_t) if xt == T_UINT8 else 0  # int8/int16: LiteRT uses weights_offset = 0
    w_const = node.const(1)
    weights = None if w_const is None else np.asarray(w_const[0], np.int32) - np.int32(w_zp)
    return _conv_params(node, "DEPTHWISE_CONV_2D", g, 1, mult, x_t, y_t, out_shape, in_zp, offset, w_zp,
                        multiplier, shift, qmin, qmax, xt == T_INT16, weights)


def _dw_taps(g: Geometry, xp: np.ndarray, w: np.ndarray, acc_dtype) -> np.ndarray:
    """sum over taps of tap(xp) * w[ky, kx]; w is (kh, kw, channels) in acc_dtype."""
    acc = None
    tmp = None
    for ky in range(g.kh):
        for kx in range(g.kw):
            t = g.tap(xp, ky, kx)
            if acc is None:
                acc = np.multiply(t, w[ky, kx], dtype=acc_dtype)
                tmp = np.empty_like(acc)
            else:
                np.multiply(t, w[ky, kx], out=tmp, dtype=acc_dtype)
                acc += tmp
    assert acc is not None  # kh, kw >= 1 (_check_depthwise)
    return acc


def _dw_run(g: Geometry, xp: np.ndarray, w: np.ndarray, acc_dtype, out_shape: tuple[int, int, int, int],
            out_dtype, finish: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """finish(sum of the taps), whole, or a band of output rows at a time when the temporaries
    (DW_BAND_BYTES per output element) would exceed IM2COL_TILE_BYTES."""
    row_bytes = g.n * g.ow * out_shape[3] * DW_BAND_BYTES
    if g.oh * row_bytes <= IM2COL_TILE_BYTES:
        return finish(_dw_taps(g, xp, w, acc_dtype))
    out = np.empty(out_shape, out_dtype)
    for r0, r1 in row_bands(g, row_bytes):
        gb, xb = g.band(xp, r0, r1)
        out[:, r0:r1] = finish(_dw_taps(gb, xb, w, acc_dtype))
    return out


def _expand(x: np.ndarray, mult: int) -> np.ndarray:
    return x if mult == 1 else np.repeat(x, mult, axis=3)


def _dw_float(node: NodeContext, g: Geometry, mult: int, act: int, out_shape) -> Kernel:
    dt = node.outputs[0].dtype
    if g.empty:
        return _zero_shape(out_shape, dt)
    bounds = float_activation_bounds(act)
    w_const = node.const(1)
    wc = None if w_const is None else np.ascontiguousarray(w_const[0], dt)
    b_const = node.const(2)

    def run(x, w, b=None):
        wk = wc if wc is not None else np.asarray(w[0], dt)
        xp = g.pad(_expand(np.asarray(x, dt), mult))
        bias = b_const if b_const is not None else b
        return _dw_run(g, xp, wk, dt, out_shape, dt, lambda acc: finish_float(acc, bias, bounds))
    return run


def _dw_quant(node: NodeContext, p: QuantizedConvParams) -> Kernel:
    g, mult, wide = p.geometry, p.depth_multiplier, p.wide
    req = params_requantizer(p)
    in_zp, w_zp = p.input_zero_point, p.filter_zero_point
    if g.empty:
        return _zero_shape(p.output_shape, p.output_dtype)
    # int32 taps are exact while kh*kw products fit; the int16 path accumulates in int64.
    w_t = node.input(1)
    assert w_t is not None  # _conv_tensors checked the filter
    bound = g.kh * g.kw * max_abs_shifted(p.input_dtype, in_zp) * max_abs_shifted(w_t.dtype, w_zp)
    acc_t = np.int32 if (not wide or bound < 2 ** 31) else np.int64

    def wtaps(w):
        return np.ascontiguousarray(np.asarray(w[0], acc_t) - acc_t(w_zp))
    wc = None if p.weights is None else np.ascontiguousarray(p.weights, acc_t)
    b_const = p.bias

    def run(x, w, b=None):
        wk = wc if wc is not None else wtaps(w)
        xs = x.astype(acc_t)
        if in_zp:
            xs -= acc_t(in_zp)
        bias = b_const if b_const is not None else b

        def finish(acc: np.ndarray) -> np.ndarray:
            if wide:
                acc = acc.astype(np.int64)
                if bias is not None:
                    acc += bias.reshape(-1).astype(np.int64)
            else:
                if bias is not None:
                    acc += bias.reshape(-1).astype(np.int32)  # wraps like the C++ int32 accumulator
                acc = acc.astype(np.int64)
            return req(acc)
        return _dw_run(g, g.pad(_expand(xs, mult)), wk, acc_t, p.output_shape, p.output_dtype, finish)
    return run


def _dw_hybrid(node: NodeContext, g: Geometry, mult: int, act: int, out_shape) -> Kernel:
    """Float input, int8 filter: DEPTHWISE_CONV_2D v4/v6 (always per-channel scales)."""
    w_t = node.input(1)
    assert w_t is not None  # _conv_tensors checked the filter
    o = out_shape[3]
    scales = quantized_filter_scales(w_t)
    if scales.size != o:
        # LiteRT indexes the scales by output channel (reads past a single per-tensor scale).
        raise node.unsupported(f"hybrid depthwise needs {o} per-channel filter scales, has {scales.size}")
    bounds = float_activation_bounds(act)
    if g.empty:
        return _zero_shape(out_shape, np.float32)
    w_const = node.const(1)
    wc = None if w_const is None else np.ascontiguousarray(w_const[0], np.int32)
    b_const = node.const(2)

    def run(x, w, b=None):
        wk = wc if wc is not None else np.asarray(w[0], np.int32)
        xs, factors = asymmetric_quantize_batches(np.asarray(x, np.float32), np.int32)
        bias = b_const if b_const is not None else b

        def finish(acc: np.ndarray) -> np.ndarray:
            out = acc.astype(np.float32)
            out *= scales[None, None, None, :] * factors[:, None, None, None]
            return finish_float(out, bias, bounds)
        return _dw_run(g, g.pad(_expand(xs, mult)), wk, np.int32, out_shape, np.float32, finish)
    return run
