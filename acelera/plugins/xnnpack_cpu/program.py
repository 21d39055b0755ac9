"""The delegate kernel of one partition: packed weights, planned buffers, a list of steps.

Everything (buffers, scratch, private buffers, float32 packed weights) lives in one arena
(planner.Arena); numba steps are native records linked into runs, each run one call of
jit.run_native. Profiling (set_profiling, ACELERA_XNNPACK_PROFILE=1) times every step."""
from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np

from acelera.core.delegate import DelegateKernel, Partition
from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.compiler import Builder, Graph
from acelera.plugins.xnnpack_cpu.native_records import Native, Par, encode
from acelera.plugins.xnnpack_cpu.planner import F16, F32, Arena, Scratch, plan_buffers, storage_dtype
from acelera.plugins.xnnpack_cpu.spec import Spec
from acelera.plugins.xnnpack_cpu.threads import ThreadLimit

#: the float packed layout, stored with the packed weights: a weight cache entry packed for
#: another layout (or with numba on where it is now off, or the reverse, or with numpy's BLAS
#: callable from the native runs where it is now not: the steps chosen differ) is packed again
PACK_LAYOUT = (4,)
#: whether big numba steps (depthwise rows, few-row GEMMs) run in halves on two of numba's
#: threads when num_threads >= 2. Off: on the shared 2-core machine numba's OpenMP workers and
#: OpenBLAS's pool (which --num_threads also enables) spun against each other and a MobileNet
#: invoke went from 4 ms to 15 ms; with it off, 2 threads means OpenBLAS's threads only.
SPLIT_STEPS = False


class CompiledPartition(DelegateKernel):
    """invoke(*inputs): copy the partition's non-constant inputs into their buffers, run the
    steps, return the output buffers (float32 copies in fp16 mode).

    A step's build returns a closure, a `Native` record, or a list of both; consecutive
    native records (of one step or of several) become one call of jit.run_native."""

    def __init__(self, partition: Partition, fp16: bool = False, num_threads: int = -1,
                 packed_cache: Callable | None = None):
        super().__init__(partition)
        t0 = time.perf_counter()
        self.fp16 = fp16
        #: big numba steps run in two halves on two of numba's threads (jit.run_native2); BLAS
        #: calls use the BLAS pool's threads
        self.parallel = SPLIT_STEPS and jit.AVAILABLE and num_threads is not None and num_threads >= 2
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
        arena = self.arena = Arena()
        views = plan_buffers(specs, tensors, ext, graph.outputs, fp16, arena)
        scratch = Scratch(arena)
        reqs = [self._requests(s, tensors) for s in specs]
        for r in reqs:
            scratch.reserve(r)
        scratch.place()
        privates = [[(arena.reserve(int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize), shape, dt)
                     for shape, dt in s.private] for s in specs]
        params = [(d, k, arena.reserve(v.nbytes)) for d in packed.values() for k, v in d.items()
                  if v.dtype == F32 and v.size]
        arena.allocate()
        for d, k, off in params:  # float32 weights live in the arena too: native steps address them
            v = arena.view(off, d[k].shape, F32)
            v[...] = d[k]
            d[k] = v
        plan = views()
        self.arena_bytes = plan.nbytes
        arrays = plan.arrays
        self.items = []  # per step: its closures and native records
        for i, (s, r) in enumerate(zip(specs, reqs)):
            if s.alias:
                continue
            private = [arena.view(off, shape, dt) for off, shape, dt in privates[i]]
            built = self._build(s, arrays, scratch.views(r), private, packed.get(i, {}), tensors)
            self.items.append(list(built) if isinstance(built, (list, tuple)) else [built])
        self.steps = self._link([it for items in self.items for it in items])
        pos = {t: i for i, t in enumerate(partition.inputs)}
        self.copy_in = [(pos[t], arrays[t]) for t in ext]
        self.outputs = [arrays[t] for t in partition.outputs]
        if fp16:
            self.results = [np.empty(a.shape, F32) if a.dtype == F16 else None for a in self.outputs]
        split = self.parallel and any(isinstance(it, Par) for items in self.items for it in items)
        self.threads = ThreadLimit(num_threads, big_gemm=split or any(_big(s, tensors) for s in specs))
        self.step_nodes = [s.nodes for s in specs if not s.alias]
        self.step_seconds = [0.0] * len(self.items)
        self.profiled_invokes = 0
        self._invoke = self._make_invoke()
        if os.environ.get("ACELERA_XNNPACK_PROFILE", "").strip() not in ("", "0"):
            self.set_profiling(True)
        self.prepare_seconds = time.perf_counter() - t0

    def _link(self, items: list) -> list[Callable[[], None]]:
        """Closures for a list of closures and native records: each run of records is one call."""
        out: list[Callable[[], None]] = []
        run: list = []

        def flush():
            if run:
                out.append(self._native(list(run)))
                run.clear()
        def add(it):
            if isinstance(it, Native):
                run.append(it)
            elif isinstance(it, Par):
                natives = all(isinstance(x, Native) for x in it.first + it.second)
                if self.parallel and natives:
                    flush()
                    out.append(self._native2(it.first, it.second))
                else:
                    for x in it.whole:
                        add(x)
            elif it is not None:
                flush()
                out.append(it)
        for it in items:
            add(it)
        flush()
        return out

    def _offset(self, a: np.ndarray) -> int | None:
        arena = self.arena
        base = arena.data.ctypes.data
        if not base <= a.ctypes.data < base + arena.size:
            return None
        return arena.offset(a)

    def _native(self, records: list) -> Callable[[], None]:
        m, f = encode(records, self._offset)
        return jit.bind(jit.run_native, self.arena.f32, m, f)

    def _native2(self, first: list, second: list) -> Callable[[], None]:
        m1, f1 = encode(first, self._offset)
        m2, f2 = encode(second, self._offset)
        return jit.bind(jit.run_native2, self.arena.f32, m1, f1, m2, f2)

    # -- preparation ------------------------------------------------------------------------------
    @staticmethod
    def _pack(specs: list[Spec], cache: Callable | None) -> dict[int, dict[str, np.ndarray]]:
        mark = np.array(PACK_LAYOUT + (int(jit.AVAILABLE), int(bool(jit.blas_sgemm()))), np.int64)

        def compute() -> dict[str, np.ndarray]:
            flat = {"layout": mark}
            for i, s in enumerate(specs):
                if s.pack is not None:
                    for k, v in s.pack().items():
                        flat[f"{i}/{k}"] = v
            return flat
        flat = cache(compute) if cache is not None else compute()
        layout = flat.get("layout")
        if layout is None or not np.array_equal(layout, mark):  # packed by another layout (or without numba)
            flat = compute()
        out: dict[int, dict[str, np.ndarray]] = {}
        for key, v in flat.items():
            if key == "layout":
                continue
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
        build = s.build
        assert build is not None  # only alias specs have none, and they are skipped
        if not self.fp16 or not s.float_io:
            return build(arrays, scratch, private, packed)
        # float16 storage: the step computes in float32 on shadows of its float16 tensors
        halves = self._f16(s.ins + s.outs, tensors)
        view = dict(arrays)
        for t, sh in zip(halves, scratch):
            view[t] = sh
        built = build(view, scratch[len(halves):], private, packed)
        ins = [(view[t], arrays[t]) for t in halves if t in s.ins]
        outs = [(arrays[t], view[t]) for t in halves if t in s.outs]
        copy = np.copyto

        def copy_in():
            for d, src in ins:
                copy(d, src)

        def copy_out():
            for d, src in outs:
                copy(d, src)
        return [copy_in] + (list(built) if isinstance(built, (list, tuple)) else [built]) + [copy_out]

    # -- execution --------------------------------------------------------------------------------
    def invoke(self, *inputs: np.ndarray):
        return self._invoke(inputs)

    def _make_invoke(self, steps=None):
        """The invoke body specialised once (small models pay for every Python operation)."""
        copy_in, lim = tuple(self.copy_in), self.threads
        steps = tuple(self.steps if steps is None else steps)
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

    # -- profiling --------------------------------------------------------------------------------
    def set_profiling(self, on: bool, clock: Callable[[], float] = time.perf_counter) -> None:
        """Time every step of every invoke (two clock reads per step, and a native call per
        step instead of per run of steps) into step_seconds; `ACELERA_XNNPACK_PROFILE=1` turns
        it on for every partition prepared. `clock`: time.thread_time measures this thread's
        CPU time (steady on a loaded machine, but blind to BLAS worker threads)."""
        self.step_seconds = [0.0] * len(self.items)
        self.profiled_invokes = 0
        self._invoke = self._make_profiled_invoke(clock) if on else self._make_invoke()

    def profile(self) -> list[tuple[str, float]]:
        """(step label, mean seconds per invoke) of each step since profiling was turned on."""
        n = max(self.profiled_invokes, 1)
        return [(lab, t / n) for lab, t in zip(self.labels, self.step_seconds)]

    def _make_profiled_invoke(self, clock):
        acc = self.step_seconds
        steps = [jit_seq(self._link(items)) for items in self.items]

        def timed():
            for i, f in enumerate(steps):
                t0 = clock()
                f()
                acc[i] += clock() - t0
            self.profiled_invokes += 1
        return self._make_invoke((timed,))


def jit_seq(fns: list[Callable[[], None]]) -> Callable[[], None]:
    if len(fns) == 1:
        return fns[0]

    def run():
        for f in fns:
            f()
    return run


def _big(s: Spec, tensors) -> bool:
    """Whether a step runs a GEMM large enough for OpenBLAS to use several threads (it stays
    on one thread below M*N*K = 65536 * 4, interface/gemm.c)."""
    return s.gemm_mnk > 4 * 65536
