"""CONCATENATION, SPLIT, SPLIT_V, PACK and UNPACK reference kernels.

Semantics follow LiteRT's `concatenation.cc` (uint8 inputs whose scale or zero point differ
from the output's are requantized with the float formula of ConcatenationWithScaling; int8
inputs must share the output's parameters; int16 needs zero points 0 and is copied as is),
`split.cc`, `split_v.cc`, `pack.cc` and `unpack.cc`. SPLIT, SPLIT_V and UNPACK return views;
CONCATENATION copies each input a contiguous run at a time (see `copy_block`).

LiteRT refuses a fused activation on CONCATENATION; acelera applies RELU, RELU_N1_TO_1 and
RELU6 (clamping in float, or to the quantized activation range for quantized outputs).
While widening (registry.widening) all five also take FLOAT64.
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core.errors import KernelError, ModelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import NONE, RELU, RELU6, RELU_N1_TO_1, check_same_type, check_type, quantized_activation_range
from acelera.core.kernels.registry import NodeContext, float_type_names, is_float32, register
from acelera.core.kernels.reshape import copy_block, declared_zeros, is_placeholder, legacy_qparams, same_qparams
from acelera.core.quant import round_half_away

# FLOAT8 tensors (held as their uint8 bit patterns) are only moved: CONCATENATION v7, SPLIT v5,
# SPLIT_V v3, PACK v5 and UNPACK v6 (LiteRT takes them when built with
# TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS). So are BFLOAT16 (uint16 bit patterns) and INT4 (held
# unpacked, one int8 per value; LiteRT concatenates the packed nibbles).
FLOAT8 = frozenset({"FLOAT8_E4M3FN", "FLOAT8_E5M2"})
CONCAT_TYPES = frozenset({"FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32", "INT64", "BOOL",
                          "UINT32", "INT4"}) | FLOAT8
SPLIT_TYPES = frozenset({"FLOAT32", "UINT8", "INT8", "INT16", "INT32", "INT64"}) | FLOAT8
PACK_TYPES = frozenset({"FLOAT32", "UINT8", "INT8", "INT16", "INT32", "INT64", "UINT32"}) | FLOAT8
UNPACK_TYPES = frozenset({"FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32", "BOOL"}) | FLOAT8
_FLOAT_ACT = {RELU: (0.0, None), RELU6: (0.0, 6.0), RELU_N1_TO_1: (-1.0, 1.0)}


# --- CONCATENATION ------------------------------------------------------------------------

def _requant_table(in_scale: np.float32, in_zp: int, out_scale: np.float32, out_zp: int) -> np.ndarray:
    """ConcatenationWithScaling for one uint8 input as a 256-entry table, in float32 as the C++."""
    scale = np.float32(in_scale * (np.float32(1.0) / out_scale))
    bias = np.float32(np.float32(-in_zp) * scale)
    v = np.arange(256, dtype=np.float32) * scale + bias  # float32 multiply, then add
    r = round_half_away(v.astype(np.float64))  # std::round, exact on float32 values in float64
    return np.clip(r + out_zp, 0, 255).astype(np.uint8)


@register("CONCATENATION", max_version=7, dtypes=tuple(sorted(CONCAT_TYPES)))
def concatenation(node: NodeContext):
    ins = [t for t in node.inputs if t is not None]
    out_t = node.outputs[0]
    if not ins or len(ins) != len(node.inputs):
        raise ModelError("CONCATENATION needs at least one input and no absent inputs")
    t0 = ins[0]
    check_type(node, t0, CONCAT_TYPES.union(float_type_names()))
    check_same_type(node, t0, out_t)
    for t in ins[1:]:
        if t.type != t0.type:
            raise node.unsupported(f"input types {t0.type_name} and {t.type_name} differ")
    rank = len(t0.shape)
    axis = int(node.options.get("axis", 0))
    if axis < 0:
        axis += rank
    act = int(node.options.get("fused_activation_function", NONE))
    scalars = rank == 0
    if scalars:
        # LiteRT concatenates scalars (into a vector) only when they are all constant.
        if axis != 0 or any(t.data is None for t in ins) or any(len(t.shape) for t in ins):
            raise ModelError("CONCATENATION of scalars needs constant inputs and axis 0")
        if t0.type_name == "INT4":
            raise ModelError("CONCATENATION of INT4 scalars is not supported")
    elif not 0 <= axis < rank:
        raise ModelError(f"CONCATENATION axis {node.options.get('axis', 0)} is out of range for rank {rank}")
    for t in ins[1:]:
        if len(t.shape) != rank:
            raise ModelError(f"CONCATENATION inputs have ranks {rank} and {len(t.shape)}")
    if not scalars:
        _check_concat_shapes([t.shape for t in ins], axis)

    name = t0.type_name
    fixes: list[np.ndarray | None] = [None] * len(ins)  # per-input requantization table (uint8) or None to copy
    if name == "INT8":
        if any(not same_qparams(t, out_t) for t in ins):
            raise node.unsupported("int8 inputs need the output's scale and zero point")
    elif name == "INT16":
        if any(legacy_qparams(t)[1] for t in ins) or legacy_qparams(out_t)[1]:
            raise node.unsupported("int16 tensors need zero point 0")
    elif name == "UINT8":
        o_s, o_z = legacy_qparams(out_t)
        for k, t in enumerate(ins):
            s, z = legacy_qparams(t)
            if not (s == o_s and z == o_z):
                if o_s == 0:
                    raise node.unsupported("uint8 inputs need requantizing to an output without a scale")
                fixes[k] = _requant_table(s, z, o_s, o_z)

    clamp = None
    if act != NONE:
        if act not in _FLOAT_ACT:
            raise node.unsupported(f"fused activation {act}")
        if name == "FLOAT16" or is_float32(t0):
            clamp = _FLOAT_ACT[act]
        elif name in ("UINT8", "INT8", "INT16") and out_t.quantization.is_set:
            o_s, o_z = legacy_qparams(out_t)
            clamp = quantized_activation_range(act, float(o_s), o_z, out_t.dtype)
        else:
            raise node.unsupported(f"fused activation on {name} outputs")
    any_fix = any(f is not None for f in fixes)

    out_dtype = out_t.dtype
    lead = (0,) * axis
    trail = (0,) * (rank - axis - 1)
    # input shapes -> whether the output has few contiguous runs (numpy's own loop is fastest)
    plans: dict[tuple, bool] = {}
    if not scalars:
        plans[tuple(tuple(t.shape) for t in ins)] = math.prod(t0.shape[:axis]) < 512
    concatenate = np.concatenate

    def plan(key: tuple) -> bool:
        try:
            _check_concat_shapes(key, axis)
        except ModelError as e:
            raise KernelError(str(e)) from None
        if len(plans) >= 64:  # shapes that keep changing: bound the memo
            plans.clear()
        few = plans[key] = math.prod(key[0][:axis]) < 512
        return few

    def run(*xs):
        if scalars:
            if any(x.size != 1 for x in xs):
                raise KernelError(f"CONCATENATION of scalars got shapes {[list(x.shape) for x in xs]}")
            xs = [x.reshape(()) for x in xs]
            few = False
        else:
            key = tuple([x.shape for x in xs])
            few = plans.get(key)
            if few is None:
                few = plan(key)
        if any_fix:
            xs = [x if f is None else np.take(f, x) for x, f in zip(xs, fixes)]
        if scalars:
            out = np.stack(xs)
        elif len(xs) == 1:
            out = xs[0] if clamp is None else xs[0].copy()
        elif few:
            out = concatenate(xs, axis=axis)
        else:
            shape = list(xs[0].shape)
            total = 0
            for x in xs:
                total += x.shape[axis]
            shape[axis] = total
            out = np.empty(shape, out_dtype)
            pos = 0
            for x in xs:
                copy_block(out, x, lead + (pos,) + trail)
                pos += x.shape[axis]
        if clamp is not None:
            np.clip(out, clamp[0], clamp[1], out=out)
        return out

    if scalars or any_fix or clamp is not None or axis or len(ins) < 2:
        return run

    def run_rows(*xs):
        """Along the first axis numpy's own loop is always used: no per-shape plan."""
        try:
            return concatenate(xs)
        except ValueError:  # inputs that do not match: run's KernelError
            return run(*xs)
    return run_rows


def _check_concat_shapes(shapes, axis: int) -> None:
    """concatenation.cc's Prepare: every input has the first one's rank and dimensions outside
    `axis`."""
    s0 = tuple(shapes[0])
    for s in shapes[1:]:
        s = tuple(s)
        if len(s) != len(s0) or s[:axis] + s[axis + 1:] != s0[:axis] + s0[axis + 1:]:
            raise ModelError(f"CONCATENATION inputs of shapes {[list(v) for v in shapes]} "
                             f"do not match outside axis {axis}")


# --- SPLIT / SPLIT_V ----------------------------------------------------------------------

def _axis_value(v, rank: int) -> int:
    v = np.ravel(v)
    if v.size < 1:
        raise ModelError("split axis tensor is empty")
    a = int(v[0])
    if a < 0:
        a += rank
    if not 0 <= a < rank:
        raise ModelError(f"split axis {int(v[0])} is out of range for rank {rank}")
    return a


def _split_even(shape: tuple[int, ...], axis: int, num: int) -> list[int]:
    n = shape[axis]
    if num == 0 or n % num:
        raise ModelError(f"cannot split dimension {n} evenly into {num} parts")
    return [n // num] * num


def _split_sizes(shape: tuple[int, ...], axis: int, sizes) -> list[int]:
    sizes = [int(s) for s in np.ravel(sizes)]
    n = shape[axis]
    if sizes.count(-1) > 1:
        raise ModelError("size_splits contains more than one -1")
    total = sum(s for s in sizes if s != -1)
    if -1 in sizes:
        if total > n:
            raise ModelError(f"size_splits {sizes} sum past the dimension {n}")
        sizes[sizes.index(-1)] = n - total
    elif total != n:
        raise ModelError(f"size_splits {sizes} must sum to the dimension {n}")
    if any(s < 0 for s in sizes):
        raise ModelError(f"size_splits {sizes} has a negative size")
    return sizes


def _at_invoke(plan, *args):
    """A plan computed from shapes or values met at invoke: its ModelError as a KernelError."""
    try:
        return plan(*args)
    except ModelError as e:
        raise KernelError(str(e)) from None


def _cuts(axis: int, sizes: list[int]) -> tuple[tuple, ...]:
    """The index of each part of a split along `axis` into `sizes`."""
    lead = (slice(None),) * axis
    out = []
    pos = 0
    for s in sizes:
        out.append(lead + (slice(pos, pos + s),))
        pos += s
    return tuple(out)


def _cut(x: np.ndarray, axis: int, sizes: list[int]) -> tuple[np.ndarray, ...]:
    return tuple([x[i] for i in _cuts(axis, sizes)])


class _Cuts(dict):
    """input shape -> the index of each part, for a split whose axis and sizes are constant;
    `plan(shape)` computes them (a ModelError on a bad shape)."""

    def __init__(self, plan) -> None:
        super().__init__()
        self.plan = plan

    def __missing__(self, shape: tuple) -> tuple[tuple, ...]:
        idx = _at_invoke(self.plan, shape)
        if len(self) >= 64:  # shapes that keep changing: bound the memo
            self.clear()
        self[shape] = idx
        return idx


def _check_outputs(node: NodeContext, x_t, allowed) -> None:
    check_type(node, x_t, allowed.union(float_type_names()))
    for o in node.outputs:
        check_same_type(node, x_t, o)


@register("SPLIT", max_version=5, dtypes=tuple(sorted(SPLIT_TYPES)))
def split(node: NodeContext):
    check_arity(node, 2, len(node.outputs))
    axis_t, x_t = node.inputs[0], node.inputs[1]
    assert axis_t is not None and x_t is not None  # check_arity refused missing inputs
    _check_outputs(node, x_t, SPLIT_TYPES)
    check_type(node, axis_t, ("INT32",), "axis")
    num = int(node.options.get("num_splits", 0))
    if num != len(node.outputs):
        raise ModelError(f"SPLIT num_splits {num} but the node has {len(node.outputs)} outputs")
    if axis_t.data is not None:
        axis = _axis_value(axis_t.data, len(x_t.shape))
        cache = _Cuts(lambda shape: _cuts(axis, _split_even(shape, axis, num)))
        cache[tuple(x_t.shape)] = _cuts(axis, _split_even(x_t.shape, axis, num))

        def run(_a, x):
            return tuple([x[i] for i in cache[x.shape]])
        return run

    def run_dynamic(a, x):
        try:
            ax = _axis_value(a, x.ndim)
            return _cut(x, ax, _split_even(x.shape, ax, num))
        except ModelError as e:
            if is_placeholder(a):  # the executor's shape pass
                return tuple(declared_zeros(node, k) for k in range(num))
            raise KernelError(str(e)) from None
    return run_dynamic


@register("SPLIT_V", max_version=3, dtypes=tuple(sorted(SPLIT_TYPES)))
def split_v(node: NodeContext):
    check_arity(node, 3, len(node.outputs))
    x_t, sizes_t, axis_t = node.inputs[0], node.inputs[1], node.inputs[2]
    assert x_t is not None and sizes_t is not None and axis_t is not None  # check_arity refused missing inputs
    _check_outputs(node, x_t, SPLIT_TYPES)
    check_type(node, sizes_t, ("INT32", "INT64"), "size_splits")
    check_type(node, axis_t, ("INT32",), "axis")
    num = int(node.options.get("num_splits", 0))
    if num != len(node.outputs):
        raise ModelError(f"SPLIT_V num_splits {num} but the node has {len(node.outputs)} outputs")
    if len(sizes_t.shape) != 1 or sizes_t.shape[0] != num:
        raise ModelError(f"SPLIT_V size_splits of shape {list(sizes_t.shape)} for {num} outputs")
    if axis_t.data is not None and sizes_t.data is not None:
        axis = _axis_value(axis_t.data, len(x_t.shape))
        sizes_c = sizes_t.data
        cache = _Cuts(lambda shape: _cuts(axis, _split_sizes(shape, axis, sizes_c)))
        cache[tuple(x_t.shape)] = _cuts(axis, _split_sizes(x_t.shape, axis, sizes_c))

        def run(x, *_):
            return tuple([x[i] for i in cache[x.shape]])
        return run

    dynamic = [k for k, t in enumerate((sizes_t, axis_t)) if t.data is None]

    def run_dynamic(x, s, a):
        try:
            ax = _axis_value(a, x.ndim)
            return _cut(x, ax, _split_sizes(x.shape, ax, s))
        except ModelError as e:
            if any(is_placeholder((s, a)[k]) for k in dynamic):  # the executor's shape pass
                return tuple(declared_zeros(node, k) for k in range(num))
            raise KernelError(str(e)) from None
    return run_dynamic


# --- PACK / UNPACK ------------------------------------------------------------------------

@register("PACK", max_version=5, dtypes=tuple(sorted(PACK_TYPES)))
def pack(node: NodeContext):
    ins = [t for t in node.inputs if t is not None]
    out_t = node.outputs[0]
    count = int(node.options.get("values_count", 0))
    if count != len(node.inputs) or count < 1 or len(ins) != len(node.inputs):
        raise ModelError(f"PACK values_count {count} but the node has {len(node.inputs)} inputs")
    t0 = ins[0]
    check_type(node, t0, PACK_TYPES.union(float_type_names()))
    check_same_type(node, t0, out_t)
    rank = len(t0.shape)
    axis = int(node.options.get("axis", 0))
    if axis < 0:
        axis += rank + 1
    if not 0 <= axis <= rank:
        raise ModelError(f"PACK axis {node.options.get('axis', 0)} is out of range for rank {rank}")
    for t in ins:
        if t.type != t0.type:
            raise node.unsupported(f"input types {t0.type_name} and {t.type_name} differ")
        if t.shape != t0.shape:
            raise ModelError(f"PACK inputs have shapes {list(t0.shape)} and {list(t.shape)}")
        if not same_qparams(t, out_t):
            raise node.unsupported("inputs need the output's scale and zero point")

    def run(*xs):
        if any(x.shape != xs[0].shape for x in xs[1:]):
            raise KernelError(f"PACK inputs have shapes {[list(x.shape) for x in xs]}")
        return np.stack(xs, axis=axis)
    return run


@register("UNPACK", max_version=6, dtypes=tuple(sorted(UNPACK_TYPES)))
def unpack(node: NodeContext):
    check_arity(node, 1, len(node.outputs))
    x_t = node.inputs[0]
    assert x_t is not None  # check_arity refused missing inputs
    _check_outputs(node, x_t, UNPACK_TYPES)
    rank = len(x_t.shape)
    num = int(node.options.get("num", 0))
    axis = int(node.options.get("axis", 0))
    if axis < 0:
        axis += rank
    if not 0 <= axis < rank:
        raise ModelError(f"UNPACK axis {node.options.get('axis', 0)} is out of range for rank {rank}")
    if int(np.prod(x_t.shape)) == 0:
        raise ModelError("UNPACK input has no elements")
    if num != x_t.shape[axis] or num != len(node.outputs):
        raise ModelError(f"UNPACK num {num} but dimension {axis} is {x_t.shape[axis]} "
                         f"and the node has {len(node.outputs)} outputs")
    for o in node.outputs:
        if not same_qparams(x_t, o):
            raise node.unsupported("outputs need the input's scale and zero point")
    lead = (slice(None),) * axis

    def run(x):
        if x.ndim != rank or x.shape[axis] != num:
            raise KernelError(f"UNPACK num {num} but the input has shape {list(x.shape)} (axis {axis})")
        return tuple(x[lead + (i, Ellipsis)] for i in range(num))
    return run
