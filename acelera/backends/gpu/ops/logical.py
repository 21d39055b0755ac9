"""Comparisons, LOGICAL_AND, CAST and SELECT / SELECT_V2: the ops around bool tensors.

Inside a partition a bool is a float 0.0 / 1.0 in the ordinary PHWC4 buffers (float32 buffers
in a half-storage plan, see compiler.py), an int32 a float holding the integer; the host
converts bool and int32 tensors at the partition boundary (boundary.py).

- EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, LOGICAL_AND run as
  `binary` with exact operands (broadcasting like the other binary ops) and write 0/1.
- CAST (bool -> float, float -> bool, float <-> int32, identities) is `unary` with an exact operand: float ->
  int32 truncates toward zero on the device, saturation and NaN (-> INT32_MAX) are applied
  where the value leaves the partition, as LiteRT's cast does; -> bool is `!= 0` (NaN -> true).
- SELECT / SELECT_V2 run as `where`: each of condition, if and else broadcast through its own
  strides; SELECT's rank-1 condition over the first dimension reads one condition per batch row.

Decision on TFLite's consumer rule. TFLite's GPU delegate accepts a comparison or logical op
only when its single consumer is a CAST / SELECT / SELECT_V2 producing float, and a CAST from
bool only after such an op, so that no bool tensor ever crosses the delegate's boundary. Node
constraints here see one node (`Constraint.check(node)`), not its consumers, so this delegate
accepts bool outputs and bool inputs of these ops anywhere and converts them on the host at the
partition boundary instead. That is sound (every result equals the CPU reference: bools are
exact 0/1 floats, and the comparisons read partition inputs and constants in float32), and it
only ever delegates more than TFLite would: a comparison whose bool result leaves the
partition costs one host conversion, nothing else.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from acelera.backends.gpu import params as S
from acelera.backends.gpu.layout import AXES
from acelera.backends.gpu.ops.common import CompileError, Handlers
from acelera.backends.gpu.ops.elementwise import binary_launch, operand_view, unary_exact
from acelera.core.kernels.registry import NodeContext

if TYPE_CHECKING:
    from acelera.backends.gpu.compiler import Compiler

HANDLERS = Handlers()
handles = HANDLERS.handles

COMPARE = {"EQUAL": S.B_EQUAL, "NOT_EQUAL": S.B_NOT_EQUAL, "LESS": S.B_LESS, "LESS_EQUAL": S.B_LESS_EQUAL,
           "GREATER": S.B_GREATER, "GREATER_EQUAL": S.B_GREATER_EQUAL, "LOGICAL_AND": S.B_AND}
FLOATS = ("FLOAT32", "FLOAT16")
INTS = ("INT32",)


@handles(*COMPARE)
def compare(c: Compiler, ctx: NodeContext) -> None:
    binary_launch(c, ctx, COMPARE[ctx.op.name], exact=True)


def cast_code(src: str, dst: str) -> int:
    """The unary code of a CAST from type `src` to `dst` (TFLite's GPU cases only)."""
    if dst == "BOOL" and src in FLOATS + ("BOOL",):
        return S.U_TO_BOOL
    if dst in INTS and src in FLOATS:
        return S.U_TO_INT32
    if (dst in FLOATS and src in FLOATS + INTS + ("BOOL",)) or (dst in INTS and src in INTS):
        return S.U_NONE
    raise CompileError(f"CAST from {src} to {dst} is not supported")


@handles("CAST")
def cast(c: Compiler, ctx: NodeContext) -> None:
    x = ctx.input(0)
    assert x is not None
    unary_exact(c, ctx, cast_code(x.type_name, ctx.outputs[0].type_name))


def _operand(shape: tuple[int, ...], out_shape: tuple[int, ...], first_dim: bool) -> tuple[list[int], int]:
    """Strides of an operand of `where`: vectors (b, s, h, w), or scalars when it is read one
    value at a time (splat, returned 1). `first_dim`: SELECT's rank-1 condition that selects
    whole rows of the first dimension."""
    if first_dim:
        if AXES[len(out_shape)][0] != 0:
            raise CompileError("SELECT: a rank-1 condition needs an output of rank >= 2")
        return [1, 0, 0, 0], 1  # element n of a rank-1 tensor is scalar n of its storage
    strides, splat = operand_view(shape, out_shape)
    if splat:
        strides = [4 * s for s in strides]
    return strides, splat


@handles("SELECT", "SELECT_V2")
def select(c: Compiler, ctx: NodeContext) -> None:
    cond, x, y = ctx.input(0), ctx.input(1), ctx.input(2)
    assert cond is not None and x is not None and y is not None
    out = ctx.outputs[0]
    lo = c.layout(out)
    oshape = tuple(int(d) for d in out.shape)
    cshape = tuple(int(d) for d in cond.shape)
    first_dim = (ctx.op.name == "SELECT" and len(cshape) == 1 and len(oshape) >= 2 and cshape[0] == oshape[0]
                 and cshape[0] != 1)
    views = [_operand(cshape, oshape, first_dim)]
    views += [_operand(tuple(int(d) for d in t.shape), oshape, False) for t in (x, y)]
    (a, fa), (b, fb), (cc, fc) = (c.operand(t) for t in (cond, x, y))
    dst = c.output(out)
    n = lo.vectors
    geom = (lo.H, lo.W, lo.S, lo.B, *views[0][0], *views[1][0], *views[2][0], views[0][1], views[1][1],
            views[2][1], fa, fb, fc)
    c.launch("where", n, a, b, cc, dst, c.params(n, lo, out, geom), ctx.index)
