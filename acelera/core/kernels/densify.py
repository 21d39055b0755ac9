"""DENSIFY: a sparse constant (TFLite sparsity metadata) to its dense tensor.

Mirrors FormatConverter<T>::SparseToDense in tflite/kernels/internal/utils/
sparsity_format_converter.cc: the traversal levels (original dimensions in traversal order,
then block dimensions) are expanded one level at a time, DENSE levels by their dense_size and
SPARSE_CSR levels by their segments/indices, and the i-th leaf (in depth-first order) receives
the i-th stored value. Block coordinates are folded back into their original dimension with
orig = orig * block_size + block_index. The leaf -> dense position map is computed once at
prepare; running the kernel is one scatter.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import ModelError
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.model import Sparsity

DENSE, SPARSE_CSR = 0, 1
_SUPPORTED = ("FLOAT32", "FLOAT16", "INT8")


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + c) for each (s, c), vectorized."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return np.arange(total, dtype=np.int64) + offsets


def sparse_to_dense_map(dense_shape: tuple[int, ...], sp: Sparsity) -> np.ndarray:
    """Flat dense positions of the stored values, in storage order (FormatConverter::Populate)."""
    rank = len(dense_shape)
    order = list(sp.traversal_order)
    block_map = list(sp.block_map)
    meta = list(sp.dim_metadata)
    total = len(order)
    if len(meta) != total:
        raise ModelError(f"sparsity has {len(meta)} dim_metadata entries for {total} traversal levels")
    if (sorted(order) != list(range(total)) or total != rank + len(block_map)
            or sorted(order[:rank]) != list(range(rank))):
        raise ModelError(f"invalid traversal_order {order} for rank {rank} with {len(block_map)} block dims")
    if any(not 0 <= b < rank for b in block_map):
        raise ModelError(f"invalid block_map {block_map} for rank {rank}")
    dense_size = [int(m.dense_size) for m in meta]

    # InitSparseToDenseConverter's block sizes (indexed exactly as LiteRT indexes them).
    block_size = [0] * len(block_map)
    bd = 0
    for i in range(rank):
        if bd < len(block_map) and block_map[bd] == i and rank + bd < total:
            block_size[bd] = dense_size[order[rank + bd]]
            bd += 1

    limit = max(1, int(np.prod(dense_shape, dtype=np.int64)))
    prev = np.zeros(1, np.int64)  # prev_idx of each partial path
    levels: list[np.ndarray] = []  # index chosen at each level, per path
    for lv, m in enumerate(meta):
        n = prev.size
        if m.format == DENSE:
            size = dense_size[lv]
            if size < 0 or n * size > limit:
                raise ModelError(f"sparsity level {lv}: dense_size {size} does not fit the tensor shape")
            levels = [np.repeat(a, size) for a in levels]
            child = np.tile(np.arange(size, dtype=np.int64), n)
            levels.append(child)
            prev = np.repeat(prev, size) * size + child
        elif m.format == SPARSE_CSR:
            seg = np.asarray(m.segments if m.segments is not None else [], np.int64)
            ind = np.asarray(m.indices if m.indices is not None else [], np.int64)
            valid = prev + 1 < seg.size
            start = np.zeros(n, np.int64)
            end = np.zeros(n, np.int64)
            start[valid] = seg[prev[valid]]
            end[valid] = seg[prev[valid] + 1]
            counts = np.maximum(end - start, 0)
            child_pos = _ranges(start, counts)
            parent = np.repeat(np.arange(n, dtype=np.int64), counts)
            if child_pos.size and child_pos.min() < 0:
                raise ModelError(f"sparsity level {lv}: negative segment offset")
            keep = child_pos < ind.size
            child_pos, parent = child_pos[keep], parent[keep]
            levels = [a[parent] for a in levels]
            levels.append(ind[child_pos])
            prev = child_pos
        else:
            raise ModelError(f"sparsity level {lv}: unknown dimension format {m.format}")

    n_leaves = prev.size
    orig: list[np.ndarray] = [np.zeros(0, np.int64)] * rank  # each set below: order[:rank] permutes the dims
    for i in range(rank):
        orig[order[i]] = levels[i] if n_leaves else np.zeros(0, np.int64)
    for i in range(rank, total):
        b = order[i] - rank
        if not 0 <= b < len(block_map):
            raise ModelError(f"traversal level {i} ({order[i]}) is not a block dimension")
        d = block_map[b]
        orig[d] = orig[d] * block_size[b] + levels[i]
    flat = np.zeros(n_leaves, np.int64)
    for d in range(rank):
        idx = orig[d]
        if idx.size and (idx.min() < 0 or idx.max() >= dense_shape[d]):
            raise ModelError(f"sparse index out of range for dimension {d} of size {dense_shape[d]}")
        flat = flat * dense_shape[d] + idx
    return flat


@register("DENSIFY", max_version=1, dtypes=_SUPPORTED)
def densify(node: NodeContext):
    x, out = node.input(0), node.outputs[0]
    if x is None or x.sparsity is None or x.data is None:
        raise node.unsupported("input must be a constant sparse tensor")
    if x.type_name not in _SUPPORTED:
        raise node.unsupported(f"input type {x.type_name} is not supported")
    if out.dtype != x.dtype:
        raise node.unsupported(f"output type {out.type_name} differs from input type {x.type_name}")
    shape = tuple(x.shape)
    flat = sparse_to_dense_map(shape, x.sparsity)
    n = flat.size
    if n > x.data.size:
        raise ModelError(f"sparse tensor '{x.name}' stores {x.data.size} values but its metadata "
                         f"addresses {n}")
    # Later writes win, as in the sequential reference; keep the last write of each position.
    rev_unique, rev_first = np.unique(flat[::-1], return_index=True)
    src = (n - 1 - rev_first).astype(np.int64)
    dst = rev_unique
    size = int(np.prod(shape, dtype=np.int64))
    dtype = x.dtype

    def run(values):
        dense = np.zeros(size, dtype)
        dense[dst] = np.asarray(values).reshape(-1)[src]
        return dense.reshape(shape)
    return run
