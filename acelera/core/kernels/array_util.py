"""Helpers shared by the array kernel families (array_create, reverse, matrix_diag, cumsum,
dynamic_update_slice, where_unique, topk): node arity, output-size checks, shape-pass placeholders.

LiteRT keeps tensor dimensions in C `int`s; a dimension that does not fit, a negative one, or a
tensor larger than acelera's MAX_TENSOR_BYTES is refused with a KernelError before allocating.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from acelera.core import model as _model
from acelera.core.errors import KernelError
from acelera.core.kernels.registry import NodeContext
from acelera.core.model import Tensor

INT_MAX = 2**31 - 1

# Types with a fixed element size (LiteRT's GetSizeOfType), as acelera holds them (BFLOAT16 and
# FLOAT8 as their bit patterns).
SIZED = ("FLOAT32", "FLOAT16", "BFLOAT16", "FLOAT64", "INT8", "UINT8", "INT16", "UINT16", "INT32",
         "UINT32", "INT64", "UINT64", "BOOL", "COMPLEX64", "COMPLEX128", "FLOAT8_E4M3FN", "FLOAT8_E5M2")


def checked_shape(dims: Iterable, dtype: np.dtype, what: str = "output") -> tuple[int, ...]:
    """`dims` as a shape, or a KernelError when a dimension is negative or does not fit an int,
    or the tensor would exceed MAX_TENSOR_BYTES."""
    shape = tuple(int(d) for d in dims)
    for d in shape:
        if d < 0:
            raise KernelError(f"{what} dimensions must be >= 0, got {list(shape)}")
        if d > INT_MAX:
            raise KernelError(f"{what} dimension {d} does not fit int32")
    n = 1
    for d in shape:
        n *= d
    itemsize = 8 if np.dtype(dtype) == np.object_ else np.dtype(dtype).itemsize
    if n > INT_MAX or n * itemsize > _model.MAX_TENSOR_BYTES:
        raise KernelError(f"{what} shape {list(shape)} is too large "
                          f"(limit {_model.MAX_TENSOR_BYTES} bytes, set ACELERA_MAX_TENSOR_BYTES to raise it)")
    return shape


def placeholder(t: Tensor) -> np.ndarray:
    """Zeros (empty strings for STRING) of a tensor's declared shape and dtype: the shape pass's
    answer for a node whose value-dependent inputs are still placeholders."""
    if t.dtype == np.object_:
        return np.full(t.shape, b"", dtype=object)
    return np.zeros(t.shape, t.dtype)


def check_arity(node: NodeContext, n_in: int, n_out: int) -> None:
    """LiteRT's NumInputs/NumOutputs checks (absent optional inputs count as inputs there too)."""
    if len(node.inputs) != n_in or len(node.outputs) != n_out:
        raise node.unsupported(f"expects {n_in} inputs and {n_out} outputs, "
                               f"got {len(node.inputs)} and {len(node.outputs)}")
    for i, t in enumerate(node.inputs):
        if t is None:
            raise node.unsupported(f"input {i} is missing")


def same_type_output(node: NodeContext, src: Tensor, k: int = 0) -> np.dtype:
    """The numpy dtype of output k, which must have `src`'s type."""
    out = node.outputs[k]
    if out.type != src.type:
        raise node.unsupported(f"output type {out.type_name} differs from input type {src.type_name}")
    return out.dtype
