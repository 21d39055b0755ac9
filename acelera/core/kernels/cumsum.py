"""CUMSUM reference kernel (tflite/kernels/cumsum.cc, CumsumImpl in
tflite/kernels/internal/optimized/optimized_ops.h).

LiteRT's Eigen scan adds one element at a time to an accumulator that starts at zero, in the
input type (integers wrap); exclusive writes the accumulator before adding, reverse scans from
the end. numpy's add.accumulate performs the same float32 additions in the same order; the
accumulator's +0.0 start only shows on prefixes of -0.0 (fixed by adding +0.0).
While widening (registry.widening) FLOAT64 is taken too.
"""
from __future__ import annotations

import numpy as np

from acelera.core.dtypes import TYPE_CODES
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity, same_type_output
from acelera.core.kernels.registry import Kernel, NodeContext, float_type_names, register

_INT32, _INT64 = TYPE_CODES["INT32"], TYPE_CODES["INT64"]
_TYPES = ("INT32", "FLOAT32", "INT64")


@register("CUMSUM", max_version=1, dtypes=_TYPES)
def cumsum(node: NodeContext) -> Kernel:
    check_arity(node, 2, 1)
    x_t, axis_t = node.inputs
    assert x_t is not None and axis_t is not None  # check_arity refused missing inputs
    if x_t.type_name not in _TYPES + float_type_names():
        raise node.unsupported(f"input type {x_t.type_name} is not supported (INT32, FLOAT32, INT64)")
    if axis_t.type != _INT32:
        raise node.unsupported(f"axis of type {axis_t.type_name} is not supported (INT32)")
    if int(np.prod(axis_t.shape, dtype=np.int64)) != 1:
        raise node.unsupported(f"axis must have one element, got shape {list(axis_t.shape)}")
    if len(x_t.shape) < 1:
        raise node.unsupported("input must have rank >= 1")
    dt = same_type_output(node, x_t)
    exclusive = bool(node.options.get("exclusive", False))
    reverse = bool(node.options.get("reverse", False))

    is_float = np.dtype(dt).kind == "f"
    plans: dict[tuple[int, int], tuple] = {}

    def plan(rank: int, a: int) -> tuple:
        """Index tuples along axis a: the reversed view, the first slice, all but the last,
        all but the first."""
        head = (slice(None),) * a
        p = plans[(rank, a)] = (head + (slice(None, None, -1),), head + (slice(0, 1),),
                                head + (slice(None, -1),), head + (slice(1, None),))
        return p

    zero = np.zeros((), dt)
    add, accumulate = np.add, np.add.accumulate

    def run(x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        rank = x.ndim
        a = int(axis.reshape(-1)[0]) if axis.size != 1 else int(axis.item())
        if a < 0:
            a += rank
        if not 0 <= a < rank:
            raise KernelError(f"axis {int(axis.reshape(-1)[0])} is out of range for rank {rank}")
        if x.size == 0:
            return np.zeros(x.shape, dt)
        rev, first, but_last, but_first = plans.get((rank, a)) or plan(rank, a)
        out = np.empty(x.shape, dt)
        y, o = (x[rev], out[rev]) if reverse else (x, out)
        if exclusive:
            o[first] = 0
            if x.shape[a] > 1:
                accumulate(y[but_last], axis=a, dtype=dt, out=o[but_first])
        elif y.dtype == dt:
            accumulate(y, a, None, o)
        else:
            accumulate(y, axis=a, dtype=dt, out=o)
        if is_float:
            # LiteRT's accumulator starts at +0.0: only all -0.0 prefixes differ (-0.0 here),
            # and adding +0.0 turns exactly those into +0.0.
            add(out, zero, out=out)
        return out

    return run
