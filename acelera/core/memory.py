"""The memory budget an interpreter checks at allocate_tensors(), before it allocates.

The need is planned from the tensor shapes known at allocation: activations (every
non-constant tensor: acelera keeps each one, so get_tensor works on any intermediate, as
LiteRT's experimental_preserve_all_tensors does; no buffer is shared), plus the largest
scratch any one kernel declares
(SCRATCH: the im2col matrix of a convolution, the broadcast operands of BATCH_MATMUL, the
temporaries of an element-wise op). Over the budget, allocation stops with one
MemoryBudgetError saying how much is needed, where the peak is, and the budget.

Kernels whose temporaries grow with their input build them in tiles (kernels/tiling.py): at
most TILE_BYTES at once (TRANSPOSE_CONV's tap matrix, CONV_3D's per-tap products, the float
CONV_2D's im2col band), or blocks of BROADCAST_BLOCK output elements (ONE_HOT, element-wise
functions run through tiling.broadcast_tiles); their estimators below count those bounds.

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
    """im2col: one row per output position, kh*kw*cin columns (float64 in the widest path); the
    float CONV_2D holds at most a TILE_BYTES band of it. The integer (quantized, hybrid) CONV_2D
    and every DEPTHWISE_CONV_2D hold the converted and padded input whole (at most 8 bytes an
    element, depthwise repeated to the output channels) and work in bands of output rows of at
    most TILE_BYTES (kernels/conv.py: 8 bytes per patch element and CONV_BAND_ACC_BYTES per
    output element, or DW_BAND_BYTES per depthwise output element)."""
    if len(op.inputs) < 2 or len(op.outputs) < 1:
        return 0
    w, out = shapes[op.inputs[1]], shapes[op.outputs[0]]
    if len(w) < 2 or not out:
        return 0
    positions = int(np.prod(out[:-1], dtype=np.float64))
    depthwise = op.op == "DEPTHWISE_CONV_2D"
    taps = int(np.prod(w[1:], dtype=np.float64)) if not depthwise else int(np.prod(w[1:3]))
    full = positions * taps * 8
    x_t, w_t = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
    if not depthwise and x_t.type_name == "FLOAT32" and w_t.type_name == "FLOAT32":
        return min(full, TILE_BYTES)  # the float conv builds its patch matrix in bounded bands
    x = shapes[op.inputs[0]]
    if len(x) != 4 or len(w) != 4:
        return full
    n, h, wd, c = (max(int(d), 0) for d in x)
    o, kh, kw = max(int(out[-1]), 0), max(int(w[1]), 0), max(int(w[2]), 0)
    dh = max(int(op.options.get("dilation_h_factor", 1) or 1), 1)
    dw = max(int(op.options.get("dilation_w_factor", 1) or 1), 1)
    padded = n * (h + max(kh - 1, 0) * dh) * (wd + max(kw - 1, 0) * dw)
    if depthwise:
        whole = positions * o * DW_BAND_BYTES
        return n * h * wd * c * 8 + 2 * padded * o * 8 + min(whole, TILE_BYTES)
    whole = full + positions * o * CONV_BAND_ACC_BYTES
    return n * h * wd * c * 8 + padded * c * 8 + min(whole, TILE_BYTES)


#: kernels/conv.py's bytes per output element of an integer CONV_2D band besides its patches,
#: and per output element of a DEPTHWISE_CONV_2D band (same values, not imported)
CONV_BAND_ACC_BYTES = 32
DW_BAND_BYTES = 32


def _elems(shape) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def _present(op, *inputs: int) -> bool:
    return len(op.inputs) > max(inputs) and all(op.inputs[i] >= 0 for i in inputs) and bool(op.outputs)


def _transpose_conv_scratch(sg: Subgraph, shapes: Shapes, op) -> int:
    """A tile of the tap matrix (input pixels x kh*kw*o, in at most float64), the padded
    accumulator, the quantized paths' int64 copy of it and the converted input (whole for the
    hybrid path)."""
    if not _present(op, 1, 2):
        return 0
    w, x, out = shapes[op.inputs[1]], shapes[op.inputs[2]], shapes[op.outputs[0]]
    if len(w) != 4 or len(x) != 4 or len(out) != 4:
        return 0
    o, kh, kw, _ = (int(d) for d in w)
    n, h, wd, c = (int(d) for d in x)
    sh = max(int(op.options.get("stride_h", 1) or 1), 1)
    sw = max(int(op.options.get("stride_w", 1) or 1), 1)
    padded = n * max((h - 1) * sh + kh, int(out[1])) * max((wd - 1) * sw + kw, int(out[2])) * max(o, 0)
    taps = min(n * h * wd * kh * kw * max(o, 0) * 8, TILE_BYTES)
    return taps + padded * 8 * 2 + n * h * wd * max(c, 0) * 8


def _conv3d_scratch(sg: Subgraph, shapes: Shapes, op) -> int:
    """One filter tap's product and its input block, in tiles of at most TILE_BYTES each: over
    the output positions (CONV_3D) or the input positions (CONV_3D_TRANSPOSE)."""
    if not _present(op, 0, 1) or (op.op != "CONV_3D" and not _present(op, 2)):
        return 0
    w, out = shapes[op.inputs[1]], shapes[op.outputs[0]]
    x = shapes[op.inputs[0]] if op.op == "CONV_3D" else shapes[op.inputs[2]]
    if len(w) != 5 or len(x) != 5 or len(out) != 5:
        return 0
    ci, co = (int(x[4]), int(w[4])) if op.op == "CONV_3D" else (int(x[4]), int(w[3]))
    positions = _elems(out[:4]) if op.op == "CONV_3D" else _elems(x[:4])
    item = sg.tensors[op.outputs[0]].dtype.itemsize
    return 2 * min(positions * max(ci, co, 0) * item, TILE_BYTES)


def _one_hot_scratch(sg: Subgraph, shapes: Shapes, op) -> int:
    """Blocks of BROADCAST_BLOCK indices: their int32 copy, mask and coordinates."""
    if not _present(op, 0):
        return 0
    return min(_elems(shapes[op.inputs[0]]), BROADCAST_BLOCK) * 64


#: Element-wise ops' temporaries, in bytes per output element, by op and input type, as the
#: kernels allocate them for a broadcast kernels/binary_common.py's `blocked` cannot split into
#: rows (e.g. (n, 1, c) with (1, m, 1)): the 8-bit lookup index, int16 fixed-point int64
#: temporaries, the materialized operands of `blocked_into` (measured with tracemalloc,
#: tests/test_memory_tiling.py), with the block of the result that `blocked` and
#: tiling.broadcast_tiles copy into the output. Broadcasts it does split (equal shapes, a
#: single-element or trailing-dims operand) hold them for BROADCAST_BLOCK elements at a time, as
#: do the ops in TILED_BROADCAST_OPS for every broadcast.
_QUANT8 = {"INT8": 11, "UINT8": 11}
ELEMENTWISE_BROADCAST: dict[str, dict[str, int]] = {
    "ADD": {**_QUANT8, "INT16": 4}, "SUB": {**_QUANT8, "INT16": 4}, "MUL": {**_QUANT8, "INT16": 16},
    "DIV": {**_QUANT8, "INT16": 56, "INT32": 10}, "SQUARED_DIFFERENCE": {"INT8": 11},
    "EQUAL": {**_QUANT8, "INT16": 4}, "NOT_EQUAL": {**_QUANT8, "INT16": 4}, "LESS": {**_QUANT8, "INT16": 4},
    "LESS_EQUAL": {**_QUANT8, "INT16": 4}, "GREATER": {**_QUANT8, "INT16": 4},
    "GREATER_EQUAL": {**_QUANT8, "INT16": 4},
}
#: element-wise paths that compute whole whatever the broadcast (bytes per output element)
ELEMENTWISE_WHOLE: dict[str, dict[str, int]] = {
    "POW": {"INT32": 24}, "FLOOR_DIV": {"FLOAT32": 16, "INT8": 4, "INT16": 4, "INT32": 8},
    "FLOOR_MOD": {"FLOAT32": 12}, "MUL": {"COMPLEX64": 24},
}
#: ops whose kernels run every broadcast through kernels/tiling.broadcast_tiles(_into): the
#: element-wise ops above, whose binary_common.py `blocked` / `blocked_into` call them for the
#: broadcasts they cannot split into rows
TILED_BROADCAST_OPS: frozenset[str] = frozenset(ELEMENTWISE_BROADCAST)


def _splits_into_rows(xs: tuple, ys: tuple, out: tuple) -> bool:
    """Whether binary_common.py's `blocked` splits this broadcast into rows (its _block_inner)."""
    if tuple(xs) == tuple(ys):
        return True
    for small, big in ((xs, ys), (ys, xs)):
        if tuple(big) != tuple(out):
            continue
        if _elems(small) == 1:
            return True
        padded = (1,) * (len(out) - len(small)) + tuple(small)
        k = next((i for i, d in enumerate(padded) if d != 1), len(padded))
        if padded[k:] == tuple(out[k:]):
            return True
    return False


def _elementwise_scratch(sg: Subgraph, shapes: Shapes, op) -> int:
    """ELEMENTWISE_WHOLE for every output element, ELEMENTWISE_BROADCAST for every element of an
    unsplit broadcast (or for one block of a split one)."""
    if not _present(op, 0, 1):
        return 0
    kind = sg.tensors[op.inputs[0]].type_name
    out = tuple(shapes[op.outputs[0]])
    n = _elems(out)
    whole = ELEMENTWISE_WHOLE.get(op.op, {}).get(kind, 0) * n
    per = ELEMENTWISE_BROADCAST.get(op.op, {}).get(kind, 0)
    xs, ys = tuple(shapes[op.inputs[0]]), tuple(shapes[op.inputs[1]])
    tiled = op.op in TILED_BROADCAST_OPS or _splits_into_rows(xs, ys, out)
    return whole + per * (min(n, BROADCAST_BLOCK) if tiled else n)


#: the largest temporary a tiled kernel builds at once (kernels/tiling.py reads it at each call); the
#: float CONV_2D's im2col band (kernels/conv.py IM2COL_TILE_BYTES) has the same value, not
#: imported: core.memory stays below the kernels
TILE_BYTES = 64 << 20
#: output elements per block of a tiled element-wise kernel (kernels/tiling.py broadcast_tiles)
BROADCAST_BLOCK = 1 << 17


def _batch_matmul_scratch(sg: Subgraph, shapes: Shapes, op) -> int:
    out: tuple[int, ...] = shapes[op.outputs[0]] if op.outputs else ()
    a: tuple[int, ...] = shapes[op.inputs[0]] if op.inputs else ()
    b: tuple[int, ...] = shapes[op.inputs[1]] if len(op.inputs) > 1 else ()
    if len(out) < 2 or len(a) < 2 or len(b) < 2:
        return 0
    batch = int(np.prod(out[:-2], dtype=np.float64))
    return batch * (a[-2] * a[-1] + b[-2] * b[-1]) * 8


#: op -> scratch bytes one node of it needs beyond its outputs, from the shapes
SCRATCH: dict[str, Callable[[Subgraph, Shapes, object], int]] = {
    "CONV_2D": _conv_scratch, "DEPTHWISE_CONV_2D": _conv_scratch, "TRANSPOSE_CONV": _transpose_conv_scratch,
    "CONV_3D": _conv3d_scratch, "CONV_3D_TRANSPOSE": _conv3d_scratch, "BATCH_MATMUL": _batch_matmul_scratch,
    "ONE_HOT": _one_hot_scratch,
    **{name: _elementwise_scratch for name in {*ELEMENTWISE_BROADCAST, *ELEMENTWISE_WHOLE}},
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
