"""Op profiling: tsl's StatsCalculator and ProfileSummaryDefaultFormatter (the Run Order, Top by
Computation Time and Summary by node type tables), and the node names TFLite's profiler gives
the steps of the execution plan."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from acelera.benchmarking.numfmt import fixed3, fmt_g
from acelera.benchmarking.stats import Stat

NODE_TYPE_WIDTH = 40


@dataclass
class Detail:
    name: str
    type: str
    run_order: int
    elapsed_time: Stat = field(default_factory=lambda: Stat(percentiles=False))
    mem_used: Stat = field(default_factory=lambda: Stat(percentiles=False))
    times_called: int = 0


def _field(value: str, width: int) -> str:
    return "\t" + value.rjust(width)


class StatsCalculator:
    """Per-node timing tables: Run Order, Top by Computation Time (10), Summary by node type."""

    def __init__(self, csv: bool = False, time_limit: int = 10, run_order_limit: int = 0):
        self.csv = csv
        self.time_limit = time_limit
        self.run_order_limit = run_order_limit
        self.details: dict[str, Detail] = {}
        self.run_total_us = Stat(percentiles=False)
        self.memory = Stat(percentiles=False)

    @property
    def num_runs(self) -> int:
        return self.run_total_us.count

    def add_node_stats(self, name: str, type_: str, run_order: int, elapsed_us: int, mem_used: int = 0) -> None:
        d = self.details.get(name)
        if d is None:
            d = self.details[name] = Detail(name, type_, run_order)
        d.elapsed_time.update(elapsed_us)
        d.mem_used.update(mem_used)
        d.times_called += 1

    def update_run_total_us(self, us: int) -> None:
        self.run_total_us.update(us)

    def add_run(self, events: Sequence[tuple[str, str, int, int]]) -> None:
        """One profiled run: (name, type, elapsed_us, mem_used_bytes) per event, in run order."""
        if not events:
            return
        total = 0
        for order, (name, type_, us, mem) in enumerate(events):
            self.add_node_stats(name, type_, order, us, mem)
            total += us
        self.update_run_total_us(total)

    # formatting
    def header_string(self, title: str) -> str:
        s = f"============================== {title} ==============================\n"
        if self.csv:
            return s + "node type, first, avg_ms, %, cdf%, mem KB, times called, name"
        return (s + _field("[node type]", NODE_TYPE_WIDTH) + _field("[first]", 9) + _field("[avg ms]", 9)
                + _field("[%]", 8) + _field("[cdf%]", 8) + _field("[mem KB]", 10)
                + _field("[times called]", 9) + "\t[Name]")

    def column_string(self, d: Detail, cumulative_us: int) -> str:
        stat_sum = self.run_total_us.sum
        first_ms = d.elapsed_time.first / 1000.0
        avg_ms = d.elapsed_time.avg / 1000.0
        pct = d.elapsed_time.sum * 100.0 / stat_sum if stat_sum else (math.nan if d.elapsed_time.sum == 0 else math.inf)
        # (cumulative * 100.0f) / stat.sum(): int64 * float is float arithmetic in C++
        with np.errstate(all="ignore"):
            cdf = float(np.float32(np.float32(cumulative_us) * np.float32(100.0)) / np.float32(stat_sum))
        times_called = d.times_called // self.num_runs if self.num_runs else 0
        mem_kb = d.mem_used.newest / 1000.0
        if self.csv:
            name = d.name.replace(",", "\t")
            return (f"{d.type}, {fmt_g(first_ms)}, {fmt_g(avg_ms)}, {fmt_g(pct)}%, {fmt_g(cdf)}%, "
                    f"{fmt_g(mem_kb)}, {times_called}, {name}")
        return (_field(d.type, NODE_TYPE_WIDTH) + _field(fixed3(first_ms), 9) + _field(fixed3(avg_ms), 9)
                + _field(fixed3(pct), 7) + "%" + _field(fixed3(cdf), 7) + "%"
                + _field(fixed3(mem_kb), 10) + _field(str(times_called), 9) + "\t" + d.name)

    def ordered(self, metric: str) -> list[Detail]:
        """Details by 'run_order' (ascending) or 'time' (largest average first, ties in run order)."""
        ds = list(self.details.values())
        if metric == "run_order":
            return sorted(ds, key=lambda d: d.run_order)
        if metric == "time":
            return sorted(ds, key=lambda d: (-round(d.elapsed_time.avg, 10), d.run_order))
        raise ValueError(metric)

    def stats_by_metric(self, title: str, metric: str, num_stats: int) -> str:
        lines = [self.header_string(title)]
        cumulative = 0
        for k, d in enumerate(self.ordered(metric), 1):
            if num_stats > 0 and k > num_stats:
                break
            cumulative += d.elapsed_time.sum
            lines.append(self.column_string(d, cumulative))
        return "\n".join(lines) + "\n\n"

    def stats_by_node_type(self) -> str:
        out = [f"Number of nodes executed: {len(self.details)}\n",
               "============================== Summary by node type ==============================\n"]
        run_count = self.run_total_us.count
        count: dict[str, int] = defaultdict(int)
        total: dict[str, int] = defaultdict(int)
        memory: dict[str, int] = defaultdict(int)
        called: dict[str, int] = defaultdict(int)
        accumulated = 0
        for name in sorted(self.details):  # std::map order
            d = self.details[name]
            t = d.elapsed_time.sum // run_count
            accumulated += t
            count[d.type] += 1
            total[d.type] += t
            memory[d.type] += d.mem_used.newest
            called[d.type] += d.times_called // run_count
        if self.csv:
            out.append("node type, count, avg_ms, avg %, cdf %, mem KB, times called\n")
        else:
            out.append(_field("[Node type]", NODE_TYPE_WIDTH) + _field("[count]", 9) + _field("[avg ms]", 10)
                       + _field("[avg %]", 11) + _field("[cdf %]", 11) + _field("[mem KB]", 10)
                       + _field("[times called]", 10) + "\n")
        cdf = np.float32(0.0)
        f32 = np.float32
        with np.errstate(all="ignore"):
            for t_us, type_, mem in sorted(((total[k], k, memory[k]) for k in total), reverse=True):
                mem_kb = float(f32(mem) / f32(1000.0))
                ms = float(f32(t_us) / f32(1000.0))
                pct = f32(f32(t_us) / f32(accumulated)) * f32(100.0)
                cdf = f32(cdf + pct)
                if self.csv:
                    out.append(f"{type_}, {count[type_]}, {fmt_g(ms)}, {fmt_g(pct)}%, {fmt_g(cdf)}%, "
                               f"{fmt_g(mem_kb)}, {called[type_]}\n")
                else:
                    out.append(_field(type_, NODE_TYPE_WIDTH) + _field(str(count[type_]), 9)
                               + _field(fixed3(ms), 10) + _field(fixed3(pct), 10) + "%"
                               + _field(fixed3(cdf), 10) + "%" + _field(fixed3(mem_kb), 10)
                               + _field(str(called[type_]), 9) + "\n")
        out.append("\n")
        return "".join(out)

    def output_string(self) -> str:
        return (self.stats_by_metric("Run Order", "run_order", self.run_order_limit)
                + self.stats_by_metric("Top by Computation Time", "time", self.time_limit)
                + self.stats_by_node_type())

    def short_summary(self) -> str:
        return (f"Timings (microseconds): {self.run_total_us}\n"
                f"Memory (bytes): {self.memory}\n"
                f"{len(self.details)} nodes observed\n")

    def report(self) -> str:
        """ProfileSummaryDefaultFormatter::GetOutputString for a single-subgraph model."""
        return self.output_string() + self.short_summary() + "\n"


INIT_PROFILE_HEADER = "Profiling Info for Benchmark Initialization:"
RUN_PROFILE_HEADER = "Operator-wise Profiling Info for Regular Benchmark Runs:"


def profile_output(init: StatsCalculator, run: StatsCalculator) -> str:
    """Both profile blocks as ProfileSummaryDefaultFormatter::HandleOutput writes them."""
    return (f"{INIT_PROFILE_HEADER}\n{init.report()}\n"
            f"{RUN_PROFILE_HEADER}\n{run.report()}\n")


def _tensor_names(sg, indices: Sequence[int]) -> str:
    return "[" + ", ".join(sg.tensors[t].name if 0 <= t < len(sg.tensors) else "Unknown" for t in indices) + "]"


def step_profile_names(interp) -> list[tuple[str, str]]:
    """(name, type) of each step of the plan as TFLite's profiler labels nodes.

    A CPU node is `[<outputs>]:<node index>` typed by its op; a delegate kernel is typed
    `DELEGATE:<delegate name>` and, as in TFLite where delegate kernels become new nodes appended
    to the graph, indexed `number of model nodes + creation order of the partition`.
    """
    sg = interp.model.main
    report = interp.delegation
    order = {}
    if report is not None:
        for k, (_, part) in enumerate(report.partitions):
            order[tuple(part.nodes)] = k
    out = []
    for step in interp._rt.ex.plan:
        if step.delegate is not None:
            idx = len(sg.operators) + order.get(tuple(step.nodes), 0)
            out.append((f"{_tensor_names(sg, step.outputs)}:{idx}", f"DELEGATE:{step.delegate}"))
        else:
            n = step.nodes[0]
            op = sg.operators[n]
            out.append((f"{_tensor_names(sg, op.outputs)}:{n}", op.name))
    return out
