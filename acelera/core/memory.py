"""The memory budget an interpreter checks at allocate_tensors(), before it allocates.

The need is planned from the tensor shapes known at allocation: activations (every
non-constant tensor: acelera keeps each one, so get_tensor works on any intermediate, as
LiteRT's experimental_preserve_all_tensors does; no buffer is shared), plus the largest
scratch any one kernel declares
(SCRATCH: the im2col matrix of a convolution, the broadcast operands of BATCH_MATMUL). Over
the budget, allocation stops with one MemoryBudgetError saying how much is needed, where the
peak is, and the budget.

The budget: `Interpreter(..., max_memory_bytes=N)`, else the environment variable
ACELERA_MAX_MEMORY_BYTES, else half of the machine's physical memory (8 GiB where it cannot
be read). Constants are not counted: they are already in memory with the model.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np

from acelera.core.errors import AceleraError
from acelera.core.model import Subgraph

Shapes = Sequence[tuple[int, ...]]


class MemoryBudgetError(AceleraError, MemoryError):
    """The model needs more memory than the interpreter's budget allows."""


def physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16 << 30


def default_budget() -> int:
    env = os.environ.get("ACELERA_MAX_MEMORY_BYTES")
    if env:
        try:
            v = int(float(env))
        except ValueError:
            raise MemoryBudgetError(f"ACELERA_MAX_MEMORY_BYTES={env!r} is not a number of bytes") from None
        if v <= 0:
            raise MemoryBudgetError(f"ACELERA_MAX_MEMORY_BYTES={env!r} must be positive")
        return v
    return physical_memory() // 2


def check_budget_value(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) <= 0:
        raise MemoryBudgetError(f"max_memory_bytes must be a positive integer, got {v!r}")
    return int(v)


def _bytes(sg: Subgraph, shapes: Shapes, t: int) -> int:
    dt = sg.tensors[t].dtype
    item = 8 if dt == np.object_ else dt.itemsize  # a STRING element: at least a pointer
    n = 1
    for d in shapes[t]:
        n *= max(int(d), 0)
    return n * item


def _conv_scratch(sg: Subgraph, shapes: Shapes, op) -> int:
    """im2col: one row per output position, kh*kw*cin columns (float64 in the widest path)."""
    if len(op.inputs) < 2 or len(op.outputs) < 1:
        return 0
    w, out = shapes[op.inputs[1]], shapes[op.outputs[0]]
    if len(w) < 2 or not out:
        return 0
    positions = int(np.prod(out[:-1], dtype=np.float64))
    taps = int(np.prod(w[1:], dtype=np.float64)) if op.op != "DEPTHWISE_CONV_2D" else int(np.prod(w[1:3]))
    if op.op == "TRANSPOSE_CONV":
        taps = int(np.prod(w[1:], dtype=np.float64))
        positions = int(np.prod(shapes[op.inputs[2]][:-1], dtype=np.float64)) if len(op.inputs) > 2 else positions
    full = positions * taps * 8
    if op.op == "CONV_2D" and sg.tensors[op.inputs[0]].type_name == "FLOAT32":
        return min(full, TILE_BYTES)  # the float conv builds its patch matrix in bounded bands
    return full


#: the float CONV_2D's im2col band (kernels/conv.py IM2COL_TILE_BYTES), not imported: core.memory
#: stays below the kernels
TILE_BYTES = 64 << 20


def _batch_matmul_scratch(sg: Subgraph, shapes: Shapes, op) -> int:
    out = shapes[op.outputs[0]] if op.outputs else ()
    a = shapes[op.inputs[0]] if op.inputs else ()
    b = shapes[op.inputs[1]] if len(op.inputs) > 1 else ()
    if len(out) < 2 or len(a) < 2 or len(b) < 2:
        return 0
    batch = int(np.prod(out[:-2], dtype=np.float64))
    return batch * (a[-2] * a[-1] + b[-2] * b[-1]) * 8


#: op -> scratch bytes one node of it needs beyond its outputs, from the shapes
SCRATCH: dict[str, Callable[[Subgraph, Shapes, object], int]] = {
    "CONV_2D": _conv_scratch, "DEPTHWISE_CONV_2D": _conv_scratch, "TRANSPOSE_CONV": _conv_scratch,
    "CONV_3D": _conv_scratch, "CONV_3D_TRANSPOSE": _conv_scratch, "BATCH_MATMUL": _batch_matmul_scratch,
}


def plan(sg: Subgraph, shapes: Shapes) -> tuple[int, int, str]:
    """(activation bytes, largest scratch bytes, where the largest of each is)."""
    total, biggest, big_at = 0, 0, ""
    for t in sg.tensors:
        if t.is_constant:
            continue
        size = _bytes(sg, shapes, t.index)
        total += size
        if size > biggest:
            biggest, big_at = size, f"tensor {t.index} ('{t.name}', {_gib(size)})"
    scratch, where = 0, ""
    for n in sg.execution_order:
        op = sg.operators[n]
        fn = SCRATCH.get(op.op)
        if fn is None:
            continue
        try:
            s = int(fn(sg, shapes, op))
        except (IndexError, ValueError, TypeError):
            continue
        if s > scratch:
            scratch, where = s, f"node {n} ({op.op})"
    return total, scratch, (f"largest: {big_at}" if big_at else "no activations") + (
        f", largest scratch at {where}" if where else "")


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 28 else f"{n / (1 << 20):.1f} MiB"


def check(sg: Subgraph, shapes: Shapes, budget: int) -> int:
    """The planned need in bytes; MemoryBudgetError when it exceeds `budget`."""
    peak, scratch, where = plan(sg, shapes)
    need = peak + scratch
    if need > budget:
        where_sg = f"subgraph {sg.index}: " if sg.index else ""
        raise MemoryBudgetError(
            f"{where_sg}the model needs {_gib(need)} ({_gib(peak)} of activations + {_gib(scratch)} of kernel scratch; "
            f"{where}) but the memory budget is {_gib(budget)} (set max_memory_bytes= or ACELERA_MAX_MEMORY_BYTES)")
    return need
