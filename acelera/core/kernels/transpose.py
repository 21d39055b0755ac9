"""TRANSPOSE reference kernel (LiteRT `transpose.cc`): a permuted view of the input.

The permutation is an int32 vector of length rank (negative entries count from the end);
LiteRT moves elements by size (8/16/32/64 bits), so every such type is supported, up to rank 8,
and the 4-bit INT4 and UINT4 (which LiteRT unpacks, transposes and packs again; acelera holds
them unpacked). 2-bit INT2 has no size case in LiteRT's kernel and is refused.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import check_same_type, check_type
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.kernels.reshape import SIZED_TYPES, declared_zeros, is_placeholder

MAX_RANK = 8


def resolve_perm(perm, rank: int) -> tuple[int, ...]:
    """The permutation with negative entries resolved, or a KernelError (transpose.cc's
    ResizeOutputTensor checks; a repeated axis, which LiteRT does not check, is refused too)."""
    perm = [int(p) for p in np.asarray(perm).reshape(-1)]
    if len(perm) != rank:
        raise KernelError(f"TRANSPOSE permutation {perm} has {len(perm)} entries for rank {rank}")
    out = []
    for p in perm:
        if not -rank <= p < rank:
            raise KernelError(f"TRANSPOSE permutation {perm} is out of range for rank {rank}")
        out.append(p + rank if p < 0 else p)
    if sorted(out) != list(range(rank)):
        raise KernelError(f"TRANSPOSE permutation {perm} is not a permutation")
    return tuple(out)


_TYPES = SIZED_TYPES | {"INT4", "UINT4"}


# Version 9 only adds float16, which a numpy view handles like any other type.
@register("TRANSPOSE", max_version=9, dtypes=tuple(sorted(_TYPES)))
def transpose(node: NodeContext):
    check_arity(node, 2, 1)
    x_t, perm_t = node.inputs[0], node.inputs[1]
    assert x_t is not None and perm_t is not None  # check_arity refused missing inputs
    check_type(node, x_t, _TYPES)
    check_same_type(node, x_t, node.outputs[0])
    check_type(node, perm_t, ("INT32",), "permutation")
    if len(x_t.shape) > MAX_RANK:
        raise node.unsupported(f"rank {len(x_t.shape)} input (at most {MAX_RANK})")
    if len(perm_t.shape) != 1:
        raise node.unsupported(f"permutation must be a vector, got shape {list(perm_t.shape)}")
    if perm_t.data is not None:
        perm = resolve_perm(perm_t.data, len(x_t.shape))

        def run(x, _perm=None):
            return x.transpose(perm)
        return run

    def run_dynamic(x, perm_v):
        try:
            p = resolve_perm(perm_v, x.ndim)
        except KernelError:
            if is_placeholder(perm_v):
                return declared_zeros(node)
            raise
        return x.transpose(p)
    return run_dynamic
