"""The gpu-opencl Delegate: node support, TFLite's GPU log lines, prepare (with the cache)."""
from __future__ import annotations

import hashlib
import logging
import warnings

import numpy as np

from acelera.core.delegate import Delegate, Partition, Support
from acelera.plugins.gpu_common import general_support, gpu_precision, unsupported_message
from acelera.plugins.gpu_opencl.cache import CacheWarning, SerializationCache, partition_fingerprint
from acelera.plugins.gpu_opencl.compiler import compile_partition
from acelera.plugins.gpu_opencl.device import Device
from acelera.plugins.gpu_opencl.runtime import OpenCLKernel, build_program, program_binary
from acelera.plugins.gpu_opencl.source import program_source

log = logging.getLogger("acelera.gpu_opencl")
TANH = 4


class GpuOpenCLDelegate(Delegate):
    name = "gpu-opencl"
    backend = "hardware"
    fp16_weights_aware = True

    def __init__(self, options, dev: Device, op_table, version: str):
        super().__init__()
        self.options = dict(options)
        self.dev = dev
        self.op_table = op_table
        self.version = version
        self.half = bool(options.get("gpu_precision_loss_allowed", True))
        self.enable_quant = bool(options.get("gpu_experimental_enable_quant", True))
        self.precision = gpu_precision(options)
        d, t = options.get("delegate_serialize_dir", ""), options.get("delegate_serialize_token", "")
        self.cache = SerializationCache(d, t) if d and t else None
        self._asked: dict[int, str | None] = {}
        self._round: dict[int, str | None] | None = None
        self._logged = False
        #: what the last prepare did: "compiled", "cache" (plan and binary loaded) — for tests/benchmarks
        self.last_prepare = ""

    def describe(self) -> str:
        storage = "fp16 storage" if self.half else "fp32"
        return f"{self.name} ({self.backend}: {self.dev.label}, {storage})"

    # --- support ---------------------------------------------------------------------------
    def is_node_supported(self, node) -> Support:
        s = general_support(node, self.enable_quant)
        if s.ok and int(node.options.get("fused_activation_function", 0) or 0) == TANH:
            # TFLite's GPU delegate applies a fused TANH, its CPU kernels ignore it (clamp
            # only): the node stays on the CPU rather than disagree with the reference.
            s = Support(False, f"{node.op.name}: fused activation TANH is not supported by {self.name}",
                        "constraint")
        if s.ok:
            s = self.op_table.check(node)
        self._asked[node.index] = None if s.ok else s.reason
        return s

    def partition_limits(self):
        # Called once every node was asked: close the round, and log now when nothing runs
        # on the GPU (no partition will be prepared to log it).
        self._round, self._asked, self._logged = self._asked, {}, False
        if self._round and all(r is not None for r in self._round.values()):
            self._log(0)
        return super().partition_limits()

    def _log(self, n_gpu: int) -> None:
        if self._logged or not self._round:
            return
        self._logged = True
        msg = unsupported_message([r for r in self._round.values() if r], n_gpu, len(self._round))
        if msg:
            log.info(msg)

    # --- prepare ---------------------------------------------------------------------------
    def prepare(self, partition: Partition) -> OpenCLKernel:
        if self._round is not None and not self._logged:
            supported = sum(1 for r in self._round.values() if r is None)
            mx = self.max_delegated_partitions
            self._log(len(partition.nodes) if mx == 1 else supported)
        key = path = None
        if self.cache is not None:
            key, path = self.cache.key(self._key_parts(partition))
            hit = self.cache.load(key, path)
            if hit is not None:
                plan, binary = hit
                program, how = build_program(self.dev, plan.half, binary)
                kernel = OpenCLKernel(partition, plan, self.dev, program)
                self.last_prepare = "cache"
                if how == "source":  # the driver refused the stored binary: report, store a new one
                    warnings.warn(f"gpu-opencl: the program binary in {path} does not load on "
                                  f"{self.dev.label}; rebuilt from source", CacheWarning, stacklevel=2)
                    self._store(kernel, partition, plan, key, path)
                return kernel
        plan = compile_partition(partition, self.half)
        program, _ = build_program(self.dev, self.half)
        kernel = OpenCLKernel(partition, plan, self.dev, program)
        self.last_prepare = "compiled"
        if self.cache is not None:
            self._store(kernel, partition, plan, key, path)
        return kernel

    def _store(self, kernel, partition, plan, key, path) -> None:
        # one run first, so drivers that compile kernels lazily (PoCL) have them in the binary
        with np.errstate(all="ignore"):
            kernel.invoke(*[np.zeros(t.shape, t.dtype) for t in _input_tensors(partition)])
        program = self.dev.programs[("program", plan.half)]
        self.cache.store(key, path, plan, program_binary(program))

    def _key_parts(self, partition: Partition) -> dict:
        return {
            "partition": partition_fingerprint(partition),
            "options": {"half": self.half, "quant": self.enable_quant},
            "device": self.dev.identity(),
            "source": hashlib.sha256(program_source().encode()).hexdigest(),
            "plugin": self.version,
        }


def _input_tensors(partition: Partition):
    found = {}
    for n in partition.nodes:
        for t in partition.contexts[n].inputs:
            if t is not None:
                found[t.index] = t
    return [found[t] for t in partition.inputs]
