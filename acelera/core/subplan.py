"""A delegate kernel that runs its partition on the reference kernels.

Delegates that only change *where* or *in which arithmetic* ops run (emulated devices, the
scaffolded example plugin, test delegates) build on this: `ReferenceKernel(partition)` runs
the partition's nodes in order with the CPU reference kernels, keeping intermediate tensors
private to the kernel.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from acelera.core.delegate import DelegateKernel, Partition
from acelera.core.kernels.registry import Kernel, NodeContext, lookup

KernelFactory = Callable[[NodeContext], Kernel]


def reference_factory(ctx: NodeContext) -> Kernel:
    return lookup(ctx.op).prepare(ctx)


class ReferenceKernel(DelegateKernel):
    """Runs a partition node by node; `factory` may substitute kernels (e.g. fp16 variants)."""

    def __init__(self, partition: Partition, factory: KernelFactory = reference_factory):
        super().__init__(partition)
        self.steps = []
        for n in partition.nodes:
            ctx = partition.contexts[n]
            self.steps.append((factory(ctx), ctx.op.inputs, ctx.op.outputs))
        self.constants = dict(partition.constants)

    def invoke(self, *inputs: np.ndarray):
        values: dict[int, np.ndarray] = dict(self.constants)
        values.update(zip(self.partition.inputs, inputs))
        for fn, ins, outs in self.steps:
            res = fn(*[values.get(t) if t >= 0 else None for t in ins])
            if isinstance(res, np.ndarray):
                res = (res,)
            values.update(zip(outs, res))
        return tuple(values[t] for t in self.partition.outputs)
