"""The seam between an emulated device's support rules and its execution.

A device plugin (nnapi, hexagon, coreml) owns the *rules*: which nodes the real delegate would
take. Execution goes through a `DeviceRunner`, the one small interface a real device runner
would implement (compile a partition, run it on numpy arrays). The runners here compute for
real in the device's arithmetic on the host:

- `Fp16Runner`: float16 storage and arithmetic results — every weight and every tensor an op
  produces is rounded to IEEE half, as on a GPU or Neural Engine computing in fp16;
- `IntegerRunner`: int8/uint8 quantized arithmetic with int32 accumulation and TFLite's
  fixed-point requantization (acelera's bit-exact reference kernels are that arithmetic);
- `Fp32Runner`: float32, as a CPU-class device (nnapi-reference) computes.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from acelera.core.delegate import Delegate, DelegateKernel, Partition
from acelera.core.kernels.registry import Kernel, NodeContext
from acelera.core.subplan import ReferenceKernel, reference_factory


class DeviceRunner:
    """Compiles partitions for one device and runs them. Replace with a real device's runner."""

    device = "emulated device"
    arithmetic = "float32"

    def describe(self) -> str:
        return f"{self.device} (emulated on the host, {self.arithmetic} arithmetic)"

    def compile(self, partition: Partition) -> DelegateKernel:
        return ReferenceKernel(partition, self.kernel_factory)

    def kernel_factory(self, ctx: NodeContext) -> Kernel:
        return reference_factory(ctx)


class Fp32Runner(DeviceRunner):
    arithmetic = "float32"


class IntegerRunner(DeviceRunner):
    arithmetic = "int8 fixed-point"


def to_half(x):
    """Round float32 values through IEEE half precision (other dtypes pass through)."""
    if isinstance(x, np.ndarray) and x.dtype == np.float32:
        return x.astype(np.float16).astype(np.float32)
    return x


class Fp16Runner(DeviceRunner):
    arithmetic = "float16"

    def kernel_factory(self, ctx: NodeContext) -> Kernel:
        # constant weights are rounded to half before the kernel packs them
        ins = tuple(dataclasses.replace(t, data=to_half(t.data)) if t is not None and t.is_constant else t
                    for t in ctx.inputs)
        fn = reference_factory(dataclasses.replace(ctx, inputs=ins))

        def run(*args):
            res = fn(*[to_half(a) for a in args])
            if isinstance(res, np.ndarray):
                return to_half(res)
            return tuple(to_half(r) for r in res)
        return run


class EmulatedDelegate(Delegate):
    """A delegate whose partitions run through a DeviceRunner."""

    backend = "emulated"

    def __init__(self, runner: DeviceRunner, **kw):
        super().__init__(**kw)
        self.runner = runner

    def prepare(self, partition: Partition) -> DelegateKernel:
        return self.runner.compile(partition)

    def describe(self) -> str:
        return f"{self.name}: {self.runner.describe()}"
