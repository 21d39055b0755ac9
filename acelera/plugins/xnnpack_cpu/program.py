"""The delegate kernel of one partition: packed weights, planned buffers, a list of steps."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from acelera.core.delegate import DelegateKernel, Partition
from acelera.plugins.xnnpack_cpu.compiler import Builder, Graph
from acelera.plugins.xnnpack_cpu.planner import F16, F32, Scratch, plan_buffers, storage_dtype
from acelera.plugins.xnnpack_cpu.spec import Spec
from acelera.plugins.xnnpack_cpu.threads import ThreadLimit


class CompiledPartition(DelegateKernel):
    """invoke(*inputs): copy the partition's non-constant inputs into their buffers, run the
    steps, return the output buffers (float32 copies in fp16 mode)."""

    def __init__(self, partition: Partition, fp16: bool = False, num_threads: int = -1,
                 packed_cache: Callable | None = None):
        super().__init__(partition)
        t0 = time.perf_counter()
        self.fp16 = fp16
        graph = Graph.of(partition)
        specs = Builder(graph, fp16).run()
        self.specs = specs
        self.labels = [s.label for s in specs if not s.alias]
        packed = self._pack(specs, packed_cache)
        tensors = {}
        for n in partition.nodes:
            ctx = partition.contexts[n]
            for t in list(ctx.inputs) + list(ctx.outputs):
                if t is not None and t.index not in graph.consts:
                    tensors[t.index] = t
        ext = [t for t in partition.inputs if t not in graph.consts]
        plan = plan_buffers(specs, tensors, ext, graph.outputs, fp16)
        self.arena_bytes = plan.nbytes
        arrays = plan.arrays
        scratch = Scratch()
        reqs = [self._requests(s, tensors) for s in specs]
        for r in reqs:
            scratch.reserve(r)
        scratch.allocate()
        steps = []
        for i, (s, r) in enumerate(zip(specs, reqs)):
            if s.alias:
                continue
            private = [np.zeros(shape, dt) for shape, dt in s.private]
            steps.append(self._build(s, arrays, scratch.views(r), private, packed.get(i, {}), tensors))
        self.steps = steps
        pos = {t: i for i, t in enumerate(partition.inputs)}
        self.copy_in = [(pos[t], arrays[t]) for t in ext]
        self.outputs = [arrays[t] for t in partition.outputs]
        if fp16:
            self.results = [np.empty(a.shape, F32) if a.dtype == F16 else None for a in self.outputs]
        self.threads = ThreadLimit(num_threads, big_gemm=any(_big(s, tensors) for s in specs))
        self._invoke = self._make_invoke()
        self.prepare_seconds = time.perf_counter() - t0

    # -- preparation ------------------------------------------------------------------------------
    @staticmethod
    def _pack(specs: list[Spec], cache: Callable | None) -> dict[int, dict[str, np.ndarray]]:
        def compute() -> dict[str, np.ndarray]:
            flat = {}
            for i, s in enumerate(specs):
                if s.pack is not None:
                    for k, v in s.pack().items():
                        flat[f"{i}/{k}"] = v
            return flat
        flat = cache(compute) if cache is not None else compute()
        out: dict[int, dict[str, np.ndarray]] = {}
        for key, v in flat.items():
            i, k = key.split("/", 1)
            out.setdefault(int(i), {})[k] = v
        return out

    def _requests(self, s: Spec, tensors) -> list:
        if not self.fp16 or not s.float_io or s.alias:
            return list(s.scratch)
        shadows = [(tensors[t].shape, F32) for t in self._f16(s.ins + s.outs, tensors)]
        return shadows + list(s.scratch)

    def _f16(self, tids, tensors) -> list[int]:
        seen, out = set(), []
        for t in tids:
            if t not in seen and storage_dtype(tensors[t], self.fp16) == F16:
                seen.add(t)
                out.append(t)
        return out

    def _build(self, s: Spec, arrays, scratch, private, packed, tensors):
        if not self.fp16 or not s.float_io:
            return s.build(arrays, scratch, private, packed)
        # float16 storage: the step computes in float32 on shadows of its float16 tensors
        halves = self._f16(s.ins + s.outs, tensors)
        view = dict(arrays)
        for t, sh in zip(halves, scratch):
            view[t] = sh
        fn = s.build(view, scratch[len(halves):], private, packed)
        ins = [(view[t], arrays[t]) for t in halves if t in s.ins]
        outs = [(arrays[t], view[t]) for t in halves if t in s.outs]
        copy = np.copyto

        def run():
            for d, src in ins:
                copy(d, src)
            fn()
            for d, src in outs:
                copy(d, src)
        return run

    # -- execution --------------------------------------------------------------------------------
    def invoke(self, *inputs: np.ndarray):
        return self._invoke(inputs)

    def _make_invoke(self):
        """The invoke body specialised once (small models pay for every Python operation)."""
        copy_in, steps, lim = tuple(self.copy_in), tuple(self.steps), self.threads
        outputs = tuple(self.outputs)
        copy = np.copyto
        if self.fp16:
            pairs = tuple(zip(self.outputs, self.results))
        if len(steps) == 1:
            only = steps[0]
        if len(copy_in) == 1:
            (i0, buf0), = copy_in

        def run(inputs):
            if len(copy_in) == 1:
                copy(buf0, inputs[i0], "unsafe")
            else:
                for i, buf in copy_in:
                    copy(buf, inputs[i], "unsafe")
            if lim.active:
                lim.run(steps)
            elif len(steps) == 1:
                only()
            else:
                for f in steps:
                    f()
            if not self.fp16:
                return outputs
            res = []
            for a, r in pairs:
                if r is None:
                    res.append(a)
                else:
                    copy(r, a)
                    res.append(r)
            return tuple(res)
        return run

    def describe(self) -> str:
        return "\n".join(self.labels)


def _big(s: Spec, tensors) -> bool:
    """Whether a step runs a GEMM large enough for OpenBLAS to use several threads (it stays
    on one thread below M*N*K = 65536 * 4, interface/gemm.c)."""
    return s.gemm_mnk > 4 * 65536
