"""REVERSE_V2 and REVERSE_SEQUENCE reference kernels (tflite/kernels/reverse.cc,
reverse_sequence.cc, tflite/kernels/internal/reference/reverse.h and ReverseSequence in
reference_ops.h). Both only move elements.
"""
from __future__ import annotations

from itertools import pairwise

import numpy as np

from acelera.core.dtypes import TYPE_CODES
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity, same_type_output
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register

_INT32, _INT64 = TYPE_CODES["INT32"], TYPE_CODES["INT64"]
# FLOAT8 only in LiteRT's TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS build (held as uint8 bit patterns).
_REVERSE_TYPES = ("INT32", "FLOAT32", "UINT8", "INT8", "INT16", "INT64", "BOOL", "FLOAT16", "BFLOAT16",
                  "FLOAT8_E4M3FN", "FLOAT8_E5M2")
_REVERSE_SEQUENCE_TYPES = ("INT32", "FLOAT32", "UINT8", "INT16", "INT64")
_MAX_RANK = 8


def _reverse_axes(axis: np.ndarray, rank: int) -> tuple[int, ...]:
    """The axes to flip, normalized and sorted; a KernelError unless they are in range and
    contiguous (reverse.cc refuses duplicates and gaps alike)."""
    axes = []
    for a in axis.reshape(-1).tolist():
        if a < 0:
            a += rank
        if not 0 <= a < rank:
            raise KernelError(f"axis {a} is out of range for rank {rank}")
        axes.append(a)
    axes.sort()
    if any(b != a + 1 for a, b in pairwise(axes)):
        raise KernelError(f"axes {axis.reshape(-1).tolist()} are not contiguous (LiteRT needs contiguous axes)")
    return tuple(axes)


@register("REVERSE_V2", max_version=4, dtypes=_REVERSE_TYPES)
def reverse_v2(node: NodeContext) -> Kernel:
    check_arity(node, 2, 1)
    x_t, axis_t = node.inputs
    assert x_t is not None and axis_t is not None  # check_arity refused missing inputs
    if len(axis_t.shape) != 1:
        raise node.unsupported(f"axis must be 1-D, got shape {list(axis_t.shape)}")
    rank = len(x_t.shape)
    if rank > _MAX_RANK:
        raise node.unsupported(f"input rank {rank} exceeds {_MAX_RANK}")
    if axis_t.shape[0] > rank:
        raise node.unsupported(f"{axis_t.shape[0]} axes for an input of rank {rank}")
    if x_t.type_name not in _REVERSE_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    if axis_t.type != _INT32:
        raise node.unsupported(f"axis of type {axis_t.type_name} is not supported (INT32)")
    same_type_output(node, x_t)
    axis_const = node.const(1) is not None
    views: dict[tuple[int, bytes], tuple] = {}  # (rank, axis bytes) -> basic-slicing index

    def run(x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        key = (x.ndim, axis.tobytes())
        view = views.get(key)
        if view is None:
            try:
                axes = _reverse_axes(axis, x.ndim)
            except KernelError:
                if in_shape_pass() and not axis_const:
                    return x.copy()
                raise
            if len(views) >= 16:
                views.clear()
            view = views[key] = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))
        return x[view].copy() if view else x.copy()

    return run


@register("REVERSE_SEQUENCE", max_version=1, dtypes=_REVERSE_SEQUENCE_TYPES)
def reverse_sequence(node: NodeContext) -> Kernel:
    check_arity(node, 2, 1)
    x_t, len_t = node.inputs
    assert x_t is not None and len_t is not None  # check_arity refused missing inputs
    if len(len_t.shape) != 1:
        raise node.unsupported(f"seq_lengths must be 1-D, got shape {list(len_t.shape)}")
    if x_t.type_name not in _REVERSE_SEQUENCE_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    if len_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"seq_lengths of type {len_t.type_name} are not supported (INT32 or INT64)")
    same_type_output(node, x_t)
    seq_dim = int(node.options.get("seq_dim", 0))
    batch_dim = int(node.options.get("batch_dim", 0))
    rank = len(x_t.shape)
    if not (0 <= seq_dim < rank and 0 <= batch_dim < rank and seq_dim != batch_dim):
        raise node.unsupported(f"seq_dim {seq_dim} and batch_dim {batch_dim} must be different "
                               f"dimensions of the rank-{rank} input")
    if len_t.shape[0] != x_t.shape[batch_dim]:
        raise node.unsupported(f"{len_t.shape[0]} seq_lengths for batch dimension of size {x_t.shape[batch_dim]}")

    def run(x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        seq = x.shape[seq_dim]
        lens = lengths.astype(np.int64).reshape(-1)
        if lens.size and int(lens.max()) > seq:
            raise KernelError(f"seq_lengths {int(lens.max())} exceeds the sequence dimension of size {seq}")
        # lengths <= 0 leave their batch unchanged, as the reference loop does
        j = np.arange(seq, dtype=np.int64)[None, :]
        src = np.where(j < lens[:, None], lens[:, None] - 1 - j, j)
        y = np.moveaxis(x, (batch_dim, seq_dim), (0, 1))
        out = y[np.arange(lens.size)[:, None], src]
        return np.ascontiguousarray(np.moveaxis(out, (0, 1), (batch_dim, seq_dim)))

    return run
