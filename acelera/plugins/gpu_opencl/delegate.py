"""The gpu-opencl Delegate: prepare (with the cache); node support and TFLite's GPU log lines are
acelera.backends.gpu.delegate's."""
from __future__ import annotations

import hashlib
import logging
import warnings

import numpy as np

from acelera.backends.cache_store import Fingerprint, fingerprint
from acelera.backends.gpu.cache import CacheWarning, SerializationCache
from acelera.backends.gpu.compiler import compile_partition
from acelera.backends.gpu.delegate import GpuDelegate
from acelera.backends.gpu.kernels.opencl import program_source
from acelera.core.delegate import Partition
from acelera.plugins.gpu_opencl.device import Device
from acelera.plugins.gpu_opencl.runtime import OpenCLKernel, build_program, program_binary

log = logging.getLogger("acelera.gpu_opencl")


class GpuOpenCLDelegate(GpuDelegate):
    name = "gpu-opencl"
    logger = log
    log_level = logging.INFO

    def __init__(self, options, dev: Device, op_table, version: str):
        super().__init__(options, dev, op_table, version)
        d, t = options.get("delegate_serialize_dir", ""), options.get("delegate_serialize_token", "")
        self.cache = SerializationCache(d, t) if d and t else None

    # --- prepare ---------------------------------------------------------------------------
    def prepare(self, partition: Partition) -> OpenCLKernel:
        self._log_for(partition)
        key = path = consts = None
        if self.cache is not None:
            fp = fingerprint(partition)
            consts = fp.consts
            key, path = self.cache.key(self._key_parts(fp))
            hit = self.cache.load_entry(key, path, consts)
            if hit is not None:
                plan = hit.plan
                program, how = build_program(self.dev, plan.half, hit.binary)
                kernel = OpenCLKernel(partition, plan, self.dev, program)
                self.last_prepare = "cache"
                if how == "source":  # the driver refused the stored binary: report, store a new one
                    warnings.warn(f"gpu-opencl: the program binary in {path} does not load on "
                                  f"{self.dev.label}; rebuilt from source", CacheWarning, stacklevel=2)
                    self._store(kernel, partition, plan, key, path, consts)
                return kernel
        plan = compile_partition(partition, self.half)
        program, _ = build_program(self.dev, self.half)
        kernel = OpenCLKernel(partition, plan, self.dev, program)
        self.last_prepare = "compiled"
        if self.cache is not None:
            self._store(kernel, partition, plan, key, path, consts)
        return kernel

    def _store(self, kernel, partition, plan, key, path, consts) -> None:
        assert self.cache is not None  # only called with a cache
        if self.cache.refused is not None:  # an untrusted directory: running uncached
            return
        # one run first, so drivers that compile kernels lazily (PoCL) have them in the binary
        with np.errstate(all="ignore"):
            kernel.invoke(*[np.zeros(t.shape, t.dtype) for t in _input_tensors(partition)])
        program = self.dev.programs[("program", plan.half)]
        self.cache.store(key, path, plan, program_binary(program), consts=consts)

    def _key_parts(self, fp: Fingerprint) -> dict:
        return {
            "partition": fp.ident,
            "consts": fp.consts,
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
