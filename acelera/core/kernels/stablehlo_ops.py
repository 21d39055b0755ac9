"""StableHLO gather, scatter, reduce_window and rng_bit_generator: STABLEHLO_GATHER,
STABLEHLO_SCATTER, STABLEHLO_REDUCE_WINDOW, REDUCE_WINDOW and STABLEHLO_RNG_BIT_GENERATOR
(tflite/kernels/stablehlo_gather.cc, stablehlo_scatter.cc, tensor_slice_util.*,
stablehlo_reduce_window.cc, rng_bit_generator.cc, rng_util.cc).

- GATHER clamps every start index so the whole slice fits in the operand, as LiteRT does.
- SCATTER applies the updates one element at a time in row-major order of `updates`, each
  reading the value the previous ones left (so repeated indices accumulate), and skips every
  element whose target index lies outside the operand (element by element, as LiteRT does). Its
  update computation is recognised from the called subgraph like LiteRT: no node means replace,
  one STABLEHLO_ADD / _MULTIPLY / _MAXIMUM / _MINIMUM node means that operation (C++ semantics:
  integers wrap, max/min keep the current value on ties and NaN comparisons).
- REDUCE_WINDOW dilates the input by base_dilations and pads (negative: crops) it with the init
  value, then folds each window in row-major order starting from the init value, so float sums
  round as LiteRT's do. BOOL is reduced as int8 like LiteRT. STABLEHLO_REDUCE_WINDOW takes its
  reduction from the one node of its body subgraph, REDUCE_WINDOW from `reduce_function`.
- RNG_BIT_GENERATOR runs Philox4x32-10 (PHILOX, DEFAULT) or Threefry2x32-20 (THREEFRY) over a
  64-bit counter, vectorized over all the blocks an output needs.

Where LiteRT reads out of bounds on a model StableHLO calls invalid (mismatched dimension
numbers, slice sizes larger than the operand), these kernels refuse the model instead.
`index_vector_dim` equal to the indices' rank means an implicit trailing index vector of size 1.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from acelera.core import model as _model
from acelera.core.errors import KernelError
from acelera.core.kernels.registry import Kernel, NodeContext, register

_FLOAT8 = ("FLOAT8_E4M3FN", "FLOAT8_E5M2")
# stablehlo_gather.cc dispatches on the element width (8, 16, 32 or 64 bits) and only moves bits.
_GATHER_TYPES = ("UINT8", "INT8", *_FLOAT8, "UINT16", "INT16", "FLOAT16", "BFLOAT16", "FLOAT32", "INT32",
                 "UINT32", "INT64", "UINT64", "FLOAT64", "COMPLEX64", "BOOL")
_SCATTER_TYPES = ("FLOAT16", "FLOAT32", "FLOAT64", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16",
                  "UINT32", "UINT64", "BOOL")
_WINDOW_TYPES = ("BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "FLOAT32", "FLOAT64")
_INDEX_TYPES = ("INT32", "INT64")
_MAX_PARAM_DIMS = 8  # TFLITE_STABLEHLO_*_PARAMS_MAX_DIMENSION_COUNT
_MAX_WINDOW_RANK = 6  # kMaxReduceWindowRank


def _ints(node: NodeContext, key: str) -> tuple[int, ...]:
    return tuple(int(v) for v in node.options.get(key, ()) or ())


def _check_bytes(node: NodeContext, shape: Sequence[int], itemsize: int, what: str) -> None:
    if int(np.prod(shape, dtype=np.float64)) * itemsize > _model.MAX_TENSOR_BYTES:
        raise node.unsupported(f"{what} of shape {list(shape)} is too large "
                               f"(limit {_model.MAX_TENSOR_BYTES} bytes)")


def _distinct_in(node: NodeContext, values: Sequence[int], bound: int, what: str) -> None:
    if len(set(values)) != len(values) or any(not 0 <= v < bound for v in values):
        raise node.unsupported(f"{what} {list(values)} must be distinct dimensions in [0, {bound})")


def _io(node: NodeContext, n_in: int, n_out: int) -> tuple[_model.Tensor, ...]:
    """The node's inputs, after checking their and the outputs' count and that none is missing."""
    inputs = tuple(t for t in node.inputs if t is not None)
    if len(node.inputs) != n_in or len(node.outputs) != n_out or len(inputs) != n_in:
        raise node.unsupported(f"takes {n_in} inputs and {n_out} outputs, got {len(node.inputs)} and "
                               f"{len(node.outputs)}")
    return inputs


def _index_vectors(idx: np.ndarray, ivd: int) -> np.ndarray:
    """The index vectors of `idx` along `ivd` as rows (batch dimensions in row-major order)."""
    if ivd == idx.ndim:
        return idx.reshape(-1, 1).astype(np.int64)
    n = int(np.prod(idx.shape[:ivd] + idx.shape[ivd + 1:], dtype=np.int64))
    return np.moveaxis(idx, ivd, -1).reshape(n, idx.shape[ivd]).astype(np.int64)


def _strides(shape: Sequence[int]) -> np.ndarray:
    st = np.ones(len(shape), np.int64)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * shape[d + 1]
    return st


# --- STABLEHLO_GATHER --------------------------------------------------------------------

@register("STABLEHLO_GATHER", max_version=1, dtypes=_GATHER_TYPES)
def stablehlo_gather(node: NodeContext) -> Kernel:
    op_t, idx_t = _io(node, 2, 1)
    out_t = node.outputs[0]
    if idx_t.type_name not in _INDEX_TYPES:
        raise node.unsupported(f"start indices of type {idx_t.type_name} are not supported (INT32, INT64)")
    if op_t.type_name not in _GATHER_TYPES:
        raise node.unsupported(f"operand type {op_t.type_name} is not supported")
    if out_t.type != op_t.type:
        raise node.unsupported(f"output type {out_t.type_name} differs from operand type {op_t.type_name}")
    offset_dims, collapsed = _ints(node, "offset_dims"), _ints(node, "collapsed_slice_dims")
    start_map, slice_sizes = _ints(node, "start_index_map"), _ints(node, "slice_sizes")
    ivd = int(node.options.get("index_vector_dim", 0) or 0)
    shape, ishape = tuple(op_t.shape), tuple(idx_t.shape)
    rank, irank, out_rank = len(shape), len(ishape), len(out_t.shape)
    if max(len(offset_dims), len(collapsed), len(start_map), len(slice_sizes)) > _MAX_PARAM_DIMS:
        raise node.unsupported(f"dimension lists are limited to {_MAX_PARAM_DIMS} entries")
    if len(slice_sizes) != rank:
        raise node.unsupported(f"{len(slice_sizes)} slice_sizes for an operand of rank {rank}")
    if not 0 <= ivd <= irank:
        raise node.unsupported(f"index_vector_dim {ivd} is out of range for start indices of rank {irank}")
    _distinct_in(node, offset_dims, out_rank, "offset_dims")
    _distinct_in(node, collapsed, rank, "collapsed_slice_dims")
    if any(not 0 <= d < rank for d in start_map):
        raise node.unsupported(f"start_index_map {list(start_map)} names dimensions outside [0, {rank})")
    if len(offset_dims) + len(collapsed) != rank:
        raise node.unsupported(f"{len(offset_dims)} offset_dims and {len(collapsed)} collapsed_slice_dims do "
                               f"not add up to the operand rank {rank}")
    for d, (n, s) in enumerate(zip(shape, slice_sizes)):
        if not 0 <= s <= n:
            raise node.unsupported(f"slice size {s} of dimension {d} is outside [0, {n}]")
    batch_shape = tuple(n for d, n in enumerate(ishape) if d != ivd)
    if len(batch_shape) + len(offset_dims) != out_rank:
        raise node.unsupported(f"the output rank {out_rank} is not {len(batch_shape)} batch dimensions plus "
                               f"{len(offset_dims)} offset_dims")
    vec_len = ishape[ivd] if ivd < irank else 1
    if vec_len < len(start_map):
        raise node.unsupported(f"index vectors of size {vec_len} are shorter than start_index_map "
                               f"{list(start_map)}")
    kept = [d for d in range(rank) if d not in collapsed]
    offset_shape = tuple(slice_sizes[d] for d in kept)
    out_shape, b, o = [], iter(batch_shape), iter(offset_shape)
    for d in range(out_rank):
        out_shape.append(next(o) if d in offset_dims else next(b))
    _check_bytes(node, out_shape, max(out_t.dtype.itemsize, 8), "output")
    sorted_off = sorted(offset_dims)
    n_batch = len(batch_shape)
    axes = [n_batch + sorted_off.index(d) if d in offset_dims else
            sum(1 for e in range(d) if e not in offset_dims) for d in range(out_rank)]
    dims = np.asarray(shape, np.int64)
    limit = np.maximum(dims - np.asarray(slice_sizes, np.int64), 0)
    strides = _strides(shape)
    offsets = np.zeros(offset_shape, np.int64)
    for j, d in enumerate(kept):
        view = [1] * len(kept)
        view[j] = slice_sizes[d]
        offsets = offsets + np.arange(slice_sizes[d], dtype=np.int64).reshape(view) * strides[d]
    offsets = offsets.reshape(-1)
    dtype = out_t.dtype

    def run(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        if x.size == 0 or int(np.prod(out_shape)) == 0:
            return np.zeros(out_shape, dtype)
        vectors = _index_vectors(idx, ivd)
        start = np.zeros((vectors.shape[0], rank), np.int64)
        for k, d in enumerate(start_map):
            start[:, d] = vectors[:, k]
        start = np.maximum(np.minimum(start, limit), 0)
        flat = (start @ strides)[:, None] + offsets[None, :]
        res = x.reshape(-1)[flat].reshape(batch_shape + offset_shape)
        return np.array(np.transpose(res, axes), dtype, order="C")

    return run


# --- STABLEHLO_SCATTER -------------------------------------------------------------------

_REPLACE, _ADD, _MUL, _MAX, _MIN = "replace", "add", "multiply", "maximum", "minimum"
_SCATTER_BODIES = {"STABLEHLO_ADD": _ADD, "STABLEHLO_MULTIPLY": _MUL, "STABLEHLO_MAXIMUM": _MAX,
                   "STABLEHLO_MINIMUM": _MIN}


def _runtime_subgraph(node: NodeContext, key: str):
    if node.runtime is None:
        raise node.unsupported("needs the whole model (run it through an Interpreter)")
    index = int(node.options.get(key, 0) or 0)
    subgraphs = node.runtime.model.subgraphs
    if not 0 <= index < len(subgraphs):
        raise node.unsupported(f"{key} {index} is out of range (0..{len(subgraphs) - 1})")
    return subgraphs[index]


def _scatter_computation(node: NodeContext) -> str:
    sg = _runtime_subgraph(node, "update_computation_subgraph_index")
    ops = sg.operators
    if not ops:
        return _REPLACE
    if len(ops) > 1:
        raise node.unsupported(f"the update computation (subgraph {sg.index}) has {len(ops)} nodes; only one "
                               f"is allowed")
    kind = _SCATTER_BODIES.get(ops[0].op)
    if kind is None:
        name = ops[0].custom_code or ops[0].op
        raise node.unsupported(f"update computation {name} is not supported (only replace, STABLEHLO_ADD, "
                               f"STABLEHLO_MULTIPLY, STABLEHLO_MAXIMUM and STABLEHLO_MINIMUM)")
    return kind


def _first_extreme(flat_out: np.ndarray, targets: np.ndarray, vals: np.ndarray, kind: str) -> None:
    """Float max/min as a sequence of `out = update if out < update else out` (max) in order:
    NaN updates are ignored, a NaN already in place stays, ties keep the earliest value."""
    base = flat_out.copy()
    ok = ~np.isnan(vals)
    targets, vals = targets[ok], vals[ok]
    if targets.size == 0:
        return
    best = base.copy()
    fold = np.fmax if kind == _MAX else np.fmin
    fold.at(best, targets, vals)
    # the first value of the sequence (current value first, then the updates) equal to the extreme
    hit = vals == best[targets]
    first = np.full(base.shape, targets.size, np.int64)
    np.minimum.at(first, targets[hit], np.nonzero(hit)[0])
    keep_base = np.isnan(base) | (base == best)
    take = (~keep_base) & (first < targets.size)
    flat_out[take] = vals[first[take]]


@register("STABLEHLO_SCATTER", max_version=1, dtypes=_SCATTER_TYPES)
def stablehlo_scatter(node: NodeContext) -> Kernel:
    op_t, idx_t, upd_t = _io(node, 3, 1)
    out_t = node.outputs[0]
    if idx_t.type_name not in _INDEX_TYPES:
        raise node.unsupported(f"scatter indices of type {idx_t.type_name} are not supported (INT32, INT64)")
    if op_t.type_name not in _SCATTER_TYPES:
        raise node.unsupported(f"operand type {op_t.type_name} is not supported")
    if upd_t.type != op_t.type or out_t.type != op_t.type:
        raise node.unsupported(f"updates ({upd_t.type_name}) and output ({out_t.type_name}) must have the "
                               f"operand's type {op_t.type_name}")
    uwd, iwd = _ints(node, "update_window_dims"), _ints(node, "inserted_window_dims")
    sdod = _ints(node, "scatter_dims_to_operand_dims")
    ivd = int(node.options.get("index_vector_dim", 0) or 0)
    shape, ishape, ushape = tuple(op_t.shape), tuple(idx_t.shape), tuple(upd_t.shape)
    rank, irank, urank = len(shape), len(ishape), len(ushape)
    if max(len(uwd), len(iwd), len(sdod)) > _MAX_PARAM_DIMS:
        raise node.unsupported(f"dimension lists are limited to {_MAX_PARAM_DIMS} entries")
    if len(uwd) > urank or len(iwd) > rank or len(sdod) > rank:
        raise node.unsupported(f"update_window_dims {list(uwd)}, inserted_window_dims {list(iwd)} or "
                               f"scatter_dims_to_operand_dims {list(sdod)} exceed the ranks of updates "
                               f"({urank}) and operand ({rank})")
    if not 0 <= ivd <= irank:
        raise node.unsupported(f"index_vector_dim {ivd} is out of range for scatter indices of rank {irank}")
    kind = _scatter_computation(node)
    _distinct_in(node, uwd, urank, "update_window_dims")
    _distinct_in(node, iwd, rank, "inserted_window_dims")
    if any(not 0 <= d < rank for d in sdod):
        raise node.unsupported(f"scatter_dims_to_operand_dims {list(sdod)} names dimensions outside [0, {rank})")
    if len(uwd) + len(iwd) != rank:
        raise node.unsupported(f"{len(uwd)} update_window_dims and {len(iwd)} inserted_window_dims do not add "
                               f"up to the operand rank {rank}")
    usd = [d for d in range(urank) if d not in uwd]
    scatter_shape = tuple(n for d, n in enumerate(ishape) if d != ivd)
    if tuple(ushape[d] for d in usd) != scatter_shape:
        raise node.unsupported(f"the scatter dimensions of updates {list(ushape)} do not match the scatter "
                               f"indices {list(ishape)} without index_vector_dim {ivd}")
    vec_len = ishape[ivd] if ivd < irank else 1
    if vec_len < len(sdod):
        raise node.unsupported(f"index vectors of size {vec_len} are shorter than scatter_dims_to_operand_dims "
                               f"{list(sdod)}")
    _check_bytes(node, ushape, 8 * (rank + 1), "index arrays for updates")
    window_to_operand = [d for d in range(rank) if d not in iwd]  # ExpandDims: j-th window dim -> operand dim
    dtype = out_t.dtype
    is_float = np.issubdtype(dtype, np.floating)

    def run(x: np.ndarray, idx: np.ndarray, upd: np.ndarray) -> np.ndarray:
        out = np.array(x, dtype, copy=True)
        if upd.size == 0 or out.size == 0:
            return out
        vectors = _index_vectors(idx, ivd)
        scatter_view = [ushape[d] if d in usd else 1 for d in range(urank)]
        comps = []
        for d in range(rank):
            c = np.zeros([1] * urank, np.int64)
            for k, dd in enumerate(sdod):
                if dd == d:
                    c = vectors[:, k].reshape(scatter_view)  # a later duplicate wins, as in ScatterIndex
            comps.append(c)
        for j, ud in enumerate(uwd):
            view = [1] * urank
            view[ud] = ushape[ud]
            d = window_to_operand[j]
            comps[d] = comps[d] + np.arange(ushape[ud], dtype=np.int64).reshape(view)
        full = [np.broadcast_to(c, ushape).reshape(-1) for c in comps]
        inside = np.ones(upd.size, bool)
        for d in range(rank):
            inside &= (full[d] >= 0) & (full[d] < shape[d])
        targets = np.ravel_multi_index(tuple(f[inside] for f in full), shape) if rank else \
            np.zeros(int(inside.sum()), np.int64)
        vals = upd.reshape(-1)[inside]
        flat = out.reshape(-1)
        if kind == _REPLACE:
            rev_t = targets[::-1]
            uniq, first = np.unique(rev_t, return_index=True)  # the last write to each target wins
            flat[uniq] = vals[::-1][first]
        elif kind == _ADD:
            np.add.at(flat, targets, vals)
        elif kind == _MUL:
            np.multiply.at(flat, targets, vals)
        elif is_float:
            _first_extreme(flat, targets, vals, kind)
        else:
            (np.maximum if kind == _MAX else np.minimum).at(flat, targets, vals)
        return out

    return run


# --- STABLEHLO_REDUCE_WINDOW / REDUCE_WINDOW ---------------------------------------------

_R_ADD, _R_MUL, _R_MIN, _R_MAX, _R_ALL, _R_ANY = 1, 2, 3, 4, 5, 6  # ReduceWindowFunction
_R_NAMES = {_R_ADD: "ADD", _R_MUL: "MUL", _R_MIN: "MINIMUM", _R_MAX: "MAXIMUM", _R_ALL: "ALL", _R_ANY: "ANY"}
_WINDOW_BODIES = {"ADD": _R_ADD, "STABLEHLO_ADD": _R_ADD, "MUL": _R_MUL, "STABLEHLO_MULTIPLY": _R_MUL,
                  "MAXIMUM": _R_MAX, "STABLEHLO_MAXIMUM": _R_MAX, "MINIMUM": _R_MIN, "STABLEHLO_MINIMUM": _R_MIN,
                  "LOGICAL_AND": _R_ALL, "STABLEHLO_AND": _R_ALL, "LOGICAL_OR": _R_ANY, "STABLEHLO_OR": _R_ANY}


def _window_fn(fn: int, dtype: np.dtype) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """One fold step `acc = fn(acc, element)` over arrays, with the C++ body's semantics."""
    if fn == _R_ADD:
        return lambda a, b: np.add(a, b, dtype=dtype)
    if fn == _R_MUL:
        return lambda a, b: np.multiply(a, b, dtype=dtype)
    if fn == _R_MAX:
        return lambda a, b: np.where(a >= b, a, b)
    if fn == _R_MIN:
        return lambda a, b: np.where(a <= b, a, b)
    if fn == _R_ALL:
        return lambda a, b: np.logical_and(a, b).astype(dtype)
    return lambda a, b: np.logical_or(a, b).astype(dtype)


def _window_fold(fn: int, dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray]:
    """The whole fold of one sequence (init value first), equal to applying _window_fn in order."""
    if fn == _R_ADD:
        return lambda seq: np.add.accumulate(seq, dtype=dtype)[-1]  # accumulate adds in order
    if fn == _R_MUL:
        return lambda seq: np.multiply.accumulate(seq, dtype=dtype)[-1]
    if fn == _R_ALL:
        return lambda seq: np.asarray(np.all(seq != 0), dtype)
    if fn == _R_ANY:
        return lambda seq: np.asarray(np.any(seq != 0), dtype)
    if not np.issubdtype(dtype, np.floating):
        return np.max if fn == _R_MAX else np.min

    def extreme(seq: np.ndarray) -> np.ndarray:
        # `a >= b ? a : b` (max) takes b when either is NaN: the fold restarts after the last NaN
        # and keeps the earliest of equal values (+0 and -0)
        nan = np.nonzero(np.isnan(seq))[0]
        if nan.size:
            if nan[-1] == seq.size - 1:
                return seq[-1]
            seq = seq[nan[-1] + 1:]
        best = seq.max() if fn == _R_MAX else seq.min()
        return seq[int(np.argmax(seq == best))]
    return extreme


def _window_kernel(node: NodeContext, fn: int, window: Sequence[int], strides: Sequence[int],
                   base_dil: Sequence[int], win_dil: Sequence[int], padding: Sequence[int]) -> Kernel:
    """Dilate, pad/crop with the init value, then fold every window (the shared semantics)."""
    x_t, out_t = node.inputs[0], node.outputs[0]
    assert x_t is not None  # _window_types refused missing inputs
    shape = tuple(x_t.shape)
    for name, vals in (("window_dimensions", window), ("window_strides", strides),
                       ("base_dilations", base_dil), ("window_dilations", win_dil)):
        if any(v <= 0 for v in vals):
            raise node.unsupported(f"{name} {list(vals)} must all be positive")
    dilated = [(n - 1) * d + 1 if n > 0 else (0 if d == 1 else -1) for n, d in zip(shape, base_dil)]
    if any(n < 0 for n in dilated):
        raise node.unsupported(f"cannot dilate an empty dimension of input {list(shape)}")
    lo, hi = padding[0::2], padding[1::2]
    padded = [n + a + b for n, a, b in zip(dilated, lo, hi)]
    dilate = any(d != 1 for d in base_dil)
    pad = any(p != 0 for p in padding)
    if pad and any(n <= 0 for n in padded):
        raise node.unsupported(f"padding {list(padding)} leaves no element of the dilated input {dilated}")
    itemsize = x_t.dtype.itemsize
    _check_bytes(node, dilated, itemsize, "dilated input")
    _check_bytes(node, padded, itemsize, "padded input")
    eff = [(w - 1) * d + 1 for w, d in zip(window, win_dil)]
    out_shape = tuple(0 if p < e else (p - e) // s + 1 for p, e, s in zip(padded, eff, strides))
    _check_bytes(node, out_shape, itemsize, "output")
    work = np.dtype(np.int8) if x_t.dtype == np.bool_ else x_t.dtype
    step, fold = _window_fn(fn, work), _window_fold(fn, work)
    dtype = out_t.dtype
    n_window = int(np.prod(window, dtype=np.int64))
    n_out = int(np.prod(out_shape, dtype=np.int64))

    def run(x: np.ndarray, init: np.ndarray, *_: np.ndarray) -> np.ndarray:
        x = np.asarray(x).view(work) if x.dtype == np.bool_ else np.asarray(x)
        init_v = np.asarray(init).reshape(-1)
        if init_v.size == 0:
            raise KernelError("the init value is empty")
        v0 = init_v[:1].view(work) if init_v.dtype == np.bool_ else init_v[:1]
        v0 = v0.astype(work)[0]
        if dilate:
            y = np.full(dilated, v0, work)
            y[tuple(slice(None, None, d) for d in base_dil)] = x
            x = y
        if pad:
            y = np.full(padded, v0, work)
            src = tuple(slice(max(-a, 0), n - max(-b, 0)) for n, a, b in zip(x.shape, lo, hi))
            dst = tuple(slice(max(a, 0), max(a, 0) + max(n - max(-a, 0) - max(-b, 0), 0))
                        for n, a, b in zip(x.shape, lo, hi))
            y[dst] = x[src]
            x = y
        acc = np.full(out_shape, v0, work)
        if n_out and n_window <= n_out:
            # one step per window position, each over every output at once
            for w in np.ndindex(*window):
                view = x[tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                               for o, d, n, s in zip(w, win_dil, out_shape, strides))]
                acc = step(acc, view)
        elif n_out:
            # fewer outputs than window elements: fold each window in one go
            head = np.full(1, v0, work)
            for o in np.ndindex(*out_shape):
                view = x[tuple(slice(i * s, i * s + (w - 1) * d + 1, d)
                               for i, s, w, d in zip(o, strides, window, win_dil))]
                acc[o] = fold(np.concatenate([head, view.reshape(-1)]))
        if dtype == np.bool_:
            return acc != 0
        return np.asarray(acc, dtype)

    return run


def _window_types(node: NodeContext, n_in: int) -> tuple[_model.Tensor, ...]:
    inputs = _io(node, n_in, 1)
    x_t, init_t, out_t = inputs[0], inputs[1], node.outputs[0]
    if x_t.type_name not in _WINDOW_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    if out_t.type != x_t.type or init_t.type != x_t.type:
        raise node.unsupported(f"init value ({init_t.type_name}) and output ({out_t.type_name}) must have the "
                               f"input's type {x_t.type_name}")
    if not 1 <= len(x_t.shape) <= _MAX_WINDOW_RANK:
        raise node.unsupported(f"input rank {len(x_t.shape)} is not supported (1..{_MAX_WINDOW_RANK})")
    return inputs


@register("STABLEHLO_REDUCE_WINDOW", max_version=1, dtypes=_WINDOW_TYPES)
def stablehlo_reduce_window(node: NodeContext) -> Kernel:
    inputs = _window_types(node, 2)
    rank = len(inputs[0].shape)
    window = _ints(node, "window_dimensions")
    if not window:
        raise node.unsupported("window_dimensions is required")
    attrs = {}
    for key, size, fill in (("window_dimensions", rank, 1), ("window_strides", rank, 1),
                            ("base_dilations", rank, 1), ("window_dilations", rank, 1), ("padding", 2 * rank, 0)):
        vals = _ints(node, key)
        if vals and len(vals) != (len(window) if key != "padding" else 2 * len(window)):
            raise node.unsupported(f"{key} has {len(vals)} entries, window_dimensions {len(window)}")
        if vals and len(vals) != size:
            raise node.unsupported(f"{key} has {len(vals)} entries for an input of rank {rank}")
        attrs[key] = vals or (fill,) * size
    sg = _runtime_subgraph(node, "body_subgraph_index")
    if len(sg.operators) != 1:
        raise node.unsupported(f"the body (subgraph {sg.index}) must hold exactly one node, it has "
                               f"{len(sg.operators)}")
    body = sg.operators[0]
    fn = _WINDOW_BODIES.get(body.op)
    if fn is None:
        raise node.unsupported(f"reduction body {body.custom_code or body.op} is not supported")
    return _window_kernel(node, fn, attrs["window_dimensions"], attrs["window_strides"],
                          attrs["base_dilations"], attrs["window_dilations"], attrs["padding"])


@register("REDUCE_WINDOW", max_version=1, dtypes=_WINDOW_TYPES)
def reduce_window(node: NodeContext) -> Kernel:
    inputs = _window_types(node, 5)
    rank = len(inputs[0].shape)
    fn = int(node.options.get("reduce_function", 0) or 0)
    if fn not in _R_NAMES:
        raise node.unsupported(f"reduce_function {fn} is not supported")
    params = []
    for k, name in ((2, "window_shape"), (3, "window_strides"), (4, "window_dilations")):
        t = inputs[k]
        if t.type_name != "INT64":
            raise node.unsupported(f"{name} must be INT64, got {t.type_name}")
        if t.data is None:
            raise node.unsupported(f"{name} must be a constant tensor")
        vals = tuple(int(v) for v in np.asarray(t.data).reshape(-1))
        if len(vals) < rank:
            raise node.unsupported(f"{name} has {len(vals)} values for an input of rank {rank}")
        params.append(vals[:rank])
    return _window_kernel(node, fn, params[0], params[1], (1,) * rank, params[2], (0,) * (2 * rank))


# --- STABLEHLO_RNG_BIT_GENERATOR ---------------------------------------------------------

_DEFAULT, _PHILOX, _THREEFRY = 0, 1, 2
_U32 = np.uint32
_PHILOX_MA, _PHILOX_MB = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_PHILOX_WA, _PHILOX_WB = 0x9E3779B9, 0xBB67AE85
_THREEFRY_PARITY = 0x1BD11BDA
_THREEFRY_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))
_RNG_OUT = ("INT32", "INT64", "UINT32", "UINT64")


def philox4x32(key0: int, key1: int, ctr: Sequence[np.ndarray]) -> np.ndarray:
    """Philox4x32-10 of rng_util.cc over arrays of counters: (n, 4) uint32 words."""
    c0, c1, c2, c3 = (np.asarray(c, _U32) for c in ctr)
    k0, k1 = key0 & 0xFFFFFFFF, key1 & 0xFFFFFFFF
    for _ in range(10):
        p0 = _PHILOX_MA * c0.astype(np.uint64)
        p1 = _PHILOX_MB * c2.astype(np.uint64)
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)).astype(_U32) ^ c1 ^ _U32(k0), p1.astype(_U32),
                          (p0 >> np.uint64(32)).astype(_U32) ^ c3 ^ _U32(k1), p0.astype(_U32))
        k0, k1 = (k0 + _PHILOX_WA) & 0xFFFFFFFF, (k1 + _PHILOX_WB) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=1)


def threefry2x32(key0: int, key1: int, ctr: Sequence[np.ndarray]) -> np.ndarray:
    """Threefry2x32-20 of rng_util.cc over arrays of counters: (n, 2) uint32 words."""
    k0, k1 = key0 & 0xFFFFFFFF, key1 & 0xFFFFFFFF
    k2 = k0 ^ k1 ^ _THREEFRY_PARITY
    x0 = np.asarray(ctr[0], _U32) + _U32(k0)
    x1 = np.asarray(ctr[1], _U32) + _U32(k1)
    schedule = ((0, k1, k2, 1), (1, k2, k0, 2), (0, k0, k1, 3), (1, k1, k2, 4), (0, k2, k0, 5))
    for r, ks0, ks1, b in schedule:
        for rot in _THREEFRY_ROT[r]:
            x0 = x0 + x1
            x1 = (x1 << _U32(rot)) | (x1 >> _U32(32 - rot))
            x1 = x1 ^ x0
        x0 = x0 + _U32(ks0)
        x1 = x1 + _U32((ks1 + b) & 0xFFFFFFFF)
    return np.stack([x0, x1], axis=1)


@register("STABLEHLO_RNG_BIT_GENERATOR", max_version=1, dtypes=("UINT64",))
def stablehlo_rng_bit_generator(node: NodeContext) -> Kernel:
    state_t = _io(node, 1, 2)[0]
    key_t, out_t = node.outputs
    if state_t.type_name != "UINT64" or len(state_t.shape) != 1:
        raise node.unsupported(f"the initial state must be a 1-D UINT64 tensor, got {state_t.type_name}"
                               f"{list(state_t.shape)}")
    if key_t.type_name != "UINT64" or tuple(key_t.shape) != tuple(state_t.shape):
        raise node.unsupported("the output state must be UINT64 with the initial state's shape")
    if out_t.type_name not in _RNG_OUT:
        raise node.unsupported(f"output type {out_t.type_name} is not supported (INT32, INT64, UINT32, UINT64)")
    algorithm = int(node.options.get("algorithm", 0) or 0)
    n_state = state_t.shape[0]
    if algorithm == _THREEFRY:
        if n_state != 2:
            raise node.unsupported(f"THREEFRY needs a u64[2] state, got u64[{n_state}]")
        gen, width = threefry2x32, 2
    elif algorithm in (_DEFAULT, _PHILOX):
        if n_state not in (2, 3):
            raise node.unsupported(f"PHILOX needs a u64[2] or u64[3] state, got u64[{n_state}]")
        gen, width = philox4x32, 4
    else:
        raise node.unsupported(f"unknown RNG algorithm {algorithm}")
    out_shape = tuple(out_t.shape)
    n_words = int(np.prod(out_shape, dtype=np.int64)) * (out_t.dtype.itemsize // 4)
    n_blocks = -(-n_words // width)
    _check_bytes(node, (n_blocks, width), 8 * 4, "generator state")
    out_dtype = out_t.dtype

    def run(state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        words = np.ascontiguousarray(state, np.uint64).view(_U32)
        key0, key1 = int(words[0]), int(words[1])
        counter = int(words[2]) | (int(words[3]) << 32)
        new_state = np.array(state, np.uint64, copy=True)
        if algorithm != _THREEFRY:
            hi = (int(words[4]), int(words[5])) if n_state == 3 else (key0, key1)
        values = np.zeros(0, _U32)
        if n_blocks:
            ctr = (np.arange(n_blocks, dtype=np.uint64) + np.uint64(counter))  # wraps mod 2**64
            lo_w, hi_w = ctr.astype(_U32), (ctr >> np.uint64(32)).astype(_U32)
            if gen is threefry2x32:
                values = gen(key0, key1, (lo_w, hi_w))
            else:
                values = gen(key0, key1, (lo_w, hi_w, np.full(n_blocks, hi[0], _U32), np.full(n_blocks, hi[1], _U32)))
            values = values.reshape(-1)[:n_words]
        counter = (counter + n_blocks) & ((1 << 64) - 1)
        new_state[0] = np.uint64(key0 | (key1 << 32))
        new_state[1] = np.uint64(counter)
        out = np.ascontiguousarray(values).view(out_dtype).reshape(out_shape)
        return new_state, out

    return run

