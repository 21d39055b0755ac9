"""Float CONV_2D and DEPTHWISE_CONV_2D kernel bodies (LiteRT's tflite/kernels/conv.cc and
depthwise_conv.cc, reference_ops::Conv / DepthwiseConv); prepared by conv.py.

CONV_2D is im2col plus one float32 matmul with the weights reshaped at prepare; with constant
ungrouped weights the patches are one strided view of the (zero-padded) input, copied once
(patch convolutions included), and a 1x1 stride-1 convolution multiplies the input itself. An
im2col matrix larger than core.memory.TILE_BYTES is built and multiplied a band of output
rows at a time (conv_im2col.banded_matmul), without a padded copy of the input. Depthwise
convolutions loop over the kh*kw taps, each tap one vectorized multiply-add, a band of output
rows at a time (conv_im2col.dw_run).
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels import conv_im2col as im2col
from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.common import float_activation_bounds
from acelera.core.kernels.conv_im2col import Geometry, grouped_matmul, weight_matrix, zero_kernel
from acelera.core.kernels.conv_quantization import finish_float
from acelera.core.kernels.registry import Kernel, NodeContext


def conv_float(node: NodeContext, g: Geometry, groups: int, act: int, out_shape) -> Kernel:
    dt = node.outputs[0].dtype
    if g.empty:
        return zero_kernel(out_shape, dt)
    bounds = float_activation_bounds(act)
    w_const = node.const(1)
    wm_const = None if w_const is None else weight_matrix(w_const, groups, dt)
    b_const = node.const(2)
    cols_bytes = g.im2col_bytes(np.dtype(dt).itemsize)
    direct = g.pointwise and g.sh == 1 and g.sw == 1 and groups == 1  # the input is the patch matrix
    tiled = not direct and cols_bytes * (2 if groups > 1 else 1) > im2col.tile_bytes()
    if not tiled and groups == 1 and wm_const is not None:
        return _conv_float_whole(g, wm_const, b_const, bounds, out_shape, dt, direct)
    row_bytes = im2col.conv_band_row_bytes(g, g.kh * g.kw * (g.c // groups), out_shape[3], groups,
                                           np.dtype(dt).itemsize)
    o = out_shape[3]

    def run(x, w, b=None):
        wm = wm_const if wm_const is not None else weight_matrix(w, groups, dt)
        xs = np.asarray(x, dt)
        if tiled:
            out = im2col.banded_matmul(g, xs, wm, groups, row_bytes, out_shape, dt, _same).reshape(-1, o)
        else:
            out = grouped_matmul(g.im2col(xs, groups), wm, groups)
        finish_float(out, b_const if b_const is not None else b, bounds)
        return out.reshape(out_shape)
    return run


def _conv_float_whole(g: Geometry, wm: np.ndarray, b_const: np.ndarray | None, bounds: tuple[float, float],
                      out_shape, dt, direct: bool) -> Kernel:
    """An ungrouped CONV_2D with constant weights whose im2col matrix fits in one tile: the
    patches are a strided view of the (padded) input, copied once into the matmul operand."""
    dt = np.dtype(dt)
    lo, hi = dt.type(bounds[0]), dt.type(bounds[1])
    bias = None if b_const is None else np.ascontiguousarray(np.asarray(b_const).reshape(-1), dt)
    m, k = g.n * g.oh * g.ow, g.kh * g.kw * g.c
    pb = max((g.oh - 1) * g.sh + (g.kh - 1) * g.dh - g.pt - (g.h - 1), 0)
    pr = max((g.ow - 1) * g.sw + (g.kw - 1) * g.dw - g.pl - (g.w - 1), 0)
    padded = g.pt > 0 or g.pl > 0 or pb > 0 or pr > 0
    hp, wp = g.h + g.pt + pb, g.w + g.pl + pr
    item = dt.itemsize
    s_w, s_h = g.c * item, wp * g.c * item
    view_shape = (g.n, g.oh, g.ow, g.kh, g.kw, g.c)
    view_strides = (hp * s_h, s_h * g.sh, s_w * g.sw, s_h * g.dh, s_w * g.dw, item)
    rows, cols_in = slice(g.pt, g.pt + g.h), slice(g.pl, g.pl + g.w)
    pad_shape = (g.n, hp, wp, g.c)

    def run(x, w=None, b=None):
        if direct:
            out = np.matmul(np.reshape(x, (m, k)), wm)
        else:
            if padded:
                xp = np.zeros(pad_shape, dt)
                xp[:, rows, cols_in] = x
            else:
                xp = np.ascontiguousarray(x, dt)
            view = np.ndarray(view_shape, dt, xp, 0, view_strides)
            out = np.matmul(view.reshape(m, k), wm)
        if bias is not None:
            np.add(out, bias, out=out)
        elif b is not None:
            np.add(out, np.asarray(b, dt).reshape(-1), out=out)
        clip_ufunc(out, lo, hi, out=out)
        return out.reshape(out_shape)
    return run


def _same(acc: np.ndarray) -> np.ndarray:
    return acc


def dw_float(node: NodeContext, g: Geometry, mult: int, act: int, out_shape) -> Kernel:
    dt = node.outputs[0].dtype
    if g.empty:
        return zero_kernel(out_shape, dt)
    bounds = float_activation_bounds(act)
    w_const = node.const(1)
    wc = None if w_const is None else np.ascontiguousarray(w_const[0], dt)
    b_const = node.const(2)

    def run(x, w, b=None):
        wk = wc if wc is not None else np.asarray(w[0], dt)
        bias = b_const if b_const is not None else b
        return im2col.dw_run(g, np.asarray(x, dt), wk, mult, dt, out_shape, dt,
                             lambda acc: finish_float(acc, bias, bounds))
    return run

