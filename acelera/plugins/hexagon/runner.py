"""Emulated execution of Hexagon partitions, and the `--hexagon_profiling` profile.

`HexagonRunner` is the plugin's DeviceRunner (acelera/backends/emulation.py): `compile(partition)`
turns one delegated partition into a `HexagonGraph`, as the real delegate builds one hexagon_nn
graph per partition. A runner for a real DSP would implement the same `compile`.

Arithmetic: integer only. Each node runs on acelera's quantized reference kernels, which are
TFLite's integer arithmetic (int8/uint8 tensors, int32 accumulation, fixed-point
requantization with rounding-doubling-high-multiply), so results match the CPU reference
bit for bit. A real DSP requantizes in its own way, so the conformance suite judges this
delegate as "integer" (within 1 quantization step), not "exact". Compiling a partition that
would move a floating-point tensor fails, and the partition falls back to the CPU.

Profiling: with `--hexagon_profiling` each graph prints a per-node table on its first
invoke. The cycle figures come from the cost model in cost_model.py and are estimates; the
host column is the emulator's measured wall time on this machine (averaged over invokes).
`HexagonRunner.profile_text()` formats every graph's table again with the latest averages.
"""
from __future__ import annotations

import sys
import time
from typing import Callable

import numpy as np

from acelera.backends.emulation import IntegerRunner
from acelera.core.delegate import Partition
from acelera.core.errors import AceleraError
from acelera.core.subplan import KernelFactory, ReferenceKernel
from acelera.plugins.hexagon.cost_model import Estimate, estimate
from acelera.plugins.hexagon.rules import FLOATS


class HexagonGraph(ReferenceKernel):
    """One partition as one DSP graph, run in integer arithmetic; optionally profiled."""

    def __init__(self, partition: Partition, factory: KernelFactory, index: int = 0,
                 profiling: bool = False, emit: Callable[[str], None] | None = None):
        super().__init__(partition, factory)
        self.index = index
        self.profiling = profiling
        self.emit = emit
        self.estimates: list[Estimate] = [estimate(partition.contexts[n]) for n in partition.nodes]
        self.host_seconds = [0.0] * len(self.steps)
        self.invokes = 0

    @property
    def total_cycles(self) -> int:
        return sum(e.cycles for e in self.estimates)

    def invoke(self, *inputs: np.ndarray):
        if not self.profiling:
            return super().invoke(*inputs)
        values: dict[int, np.ndarray] = dict(self.constants)
        values.update(zip(self.partition.inputs, inputs))
        for k, (fn, ins, outs) in enumerate(self.steps):
            t0 = time.perf_counter()
            res = fn(*[values.get(t) if t >= 0 else None for t in ins])
            self.host_seconds[k] += time.perf_counter() - t0
            if isinstance(res, np.ndarray):
                res = (res,)
            values.update(zip(outs, res))
        self.invokes += 1
        if self.invokes == 1:
            (self.emit or _stdout)(self.profile_text())
        return tuple(values[t] for t in self.partition.outputs)

    def profile_text(self) -> str:
        n = max(self.invokes, 1)
        total = max(self.total_cycles, 1)
        lines = [f"Hexagon graph {self.index} profile (emulated; cycles are ESTIMATES from acelera's cost model, "
                 f"not DSP measurements): {len(self.steps)} nodes, {self.invokes} invoke(s)",
                 f"{'node':>6}  {'op':<24}{'MACs':>14}{'elements':>12}{'est. cycles':>13}{'%':>8}{'host us':>11}"]
        for node, e, secs in zip(self.partition.nodes, self.estimates, self.host_seconds):
            lines.append(f"{node:>6}  {e.op:<24}{e.macs:>14,}{e.elements:>12,}{e.cycles:>13,}"
                         f"{100.0 * e.cycles / total:>7.1f}%{secs / n * 1e6:>11.1f}")
        host = sum(self.host_seconds) / n * 1e6
        lines.append(f"{'total':>6}  {'':<24}{sum(e.macs for e in self.estimates):>14,}"
                     f"{sum(e.elements for e in self.estimates):>12,}{self.total_cycles:>13,}{100.0:>7.1f}%"
                     f"{host:>11.1f}")
        lines.append("cost model: 200 cycles per node + MACs/256 (conv), /128 (fully connected, transpose conv), "
                     "/64 (depthwise); elements/128 otherwise, /32 for table-lookup ops "
                     "(acelera/plugins/hexagon/cost_model.py)")
        return "\n".join(lines)


def _stdout(text: str) -> None:
    print(text, file=sys.stdout, flush=True)


class HexagonRunner(IntegerRunner):
    """Compiles partitions into emulated DSP graphs (the seam a real Hexagon runner would fill)."""

    device = "Qualcomm Hexagon DSP"
    arithmetic = "int8/uint8 fixed-point, int32 accumulation"

    def __init__(self, profiling: bool = False, emit: Callable[[str], None] | None = None):
        self.profiling = profiling
        self.emit = emit
        self.graphs: list[HexagonGraph] = []

    def compile(self, partition: Partition) -> HexagonGraph:
        for n in partition.nodes:
            ctx = partition.contexts[n]
            for t in (*ctx.inputs, *ctx.outputs):
                if t is not None and t.type_name in FLOATS:
                    raise AceleraError(f"hexagon: node {n} ({ctx.op.name}) uses {t.type_name} tensor {t.index} "
                                       f"'{t.name}'; the DSP emulator computes in integer arithmetic only")
        graph = HexagonGraph(partition, self.kernel_factory, len(self.graphs), self.profiling, self.emit)
        self.graphs.append(graph)
        return graph

    def profile_text(self) -> str:
        """Every compiled graph's profile (estimated cycles, measured host time)."""
        return "\n\n".join(g.profile_text() for g in self.graphs)
