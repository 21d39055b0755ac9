"""Valid ranges for integer model inputs that are indices.

TFLite's inference_diff draws int32 inputs over the whole int32 range, which makes every model
that looks its input up in a table (an Embedding text classifier: token ids into GATHER) fail
with an out-of-range index in LiteRT and acelera alike. `index_bounds` finds the graph inputs
that reach an index operand, directly or through shape-only ops, and the half-open range
[0, n) the indexed dimension allows; inference_diff and the conformance suite draw those
inputs from that range and say so.
"""
from __future__ import annotations

from acelera.core.model import Model, Operator, Subgraph

#: ops that pass values through unchanged (an index stays an index)
PASS_THROUGH = {"CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "IDENTITY", "TRANSPOSE", "SLICE",
                "STRIDED_SLICE", "CONCATENATION", "PACK", "UNPACK", "SPLIT", "TILE", "BROADCAST_TO"}
#: ops an index passes through in the pattern Keras' Embedding emits for negative ids
#: (`where(x < 0, x + n, x)`): SELECT's value operands and the ADD feeding one
SELECTS = {"SELECT": (1, 2), "SELECT_V2": (1, 2), "ADD": (0, 1)}


def _index_limit(sg: Subgraph, op, pos: int) -> int | None:
    """The exclusive upper bound on values at input `pos` of `op`, if it is an index operand."""
    shape = lambda i: sg.tensors[op.inputs[i]].shape  # noqa: E731
    if op.op == "GATHER" and pos == 1:
        params = shape(0)
        axis = int(op.options.get("axis", 0))
        axis = axis + len(params) if axis < 0 else axis
        return int(params[axis]) if 0 <= axis < len(params) else None
    if op.op == "EMBEDDING_LOOKUP" and pos == 0:
        return int(shape(1)[0]) if len(shape(1)) else None
    if op.op == "GATHER_ND" and pos == 1:
        params, idx = shape(0), shape(1)
        depth = int(idx[-1]) if len(idx) else 0
        return min((int(d) for d in params[:depth]), default=None)
    return None


def index_bounds(model: Model) -> dict[int, tuple[int, int, str]]:
    """Input position -> (low, high exclusive, why) for integer inputs used as indices."""
    sg = model.main
    consumers: dict[int, list[tuple[Operator, int]]] = {}
    for op in sg.operators:
        for pos, t in enumerate(op.inputs):
            if t >= 0:
                consumers.setdefault(t, []).append((op, pos))
    out: dict[int, tuple[int, int, str]] = {}
    for k, t in enumerate(sg.inputs):
        if sg.tensors[t].dtype.kind not in "iu":
            continue
        limit, why, seen, todo = None, "", set(), [t]
        while todo:
            cur = todo.pop()
            if cur in seen:
                continue
            seen.add(cur)
            for op, pos in consumers.get(cur, []):
                n = _index_limit(sg, op, pos)
                if n is not None and n > 0 and (limit is None or n < limit):
                    limit, why = n, f"it indexes {op.op} node {sg.operators.index(op)}"
                elif (op.op in PASS_THROUGH and pos == 0) or pos in SELECTS.get(op.op, ()):
                    todo.extend(o for o in op.outputs if o >= 0)
        if limit is not None:
            out[k] = (0, limit, why)
    return out
