"""A simple, documented cycle-cost model for the emulated Hexagon DSP's `--hexagon_profiling`.

The numbers are ESTIMATES, not measurements: no DSP runs here. The model is deliberately
small, so a reader can redo any figure by hand. It assumes one HVX context working on
128-byte vectors (128 int8 lanes):

=======================  =======================================================  ==============
op class                 work                                                     per cycle
=======================  =======================================================  ==============
CONV_2D                  MACs = output elements x KH x KW x input channels        256 MACs
TRANSPOSE_CONV           MACs = input elements x KH x KW x output channels        128 MACs
FULLY_CONNECTED          MACs = output elements x input depth                     128 MACs
DEPTHWISE_CONV_2D        MACs = output elements x KH x KW                          64 MACs
pooling                  output elements x KH x KW window reads                   128 elements
LOGISTIC, TANH, SOFTMAX, elements read and written (table look-ups, reductions)    32 elements
HARD_SWISH, RSQRT,
L2_NORMALIZATION
everything else          elements read and written (non-constant inputs plus      128 elements
                         outputs: element-wise ops and data movement)
=======================  =======================================================  ==============

Every node also pays a fixed NODE_OVERHEAD (hexagon_nn graph-node dispatch). A node's estimate
is ``NODE_OVERHEAD + ceil(work / per_cycle)``; a partition's is the sum over its nodes (the
host-to-DSP call overhead is not modelled). The rates are round numbers of the right order
for HVX (vrmpy-style int8 dot products for convolutions, lower utilisation for depthwise and
matrix-vector work), not calibrated against a device.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil, prod

from acelera.core.kernels.registry import NodeContext

NODE_OVERHEAD = 200
VECTOR_LANES = 128
MACS_PER_CYCLE = {"CONV_2D": 256, "TRANSPOSE_CONV": 128, "FULLY_CONNECTED": 128, "DEPTHWISE_CONV_2D": 64}
LUT_OPS = frozenset({"LOGISTIC", "TANH", "SOFTMAX", "HARD_SWISH", "RSQRT", "L2_NORMALIZATION"})
LUT_ELEMENTS_PER_CYCLE = 32
POOL_OPS = frozenset({"AVERAGE_POOL_2D", "MAX_POOL_2D"})


@dataclass(frozen=True)
class Estimate:
    """One node's estimated cost: its MACs (0 for non-MAC ops), elements touched and cycles."""

    op: str
    macs: int
    elements: int
    cycles: int


def _size(shape) -> int:
    return int(prod(shape)) if shape else 1


def _shape(node: NodeContext, i: int) -> tuple[int, ...]:
    """The shape of input `i`, one the op cannot do without (a filter, the data input)."""
    t = node.inputs[i]
    assert t is not None, f"{node.op.name} has no input {i}"
    return t.shape


def macs(node: NodeContext) -> int:
    """Multiply-accumulates of a convolution or matrix op (0 for other ops)."""
    op = node.op.name
    out = _size(node.outputs[0].shape) if node.outputs else 0
    if op == "CONV_2D":
        _, kh, kw, ic = _shape(node, 1)
        return out * kh * kw * ic
    if op == "DEPTHWISE_CONV_2D":
        _, kh, kw, _ = _shape(node, 1)
        return out * kh * kw
    if op == "FULLY_CONNECTED":
        return out * int(_shape(node, 1)[-1])
    if op == "TRANSPOSE_CONV":
        oc, kh, kw, _ = _shape(node, 1)
        return _size(_shape(node, 2)) * oc * kh * kw
    return 0


def elements(node: NodeContext) -> int:
    """Elements read from non-constant inputs plus elements written."""
    read = sum(_size(t.shape) for t in node.inputs if t is not None and not t.is_constant)
    return read + sum(_size(t.shape) for t in node.outputs)


def estimate(node: NodeContext) -> Estimate:
    op = node.op.name
    m, e = macs(node), elements(node)
    if op in MACS_PER_CYCLE:
        work = ceil(m / MACS_PER_CYCLE[op])
    elif op in POOL_OPS:
        kh = int(node.options.get("filter_height", 1) or 1)
        kw = int(node.options.get("filter_width", 1) or 1)
        work = ceil(_size(node.outputs[0].shape) * kh * kw / VECTOR_LANES)
    elif op in LUT_OPS:
        work = ceil(e / LUT_ELEMENTS_PER_CYCLE)
    else:
        work = ceil(e / VECTOR_LANES)
    return Estimate(op, m, e, NODE_OVERHEAD + work)
