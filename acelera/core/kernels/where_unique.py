"""WHERE (one-input form), UNIQUE and SPARSE_TO_DENSE reference kernels (tflite/kernels/where.cc,
unique.cc, sparse_to_dense.cc, SelectTrueCoords and SparseToDense in
tflite/kernels/internal/reference/reference_ops.h). Their output shapes depend on input values.
"""
from __future__ import annotations

import numpy as np

from acelera.core.dtypes import TYPE_CODES
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity, checked_shape, same_type_output
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register

_INT32, _INT64 = TYPE_CODES["INT32"], TYPE_CODES["INT64"]
_WHERE_TYPES = ("BOOL", "FLOAT32", "INT64", "INT32", "INT8", "UINT8", "UINT32")
_UNIQUE_TYPES = ("INT8", "INT16", "INT32", "INT64", "FLOAT32", "UINT8")
_SPARSE_VALUE_TYPES = ("INT32", "INT64", "INT8", "UINT8", "FLOAT32")
_SPARSE_MAX_DIMS = 4


@register("WHERE", max_version=2, dtypes=_WHERE_TYPES)
def where(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    c_t = node.input(0)
    assert c_t is not None  # check_arity refused missing inputs
    if c_t.type_name not in _WHERE_TYPES:
        raise node.unsupported(f"condition type {c_t.type_name} is not supported")
    if len(c_t.shape) == 0:
        raise node.unsupported("condition must have rank > 0")
    if node.outputs[0].type != _INT64:
        raise node.unsupported(f"output type {node.outputs[0].type_name} is not INT64")

    grids: dict[tuple, np.ndarray] = {}

    def grid(shape: tuple) -> np.ndarray:
        """Every element's coordinates, row-major: (size, rank) int64."""
        if len(grids) >= 8:
            grids.clear()
        g = grids[shape] = np.indices(shape, np.int64).reshape(len(shape), -1).T.copy()
        return g

    def run(cond: np.ndarray) -> np.ndarray:
        if cond.ndim == 0:
            return np.argwhere(cond != 0).astype(np.int64).reshape(-1, cond.ndim)
        if cond.size <= 1024:
            g = grids.get(cond.shape)
            # the nonzero elements in row-major order (NaN counts, -0.0 not)
            return (g if g is not None else grid(cond.shape)).take(cond.reshape(-1).nonzero()[0], axis=0)
        coords = cond.nonzero()  # the nonzero elements in row-major order (NaN counts, -0.0 not)
        out = np.empty((coords[0].size, cond.ndim), np.int64)
        for k, v in enumerate(coords):
            out[:, k] = v
        return out

    return run


def _unique_in_order(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """unique.cc's std::map<T, int> walk: values in order of first appearance and, per element,
    the index of its value. Floats compare with `<`, so -0.0 and 0.0 are one value, and a NaN
    lookup lands on the smallest value seen so far (std::map::find's lower_bound goes left at
    every node); a NaN first element becomes the only key and every later lookup finds it."""
    n = x.size
    if n == 0:
        return x.copy(), np.zeros(0, np.int64)
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(n, bool)
    if nan[0]:
        return x[:1].copy(), np.zeros(n, np.int64)
    ok = ~nan
    vals, first, inverse = np.unique(x[ok], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    idx = np.empty(n, np.int64)
    idx[ok] = rank[inverse.reshape(-1)]
    if nan.any():
        running_min = np.minimum.accumulate(np.where(nan, np.inf, x).astype(np.float64))
        pos = np.searchsorted(vals.astype(np.float64), running_min[nan])
        idx[nan] = rank[pos]
    return x[ok][first[order]], idx


@register("UNIQUE", max_version=1, dtypes=_UNIQUE_TYPES)
def unique(node: NodeContext) -> Kernel:
    check_arity(node, 1, 2)
    x_t = node.input(0)
    assert x_t is not None  # check_arity refused missing inputs
    if "idx_out_type" not in node.options:
        raise node.unsupported("UniqueOptions are missing (idx_out_type)")
    idx_type = _INT64 if node.options["idx_out_type"] == _INT64 else _INT32
    same_type_output(node, x_t, 0)
    if node.outputs[1].type != idx_type:
        raise node.unsupported(f"index output type {node.outputs[1].type_name} differs from idx_out_type "
                               f"{'INT64' if idx_type == _INT64 else 'INT32'}")
    if len(x_t.shape) != 1:
        raise node.unsupported(f"input must be 1-D, got shape {list(x_t.shape)}")
    if x_t.type_name not in _UNIQUE_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    idx_dt = node.outputs[1].dtype

    def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        vals, idx = _unique_in_order(x)
        return vals, idx.astype(idx_dt)

    return run


@register("SPARSE_TO_DENSE", max_version=3, dtypes=_SPARSE_VALUE_TYPES)
def sparse_to_dense(node: NodeContext) -> Kernel:
    check_arity(node, 4, 1)
    idx_t, shape_t, val_t, def_t = node.inputs
    # check_arity refused missing inputs
    assert idx_t is not None and shape_t is not None and val_t is not None and def_t is not None
    irank, vrank = len(idx_t.shape), len(val_t.shape)
    if irank >= 3:
        raise node.unsupported(f"indices must have rank < 3, got shape {list(idx_t.shape)}")
    if len(shape_t.shape) != 1:
        raise node.unsupported(f"output shape must be 1-D, got shape {list(shape_t.shape)}")
    if vrank >= 2:
        raise node.unsupported(f"values must have rank < 2, got shape {list(val_t.shape)}")
    if int(np.prod(def_t.shape, dtype=np.int64)) != 1:
        raise node.unsupported(f"default value must have one element, got shape {list(def_t.shape)}")
    if idx_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"indices of type {idx_t.type_name} are not supported (INT32 or INT64)")
    if shape_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"output shape of type {shape_t.type_name} is not supported (INT32 or INT64)")
    if val_t.type_name not in _SPARSE_VALUE_TYPES:
        raise node.unsupported(f"values of type {val_t.type_name} are not supported")
    if def_t.type != val_t.type:
        raise node.unsupported(f"default value type {def_t.type_name} differs from values type {val_t.type_name}")
    n_idx = int(np.prod(idx_t.shape, dtype=np.int64)) if irank < 2 else idx_t.shape[0]
    n_vals = int(np.prod(val_t.shape, dtype=np.int64))
    out_rank = shape_t.shape[0]
    if irank < 2 and out_rank != 1:
        raise node.unsupported(f"{irank}-D indices need a 1-element output shape, got {out_rank} elements")
    if irank == 2 and idx_t.shape[1] != out_rank:
        raise node.unsupported(f"indices of shape {list(idx_t.shape)} for an output of rank {out_rank}")
    if vrank != 0 and n_vals != n_idx:
        raise node.unsupported(f"{n_vals} values for {n_idx} indices")
    if out_rank > _SPARSE_MAX_DIMS:
        raise node.unsupported(f"output rank {out_rank} exceeds {_SPARSE_MAX_DIMS}")
    dt = same_type_output(node, val_t)
    idx_const = node.const(0) is not None

    def run(indices: np.ndarray, shape: np.ndarray, values: np.ndarray, default: np.ndarray) -> np.ndarray:
        out_shape = checked_shape(shape.reshape(-1).tolist(), dt)
        out = np.full(out_shape, default.reshape(-1)[0], dt)
        coords = indices.astype(np.int64).reshape(n_idx, indices.shape[1] if indices.ndim == 2 else 1)
        if n_idx == 0:
            return out
        bad = ((coords < 0) | (coords >= np.array(out_shape, np.int64))).any(axis=1)
        if bad.any():
            if in_shape_pass() and not idx_const:
                return out
            raise KernelError(f"index {coords[int(np.flatnonzero(bad)[0])].tolist()} is out of bounds "
                              f"for output shape {list(out_shape)}")
        flat = np.asarray(np.ravel_multi_index(tuple(coords.T), out_shape)) if out_shape else np.zeros(n_idx, np.int64)
        vals = np.broadcast_to(values.reshape(-1)[:1], (n_idx,)) if values.ndim == 0 else values.reshape(-1)
        # a repeated index keeps its last value, as the reference loop writes in order
        last, keep = np.unique(flat[::-1], return_index=True)
        out.reshape(-1)[last] = vals[::-1][keep]
        return out

    return run
