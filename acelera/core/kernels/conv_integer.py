"""Quantized and hybrid CONV_2D and DEPTHWISE_CONV_2D kernel bodies (LiteRT's
tflite/kernels/conv.cc, depthwise_conv.cc, reference_integer_ops/conv.h, depthwise_conv.h and
the hybrid paths of conv.cc / depthwise_conv.cc); prepared by conv.py.

Quantized convolutions subtract the input zero point and pad with 0 (LiteRT skips padded taps,
which is the same), accumulate exactly (float32 BLAS when every partial sum provably stays
below 2**24, float64 otherwise, int32/int64 for depthwise taps), then requantize per channel
with TFLite's fixed-point MultiplyByQuantizedMultiplier. Hybrid kernels (float input, int8
weights) quantize the input per batch exactly as LiteRT's tensor_utils do, accumulate exactly
and rescale in float32. Every path, grouped or not, runs in bands of output rows
(conv_im2col): a band converts and zero-point-shifts only the input rows it reads, so the
whole input is never copied wider than the hybrid quantization (q - offset as float32,
hybrid_quant.py). Hybrid 1x1 convolutions that fit one band skip im2col.
"""
from __future__ import annotations

import numpy as np

from acelera.core import quant
from acelera.core.errors import ModelError
from acelera.core.kernels import conv_im2col as im2col
from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.common import float_activation_bounds
from acelera.core.kernels.conv_im2col import Geometry, conv_band_row_bytes, weight_matrix, zero_kernel
from acelera.core.kernels.conv_quantization import (
    asymmetric_quantize_int8,
    exact_dtype,
    finish_float,
    max_abs_shifted,
    params_requantizer,
    quantized_filter_scales,
    symmetric_quantize_int8,
)
from acelera.core.kernels.hybrid_native import dw_taps_kernel
from acelera.core.kernels.hybrid_quant import neon_asymmetric_batches
from acelera.core.kernels.prepared import QuantizedConvParams
from acelera.core.kernels.registry import Kernel, NodeContext


def conv_quant(node: NodeContext, p: QuantizedConvParams) -> Kernel:
    g, groups, out_shape = p.geometry, p.groups, p.output_shape
    req = params_requantizer(p)
    if g.empty:
        return zero_kernel(out_shape, p.output_dtype)
    w_t, b_t = node.input(1), node.input(2)
    assert w_t is not None  # conv.py checked the filter
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
    row_bytes = conv_band_row_bytes(g, k, out_shape[3], groups)

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else wmat(w)
        bias = b_const if b_const is not None else b

        def finish(prod: np.ndarray) -> np.ndarray:
            acc = prod.astype(np.int64)
            if bias is not None:
                acc += bias.reshape(-1).astype(np.int64)
            if need_wrap:
                quant.wrap_int32_inplace(acc)
            return req(acc)
        return im2col.banded_matmul(g, x, wm, groups, row_bytes, out_shape, p.output_dtype, finish,
                                    fill=in_zp, dtype=ft)
    return run


def conv_hybrid(node: NodeContext, g: Geometry, groups: int, act: int, out_shape) -> Kernel:
    """Float input, int8 filter: CONV_2D v2 (per-tensor) and v5 (per-channel)."""
    w_t = node.input(1)
    assert w_t is not None  # conv.py checked the filter
    o = out_shape[3]
    scales = quantized_filter_scales(w_t)
    per_channel = scales.size > 1 and bool(np.any(scales != scales[0]))
    if per_channel and (scales.size != o or int(w_t.shape[w_t.quantization.quantized_dimension]) != o):
        raise ModelError(f"filter has {scales.size} scales for {o} output channels")
    if groups != 1 and not per_channel:
        raise node.unsupported("grouped hybrid convolution needs per-channel filter scales")
    bounds = float_activation_bounds(act)
    if g.empty:
        return zero_kernel(out_shape, np.float32)
    k = g.kh * g.kw * (g.c // groups)
    ft = exact_dtype(k, 255.0, 128.0)
    w_const = node.const(1)
    wm_const = None if w_const is None else weight_matrix(w_const, groups, ft)
    b_const = node.const(2)
    ch_scale = scales if per_channel else None
    tensor_scale = np.float32(scales[0])
    row_bytes = conv_band_row_bytes(g, k, o, groups)

    # 1x1 taps, no padding, one group: the (strided) quantized input is the patch matrix.
    pointwise = g.pointwise and groups == 1
    hs, ws = slice(0, (g.oh - 1) * g.sh + 1, g.sh), slice(0, (g.ow - 1) * g.sw + 1, g.sw)
    lo, hi = np.float32(bounds[0]), np.float32(bounds[1])

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else weight_matrix(w, groups, ft)
        x = np.asarray(x, np.float32)
        fill: int | np.ndarray = 0
        if per_channel:
            # q - offset as float32 (the padding then reads 0), or int8 q padded with offsets
            shifted = neon_asymmetric_batches(x)
            if shifted is not None:
                q, factors = shifted
            else:
                q, factors, offsets = asymmetric_quantize_int8(x)
                fill = offsets if offsets.any() else 0
        else:
            q, factors = symmetric_quantize_int8(x, tensor_scale)
        bias = b_const if b_const is not None else b

        def rescale(prod: np.ndarray) -> np.ndarray:
            acc = prod.astype(np.float32, copy=False).reshape(g.n, -1, g.ow, o)
            f = factors[0] if g.n == 1 else factors[:, None, None, None]
            if ch_scale is not None:
                out = acc * ch_scale
                out *= f
            else:
                out = acc * f
            if bias is not None:
                out += bias.reshape(-1).astype(np.float32, copy=False)
            return clip_ufunc(out, lo, hi, out=out)
        if pointwise and q.dtype == np.float32 and ft == np.float32 and row_bytes * g.oh <= im2col.tile_bytes():
            cols = q if g.sh == 1 and g.sw == 1 else q[:, hs, ws, :]
            return rescale(cols.reshape(-1, g.c) @ wm).reshape(out_shape)
        return im2col.banded_matmul(g, q, wm, groups, row_bytes, out_shape, np.float32, rescale, fill=fill, dtype=ft)
    return run


def dw_quant(node: NodeContext, p: QuantizedConvParams) -> Kernel:
    g, mult, wide = p.geometry, p.depth_multiplier, p.wide
    req = params_requantizer(p)
    in_zp, w_zp = p.input_zero_point, p.filter_zero_point
    if g.empty:
        return zero_kernel(p.output_shape, p.output_dtype)
    # int32 taps are exact while kh*kw products fit; the int16 path accumulates in int64.
    w_t = node.input(1)
    assert w_t is not None  # conv.py checked the filter
    bound = g.kh * g.kw * max_abs_shifted(p.input_dtype, in_zp) * max_abs_shifted(w_t.dtype, w_zp)
    acc_t = np.int32 if (not wide or bound < 2 ** 31) else np.int64

    def wtaps(w):
        return np.ascontiguousarray(np.asarray(w[0], acc_t) - acc_t(w_zp))
    wc = None if p.weights is None else np.ascontiguousarray(p.weights, acc_t)
    b_const = p.bias

    def run(x, w, b=None):
        wk = wc if wc is not None else wtaps(w)
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
        return im2col.dw_run(g, x, wk, mult, acc_t, p.output_shape, p.output_dtype, finish, fill=in_zp)
    return run


def dw_hybrid(node: NodeContext, g: Geometry, mult: int, act: int, out_shape) -> Kernel:
    """Float input, int8 filter: DEPTHWISE_CONV_2D v4/v6 (always per-channel scales)."""
    w_t = node.input(1)
    assert w_t is not None  # conv.py checked the filter
    o = out_shape[3]
    scales = quantized_filter_scales(w_t)
    if scales.size != o:
        # LiteRT indexes the scales by output channel (reads past a single per-tensor scale).
        raise node.unsupported(f"hybrid depthwise needs {o} per-channel filter scales, has {scales.size}")
    bounds = float_activation_bounds(act)
    lo, hi = np.float32(bounds[0]), np.float32(bounds[1])
    if g.empty:
        return zero_kernel(out_shape, np.float32)
    w_const = node.const(1)
    wc = None if w_const is None else np.ascontiguousarray(w_const[0], np.int32)
    # the shifted inputs (|q - offset| <= 255) accumulate exactly in this float type
    ft = exact_dtype(g.kh * g.kw, 255.0, 128.0)
    wf = None if w_const is None else np.ascontiguousarray(w_const[0], ft)
    b_const = node.const(2)
    dw_native = dw_taps_kernel() if ft == np.float32 else None
    geo = np.array([g.sh, g.sw, g.dh, g.dw, g.pt, g.pl], np.int64)

    def run(x, w, b=None):
        x = np.asarray(x, np.float32)
        bias = b_const if b_const is not None else b
        shifted = neon_asymmetric_batches(x)
        if shifted is not None:
            qs, fs = shifted

            def finish_shifted(acc: np.ndarray) -> np.ndarray:
                out = acc.astype(np.float32, copy=False)
                out *= scales[None, None, None, :] * fs[:, None, None, None]
                if bias is not None:
                    out += bias.reshape(-1).astype(np.float32, copy=False)
                return clip_ufunc(out, lo, hi, out=out)
            wk = wf if wf is not None else np.asarray(w[0], ft)
            if dw_native is not None:
                acc = np.zeros(out_shape, np.float32)
                dw_native(qs, wk, geo, mult, acc)
                return finish_shifted(acc)
            return im2col.dw_run(g, qs, wk, mult, ft, out_shape, np.float32, finish_shifted)
        wk = wc if wc is not None else np.asarray(w[0], np.int32)
        q, factors, offsets = asymmetric_quantize_int8(x)

        def finish(acc: np.ndarray) -> np.ndarray:
            out = acc.astype(np.float32)
            out *= scales[None, None, None, :] * factors[:, None, None, None]
            return finish_float(out, bias, bounds)
        return im2col.dw_run(g, q, wk, mult, np.int32, out_shape, np.float32, finish,
                             fill=offsets if offsets.any() else 0)
    return run
