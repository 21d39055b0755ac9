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
    """The band of output rows a (DEPTHWISE_)CONV_2D holds at once (kernels/conv_im2col.py): at
    most TILE_BYTES, or one output row where a row alone is larger. A CONV_2D band is its im2col
    rows (kh*kw*cin per output position; the integer paths counted at 8 bytes an element, plus
    CONV_BAND_ACC_BYTES per output element; grouped: twice the rows, for their transposed
    copy, and 8 bytes per output element for the product's); a DEPTHWISE_CONV_2D band is
    DW_BAND_BYTES per output element plus the padded input rows it reads, channels repeated to
    the output's, at 8 bytes. The whole float CONV_2D im2col
    when it fits in a tile, nothing for a 1x1 stride-1 ungrouped one (the input is the matrix);
    the hybrid paths also keep the whole input quantized to int8 and quantize it a batch at a
    time (HYBRID_BATCH_BYTES per element of a batch)."""
    if len(op.inputs) < 2 or len(op.outputs) < 1:
        return 0
    x, w, out = shapes[op.inputs[0]], shapes[op.inputs[1]], shapes[op.outputs[0]]
    if len(x) != 4 or len(w) != 4 or len(out) != 4:
        return 0
    n, h, wd, c = (max(int(d), 0) for d in x)
    _, oh, ow, o = (max(int(d), 0) for d in out)
    kh, kw = max(int(w[1]), 0), max(int(w[2]), 0)
    x_t, w_t = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
    is_float = x_t.type_name in ("FLOAT32", "FLOAT64")
    # the int8 input, and one batch's float32 quantization temporaries (conv_quantization.py)
    hybrid = n * h * wd * c + h * wd * c * HYBRID_BATCH_BYTES if is_float and w_t.type_name != x_t.type_name else 0
    tile = TILE_BYTES
    if op.op == "DEPTHWISE_CONV_2D":
        sw = max(int(op.options.get("stride_w", 1) or 1), 1)
        sh = max(int(op.options.get("stride_h", 1) or 1), 1)
        dw = max(int(op.options.get("dilation_w_factor", 1) or 1), 1)
        wp = max(ow - 1, 0) * sw + max(kw - 1, 0) * dw + 1
        row = n * (ow * o * DW_BAND_BYTES + sh * wp * o * 8)
        return hybrid + min(oh * row, max(tile, row))
    ci = max(int(w[3]), 1)
    groups = max(c // ci, 1)
    k = kh * kw * ci
    if is_float and not hybrid:
        item = x_t.dtype.itemsize
        strides = (int(op.options.get("stride_h", 1) or 1), int(op.options.get("stride_w", 1) or 1))
        if kh == kw == 1 and groups == 1 and strides == (1, 1):
            return 0
        row = n * ow * k * groups * item * (2 if groups > 1 else 1)
        return min(oh * row, max(tile, row))
    row = n * ow * (k * groups * 8 * (2 if groups > 1 else 1) + o * (CONV_BAND_ACC_BYTES + (8 if groups > 1 else 0)))
    return hybrid + min(oh * row, max(tile, row))


#: kernels/conv_im2col.py's bytes per output element of an integer CONV_2D band besides its
#: patches, and per output element of a DEPTHWISE_CONV_2D band (same values, not imported)
CONV_BAND_ACC_BYTES = 32
DW_BAND_BYTES = 32
#: float32 temporaries per input element of one batch quantized by the hybrid convolutions
#: (the scaled values, their rounding, its sign mask; measured in tests/test_memory_tiling.py)
HYBRID_BATCH_BYTES = 16


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


#: the largest temporary a tiled kernel builds at once (kernels/tiling.py and the convolutions'
#: bands, kernels/conv_im2col.py, read it at each call)
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


def _pool_scratch(sg: Subgraph, shapes: Shapes, op) -> int:
    """kernels/pooling.py pools one axis at a time: the input padded along the rows (whole),
    the row-pooled result and its copy padded along the columns, and the integer average's
    rounding temporaries of the output (counted at 8 bytes an element)."""
    if not _present(op, 0):
        return 0
    x, out = shapes[op.inputs[0]], shapes[op.outputs[0]]
    if len(x) != 4 or len(out) != 4:
        return 0
    n, h, w, c = (max(int(d), 0) for d in x)
    oh, ow = max(int(out[1]), 0), max(int(out[2]), 0)
    fh, fw = max(_int_opt(op, "filter_height", 1), 1), max(_int_opt(op, "filter_width", 1), 1)
    return n * c * 8 * ((h + fh) * w + 2 * oh * (w + fw) + 4 * oh * ow)


#: op -> scratch bytes one node of it needs beyond its outputs, from the shapes
SCRATCH: dict[str, Callable[[Subgraph, Shapes, object], int]] = {
    "CONV_2D": _conv_scratch, "DEPTHWISE_CONV_2D": _conv_scratch, "TRANSPOSE_CONV": _transpose_conv_scratch,
    "CONV_3D": _conv3d_scratch, "CONV_3D_TRANSPOSE": _conv3d_scratch, "BATCH_MATMUL": _batch_matmul_scratch,
    "ONE_HOT": _one_hot_scratch, **{name: _pool_scratch for name in ("AVERAGE_POOL_2D", "MAX_POOL_2D")},
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


# --- the shape pass, step by step ------------------------------------------------------------
#
# allocate_tensors() checks the budget on the declared shapes; the shape pass that follows runs
# every kernel on zeros at the real shapes, which a graph input's shape or a data-dependent op
# can make far larger than declared. StepBudget re-checks before each kernel runs, with its
# outputs estimated from the shapes now known (output_shapes) and its declared SCRATCH, and
# again after it runs with the shapes it produced.

#: ops whose output has the shape (or at least the element count) of their first input
SAME_SIZE = frozenset({
    "ABS", "CEIL", "COS", "EXP", "FLOOR", "LOG", "LOGISTIC", "NEG", "RELU", "RELU6", "RELU_N1_TO_1",
    "RELU_0_TO_1", "ROUND", "RSQRT", "SIN", "SQRT", "SQUARE", "TANH", "ELU", "GELU", "HARD_SWISH",
    "LEAKY_RELU", "SOFTMAX", "LOG_SOFTMAX", "CAST", "QUANTIZE", "DEQUANTIZE", "LOGICAL_NOT", "SIGN",
    "L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION", "REVERSE_V2", "CUMSUM", "ZEROS_LIKE",
    "ONES_LIKE", "TRANSPOSE", "RESHAPE", "EXPAND_DIMS", "SQUEEZE", "FAKE_QUANT", "BITCAST",
})
#: ops whose output is the numpy broadcast of their inputs
BROADCASTING = frozenset({
    "ADD", "SUB", "MUL", "DIV", "POW", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "FLOOR_DIV",
    "FLOOR_MOD", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND",
    "LOGICAL_OR", "SELECT", "SELECT_V2", "ATAN2", "BITWISE_XOR", "RIGHT_SHIFT", "PRELU",
})
POOLS = frozenset({"AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"})


def _window_out(padding: int, size: int, k: int, stride: int, dilation: int = 1) -> int:
    """kernels/common.py out_size (SAME 0, VALID 1), 0 where it would refuse."""
    eff = (k - 1) * dilation + 1
    num = size + stride - 1 if padding == 0 else size + stride - eff
    return max(num // stride, 0) if stride > 0 else 0


def _int_opt(op, name: str, default: int) -> int:
    v = op.options.get(name, default)
    try:
        return default if v is None else int(v)
    except (TypeError, ValueError):
        return default


def _spatial_out(op, x: tuple, kh: int, kw: int, sh_name: str = "stride_h", sw_name: str = "stride_w",
                 dilated: bool = True) -> tuple[int, int]:
    pad = _int_opt(op, "padding", 0)
    sh, sw = max(_int_opt(op, sh_name, 1), 1), max(_int_opt(op, sw_name, 1), 1)
    dh = max(_int_opt(op, "dilation_h_factor", 1), 1) if dilated else 1
    dw = max(_int_opt(op, "dilation_w_factor", 1), 1) if dilated else 1
    return _window_out(pad, int(x[1]), kh, sh, dh), _window_out(pad, int(x[2]), kw, sw, dw)


def _infer_one(sg: Subgraph, shapes: Shapes, op) -> tuple[int, ...] | None:
    """The first output's shape from the shapes of the inputs, for the ops that can produce a
    large output from a large input; None where it is not inferred here."""
    name = op.op
    ins = [tuple(shapes[t]) if t >= 0 else None for t in op.inputs]
    if not ins or ins[0] is None:
        return None
    x = ins[0]
    if name in SAME_SIZE:
        return x
    if name in BROADCASTING:
        present = [s for s in ins if s is not None]
        try:
            return tuple(np.broadcast_shapes(*present))
        except ValueError:
            return None
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(ins) > 1 and ins[1] is not None:
        w = ins[1]
        if len(x) != 4 or len(w) != 4:
            return None
        oh, ow = _spatial_out(op, x, int(w[1]), int(w[2]))
        return (int(x[0]), oh, ow, int(w[0] if name == "CONV_2D" else w[3]))
    if name in POOLS and len(x) == 4:
        kh, kw = _int_opt(op, "filter_height", 1), _int_opt(op, "filter_width", 1)
        oh, ow = _spatial_out(op, x, max(kh, 1), max(kw, 1), dilated=False)
        return (int(x[0]), oh, ow, int(x[3]))
    if name == "GATHER" and len(ins) > 1 and ins[1] is not None:
        axis, batch = _int_opt(op, "axis", 0), _int_opt(op, "batch_dims", 0)
        axis = axis + len(x) if axis < 0 else axis
        batch = batch + len(ins[1]) if batch < 0 else batch
        if not (0 <= batch <= axis < len(x)) or batch > len(ins[1]):
            return None
        return x[:axis] + ins[1][batch:] + x[axis + 1:]
    if name == "CONCATENATION":
        axis = _int_opt(op, "axis", 0)
        axis = axis + len(x) if axis < 0 else axis
        if not 0 <= axis < len(x) or any(s is None or len(s) != len(x) for s in ins):
            return None
        return x[:axis] + (sum(int(s[axis]) for s in ins if s is not None),) + x[axis + 1:]
    if name == "FULLY_CONNECTED" and len(ins) > 1 and ins[1] is not None and len(ins[1]) == 2:
        units, k = int(ins[1][0]), int(ins[1][1])
        return (_elems(x) // k if k > 0 else 0, units)
    if name == "BATCH_MATMUL" and len(ins) > 1 and ins[1] is not None and len(x) >= 2 and len(ins[1]) >= 2:
        a, b = x, ins[1]
        rows = a[-1] if op.options.get("adj_x") else a[-2]
        cols = b[-2] if op.options.get("adj_y") else b[-1]
        try:
            return tuple(np.broadcast_shapes(a[:-2], b[:-2])) + (int(rows), int(cols))
        except ValueError:
            return None
    return None


def output_shapes(sg: Subgraph, shapes: Shapes, op) -> list[tuple[int, ...] | None]:
    """Each output's shape as far as it follows from the input shapes (None: unknown)."""
    outs: list[tuple[int, ...] | None] = [None] * len(op.outputs)
    if outs:
        try:
            outs[0] = _infer_one(sg, shapes, op)
        except (IndexError, TypeError, ValueError, OverflowError):
            outs[0] = None
    return outs


class StepBudget:
    """The shape pass's account of one subgraph: every non-constant tensor at the shape known so
    far (computed, or declared for those not reached yet), checked against `budget` before each
    kernel runs (with its estimated outputs and scratch) and after (with its real outputs)."""

    def __init__(self, sg: Subgraph, shapes: Shapes, budget: int):
        self.sg, self.budget = sg, int(budget)
        self.sizes = [0 if t.is_constant else _bytes(sg, shapes, t.index) for t in sg.tensors]
        self.total = sum(self.sizes)

    def _counted(self, t: int) -> bool:
        return 0 <= t < len(self.sizes) and not self.sg.tensors[t].is_constant

    def before(self, op, shapes: Shapes, label: str) -> None:
        """MemoryBudgetError when node `op` would take the subgraph over the budget."""
        est = output_shapes(self.sg, shapes, op)
        over = {t: s for t, s in zip(op.outputs, est) if s is not None and self._counted(t)}
        view = list(shapes)  # `shapes` with the step's estimated outputs
        for t, s in over.items():
            view[t] = s
        acts = self.total + sum(_bytes(self.sg, view, t) - self.sizes[t] for t in over)
        scratch = 0
        fn = SCRATCH.get(op.op)
        if fn is not None:
            try:
                scratch = int(fn(self.sg, view, op))
            except (IndexError, ValueError, TypeError, OverflowError):
                scratch = 0
        self._check(label, acts, scratch, "before it runs",
                    {t: _bytes(self.sg, view, t) for t in over})

    def after(self, outputs: Sequence[int], shapes: Shapes, label: str) -> None:
        """Count the outputs a node produced; MemoryBudgetError when the total is over budget."""
        for t in outputs:
            if self._counted(t):
                size = _bytes(self.sg, shapes, t)
                self.total += size - self.sizes[t]
                self.sizes[t] = size
        self._check(label, self.total, 0, "after it ran")

    def _check(self, label: str, acts: int, scratch: int, when: str,
               estimated: dict[int, int] | None = None) -> None:
        need = acts + scratch
        if need <= self.budget:
            return
        sizes = dict(enumerate(self.sizes))
        sizes.update(estimated or {})
        biggest = max(sizes, key=sizes.__getitem__, default=-1)
        big = (f"; largest: tensor {biggest} ('{self.sg.tensors[biggest].name}', {_gib(sizes[biggest])})"
               if biggest >= 0 and sizes[biggest] else "")
        raise MemoryBudgetError(
            f"{label}: at the shapes computed so far the model needs {_gib(need)} {when} "
            f"({_gib(acts)} of activations + {_gib(scratch)} of kernel scratch{big}) but the memory "
            f"budget is {_gib(self.budget)} (set max_memory_bytes= or ACELERA_MAX_MEMORY_BYTES)")
