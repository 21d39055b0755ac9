"""The gpu-gl Delegate: the shared GPU node support, log lines and partition compiler, run on GL.

Node support, TFLite's "Following operations are not supported by GPU delegate" log and the
partition round are the shared `acelera.backends.gpu.delegate.GpuDelegate`'s; prepare compiles the
partition with the backend-neutral compiler into a Plan and runs it with GL compute shaders.

With `--delegate_serialize_dir` and `--delegate_serialize_token` both set, prepare uses the
shared serialization cache (`acelera.backends.gpu.cache`, files and trust rules of
`acelera.backends.cache_store`): one entry per partition holding the compiled plan and the
linked program binary of every shader the plan runs (binaries.py). Where the
driver offers no program binary format the entry holds only the plan (logged once;
`last_prepare` is then "cache-plan" on a hit). A stored binary the driver refuses is
reported (CacheWarning), its shader compiled from source, and the entry written again.
"""
from __future__ import annotations

import logging
import warnings

from acelera.backends.cache_store import Fingerprint, fingerprint
from acelera.backends.gpu.cache import CacheEntry, CacheWarning, SerializationCache
from acelera.backends.gpu.compiler import compile_partition
from acelera.backends.gpu.delegate import GpuDelegate
from acelera.core.delegate import Partition
from acelera.plugins.gpu_gl.context import GLDevice
from acelera.plugins.gpu_gl.runtime import GLKernel

log = logging.getLogger("acelera.gpu_gl")

#: last_prepare values: compiled now; plan and program binaries from the cache; plan only
COMPILED, CACHE, CACHE_PLAN = "compiled", "cache", "cache-plan"


class GpuGLDelegate(GpuDelegate):
    name = "gpu-gl"
    logger = log

    def __init__(self, options, dev: GLDevice, op_table, version: str):
        super().__init__(options, dev, op_table, version)
        d, t = options.get("delegate_serialize_dir", ""), options.get("delegate_serialize_token", "")
        self.cache = SerializationCache(d, t, owner="gpu-gl") if d and t else None
        if self.cache is not None and not dev.binary_formats:
            log.info("gpu-gl: %s offers no program binary format (%s); the serialization cache holds only "
                     "the compiled partition plans and the shaders are compiled from source",
                     dev.label, dev.binary_note)

    def prepare(self, partition: Partition) -> GLKernel:
        self._log_for(partition)
        key = path = fp = None
        if self.cache is not None:
            fp = fingerprint(partition)
            key, path = self.cache.key(self._key_parts(fp))
            entry = self.cache.load_entry(key, path, fp.consts)
            if entry is not None:
                try:
                    return self._from_cache(partition, entry, key, path, fp.consts)
                except Exception as e:  # noqa: BLE001  (an entry that parsed but does not build)
                    warnings.warn(f"gpu-gl: cache entry {path} cannot be used ({type(e).__name__}: {e}); "
                                  "rebuilding", CacheWarning, stacklevel=2)
        plan = compile_partition(partition, self.half)
        kernel = GLKernel(partition, plan, self.dev)
        self.last_prepare = COMPILED
        if self.cache is not None:
            assert key is not None and path is not None and fp is not None  # set above when there is a cache
            self._store(kernel, key, path, fp.consts)
        return kernel

    def _from_cache(self, partition: Partition, entry: CacheEntry, key: str, path: str, consts: str) -> GLKernel:
        plan = entry.plan
        names = sorted({l.kernel for l in plan.launches})
        refused = self.dev.call(self.dev.load_programs, plan.half,
                                {n: b for n, b in entry.binaries.items() if n in names})
        kernel = GLKernel(partition, plan, self.dev)  # refused (or missing) shaders: from source
        complete = self.dev.binary_formats and all(n in entry.binaries for n in names)
        self.last_prepare = CACHE if complete else CACHE_PLAN
        if refused:
            warnings.warn(f"gpu-gl: the program binaries of {', '.join(refused)} in {path} do not load on "
                          f"{self.dev.label}; rebuilt from source", CacheWarning, stacklevel=3)
            self._store(kernel, key, path, consts)
        log.info("gpu-gl: initialized the partition from serialized data %s (%s)", path,
                 "plan and program binaries" if self.last_prepare == CACHE else "plan only")
        return kernel

    def _store(self, kernel: GLKernel, key: str, path: str, consts: str) -> None:
        assert self.cache is not None  # only called with a cache
        names = sorted({l.kernel for l in kernel.plan.launches})
        blobs = self.dev.call(self.dev.program_binaries, names, kernel.plan.half) if self.dev.binary_formats else {}
        self.cache.store(key, path, kernel.plan, binaries=blobs, consts=consts)

    def _key_parts(self, fp: Fingerprint) -> dict:
        return {
            "backend": self.name,
            "partition": fp.ident,
            "consts": fp.consts,
            "options": {"half": self.half, "quant": self.enable_quant},
            "device": self.dev.identity(),
            "binary_formats": list(self.dev.binary_formats),
            "shaders": self.dev.source_digest(),
            "plugin": self.version,
        }
