"""The gpu-gl Delegate: gpu-opencl's node support, log lines and partition compiler, run on GL.

Node support, TFLite's "Following operations are not supported by GPU delegate" log and the
partition round are gpu-opencl's (inherited); prepare compiles the partition with
gpu-opencl's backend-neutral compiler into a Plan and runs it with GL compute shaders.
"""
from __future__ import annotations

import logging

from acelera.core.delegate import Delegate, Partition
from acelera.plugins.gpu_common import gpu_precision, unsupported_message
from acelera.plugins.gpu_gl.context import GLDevice
from acelera.plugins.gpu_gl.runtime import GLKernel
from acelera.plugins.gpu_opencl.compiler import compile_partition
from acelera.plugins.gpu_opencl.delegate import GpuOpenCLDelegate

log = logging.getLogger("acelera.gpu_gl")


class GpuGLDelegate(GpuOpenCLDelegate):
    name = "gpu-gl"
    backend = "hardware"
    fp16_weights_aware = True

    def __init__(self, options, dev: GLDevice, op_table, version: str):
        Delegate.__init__(self)
        self.options = dict(options)
        self.dev = dev
        self.op_table = op_table
        self.version = version
        self.half = bool(options.get("gpu_precision_loss_allowed", True))
        self.enable_quant = bool(options.get("gpu_experimental_enable_quant", True))
        self.precision = gpu_precision(options)
        self.cache = None  # program-binary serialization: not implemented yet
        self._asked = {}
        self._round = None
        self._logged = False
        self.last_prepare = ""

    def describe(self) -> str:
        storage = "fp16 storage" if self.half else "fp32"
        return f"{self.name} ({self.backend}: {self.dev.label}, {storage})"

    def _log(self, n_gpu: int) -> None:
        if self._logged or not self._round:
            return
        self._logged = True
        msg = unsupported_message([r for r in self._round.values() if r], n_gpu, len(self._round))
        if msg:
            log.warning(msg)

    def prepare(self, partition: Partition) -> GLKernel:
        if self._round is not None and not self._logged:
            supported = sum(1 for r in self._round.values() if r is None)
            self._log(len(partition.nodes) if self.max_delegated_partitions == 1 else supported)
        plan = compile_partition(partition, self.half)
        kernel = GLKernel(partition, plan, self.dev)
        self.last_prepare = "compiled"
        return kernel
