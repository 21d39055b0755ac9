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

These helpers (geometry, activation ranges, requantization, hybrid input quantization) are
also used by transpose_conv.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acelera.core import quant
from acelera.core.errors import ModelError
from acelera.core.kernels.common import RELU, RELU6, RELU_N1_TO_1, SAME, VALID
from acelera.core.kernels.registry import Kernel, NodeContext, register
from acelera.core.model import Tensor

FLT_MAX = float(np.finfo(np.float32).max)
F32_EXACT = float(1 << 24)  # every integer of magnitude <= 2**24 is exact in float32
F64_EXACT = float(1 << 53)

# TensorType codes used for checks.
T_FLOAT32, T_INT32, T_UINT8, T_INT64, T_INT16, T_INT8, T_INT4 = 0, 2, 3, 4, 7, 9, 17


# --- shared helpers --------------------------------------------------------------------------

def float_act_bounds(act: int) -> tuple[float, float]:
    """TFLite's CalculateActivationRange: NONE (and TANH, SIGN_BIT) clamp to +-FLT_MAX."""
    if act == RELU:
        return 0.0, FLT_MAX
    if act == RELU6:
        return 0.0, 6.0
    if act == RELU_N1_TO_1:
        return -1.0, 1.0
    return -FLT_MAX, FLT_MAX


def quant_act_bounds(act: int, scale: float, zero_point: int, dtype) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized, with std::round done exactly."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)
    s = np.float32(scale)

    def q(f: float) -> int:
        with np.errstate(all="ignore"):
            v = quant.round_half_away(np.float32(f) / s)
        if not np.isfinite(v) or not (-2.0 ** 31 <= float(v) <= 2.0 ** 31 - 1):
            raise ModelError(f"output scale {scale} cannot represent the fused activation range")
        return int(zero_point) + int(v)

    if act == RELU:
        return max(qmin, q(0.0)), qmax
    if act == RELU6:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if act == RELU_N1_TO_1:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    return qmin, qmax


def out_size(padding: int, size: int, filt: int, stride: int, dilation: int) -> int:
    """TFLite's ComputeOutSizeChecked (C++ division truncates toward zero)."""
    eff = (filt - 1) * dilation + 1
    if padding == SAME:
        num = size + stride - 1
    elif padding == VALID:
        num = size + stride - eff
    else:
        raise ModelError(f"unknown padding {padding}")
    value = num // stride if num >= 0 else -((-num) // stride)
    if value < 0:
        raise ModelError(f"negative output size for input {size}, filter {filt}, stride {stride}")
    return value


def pad_before(size: int, filt: int, stride: int, dilation: int, out: int) -> int:
    """TFLite's ComputePaddingWithOffset: total padding // 2 (the offset goes after)."""
    eff = (filt - 1) * dilation + 1
    return max((out - 1) * stride + eff - size, 0) // 2


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


def filter_scales(node: NodeContext, w: Tensor, channels: int, qdim_size: int,
                  allow_per_channel: bool) -> np.ndarray:
    """The filter scales broadcast to `channels` (PopulateConvolutionQuantizationParams)."""
    q = w.quantization
    if not q.is_set:
        raise ModelError(f"filter '{w.name}' needs quantization parameters")
    scales = np.asarray(q.scale, np.float32)
    if scales.size > 1:
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


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap, in place, of int64 values to int32 (the C++ int32 accumulators)."""
    x += 1 << 31
    x &= 0xFFFFFFFF
    x -= 1 << 31
    return x


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
    rmin, rmax = float(rmin), float(rmax)
    zp_min = -128.0 - rmin / scale
    zp_max = 127.0 - rmax / scale
    err_min = 128.0 + abs(rmin / scale)
    err_max = 127.0 + abs(rmax / scale)
    zp = zp_min if err_min < err_max else zp_max
    if zp <= -128.0:
        offset = -128
    elif zp >= 127.0:
        offset = 127
    else:
        offset = int(quant._round_away(zp))
    sf = np.float32(scale)
    inv = np.float32(1.0 / float(sf)) if sf != 0 else np.float32(0)
    q = _neon_round(flat * inv)
    q += np.float32(offset)
    return np.clip(q, -128, 127).astype(np.int8).reshape(xb.shape), sf, offset


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


def bias_vector(node: NodeContext, b: Tensor | None, channels: int, allowed: tuple[int, ...]) -> None:
    if b is None:
        return
    if b.type not in allowed:
        raise node.unsupported(f"bias type {b.type_name} is not supported with input type "
                               f"{node.inputs[0].type_name}")
    if int(np.prod(b.shape)) != channels:
        raise ModelError(f"bias has {int(np.prod(b.shape))} elements for {channels} output channels")


# --- CONV_2D ---------------------------------------------------------------------------------

@register("CONV_2D", max_version=8)
def conv_2d(node: NodeContext) -> Kernel:
    x_t, w_t, b_t = node.input(0), node.input(1), node.input(2)
    y_t = node.outputs[0]
    if x_t is None or w_t is None:
        raise ModelError("CONV_2D needs input and filter tensors")
    check_rank4(node, x_t, w_t)
    o, kh, kw, ci = (int(d) for d in w_t.shape)
    c = int(x_t.shape[3])
    if min(o, kh, kw, ci) <= 0 or min(x_t.shape[1:]) <= 0:
        raise ModelError(f"CONV_2D has empty input {list(x_t.shape)} or filter {list(w_t.shape)}")
    if c % ci:
        raise ModelError(f"input channels {c} are not a multiple of filter channels {ci}")
    groups = c // ci
    if o % groups:
        raise ModelError(f"{o} filters cannot be split into {groups} groups")
    sh, sw = opt(node, "stride_h", 1), opt(node, "stride_w", 1)
    dh, dw = opt(node, "dilation_h_factor", 1), opt(node, "dilation_w_factor", 1)
    if min(sh, sw, dh, dw) <= 0:
        raise ModelError(f"strides ({sh}, {sw}) and dilations ({dh}, {dw}) must be positive")
    act = opt(node, "fused_activation_function", 0)
    g = Geometry.make(x_t.shape, kh, kw, opt(node, "padding", SAME), sh, sw, dh, dw)
    out_shape = (g.n, g.oh, g.ow, o)
    xt, wt = x_t.type, w_t.type
    if y_t.type != xt:
        raise node.unsupported(f"output type {y_t.type_name} differs from input type {x_t.type_name}")

    if xt == T_FLOAT32:
        if wt == T_FLOAT32:
            bias_vector(node, b_t, o, (T_FLOAT32,))
            return _conv_float(node, g, groups, act, out_shape)
        if wt in (T_INT8, T_INT4):
            bias_vector(node, b_t, o, (T_FLOAT32,))
            return _conv_hybrid(node, g, groups, act, out_shape)
        raise node.unsupported(f"filter type {w_t.type_name} with FLOAT32 input is not supported")
    if xt == T_UINT8:
        if wt != T_UINT8:
            raise node.unsupported(f"filter type {w_t.type_name} with UINT8 input is not supported")
        bias_vector(node, b_t, o, (T_INT32,))
        return _conv_quant(node, g, groups, act, out_shape, wide=False)
    if xt == T_INT8:
        if wt not in (T_INT8, T_INT4):
            raise node.unsupported(f"filter type {w_t.type_name} with INT8 input is not supported")
        bias_vector(node, b_t, o, (T_INT32,))
        return _conv_quant(node, g, groups, act, out_shape, wide=False)
    if xt == T_INT16:
        if wt not in (T_INT8, T_INT4):
            raise node.unsupported(f"filter type {w_t.type_name} with INT16 input is not supported")
        return _conv_quant(node, g, groups, act, out_shape, wide=_int16_wide(node, b_t, o))
    raise node.unsupported(f"input type {x_t.type_name} is not supported")


def _int16_wide(node: NodeContext, b_t: Tensor | None, channels: int) -> bool:
    """int16x8: int64 accumulator unless quantized_bias_type says INT32 (CONV_2D v8)."""
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


def _zero_shape(out_shape, dtype) -> Kernel:
    def run(*_):
        return np.zeros(out_shape, dtype)
    return run


def _conv_float(node: NodeContext, g: Geometry, groups: int, act: int, out_shape) -> Kernel:
    if g.empty:
        return _zero_shape(out_shape, np.float32)
    lo, hi = float_act_bounds(act)
    w_const = node.const(1)
    wm_const = None if w_const is None else weight_matrix(w_const, groups, np.float32)
    b_const = node.const(2)

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else weight_matrix(w, groups, np.float32)
        cols = g.im2col(np.asarray(x, np.float32), groups)
        out = grouped_matmul(cols, wm, groups)
        bias = b_const if b_const is not None else b
        if bias is not None:
            out += bias.reshape(-1).astype(np.float32, copy=False)
        np.clip(out, lo, hi, out=out)
        return out.reshape(out_shape)
    return run


def _conv_quant(node: NodeContext, g: Geometry, groups: int, act: int, out_shape, wide: bool) -> Kernel:
    x_t, w_t, b_t, y_t = node.input(0), node.input(1), node.input(2), node.outputs[0]
    xt = x_t.type
    o = out_shape[3]
    legacy = xt == T_UINT8
    w_scales = filter_scales(node, w_t, o, int(w_t.shape[w_t.quantization.quantized_dimension])
                             if w_t.quantization.quantized_dimension < 4 else -1,
                             allow_per_channel=not legacy)
    in_zp, out_zp = zero_point(x_t), zero_point(y_t)
    w_zp = 0
    if legacy:
        w_zp = zero_point(w_t)
    elif np.any(w_t.quantization.zero_point != 0):
        raise node.unsupported("INT8 filter zero points must be 0")
    if xt == T_INT16 and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("INT16 input and output zero points must be 0")
    mult, shift = conv_multipliers(x_t, w_scales, y_t, legacy, b_t)
    qmin, qmax = quant_act_bounds(act, float(f32_scale(y_t)), out_zp, y_t.dtype)
    req = Requantizer(mult, shift, 0 if xt == T_INT16 else out_zp, qmin, qmax, y_t.dtype, wide)
    if g.empty:
        return _zero_shape(out_shape, y_t.dtype)

    k = g.kh * g.kw * (g.c // groups)
    w_const = node.const(1)
    max_w = (float(np.max(np.abs(w_const.astype(np.int64) - w_zp), initial=0))
             if w_const is not None else float(max_abs_shifted(w_t.dtype, w_zp)))
    ft = exact_dtype(k, max_abs_shifted(x_t.dtype, in_zp), max_w)

    def wmat(w):
        return weight_matrix(np.asarray(w, np.int32) - w_zp, groups, ft)
    wm_const = None if w_const is None else wmat(w_const)
    b_const = node.const(2)
    max_b = float(np.max(np.abs(b_const.astype(np.int64)), initial=0)) if b_const is not None else \
        (0.0 if b_t is None else 2.0 ** 63)
    # The C++ int32 accumulator can only wrap if |sum + bias| may reach 2**31.
    need_wrap = not wide and k * max_abs_shifted(x_t.dtype, in_zp) * max_w + max_b >= 2.0 ** 31

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else wmat(w)
        xs = x.astype(ft)
        if in_zp:
            xs -= ft(in_zp)
        acc = grouped_matmul(g.im2col(xs, groups), wm, groups).astype(np.int64)
        bias = b_const if b_const is not None else b
        if bias is not None:
            acc += bias.reshape(-1).astype(np.int64)
        if need_wrap:
            wrap_int32(acc)
        return req(acc).reshape(out_shape)
    return run


def _conv_hybrid(node: NodeContext, g: Geometry, groups: int, act: int, out_shape) -> Kernel:
    """Float input, int8 filter: CONV_2D v2 (per-tensor) and v5 (per-channel)."""
    w_t = node.input(1)
    o = out_shape[3]
    q = w_t.quantization
    if not q.is_set:
        raise ModelError(f"filter '{w_t.name}' needs quantization parameters")
    scales = np.asarray(q.scale, np.float32)
    per_channel = scales.size > 1 and bool(np.any(scales != scales[0]))
    if per_channel and (scales.size != o or int(w_t.shape[q.quantized_dimension]) != o):
        raise ModelError(f"filter has {scales.size} scales for {o} output channels")
    if groups != 1 and not per_channel:
        raise node.unsupported("grouped hybrid convolution needs per-channel filter scales")
    lo, hi = float_act_bounds(act)
    if g.empty:
        return _zero_shape(out_shape, np.float32)
    k = g.kh * g.kw * (g.c // groups)
    ft = exact_dtype(k, 255.0, 128.0)
    w_const = node.const(1)
    wm_const = None if w_const is None else weight_matrix(w_const, groups, ft)
    b_const = node.const(2)
    ch_scale = scales if per_channel else None
    tensor_scale = np.float32(scales[0])

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else weight_matrix(w, groups, ft)
        x = np.asarray(x, np.float32)
        n = x.shape[0]
        xs = np.empty(x.shape, ft)
        factors = np.empty(n, np.float32)
        for i in range(n):
            if per_channel:
                qb, sf, off = asymmetric_quantize(x[i])
                xs[i] = qb
                if off:
                    xs[i] -= ft(off)
            else:
                qb, sf = symmetric_quantize(x[i])
                xs[i] = qb
                sf = np.float32(sf * tensor_scale)
            factors[i] = sf
        acc = grouped_matmul(g.im2col(xs, groups), wm, groups)
        acc = acc.astype(np.float32, copy=False).reshape(out_shape)
        if per_channel:
            out = acc * ch_scale
            out *= factors[:, None, None, None]
        else:
            out = acc * factors[:, None, None, None]
        bias = b_const if b_const is not None else b
        if bias is not None:
            out += bias.reshape(-1).astype(np.float32, copy=False)
        np.clip(out, lo, hi, out=out)
        return out
    return run


# --- DEPTHWISE_CONV_2D -----------------------------------------------------------------------

@register("DEPTHWISE_CONV_2D", max_version=7)
def depthwise_conv_2d(node: NodeContext) -> Kernel:
    x_t, w_t, b_t = node.input(0), node.input(1), node.input(2)
    y_t = node.outputs[0]
    if x_t is None or w_t is None:
        raise ModelError("DEPTHWISE_CONV_2D needs input and filter tensors")
    check_rank4(node, x_t, w_t)
    one, kh, kw, o = (int(d) for d in w_t.shape)
    c = int(x_t.shape[3])
    if one != 1:
        raise ModelError(f"depthwise filter must have shape [1, kh, kw, c], has {list(w_t.shape)}")
    if min(kh, kw, o) <= 0 or min(x_t.shape[1:]) <= 0:
        raise ModelError(f"DEPTHWISE_CONV_2D has empty input {list(x_t.shape)} or filter {list(w_t.shape)}")
    if o % c:
        raise ModelError(f"filter channels {o} are not a multiple of input channels {c}")
    mult = o // c
    sh, sw = opt(node, "stride_h", 1), opt(node, "stride_w", 1)
    dh, dw = opt(node, "dilation_h_factor", 1), opt(node, "dilation_w_factor", 1)
    if min(sh, sw, dh, dw) <= 0:
        raise ModelError(f"strides ({sh}, {sw}) and dilations ({dh}, {dw}) must be positive")
    act = opt(node, "fused_activation_function", 0)
    g = Geometry.make(x_t.shape, kh, kw, opt(node, "padding", SAME), sh, sw, dh, dw)
    out_shape = (g.n, g.oh, g.ow, o)
    xt, wt = x_t.type, w_t.type
    if y_t.type != xt:
        raise node.unsupported(f"output type {y_t.type_name} differs from input type {x_t.type_name}")
    if xt in (T_INT16,) or (xt == T_FLOAT32 and wt == T_INT8):
        # These LiteRT kernels index channels with the depth_multiplier *option*.
        dm = opt(node, "depth_multiplier", 1)
        if dm != mult:
            raise node.unsupported(f"depth_multiplier option {dm} does not match the filter "
                                   f"({o} channels for {c} input channels)")

    if xt == T_FLOAT32:
        bias_vector(node, b_t, o, (T_FLOAT32,))
        if wt == T_FLOAT32:
            return _dw_float(node, g, mult, act, out_shape)
        if wt == T_INT8:
            return _dw_hybrid(node, g, mult, act, out_shape)
        raise node.unsupported(f"filter type {w_t.type_name} with FLOAT32 input is not supported")
    if xt == T_UINT8:
        if wt != T_UINT8:
            raise node.unsupported(f"filter type {w_t.type_name} with UINT8 input is not supported")
        bias_vector(node, b_t, o, (T_INT32,))
        return _dw_quant(node, g, mult, act, out_shape)
    if xt == T_INT8:
        if wt not in (T_INT8, T_INT4):
            raise node.unsupported(f"filter type {w_t.type_name} with INT8 input is not supported")
        bias_vector(node, b_t, o, (T_INT32,))
        return _dw_quant(node, g, mult, act, out_shape)
    if xt == T_INT16:
        if wt not in (T_INT8, T_INT4):
            raise node.unsupported(f"filter type {w_t.type_name} with INT16 input is not supported")
        bias_vector(node, b_t, o, (T_INT64,))
        return _dw_quant(node, g, mult, act, out_shape)
    raise node.unsupported(f"input type {x_t.type_name} is not supported")


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
    return acc


def _expand(x: np.ndarray, mult: int) -> np.ndarray:
    return x if mult == 1 else np.repeat(x, mult, axis=3)


def _dw_float(node: NodeContext, g: Geometry, mult: int, act: int, out_shape) -> Kernel:
    if g.empty:
        return _zero_shape(out_shape, np.float32)
    lo, hi = float_act_bounds(act)
    w_const = node.const(1)
    wc = None if w_const is None else np.ascontiguousarray(w_const[0], np.float32)
    b_const = node.const(2)

    def run(x, w, b=None):
        wk = wc if wc is not None else np.asarray(w[0], np.float32)
        xp = g.pad(_expand(np.asarray(x, np.float32), mult))
        out = _dw_taps(g, xp, wk, np.float32)
        bias = b_const if b_const is not None else b
        if bias is not None:
            out += bias.reshape(-1).astype(np.float32, copy=False)
        np.clip(out, lo, hi, out=out)
        return out
    return run


def _dw_quant(node: NodeContext, g: Geometry, mult: int, act: int, out_shape) -> Kernel:
    x_t, w_t, b_t, y_t = node.input(0), node.input(1), node.input(2), node.outputs[0]
    xt = x_t.type
    o = out_shape[3]
    legacy = xt == T_UINT8
    qd = w_t.quantization.quantized_dimension
    w_scales = filter_scales(node, w_t, o, int(w_t.shape[qd]) if 0 <= qd < 4 else -1,
                             allow_per_channel=not legacy)
    in_zp, out_zp = zero_point(x_t), zero_point(y_t)
    w_zp = zero_point(w_t) if legacy else 0  # int8/int16: LiteRT uses weights_offset = 0
    wide = xt == T_INT16
    if wide and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("INT16 input and output zero points must be 0")
    m_, s_ = conv_multipliers(x_t, w_scales, y_t, legacy, b_t)
    qmin, qmax = quant_act_bounds(act, float(f32_scale(y_t)), out_zp, y_t.dtype)
    req = Requantizer(m_, s_, 0 if wide else out_zp, qmin, qmax, y_t.dtype, wide)
    if g.empty:
        return _zero_shape(out_shape, y_t.dtype)
    # int32 taps are exact while kh*kw products fit; the int16 path accumulates in int64.
    bound = g.kh * g.kw * max_abs_shifted(x_t.dtype, in_zp) * max_abs_shifted(w_t.dtype, w_zp)
    acc_t = np.int32 if (not wide or bound < 2 ** 31) else np.int64
    w_const = node.const(1)

    def wtaps(w):
        return np.ascontiguousarray(np.asarray(w[0], acc_t) - acc_t(w_zp))
    wc = None if w_const is None else wtaps(w_const)
    b_const = node.const(2)

    def run(x, w, b=None):
        wk = wc if wc is not None else wtaps(w)
        xs = x.astype(acc_t)
        if in_zp:
            xs -= acc_t(in_zp)
        acc = _dw_taps(g, g.pad(_expand(xs, mult)), wk, acc_t)
        bias = b_const if b_const is not None else b
        if wide:
            acc = acc.astype(np.int64)
            if bias is not None:
                acc += bias.reshape(-1).astype(np.int64)
        else:
            if bias is not None:
                acc += bias.reshape(-1).astype(np.int32)  # wraps like the C++ int32 accumulator
            acc = acc.astype(np.int64)
        return req(acc)
    return run


def _dw_hybrid(node: NodeContext, g: Geometry, mult: int, act: int, out_shape) -> Kernel:
    """Float input, int8 filter: DEPTHWISE_CONV_2D v4/v6 (always per-channel scales)."""
    w_t = node.input(1)
    o = out_shape[3]
    q = w_t.quantization
    if not q.is_set:
        raise ModelError(f"filter '{w_t.name}' needs quantization parameters")
    scales = np.asarray(q.scale, np.float32)
    if scales.size != o:
        # LiteRT indexes the scales by output channel (reads past a single per-tensor scale).
        raise node.unsupported(f"hybrid depthwise needs {o} per-channel filter scales, has {scales.size}")
    lo, hi = float_act_bounds(act)
    if g.empty:
        return _zero_shape(out_shape, np.float32)
    w_const = node.const(1)
    wc = None if w_const is None else np.ascontiguousarray(w_const[0], np.int32)
    b_const = node.const(2)

    def run(x, w, b=None):
        wk = wc if wc is not None else np.asarray(w[0], np.int32)
        x = np.asarray(x, np.float32)
        n = x.shape[0]
        xs = np.empty(x.shape, np.int32)
        factors = np.empty(n, np.float32)
        for i in range(n):
            qb, sf, off = asymmetric_quantize(x[i])
            xs[i] = qb
            xs[i] -= off
            factors[i] = sf
        acc = _dw_taps(g, g.pad(_expand(xs, mult)), wk, np.int32)
        out = acc.astype(np.float32)
        out *= scales[None, None, None, :] * factors[:, None, None, None]
        bias = b_const if b_const is not None else b
        if bias is not None:
            out += bias.reshape(-1).astype(np.float32, copy=False)
        np.clip(out, lo, hi, out=out)
        return out
    return run
