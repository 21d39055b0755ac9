"""Warm latency of one interpreter: the median of N timed invokes after W untimed ones."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Latency:
    median_us: float
    min_us: float
    max_us: float
    runs: int
    warmup: int

    @property
    def method(self) -> str:
        return f"median of {self.runs} invoke(s) after {self.warmup} warm-up invoke(s), 1 thread"

    @property
    def spread(self) -> str:
        return f"{self.min_us:.1f}-{self.max_us:.1f} us"

    def to_dict(self) -> dict[str, Any]:
        return {"median_us": self.median_us, "min_us": self.min_us, "max_us": self.max_us,
                "runs": self.runs, "warmup": self.warmup}


def measure_latency(it: Any, runs: int, warmup: int) -> Latency:
    """Invoke `it` (inputs already set) `warmup` times, then time `runs` invokes."""
    with np.errstate(all="ignore"):
        for _ in range(warmup):
            it.invoke()
        times = []
        for _ in range(max(1, runs)):
            t0 = time.perf_counter_ns()
            it.invoke()
            times.append((time.perf_counter_ns() - t0) / 1000.0)
    return Latency(round(float(np.median(times)), 1), round(min(times), 1), round(max(times), 1), len(times), warmup)
