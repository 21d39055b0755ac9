"""TRANSPOSE_CONV and MediaPipe's custom op Convolution2DTransposeBias.

LiteRT: tflite/kernels/transpose_conv.cc with reference_ops::TransposeConv,
reference_integer_ops::TransposeConv and reference_ops::HybridTransposeConv. MediaPipe:
mediapipe/util/tflite/operations/transpose_conv_bias.cc (float only; inputs (input, OHWI
weights, bias); custom_options hold a raw TfLiteTransposeConvParams {padding, stride_width,
stride_height} as three little-endian int32, padding 1 = SAME, 2 = VALID).

Computation: one matmul input (n*h*w, i) x weights (i, kh*kw*o) gives every tap's
contribution, then col2im adds the kh*kw strided slices into the (padded) output and crops
the padding. Where that product would exceed core.memory.TILE_BYTES it is built for one box
of input pixels at a time (core/memory.py counts one tile). Quantized variants accumulate exact
integers (float32 or float64 BLAS as the bound allows) and requantize like CONV_2D. While
widening (registry.widening) the float paths take FLOAT64 and compute in it; the hybrid path
stays float32.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from acelera.core import quant
from acelera.core.errors import ModelError
from acelera.core.kernels import tiling
from acelera.core.kernels.common import SAME, check_same_type, float_activation_bounds, out_size
from acelera.core.kernels.conv import (
    T_FLOAT32,
    T_INT8,
    T_INT16,
    T_INT32,
    T_UINT8,
    asymmetric_quantize_batches,
    bias_vector,
    check_rank4,
    conv_requantizer,
    exact_dtype,
    finish_float,
    int16_wide,
    max_abs_shifted,
    opt,
    zero_point,
)
from acelera.core.kernels.registry import Kernel, NodeContext, is_float32, register


@dataclass(frozen=True)
class TGeometry:
    """Transposed convolution geometry: input (n, h, w, i) scattered into (n, oh, ow, o)."""

    n: int
    h: int
    w: int
    kh: int
    kw: int
    sh: int
    sw: int
    oh: int
    ow: int
    pt: int
    pl: int
    o: int

    def scatter(self, x: np.ndarray, wt: np.ndarray,
                prep: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """x (n, h, w, i) times wt (i, kh*kw*o), col2im'd: (n, oh, ow, o) sums before bias.

        The (pixels, kh*kw*o) product is built one box of input pixels at a time, at most
        core.memory.TILE_BYTES each (all of x in one box when it fits); `prep` turns a box of x
        into wt's dtype (default: a cast)."""
        kh, kw, o, sh, sw = self.kh, self.kw, self.o, self.sh, self.sw
        prep = prep or (lambda v: np.asarray(v, wt.dtype))
        tiles = list(tiling.boxes((self.n, self.h, self.w), kh * kw * o * wt.dtype.itemsize))
        if len(tiles) == 1 and kh == kw == sh == sw == 1 and self.pt == self.pl == 0 \
                and self.oh == self.h and self.ow == self.w:
            return (prep(x).reshape(-1, wt.shape[0]) @ wt).reshape(self.n, self.h, self.w, o)
        fh = max((self.h - 1) * sh + kh, self.pt + self.oh)
        fw = max((self.w - 1) * sw + kw, self.pl + self.ow)
        full = np.zeros((self.n, fh, fw, o), wt.dtype)
        for bn, by, bx in tiles:
            xb = prep(x[bn, by, bx])
            cols = (xb.reshape(-1, wt.shape[0]) @ wt).reshape(xb.shape[:3] + (kh, kw, o))
            ys, xs = (by.stop - by.start - 1) * sh + 1, (bx.stop - bx.start - 1) * sw + 1
            for ky in range(kh):
                y0 = by.start * sh + ky
                for kx in range(kw):
                    x0 = bx.start * sw + kx
                    full[bn, y0:y0 + ys:sh, x0:x0 + xs:sw, :] += cols[:, :, :, ky, kx, :]
        return full[:, self.pt:self.pt + self.oh, self.pl:self.pl + self.ow, :]


def _weights_t(w: np.ndarray, dtype) -> np.ndarray:
    """OHWI -> (i, kh*kw*o)."""
    o, kh, kw, i = w.shape
    return np.ascontiguousarray(np.asarray(w).transpose(3, 1, 2, 0).reshape(i, kh * kw * o).astype(dtype))


# --- TRANSPOSE_CONV --------------------------------------------------------------------------

@register("TRANSPOSE_CONV", max_version=5, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
def transpose_conv(node: NodeContext) -> Kernel:
    s_t, w_t, x_t = node.input(0), node.input(1), node.input(2)
    b_t = node.input(3)
    y_t = node.outputs[0]
    if s_t is None or w_t is None or x_t is None:
        raise ModelError("TRANSPOSE_CONV needs output_shape, weights and input tensors")
    check_rank4(node, x_t, w_t)
    if len(s_t.shape) != 1:
        raise ModelError("TRANSPOSE_CONV output_shape must be a 1-D tensor")
    if s_t.type != T_INT32:
        raise node.unsupported(f"output_shape type {s_t.type_name} is not supported (INT32 only)")
    o, kh, kw, ci = (int(d) for d in w_t.shape)
    n, h, w, c = (int(d) for d in x_t.shape)
    if min(o, kh, kw, h, w, c) <= 0:
        raise ModelError(f"TRANSPOSE_CONV has empty input {list(x_t.shape)} or weights {list(w_t.shape)}")
    if c != ci:
        raise ModelError(f"input channels {c} differ from weight channels {ci}")
    sh, sw = opt(node, "stride_h", 1), opt(node, "stride_w", 1)
    if min(sh, sw) <= 0 or max(sh, sw) > 32767:
        raise ModelError(f"strides ({sh}, {sw}) must be in [1, 32767]")
    padding = opt(node, "padding", SAME)
    act = opt(node, "fused_activation_function", 0)
    check_same_type(node, x_t, y_t)
    xt, wt = x_t.type, w_t.type

    def geometry(shape) -> TGeometry:
        shape = [int(v) for v in np.asarray(shape).reshape(-1)]
        if len(shape) != 4:
            raise ModelError(f"TRANSPOSE_CONV output_shape must have 4 elements, has {len(shape)}")
        if shape[0] != n or shape[3] != o or shape[1] <= 0 or shape[2] <= 0:
            raise ModelError(f"TRANSPOSE_CONV output_shape {shape} does not fit input "
                             f"{list(x_t.shape)} and weights {list(w_t.shape)}")
        oh, ow = shape[1], shape[2]
        if out_size(padding, oh, kh, sh, 1) != h or out_size(padding, ow, kw, sw, 1) != w:
            raise ModelError(f"TRANSPOSE_CONV output_shape {shape} does not produce input {list(x_t.shape)}")
        pt = max((h - 1) * sh + kh - oh, 0) // 2
        pl = max((w - 1) * sw + kw - ow, 0) // 2
        return TGeometry(n, h, w, kh, kw, sh, sw, oh, ow, pt, pl, o)

    s_const = node.const(0)
    g_const = None if s_const is None else geometry(s_const)

    if is_float32(x_t):
        bias_vector(node, b_t, o, (xt,))
        if wt == xt:
            core = _float_core(node, float_activation_bounds(act))
        elif wt == T_INT8 and xt == T_FLOAT32:  # the hybrid kernel computes in float32
            core = _hybrid_core(node, float_activation_bounds(act))
        else:
            raise node.unsupported(f"weights type {w_t.type_name} with {x_t.type_name} input is not supported")
    elif xt in (T_UINT8, T_INT8, T_INT16):
        want = T_UINT8 if xt == T_UINT8 else T_INT8
        if wt != want:
            raise node.unsupported(f"weights type {w_t.type_name} with {x_t.type_name} input "
                                   "is not supported")
        if xt == T_INT16:
            wide = int16_wide(node, b_t, o)
        else:
            bias_vector(node, b_t, o, (T_INT32,))
            wide = False
        core = _quant_core(node, act, wide)
    else:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")

    def run(out_shape, w_, x, b=None):
        if g_const is not None:
            g = g_const
        elif not np.any(out_shape) and len(y_t.shape) == 4:
            # The executor's shape pass feeds zeros for a non-constant output_shape: use the
            # shape the model declares (an all-zero output_shape is invalid anyway).
            g = geometry(y_t.shape)
        else:
            g = geometry(out_shape)
        return core(g, w_, x, b)
    return run


def _float_core(node: NodeContext, bounds: tuple[float, float]):
    dt = node.outputs[0].dtype
    w_const, b_const = node.const(1), node.const(3)
    wt_const = None if w_const is None else _weights_t(w_const, dt)

    def core(g: TGeometry, w, x, b):
        wt = wt_const if wt_const is not None else _weights_t(w, dt)
        out = np.ascontiguousarray(g.scatter(x, wt))
        return finish_float(out, b_const if b_const is not None else b, bounds)
    return core


def _hybrid_core(node: NodeContext, bounds: tuple[float, float]):
    """Float input, int8 weights (reference_ops::HybridTransposeConv)."""
    w_t = node.input(1)
    assert w_t is not None  # transpose_conv refused missing weights
    q = w_t.quantization
    if not q.is_set:
        raise ModelError(f"weights '{w_t.name}' need quantization parameters")
    o = int(w_t.shape[0])
    scales = np.asarray(q.scale, np.float32)
    qd = q.quantized_dimension
    if scales.size == 1:
        scales = np.full(o, scales[0], np.float32)
    elif not (0 <= qd < 4 and scales.size == int(w_t.shape[qd]) and qd == 0):
        raise node.unsupported("hybrid TRANSPOSE_CONV needs one scale or one per output channel")
    kh, kw, ci = (int(d) for d in w_t.shape[1:])
    ft = exact_dtype(ci * kh * kw, 255.0, 128.0)
    w_const, b_const = node.const(1), node.const(3)
    wt_const = None if w_const is None else _weights_t(w_const, ft)

    def core(g: TGeometry, w, x, b):
        wt = wt_const if wt_const is not None else _weights_t(w, ft)
        xs, factors = asymmetric_quantize_batches(np.asarray(x, np.float32), ft)
        acc = g.scatter(xs, wt).astype(np.float32)
        out = acc * scales
        out *= factors[:, None, None, None]
        return finish_float(out, b_const if b_const is not None else b, bounds)
    return core


def _quant_core(node: NodeContext, act: int, wide: bool):
    w_t, x_t, b_t, y_t = node.input(1), node.input(2), node.input(3), node.outputs[0]
    assert w_t is not None and x_t is not None  # transpose_conv refused missing weights or input
    o, kh, kw, ci = (int(d) for d in w_t.shape)
    req, in_zp, _ = conv_requantizer(node, x_t, w_t, b_t, y_t, act, o, wide)
    w_zp = zero_point(w_t) if x_t.type == T_UINT8 else 0  # int8 kernels ignore the weights zero point
    w_const, b_const = node.const(1), node.const(3)
    max_w = (float(np.max(np.abs(w_const.astype(np.int64) - w_zp), initial=0))
             if w_const is not None else float(max_abs_shifted(w_t.dtype, w_zp)))
    ft = exact_dtype(ci * kh * kw, max_abs_shifted(x_t.dtype, in_zp), max_w)

    def wmat(w):
        return _weights_t(np.asarray(w, np.int32) - w_zp, ft)
    wt_const = None if w_const is None else wmat(w_const)

    def core(g: TGeometry, w, x, b):
        wt = wt_const if wt_const is not None else wmat(w)
        def prep(xb: np.ndarray) -> np.ndarray:
            xs = xb.astype(ft)
            if in_zp:
                xs -= ft(in_zp)
            return xs
        acc = g.scatter(x, wt, prep).astype(np.int64)
        bias = b_const if b_const is not None else b
        if bias is not None:
            acc += bias.reshape(-1).astype(np.int64)
        if not wide:
            quant.wrap_int32_inplace(acc)
        return req(acc)
    return core


# --- MediaPipe Convolution2DTransposeBias ----------------------------------------------------

_TFLITE_PADDING_SAME, _TFLITE_PADDING_VALID = 1, 2  # TfLitePadding (0 is kTfLitePaddingUnknown)


@register("Convolution2DTransposeBias", max_version=1, dtypes=("FLOAT32",))
def convolution_2d_transpose_bias(node: NodeContext) -> Kernel:
    x_t, w_t, b_t = node.input(0), node.input(1), node.input(2)
    y_t = node.outputs[0]
    if len(node.inputs) != 3 or x_t is None or w_t is None or b_t is None:
        raise ModelError("Convolution2DTransposeBias needs input, weights and bias tensors")
    check_rank4(node, x_t, w_t)
    if len(b_t.shape) != 1:
        raise ModelError("Convolution2DTransposeBias bias must be 1-D")
    for t in (x_t, w_t, b_t, y_t):
        if not is_float32(t) or t.type != x_t.type:
            raise node.unsupported(f"tensor type {t.type_name} is not supported (FLOAT32 only)")
    raw = bytes(node.op.custom_options)
    if len(raw) < 12:
        raise ModelError(f"Convolution2DTransposeBias custom options hold {len(raw)} bytes, "
                         "expected TfLiteTransposeConvParams (12)")
    padding, sw, sh = struct.unpack_from("<iii", raw)
    if min(sh, sw) <= 0:
        raise ModelError(f"strides ({sh}, {sw}) must be positive")
    o, kh, kw, ci = (int(d) for d in w_t.shape)
    n, h, w, c = (int(d) for d in x_t.shape)
    if c != ci or int(b_t.shape[0]) != o:
        raise ModelError(f"Convolution2DTransposeBias shapes do not match: input {list(x_t.shape)}, "
                         f"weights {list(w_t.shape)}, bias {list(b_t.shape)}")
    if min(o, kh, kw, h, w, c) <= 0:
        raise ModelError("Convolution2DTransposeBias has an empty input or weights tensor")
    pad_h = pad_w = 0
    if padding == _TFLITE_PADDING_SAME:
        pad_h = max(0, kh - (h - 1) % sh - 1)
        pad_w = max(0, kw - (w - 1) % sw - 1)
    oh = sh * (h - 1) + kh - pad_h
    ow = sw * (w - 1) + kw - pad_w
    g = TGeometry(n, h, w, kh, kw, sh, sw, oh, ow, pad_h // 2, pad_w // 2, o)
    dt = y_t.dtype
    w_const, b_const = node.const(1), node.const(2)
    wt_const = None if w_const is None else _weights_t(w_const, dt)

    def run(x, w_, b):
        wt = wt_const if wt_const is not None else _weights_t(w_, dt)
        out = np.ascontiguousarray(g.scatter(x, wt))
        out += (b_const if b_const is not None else b).astype(dt, copy=False)
        return out
    return run
