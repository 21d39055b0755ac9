"""The Core ML delegate object: options as TFLite resolves them, and its emulated device.

Options (facts 1.3, 1.4, 6.4):
- `coreml_version`: 2 or 3; 0 (the registrar default) means the newest, 3. Any other value
  is what the real delegate corrects on iOS 13+: it warns "coreml_version must be 2 or 3.
  Setting to 3." and targets Core ML 3. RESHAPE is delegated only for a Core ML 2 target.
- `coreml_devices`: `all` (TFLite's registrar always asks for TfLiteCoreMlDelegateAllDevices)
  or `neural_engine` (the C API's default struct value, refused on devices without one; the
  emulated device has one).
- `max_delegated_partitions` <= 0: unlimited; `min_nodes_per_partition` <= 0: 2 (applied by the
  registrar from the spec's defaults).
- `first_delegate_node_index` / `last_delegate_node_index`: honoured as in TFLite debug builds
  (nodes outside the range are not delegated).

Arithmetic. The Neural Engine computes in float16, so `NeuralEngineRunner` stores every
weight and every op result in IEEE half (emulation.Fp16Runner), with each op's internal sums
in float32 (the ANE accumulates wider than its storage). With `coreml_devices=all` Core ML may
place a layer on the CPU (float32), the GPU or the Neural Engine (both float16 storage) as it
sees fit; the emulator assumes the Neural Engine, the least precise and the one Core ML
prefers on devices that have it, so results here are a worst case for `all` too.

On a Mac with coremltools, ACELERA_COREML_NATIVE=1 swaps in native.CoreMLRunner, which runs the
partitions through Core ML itself.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Mapping

import numpy as np

from acelera.backends.emulation import EmulatedDelegate, Fp16Runner, to_half
from acelera.core.delegate import DelegateKernel, OpTable, Partition, Support
from acelera.core.kernels.registry import Kernel, NodeContext
from acelera.core.subplan import ReferenceKernel, reference_factory
from acelera.plugins.coreml.rules import NEWEST_VERSION, op_table

INT32_MAX = (1 << 31) - 1
DEVICES = ("all", "neural_engine")


def resolve_version(value: Any) -> int:
    """The Core ML version the delegate targets for a `--coreml_version` value."""
    v = int(value or 0)
    if v in (2, 3):
        return v
    if v != 0:
        warnings.warn(f"coreml: coreml_version must be 2 or 3 (got {v}); setting to {NEWEST_VERSION}",
                      UserWarning, stacklevel=3)
    return NEWEST_VERSION


def _half_constants(ctx: NodeContext, values: Mapping[int, np.ndarray] | None = None) -> NodeContext:
    """The node as the device holds it: constant float32 tensors rounded to half.

    Reference kernels pack constant weights when they are prepared, so rounding the arguments
    of each call (as Fp16Runner does) would not reach them; round them here first. `values`
    gives the (already rounded) values of partition constants the model does not store as
    constants, such as weights a folded DEQUANTIZE made: the kernel gets them as constants too.
    """
    values = values or {}

    def half(t, i):
        if t is None:
            return t
        if i in values:
            return dataclasses.replace(t, data=values[i])
        if t.is_constant and t.data.dtype == np.float32:
            return dataclasses.replace(t, data=t.data.astype(np.float16).astype(np.float32))
        return t
    return dataclasses.replace(ctx, inputs=tuple(half(t, i) for t, i in zip(ctx.inputs, ctx.op.inputs)))


class NeuralEngineRunner(Fp16Runner):
    """Runs partitions as the Neural Engine would: float16 weights, activations and results.

    This is the DeviceRunner seam: a runner that compiles each partition into an MLModel (see
    `export.partition_program`) and calls `prediction` would replace it on Apple hardware.
    """

    arithmetic = "float16"

    def __init__(self, devices: str = "all"):
        self.devices = devices
        self.device = ("Core ML on the Apple Neural Engine" if devices == "neural_engine"
                       else "Core ML, all compute units (assumed on the Neural Engine)")

    def compile(self, partition: Partition) -> DelegateKernel:
        # Weights are rounded to half once, here; activations when they enter the partition
        # and as each op produces them (what an op reads inside the partition is already half).
        consts = {t: to_half(np.asarray(v)) for t, v in partition.constants.items()}
        return _HalfKernel(dataclasses.replace(partition, constants=consts), lambda ctx: self._kernel(ctx, consts))

    def kernel_factory(self, ctx: NodeContext) -> Kernel:
        """One node on its own (inputs not yet half): round its inputs as well."""
        fn = self._kernel(ctx, {})
        return lambda *args: fn(*[to_half(a) for a in args])

    def _kernel(self, ctx: NodeContext, consts: Mapping[int, np.ndarray]) -> Kernel:
        fn = reference_factory(_half_constants(ctx, consts))

        def run(*args):
            res = fn(*args)
            return to_half(res) if isinstance(res, np.ndarray) else tuple(to_half(r) for r in res)
        return run


class _HalfKernel(ReferenceKernel):
    def invoke(self, *inputs: np.ndarray):
        return super().invoke(*[to_half(x) for x in inputs])


class CoreMLDelegate(EmulatedDelegate):
    """TFLite's Core ML delegate: its support rules, with partitions run on the emulated device."""

    name = "coreml"
    backend = "emulated"
    #: the real delegate partitions with FP16GraphPartitionHelper (coreml_delegate.mm)
    fp16_weights_aware = True
    precision = "float16"
    op_table: OpTable  # set by __init__

    def __init__(self, options: Mapping[str, Any] | None = None):
        options = dict(options or {})
        devices = str(options.get("coreml_devices", "all") or "all")
        if devices not in DEVICES:
            from acelera.registrar.flags import FlagError

            raise FlagError(f"--coreml_devices: '{devices}' is not one of 'all', 'neural_engine'")
        from acelera.plugins.coreml import native

        super().__init__(native.CoreMLRunner(devices) if native.wanted() else NeuralEngineRunner(devices))
        self.coreml_version = resolve_version(options.get("coreml_version", 0))
        self.devices = devices
        self.first_node = max(0, int(options.get("first_delegate_node_index", 0) or 0))
        last = int(options.get("last_delegate_node_index", INT32_MAX))
        self.last_node = last if last > 0 else INT32_MAX
        self.op_table = op_table(self.coreml_version)

    def is_node_supported(self, node: NodeContext) -> Support:
        if not self.first_node <= node.index <= self.last_node:
            return Support(False, f"{node.op.name}: node {node.index} is outside the delegation range "
                                  f"[{self.first_node}, {self.last_node}] (--first/last_delegate_node_index)",
                           "constraint")
        return self.op_table.check(node)

    def describe(self) -> str:
        return f"{self.name}: Core ML {self.coreml_version} target, {self.runner.describe()}"


def create(options: Mapping[str, Any]) -> CoreMLDelegate:
    return CoreMLDelegate(options)
