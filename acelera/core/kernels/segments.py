"""Segment reductions: SEGMENT_SUM, UNSORTED_SEGMENT_SUM/PROD/MAX/MIN (tflite/kernels/segment_sum.cc,
unsorted_segment.cc and reference_ops::SegmentSum / UnsortedSegmentRef in
tflite/kernels/internal/reference/reference_ops.h).

Every op reduces the rows of the data (viewed as (len(segment_ids), segment_size)) into output
rows in input order with numpy's unbuffered ufunc.at, which visits the rows in the same order as
LiteRT's loop, so float sums and products round identically. Empty segments keep LiteRT's
initial values: 0 for sums, 1 for products, the lowest / highest finite value for max / min.
Float max/min follow std::max / std::min: NaN inputs never replace the running value, and the
first of several equal values (0.0 and -0.0) is kept.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import KernelError
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register
from acelera.core.model import MAX_TENSOR_BYTES, Tensor

_DATA_TYPES = ("FLOAT32", "INT32")


def _check_types(node: NodeContext, n_inputs: int) -> tuple[Tensor, ...]:
    """The node's inputs, all present, after LiteRT's type checks."""
    inputs = tuple(t for t in node.inputs if t is not None)
    if len(node.inputs) != n_inputs or len(node.outputs) != 1 or len(inputs) != n_inputs:
        raise node.unsupported(f"takes {n_inputs} inputs and has one output")
    data = inputs[0]
    if data.type_name not in _DATA_TYPES:
        raise node.unsupported(f"data of type {data.type_name} is not supported")
    for t in inputs[1:]:
        if t.type_name != "INT32":
            raise node.unsupported(f"segment ids and counts must be INT32, got {t.type_name}")
    if node.outputs[0].type != data.type:
        raise node.unsupported(f"output type {node.outputs[0].type_name} differs from data type {data.type_name}")
    return inputs


def _allocate(shape: tuple[int, ...], dtype: np.dtype, init) -> np.ndarray:
    n = 1
    for d in shape:
        n *= d
    if n * dtype.itemsize > MAX_TENSOR_BYTES:
        raise KernelError(f"output of shape {list(shape)} exceeds the tensor size limit ({MAX_TENSOR_BYTES} bytes)")
    return np.zeros(shape, dtype) if init == 0 else np.full(shape, init, dtype)


def _id_plan(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(the ids >= 0 as a vector, the mask of kept rows or None when every id is kept)."""
    ids = ids.reshape(-1)
    if ids.size == 0 or np.minimum.reduce(ids) >= 0:
        return ids, None
    keep = ids >= 0
    return ids[keep], keep


def _reduce(kind: str, data: np.ndarray, ids: np.ndarray, out: np.ndarray,
            plan: tuple[np.ndarray, np.ndarray | None] | None = None) -> np.ndarray:
    """Reduce data rows into out rows by segment id in input order; ids < 0 are skipped.
    `plan` is _id_plan(ids) when the caller has it."""
    n = ids.size
    if out.size == 0 or n == 0:
        return out
    seg = out.reshape(out.shape[0], -1)
    rows = data.reshape(n, seg.shape[1])
    ids, keep = _id_plan(ids) if plan is None else plan
    if keep is not None:
        rows = rows[keep]
    if kind == "sum":
        np.add.at(seg, ids, rows)
    elif kind == "prod":
        np.multiply.at(seg, ids, rows)
    elif out.dtype.kind != "f":
        (np.maximum if kind == "max" else np.minimum).at(seg, ids, rows)
    else:
        (np.fmax if kind == "max" else np.fmin).at(seg, ids, rows)
        _signed_zeros(seg, ids, rows)
    return out


def _signed_zeros(seg: np.ndarray, ids: np.ndarray, rows: np.ndarray) -> None:
    """Where a float max/min is zero, take the sign of the first zero of its segment (std::max
    and std::min only replace the running value by a strictly larger / smaller one)."""
    zero = seg == 0
    if not zero.any():
        return
    first = np.full(seg.shape, len(ids), np.int64)
    order = np.broadcast_to(np.arange(len(ids))[:, None], rows.shape)
    np.minimum.at(first, ids, np.where(rows == 0, order, len(ids)))
    pick = zero & (first < len(ids))
    cols = np.nonzero(pick)
    seg[cols] = rows[first[cols], cols[1]]


@register("SEGMENT_SUM", max_version=1, dtypes=_DATA_TYPES)
def segment_sum(node: NodeContext) -> Kernel:
    data_t, ids_t = _check_types(node, 2)
    if len(data_t.shape) < 1:
        raise node.unsupported("data must have rank >= 1")
    if len(ids_t.shape) != 1 or ids_t.shape[0] != data_t.shape[0]:
        raise node.unsupported(f"segment ids of shape {list(ids_t.shape)} do not match data of shape "
                               f"{list(data_t.shape)}")
    dtype = node.outputs[0].dtype

    def segments(ids: np.ndarray) -> int:
        """The output's first dimension; ids must start at 0 and grow by 0 or 1."""
        if ids.size == 0:
            return 0
        ids = ids.reshape(-1)
        if ids.size > 1:
            step = np.subtract(ids[1:], ids[:-1], dtype=np.int64)
            ok = bool(np.minimum.reduce(step) >= 0 and np.maximum.reduce(step) <= 1)
        else:
            ok = True
        if ids[0] != 0 or not ok:
            raise KernelError("segment ids must start at 0 and increase by at most 1")
        return int(ids[-1]) + 1

    if ids_t.data is not None:
        try:
            n_const = segments(ids_t.data)
        except KernelError as e:
            raise node.unsupported(str(e)) from None
        plan = _id_plan(ids_t.data)

        def run_const(data: np.ndarray, ids: np.ndarray) -> np.ndarray:
            out = _allocate((n_const,) + data.shape[1:], dtype, 0)
            return _reduce("sum", data, ids, out, plan)
        return run_const

    def run(data: np.ndarray, ids: np.ndarray) -> np.ndarray:
        if in_shape_pass() and ids_t.data is None:
            n = 1 if ids.size else 0
            return np.zeros((n,) + data.shape[1:], dtype)
        out = _allocate((segments(ids),) + data.shape[1:], dtype, 0)
        return _reduce("sum", data, ids, out)

    return run


def _unsorted(node: NodeContext, kind: str) -> Kernel:
    data_t, ids_t, num_t = _check_types(node, 3)
    r = len(ids_t.shape)
    if r > len(data_t.shape) or tuple(data_t.shape[:r]) != tuple(ids_t.shape):
        raise node.unsupported(f"segment ids of shape {list(ids_t.shape)} are not a prefix of data shape "
                               f"{list(data_t.shape)}")
    if tuple(num_t.shape) not in ((), (1,)):
        raise node.unsupported(f"num_segments must be a scalar, got shape {list(num_t.shape)}")
    dtype = node.outputs[0].dtype
    if kind == "sum":
        init = 0
    elif kind == "prod":
        init = 1
    elif dtype.kind == "f":
        info = np.finfo(dtype)
        init = info.min if kind == "max" else info.max
    else:
        iinfo = np.iinfo(dtype)
        init = iinfo.min if kind == "max" else iinfo.max

    def num_segments(ids: np.ndarray, num: np.ndarray) -> int:
        n = int(num.reshape(-1)[0])
        if n < 0:
            raise KernelError(f"num_segments {n} is negative")
        if ids.size and int(ids.max()) >= n:
            raise KernelError(f"segment id {int(ids.max())} is out of range for {n} segments")
        return n

    if ids_t.data is not None and num_t.data is not None:
        try:
            n_const = num_segments(ids_t.data, num_t.data)
        except KernelError as e:
            raise node.unsupported(str(e)) from None
        plan = _id_plan(ids_t.data)

        def run_const(data: np.ndarray, ids: np.ndarray, num: np.ndarray) -> np.ndarray:
            out = _allocate((n_const,) + data.shape[r:], dtype, init)
            return _reduce(kind, data, ids, out, plan)
        return run_const

    def run(data: np.ndarray, ids: np.ndarray, num: np.ndarray) -> np.ndarray:
        tail = data.shape[r:]
        if in_shape_pass() and (ids_t.data is None or num_t.data is None):
            return _allocate((max(0, int(num.reshape(-1)[0])),) + tail, dtype, init)
        out = _allocate((num_segments(ids, num),) + tail, dtype, init)
        return _reduce(kind, data, ids, out)

    return run


@register("UNSORTED_SEGMENT_SUM", max_version=1, dtypes=_DATA_TYPES)
def unsorted_segment_sum(node: NodeContext) -> Kernel:
    return _unsorted(node, "sum")


@register("UNSORTED_SEGMENT_PROD", max_version=1, dtypes=_DATA_TYPES)
def unsorted_segment_prod(node: NodeContext) -> Kernel:
    return _unsorted(node, "prod")


@register("UNSORTED_SEGMENT_MAX", max_version=1, dtypes=_DATA_TYPES)
def unsorted_segment_max(node: NodeContext) -> Kernel:
    return _unsorted(node, "max")


@register("UNSORTED_SEGMENT_MIN", max_version=1, dtypes=_DATA_TYPES)
def unsorted_segment_min(node: NodeContext) -> Kernel:
    return _unsorted(node, "min")
