"""The xnnpack-cpu Delegate: XNNPACK's support rules, partitions compiled by `program.py`."""
from __future__ import annotations

import weakref
from typing import Any, Mapping

from acelera.core.delegate import Delegate, DelegateKernel, Partition
from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.optable import TABLE
from acelera.plugins.xnnpack_cpu.program import CompiledPartition
from acelera.plugins.xnnpack_cpu.weight_cache import WeightCache, cache_key

VERSION = "0.1.0"
LAYOUT = "2"  # bump when a packed layout changes: old cache files become stale


class XnnpackDelegate(Delegate):
    name = "xnnpack-cpu"
    backend = "cpu"
    op_table = TABLE

    def __init__(self, options: Mapping[str, Any] | None = None):
        super().__init__()
        options = dict(options or {})
        self.force_fp16 = bool(options.get("xnnpack_force_fp16", False))
        nt = options.get("num_threads", -1)
        self.num_threads = int(nt) if nt is not None else -1
        path = options.get("xnnpack_weight_cache_file_path") or ""
        self.weight_cache = WeightCache(path, f"{VERSION}/{LAYOUT}") if path else None
        #: read by the conformance suite. Integer kernels are the bit-exact reference ones; in
        #: fp16 mode float results of integer graphs (DEQUANTIZE) are rounded to float16 too.
        self.precision = ({"float": "float16", "integer": "integer"} if self.force_fp16
                          else {"float": "float32", "integer": "exact"})
        self._kernels: list[weakref.ref] = []

    def prepare(self, partition: Partition) -> DelegateKernel:
        kernel = CompiledPartition(partition, self.force_fp16, self.num_threads,
                                   self._cached(partition) if self.weight_cache is not None else None)
        self._kernels.append(weakref.ref(kernel))
        return kernel

    @property
    def kernels(self) -> list[CompiledPartition]:
        """The compiled partitions still in use (for inspection: labels, arena size)."""
        return [k for k in (r() for r in self._kernels) if k is not None]

    def _cached(self, partition: Partition):
        """packed(compute): the partition's packed weights from the weight cache file."""
        from acelera.backends.cache_store import fingerprint

        wc = self.weight_cache

        def packed(compute):
            fp = fingerprint(partition)
            return wc.packed(cache_key(fp, f"{LAYOUT}|fp16={self.force_fp16}"), compute, fp.consts)
        return packed

    def describe(self) -> str:
        mode = "float16 (forced)" if self.force_fp16 else "float32"
        return f"{self.name} (cpu, {mode}, {'numba' if jit.AVAILABLE else 'numpy'} kernels)"
