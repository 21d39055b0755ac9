"""tsl's Stat / StatWithPercentiles over int64 microsecond samples, and the stat line
benchmark_model prints for them."""
from __future__ import annotations

import math
from typing import Sequence

from acelera.benchmarking.numfmt import fmt_g

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


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
