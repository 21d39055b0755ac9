"""STRIDED_SLICE and SLICE reference kernels (LiteRT `strided_slice.cc`, `slice.cc`).

Both compute, per axis, a start/stop/step exactly as LiteRT does (masks, negative indices,
clamping, negative strides, the ellipsis and new-axis expansion of BuildStridedSliceParams,
the v8 `offset` option where `end` is a size relative to `begin`) and return a numpy view.
They take every 8/16/32/64-bit type and STRING (object arrays of bytes); SLICE also INT4
(held unpacked, as LiteRT's SliceInt4 cuts the packed nibbles).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acelera.core.errors import KernelError, ModelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import check_same_type, check_type
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.kernels.reshape import SIZED_TYPES, declared_zeros, is_placeholder

INT32_MIN = -(1 << 31)


def _clamp(v: int, lo: int, hi: int) -> int:
    return hi if v > hi else lo if v < lo else v


def _bit(mask: int, i: int) -> bool:
    return bool((mask >> i) & 1)


@dataclass(frozen=True)
class SlicePlan:
    """How to cut one input shape: reshape to `effective`, index with `index`, reshape to `out`."""

    effective: tuple[int, ...]
    index: tuple[slice, ...]
    out: tuple[int, ...]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.shape != self.effective:
            x = x.reshape(self.effective)
        y = x[self.index]  # `index` ends with Ellipsis, so a full shrink still gives an array
        return y if y.shape == self.out else y.reshape(self.out)


def _axis_slice(start: int, stop: int, stride: int) -> tuple[slice, int]:
    """A Python slice walking start, start+stride, ... while before `stop` (C loop semantics)."""
    if stride > 0:
        count = 0 if stop <= start else (stop - start - 1) // stride + 1
    else:
        count = 0 if stop >= start else (start - stop - 1) // (-stride) + 1
    if count == 0:
        return slice(0, 0), 0
    last = start + (count - 1) * stride
    end = last + (1 if stride > 0 else -1)
    return slice(start, end if end >= 0 else None, stride), count


def strided_slice_plan(in_shape: tuple[int, ...], begin, end, strides, begin_mask: int, end_mask: int,
                       ellipsis_mask: int, new_axis_mask: int, shrink_axis_mask: int,
                       offset: bool) -> SlicePlan:
    """LiteRT's BuildStridedSliceParams + StartForAxis/EndForAxis + ResizeOutputTensor."""
    begin = [int(v) for v in begin]
    end = [int(v) for v in end]
    strides = [int(v) for v in strides]
    n = len(begin)
    if len(end) != n or len(strides) != n:
        raise ModelError("STRIDED_SLICE begin, end and strides must have the same length")
    if n > 31:
        raise ModelError("STRIDED_SLICE supports up to 31 indices")
    rank = len(in_shape)
    num_add_axis = sum(1 for i in range(n) if not _bit(ellipsis_mask, i) and _bit(new_axis_mask, i))
    eff_dims = rank + num_add_axis

    # Expand the ellipsis, and move the new-axis bits past it (LiteRT's effective masks).
    eff_ellipsis: set[int] = set()
    eff_new_axis: set[int] = set()
    ellipsis_start = eff_dims
    expanded = 0
    i = 0
    while i < eff_dims:
        if _bit(ellipsis_mask, i):
            ellipsis_start = i
            stop = max(i + 1, min(i + 1 + num_add_axis + rank - n, eff_dims))
            expanded = stop - ellipsis_start - 1
            eff_ellipsis.update(range(i, stop))
            i = stop
            continue
        if i - expanded >= 0 and _bit(new_axis_mask, i - expanded):
            eff_new_axis.add(i)
        i += 1

    effective = []
    axes = []  # (start, stop, stride, shrink, requested_size) per effective axis
    added_ellipsis = added_axes = 0
    for i in range(eff_dims):
        if i in eff_ellipsis:
            added_ellipsis = max(0, i - ellipsis_start)
            size = in_shape[i - added_axes]
            effective.append(size)
            axes.append((0, size, 1, False, None))
        elif i in eff_new_axis:
            effective.append(1)
            axes.append((0, 1, 1, False, None))
            added_axes += 1
        elif i >= n + expanded:
            size = in_shape[i - added_axes]
            effective.append(size)
            axes.append((0, size, 1, False, None))
        else:
            o = i - added_ellipsis
            size = in_shape[i - added_axes]
            effective.append(size)
            stride = strides[o]
            if stride == 0:
                raise ModelError("STRIDED_SLICE stride value has to be non-zero")
            if stride == INT32_MIN:
                raise ModelError("STRIDED_SLICE stride value INT32_MIN is not supported")
            shrink = _bit(shrink_axis_mask, o)
            # StartForAxis
            start = begin[o]
            if start < 0:
                start += size
            start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
            if _bit(begin_mask, o):
                start = 0 if stride > 0 else size - 1
            # EndForAxis
            if shrink:
                stop = start if start >= size else start + 1
            else:
                stop = end[o] + (start if offset else 0)
                if stop < 0:
                    stop += size
                stop = _clamp(stop, 0, size) if stride > 0 else _clamp(stop, -1, size - 1)
                if _bit(end_mask, o):
                    stop = size if stride > 0 else -1
            axes.append((start, stop, stride, shrink, end[o] if offset else None))

    index: list = []
    out = []
    for (start, stop, stride, shrink, requested), size in zip(axes, effective):
        if shrink:
            # LiteRT walks [start, start + 1); an index outside the axis has no element.
            if not 0 <= start < size:
                raise ModelError(f"STRIDED_SLICE shrink index {start} is out of range for size {size}")
            index.append(start)
            continue
        sl, count = _axis_slice(start, stop, stride)
        if requested is not None and _litert_count(requested, stride) != count:
            raise ModelError(f"STRIDED_SLICE offset: size {requested} from index {start} "
                             f"does not fit dimension {size}")
        index.append(sl)
        out.append(count)
    return SlicePlan(tuple(effective), tuple(index) + (Ellipsis,), tuple(out))


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _litert_count(extent: int, stride: int) -> int:
    """ResizeOutputTensor's element count for an extent walked with `stride`."""
    if (extent < 0) != (stride < 0):
        return 0
    if stride < 0:
        return _cdiv(extent + 1, stride) + 1
    return 0 if extent == 0 else (extent - 1) // stride + 1


_STRIDED_SLICE_TYPES = SIZED_TYPES | {"STRING"}
_SLICE_TYPES = SIZED_TYPES | {"STRING", "INT4"}


@register("STRIDED_SLICE", max_version=8, dtypes=tuple(sorted(_STRIDED_SLICE_TYPES)))
def strided_slice(node: NodeContext):
    check_arity(node, 4, 1)
    x_t, b_t, e_t, st_t = node.inputs
    assert x_t is not None and b_t is not None and e_t is not None and st_t is not None  # check_arity refused missing inputs
    check_type(node, x_t, _STRIDED_SLICE_TYPES)
    check_same_type(node, x_t, node.outputs[0])
    idx_t = (b_t, e_t, st_t)
    for t, what in zip(idx_t, ("begin", "end", "strides")):
        check_type(node, t, ("INT32",), what)
        if len(t.shape) != 1:
            raise ModelError(f"STRIDED_SLICE {what} must be a vector, got shape {list(t.shape)}")
    opts = node.options
    masks = tuple(int(opts.get(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                                   "new_axis_mask", "shrink_axis_mask"))
    offset = bool(opts.get("offset", False))

    def plan_for(shape, b, e, s):
        return strided_slice_plan(shape, b, e, s, *masks, offset)

    if all(t.data is not None for t in idx_t):
        b, e, s = (t.data for t in idx_t)
        return _constant_cut(x_t.shape, lambda shape: plan_for(shape, b, e, s))

    dynamic = [k for k, t in enumerate(idx_t) if t.data is None]
    plans = _PlanCache()

    def run_dynamic(x, b, e, s):
        key = (x.shape, b.tobytes(), e.tobytes(), s.tobytes())
        plan = plans.get(key)
        if plan is None:
            try:
                plan = plans.put(key, plan_for(x.shape, b, e, s))
            except ModelError as err:
                if any(is_placeholder((b, e, s)[k]) for k in dynamic):  # the executor's shape pass
                    return declared_zeros(node)
                raise KernelError(str(err)) from None
        return plan(x)
    return run_dynamic


def _constant_cut(shape: tuple[int, ...], plan_for):
    """The kernel of a slice whose indices are constant: the cut for the prepared input shape
    is one indexing expression; other shapes are planned once each."""
    plan = plan_for(shape)
    cache = {shape: plan}
    index, out = plan.index, plan.out

    def run_other(x):
        p = cache.get(x.shape)
        if p is None:
            try:
                p = cache[x.shape] = plan_for(x.shape)
            except ModelError as e:  # a shape met at invoke
                raise KernelError(str(e)) from None
        return p(x)

    if plan.effective != shape:
        return lambda x, *_: run_other(x)

    def run(x, *_):
        if x.shape != shape:
            return run_other(x)
        y = x[index]
        return y if y.shape == out else y.reshape(out)
    return run


class _PlanCache(dict):
    """Slice plans for index values read at run time, by input shape and index bytes (a
    loop reslicing the same tensors plans each cut once); bounded."""

    LIMIT = 64

    def put(self, key, plan: SlicePlan) -> SlicePlan:
        if len(self) >= self.LIMIT:
            self.clear()
        self[key] = plan
        return plan


# --- SLICE --------------------------------------------------------------------------------

def slice_plan(in_shape: tuple[int, ...], begin, size) -> SlicePlan:
    begin = [int(v) for v in np.ravel(begin)]
    size = [int(v) for v in np.ravel(size)]
    rank = len(in_shape)
    if len(begin) < rank or len(size) < rank:
        raise ModelError(f"SLICE needs {rank} begin and size values, got {len(begin)} and {len(size)}")
    index = []
    out = []
    for d, n in enumerate(in_shape):
        b, s = begin[d], size[d]
        if b < 0:
            raise ModelError(f"SLICE begin {b} is negative")
        if s < 0:
            if s != -1:
                raise ModelError(f"SLICE size {s} is invalid")
            s = n - b
            if s < 0:
                raise ModelError(f"SLICE begin {b} exceeds dimension {n}")
        elif b + s > n:
            raise ModelError(f"SLICE begin {b} + size {s} exceeds dimension {n}")
        index.append(slice(b, b + s))
        out.append(s)
    return SlicePlan(tuple(in_shape), tuple(index), tuple(out))


@register("SLICE", max_version=8, dtypes=tuple(sorted(_SLICE_TYPES)))
def slice_(node: NodeContext):
    check_arity(node, 3, 1)
    x_t, b_t, s_t = node.inputs[0], node.inputs[1], node.inputs[2]
    assert x_t is not None and b_t is not None and s_t is not None  # check_arity refused missing inputs
    check_type(node, x_t, _SLICE_TYPES)
    check_same_type(node, x_t, node.outputs[0])
    check_type(node, b_t, ("INT32", "INT64"), "begin")
    check_type(node, s_t, ("INT32", "INT64"), "size")
    if b_t.type != s_t.type:
        raise node.unsupported(f"begin type {b_t.type_name} differs from size type {s_t.type_name}")
    if len(b_t.shape) != 1 or len(s_t.shape) != 1 or b_t.shape != s_t.shape:
        raise ModelError(f"SLICE begin {list(b_t.shape)} and size {list(s_t.shape)} must be equal-length vectors")
    if b_t.data is not None and s_t.data is not None:
        b, s = b_t.data, s_t.data
        return _constant_cut(x_t.shape, lambda shape: slice_plan(shape, b, s))

    plans = _PlanCache()

    def run_dynamic(x, b, s):
        key = (x.shape, b.tobytes(), s.tobytes())
        plan = plans.get(key)
        if plan is None:
            try:
                plan = plans.put(key, slice_plan(x.shape, b, s))
            except ModelError as e:
                raise KernelError(str(e)) from None
        return plan(x)
    return run_dynamic
