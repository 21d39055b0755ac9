"""The accuracy floor of half storage, for judging a GPU backend's fp16 error.

With precision loss allowed the GPU backends store weights and intermediate tensors as IEEE
half and compute in float32 (partition outputs stay float32). `HalfStorageDelegate` computes
exactly that on the CPU reference kernels: every constant and every tensor an op produces is
rounded to half, except the partition's outputs. Its inference_diff error against the plain
reference is the error half storage costs by itself, whatever the kernels; a backend close to
it loses nothing beyond the storage format. Used by the precision benchmark and tests.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from acelera.backends.emulation import DeviceRunner, EmulatedDelegate, to_half
from acelera.core.delegate import Partition, Support
from acelera.core.kernels.registry import Kernel, NodeContext
from acelera.core.subplan import reference_factory


class HalfStorageRunner(DeviceRunner):
    device = "half-storage floor"
    arithmetic = "float32 arithmetic, float16 storage"

    def compile(self, partition: Partition):
        self.outputs = set(partition.outputs)
        return super().compile(partition)

    def kernel_factory(self, ctx: NodeContext) -> Kernel:
        ins = tuple(dataclasses.replace(t, data=to_half(t.data)) if t is not None and t.is_constant else t
                    for t in ctx.inputs)
        fn = reference_factory(dataclasses.replace(ctx, inputs=ins))
        keep = [t.index in self.outputs for t in ctx.outputs]

        def run(*args):
            res = fn(*[to_half(a) for a in args])
            single = isinstance(res, np.ndarray)
            outs = tuple(r if k else to_half(r) for r, k in zip((res,) if single else res, keep))
            return outs[0] if single else outs
        return run


class HalfStorageDelegate(EmulatedDelegate):
    """Takes every node; runs the whole graph as one half-storage partition."""

    name = "half-storage-floor"

    def __init__(self) -> None:
        super().__init__(HalfStorageRunner())

    def is_node_supported(self, node: NodeContext) -> Support:
        return Support(True)
