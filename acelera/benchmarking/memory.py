"""Memory measurements of benchmark_model: the footprint (max RSS), /proc/self/statm, and the
peak-memory monitor thread of --report_peak_memory_footprint."""
from __future__ import annotations

import os
import sys
import threading

import numpy as np


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
