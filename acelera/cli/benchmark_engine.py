"""The engine of `acelera benchmark`: TFLite's `benchmark_model`, as a plain module.

`run_benchmark(params, make_interpreter, log)` follows benchmark_model.cc and
benchmark_tflite_model.cc step by step: validate and log the params, start the peak-memory
monitor, time `Init()` (load the model, resize inputs, apply delegates, allocate), prepare
random or file-backed inputs, run the warm-up loop and the regular loop, and report through the
same listeners in the same order (summary log, op profile, result file, output dump).

Every line the tool prints goes through `log(line)`; INFO lines carry no prefix, warnings are
prefixed `WARN: ` and errors `ERROR: ` as TFLite's tools logger does. Numbers are printed the
way a C++ ostream prints them (`%g` with 6 significant digits for doubles, fixed 3-decimal
columns in the op profile tables), so the output can be parsed by scripts written for
benchmark_model.

Deliberate differences from TFLite, all supersets of its behaviour:
- `--input_layer_value_range` / `--input_layer_value_files` may name model inputs when
  `--input_layer` is not given (TFLite aborts: the names must be listed in `--input_layer`).
- `--result_file_path` is written as JSON with the BenchmarkResult proto's field names instead
  of a binary proto; `--op_profiling_output_mode=proto` is refused with an error.
- Errors are AceleraError subclasses with one-line messages instead of log lines + status.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from acelera.core.errors import AceleraError
from acelera.core.files import DATA_MAX_BYTES, FileError, output_path_problem, read_regular_file, regular_file_problem
from acelera.core.partition import DelegationError
from acelera.registrar.flags import INT32_MAX, INT32_MIN, Flag, FlagValueError
from acelera.registrar.spec import MAX_THREADS

__all__ = [
    "BENCHMARK_FLAGS", "BENCHMARK_RANGES", "BenchmarkError", "BenchmarkParamError", "BenchmarkRangeError",
    "BenchmarkParams", "BenchmarkResult",
    "DisallowedCpuFallback", "LatencyMetrics", "MemoryMetrics", "MiscMetrics", "Stat",
    "StatsCalculator", "run_benchmark", "format_stat", "percentile",
]

MEMORY_CHECK_INTERVAL_MS = 50
OP_PROFILING_OUTPUT_MODES = ("stdout", "csv", "proto")
RANDOM_SEED = 0
STRING_FILLER = b"we're have some friends over saturday to hang out in the yard"
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class BenchmarkError(AceleraError):
    """The benchmark could not run (bad input data, unsupported input type, failed run)."""


class BenchmarkParamError(BenchmarkError):
    """A benchmark flag has an invalid value; the message names the flag."""


class BenchmarkRangeError(BenchmarkParamError, FlagValueError):
    """A numeric benchmark flag is not finite or outside its range (BENCHMARK_RANGES): a usage
    error, exit code 2 on the command line."""


#: `--require_full_delegation` failures are DelegationErrors ("Disallowed CPU fallback detected").
DisallowedCpuFallback = DelegationError


# --- params -------------------------------------------------------------------------------
@dataclass
class BenchmarkParams:
    """benchmark_model's flags that apply to acelera, with TFLite's defaults."""

    graph: str = ""
    num_runs: int = 50
    min_secs: float = 1.0
    max_secs: float = 150.0
    run_delay: float = -1.0
    run_frequency: float = -1.0
    num_threads: int = -1
    benchmark_name: str = ""
    output_prefix: str = ""
    warmup_runs: int = 1
    warmup_min_secs: float = 0.5
    verbose: bool = False
    dry_run: bool = False
    report_peak_memory_footprint: bool = False
    memory_footprint_check_interval_ms: int = MEMORY_CHECK_INTERVAL_MS
    input_layer: str = ""
    input_layer_shape: str = ""
    input_layer_value_range: str = ""
    input_layer_value_files: str = ""
    require_full_delegation: bool = False
    enable_op_profiling: bool = False
    op_profiling_output_mode: str = "stdout"
    op_profiling_output_file: str = ""
    output_filepath: str = ""
    result_file_path: str = ""


_HELP: dict[str, str] = {
    "graph": "graph file name",
    "num_runs": "expected number of runs, see also min_secs, max_secs",
    "min_secs": "minimum number of seconds to rerun for, potentially making the actual number of "
                "runs to be greater than num_runs",
    "max_secs": "maximum number of seconds to rerun for, potentially making the actual number of "
                "runs to be less than num_runs. Note if --max-secs is exceeded in the middle of a "
                "run, the benchmark will continue to the end of the run but will not start the next run.",
    "run_delay": "delay between runs in seconds",
    "run_frequency": "Execute at a fixed frequency, instead of a fixed delay. Note if the targeted "
                     "rate per second cannot be reached, the benchmark would start the next run "
                     "immediately, trying its best to catch up. If set, this will override run_delay.",
    "num_threads": "number of threads",
    "benchmark_name": "benchmark name",
    "output_prefix": "benchmark output prefix",
    "warmup_runs": "minimum number of runs performed on initialization, to allow performance "
                   "characteristics to settle, see also warmup_min_secs",
    "warmup_min_secs": "minimum number of seconds to rerun for, potentially making the actual "
                       "number of warm-up runs to be greater than warmup_runs",
    "verbose": "Whether to log parameters whose values are not set. By default, only log those "
               "parameters that are set by parsing their values from the commandline flags.",
    "dry_run": "Whether to run the tool just with simply loading the model, allocating tensors "
               "etc. but without actually invoking any op kernels.",
    "report_peak_memory_footprint": "Report the peak memory footprint by periodically checking the "
                                    "memory footprint. Internally, a separate thread will be spawned "
                                    "for this periodic check. Therefore, the performance benchmark "
                                    "result could be affected.",
    "memory_footprint_check_interval_ms": "The interval in millisecond between two consecutive memory "
                                          "footprint checks. This is only used when "
                                          "--report_peak_memory_footprint is set to true.",
    "input_layer": "input layer names",
    "input_layer_shape": "input layer shape",
    "input_layer_value_range": "A map-like string representing value range for *integer* input "
                               "layers. Each item is separated by ':', and the item value consists "
                               "of input layer name and integer-only range values (both low and high "
                               "are inclusive) separated by ',', e.g. input1,1,2:input2,0,254",
    "input_layer_value_files": "A map-like string representing value file. Each item is separated "
                               "by ',', and the item value consists of input layer name and value "
                               "file path separated by ':', e.g. input1:file_path1,input2:file_path2. "
                               "In case the input layer name contains ':' e.g. \"input:0\", escape it "
                               "with \"::\". If the input_name appears both in input_layer_value_range "
                               "and input_layer_value_files, input_layer_value_range of the input_name "
                               "will be ignored. The file format is binary and it should be array "
                               "format or null separated strings format.",
    "require_full_delegation": "require delegate to run the entire graph",
    "enable_op_profiling": "enable op profiling",
    "op_profiling_output_mode": "Output mode for op profiling results. Supported values are: "
                                "'stdout' and 'csv' ('proto' is not supported by acelera).",
    "op_profiling_output_file": "Output file for op profiling results.",
    "output_filepath": "File path to export outputs layer as binary data.",
    "result_file_path": "Path to save the benchmark result (JSON with the BenchmarkResult proto's "
                        "field names).",
}

#: (name, python type, default, help) for every flag, in BenchmarkParams order.
BENCHMARK_FLAGS: list[tuple[str, type, Any, str]] = [
    (f.name, {"int": int, "float": float, "bool": bool, "str": str}[f.type] if isinstance(f.type, str) else f.type,
     f.default, _HELP[f.name])
    for f in dataclasses.fields(BenchmarkParams)
]

#: a year of seconds: the longest duration a seconds flag may ask for
MAX_SECONDS = 365 * 24 * 3600

#: inclusive (minimum, maximum) of every numeric flag; negative seconds mean "none" as in TFLite
#: (dry runs set -1), and a run frequency <= 0 means "use --run_delay"
BENCHMARK_RANGES: dict[str, tuple[int | float, int | float]] = {
    "num_runs": (0, INT32_MAX),
    "min_secs": (-1.0, MAX_SECONDS),
    "max_secs": (0.0, MAX_SECONDS),
    "run_delay": (-1.0, MAX_SECONDS),
    "run_frequency": (-1.0, 1e6),
    "num_threads": (-1, MAX_THREADS),
    "warmup_runs": (0, INT32_MAX),
    "warmup_min_secs": (-1.0, MAX_SECONDS),
    # <= 0 warns and uses the default, as benchmark_model does
    "memory_footprint_check_interval_ms": (INT32_MIN, INT32_MAX),
}

#: flags naming files the benchmark writes
OUTPUT_PATH_FLAGS = ("op_profiling_output_file", "result_file_path", "output_filepath")

# (flag, description) in BenchmarkModel::LogParams / BenchmarkTfLiteModel::LogParams order.
_LOGGED_PARAMS: tuple[tuple[str, str], ...] = (
    ("num_runs", "Min num runs"),
    ("min_secs", "Min runs duration (seconds)"),
    ("max_secs", "Max runs duration (seconds)"),
    ("run_delay", "Inter-run delay (seconds)"),
    ("run_frequency", "Number of prorated runs per second"),
    ("num_threads", "Num threads"),
    ("benchmark_name", "Benchmark name"),
    ("output_prefix", "Output prefix"),
    ("warmup_runs", "Min warmup runs"),
    ("warmup_min_secs", "Min warmup runs duration (seconds)"),
    ("dry_run", "Run w/o invoking kernels"),
    ("report_peak_memory_footprint", "Report the peak memory footprint"),
    ("memory_footprint_check_interval_ms", "Memory footprint check interval (ms)"),
    ("graph", "Graph"),
    ("input_layer", "Input layers"),
    ("input_layer_shape", "Input shapes"),
    ("input_layer_value_range", "Input value ranges"),
    ("input_layer_value_files", "Input value files"),
    ("require_full_delegation", "Require full delegation"),
    ("enable_op_profiling", "Enable op profiling"),
    ("op_profiling_output_mode", "Op profiling output mode."),
    ("op_profiling_output_file", "Op profiling output file."),
    ("output_filepath", "File path to export outputs layer to"),
    ("result_file_path", "File path to save the benchmark result in binary proto format"),
)


# --- C++ ostream number formatting ----------------------------------------------------------
def fmt_g(x: float | int) -> str:
    """A number as `std::ostream << double` prints it (printf %g, 6 significant digits)."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "-nan"  # x86's default NaN (0/0) has the sign bit set; glibc prints "-nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return "%g" % x


def _fixed3(x: float) -> str:
    x = float(x)
    if math.isnan(x):
        return "-nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.3f}"


def _bool(v: bool) -> str:
    return "1" if v else "0"


def _param_str(v: Any) -> str:
    if isinstance(v, bool):
        return _bool(v)
    if isinstance(v, float):
        return fmt_g(v)
    return str(v)


# --- statistics (tsl Stat / StatWithPercentiles) -------------------------------------------
def percentile(values: Sequence[int], p: int) -> int:
    """StatWithPercentiles::percentile: nth_element at floor(n*p/100); p=100 is the last sample added."""
    if p < 0 or p > 100 or not values:
        return 0  # quiet_NaN of int64 is 0
    if p == 100:
        return int(values[-1])
    return int(sorted(values)[len(values) * p // 100])


class Stat:
    """tsl::Stat<int64_t> (and StatWithPercentiles when `percentiles`): first/newest/min/max/avg/std."""

    def __init__(self, values: Sequence[int] = (), percentiles: bool = True):
        self.values: list[int] = []
        self.percentiles = percentiles
        self.first = 0
        self.newest = 0
        self.max = INT64_MIN
        self.min = INT64_MAX
        self.sum = 0
        self.squared_sum = 0.0
        for v in values:
            self.update(v)

    def update(self, v: int) -> None:
        v = int(v)
        if not self.values:
            self.first = v
        self.values.append(v)
        self.newest = v
        self.max = max(self.max, v)
        self.min = min(self.min, v)
        self.sum += v
        self.squared_sum += float(v) * float(v)

    @property
    def count(self) -> int:
        return len(self.values)

    @property
    def empty(self) -> bool:
        return not self.values

    @property
    def all_same(self) -> bool:
        return self.count == 0 or self.min == self.max

    @property
    def avg(self) -> float:
        return 0.0 if self.empty else self.sum / self.count  # empty: quiet_NaN<int64_t>() == 0

    @property
    def std_deviation(self) -> int:
        """Population std, truncated to an integer as the int64 Stat returns it; 0 when all same."""
        if self.all_same:
            return 0
        var = self.squared_sum / self.count - self.avg * self.avg
        return int(math.sqrt(max(var, 0.0)))

    def percentile(self, p: int) -> int:
        return percentile(self.values, p)

    def __str__(self) -> str:
        if self.empty:
            s = "count=0"
        elif self.all_same:
            s = f"count={self.count} curr={self.newest}"
            if self.count > 1:
                s += "(all same)"
        else:
            s = (f"count={self.count} first={self.first} curr={self.newest} min={self.min} max={self.max} "
                 f"avg={fmt_g(self.avg)} std={self.std_deviation}")
        if self.percentiles:
            s += f" p5={self.percentile(5)} median={self.percentile(50)} p95={self.percentile(95)}"
        return s


def format_stat(values: Sequence[int], percentiles: bool = True) -> str:
    """The stat line benchmark_model prints for a list of microsecond samples."""
    return str(Stat(values, percentiles))


# --- op profiling (tsl StatsCalculator + ProfileSummaryDefaultFormatter) -------------------
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
        return (_field(d.type, NODE_TYPE_WIDTH) + _field(_fixed3(first_ms), 9) + _field(_fixed3(avg_ms), 9)
                + _field(_fixed3(pct), 7) + "%" + _field(_fixed3(cdf), 7) + "%"
                + _field(_fixed3(mem_kb), 10) + _field(str(times_called), 9) + "\t" + d.name)

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
        count: dict[str, int] = {}
        total: dict[str, int] = {}
        memory: dict[str, int] = {}
        called: dict[str, int] = {}
        accumulated = 0
        for name in sorted(self.details):  # std::map order
            d = self.details[name]
            t = d.elapsed_time.sum // run_count
            accumulated += t
            count[d.type] = count.get(d.type, 0) + 1
            total[d.type] = total.get(d.type, 0) + t
            memory[d.type] = memory.get(d.type, 0) + d.mem_used.newest
            called[d.type] = called.get(d.type, 0) + d.times_called // run_count
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
                               + _field(_fixed3(ms), 10) + _field(_fixed3(pct), 10) + "%"
                               + _field(_fixed3(cdf), 10) + "%" + _field(_fixed3(mem_kb), 10)
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


# --- memory ---------------------------------------------------------------------------------
def memory_supported() -> bool:
    return sys.platform.startswith("linux") or sys.platform == "darwin"


def mem_footprint_kb() -> int:
    """profiling::memory::GetMemoryUsage().mem_footprint_kb: the max resident set size in KB."""
    try:
        import resource
    except ImportError:
        return 0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss // 1024) if sys.platform == "darwin" else int(rss)


def rss_stats_mb() -> tuple[int, int, int, int] | None:
    """(vsize, rss, shared, code) in MB from /proc/self/statm, as benchmark_model's GetRssStats."""
    try:
        with open("/proc/self/statm") as f:
            fields = [int(x) for x in f.read().split()[:4]]
    except (OSError, ValueError):
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    return tuple((v * page) >> 20 for v in fields)  # type: ignore[return-value]


class MemoryUsageMonitor:
    """Samples the memory footprint on a thread until stopped; the peak is reported in MB."""

    def __init__(self, interval_ms: int):
        self.interval = interval_ms / 1000.0
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while True:
            self.peak_bytes = max(self.peak_bytes, mem_footprint_kb() * 1024)
            if self._stop.is_set():
                break
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="acelera-memory-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    @property
    def peak_mem_mb(self) -> float:
        return float(np.float32(self.peak_bytes / 1024.0 / 1024.0))


# --- result ---------------------------------------------------------------------------------
@dataclass
class LatencyMetrics:
    init_ms: float = 0.0
    first_inference_ms: float = 0.0
    average_warm_up_ms: float = 0.0
    avg_ms: float = 0.0
    min_ms: float = 0.0
    max_ms: float = 0.0
    stddev_ms: float = 0.0
    median_ms: float = 0.0
    p5_ms: float = 0.0
    p95_ms: float = 0.0


@dataclass
class MemoryMetrics:
    init_footprint_kb: int = 0
    overall_footprint_kb: int = 0
    peak_mem_mb: float | None = None  # set only when peak monitoring ran and saw memory


@dataclass
class MiscMetrics:
    model_size_mb: float = 0.0
    num_runs: int = 0
    num_warmup_runs: int = 0
    model_throughput_in_mb_per_sec: float = 0.0


@dataclass
class BenchmarkResult:
    """What benchmark_model reports: the BenchmarkResult proto's metrics plus the raw samples."""

    latency_metrics: LatencyMetrics
    memory_metrics: MemoryMetrics | None  # None where memory usage cannot be measured
    misc_metrics: MiscMetrics
    startup_latency_us: int = 0
    input_bytes: int = 0
    warmup_time_us: list[int] = field(default_factory=list, repr=False)
    inference_time_us: list[int] = field(default_factory=list, repr=False)
    op_profile: str | None = field(default=None, repr=False)  # both profile blocks, when op profiling ran

    def to_proto_dict(self) -> dict[str, Any]:
        """The BenchmarkResult proto as a dict with its field names (unset fields left out)."""
        def num(v: float) -> Any:
            if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
                return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")  # proto3 JSON
            return v

        out: dict[str, Any] = {"latency_metrics": {k: num(v) for k, v in dataclasses.asdict(self.latency_metrics).items()}}
        if self.memory_metrics is not None:
            mem = {k: num(v) for k, v in dataclasses.asdict(self.memory_metrics).items() if v is not None}
            out["memory_metrics"] = mem
        out["misc_metrics"] = {k: num(v) for k, v in dataclasses.asdict(self.misc_metrics).items()}
        return out


def make_result(model_size_mb: float, startup_latency_us: int, input_bytes: int, warmup: Stat, inference: Stat,
                init_mem_kb: int | None, overall_mem_kb: int | None, peak_mem_mb: float) -> BenchmarkResult:
    lat = LatencyMetrics(
        init_ms=startup_latency_us / 1000.0, first_inference_ms=warmup.first / 1000.0,
        average_warm_up_ms=warmup.avg / 1000.0, avg_ms=inference.avg / 1000.0, min_ms=inference.min / 1000.0,
        max_ms=inference.max / 1000.0, stddev_ms=inference.std_deviation / 1000.0,
        median_ms=inference.percentile(50) / 1000.0, p5_ms=inference.percentile(5) / 1000.0,
        p95_ms=inference.percentile(95) / 1000.0)
    mem = None
    if init_mem_kb is not None:
        mem = MemoryMetrics(init_mem_kb, overall_mem_kb or 0, peak_mem_mb if peak_mem_mb > 0 else None)
    if inference.sum:
        throughput = (input_bytes * inference.count * 1e6) / inference.sum / (1024.0 * 1024.0)
    else:
        throughput = math.nan if input_bytes * inference.count == 0 else math.inf
    misc = MiscMetrics(model_size_mb, inference.count, warmup.count, float(np.float32(throughput)))
    return BenchmarkResult(lat, mem, misc, startup_latency_us, input_bytes, list(warmup.values),
                           list(inference.values))


# --- input layers ---------------------------------------------------------------------------
@dataclass
class InputLayerInfo:
    name: str
    shape: tuple[int, ...] | None = None
    has_value_range: bool = False
    low: int = 0
    high: int = 0
    input_file_path: str = ""


def _split(s: str, delim: str) -> list[str]:
    return s.split(delim) if s else []


def split_name_and_value_file(item: str) -> tuple[str, str]:
    """`name:path` with `::` escaping a literal colon (SplitInputLayerNameAndValueFile)."""
    delim = -1
    i = 0
    while i < len(item) - 1:
        if item[i] == ":":
            if item[i + 1] == ":":
                i += 1
            elif delim == -1:
                delim = i
            else:
                raise BenchmarkParamError(f"--input_layer_value_files: '{item}' contains more than one delimiter")
        i += 1
    if delim == -1:
        raise BenchmarkParamError(f"--input_layer_value_files: '{item}' doesn't contain any delimiter "
                                  f"(expected name:path)")
    return item[:delim].replace("::", ":"), item[delim + 1:].replace("::", ":")


def parse_input_layers(params: BenchmarkParams) -> tuple[list[InputLayerInfo], dict[str, tuple[int, int]], dict[str, str]]:
    """PopulateInputLayerInfo: the --input_layer/--input_layer_shape list, plus value ranges and
    value files by name (matched to inputs later, so they also work without --input_layer)."""
    names = _split(params.input_layer, ",")
    shapes = _split(params.input_layer_shape, ":")
    if len(names) != len(shapes):
        raise BenchmarkParamError(
            f"--input_layer_shape: the number of items in --input_layer_shape ({params.input_layer_shape}, with "
            f"{len(shapes)} items) must match the number of items in --input_layer ({params.input_layer}, with "
            f"{len(names)} items). For example --input_layer=input1,input2 --input_layer_shape=1,224,224,4:1,20")
    infos = []
    for name, shape_s in zip(names, shapes):
        try:
            shape = tuple(int(d) for d in _split(shape_s, ","))
        except ValueError:
            raise BenchmarkParamError(f"--input_layer_shape: incorrect size string specified: '{shape_s}'") from None
        if any(d == -1 for d in shape):
            raise BenchmarkParamError("--input_layer_shape: any unknown sizes in the shapes (-1's) must be replaced "
                                      "with the size you want to benchmark with")
        if any(d < 0 for d in shape):
            raise BenchmarkParamError(f"--input_layer_shape: negative dimension in '{shape_s}'")
        if any(d > INT32_MAX for d in shape):
            raise BenchmarkParamError(f"--input_layer_shape: a dimension in '{shape_s}' is over {INT32_MAX}")
        infos.append(InputLayerInfo(name, shape))
    known = set(names)

    ranges: dict[str, tuple[int, int]] = {}
    for item in _split(params.input_layer_value_range, ":"):
        parts = item.split(",")
        if len(parts) != 3:
            raise BenchmarkParamError(f"--input_layer_value_range: wrong input value range item specified: "
                                      f"'{item}' (expected name,low,high)")
        name, lo_s, hi_s = parts
        if names and name not in known:
            raise BenchmarkParamError(f"--input_layer_value_range: cannot find the corresponding input_layer "
                                      f"name({name}) in --input_layer as {params.input_layer}")
        try:
            lo, hi = int(lo_s), int(hi_s)
        except ValueError:
            lo, hi = 1, 0
        if lo > hi:
            raise BenchmarkParamError(f"--input_layer_value_range: wrong low and high value of the input value "
                                      f"range specified: '{item}'")
        if lo < INT64_MIN or hi > INT64_MAX:
            raise BenchmarkParamError(f"--input_layer_value_range: '{item}': low and high must be 64-bit "
                                      f"integers ([{INT64_MIN}, {INT64_MAX}])")
        ranges[name] = (lo, hi)

    files: dict[str, str] = {}
    for item in _split(params.input_layer_value_files, ","):
        name, path = split_name_and_value_file(item)
        if names and name not in known:
            raise BenchmarkParamError(f"--input_layer_value_files: cannot find the corresponding input_layer "
                                      f"name({name}) in --input_layer as {params.input_layer}")
        files[name] = path
    return infos, ranges, files


def validate_params(params: BenchmarkParams, log: Callable[[str], None]) -> BenchmarkParams:
    """BenchmarkTfLiteModel::ValidateParams; returns a copy with TFLite's corrections applied."""
    p = dataclasses.replace(params)
    for f in dataclasses.fields(BenchmarkParams):
        v = getattr(p, f.name)
        want = f.type if not isinstance(f.type, str) else {"int": int, "float": float, "bool": bool, "str": str}[f.type]
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            setattr(p, f.name, float(v))
        elif not isinstance(v, want) or (want is int and isinstance(v, bool)):
            raise BenchmarkParamError(f"--{f.name}: expected {want.__name__}, got {v!r}")
        if f.name in BENCHMARK_RANGES:
            low, high = BENCHMARK_RANGES[f.name]
            try:
                Flag(f.name, want, f.default, minimum=low, maximum=high).check_range(getattr(p, f.name))
            except FlagValueError as e:
                raise BenchmarkRangeError(str(e)) from None
    if 0 < p.run_frequency < 1 / MAX_SECONDS:
        raise BenchmarkRangeError(f"--run_frequency: {p.run_frequency:g} is out of range (allowed: [-1, 0] for "
                                  f"none, or [{1 / MAX_SECONDS:.3g}, 1000000]: at least one run a year)")
    for name in OUTPUT_PATH_FLAGS:
        path = getattr(p, name)
        problem = output_path_problem(path) if path else None
        if problem is not None:
            raise BenchmarkParamError(f"--{name}: cannot write '{path}': {problem}")
    if p.report_peak_memory_footprint and p.memory_footprint_check_interval_ms <= 0:
        log(f"WARN: --memory_footprint_check_interval_ms is set to {p.memory_footprint_check_interval_ms} (ms), "
            f"This value is invalid, and it will be set to the default value {MEMORY_CHECK_INTERVAL_MS} (ms).")
        p.memory_footprint_check_interval_ms = MEMORY_CHECK_INTERVAL_MS
    if not p.graph:
        raise BenchmarkParamError("--graph: please specify the name of your TF Lite input file with --graph")
    if p.enable_op_profiling:
        mode = p.op_profiling_output_mode
        if mode not in OP_PROFILING_OUTPUT_MODES:
            raise BenchmarkParamError(f"--op_profiling_output_mode: output mode '{mode}' is not supported. "
                                      f"Supported values are: 'stdout' and 'csv'.")
        if mode == "proto":
            raise BenchmarkParamError("--op_profiling_output_mode: 'proto' is not supported by acelera "
                                      "(it needs TFLite's profiling proto); use 'stdout' or 'csv'")
    parse_input_layers(p)
    return p


def log_params(params: BenchmarkParams, log: Callable[[str], None]) -> None:
    """LogParams: every param when verbose, else those differing from the default (and Graph)."""
    defaults = BenchmarkParams()
    log(f"Log parameter values verbosely: [{_bool(params.verbose)}]")
    for name, desc in _LOGGED_PARAMS:
        v = getattr(params, name)
        if params.verbose or name == "graph" or v != getattr(defaults, name):
            log(f"{desc}: [{_param_str(v)}]")


# --- input data -----------------------------------------------------------------------------
_DEFAULT_RANGES: dict[str, tuple[float, float]] = {
    "FLOAT32": (-0.5, 0.5), "FLOAT64": (-0.5, 0.5), "COMPLEX64": (-0.5, 0.5),
    "INT32": (0, 99), "UINT32": (0, 99), "INT64": (0, 99), "UINT64": (0, 99),
    "UINT8": (0, 254), "INT8": (-127, 127), "INT16": (0, 0), "UINT16": (0, 0),
}


def _to_bfloat16_bits(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def random_tensor_data(rng: np.random.Generator, tensor, shape: Sequence[int],
                       value_range: tuple[int, int] | None = None) -> np.ndarray:
    """Uniform random data for one input, with benchmark_model's per-type ranges."""
    tname = tensor.type_name
    dtype = tensor.dtype
    n = int(np.prod(shape, dtype=np.int64))
    shape = tuple(shape)
    if tname in ("FLOAT16", "BFLOAT16"):  # value ranges are ignored for half types
        vals = rng.uniform(-0.5, 0.5, n).astype(np.float32)
        data = vals.astype(np.float16) if tname == "FLOAT16" else _to_bfloat16_bits(vals)
        return data.reshape(shape)
    if tname == "BOOL":
        return rng.integers(0, 1, n, endpoint=True).astype(np.bool_).reshape(shape)
    if tname == "STRING":
        arr = np.empty(n, dtype=object)
        arr[:] = [STRING_FILLER] * n
        return arr.reshape(shape)
    if tname not in _DEFAULT_RANGES:
        raise BenchmarkError(f"Don't know how to populate tensor {tensor.name} of type {tname}")
    lo, hi = value_range if value_range is not None else _DEFAULT_RANGES[tname]
    if tname in ("FLOAT32", "FLOAT64"):
        return rng.uniform(float(lo), float(hi), n).astype(dtype).reshape(shape)
    if tname == "COMPLEX64":
        re = rng.uniform(float(lo), float(hi), n)
        im = rng.uniform(float(lo), float(hi), n)
        return (re + 1j * im).astype(np.complex64).reshape(shape)
    ints = rng.integers(int(lo), int(hi), n, endpoint=True, dtype=np.int64)
    return ints.astype(dtype).reshape(shape)  # wraps like static_cast for out-of-range bounds


def load_tensor_data(tensor, shape: Sequence[int], path: str) -> np.ndarray:
    """LoadInputTensorData: raw bytes of exactly the tensor's size, or '\\0'-separated strings."""
    n = int(np.prod(shape, dtype=np.int64))
    # a FIFO or a device is refused, never read; a numeric tensor's file must be its exact size
    problem = regular_file_problem(path, DATA_MAX_BYTES)
    want = n * tensor.dtype.itemsize
    if problem is None and tensor.type_name != "STRING" and os.stat(path).st_size != want:
        raise BenchmarkParamError(f"--input_layer_value_files: the size of {path} is {os.stat(path).st_size} "
                                  f"bytes. It should be {want} bytes.")
    raw = None
    if problem is None:
        try:
            raw = read_regular_file(path, DATA_MAX_BYTES, "input_layer_value_file")
        except FileError as e:
            problem = str(e).split("': ", 1)[-1]
    if raw is None:
        raise BenchmarkParamError(f"--input_layer_value_files: failed to read the input_layer_value_file "
                                  f"'{path}': {problem}")
    if tensor.type_name == "STRING":
        if len(path) > 3 and path.endswith(".pb"):
            items = [raw]
        else:
            items = raw.split(b"\0")
            if items and items[-1] == b"":
                items.pop()  # getline does not yield an empty piece after a trailing delimiter
            if len(items) != n:
                raise BenchmarkParamError(f"--input_layer_value_files: the number of string in the "
                                          f"input_layer_value_file({path}) is {len(items)}. It should be {n}.")
        arr = np.empty(len(items), dtype=object)
        arr[:] = items
        return arr.reshape(tuple(shape)) if len(items) == n else arr
    if len(raw) != want:
        raise BenchmarkParamError(f"--input_layer_value_files: the size of {path} is {len(raw)} bytes. "
                                  f"It should be {want} bytes.")
    return np.frombuffer(raw, dtype=tensor.dtype).reshape(tuple(shape)).copy()


def _string_tensor_bytes(arr: np.ndarray) -> bytes:
    """TFLite's string tensor buffer: count, count+1 offsets (int32), then the bytes."""
    items = [x if isinstance(x, bytes) else str(x).encode() for x in arr.reshape(-1)]
    n = len(items)
    header = 4 * (n + 2)
    offsets, pos = [], header
    for s in items:
        offsets.append(pos)
        pos += len(s)
    offsets.append(pos)
    return np.array([n] + offsets, "<i4").tobytes() + b"".join(items)


def tensor_bytes(arr: np.ndarray) -> bytes:
    return _string_tensor_bytes(arr) if arr.dtype == object else np.ascontiguousarray(arr).tobytes()


# --- the benchmark --------------------------------------------------------------------------
def _now_us() -> int:
    return time.perf_counter_ns() // 1000


def _delegate_lines(interp) -> list[str]:
    """The 'Explicitly applied ...' line per delegate, from the final execution plan."""
    plan = interp._rt.ex.plan
    lines = []
    for d in interp.delegates:
        k = sum(1 for s in plan if s.delegate == d.name)
        if k == 1 and len(plan) == 1:
            lines.append(f"Explicitly applied {d.name} delegate, and the model graph will be completely "
                         f"executed by the delegate.")
        elif k > 0:
            lines.append(f"Explicitly applied {d.name} delegate, and the model graph will be partially "
                         f"executed by the delegate w/ {k} delegate kernels.")
        else:
            lines.append(f"Though {d.name} delegate is explicitly applied, the model graph will not be "
                         f"executed by the delegate.")
            why = _refusals(interp, d.name)
            if why:
                lines.append(f"  why: {why}")
    return lines


def _refusals(interp, name: str) -> str:
    """The distinct reasons `name` gave for refusing nodes (acelera's addition to TFLite's line)."""
    rep = interp.delegation
    seen: list[str] = []
    for rs in rep.rejections.values():
        for d, r in rs:
            if d == name and r not in seen:
                seen.append(r)
    for d, _nodes, msg in rep.failures:
        if d == name and msg not in seen:
            seen.append(f"prepare failed: {msg}")
    more = f" (and {len(seen) - 3} more reasons)" if len(seen) > 3 else ""
    return "; ".join(seen[:3]) + more


def _check_full_delegation(interp) -> None:
    plan = interp._rt.ex.plan
    cpu = [n for s in plan if s.delegate is None for n in s.nodes]
    if not interp.delegates or cpu or len(plan) != 1:
        what = "no delegate was applied" if not interp.delegates else f"nodes {cpu[:20]} run on the CPU"
        raise DelegationError(f"Disallowed CPU fallback detected: {what}")


class _Session:
    """Init(), input preparation and single runs of one benchmark."""

    def __init__(self, params: BenchmarkParams, make_interpreter: Callable[[], Any], log: Callable[[str], None]):
        self.p = params
        self.make_interpreter = make_interpreter
        self.log = log
        self.interp = None
        self.inputs: list[int] = []
        self.inputs_data: list[np.ndarray] = []
        self.init_profile = StatsCalculator(csv=params.op_profiling_output_mode == "csv")
        self.run_profile = StatsCalculator(csv=params.op_profiling_output_mode == "csv")
        self.profile_names: list[tuple[str, str]] = []
        self.on_run: Callable[[bool, int], None] | None = None  # progress display hook

    def init(self) -> None:
        p, log = self.p, self.log
        infos, self.value_ranges, self.value_files = parse_input_layers(p)
        interp = self.make_interpreter()
        self.interp = interp
        log(f"Loaded model {p.graph}")
        if p.num_threads != -1 and getattr(interp, "num_threads", None) is None:
            interp.num_threads = p.num_threads
        sg = interp.model.main
        self.inputs = list(sg.inputs)
        if infos and len(infos) != len(self.inputs):
            raise BenchmarkParamError(f"--input_layer: inputs mismatch: model inputs #:{len(infos)} "
                                      f"expected: {len(self.inputs)}")
        for info, t in zip(infos, self.inputs):
            tensor = sg.tensors[t]
            if info.name != tensor.name:
                log(f"WARN: Tensor # {t} is named {tensor.name} but flags call it {info.name}")
            if tensor.type_name != "STRING" and len(info.shape) != len(interp._rt.ex.shapes[t]):
                raise BenchmarkParamError(f"--input_layer_shape: input tensor #{t} should have "
                                          f"{len(interp._rt.ex.shapes[t])} dimensions!")
        # Value ranges/files name inputs by --input_layer position, or by tensor name without it.
        names = [info.name for info in infos] if infos else [sg.tensors[t].name for t in self.inputs]
        for flag, table in (("input_layer_value_range", self.value_ranges), ("input_layer_value_files", self.value_files)):
            for name in table:
                if name not in names:
                    raise BenchmarkParamError(f"--{flag}: '{name}' is not an input of the model "
                                              f"(inputs: {', '.join(names)})")
        self.input_names = names
        for name in set(self.value_ranges) & set(self.value_files):
            log(f"WARN: The input_name:{name} appears both in input_layer_value_files and input_layer_value_range. "
                f"The input_layer_value_range of the input_name will be ignored.")
        for info, t in zip(infos, self.inputs):
            if sg.tensors[t].type_name != "STRING":
                interp.resize_tensor_input(t, info.shape)

        if len(interp.delegates) >= 2:
            log(f"Going to apply {len(interp.delegates)} delegates one after another.")
        was_allocated = interp._rt.allocated
        if not was_allocated:
            interp.require_full_delegation = p.require_full_delegation
            m0, t0 = mem_footprint_kb(), _now_us()
            interp.allocate_tensors()
            t1, m1 = _now_us(), mem_footprint_kb()
            self.init_profile.add_run([("AllocateTensors/0", "AllocateTensors", t1 - t0, (m1 - m0) * 1000)])
        for line in _delegate_lines(interp):
            log(line)
        if p.require_full_delegation and was_allocated:
            _check_full_delegation(interp)
        self.profile_names = step_profile_names(interp)

    def prepare_input_data(self) -> None:
        rng = np.random.default_rng(RANDOM_SEED)
        sg = self.interp.model.main
        self.inputs_data = []
        for name, t in zip(self.input_names, self.inputs):
            tensor = sg.tensors[t]
            shape = self.interp._rt.ex.shapes[t]
            if name in self.value_files:
                data = load_tensor_data(tensor, shape, self.value_files[name])
            else:
                data = random_tensor_data(rng, tensor, shape, self.value_ranges.get(name))
            self.inputs_data.append(data)

    def input_bytes(self) -> int:
        return sum(int(d.nbytes) if d.dtype != object else len(tensor_bytes(d)) for d in self.inputs_data)

    def reset_inputs(self) -> None:
        for t, data in zip(self.inputs, self.inputs_data):
            self.interp.set_tensor(t, data)

    def invoke(self, profiled: bool) -> None:
        if not profiled:
            self.interp.invoke()
            return
        secs = self.interp.invoke_profiled()
        self.run_profile.add_run([(name, type_, int(s * 1e6), 0)
                                  for (name, type_), s in zip(self.profile_names, secs)])

    def run(self, min_num_times: int, min_secs: float, max_secs: float, regular: bool) -> tuple[Stat, BaseException | None]:
        """BenchmarkModel::Run: the timed loop; returns the stats and the first run error."""
        p, log = self.p, self.log
        stats = Stat()
        log(f"Running benchmark for at least {min_num_times} iterations and at least {fmt_g(min_secs)} seconds "
            f"but terminate if exceeding {fmt_g(max_secs)} seconds.")
        now_us = _now_us()
        min_finish_us = now_us + int(np.float32(min_secs) * np.float32(1e6))
        max_finish_us = now_us + int(np.float32(max_secs) * np.float32(1e6))
        sleep_s = p.run_delay
        gap = 1.0 / p.run_frequency if p.run_frequency != 0 else math.inf
        next_finish = now_us * 1e-6 + gap
        error: BaseException | None = None
        run = 0
        profiled = regular and p.enable_op_profiling
        while (run < min_num_times or now_us < min_finish_us) and now_us <= max_finish_us:
            self.reset_inputs()
            start = _now_us()
            try:
                self.invoke(profiled)
            except AceleraError as e:
                if error is None:
                    error = e
                log(f"ERROR: {e}")
            end = _now_us()
            stats.update(end - start)
            if p.run_frequency > 0:
                sleep_s = next_finish - _now_us() * 1e-6
                next_finish += gap
            if sleep_s > 0:
                time.sleep(sleep_s)
            now_us = _now_us()
            run += 1
            if self.on_run is not None:
                self.on_run(regular, run)
            if error is not None and not regular:
                break  # a warm-up failure aborts the benchmark
        log(str(stats))
        log("")  # benchmark_model ends the stat line with std::endl inside the log message
        return stats, error


def _write_profile(session: _Session, p: BenchmarkParams, log: Callable[[str], None]) -> str:
    text = profile_output(session.init_profile, session.run_profile)
    if p.op_profiling_output_file:
        try:
            with open(p.op_profiling_output_file, "w") as f:
                f.write(text)
            return text
        except OSError:
            pass  # like TFLite, fall back to the log when the file cannot be opened
    for line in text.split("\n")[:-1]:
        log(line)
    return text


def run_benchmark(params: BenchmarkParams, make_interpreter: Callable[[], Any],
                  log: Callable[[str], None], on_run: Callable[[bool, int], None] | None = None) -> BenchmarkResult:
    """Run benchmark_model's algorithm on the interpreter `make_interpreter()` returns.

    `make_interpreter` is timed as part of initialization (TFLite's Init loads the model too); it
    may return the Interpreter allocated or not, with its delegates attached. Raises
    BenchmarkParamError for bad flags, DelegationError when --require_full_delegation is not
    met, and the run's AceleraError when a warm-up run fails (immediately) or a regular run
    fails (after the summary has been reported, like benchmark_model's status).
    """
    log("STARTING!")
    p = validate_params(params, log)
    log_params(p, log)

    monitor = MemoryUsageMonitor(p.memory_footprint_check_interval_ms) if p.report_peak_memory_footprint else None
    if monitor is not None:
        monitor.start()
    try:
        try:
            model_size_mb = os.path.getsize(p.graph) / 1e6
        except OSError:
            model_size_mb = -1 / 1e6
        session = _Session(p, make_interpreter, log)
        session.on_run = on_run
        start_mem = mem_footprint_kb()
        t0 = _now_us()
        session.init()
        init_end_mem = mem_footprint_kb()
        startup_latency_us = _now_us() - t0
        init_mem_kb = init_end_mem - start_mem

        if model_size_mb > 0:
            log(f"The input model file size (MB): {fmt_g(model_size_mb)}")
        else:
            log("WARN: Failed to get the input model file size.")
        log(f"Initialized session in {fmt_g(startup_latency_us / 1e3)}ms.")

        session.prepare_input_data()
        input_bytes = session.input_bytes()
        if p.dry_run:
            p.warmup_runs, p.warmup_min_secs, p.num_runs, p.min_secs = 0, -1.0, 0, -1.0

        warmup, err = session.run(p.warmup_runs, p.warmup_min_secs, p.max_secs, regular=False)
        if err is not None:
            raise err
        inference, run_error = session.run(p.num_runs, p.min_secs, p.max_secs, regular=True)
        overall_mem_kb = mem_footprint_kb() - start_mem
    finally:
        if monitor is not None:
            monitor.stop()
    peak_mem_mb = monitor.peak_mem_mb if monitor is not None else -1.0

    supported = memory_supported()
    result = make_result(model_size_mb, startup_latency_us, input_bytes, warmup, inference,
                         init_mem_kb if supported else None, overall_mem_kb if supported else None, peak_mem_mb)

    # BenchmarkLoggingListener::OnBenchmarkEnd
    log(f"Inference timings in us: Init: {startup_latency_us}, First inference: {warmup.first}, "
        f"Warmup (avg): {fmt_g(warmup.avg)}, Inference (avg): {fmt_g(inference.avg)}")
    if supported:
        log("Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to "
            "the actual memory footprint of the model at runtime. Take the information at your discretion.")
        log(f"Memory footprint delta from the start of the tool (MB): init={fmt_g(init_mem_kb / 1024.0)} "
            f"overall={fmt_g(overall_mem_kb / 1024.0)}")
        if peak_mem_mb > 0:
            log(f"Overall peak memory footprint (MB) via periodic monitoring: {fmt_g(peak_mem_mb)}")
            rss = rss_stats_mb()
            if rss is not None:
                _, r, shared, _ = rss
                log("Memory status at the end of exeution:")
                log(f"- VmRSS              : {r} MB")
                log(f"+ RssAnnon           : {r - shared} MB")
                log(f"+ RssFile + RssShmem : {shared} MB")

    # ProfilingListener
    if p.enable_op_profiling:
        result.op_profile = _write_profile(session, p, log)

    # ProtoBenchmarkReporter
    if p.result_file_path:
        try:
            with open(p.result_file_path, "w") as f:
                log(f"Saving benchmark result to: {p.result_file_path}")
                json.dump(result.to_proto_dict(), f, indent=2)
                f.write("\n")
            log(f"Saved benchmark result to: {p.result_file_path}")
        except OSError:
            log(f"ERROR: Failed to save benchmark result to: {p.result_file_path}")

    # OutputSaver
    if p.output_filepath:
        try:
            with open(p.output_filepath, "wb") as f:
                for t in session.interp.model.main.outputs:
                    f.write(tensor_bytes(session.interp.get_tensor(t)))
        except OSError:
            pass  # benchmark_model silently skips an unwritable output file

    if run_error is not None:
        raise run_error
    return result
