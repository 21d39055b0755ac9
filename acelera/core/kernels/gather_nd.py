"""GATHER_ND and SCATTER_ND reference kernels (tflite/kernels/gather_nd.cc, scatter_nd.cc and
reference_ops::GatherNd / GatherNdString / ScatterNd in
tflite/kernels/internal/reference/reference_ops.h).

GATHER_ND only moves elements, so every params type LiteRT accepts (strings included) is one
numpy fancy-indexing over the params viewed as (prod(shape[:nd]), slice) rows. SCATTER_ND zeroes
an output of the shape given by its shape input and adds every update slice in order, so
duplicate indices add up (integers wrap, booleans OR), as LiteRT's WrappingAdd does.
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core.errors import KernelError
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register
from acelera.core.model import MAX_TENSOR_BYTES

# FLOAT8 params only in LiteRT's TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS build (bit patterns here).
_GATHER_ND_PARAMS = ("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32", "INT64",
                     "BOOL", "STRING", "FLOAT8_E4M3FN", "FLOAT8_E5M2")
_GATHER_ND_INDICES = ("INT16", "INT32", "INT64")
_SCATTER_ND_UPDATES = ("FLOAT32", "UINT8", "BOOL", "INT8", "INT32", "INT64")


def _check_size(shape: tuple[int, ...], dtype: np.dtype, what: str) -> None:
    n = 1
    for d in shape:
        n *= int(d)
    if n * max(np.dtype(dtype).itemsize, 1) > MAX_TENSOR_BYTES:
        raise KernelError(f"{what} of shape {list(shape)} exceeds the tensor size limit "
                          f"({MAX_TENSOR_BYTES} bytes)")


def _empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype == np.object_:
        out = np.empty(shape, dtype=object)
        out.fill(b"")
        return out
    return np.zeros(shape, dtype)


def _strides(shape: tuple[int, ...], nd: int) -> np.ndarray:
    """Elements per step of each of the first `nd` dimensions (LiteRT's dims_to_count)."""
    out = np.zeros(nd, np.int64)
    remain = int(np.prod(shape, dtype=np.int64)) if shape else 1
    for i in range(nd):
        out[i] = remain // shape[i] if shape[i] else 0
        remain = int(out[i])
    return out


@register("GATHER_ND", max_version=6, dtypes=_GATHER_ND_PARAMS)
def gather_nd(node: NodeContext) -> Kernel:
    if len(node.inputs) != 2 or len(node.outputs) != 1 or None in node.inputs:
        raise node.unsupported("takes params and indices and has one output")
    params, indices = node.inputs
    assert params is not None and indices is not None  # refused above
    out_t = node.outputs[0]
    if params.type_name not in _GATHER_ND_PARAMS:
        raise node.unsupported(f"params of type {params.type_name} are not supported")
    if indices.type_name not in _GATHER_ND_INDICES:
        raise node.unsupported(f"indices of type {indices.type_name} are not supported")
    if out_t.type != params.type:
        raise node.unsupported(f"output type {out_t.type_name} differs from params type {params.type_name}")
    p_rank, i_rank = len(params.shape), len(indices.shape)
    if p_rank < 1:
        raise node.unsupported("params must be at least a vector")
    if i_rank < 1:
        raise node.unsupported("indices must be at least a vector")
    nd = indices.shape[-1]
    if nd > p_rank:
        raise node.unsupported(f"index depth {nd} exceeds the params rank {p_rank}")
    out_dtype = out_t.dtype
    fast: dict[tuple, tuple] = {}

    def layout(pshape: tuple, ishape: tuple, idt: np.dtype) -> tuple | None:
        """(rows shape, unsigned view dtype, dims bound, strides in slices, slice size, output
        shape) of in-range indices for these shapes, or None where run_general decides."""
        out_shape = ishape[:-1] + pshape[nd:]
        n_slices = math.prod(ishape[:-1])
        slice_size = math.prod(pshape[nd:])
        if nd == 0 or n_slices == 0 or slice_size == 0 or math.prod(pshape) == 0:
            return None
        if math.prod(out_shape) * max(np.dtype(out_dtype).itemsize, 1) > MAX_TENSOR_BYTES:
            return None
        udt = np.dtype(f"u{idt.itemsize}")
        strides = _strides(pshape, nd) // slice_size
        if len(fast) >= 32:
            fast.clear()
        p = fast[(pshape, ishape, idt)] = ((n_slices, nd), udt, np.asarray(pshape[:nd], udt),
                                          strides.astype(np.intp), slice_size, out_shape)
        return p

    def run(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        key = (x.shape, idx.shape, idx.dtype)
        p = fast.get(key) or layout(*key)
        if p is not None and x.dtype == out_dtype and not in_shape_pass():
            rows_shape, udt, bound, strides, slice_size, out_shape = p
            rows = idx.reshape(rows_shape)
            # Negative indices wrap to huge unsigned values: one comparison finds both errors.
            if not np.greater_equal(rows.view(udt), bound).any():
                lin = rows @ strides if rows_shape[1] > 1 else rows.reshape(-1)
                return x.reshape(-1, slice_size).take(lin, axis=0).reshape(out_shape)
        return run_general(x, idx)

    def run_general(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        pshape, ishape = x.shape, idx.shape
        out_shape = ishape[:-1] + pshape[nd:]
        _check_size(out_shape, out_dtype, "output")
        if in_shape_pass():
            return _empty(out_shape, out_dtype)
        if not ((x.size == 0 and idx.size == 0) or x.size > 0):
            raise KernelError("params are empty but indices are not")
        if idx.size and int(idx.min()) < 0:
            raise KernelError(f"gather_nd index {int(idx.min())} is negative")
        n_slices = int(np.prod(ishape[:-1], dtype=np.int64)) if ishape[:-1] else 1
        if n_slices == 0:
            return _empty(out_shape, out_dtype)
        if nd == 0:
            # LiteRT reads the (empty) indices buffer as a null pointer and fails the invoke.
            raise KernelError("gather_nd indices are empty")
        rows = idx.reshape(n_slices, nd).astype(np.int64)
        bad = rows >= np.asarray(pshape[:nd], np.int64)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise KernelError(f"gather_nd index out of bounds: {int(rows[i, j])} for dimension {int(j)} "
                              f"of size {pshape[j]}")
        slice_size = int(np.prod(pshape[nd:], dtype=np.int64)) if pshape[nd:] else 1
        if slice_size == 0:
            return _empty(out_shape, out_dtype)
        lin = rows @ (_strides(pshape, nd) // slice_size)
        return np.asarray(x.reshape(-1, slice_size)[lin], out_dtype).reshape(out_shape)

    c_idx = indices.data
    c_plan = layout(tuple(params.shape), tuple(c_idx.shape), c_idx.dtype) if c_idx is not None else None
    if c_idx is None or c_plan is None:
        return run
    c_rows = c_idx.reshape(c_plan[0])
    if np.greater_equal(c_rows.view(c_plan[1]), c_plan[2]).any():
        return run
    # constant in-range indices: the params rows to take are known
    c_pshape, c_ishape, c_slice, c_out_shape = tuple(params.shape), tuple(c_idx.shape), c_plan[4], c_plan[5]
    c_lin = (c_rows @ c_plan[3] if c_rows.shape[1] > 1 else c_rows.reshape(-1)).astype(np.intp)

    def run_const(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        if x.shape != c_pshape or idx.shape != c_ishape or x.dtype != out_dtype:
            return run(x, idx)
        return x.reshape(-1, c_slice).take(c_lin, axis=0).reshape(c_out_shape)
    return run_const


@register("SCATTER_ND", max_version=1, dtypes=_SCATTER_ND_UPDATES)
def scatter_nd(node: NodeContext) -> Kernel:
    if len(node.inputs) != 3 or len(node.outputs) != 1 or None in node.inputs:
        raise node.unsupported("takes indices, updates and shape and has one output")
    indices, updates, shape_t = node.inputs
    assert indices is not None and updates is not None and shape_t is not None  # refused above
    out_t = node.outputs[0]
    if updates.type_name not in _SCATTER_ND_UPDATES:
        raise node.unsupported(f"updates of type {updates.type_name} are not supported")
    if indices.type != shape_t.type:
        raise node.unsupported("indices and shape must have the same type")
    if indices.type_name != "INT32":
        raise node.unsupported(f"indices of type {indices.type_name} are not supported")
    if out_t.type != updates.type:
        raise node.unsupported(f"output type {out_t.type_name} differs from updates type {updates.type_name}")
    if len(indices.shape) < 1 or len(updates.shape) < 1 or len(shape_t.shape) != 1:
        raise node.unsupported("indices and updates must have rank >= 1 and shape must be a vector")
    outer = len(indices.shape) - 1
    ix = indices.shape[-1]
    if len(updates.shape) < outer or indices.shape[:outer] != updates.shape[:outer]:
        raise node.unsupported(f"indices shape {list(indices.shape)} and updates shape "
                               f"{list(updates.shape)} disagree")
    dtype = out_t.dtype
    is_bool = dtype == np.bool_

    def out_shape_of(shape: np.ndarray, ishape, ushape) -> tuple[int, ...]:
        dims = tuple(int(v) for v in shape.reshape(-1))
        if any(d < 0 for d in dims):
            raise KernelError(f"output shape {list(dims)} has a negative dimension")
        if len(ushape) - outer != len(dims) - ix or tuple(ushape[outer:]) != dims[ix:]:
            raise KernelError(f"updates shape {list(ushape)} does not match indices shape {list(ishape)} "
                              f"and output shape {list(dims)}")
        return dims

    if shape_t.data is not None:
        try:
            out_shape_of(shape_t.data, indices.shape, updates.shape)
        except KernelError as e:
            raise node.unsupported(str(e)) from None

    accumulate = (np.logical_or if is_bool else np.add).at
    plans: dict[tuple, tuple | None] = {}

    def plan(key: tuple, idx: np.ndarray, upd: np.ndarray, shape: np.ndarray) -> tuple | None:
        """(output dims, rows shape, uint32 bound per index column, strides in slices, updates
        rows shape) for a nonempty scatter of valid shapes, or None where run_general decides."""
        try:
            dims = out_shape_of(shape, idx.shape, upd.shape)
            _check_size(dims, dtype, "output")
        except KernelError:
            return None
        n_slices = math.prod(idx.shape[:-1]) if outer else 1
        slice_size = math.prod(dims[ix:])
        if n_slices == 0 or math.prod(dims) == 0 or ix == 0:
            return None
        if len(plans) >= 32:
            plans.clear()
        p = plans[key] = (dims, (n_slices, ix), np.asarray(dims[:ix], np.uint32),
                          (_strides(dims, ix) // slice_size).astype(np.intp), (n_slices, slice_size))
        return p

    fixed = _constant_scatter(indices.data, shape_t.data, tuple(updates.shape), dtype, out_shape_of, ix)
    if fixed is not None:  # constant in-range indices and shape: the linear rows are known
        c_dims, c_ishape, c_lin, c_out_rows, c_upd_rows, c_ushape = fixed

        def run_const(idx: np.ndarray, upd: np.ndarray, shape: np.ndarray) -> np.ndarray:
            if upd.shape != c_ushape or idx.shape != c_ishape:
                return run(idx, upd, shape)
            out = np.zeros(c_dims, dtype)
            accumulate(out.reshape(c_out_rows), c_lin, upd.reshape(c_upd_rows))
            return out

    def run(idx: np.ndarray, upd: np.ndarray, shape: np.ndarray) -> np.ndarray:
        key = (idx.shape, upd.shape, shape.tobytes())
        p = plans.get(key) or plan(key, idx, upd, shape)
        if p is not None and idx.dtype == np.int32 and not in_shape_pass():
            dims, rows_shape, bound, strides, upd_shape = p
            rows = idx.reshape(rows_shape)
            # int32 indices: negative ones wrap to huge unsigned values, one comparison for both
            if not np.greater_equal(rows.view(np.uint32), bound).any():
                out = np.zeros(dims, dtype)
                lin = rows @ strides if rows_shape[1] > 1 else rows.reshape(-1)
                accumulate(out.reshape(-1, upd_shape[1]), lin, upd.reshape(upd_shape))
                return out
        return run_general(idx, upd, shape)

    def run_general(idx: np.ndarray, upd: np.ndarray, shape: np.ndarray) -> np.ndarray:
        if in_shape_pass() and shape_t.data is None:
            dims = tuple(max(0, int(v)) for v in shape.reshape(-1))
            _check_size(dims, dtype, "output")
            return np.zeros(dims, dtype)
        dims = out_shape_of(shape, idx.shape, upd.shape)
        _check_size(dims, dtype, "output")
        out = np.zeros(dims, dtype)
        n_slices = int(np.prod(idx.shape[:-1], dtype=np.int64)) if outer else 1
        if n_slices == 0 or in_shape_pass():
            return out
        rows = idx.reshape(n_slices, ix).astype(np.int64)
        _bounds(rows, dims, ix)
        slice_size = int(np.prod(dims[ix:], dtype=np.int64)) if dims[ix:] else 1
        if out.size == 0:
            return out
        lin = rows @ (_strides(dims, ix) // slice_size)
        flat = out.reshape(-1, slice_size)
        (np.logical_or if is_bool else np.add).at(flat, lin, upd.reshape(n_slices, slice_size))
        return out

    return run if fixed is None else run_const


def _constant_scatter(idx: np.ndarray | None, shape: np.ndarray | None, ushape: tuple, dtype: np.dtype,
                      out_shape_of, ix: int) -> tuple | None:
    """(output dims, indices shape, linear slice of each index row, output and updates as
    (rows, slice size), updates shape) for constant nonempty in-range int32 indices and shape,
    else None."""
    if idx is None or shape is None or idx.dtype != np.int32 or ix == 0:
        return None
    try:
        dims = out_shape_of(shape, idx.shape, ushape)
        _check_size(dims, dtype, "output")
    except KernelError:
        return None
    n_slices = math.prod(idx.shape[:-1])
    slice_size = math.prod(dims[ix:])
    if n_slices == 0 or math.prod(dims) == 0:
        return None
    rows = idx.reshape(n_slices, ix).astype(np.int64)
    if ((rows < 0) | (rows >= np.asarray(dims[:ix], np.int64))).any():
        return None
    lin = (rows @ (_strides(dims, ix) // slice_size)).astype(np.intp)
    return (dims, tuple(idx.shape), lin, (math.prod(dims) // slice_size, slice_size), (n_slices, slice_size),
            ushape)


def _bounds(rows: np.ndarray, dims: tuple[int, ...], ix: int) -> None:
    bad = (rows < 0) | (rows >= np.asarray(dims[:ix], np.int64))
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise KernelError(f"scatter_nd index out of bounds: {int(rows[i, j])} for dimension {int(j)} "
                          f"of size {dims[j]}")
