"""ADD_N, FLOOR_DIV, FLOOR_MOD and SIGN (tflite/kernels/{add_n,floor_div,floor_mod,sign}.cc).

* ADD_N: float32 / int32 inputs of one shape (no broadcasting), summed in input order.
* FLOOR_DIV: the floor of the quotient computed in double, cast back (float32, int8, int16,
  int32), with broadcasting.
* FLOOR_MOD: the remainder of the truncating division (fmod for float32) moved to the
  divisor's sign when non-zero (float32, int8, int16, int32, int64), with broadcasting.
* SIGN: (0 < x) - (x < 0) for float32, float64 and int32; a float NaN passes through (LiteRT's sign).

A divisor of 0 fails LiteRT's invoke (FLOOR_DIV: any type; FLOOR_MOD: integers) and fails
acelera's the same way (KernelError "Division by 0"), except in allocate_tensors' shape pass on
placeholder zeros; a constant integer zero divisor makes the node unsupported. While widening
(registry.widening) the float32 paths of ADD_N, FLOOR_DIV and FLOOR_MOD take FLOAT64.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import ModelError
from acelera.core.kernels.binary_common import FLOATS, I8, I16, I32, I64, binary_operands, float_dtypes, scalar_safe
from acelera.core.kernels.registry import NodeContext, check_divisor, register
from acelera.core.kernels.unary_common import ndarray_kernel, unary_io


@register("ADD_N", max_version=1, dtypes=("FLOAT32", "INT32"))
def add_n(node: NodeContext):
    ins = [t for t in node.inputs if t is not None]
    if not ins or len(ins) != len(node.inputs) or len(node.outputs) != 1:
        raise ModelError("ADD_N: expects at least 1 input and 1 output")
    dt = ins[0].dtype
    if dt not in float_dtypes() | {I32}:
        raise node.unsupported(f"input type {ins[0].type_name} is not supported")
    if any(t.dtype != dt for t in ins) or node.outputs[0].dtype != dt:
        raise node.unsupported("inputs and output must have one type")
    if any(tuple(t.shape) != tuple(ins[0].shape) for t in ins):
        raise ModelError("ADD_N: inputs must have one shape")

    def run(*xs):
        out = np.array(xs[0], dt, copy=True)
        with np.errstate(over="ignore"):
            for x in xs[1:]:
                out += x
        return out
    return run


def _int_operands(node: NodeContext, allowed):
    a, b, _ = binary_operands(node, allowed | float_dtypes())
    if a.dtype not in FLOATS and b.data is not None and np.any(b.data == 0):
        raise node.unsupported("division by zero (constant divisor holds zero)")
    return a


@register("FLOOR_DIV", max_version=3, dtypes=("FLOAT32", "INT8", "INT16", "INT32"))
def floor_div(node: NodeContext):
    dt = _int_operands(node, {I8, I16, I32}).dtype
    if dt in FLOATS:
        def run_f(x, y):
            check_divisor(y, 0, "Division by 0")
            with np.errstate(all="ignore"):
                return np.floor(x.astype(np.float64) / y.astype(np.float64)).astype(dt)
        return scalar_safe(run_f)

    def run_i(x, y):
        check_divisor(y, 0, "Division by 0")
        with np.errstate(all="ignore"):
            return np.floor_divide(x, y).astype(dt)  # exact: the double quotient of ints < 2**31
    return scalar_safe(run_i)


@register("FLOOR_MOD", max_version=2, dtypes=("FLOAT32", "INT8", "INT16", "INT32", "INT64"))
def floor_mod(node: NodeContext):
    dt = _int_operands(node, {I8, I16, I32, I64}).dtype
    if dt in FLOATS:
        def run_f(x, y):
            with np.errstate(all="ignore"):
                m = np.fmod(x, y)
                return np.where((m != 0) & ((y < 0) != (m < 0)), m + y, m).astype(dt)
        return scalar_safe(run_f)

    def run_i(x, y):
        check_divisor(y, 0, "Division by 0")
        with np.errstate(all="ignore"):
            return np.mod(x, y)  # numpy's integer mod has the divisor's sign: TFLite's FloorMod
    return scalar_safe(run_i)


@register("SIGN", max_version=2, dtypes=("FLOAT32", "FLOAT64", "INT32"))
@ndarray_kernel
def sign(node: NodeContext):
    x, _ = unary_io(node, (np.float32, np.float64, np.int32))

    def run(v):
        r = (v > 0).astype(x.dtype) - (v < 0).astype(x.dtype)
        return np.where(np.isnan(v), v, r) if x.dtype.kind == "f" else r
    return run
