"""What benchmark_model reports: the BenchmarkResult proto's metrics, as dataclasses, plus the
raw samples, and `make_result` computing them from the runs' stats."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from acelera.benchmarking.stats import Stat


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
        out: dict[str, Any] = {"latency_metrics": _proto_fields(self.latency_metrics)}
        if self.memory_metrics is not None:
            out["memory_metrics"] = _proto_fields(self.memory_metrics)
        out["misc_metrics"] = _proto_fields(self.misc_metrics)
        return out


def _proto_number(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")  # proto3 JSON
    return v


def _proto_fields(metrics: Any) -> dict[str, Any]:
    """A metrics message's set fields (None is unset) in proto3 JSON's number spelling."""
    return {k: _proto_number(v) for k, v in dataclasses.asdict(metrics).items() if v is not None}


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
