"""LSTM, basic kernel (kernel_type BASIC): TFLite's GPU delegate runs only this form of the op.

Inputs input [B, I], prev_activ [B, D], weights [4D, I + D], biases [4D], prev_state [B, D];
outputs activ [B, D], state [B, D], concat_temp [B, I + D], activ_temp [B, 4D] (the reference:
acelera.core.kernels.lstm._basic_lstm). Compiled into:

1. two copies placing input and prev_activ side by side in concat_temp;
2. a `fully_connected` launch: activ_temp = concat_temp x weights^T + biases (the gates
   [input, cell, forget, output], each D wide);
3. two `lstm_cell` launches, one writing the new state = sigmoid(i) tanh(g) + sigmoid(f)
   prev_state, one the new activation = sigmoid(o) tanh(state) (recomputing the state, so
   neither reads the other's output and both may stay in float32 when they leave the
   partition).

D must be a multiple of 4 (TFLite's rule, and what lets a gate start on a slice boundary of
activ_temp's PHWC4 storage).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from acelera.backends.gpu.layout import Layout, slices
from acelera.backends.gpu.ops.common import CompileError, Handlers
from acelera.backends.gpu.ops.conv import _rows_view, bias_buffer
from acelera.backends.gpu.ops.layout_ops import _pairs, vector_map
from acelera.backends.gpu.packing import pairs
from acelera.core.kernels.registry import NodeContext

if TYPE_CHECKING:
    from acelera.backends.gpu.compiler import Compiler

HANDLERS = Handlers()
handles = HANDLERS.handles


def _place(c: Compiler, src: str, src_lay: Layout, dst: str, dst_idx: np.ndarray, dst_lay: Layout, node: int) -> None:
    """Copy every element of a tensor into the destination positions `dst_idx` (its shape)."""
    d, s = dst_idx.reshape(-1), src_lay.index().reshape(-1)
    vec = vector_map(d, s, src_lay, dst_lay, False)
    if vec is not None:
        n = len(vec[0])
        c.launch("copy_vec", n, src, None, c.table(_pairs(*vec)), dst,
                 c.params(n, dst_lay, None, (dst_lay.H * dst_lay.W,)), node)
    else:
        c.launch("copy_map", d.size, src, None, c.table(_pairs(d, s)), dst, c.params(d.size, dst_lay, None), node)


@handles("LSTM")
def lstm(c: Compiler, ctx: NodeContext) -> None:
    if int(ctx.options.get("kernel_type", 0) or 0) != 1 or len(ctx.inputs) != 5 or len(ctx.outputs) != 4:
        raise CompileError("LSTM: only the basic kernel (5 inputs, 4 outputs) runs on the GPU")
    x, prev_a, w, bias, prev_s = ctx.inputs
    assert x is not None and prev_a is not None and w is not None and prev_s is not None
    activ, state, concat, gates = ctx.outputs
    nb, n_in = (int(d) for d in x.shape)
    depth = int(prev_a.shape[1])
    if depth % 4 or tuple(w.shape) != (4 * depth, n_in + depth) or tuple(state.shape) != (nb, depth):
        raise CompileError("LSTM: inconsistent basic LSTM shapes (or depth not a multiple of 4)")
    lc, lg, ls = c.layout(concat), c.layout(gates), c.layout(state)
    cat = c.output(concat)
    idx = lc.index()
    _place(c, c.input(x), c.layout(x), cat, idx[:, :n_in], lc, ctx.index)
    _place(c, c.input(prev_a), c.layout(prev_a), cat, idx[:, n_in:], lc, ctx.index)

    k, o = n_in + depth, 4 * depth
    _, irs, iss = _rows_view(lc, k)
    _, ors, oss = _rows_view(lg, o)
    groups = pairs(o)
    wbuf = c.packed(w, "fc", 0)
    bbuf = bias_buffer(c, ctx, 3, o)
    act = c.output(gates)
    n = nb * groups
    c.launch("fully_connected", n, cat, wbuf, bbuf, act,
             c.params(n, lg, gates, (slices(k), slices(o), nb, irs, iss, ors, oss, groups)), ctx.index)

    prev = c.input(prev_s)
    for mode, t in ((0, state), (1, activ)):
        dst = c.output(t)
        n = nb * ls.S
        c.launch("lstm_cell", n, act, prev, None, dst, c.params(n, ls, t, (ls.S, mode)), ctx.index)
