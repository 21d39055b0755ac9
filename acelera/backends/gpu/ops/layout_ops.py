"""Layout ops compiled into copy maps: RESHAPE, CONCATENATION, PAD/PADV2/MIRROR_PAD, SLICE,
STRIDED_SLICE, TRANSPOSE, DEPTH_TO_SPACE, SPACE_TO_DEPTH; DEQUANTIZE (an alias in the float
view).

These ops move elements without arithmetic, so their exact semantics come from acelera's CPU
reference kernel run once at prepare on *index* tensors: each data input filled with the
(1-based, per-input offset) storage position of its elements, as float32. The result says,
for every output element, which input element lands there (0: none, i.e. padding). The
`copy_map` kernel then moves elements by that (dst, src) table on the device each invoke.
A reshape whose table is the identity aliases its input buffer instead.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from acelera.backends.gpu import params as S
from acelera.backends.gpu.layout import Layout
from acelera.backends.gpu.ops.common import CompileError, Handlers, f2i, fused, quant_params
from acelera.core.kernels.registry import NodeContext, lookup
from acelera.core.model import NO_QUANT

if TYPE_CHECKING:
    from acelera.backends.gpu.compiler import Compiler

HANDLERS = Handlers()
handles = HANDLERS.handles

EXACT = 1 << 24  # float32 holds every integer up to here exactly
T_FLOAT32 = 0


def _pairs(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    return np.stack([dst.astype(np.int32), src.astype(np.int32)], axis=1).reshape(-1)


def reshape_copy(c: Compiler, src: str, src_lay: Layout, dst: str, dst_lay: Layout, node: int) -> None:
    """Copy a tensor into another layout of the same elements (row-major order kept)."""
    table = c.table(_pairs(dst_lay.index().reshape(-1), src_lay.index().reshape(-1)))
    n = src_lay.B * src_lay.H * src_lay.W * src_lay.C
    c.launch("copy_map", n, src, None, table, dst, c.params(n, dst_lay, None), node)


def vector_map(dst: np.ndarray, src: np.ndarray, src_lay: Layout, dst_lay: Layout, exclusive: bool):
    """(dst vectors, src vectors) when the element map moves whole aligned vectors, else None.

    Every touched destination vector must take its mapped lanes from one source vector, lane
    for lane. Lanes of it left unmapped are allowed only when this map is the destination's
    only writer (`exclusive`) and they are zero in the source (its padding lanes), so the
    copy writes the zeros the destination holds there anyway.
    """
    if dst.size == 0 or np.any(dst % 4 != src % 4):
        return None
    dv, sv = dst // 4, src // 4
    order = np.argsort(dv, kind="stable")
    dv, sv = dv[order], sv[order]
    first = np.ones(dv.size, bool)
    first[1:] = dv[1:] != dv[:-1]
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, dv.size))
    if np.any(sv != np.repeat(sv[starts], counts)):
        return None
    ud, us = dv[starts], sv[starts]
    partial = counts < 4
    if np.any(partial):
        if not exclusive:
            return None
        lanes = np.zeros((ud.size, 4), bool)
        lanes[np.repeat(np.arange(ud.size), counts), (dst[order] % 4)] = True
        # unmapped lanes must be padding lanes (past the last channel) of the source vector
        src_real = np.ones(src_lay.size, bool)
        src_real[src_lay.index().reshape(-1)] = False  # True = padding lane
        pad = src_real.reshape(-1, 4)[us]
        if np.any(~lanes & ~pad):
            return None
    return ud, us


def _float_view(t, data=None):
    """The tensor as float32 without quantization (for running a layout op on indices)."""
    if t is None:
        return None
    kw = {"type": T_FLOAT32, "quantization": NO_QUANT}
    if data is not None:
        kw["data"] = data
    return dataclasses.replace(t, **kw)


def _index_run(c: Compiler, ctx: NodeContext, data_inputs: tuple[int, ...], zero_inputs: tuple[int, ...] = ()):
    """Run the reference kernel on index tensors: (encoded output, [(input, offset, size)])."""
    ins = list(ctx.inputs)
    for i in zero_inputs:
        t = ins[i]
        assert t is not None
        ins[i] = _float_view(t, np.zeros(t.shape, np.float32))
    for i in data_inputs:
        ins[i] = _float_view(ins[i])
    outs = tuple(_float_view(t) for t in ctx.outputs)
    fctx = dataclasses.replace(ctx, inputs=tuple(ins), outputs=outs)
    kernel = lookup(ctx.op).prepare(fctx)
    args: list[np.ndarray | None] = []
    ranges: list[tuple[int, int, int]] = []
    offset = 1
    for i, t in enumerate(ins):
        if t is None:
            args.append(None)
        elif i in data_inputs:
            lay = c.layout(t)
            args.append((lay.index() + offset).astype(np.float32))
            ranges.append((i, offset, lay.size))
            offset += lay.size
        elif i in zero_inputs:
            args.append(np.zeros(t.shape, np.float32))
        elif not c.is_const(t) and ctx.op.name == "RESHAPE":
            args.append(np.asarray(ctx.outputs[0].shape, np.int32))  # the shape is static here
        else:
            args.append(c.value(t, as_float=False))
    if offset >= EXACT:
        raise CompileError(f"{ctx.op.name}: tensors too large for an index map")
    out = kernel(*args)
    if isinstance(out, (tuple, list)):
        out = out[0]
    out = np.asarray(out)
    if tuple(out.shape) != tuple(int(d) for d in ctx.outputs[0].shape):
        raise CompileError(f"{ctx.op.name}: index run gave shape {out.shape}")
    return np.rint(out).astype(np.int64), ranges


def _copy_op(c: Compiler, ctx: NodeContext, data_inputs, zero_inputs=(), fill=None, act=None) -> None:
    y = ctx.outputs[0]
    enc, ranges = _index_run(c, ctx, data_inputs, zero_inputs)
    ly = c.layout(y)
    dst_idx = ly.index().reshape(-1)
    enc = enc.reshape(-1)
    if len(ranges) == 1 and act is None and fill is None:
        i, off, size = ranges[0]
        x = ctx.input(i)
        assert x is not None
        lx = c.layout(x)
        same_q = quant_params(x) == quant_params(y)
        if same_q and lx.size == ly.size and np.array_equal(enc - off, dst_idx):
            c.alias(y, x)
            return
    data = None
    if fill is not None:
        data = ly.pack(np.full(ly.shape, fill, np.float32), c.sdtype)
    dst = c.output(y, data)
    for i, off, size in ranges:
        sel = (enc >= off) & (enc < off + size)
        if not np.any(sel):
            continue
        x = ctx.input(i)
        assert x is not None
        vec = vector_map(dst_idx[sel], enc[sel] - off, c.layout(x), ly, len(ranges) == 1 and fill is None)
        geom: tuple[int, ...]
        if vec is not None:
            kernel, table = "copy_vec", c.table(_pairs(*vec))
            n, geom = len(vec[0]), (ly.H * ly.W,)
        else:
            kernel, table = "copy_map", c.table(_pairs(dst_idx[sel], enc[sel] - off))
            n, geom = int(sel.sum()), ()
        p = c.params(n, ly, y, geom, act=act)
        q = quant_params(x)
        if q is not None and q != quant_params(y):  # requantizing: snap to the input grid first
            p[S.P_ACT2], p[S.P_LO2] = S.U_SNAP, f2i(q[0])
            if act is None:
                p[S.P_ACT1], p[S.P_ACT2], p[S.P_LO1] = S.U_SNAP, S.U_NONE, f2i(q[0])
        c.launch(kernel, n, c.input(x), None, table, dst, p, ctx.index)


@handles("RESHAPE", "SLICE", "STRIDED_SLICE", "TRANSPOSE", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "PAD",
         "MIRROR_PAD")
def single_input(c: Compiler, ctx: NodeContext) -> None:
    _copy_op(c, ctx, (0,))


@handles("PADV2")
def padv2(c: Compiler, ctx: NodeContext) -> None:
    v = ctx.input(2)
    value = float(c.value(v).reshape(-1)[0]) if v is not None else 0.0
    _copy_op(c, ctx, (0,), zero_inputs=(2,) if v is not None else (), fill=value if value else None)


@handles("CONCATENATION")
def concatenation(c: Compiler, ctx: NodeContext) -> None:
    data = tuple(i for i, t in enumerate(ctx.inputs) if t is not None)
    _copy_op(c, ctx, data, act=fused(ctx))


@handles("DEQUANTIZE")
def dequantize(c: Compiler, ctx: NodeContext) -> None:
    """In the float view a runtime DEQUANTIZE input already holds real values."""
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    if c.is_const(x):
        c.output(y, c.layout(y).pack(c.value(x), c.sdtype))
        return
    c.alias(y, x)
