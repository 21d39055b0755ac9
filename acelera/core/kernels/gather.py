"""GATHER and TILE reference kernels (tflite/kernels/gather.cc, tile.cc).

Both ops only move elements, so every dtype LiteRT accepts is handled by numpy indexing
(STRING tensors are object arrays of bytes, FLOAT8 and BFLOAT16 bit patterns, INT4 unpacked);
no arithmetic is involved. GATHER checks every index against the gathered dimension and
raises instead of reading out of bounds (LiteRT fails the invoke the same way).
"""
from __future__ import annotations

import numpy as np

from acelera.core.dtypes import PACKED_BITS, TYPE_NAMES, numpy_dtype
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.registry import NodeContext, register

# TensorType codes (acelera.core.dtypes.TYPE_NAMES).
_FLOAT32, _FLOAT16, _INT32, _UINT8, _INT64, _STRING, _BOOL, _INT16 = 0, 1, 2, 3, 4, 5, 6, 7
_INT8, _INT4, _BFLOAT16, _F8E4M3FN, _F8E5M2 = 9, 17, 18, 21, 22

# gather.cc Prepare: the params types it accepts (FLOAT8 in LiteRT's
# TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS build), strings apart.
_GATHER_TYPES = {_FLOAT32, _FLOAT16, _BFLOAT16, _UINT8, _INT4, _INT8, _INT16, _INT64, _INT32, _BOOL,
                 _F8E4M3FN, _F8E5M2}
_GATHER_INDEX_TYPES = {_INT16, _INT32, _INT64}
_GATHER_NAMES = tuple(TYPE_NAMES[t] for t in sorted(_GATHER_TYPES | {_STRING}))
# TILE moves any fixed-size element (not int4) and strings
_TILE_NAMES = tuple(n for c, n in sorted(TYPE_NAMES.items())
                    if (numpy_dtype(c) != np.object_ and c not in PACKED_BITS) or c == _STRING)


@register("GATHER", max_version=8, dtypes=_GATHER_NAMES)
def gather(node: NodeContext):
    check_arity(node, 2, 1)
    params, positions = node.input(0), node.input(1)
    assert params is not None and positions is not None  # check_arity refused missing inputs
    out_t = node.outputs[0]
    if params.type not in _GATHER_TYPES and params.type != _STRING:
        raise node.unsupported(f"input type {params.type_name} is not supported")
    if params.type == _STRING and len(params.shape) != 1:
        raise node.unsupported("STRING input must be 1-D (as in LiteRT)")
    if positions.type not in _GATHER_INDEX_TYPES:
        raise node.unsupported(f"positions of type {positions.type_name} are not supported")
    if out_t.dtype != params.dtype:
        raise node.unsupported(f"output type {out_t.type_name} differs from input type {params.type_name}")
    rank, prank = len(params.shape), len(positions.shape)
    axis = int(node.options.get("axis", 0))
    if axis < 0:
        axis += rank
    if not 0 <= axis < rank:
        raise node.unsupported(f"axis {node.options.get('axis', 0)} is out of range for rank {rank}")
    batch_dims = int(node.options.get("batch_dims", 0))
    if batch_dims < 0:
        batch_dims += prank
    if not (0 <= batch_dims <= axis and batch_dims < rank and batch_dims <= prank):
        raise node.unsupported(f"batch_dims {node.options.get('batch_dims', 0)} is invalid for axis {axis}, "
                               f"params rank {rank} and positions rank {prank}")
    out_dtype = out_t.dtype
    before = (slice(None),) * axis

    def run(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        shape, ishape = x.shape, idx.shape
        if not ishape and not batch_dims:  # one position: the slice itself
            i = int(idx)
            if not 0 <= i < shape[axis]:
                raise KernelError(f"index {i} is out of bounds for dimension {axis} "
                                  f"of size {shape[axis]}")
            return x[before + (i, Ellipsis)]
        if ishape[:batch_dims] != shape[:batch_dims]:
            raise KernelError(f"batch dimensions of params {list(shape)} and positions "
                              f"{list(ishape)} differ")
        axis_size = shape[axis]
        n = idx.size
        if n:
            if n <= 64:
                flat = idx.ravel().tolist()
                lo, hi = min(flat), max(flat)
            else:
                lo, hi = int(idx.min()), int(idx.max())
            if lo < 0 or hi >= axis_size:
                bad = lo if lo < 0 else hi
                raise KernelError(f"index {bad} is out of bounds for dimension {axis} "
                                  f"of size {axis_size}")
        out_shape = shape[:axis] + ishape[batch_dims:] + shape[axis + 1:]
        if x.size == 0 or idx.size == 0:
            return np.full(out_shape, b"", object) if out_dtype == object else np.zeros(out_shape, out_dtype)  # noqa: E721  (np.dtype('O') == object, not `is`)
        if batch_dims == 0:
            return x.take(idx, axis=axis)
        b = int(np.prod(shape[:batch_dims], dtype=np.int64))
        outer = int(np.prod(shape[batch_dims:axis], dtype=np.int64))
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        xv = x.reshape(b, outer, axis_size, inner)
        iv = idx.reshape(b, -1).astype(np.intp, copy=False)
        res = xv[np.arange(b)[:, None, None], np.arange(outer)[None, :, None], iv[:, None, :]]
        return np.asarray(res, out_dtype).reshape(out_shape)

    return run


@register("TILE", max_version=3, dtypes=_TILE_NAMES)
def tile(node: NodeContext):
    check_arity(node, 2, 1)
    x_t, m_t = node.input(0), node.input(1)
    assert x_t is not None and m_t is not None  # check_arity refused missing inputs
    out_t = node.outputs[0]
    if x_t.type_name not in _TILE_NAMES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    if m_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"multipliers of type {m_t.type_name} are not supported")
    if out_t.dtype != x_t.dtype:
        raise node.unsupported(f"output type {out_t.type_name} differs from input type {x_t.type_name}")
    rank = len(x_t.shape)
    n_mult = int(np.prod(m_t.shape, dtype=np.int64)) if m_t.shape else 1
    if n_mult != rank:
        raise node.unsupported(f"{n_mult} multipliers for an input of rank {rank}")

    def reps_of(m: np.ndarray, shape) -> tuple[int, ...]:
        reps = tuple(int(v) for v in m.reshape(-1))
        for d, r in zip(shape, reps):
            if r < 0:
                raise KernelError(f"multipliers must be non-negative, got {list(reps)}")
            if d > 0 and r > (2 ** 31 - 1) // d:
                raise KernelError(f"cannot multiply {d} and {r}: output dimensions must fit int32")
        return reps

    const_reps = reps_of(m_t.data, x_t.shape) if m_t.data is not None else None
    layouts: dict[tuple, tuple] = {}  # (shape, reps) -> (inter, full, out) shapes

    def run(x: np.ndarray, m: np.ndarray) -> np.ndarray:
        reps = const_reps if const_reps is not None else reps_of(m, x.shape)
        if x.ndim == 0:
            return x.copy()
        key = (x.shape, reps)
        layout = layouts.get(key)
        if layout is None:
            # one copy: view x as (1, d0, 1, d1, ...), broadcast to (r0, d0, r1, d1, ...)
            layout = (tuple(v for d in x.shape for v in (1, d)),
                      tuple(v for r, d in zip(reps, x.shape) for v in (r, d)),
                      tuple(r * d for r, d in zip(reps, x.shape)))
            if len(layouts) >= 64:
                layouts.clear()
            layouts[key] = layout
        inter, full, out = layout
        buf = np.empty(full, x.dtype)
        buf[...] = x.reshape(inter)
        return buf.reshape(out)

    return run
