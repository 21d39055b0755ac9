"""Comparisons, logical ops and SELECT: EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER,
GREATER_EQUAL, LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT, SELECT, SELECT_V2.

Follows tflite/kernels/{comparisons,logical,select}.cc:

* uint8/int8 comparisons always rescale both operands (TFLite's ComparisonWithScaling: offset,
  << 8, MultiplyByQuantizedMultiplier by the operand's own scale) and compare the results;
  int16 does so only for EQUAL/NOT_EQUAL with quantized inputs (LESS/GREATER & co compare the
  raw int16 values).
* float16 (every comparison) and bfloat16 (LESS, GREATER) compare as float values; STRING
  (EQUAL, NOT_EQUAL) compares the bytes of each item.
* SELECT (v1) accepts equal shapes, or a scalar / rank-1 condition over the first dimension;
  SELECT_V2 broadcasts all three operands.
"""
from __future__ import annotations

import operator

import numpy as np

from acelera.core.dtypes import TYPE_NAMES
from acelera.core.errors import ModelError
from acelera.core.kernels.binary_common import (
    F32,
    I8,
    I16,
    I32,
    I64,
    QUANT8,
    U8,
    Scratch,
    binary_operands,
    bit_select,
    blocked_into,
    broadcast_shape,
    gather16,
    is_quantized,
    lut8_kernel,
    qparams,
    scalar_safe,
    smaller_than_one_multiplier,
    table16,
)
from acelera.core.kernels.common import domain
from acelera.core.kernels.float_formats import to_f32
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.quant import multiply_by_quantized_multiplier_scalar as mbqm

BOOL = np.dtype(np.bool_)

# Python's operators on the items of 0-d operands give the ufuncs' results (ints exactly,
# float32 values widened exactly, NaN compares false) without a ufunc call's overhead.
_ITEM_OPS = {np.equal: operator.eq, np.not_equal: operator.ne, np.less: operator.lt,
             np.less_equal: operator.le, np.greater: operator.gt, np.greater_equal: operator.ge,
             np.logical_and: operator.and_, np.logical_or: operator.or_}


def _scalar_fast(node: NodeContext, ufunc, run):
    """`run`, with 0-d operands (a loop's counter against its bound) compared as Python items."""
    a, b = node.input(0), node.input(1)
    if a is None or b is None or a.shape != () or b.shape != ():
        return run
    op, asarray = _ITEM_OPS[ufunc], np.asarray

    def run_items(x, y):
        if x.ndim or y.ndim:
            return run(x, y)
        return asarray(op(x.item(), y.item()))
    return run_items


def _typed_operands(node: NodeContext, allowed: tuple[str, ...]) -> str | None:
    """For FLOAT16/BFLOAT16/STRING inputs (types numpy dtypes cannot tell apart from UINT16 or
    RESOURCE): the type name once both inputs have it, one of `allowed`, and the output is BOOL."""
    a, b = node.input(0), node.input(1)
    if a is None or a.type_name not in ("FLOAT16", "BFLOAT16", "STRING"):
        return None
    if b is None or len(node.outputs) != 1:
        raise ModelError(f"{node.op.name}: expects 2 inputs and 1 output")
    if a.type_name not in allowed:
        raise node.unsupported(f"input type {a.type_name} is not supported")
    if b.type != a.type:
        raise node.unsupported(f"input types {a.type_name} and {b.type_name} differ")
    if node.outputs[0].dtype != BOOL:
        raise node.unsupported(f"output type {node.outputs[0].type_name} is not supported (BOOL only)")
    broadcast_shape(node, a.shape, b.shape)
    return a.type_name


def _comparison(node: NodeContext, ufunc, *, allow_bool: bool, int16_scaled: bool,
                typed: tuple[str, ...] = ("FLOAT16",)):
    name = _typed_operands(node, typed)
    if name == "STRING":
        def run_strings(x, y):
            return np.asarray(ufunc(x, y), np.bool_)  # bytes items compare bytewise
        return scalar_safe(run_strings)
    if name is not None:
        def run_half(x, y):
            with np.errstate(invalid="ignore"):
                return ufunc(to_f32(x, name), to_f32(y, name))
        return scalar_safe(run_half)
    allowed = {F32, I16, I32, I64, U8, I8} | ({BOOL} if allow_bool else set())
    a, b, _ = binary_operands(node, allowed, out_dtype=np.bool_)
    dt = a.dtype
    scaled = dt in QUANT8 or (dt == I16 and int16_scaled and is_quantized(a))
    if not scaled:
        return _scalar_fast(node, ufunc, scalar_safe(ufunc))

    def scaler(t, what):
        scale, zp = qparams(node, t, what)
        # comparisons.cc's QuantizeMultiplier: SmallerThanOneExp below 1, GreaterThanOne above
        # (whose positive shift the SmallerThanOneExp multiply cannot apply; 1.0 aborts).
        m, sh = smaller_than_one_multiplier(node, scale, f"{what} scale")
        return lambda v: mbqm((v - zp) << 8, m, sh)

    if dt in QUANT8:
        f1 = scaler(a, "input 1")
        f2 = scaler(b, "input 2")
        return lut8_kernel(dt, lambda x, y: ufunc(f1(x), f2(y)), np.bool_)

    t1 = table16(scaler(a, "input 1")(domain(I16)))
    t2 = table16(scaler(b, "input 2")(domain(I16)))
    scratch = Scratch()

    def into(x, y, o):
        ufunc(gather16(t1, x, scratch, "1"), gather16(t2, y, scratch, "2"), out=o)
    return scalar_safe(blocked_into(into, np.bool_))


@register("EQUAL", max_version=5, dtypes=("FLOAT32", "FLOAT16", "INT16", "INT32", "INT64", "UINT8", "INT8",
                                         "BOOL", "STRING"))
def equal(node: NodeContext):
    return _comparison(node, np.equal, allow_bool=True, int16_scaled=True, typed=("FLOAT16", "STRING"))


@register("NOT_EQUAL", max_version=4, dtypes=("FLOAT32", "FLOAT16", "INT16", "INT32", "INT64", "UINT8", "INT8",
                                             "BOOL", "STRING"))
def not_equal(node: NodeContext):
    # LiteRT leaves the output unwritten for unquantized int16 NOT_EQUAL; we compute it.
    return _comparison(node, np.not_equal, allow_bool=True, int16_scaled=True, typed=("FLOAT16", "STRING"))


@register("LESS", max_version=3, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "INT16", "INT32", "INT64", "UINT8",
                                        "INT8"))
def less(node: NodeContext):
    return _comparison(node, np.less, allow_bool=False, int16_scaled=False, typed=("FLOAT16", "BFLOAT16"))


@register("LESS_EQUAL", max_version=2, dtypes=("FLOAT32", "FLOAT16", "INT16", "INT32", "INT64", "UINT8", "INT8"))
def less_equal(node: NodeContext):
    return _comparison(node, np.less_equal, allow_bool=False, int16_scaled=False)


@register("GREATER", max_version=2, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "INT16", "INT32", "INT64", "UINT8",
                                           "INT8"))
def greater(node: NodeContext):
    return _comparison(node, np.greater, allow_bool=False, int16_scaled=False, typed=("FLOAT16", "BFLOAT16"))


@register("GREATER_EQUAL", max_version=3, dtypes=("FLOAT32", "FLOAT16", "INT16", "INT32", "INT64", "UINT8",
                                                 "INT8"))
def greater_equal(node: NodeContext):
    return _comparison(node, np.greater_equal, allow_bool=False, int16_scaled=False)


# --- logical ops ---------------------------------------------------------------------------

def _logical(node: NodeContext, ufunc):
    binary_operands(node, {BOOL})
    return _scalar_fast(node, ufunc, scalar_safe(ufunc))


@register("LOGICAL_AND", max_version=1, dtypes=("BOOL",))
def logical_and(node: NodeContext):
    return _logical(node, np.logical_and)


@register("LOGICAL_OR", max_version=1, dtypes=("BOOL",))
def logical_or(node: NodeContext):
    return _logical(node, np.logical_or)


@register("LOGICAL_NOT", max_version=1, dtypes=("BOOL",))
def logical_not(node: NodeContext):
    x = node.input(0)
    if x is None or len(node.outputs) != 1:
        raise ModelError("LOGICAL_NOT: expects 1 input and 1 output")
    if x.dtype != BOOL or node.outputs[0].dtype != BOOL:
        raise node.unsupported(f"input type {x.type_name} is not supported (BOOL only)")

    def run(v):
        return np.asarray(np.logical_not(v))
    return run


# --- SELECT --------------------------------------------------------------------------------

_SELECT_UNSUPPORTED = {"STRING", "RESOURCE", "VARIANT", "INT4", "INT2", "UINT4", "COMPLEX128"}
# the type of the selected values (inputs 1 and 2)
SELECT_TYPES = tuple(sorted(set(TYPE_NAMES.values()) - _SELECT_UNSUPPORTED))


def _select(node: NodeContext, v2: bool):
    cond, x, y = node.input(0), node.input(1), node.input(2)
    if cond is None or x is None or y is None or len(node.outputs) != 1:
        raise ModelError(f"{node.op.name}: expects 3 inputs and 1 output")
    out = node.outputs[0]
    if cond.dtype != BOOL:
        raise node.unsupported(f"condition type {cond.type_name} is not supported (BOOL only)")
    if x.type != y.type:
        raise node.unsupported(f"input types {x.type_name} and {y.type_name} differ")
    if x.type_name in _SELECT_UNSUPPORTED:
        raise node.unsupported(f"input type {x.type_name} is not supported")
    if out.type != x.type:
        raise node.unsupported(f"output type {out.type_name} with input type {x.type_name} is not supported")

    sizes = [int(np.prod(s)) for s in (cond.shape, x.shape, y.shape, out.shape)]
    if all(n == 1 for n in sizes):
        # All single-element: LiteRT keeps the output's current shape.
        shape = tuple(out.shape)

        def run_single(c, a, b):
            v = a.reshape(-1)[:1] if c.reshape(-1)[0] else b.reshape(-1)[:1]
            return v.reshape(shape).copy()
        return run_single

    if cond.shape == x.shape == y.shape:
        def run_same(c, a, b):
            return bit_select(c, a, b)
        return run_same

    if v2:
        shape = broadcast_shape(node, cond.shape, x.shape, y.shape)
        if len(shape) > 8:
            raise node.unsupported(f"rank {len(shape)} exceeds 8")

        def run_broadcast(c, a, b):
            return bit_select(c, a, b)
        return run_broadcast

    # SELECT v1: scalar condition, or a rank-1 condition over the first dimension of x.
    scalar = len(cond.shape) == 0
    rank_one = len(cond.shape) == 1 and len(x.shape) >= 1 and cond.shape[0] == x.shape[0]
    if not (scalar or rank_one) or x.shape != y.shape:
        raise ModelError(f"SELECT: condition shape {cond.shape} does not match inputs {x.shape}, {y.shape}")
    if scalar:
        def run_scalar(c, a, b):
            return (a if c.reshape(-1)[0] else b).copy()
        return run_scalar
    tail = (1,) * (len(x.shape) - 1)

    def run_rank_one(c, a, b):
        return bit_select(c.reshape(c.shape + tail), a, b)
    return run_rank_one


@register("SELECT", max_version=4, dtypes=SELECT_TYPES)
def select(node: NodeContext):
    return _select(node, v2=False)


@register("SELECT_V2", max_version=2, dtypes=SELECT_TYPES)
def select_v2(node: NodeContext):
    return _select(node, v2=True)

