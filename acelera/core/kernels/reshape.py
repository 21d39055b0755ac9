"""RESHAPE, SQUEEZE and EXPAND_DIMS reference kernels, plus helpers shared by the shape-op family.

These ops only change the shape: each returns a view of its input (numpy `reshape`), never a
copy unless the input is a non-contiguous view that cannot be reshaped in place. Semantics
follow LiteRT's `reshape.cc` (shape tensor or `new_shape` option, one -1 inferred as in
`reshape_utils.h`, including zero-sized tensors), `squeeze.cc` and `expand_dims.cc`; none of
them looks at the element type, so every type the loader knows is accepted (STRING, RESOURCE
and VARIANT object arrays, INT4, INT2 and UINT4 held unpacked, BFLOAT16 and FLOAT8 bit patterns).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from acelera.core.dtypes import TYPE_NAMES
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import check_same_type, check_type
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.model import Tensor

# --- helpers shared by the shape and data-movement family (pad, slice, transpose, concat) ---

# Every type: pure reshapes work on any element type.
ANY_TYPES = frozenset(TYPE_NAMES.values())
# Types LiteRT moves by element size (8/16/32/64 bits): TRANSPOSE, MIRROR_PAD, SLICE, STRIDED_SLICE.
SIZED_TYPES = frozenset({"FLOAT32", "FLOAT16", "BFLOAT16", "FLOAT64", "INT8", "UINT8", "INT16", "UINT16",
                         "INT32", "UINT32", "INT64", "UINT64", "BOOL", "COMPLEX64", "FLOAT8_E4M3FN",
                         "FLOAT8_E5M2"})


def legacy_qparams(t: Tensor) -> tuple[np.float32, int]:
    """TFLite's per-tensor `params` (scale, zero_point): set only for single-scale quantization."""
    q = t.quantization
    if q.scale.size == 1:
        return np.float32(q.scale[0]), int(q.zero_point[0])
    return np.float32(0.0), 0


def same_qparams(a: Tensor, b: Tensor) -> bool:
    sa, za = legacy_qparams(a)
    sb, zb = legacy_qparams(b)
    return bool(sa == sb) and za == zb


def int_vector(node: NodeContext, i: int, allowed: Iterable[str] = ("INT32",), what: str = "index") -> np.ndarray | None:
    """The constant int values of input i as int64 (None when not constant); checks its type."""
    t = node.input(i)
    if t is None:
        return None
    check_type(node, t, allowed, what)
    return None if t.data is None else np.asarray(t.data, np.int64).reshape(-1)


def is_placeholder(v: np.ndarray) -> bool:
    """True for the all-zero values the executor feeds to graph inputs during its shape pass."""
    return v.size > 0 and not np.any(v)


def declared_zeros(node: NodeContext, k: int = 0) -> np.ndarray:
    """A zero output (empty strings for STRING) of the shape the model declares (placeholder
    result for the shape pass)."""
    o = node.outputs[k]
    if o.dtype == np.object_:
        return np.full(o.shape, b"", dtype=object)
    return np.zeros(o.shape, o.dtype)


def copy_block(out: np.ndarray, x: np.ndarray, starts: tuple[int, ...]) -> None:
    """out[starts[i]:starts[i] + x.shape[i], ...] = x, moving contiguous runs as single items.

    numpy copies a slice such as out[..., :24] = x row by row with a per-row dispatch cost;
    viewing each run of x that stays contiguous in `out` (from the last axis where the shapes
    differ inwards) as one opaque item makes it a single memcpy-like loop, as LiteRT's memcpy.
    """
    k = out.ndim - 1
    while k >= 0 and out.shape[k] == x.shape[k]:
        k -= 1
    if k < 0:
        out[...] = x
        return
    if x.size == 0:
        return
    inner = x.itemsize
    for d in x.shape[k + 1:]:
        inner *= d
    run = x.shape[k] * inner
    # The opaque-item copy costs ~5 us to set up and wins over numpy's row loop only for
    # many short runs; a run of one element is already a fast 1-D strided copy.
    if not (_num(x.shape[:k]) >= 512 and x.itemsize < run <= 1024
            and x.flags.c_contiguous and out.flags.c_contiguous):
        out[tuple(slice(s, s + n) for s, n in zip(starts, x.shape))] = x
        return
    item = np.dtype((np.void, run))
    ob = out.reshape(out.shape[:k] + (-1,)).view(np.uint8)
    dst = ob[..., starts[k] * inner:starts[k] * inner + run].view(item)[..., 0]
    src = x.reshape(x.shape[:k] + (-1,)).view(np.uint8).view(item)[..., 0]
    dst[tuple(slice(s, s + n) for s, n in zip(starts[:k], x.shape[:k]))] = src


def _num(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# --- RESHAPE ------------------------------------------------------------------------------

def resolve_reshape(in_shape: tuple[int, ...], requested: Iterable[int]) -> tuple[int, ...]:
    """LiteRT's ResolveOutputShape: at most one -1, other dims >= 0, element counts equal
    (a KernelError otherwise, at prepare or at invoke)."""
    out = [int(d) for d in requested]
    n_in = _num(in_shape)
    nz_in = _num(d for d in in_shape if d != 0)
    stretch = -1
    nz_out = n_out = 1
    for i, d in enumerate(out):
        if d == -1:
            if stretch != -1:
                raise KernelError(f"new shape {out} has more than one -1")
            stretch = i
            continue
        if d < 0:
            raise KernelError(f"new shape {out} has a negative dimension")
        if d:
            nz_out *= d
        n_out *= d
    if stretch != -1:
        out[stretch] = 0 if (n_in == 0 and n_out != 0) else nz_in // nz_out
        n_out *= out[stretch]
    if n_in != n_out:
        raise KernelError(f"total input size != output size: cannot reshape {list(in_shape)} ({n_in} elements) "
                          f"to {out} ({n_out} elements)")
    return tuple(out)


@register("RESHAPE", max_version=1, dtypes=tuple(sorted(ANY_TYPES)))
def reshape(node: NodeContext):
    if len(node.inputs) not in (1, 2) or len(node.outputs) != 1:
        raise node.unsupported(f"expects 1 or 2 inputs and 1 output, got {len(node.inputs)} and {len(node.outputs)}")
    x_t = node.inputs[0]
    out_t = node.outputs[0]
    if x_t is None:
        raise node.unsupported("input 0 is missing")
    check_type(node, x_t, ANY_TYPES)
    check_same_type(node, x_t, out_t)
    shape_t = node.input(1)
    if shape_t is not None and len(shape_t.shape) == 1 and shape_t.type_name == "INT32":
        if shape_t.data is None:
            return _dynamic_reshape(node)
        requested = tuple(int(v) for v in shape_t.data)
    else:
        requested = tuple(node.options.get("new_shape", ()) or ())
        if requested == (0,):  # legacy models spell a scalar as [0]
            requested = ()
    in_shape = x_t.shape
    out_shape = resolve_reshape(in_shape, requested)

    def run(x, shape=None):
        if x.shape == in_shape:
            return x.reshape(out_shape)
        return x.reshape(resolve_reshape(x.shape, requested))
    return run


def _dynamic_reshape(node: NodeContext):
    declared = node.outputs[0].shape

    def run(x, shape):
        try:
            return x.reshape(resolve_reshape(x.shape, shape.tolist()))
        except KernelError:
            if is_placeholder(shape) and _num(declared) == x.size:
                return x.reshape(declared)
            raise
    return run


# --- SQUEEZE ------------------------------------------------------------------------------

def squeeze_shape(in_shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
    rank = len(in_shape)
    if rank > 8:
        raise KernelError(f"SQUEEZE supports up to 8 dimensions, got {rank}")
    if not dims:
        return tuple(d for d in in_shape if d != 1)
    drop = set()
    for d in dims:
        a = d + rank if d < 0 else d
        if not (0 <= a < rank and in_shape[a] == 1):
            raise KernelError(f"cannot squeeze dimension {d} of shape {list(in_shape)}")
        drop.add(a)
    return tuple(s for i, s in enumerate(in_shape) if i not in drop)


@register("SQUEEZE", max_version=2, dtypes=tuple(sorted(ANY_TYPES)))
def squeeze(node: NodeContext):
    x_t = node.inputs[0]
    if x_t is None:
        raise node.unsupported("input 0 is missing")
    check_type(node, x_t, ANY_TYPES)
    check_same_type(node, x_t, node.outputs[0])
    dims = tuple(int(d) for d in node.options.get("squeeze_dims", ()) or ())
    in_shape = x_t.shape
    out_shape = squeeze_shape(in_shape, dims)

    def run(x):
        return x.reshape(out_shape if x.shape == in_shape else squeeze_shape(x.shape, dims))
    return run


# --- EXPAND_DIMS --------------------------------------------------------------------------

def expand_shape(in_shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    rank = len(in_shape)
    a = axis + rank + 1 if axis < 0 else axis
    if not 0 <= a <= rank:
        raise KernelError(f"EXPAND_DIMS axis {axis} is out of range for rank {rank}")
    return in_shape[:a] + (1,) + in_shape[a:]


@register("EXPAND_DIMS", max_version=1, dtypes=tuple(sorted(ANY_TYPES)))
def expand_dims(node: NodeContext):
    check_arity(node, 2, 1)
    x_t, axis_t = node.inputs[0], node.inputs[1]
    assert x_t is not None and axis_t is not None  # check_arity refused missing inputs
    out_t = node.outputs[0]
    check_type(node, x_t, ANY_TYPES)
    check_same_type(node, x_t, out_t)
    check_type(node, axis_t, ("INT32", "INT64"), "axis")
    if not same_qparams(x_t, out_t):
        raise node.unsupported("input and output quantization parameters differ")
    if x_t.type_name == "INT16" and legacy_qparams(x_t)[1] != 0:
        raise node.unsupported("int16 input needs zero point 0")
    if axis_t.data is not None:
        if axis_t.data.size != 1:
            raise node.unsupported(f"axis must have 1 element, got {axis_t.data.size}")
        axis = int(axis_t.data.reshape(-1)[0])
        in_shape = x_t.shape
        out_shape = expand_shape(in_shape, axis)

        def run(x, _axis=None):
            return x.reshape(out_shape if x.shape == in_shape else expand_shape(x.shape, axis))
        return run

    def run_dynamic(x, axis_v):
        if axis_v.size != 1:
            raise KernelError(f"axis must have 1 element, got {axis_v.size}")
        return x.reshape(expand_shape(x.shape, int(axis_v.reshape(-1)[0])))
    return run_dynamic
