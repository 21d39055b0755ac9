"""TOPK_V2 reference kernel (tflite/kernels/topk_v2.cc).

LiteRT's TopContainer orders indices by a total order: larger values first, NaN after every
number, ties (and NaNs among themselves) by smaller index. The k first indices of a stable sort
on that key are therefore exactly LiteRT's output, whatever its heap does internally.
"""
from __future__ import annotations

import numpy as np

from acelera.core.dtypes import TYPE_CODES
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity, same_type_output
from acelera.core.kernels.registry import Kernel, NodeContext, register

_INT16, _INT32 = TYPE_CODES["INT16"], TYPE_CODES["INT32"]
_TYPES = ("FLOAT32", "UINT8", "INT8", "INT16", "INT32", "INT64")


def _descending_order(rows: np.ndarray) -> np.ndarray:
    """Per row, the indices sorted by LiteRT's TopK order."""
    if rows.dtype.kind == "f":
        key = np.negative(rows)  # numpy sorts NaN last, whatever its sign
    else:
        key = np.invert(rows)  # order-reversing and overflow-free for signed and unsigned integers
    return key.argsort(axis=-1, kind="stable")


_PACKED = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.int32))
_I64 = np.dtype(np.int64)
_SHIFT = np.asarray(np.int64(32))


def _packed_topk(rows: np.ndarray, kk: int, idx_dt: np.dtype, out_shape: tuple,
                 grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TopK of integer rows of at most 32 bits: each element's key ~value << 32 | index is
    unique, so a plain sort of the keys gives LiteRT's order (stable argsort of small integer
    types is a slow radix sort), and the values and indices come back out of the keys.
    `grid` holds each element's index in its row (rows' shape, int64)."""
    key = rows.astype(_I64)
    np.invert(key, out=key)
    key <<= _SHIFT
    key |= grid
    key.sort(axis=-1)
    values = np.right_shift(key, _SHIFT)
    np.invert(values, out=values)
    if kk < rows.shape[1]:
        key, values = key[:, :kk], values[:, :kk]
    # the low bits of a key: its index (below the index type's maximum)
    return values.astype(rows.dtype).reshape(out_shape), key.astype(idx_dt).reshape(out_shape)


@register("TOPK_V2", max_version=3, dtypes=_TYPES)
def topk_v2(node: NodeContext) -> Kernel:
    check_arity(node, 2, 2)
    x_t, k_t = node.inputs
    assert x_t is not None and k_t is not None  # check_arity refused missing inputs
    same_type_output(node, x_t, 0)
    if k_t.type not in (_INT32, _INT16):
        raise node.unsupported(f"k of type {k_t.type_name} is not supported (INT32 or INT16)")
    if int(np.prod(k_t.shape, dtype=np.int64)) != 1:
        raise node.unsupported(f"k must have one element, got shape {list(k_t.shape)}")
    if len(x_t.shape) < 1:
        raise node.unsupported("input must have rank >= 1")
    if x_t.type_name not in _TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    idx_t = node.outputs[1]
    if idx_t.type not in (_INT32, _INT16):
        raise node.unsupported(f"index output type {idx_t.type_name} is not supported (INT32 or INT16)")
    idx_dt = idx_t.dtype
    offsets: dict[tuple[int, int], np.ndarray] = {}

    def row_offsets(rows: int, n: int) -> np.ndarray:
        if len(offsets) >= 16:
            offsets.clear()
        o = offsets[(rows, n)] = np.arange(0, rows * n, n, dtype=np.intp)[:, None]
        return o

    idx_max = int(np.iinfo(idx_dt).max)
    packed = x_t.dtype in _PACKED
    grids: dict[tuple[int, int], np.ndarray] = {}

    def run(x: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        kk = int(k.reshape(-1)[0]) if k.size != 1 else int(k.item())
        n = x.shape[-1]
        if kk > n:
            raise KernelError(f"k {kk} is larger than the last dimension {n}")
        kk = max(kk, 0)
        out_shape = x.shape[:-1] + (kk,)
        if kk == 0 or x.size == 0:
            return np.zeros(out_shape, x.dtype), np.zeros(out_shape, idx_dt)
        rows = x.reshape(-1, n)
        if n > idx_max:
            raise KernelError(f"row size {n} exceeds the range of the {idx_t.type_name} index output")
        if packed:
            grid = grids.get(rows.shape)
            if grid is None:
                if len(grids) >= 16:
                    grids.clear()
                grid = grids[rows.shape] = np.ascontiguousarray(np.broadcast_to(np.arange(n, dtype=_I64), rows.shape))
            return _packed_topk(rows, kk, idx_dt, out_shape, grid)
        order = _descending_order(rows)
        if kk < n:
            order = order[:, :kk]
        base = offsets.get(rows.shape)
        if base is None:
            base = row_offsets(*rows.shape)
        values = rows.take(order + base)
        return values.reshape(out_shape), order.astype(idx_dt).reshape(out_shape)

    return run
