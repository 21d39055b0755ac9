"""The gpu-gl Delegate: the shared GPU node support, log lines and partition compiler, run on GL.

Node support, TFLite's "Following operations are not supported by GPU delegate" log and the
partition round are the shared `gpu_plan.delegate.GpuDelegate`'s; prepare compiles the
partition with the backend-neutral compiler into a Plan and runs it with GL compute shaders.
"""
from __future__ import annotations

import logging

from acelera.core.delegate import Partition
from acelera.plugins.gpu_gl.context import GLDevice
from acelera.plugins.gpu_gl.runtime import GLKernel
from acelera.plugins.gpu_plan.compiler import compile_partition
from acelera.plugins.gpu_plan.delegate import GpuDelegate

log = logging.getLogger("acelera.gpu_gl")


class GpuGLDelegate(GpuDelegate):
    name = "gpu-gl"
    logger = log

    def __init__(self, options, dev: GLDevice, op_table, version: str):
        super().__init__(options, dev, op_table, version)
        self.cache = None  # program-binary serialization: not implemented yet

    def prepare(self, partition: Partition) -> GLKernel:
        self._log_for(partition)
        plan = compile_partition(partition, self.half)
        kernel = GLKernel(partition, plan, self.dev)
        self.last_prepare = "compiled"
        return kernel
