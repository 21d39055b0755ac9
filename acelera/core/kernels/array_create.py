"""Array-creation reference kernels: SHAPE, RANK, ZEROS_LIKE, FILL, RANGE, BROADCAST_TO,
BROADCAST_ARGS, ONE_HOT, BITCAST, BUCKETIZE.

Mirrors tflite/kernels/shape.cc, rank.cc, zeros_like.cc, fill.cc, range.cc, broadcast_to.cc,
broadcast_args.cc, one_hot.cc, bitcast.cc, bucketize.cc and
tflite/kernels/internal/reference/{fill,broadcast_to,broadcast_args}.h.
(ONES_LIKE is not a TFLite builtin operator, so there is no kernel for it.)
ONE_HOT fills its output with off_value and writes on_value at the valid indices, reading the
indices in blocks of memory.BROADCAST_BLOCK (no output-sized temporary).
"""
from __future__ import annotations

import numpy as np

from acelera.core import memory
from acelera.core.dtypes import TYPE_CODES, TYPE_NAMES
from acelera.core.errors import KernelError
from acelera.core.kernels import tiling
from acelera.core.kernels.array_util import (
    SIZED,
    check_arity,
    checked_shape,
    placeholder,
    same_type_output,
)
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register
from acelera.core.model import Tensor

_INT32, _INT64, _FLOAT32, _FLOAT64 = (TYPE_CODES[n] for n in ("INT32", "INT64", "FLOAT32", "FLOAT64"))
_INT16 = TYPE_CODES["INT16"]

_SHAPE_TYPES = SIZED + ("STRING", "INT4", "INT2", "UINT4", "RESOURCE", "VARIANT")
# fill.cc copies 8/16/32/64-bit elements (and strings).
_FILL_TYPES = tuple(t for t in SIZED if t != "COMPLEX128") + ("STRING",)
_ONE_HOT_TYPES = ("FLOAT32", "INT32", "INT64", "INT8", "UINT8", "BOOL")
_BUCKETIZE_TYPES = ("INT32", "FLOAT32", "INT64", "FLOAT64")


def _legacy_quant(t: Tensor) -> tuple[np.float32, int]:
    """A tensor's TfLiteTensor.params: the per-tensor (scale, zero point), (0, 0) otherwise."""
    q = t.quantization
    if q.scale.size != 1:
        return np.float32(0), 0
    return np.float32(q.scale[0]), int(q.zero_point[0])


def _dims_of(values: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


@register("SHAPE", max_version=1, dtypes=_SHAPE_TYPES)
def shape(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    out_type = node.options.get("out_type")
    if out_type not in (_INT32, _INT64):
        name = TYPE_NAMES.get(out_type, out_type) if out_type is not None else "unset"
        raise node.unsupported(f"out_type {name} is not supported (INT32 or INT64)")
    out_t = node.outputs[0]
    if out_t.type != out_type:
        raise node.unsupported(f"output type {out_t.type_name} differs from out_type {TYPE_NAMES[out_type]}")
    dt = out_t.dtype

    def run(x: np.ndarray) -> np.ndarray:
        return np.array(x.shape, dt).reshape(len(x.shape))

    return run


@register("RANK", max_version=1, dtypes=_SHAPE_TYPES)
def rank(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    if node.outputs[0].type != _INT32:
        raise node.unsupported(f"output type {node.outputs[0].type_name} is not INT32")

    def run(x: np.ndarray) -> np.ndarray:
        return np.array(x.ndim, np.int32)

    return run


@register("ZEROS_LIKE", max_version=1, dtypes=("INT64", "INT32", "FLOAT32"))
def zeros_like(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    x_t = node.input(0)
    assert x_t is not None  # check_arity refused missing inputs
    if x_t.type not in (_INT64, _INT32, _FLOAT32):
        raise node.unsupported(f"input type {x_t.type_name} is not supported (INT64, INT32, FLOAT32)")
    dt = same_type_output(node, x_t)

    def run(x: np.ndarray) -> np.ndarray:
        return np.zeros(x.shape, dt)

    return run


@register("FILL", max_version=5, dtypes=_FILL_TYPES)
def fill(node: NodeContext) -> Kernel:
    check_arity(node, 2, 1)
    dims_t, value_t = node.input(0), node.input(1)
    assert dims_t is not None and value_t is not None  # check_arity refused missing inputs
    out_t = node.outputs[0]
    if len(dims_t.shape) != 1:
        raise node.unsupported(f"dims must be 1-D, got shape {list(dims_t.shape)}")
    if dims_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"dims of type {dims_t.type_name} are not supported (INT32 or INT64)")
    if len(value_t.shape) != 0:
        raise node.unsupported(f"value must be a scalar, got shape {list(value_t.shape)}")
    if value_t.type_name not in _FILL_TYPES:
        raise node.unsupported(f"value type {value_t.type_name} is not supported")
    dt = same_type_output(node, value_t)
    (vs, vz), (os_, oz) = _legacy_quant(value_t), _legacy_quant(out_t)
    if vs != os_ or vz != oz:
        raise node.unsupported(f"output quantization ({float(os_)}, {oz}) differs from the value's "
                               f"({float(vs)}, {vz})")
    if value_t.type == _INT16 and vz != 0:
        raise node.unsupported(f"INT16 value needs zero point 0, got {vz}")

    def run(dims: np.ndarray, value: np.ndarray) -> np.ndarray:
        out_shape = checked_shape(_dims_of(dims), dt)
        v = value.reshape(-1)[0]
        if dt == np.object_:
            return np.full(out_shape, v if isinstance(v, bytes) else b"", dtype=object)
        return np.full(out_shape, v, dtype=dt)

    return run


def _range_size(start, limit, delta, dtype: np.dtype) -> int:
    """range.cc GetSize: the element count, or a KernelError for a zero or wrong-signed delta."""
    if delta == 0:
        raise KernelError("delta must not be zero")
    if not ((start >= limit and delta < 0) or (start <= limit and delta > 0)):
        raise KernelError(f"cannot reach limit {limit} from start {start} with delta {delta}")
    if np.issubdtype(dtype, np.integer):
        s, l, d = int(start), int(limit), int(delta)
        return (abs(l - s) + abs(d) - 1) // abs(d)
    with np.errstate(all="ignore"):
        size = np.ceil(np.abs((np.float32(limit) - np.float32(start)) / np.float32(delta)))
    if not np.isfinite(size):
        raise KernelError(f"range size for start {start}, limit {limit}, delta {delta} is not finite")
    return int(size)


@register("RANGE", max_version=2, dtypes=("INT32", "INT64", "FLOAT32"))
def range_(node: NodeContext) -> Kernel:
    check_arity(node, 3, 1)
    start_t, limit_t, delta_t = node.inputs
    assert start_t is not None and limit_t is not None and delta_t is not None  # check_arity refused missing inputs
    for name, t in (("start", start_t), ("limit", limit_t), ("delta", delta_t)):
        if len(t.shape) != 0:
            raise node.unsupported(f"{name} must be a scalar, got shape {list(t.shape)}")
    if start_t.type not in (_INT32, _INT64, _FLOAT32):
        raise node.unsupported(f"type {start_t.type_name} is not supported (INT32, INT64, FLOAT32)")
    if limit_t.type != start_t.type or delta_t.type != start_t.type:
        raise node.unsupported(f"start, limit and delta types differ ({start_t.type_name}, "
                               f"{limit_t.type_name}, {delta_t.type_name})")
    dt = same_type_output(node, start_t)
    all_const = all(node.const(i) is not None for i in range(3))

    def run(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
        s, l, d = start.reshape(-1)[0], limit.reshape(-1)[0], delta.reshape(-1)[0]
        try:
            n = _range_size(s, l, d, dt)
            checked_shape((n,), dt)
        except KernelError:
            if in_shape_pass() and not all_const:
                return np.zeros(0, dt)
            raise
        if dt == np.float32:
            steps = np.full(n, d, np.float32)
            if n:
                steps[0] = s
            return np.cumsum(steps, dtype=np.float32)  # value += delta, one float32 add at a time
        with np.errstate(over="ignore"):
            return (np.arange(n, dtype=np.int64) * np.int64(d) + np.int64(s)).astype(dt)

    return run


@register("BROADCAST_TO", max_version=4, dtypes=SIZED)
def broadcast_to(node: NodeContext) -> Kernel:
    check_arity(node, 2, 1)
    x_t, shape_t = node.inputs
    assert x_t is not None and shape_t is not None  # check_arity refused missing inputs
    if node.version < 2:
        raise node.unsupported("version 1 is not supported (LiteRT registers versions 2 to 4)")
    if shape_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"shape of type {shape_t.type_name} is not supported (INT32 or INT64)")
    if x_t.type_name not in SIZED:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    dt = same_type_output(node, x_t)
    if len(shape_t.shape) != 1:
        raise node.unsupported(f"shape must be 1-D, got shape {list(shape_t.shape)}")
    if len(x_t.shape) > shape_t.shape[0]:
        raise node.unsupported(f"input rank {len(x_t.shape)} exceeds the {shape_t.shape[0]} output dimensions")
    shape_const = node.const(1) is not None

    def run(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
        # broadcast_to.cc reads int64 shapes through an int32.
        target = shape.reshape(-1).astype(np.int32).tolist()
        lead = len(target) - x.ndim
        bad = any(d != 1 and d != target[lead + i] for i, d in enumerate(x.shape))
        try:
            if bad:
                raise KernelError(f"output shape {target} is not broadcastable from input shape {list(x.shape)}")
            out_shape = checked_shape(target, dt)
        except KernelError:
            if in_shape_pass() and not shape_const:
                return placeholder(node.outputs[0])
            raise
        return np.broadcast_to(x, out_shape).copy()

    return run


@register("BROADCAST_ARGS", max_version=1, dtypes=("INT32", "INT64"))
def broadcast_args(node: NodeContext) -> Kernel:
    check_arity(node, 2, 1)
    a_t, b_t = node.inputs
    assert a_t is not None and b_t is not None  # check_arity refused missing inputs
    if a_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"shape type {a_t.type_name} is not supported (INT32 or INT64)")
    if b_t.type != a_t.type:
        raise node.unsupported(f"shape types differ ({a_t.type_name}, {b_t.type_name})")
    dt = same_type_output(node, a_t)
    if len(a_t.shape) != 1 or len(b_t.shape) != 1:
        raise node.unsupported(f"shapes must be 1-D, got {list(a_t.shape)} and {list(b_t.shape)}")

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # reference BroadcastArgs compares the values as ints, from the last dimension back.
        n = max(a.size, b.size)
        aa = np.concatenate([np.ones(n - a.size, np.int32), a.astype(np.int32)])
        bb = np.concatenate([np.ones(n - b.size, np.int32), b.astype(np.int32)])
        clash = (aa != 1) & (bb != 1) & (aa != bb)
        if clash.any() and in_shape_pass():  # placeholder zeros: plan with the larger dimensions
            return np.maximum(aa, bb).astype(dt)
        if clash.any():
            i = int(np.flatnonzero(clash)[0])
            raise KernelError(f"shapes {a.tolist()} and {b.tolist()} are not broadcastable "
                              f"({int(aa[i])} vs {int(bb[i])})")
        return np.where(aa == 1, bb, aa).astype(dt)

    return run


@register("ONE_HOT", max_version=1, dtypes=("INT32", "INT64"))
def one_hot(node: NodeContext) -> Kernel:
    check_arity(node, 4, 1)
    idx_t, depth_t, on_t, off_t = node.inputs
    # check_arity refused missing inputs
    assert idx_t is not None and depth_t is not None and on_t is not None and off_t is not None
    if on_t.type_name not in _ONE_HOT_TYPES:
        # LiteRT's Prepare lets INT16 through, but its Eval has no INT16 case and fails.
        raise node.unsupported(f"value type {on_t.type_name} is not supported ({', '.join(_ONE_HOT_TYPES)})")
    if idx_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"indices of type {idx_t.type_name} are not supported (INT32 or INT64)")
    rank = len(idx_t.shape)
    axis = int(node.options.get("axis", 0))
    axis = rank if axis == -1 else axis
    if not 0 <= axis <= rank:
        raise node.unsupported(f"axis {node.options.get('axis', 0)} is out of range for indices of rank {rank}")
    for name, t in (("depth", depth_t), ("on_value", on_t), ("off_value", off_t)):
        if int(np.prod(t.shape, dtype=np.int64)) != 1:
            raise node.unsupported(f"{name} must have one element, got shape {list(t.shape)}")
    if depth_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"depth of type {depth_t.type_name} is not supported (INT32 or INT64)")
    if off_t.type != on_t.type:
        raise node.unsupported(f"on_value and off_value types differ ({on_t.type_name}, {off_t.type_name})")
    dt = same_type_output(node, on_t)

    def run(indices: np.ndarray, depth: np.ndarray, on: np.ndarray, off: np.ndarray) -> np.ndarray:
        # one_hot.cc reads depth as the tensor's first int32 word.
        d = int(np.ascontiguousarray(depth).reshape(-1).view(np.int32)[0])
        if d < 0:
            raise KernelError(f"depth must be >= 0, got {d}")
        out_shape = checked_shape(indices.shape[:axis] + (d,) + indices.shape[axis:], dt)
        prefix = int(np.prod(indices.shape[:axis], dtype=np.int64))
        if prefix == 0 or indices.size == 0 or d == 0:
            return np.zeros(out_shape, dt)
        out = np.full(out_shape, off.reshape(-1)[0], dt)
        hot = out.reshape(prefix, d, -1)
        idx = indices.reshape(prefix, -1)
        for rows, cols in tiling.boxes(idx.shape, 1, memory.BROADCAST_BLOCK):
            block = idx[rows, cols].astype(np.int32)  # static_cast<int>, as one_hot.cc compares
            r, c = np.nonzero((block >= 0) & (block < d))
            hot[rows.start + r, block[r, c], cols.start + c] = on.reshape(-1)[0]
        return out

    return run


@register("BITCAST", max_version=1, dtypes=SIZED)
def bitcast(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    x_t, out_t = node.input(0), node.outputs[0]
    assert x_t is not None  # check_arity refused missing inputs
    for what, t in (("input", x_t), ("output", out_t)):
        if t.type_name not in SIZED:
            raise node.unsupported(f"{what} type {t.type_name} is not supported")
    in_size, out_size = x_t.dtype.itemsize, out_t.dtype.itemsize
    shape = x_t.shape
    if in_size > out_size:
        out_shape = shape + (in_size // out_size,)
    elif in_size < out_size:
        if not shape or shape[-1] != out_size // in_size:
            raise node.unsupported(f"the last dimension of input shape {list(shape)} must be "
                                   f"{out_size // in_size} to bitcast {x_t.type_name} to {out_t.type_name}")
        out_shape = shape[:-1]
    else:
        out_shape = shape
    out_dt = out_t.dtype

    def run(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x).reshape(-1).view(out_dt).reshape(out_shape).copy()

    return run


def _upper_bound(boundaries: np.ndarray, values: np.ndarray) -> np.ndarray:
    """std::upper_bound(boundaries, value) for every value: the same halving steps, so boundaries
    holding NaN (which is_sorted lets through) give LiteRT's answer."""
    n = boundaries.size
    first = np.zeros(values.shape, np.int64)
    length = np.full(values.shape, n, np.int64)
    while n and (length > 0).any():
        active = length > 0
        half = length >> 1
        mid = first + half
        less = values < boundaries[np.minimum(mid, n - 1)]
        left = active & less
        right = active & ~less
        first = np.where(right, mid + 1, first)
        length = np.where(left, half, np.where(right, length - half - 1, length))
    return first


@register("BUCKETIZE", max_version=1, dtypes=_BUCKETIZE_TYPES)
def bucketize(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    x_t = node.input(0)
    assert x_t is not None  # check_arity refused missing inputs
    bounds = np.asarray(node.options.get("boundaries", ()), np.float32).reshape(-1)
    if (bounds[1:] < bounds[:-1]).any():
        raise node.unsupported("boundaries must be sorted")
    if x_t.type_name not in _BUCKETIZE_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported ({', '.join(_BUCKETIZE_TYPES)})")
    if node.outputs[0].type != _INT32:
        raise node.unsupported(f"output type {node.outputs[0].type_name} is not INT32")
    # C++ compares an integer or float input with a float boundary in float, a double in double.
    ctype = np.float64 if x_t.type == _FLOAT64 else np.float32
    b = bounds.astype(ctype)
    has_nan = bool(np.isnan(b).any())

    def run(x: np.ndarray) -> np.ndarray:
        v = x.astype(ctype)
        pos = _upper_bound(b, v) if has_nan else np.searchsorted(b, v, side="right")
        return np.asarray(pos, np.int32).reshape(x.shape)

    return run
