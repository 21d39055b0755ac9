"""PAD, PADV2 and MIRROR_PAD reference kernels (LiteRT `pad.cc`, `mirror_pad.cc`).

PAD/PADV2 fill with the constant value (input 2), or with 0 -- for quantized uint8 and for
quantized int8/int16 the output zero point, as LiteRT's EvalInt does. The output is filled in
one memset-like pass and the input copied into the interior a contiguous run at a time (see
`copy_block`). MIRROR_PAD gathers rows per padded axis (REFLECT excludes the edge,
SYMMETRIC repeats it). While widening (registry.widening) PAD/PADV2 also take FLOAT64.
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core.errors import KernelError, ModelError
from acelera.core.kernels.array_util import check_arity, checked_shape
from acelera.core.kernels.common import check_same_type, check_type
from acelera.core.kernels.registry import NodeContext, float_type_names, register
from acelera.core.kernels.reshape import SIZED_TYPES, copy_block, legacy_qparams, same_qparams

# FLOAT8 (v6; LiteRT's TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS build) pads uint8 bit patterns,
# BFLOAT16 uint16 ones (0 is +0.0 in both).
PAD_TYPES = frozenset({"FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32", "INT64", "BOOL",
                       "FLOAT8_E4M3FN", "FLOAT8_E5M2"})
PADDING_TYPES = ("INT32", "INT64", "INT8", "INT16", "BOOL")
MAX_RANK = 5  # reference_ops::PadKernelMaxDimensionCount()
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
REFLECT, SYMMETRIC = 0, 1


def read_paddings(p: np.ndarray, rank: int) -> list[tuple[int, int]]:
    """Validated [(before, after)] per axis from a (rank, 2) paddings array."""
    p = np.asarray(p)
    if p.ndim != 2 or p.shape[1] != 2 or p.shape[0] != rank:
        raise ModelError(f"paddings of shape {list(p.shape)} do not match input rank {rank} (need [{rank}, 2])")
    vals = p.astype(np.int64)
    if vals.size and (vals.min() < INT32_MIN or vals.max() > INT32_MAX):
        raise ModelError("paddings must lie between INT32_MIN and INT32_MAX")
    if vals.size and vals.min() < 0:
        raise ModelError(f"paddings must be >= 0, got {vals.tolist()}")
    return [(int(a), int(b)) for a, b in vals]


def _at_invoke(plan):
    """plan(), where a ModelError (paddings or shapes met at invoke) becomes a KernelError."""
    try:
        return plan()
    except ModelError as e:
        raise KernelError(str(e)) from None


class _ConstPad:
    """Precomputed output shape and interior offsets for one input shape and paddings matrix."""

    def __init__(self, in_shape: tuple[int, ...], pads: list[tuple[int, int]]):
        self.identity = not any(a or b for a, b in pads)
        self.out_shape = tuple(n + a + b for n, (a, b) in zip(in_shape, pads))
        if not self.identity:
            checked_shape(self.out_shape, np.dtype(np.float64))  # refuse a huge output before allocating
        self.starts = tuple(a for a, _ in pads)

    def __call__(self, x: np.ndarray, value) -> np.ndarray:
        if self.identity:
            return x
        # A memset-speed fill of everything beats filling thin border slabs row by row.
        out = np.full(self.out_shape, value, x.dtype)
        copy_block(out, x, self.starts)
        return out


def _pad_prepare(node: NodeContext):
    if len(node.inputs) not in (2, 3) or len(node.outputs) != 1 or None in node.inputs[:2]:
        # pad.cc's ValidateNodeArity (PAD and PADV2 alike); the constant value is optional
        raise node.unsupported(f"expects input, paddings and an optional constant value and 1 output, "
                               f"got {len(node.inputs)} inputs and {len(node.outputs)} outputs")
    x_t, pad_t = node.inputs[0], node.inputs[1]
    assert x_t is not None and pad_t is not None  # refused above
    out_t = node.outputs[0]
    c_t = node.input(2)
    check_type(node, x_t, PAD_TYPES.union(float_type_names()))
    check_same_type(node, x_t, out_t)
    check_type(node, pad_t, PADDING_TYPES, "paddings")
    rank = len(x_t.shape)
    if rank > MAX_RANK:
        raise node.unsupported(f"rank {rank} input (at most {MAX_RANK})")
    if c_t is not None:
        if c_t.type != x_t.type:
            raise node.unsupported(f"constant value type {c_t.type_name} differs from input type {x_t.type_name}")
        if int(np.prod(c_t.shape)) != 1:
            raise ModelError(f"constant value must have 1 element, got shape {list(c_t.shape)}")
    dtype = x_t.dtype
    # LiteRT's EvalInt: uint8 always, int8/int16 when the input is quantized.
    quantized = x_t.type_name == "UINT8" or (x_t.type_name in ("INT8", "INT16") and x_t.quantization.is_set)
    if c_t is None:
        fixed_value = dtype.type(0)
        if quantized:
            out_zp = legacy_qparams(out_t)[1]
            info = np.iinfo(dtype)
            if not info.min <= out_zp <= info.max:
                raise node.unsupported(f"output zero point {out_zp} is outside the {x_t.type_name} range")
            fixed_value = dtype.type(out_zp)
    elif quantized and not same_qparams(c_t, out_t):
        raise node.unsupported("constant value and output quantization parameters differ")
    elif c_t.data is not None:
        fixed_value = c_t.data.reshape(-1)[0]
    else:
        fixed_value = None  # read from the input at run time

    cache: dict = {}
    if pad_t.data is not None:
        pads = read_paddings(pad_t.data, rank)
        cache[x_t.shape] = _ConstPad(x_t.shape, pads)

        def layout(x, _p):
            plan = cache.get(x.shape)
            if plan is None:
                plan = cache[x.shape] = _at_invoke(lambda: _ConstPad(x.shape, read_paddings(pad_t.data, x.ndim)))
            return plan
    else:
        def layout(x, p):
            return _at_invoke(lambda: _ConstPad(x.shape, read_paddings(p, x.ndim)))

    def run(x, p, c=None):
        value = fixed_value if fixed_value is not None else c.reshape(-1)[0]
        return layout(x, p)(x, value)
    return run


@register("PAD", max_version=6, dtypes=tuple(sorted(PAD_TYPES)))
def pad(node: NodeContext):
    return _pad_prepare(node)


@register("PADV2", max_version=6, dtypes=tuple(sorted(PAD_TYPES)))
def padv2(node: NodeContext):
    return _pad_prepare(node)


# --- MIRROR_PAD ---------------------------------------------------------------------------

def mirror_indices(n: int, before: int, after: int, offset: int) -> np.ndarray:
    """Source index along one axis for each output position (offset 1 REFLECT, 0 SYMMETRIC)."""
    if before > n - offset or after > n - offset:
        raise ModelError(f"MIRROR_PAD paddings ({before}, {after}) exceed dimension {n} minus mode offset {offset}")
    left = np.arange(before + offset - 1, offset - 1, -1)
    right = np.arange(n - 1 - offset, n - 1 - offset - after, -1)
    return np.concatenate([left, np.arange(n), right]).astype(np.intp)


class _MirrorPlan:
    def __init__(self, in_shape: tuple, pads: list, offset: int) -> None:
        idx = [mirror_indices(n, a, b, offset) for n, (a, b) in zip(in_shape, pads)]  # validates every axis
        self.steps = [(axis, i) for axis, (i, (a, b)) in enumerate(zip(idx, pads)) if a or b]
        self.flat: np.ndarray | None = None  # small outputs: one take of the flat input
        out_shape = tuple(i.size for i in idx)
        if len(self.steps) > 1 and math.prod(out_shape) <= 1 << 14:
            self.flat = np.ravel_multi_index(np.ix_(*idx), tuple(in_shape)).astype(np.intp).reshape(-1)
            self.in_shape, self.out_shape = tuple(in_shape), out_shape

    def __call__(self, x):
        if self.flat is not None and x.shape == self.in_shape:
            return x.reshape(-1).take(self.flat).reshape(self.out_shape)
        for axis, idx in self.steps:
            x = x.take(idx, axis=axis)
        return x


@register("MIRROR_PAD", max_version=3, dtypes=tuple(sorted(SIZED_TYPES)))
def mirror_pad(node: NodeContext):
    check_arity(node, 2, 1)
    x_t, pad_t = node.inputs[0], node.inputs[1]
    assert x_t is not None and pad_t is not None  # check_arity refused missing inputs
    out_t = node.outputs[0]
    check_type(node, x_t, SIZED_TYPES)
    check_same_type(node, x_t, out_t)
    check_type(node, pad_t, ("INT32", "INT64"), "paddings")
    mode = int(node.options.get("mode", REFLECT))
    if mode not in (REFLECT, SYMMETRIC):
        raise node.unsupported(f"mirror padding mode {mode}")
    offset = 1 if mode == REFLECT else 0
    if x_t.type_name in ("UINT8", "INT8", "INT16") and not same_qparams(x_t, out_t):
        raise node.unsupported("input and output quantization parameters differ")
    if x_t.type_name == "INT16" and (legacy_qparams(x_t)[1] or legacy_qparams(out_t)[1]):
        raise node.unsupported("int16 tensors need zero point 0")

    if pad_t.data is not None:
        cache = {x_t.shape: _MirrorPlan(x_t.shape, read_paddings(pad_t.data, len(x_t.shape)), offset)}

        def run(x, _p):
            plan = cache.get(x.shape)
            if plan is None:
                plan = cache[x.shape] = _at_invoke(lambda: _MirrorPlan(x.shape, read_paddings(pad_t.data, x.ndim),
                                                                       offset))
            return plan(x)
        return run

    def run_dynamic(x, p):
        return _at_invoke(lambda: _MirrorPlan(x.shape, read_paddings(p, x.ndim), offset))(x)
    return run_dynamic
