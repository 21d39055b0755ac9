"""Elementwise, pooling, resize, softmax and reduction ops.

Activation ops (RELU, RELU6, LOGISTIC, TANH, HARD_SWISH, GELU, ...) are folded into the kernel
that produced their input when that tensor has no other use (Compiler.fuse_activation);
otherwise they run as a `unary` launch. Binary ops broadcast through per-operand strides on the
PHWC4 layout, so constants are packed in their own shape; ADD_N (2 inputs) is an ADD.

Ops whose result jumps at a threshold (FLOOR_DIV, FLOOR_MOD, SIGN here; comparisons and CAST in
logical.py) set the `binary` / `unary` kernels' per-operand float32 flags, so they read
partition inputs and constants exactly (Compiler.operand). FLOOR_DIV is
TFLite's floor of the quotient computed in double: the kernel corrects floor(x / y) by the sign
of the exact remainder fma(-q, y, x), so an approximate device division cannot put it off by
one; FLOOR_MOD is fmod (exact) moved to the divisor's sign.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from acelera.backends.gpu import params as S
from acelera.backends.gpu.layout import AXES, Layout
from acelera.backends.gpu.ops.common import CompileError, Handlers, fused, quant_params
from acelera.backends.gpu.ops.layout_ops import reshape_copy
from acelera.core.kernels.conv import out_size, pad_before
from acelera.core.kernels.registry import NodeContext
from acelera.core.kernels.resize import _float_coords, _nearest_index

if TYPE_CHECKING:
    from acelera.backends.gpu.compiler import Compiler

HANDLERS = Handlers()
handles = HANDLERS.handles

INF = float("inf")

#: op -> (code, lo, hi): activation-like unary ops (fusable into their producer)
ACTIVATIONS = {
    "RELU": (S.U_CLAMP, 0.0, INF), "RELU6": (S.U_CLAMP, 0.0, 6.0), "RELU_N1_TO_1": (S.U_CLAMP, -1.0, 1.0),
    "RELU_0_TO_1": (S.U_CLAMP, 0.0, 1.0), "LOGISTIC": (S.U_SIGMOID, 0.0, 0.0), "TANH": (S.U_TANH, 0.0, 0.0),
    "HARD_SWISH": (S.U_HARD_SWISH, 0.0, 0.0),
}
#: GELU's approximate option -> unary code (GELU fuses like the activations above)
GELU = {False: S.U_GELU, True: S.U_GELU_TANH}
#: the other unary ops
UNARY = {"EXP": S.U_EXP, "ABS": S.U_ABS, "NEG": S.U_NEG, "SQRT": S.U_SQRT, "RSQRT": S.U_RSQRT, "LOG": S.U_LOG,
         "SIN": S.U_SIN, "COS": S.U_COS, "SQUARE": S.U_SQUARE, "FLOOR": S.U_FLOOR, "ELU": S.U_ELU,
         "CEIL": S.U_CEIL}
BINARY = {"ADD": S.B_ADD, "SUB": S.B_SUB, "MUL": S.B_MUL, "DIV": S.B_DIV, "MAXIMUM": S.B_MAX,
          "MINIMUM": S.B_MIN, "PRELU": S.B_PRELU, "SQUARED_DIFFERENCE": S.B_SQDIFF, "POW": S.B_POW,
          "ADD_N": S.B_ADD}
#: binary ops that read their operands exactly (where they come from the host)
BINARY_EXACT = {"FLOOR_DIV": S.B_FLOOR_DIV, "FLOOR_MOD": S.B_FLOOR_MOD}
REDUCE = {"SUM": S.R_SUM, "MEAN": S.R_MEAN, "REDUCE_MAX": S.R_MAX, "REDUCE_MIN": S.R_MIN,
          "REDUCE_PROD": S.R_PROD}


def _unary_launch(c: Compiler, ctx: NodeContext, act) -> None:
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    ly = c.layout(y)
    a = c.input(x)
    dst = c.output(y)
    code, lo, hi = act
    n = ly.vectors
    c.launch("unary", n, a, None, None, dst,
             c.params(n, ly, y, (ly.H * ly.W, code, float(lo), float(hi), 0)), ctx.index)


@handles(*ACTIVATIONS, "LEAKY_RELU", "GELU")
def activation(c: Compiler, ctx: NodeContext) -> None:
    if ctx.op.name == "LEAKY_RELU":
        act = (S.U_LEAKY, float(np.float32(ctx.options.get("alpha", 0.0))), 0.0)
    elif ctx.op.name == "GELU":
        act = (GELU[bool(ctx.options.get("approximate", False))], 0.0, 0.0)
    else:
        act = ACTIVATIONS[ctx.op.name]
    x = ctx.input(0)
    assert x is not None
    if not c.fuse_activation(x, ctx.outputs[0], act):
        _unary_launch(c, ctx, act)


@handles(*UNARY)
def unary(c: Compiler, ctx: NodeContext) -> None:
    _unary_launch(c, ctx, (UNARY[ctx.op.name], 0.0, 0.0))


def unary_exact(c: Compiler, ctx: NodeContext, code: int, lo: float = 0.0, hi: float = 0.0) -> None:
    """A unary op reading its input exactly (float32 where the plan has it, see Compiler.operand)."""
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    ly = c.layout(y)
    a, fa = c.operand(x, exact=True)
    dst = c.output(y)
    n = ly.vectors
    c.launch("unary", n, a, None, None, dst,
             c.params(n, ly, y, (ly.H * ly.W, code, float(lo), float(hi), fa)), ctx.index)


@handles("SIGN")
def sign(c: Compiler, ctx: NodeContext) -> None:
    unary_exact(c, ctx, S.U_SIGN)


@handles("QUANTIZE")
def quantize(c: Compiler, ctx: NodeContext) -> None:
    """Float -> int8/uint8 (or requantize): the quantization simulator of the output. A
    quantized input is first snapped back to its own grid, so half storage cannot move a
    requantization tie."""
    q = quant_params(ctx.input(0))
    _unary_launch(c, ctx, (S.U_SNAP, q[0], 0.0) if q else (S.U_NONE, 0.0, 0.0))


def operand_view(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[list[int], int]:
    """Vector strides (b, s, h, w) reading operand `shape` broadcast to `out_shape`, and
    whether its single channel is splat across the output's channels."""
    r_out, r_op = len(out_shape), len(shape)
    lay = Layout(shape)
    strides = [0, 0, 0, 0]
    for k, bax in enumerate(AXES[r_out]):
        if bax == 3:
            continue
        j = k - (r_out - r_op)
        if j < 0 or shape[j] == 1:
            continue
        if shape[j] != out_shape[k]:
            raise CompileError(f"cannot broadcast {list(shape)} to {list(out_shape)}")
        pos = {0: 0, 1: 2, 2: 3}[bax]
        strides[pos] = lay.axis_stride(AXES[r_op][j])
    c_out = out_shape[-1] if r_out else 1
    c_op = shape[-1] if r_op else 1
    splat = int(c_op == 1 and c_out != 1)
    if not splat:
        if c_op != c_out:
            raise CompileError(f"cannot broadcast {list(shape)} to {list(out_shape)}")
        strides[1] = lay.strides()[1]
    return strides, splat


def binary_launch(c: Compiler, ctx: NodeContext, code: int, exact: bool = False) -> None:
    """A broadcasting binary op; `exact` reads operands exactly (float32 where the plan has
    them: BINARY_A_F32 / BINARY_B_F32, see Compiler.operand)."""
    ins = [t for t in ctx.inputs if t is not None]
    if len(ins) != 2:
        raise CompileError(f"{ctx.op.name} needs 2 inputs")
    x0, x1 = ins
    y = ctx.outputs[0]
    ly = c.layout(y)
    oshape = tuple(int(d) for d in y.shape)
    sa, pa = operand_view(tuple(int(d) for d in x0.shape), oshape)
    sb, pb = operand_view(tuple(int(d) for d in x1.shape), oshape)
    if exact:
        (a, fa), (b, fb) = c.operand(x0, exact=True), c.operand(x1, exact=True)
    else:
        (a, fa), (b, fb) = (c.input(x0), 0), (c.input(x1), 0)
    dst = c.output(y)
    n = ly.vectors
    act = fused(ctx) if "fused_activation_function" in ctx.options else None
    geom = (ly.H, ly.W, ly.S, ly.B, *sa, *sb, pa, pb, code, fa, fb)
    c.launch("binary", n, a, b, None, dst, c.params(n, ly, y, geom, act), ctx.index)


@handles(*BINARY)
def binary(c: Compiler, ctx: NodeContext) -> None:
    binary_launch(c, ctx, BINARY[ctx.op.name])


@handles(*BINARY_EXACT)
def binary_exact(c: Compiler, ctx: NodeContext) -> None:
    binary_launch(c, ctx, BINARY_EXACT[ctx.op.name], exact=True)


@handles("MAX_POOL_2D", "AVERAGE_POOL_2D")
def pool(c: Compiler, ctx: NodeContext) -> None:
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    lx, ly = c.layout(x), c.layout(y)
    o = ctx.options
    fh, fw = int(o.get("filter_height", 1)), int(o.get("filter_width", 1))
    sh, sw = int(o.get("stride_h", 1)), int(o.get("stride_w", 1))
    padding = int(o.get("padding", 0) or 0)
    if ly.H != out_size(padding, lx.H, fh, sh, 1) or ly.W != out_size(padding, lx.W, fw, sw, 1):
        raise CompileError(f"{ctx.op.name} output shape does not match its geometry")
    pt, pl = pad_before(lx.H, fh, sh, 1, ly.H), pad_before(lx.W, fw, sw, 1, ly.W)
    a = c.input(x)
    dst = c.output(y)
    n = ly.vectors
    geom = (lx.H, lx.W, lx.S, lx.B, ly.H, ly.W, fh, fw, sh, sw, pt, pl, int(ctx.op.name == "AVERAGE_POOL_2D"))
    c.launch("pool", n, a, None, None, dst, c.params(n, ly, y, geom, fused(ctx)), ctx.index)


@handles("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def resize(c: Compiler, ctx: NodeContext) -> None:
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    lx, ly = c.layout(x), c.layout(y)
    align = bool(ctx.options.get("align_corners", False))
    half = bool(ctx.options.get("half_pixel_centers", False))
    nearest = ctx.op.name == "RESIZE_NEAREST_NEIGHBOR"
    if nearest:
        y0 = _nearest_index(lx.H, ly.H, align, half)
        x0 = _nearest_index(lx.W, ly.W, align, half)
        y1, x1 = y0, x0
        fy, fx = np.zeros(ly.H, np.float32), np.zeros(ly.W, np.float32)
    else:
        y0, y1, _, fy = _float_coords(lx.H, ly.H, align, half)
        x0, x1, _, fx = _float_coords(lx.W, ly.W, align, half)
    ints = np.concatenate([y0, y1, x0, x1]).astype(np.int32)
    floats = np.concatenate([fy, fx]).astype(np.float32)
    table = c.table(np.concatenate([ints, floats.view(np.int32)]))
    a = c.input(x)
    dst = c.output(y)
    n = ly.vectors
    geom = (lx.H, lx.W, lx.S, lx.B, ly.H, ly.W, int(nearest))
    c.launch("resize", n, a, None, table, dst, c.params(n, ly, y, geom), ctx.index)


@handles("SOFTMAX")
def softmax(c: Compiler, ctx: NodeContext) -> None:
    x, y = ctx.input(0), ctx.outputs[0]
    assert x is not None
    ly = c.layout(y)
    a = c.input(x)
    dst = c.output(y)
    n = ly.B * ly.H * ly.W
    beta = float(np.float32(ctx.options.get("beta", 1.0)))
    c.launch("softmax", n, a, None, None, dst, c.params(n, ly, y, (ly.H * ly.W, ly.S, ly.C, beta)), ctx.index)


@handles(*REDUCE)
def reduce(c: Compiler, ctx: NodeContext) -> None:
    x, y, axes_in = ctx.input(0), ctx.outputs[0], ctx.input(1)
    assert x is not None and axes_in is not None
    lx = c.layout(x)
    rank = len(x.shape)
    axes = {int(a) + rank if int(a) < 0 else int(a) for a in c.value(axes_in, as_float=False).reshape(-1)}
    if any(not 0 <= a < rank for a in axes):
        raise CompileError(f"{ctx.op.name}: axis out of range")
    flags = [0, 0, 0, 0]
    count = 1
    for ax in axes:
        flags[AXES[rank][ax]] = 1
        count *= int(x.shape[ax])
    keep = Layout(tuple(1 if i in axes else int(d) for i, d in enumerate(x.shape)))
    ly = c.layout(y)
    a = c.input(x)
    if keep.same_storage(ly):
        dst, target = c.output(y), None
    else:
        dst, target = c.temp(keep), c.output(y)
    n = keep.vectors
    geom = (lx.H, lx.W, lx.S, lx.B, lx.C, keep.H, keep.W, keep.S, *flags, REDUCE[ctx.op.name],
            1.0 / max(count, 1))
    c.launch("reduce", n, a, None, None, dst, c.params(n, keep, y, geom), ctx.index)
    if target is not None:
        reshape_copy(c, dst, keep, target, ly, ctx.index)
