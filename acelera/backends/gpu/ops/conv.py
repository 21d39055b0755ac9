"""Convolution-family ops: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV and
MediaPipe's Convolution2DTransposeBias. Weights are packed at prepare for the register-blocked
kernels (kernels/conv.py; packers: packing.py); biases are padded to whole slices."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from acelera.backends.gpu import params as S
from acelera.backends.gpu.layout import Layout, slices
from acelera.backends.gpu.ops.common import CompileError, Handlers, custom_ints, fused
from acelera.backends.gpu.ops.layout_ops import reshape_copy
from acelera.backends.gpu.packing import pairs
from acelera.core.kernels.conv import out_size, pad_before
from acelera.core.kernels.registry import NodeContext

if TYPE_CHECKING:
    from acelera.backends.gpu.compiler import Compiler

HANDLERS = Handlers()
handles = HANDLERS.handles


def _opt(ctx: NodeContext, name: str, default: int) -> int:
    v = ctx.options.get(name, default)
    return default if v is None else int(v)


def bias_buffer(c: Compiler, ctx: NodeContext, index: int, channels: int) -> str:
    t = ctx.input(index) if index < len(ctx.inputs) else None
    if t is not None and not c.is_const(t):
        return c.input(t)  # a runtime 1-D bias is already in the padded-slice layout
    b = np.zeros(slices(channels) * 4, np.float32)
    if t is not None:
        b[:channels] = c.value(t).reshape(-1)[:channels]
    data = c.storage(b)
    return c.add_buffer(data.nbytes, data)


def _weights(ctx: NodeContext, index: int):
    t = ctx.input(index)
    if t is None:
        raise CompileError(f"{ctx.op.name}: weights are missing")
    return t


@handles("CONV_2D")
def conv_2d(c: Compiler, ctx: NodeContext) -> None:
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    wt = _weights(ctx, 1)
    o, kh, kw, ci = (int(d) for d in wt.shape)
    lx, ly = c.layout(x), c.layout(y)
    if ci != lx.C:
        raise CompileError("grouped convolution is not supported")
    sh, sw = _opt(ctx, "stride_h", 1), _opt(ctx, "stride_w", 1)
    dh, dw = _opt(ctx, "dilation_h_factor", 1), _opt(ctx, "dilation_w_factor", 1)
    padding = _opt(ctx, "padding", 0)
    oh, ow = ly.H, ly.W
    if oh != out_size(padding, lx.H, kh, sh, dh) or ow != out_size(padding, lx.W, kw, sw, dw):
        raise CompileError("CONV_2D output shape does not match its geometry")
    pt, pl = pad_before(lx.H, kh, sh, dh, oh), pad_before(lx.W, kw, sw, dw, ow)
    pointwise = kh == kw == 1 and sh == sw == 1 and pt == pl == 0 and oh == lx.H and ow == lx.W
    # a pointwise convolution is a matrix product over the flattened plane: block along it
    rows, cols = (1, oh * ow) if pointwise else (oh, ow)
    in_rows, in_cols = (1, lx.H * lx.W) if pointwise else (lx.H, lx.W)
    xb = S.CONV_BLOCKS[0] if cols >= 6 else S.CONV_BLOCKS[-1]
    groups = pairs(o)
    nxb = -(-cols // xb)
    wbuf = c.packed(wt, "blocked", 0)
    bbuf = bias_buffer(c, ctx, 2, o)
    a = c.input(x)
    dst = c.output(y)
    n = groups * ly.B * rows * nxb
    geom = (in_rows, in_cols, lx.S, rows, cols, ly.S, kh, kw, sh, sw, pt, pl, dh, dw, nxb, ly.B)
    c.launch(f"conv2d_1x1_x{xb}" if pointwise else f"conv2d_x{xb}", n, a, wbuf, bbuf, dst,
             c.params(n, ly, y, geom, fused(ctx)), ctx.index)


@handles("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(c: Compiler, ctx: NodeContext) -> None:
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    wt = _weights(ctx, 1)
    _, kh, kw, oc = (int(d) for d in wt.shape)
    lx, ly = c.layout(x), c.layout(y)
    if oc != ly.C or ly.C % lx.C:
        raise CompileError("DEPTHWISE_CONV_2D channels do not match")
    mult = ly.C // lx.C
    sh, sw = _opt(ctx, "stride_h", 1), _opt(ctx, "stride_w", 1)
    dh, dw = _opt(ctx, "dilation_h_factor", 1), _opt(ctx, "dilation_w_factor", 1)
    padding = _opt(ctx, "padding", 0)
    oh, ow = ly.H, ly.W
    if oh != out_size(padding, lx.H, kh, sh, dh) or ow != out_size(padding, lx.W, kw, sw, dw):
        raise CompileError("DEPTHWISE_CONV_2D output shape does not match its geometry")
    pt, pl = pad_before(lx.H, kh, sh, dh, oh), pad_before(lx.W, kw, sw, dw, ow)
    wbuf = c.packed(wt, "depthwise", 0)
    bbuf = bias_buffer(c, ctx, 2, oc)
    a = c.input(x)
    dst = c.output(y)
    nxb = -(-ow // S.DW_BLOCK)
    n = ly.S * ly.B * oh * nxb
    geom = (lx.H, lx.W, lx.S, oh, ow, ly.S, kh, kw, sh, sw, pt, pl, dh, dw, nxb, ly.B, mult, lx.C)
    kernel = "depthwise"
    if kh == kw == 3 and mult == 1 and dh == dw == 1 and sh == sw and sh in (1, 2):
        kernel = f"depthwise3x3_s{sh}"
    c.launch(kernel, n, a, wbuf, bbuf, dst, c.params(n, ly, y, geom, fused(ctx)), ctx.index)


def _rows_view(lay: Layout, k: int):
    """(rows, row stride, slice stride) when `lay` holds rows of k channels as storage allows."""
    if lay.C != k:
        return None
    if lay.H * lay.W == 1:
        return lay.B, lay.S, 1
    if lay.B == 1:
        return lay.H * lay.W, 1, lay.H * lay.W
    return None


@handles("FULLY_CONNECTED")
def fully_connected(c: Compiler, ctx: NodeContext) -> None:
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    wt = _weights(ctx, 1)
    o, k = (int(d) for d in wt.shape)
    lx, ly = c.layout(x), c.layout(y)
    rows = int(np.prod(x.shape)) // k if k else 0
    if rows * k != int(np.prod(x.shape)) or ly.C != o or int(np.prod(y.shape)) != rows * o:
        raise CompileError("FULLY_CONNECTED shapes do not match")
    a = c.input(x)
    view = _rows_view(lx, k)
    if view is None or view[0] != rows:
        tmp = Layout((rows, k))
        buf = c.temp(tmp)
        reshape_copy(c, a, lx, buf, tmp, ctx.index)
        a, view = buf, _rows_view(tmp, k)
    _, irs, iss = view
    groups = pairs(o)
    wbuf = c.packed(wt, "fc", 0)
    bbuf = bias_buffer(c, ctx, 2, o)
    oview = _rows_view(ly, o)
    out_lay, dst_final = ly, None
    if oview is None or oview[0] != rows:
        out_lay = Layout((rows, o))
        oview = _rows_view(out_lay, o)
        dst = c.temp(out_lay)
        dst_final = c.output(y)
    else:
        dst = c.output(y)
    _, ors, oss = oview
    n = rows * groups
    geom = (slices(k), slices(o), rows, irs, iss, ors, oss, groups)
    c.launch("fully_connected", n, a, wbuf, bbuf, dst,
             c.params(n, out_lay, y, geom, fused(ctx)), ctx.index)
    if dst_final is not None:
        reshape_copy(c, dst, out_lay, dst_final, ly, ctx.index)


def _transpose_conv(c: Compiler, ctx: NodeContext, x, wt, bias_index: int, pt: int, pl: int,
                    sh: int, sw: int, act) -> None:
    y = ctx.outputs[0]
    o, kh, kw, ci = (int(d) for d in wt.shape)
    lx, ly = c.layout(x), c.layout(y)
    if ci != lx.C or o != ly.C:
        raise CompileError(f"{ctx.op.name}: channels do not match")
    groups = pairs(o)
    wbuf = c.packed(wt, "blocked", 0)
    bbuf = bias_buffer(c, ctx, bias_index, o)
    a = c.input(x)
    dst = c.output(y)
    n = groups * ly.B * ly.H * ly.W
    geom = (lx.H, lx.W, lx.S, ly.H, ly.W, ly.S, kh, kw, sh, sw, pt, pl, groups, ly.B)
    c.launch("transpose_conv", n, a, wbuf, bbuf, dst, c.params(n, ly, y, geom, act), ctx.index)


@handles("TRANSPOSE_CONV")
def transpose_conv(c: Compiler, ctx: NodeContext) -> None:
    x, y = ctx.input(2), ctx.outputs[0]
    assert x is not None
    w = _weights(ctx, 1)
    _, kh, kw, _ = (int(d) for d in w.shape)
    sh, sw = _opt(ctx, "stride_h", 1), _opt(ctx, "stride_w", 1)
    h, wd = int(x.shape[1]), int(x.shape[2])
    oh, ow = int(y.shape[1]), int(y.shape[2])
    pt = max((h - 1) * sh + kh - oh, 0) // 2
    pl = max((wd - 1) * sw + kw - ow, 0) // 2
    _transpose_conv(c, ctx, x, w, 3, pt, pl, sh, sw, fused(ctx))


@handles("Convolution2DTransposeBias")
def convolution_2d_transpose_bias(c: Compiler, ctx: NodeContext) -> None:
    x = ctx.input(0)
    assert x is not None
    w = _weights(ctx, 1)
    padding, sw, sh = custom_ints(ctx, 3)
    _, kh, kw, _ = (int(d) for d in w.shape)
    h, wd = int(x.shape[1]), int(x.shape[2])
    pad_h = pad_w = 0
    if padding == 1:  # MediaPipe's TFLITE_PADDING_SAME
        pad_h = max(0, kh - (h - 1) % sh - 1)
        pad_w = max(0, kw - (wd - 1) % sw - 1)
    _transpose_conv(c, ctx, x, w, 2, pad_h // 2, pad_w // 2, sh, sw, None)
