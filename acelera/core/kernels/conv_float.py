"""Float CONV_2D and DEPTHWISE_CONV_2D kernel bodies (LiteRT's tflite/kernels/conv.cc and
depthwise_conv.cc, reference_ops::Conv / DepthwiseConv); prepared by conv.py.

CONV_2D is im2col (one strided copy per kernel tap) plus one float32 matmul with the weights
reshaped at prepare; a 1x1 stride-1 ungrouped convolution multiplies the input itself. An
im2col matrix larger than core.memory.TILE_BYTES is built and multiplied a band of output
rows at a time (conv_im2col.banded_matmul), without a padded copy of the input. Depthwise
convolutions loop over the kh*kw taps, each tap one vectorized multiply-add, a band of output
rows at a time (conv_im2col.dw_run).
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels import conv_im2col as im2col
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
