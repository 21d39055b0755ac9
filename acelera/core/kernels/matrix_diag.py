"""MATRIX_DIAG and MATRIX_SET_DIAG reference kernels (tflite/kernels/matrix_diag.cc,
matrix_set_diag.cc).

Both write raw values: MATRIX_DIAG's off-diagonal zeros are the stored value 0 even for a
quantized tensor with a nonzero zero point, as in LiteRT.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.array_util import check_arity, checked_shape, same_type_output
from acelera.core.kernels.registry import Kernel, NodeContext, register

# LiteRT's FillDiagHelper has these cases; any other type falls into its float case, which
# reads 4-byte elements, so only FLOAT32 is safe there.
_TYPES = ("FLOAT32", "INT64", "INT32", "INT16", "INT8", "UINT8")


@register("MATRIX_DIAG", max_version=1, dtypes=_TYPES)
def matrix_diag(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    x_t = node.input(0)
    assert x_t is not None  # check_arity refused missing inputs
    if len(x_t.shape) < 1:
        raise node.unsupported("input must have rank >= 1")
    if x_t.type_name not in _TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    dt = same_type_output(node, x_t)

    def run(x: np.ndarray) -> np.ndarray:
        n = x.shape[-1]
        out = np.zeros(checked_shape(x.shape + (n,), dt), dt)
        if out.size:
            out.reshape(-1, n * n)[:, ::n + 1] = x.reshape(-1, n)
        return out

    return run


@register("MATRIX_SET_DIAG", max_version=1, dtypes=_TYPES)
def matrix_set_diag(node: NodeContext) -> Kernel:
    check_arity(node, 2, 1)
    x_t, d_t = node.inputs
    assert x_t is not None and d_t is not None  # check_arity refused missing inputs
    if len(x_t.shape) < 2:
        raise node.unsupported("input must have rank >= 2")
    if x_t.type_name not in _TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    if d_t.type != x_t.type:
        raise node.unsupported(f"diagonal type {d_t.type_name} differs from input type {x_t.type_name}")
    same_type_output(node, x_t)
    rows, cols = x_t.shape[-2:]
    k = min(rows, cols)
    batch = int(np.prod(x_t.shape[:-2], dtype=np.int64))
    # LiteRT reads batch * min(rows, cols) diagonal values in order without checking the
    # diagonal's shape; fewer would be read out of bounds.
    if int(np.prod(d_t.shape, dtype=np.int64)) < batch * k:
        raise node.unsupported(f"diagonal of shape {list(d_t.shape)} has fewer than {batch * k} values "
                               f"for input shape {list(x_t.shape)}")

    def run(x: np.ndarray, diag: np.ndarray) -> np.ndarray:
        out = x.copy()
        if out.size and k:
            i = np.arange(k)
            out.reshape(-1, rows, cols)[:, i, i] = diag.reshape(-1)[:batch * k].reshape(batch, k)
        return out

    return run
