"""DYNAMIC_UPDATE_SLICE and DILATE reference kernels (tflite/kernels/dynamic_update_slice.cc,
dilate.cc): strided writes of one tensor into another, no arithmetic.

DYNAMIC_UPDATE_SLICE clamps every start index into [0, operand_dim - update_dim], as XLA and
LiteRT do, so no index is ever out of bounds. INT4 tensors are held unpacked (one value per
int8), so they update element by element like the other types.
"""
from __future__ import annotations

import numpy as np

from acelera.core.dtypes import TYPE_CODES
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import (
    SIZED,
    check_arity,
    checked_shape,
    placeholder,
    same_type_output,
)
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register

_INT32, _INT64 = TYPE_CODES["INT32"], TYPE_CODES["INT64"]
_MAX_RANK = 8
_DUS_TYPES = SIZED + ("INT4",)


@register("DYNAMIC_UPDATE_SLICE", max_version=6, dtypes=_DUS_TYPES)
def dynamic_update_slice(node: NodeContext) -> Kernel:
    check_arity(node, 3, 1)
    x_t, u_t, idx_t = node.inputs
    assert x_t is not None and u_t is not None and idx_t is not None  # check_arity refused missing inputs
    rank = len(x_t.shape)
    if len(idx_t.shape) != 1 or idx_t.shape[0] != rank:
        raise node.unsupported(f"start indices of shape {list(idx_t.shape)} for an operand of rank {rank}")
    if len(u_t.shape) != rank or any(u > d for u, d in zip(u_t.shape, x_t.shape)):
        raise node.unsupported(f"update shape {list(u_t.shape)} does not fit in operand shape {list(x_t.shape)}")
    if u_t.type != x_t.type:
        raise node.unsupported(f"update type {u_t.type_name} differs from operand type {x_t.type_name}")
    if idx_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"start indices of type {idx_t.type_name} are not supported (INT32 or INT64)")
    if x_t.type_name not in _DUS_TYPES:
        raise node.unsupported(f"operand type {x_t.type_name} is not supported")
    if rank > _MAX_RANK:
        raise node.unsupported(f"operand rank {rank} exceeds {_MAX_RANK}")
    same_type_output(node, x_t)

    def run(x: np.ndarray, update: np.ndarray, start: np.ndarray) -> np.ndarray:
        out = x.copy()
        if update.size == 0:
            return out
        begin = [min(max(0, int(s)), d - u) for s, d, u in zip(start.reshape(-1).tolist(), x.shape, update.shape)]
        out[tuple(slice(b, b + u) for b, u in zip(begin, update.shape))] = update
        return out

    return run


@register("DILATE", max_version=1, dtypes=SIZED)
def dilate(node: NodeContext) -> Kernel:
    check_arity(node, 3, 1)
    x_t, d_t, pad_t = node.inputs
    assert x_t is not None and d_t is not None and pad_t is not None  # check_arity refused missing inputs
    rank = len(x_t.shape)
    if rank == 0:
        raise node.unsupported("input must have rank >= 1")
    if x_t.type_name not in SIZED:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    dt = same_type_output(node, x_t)
    if pad_t.type != x_t.type:
        raise node.unsupported(f"padding value type {pad_t.type_name} differs from input type {x_t.type_name}")
    if int(np.prod(pad_t.shape, dtype=np.int64)) < 1:
        raise node.unsupported("padding value tensor is empty")
    if d_t.type != _INT32:
        raise node.unsupported(f"dilations of type {d_t.type_name} are not supported (INT32)")
    if len(d_t.shape) != 1 or d_t.shape[0] != rank:
        raise node.unsupported(f"dilations of shape {list(d_t.shape)} for an input of rank {rank}")
    d_const = node.const(1) is not None

    def run(x: np.ndarray, dilations: np.ndarray, padding: np.ndarray) -> np.ndarray:
        factors = [int(v) for v in dilations.reshape(-1)]
        try:
            if min(factors) < 1:
                raise KernelError(f"dilations must be >= 1, got {factors}")
            out_shape = checked_shape([(s - 1) * f + 1 for s, f in zip(x.shape, factors)], dt)
        except KernelError:
            if in_shape_pass() and not d_const:
                return placeholder(node.outputs[0])
            raise
        out = np.full(out_shape, padding.reshape(-1)[0], dt)
        if x.size:
            out[tuple(slice(None, None, f) for f in factors)] = x
        return out

    return run
