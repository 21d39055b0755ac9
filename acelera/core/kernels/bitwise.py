"""ATAN2, BITWISE_XOR and RIGHT_SHIFT reference kernels.

Mirrors tflite/kernels/atan2.cc, bitwise_xor.cc and right_shift.cc.

ATAN2 takes y and x of the same type and computes libm's atan2f per element for float32,
float16 and bfloat16 (the 16-bit types go through float32 and round to nearest even) and atan2
for float64. Here float32 angles are computed in float64 and rounded, within one ulp of atan2f
(numpy has no vectorized call into libm), and float64 ones with numpy's arctan2. LiteRT only
compares the ranks of y and x and then reads y's element count from x; this kernel requires
equal shapes. BITWISE_XOR and RIGHT_SHIFT work
on 8/16/32-bit signed and unsigned integers with numpy broadcasting; the shift amount is clamped
to [0, bits - 1] and signed values shift arithmetically.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import KernelError, ModelError
from acelera.core.kernels.registry import Kernel, NodeContext, register
from acelera.core.model import Tensor

_FLOAT32, _FLOAT16, _FLOAT64, _BFLOAT16 = 0, 1, 10, 18
_ATAN2_TYPES = ("FLOAT32", "FLOAT64", "FLOAT16", "BFLOAT16")
_INT_TYPES = ("UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32")


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 bits to nearest even; NaN stays a quiet NaN (Eigen's rule)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (u >> 16) | 0x0040, rounded).astype(np.uint16)


@register("ATAN2", max_version=1, dtypes=_ATAN2_TYPES)
def atan2(node: NodeContext) -> Kernel:
    if len(node.inputs) != 2 or len(node.outputs) != 1:
        raise ModelError("ATAN2 takes 2 inputs and 1 output")
    y_t, x_t, out_t = node.input(0), node.input(1), node.outputs[0]
    if y_t is None or x_t is None:
        raise ModelError("both inputs are required")
    if y_t.shape != x_t.shape:  # LiteRT compares only the ranks, then reads y's size from x
        raise ModelError(f"inputs have different shapes: {list(y_t.shape)} and {list(x_t.shape)}")
    if y_t.type != x_t.type or y_t.type != out_t.type:
        raise node.unsupported(f"input types {y_t.type_name}, {x_t.type_name} and output type "
                               f"{out_t.type_name} must be equal")
    if y_t.type_name not in _ATAN2_TYPES:
        raise node.unsupported(f"input type {y_t.type_name} is not supported")
    kind = y_t.type

    def run(y: np.ndarray, x: np.ndarray) -> np.ndarray:
        if y.shape != x.shape:
            raise KernelError(f"inputs have different shapes: {list(y.shape)} and {list(x.shape)}")
        if kind == _FLOAT64:
            return np.asarray(np.arctan2(y, x))
        if kind == _BFLOAT16:
            y, x = _bf16_to_f32(y), _bf16_to_f32(x)
        angle = np.asarray(np.arctan2(y.astype(np.float64), x.astype(np.float64)), np.float32)
        if kind == _BFLOAT16:
            return _f32_to_bf16(angle)
        return angle.astype(np.float16) if kind == _FLOAT16 else angle

    return run


def _int_operands(node: NodeContext) -> tuple[Tensor, Tensor, tuple[int, ...]]:
    if len(node.inputs) != 2 or len(node.outputs) != 1:
        raise ModelError(f"{node.op.name} takes 2 inputs and 1 output")
    a_t, b_t, out_t = node.input(0), node.input(1), node.outputs[0]
    if a_t is None or b_t is None:
        raise ModelError("both inputs are required")
    if a_t.type != b_t.type:
        raise node.unsupported(f"input types {a_t.type_name} and {b_t.type_name} differ")
    if a_t.type_name not in _INT_TYPES:
        raise node.unsupported(f"input type {a_t.type_name} is not supported")
    if out_t.type != a_t.type:
        raise node.unsupported(f"output type {out_t.type_name} differs from input type {a_t.type_name}")
    return a_t, b_t, _broadcast_shape(a_t.shape, b_t.shape)


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if a == b:
        return a
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        raise ModelError(f"shapes {list(a)} and {list(b)} cannot be broadcast") from None


@register("BITWISE_XOR", max_version=1, dtypes=_INT_TYPES)
def bitwise_xor(node: NodeContext) -> Kernel:
    _int_operands(node)

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(np.bitwise_xor(a, b))

    return run


@register("RIGHT_SHIFT", max_version=1, dtypes=_INT_TYPES)
def right_shift(node: NodeContext) -> Kernel:
    a_t, _, _ = _int_operands(node)
    dtype = a_t.dtype
    max_shift = dtype.itemsize * 8 - 1

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        shift = np.clip(b, 0, max_shift) if dtype.kind == "i" else np.minimum(b, max_shift)
        return np.asarray(np.right_shift(a, np.asarray(shift, dtype)))

    return run
