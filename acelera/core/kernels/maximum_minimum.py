"""MAXIMUM and MINIMUM with numpy broadcasting (tflite/kernels/maximum_minimum.cc,
internal/reference/maximum_minimum.h).

Both compare stored values (quantized operands are not rescaled) with `a > b ? a : b`
semantics, also for NaN; float16/bfloat16 values compare as floats and the result keeps the
chosen operand's bits.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import ModelError
from acelera.core.kernels.binary_common import (
    FLOATS,
    I8,
    I16,
    I32,
    I64,
    U8,
    binary_operands,
    bit_select,
    broadcast_shape,
    float_dtypes,
    scalar_safe,
)
from acelera.core.kernels.float_formats import to_f32
from acelera.core.kernels.registry import Kernel, NodeContext, register


def _half_operands(node: NodeContext) -> str | None:
    """The type name when both inputs are FLOAT16 or both BFLOAT16 (bfloat16 is held as uint16,
    so dtypes cannot tell it from UINT16), checking the output has it too; else None."""
    a, b = node.input(0), node.input(1)
    if a is None or a.type_name not in ("FLOAT16", "BFLOAT16"):
        return None
    if b is None or len(node.outputs) != 1:
        raise ModelError(f"{node.op.name}: expects 2 inputs and 1 output")
    if b.type != a.type:
        raise node.unsupported(f"input types {a.type_name} and {b.type_name} differ")
    if node.outputs[0].type != a.type:
        raise node.unsupported(f"output type {node.outputs[0].type_name} with input type {a.type_name} "
                               "is not supported")
    broadcast_shape(node, a.shape, b.shape)
    return a.type_name


def _max_min(node: NodeContext, greater: bool) -> Kernel:
    half = _half_operands(node)
    if half is not None:
        # `a > b ? a : b` on the values (as float), keeping the chosen operand's bits.
        better = np.greater if greater else np.less

        def run_half(x, y):
            with np.errstate(invalid="ignore"):
                return np.where(better(to_f32(x, half), to_f32(y, half)), x, y)
        return scalar_safe(run_half)
    a, _, _ = binary_operands(node, {U8, I8, I16, I32, I64} | float_dtypes())
    # Plain comparison of stored values (quantized operands are not rescaled), and
    # `a > b ? a : b` semantics for NaN.
    if a.dtype not in FLOATS:
        return scalar_safe(np.maximum if greater else np.minimum)
    ufunc = np.fmax if greater else np.fmin

    def run(x, y):
        # `x > y ? x : y`: a NaN x yields y (as fmax does), a NaN y yields NaN.
        r = ufunc(x, y)
        nan_y = np.isnan(y)
        if nan_y.any():
            r = bit_select(nan_y, np.broadcast_to(y, r.shape), r)
        return r
    return scalar_safe(run)


@register("MAXIMUM", max_version=4, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32",
                                           "INT64"))
def maximum(node: NodeContext) -> Kernel:
    return _max_min(node, True)


@register("MINIMUM", max_version=4, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32",
                                           "INT64"))
def minimum(node: NodeContext) -> Kernel:
    return _max_min(node, False)
