"""--num_threads for the delegate: the BLAS pools and numba's thread count are limited around each
invoke.

acelera.core.threads limits the BLAS pools (threadpoolctl's limiter, pools restored afterwards),
and only for partitions with a GEMM large enough for OpenBLAS to split (smaller ones run on one
thread whatever the setting). The int8 numba kernels (qjit.py) run in parallel (prange) only
for steps that large too (their Spec.gemm_mnk says so); they read `numba_threads()` to pick
their serial version or the number of bands of their parallel one. Each band is computed by
the same arithmetic whichever thread runs it, so results do not depend on the thread count.

numba's threading layer is chosen here, before any parallel kernel runs (unless
NUMBA_THREADING_LAYER is set): GNU OpenMP where libgomp loads (a fork/join of 2-10 us), else
the workqueue layer that every numba wheel has (about 40 us: its workers are woken through
condition variables and the calling thread only waits). TBB is not tried (it needs the tbb
package). OpenMP's idle workers spin GOMP_SPINCOUNT times before they sleep; libgomp's default
(300,000, several milliseconds) made a MobileNet invoke 100 times slower on a machine whose
cores other jobs keep busy (the spinning worker holds the core the other band waits for), so
SPINCOUNT (a fraction of a millisecond: enough to bridge the serial steps between two
parallel ones) is set unless the environment sets a wait policy. The workqueue layer aborts
the process when two threads start a parallel kernel at once, and kernels started from several
threads would compete for the same cores anyway: one invoke at a time (a lock, never waited
for) runs the parallel kernels, an invoke started meanwhile on another thread the serial ones.
"""
from __future__ import annotations

import os
import threading
from time import perf_counter
from typing import Callable, Iterable

from acelera.core.threads import blas_pools, blas_threads

__all__ = ["LAYER_PRIORITY", "NUMBA_MAX", "ThreadLimit", "blas_pools", "numba_threads", "threading_layer"]

#: numba threading layers tried in this order (when NUMBA_THREADING_LAYER is not set; numba
#: wants all three named, and workqueue always loads)
LAYER_PRIORITY = ("omp", "workqueue", "tbb")
#: libgomp's idle spin before a worker sleeps (GOMP_SPINCOUNT), unless the environment sets it
SPINCOUNT = "10000"


def _configure() -> int:
    """Pick the threading layer (see above); the most threads numba's parallel kernels may use."""
    try:
        import numba
    except Exception:  # pragma: no cover - numba is a dependency
        return 1
    cfg = numba.config
    if not os.environ.get("NUMBA_THREADING_LAYER"):
        cfg.THREADING_LAYER_PRIORITY = list(LAYER_PRIORITY)  # type: ignore[attr-defined]
        cfg.THREADING_LAYER = "default"  # type: ignore[attr-defined]
    if not os.environ.get("OMP_WAIT_POLICY"):
        os.environ.setdefault("GOMP_SPINCOUNT", SPINCOUNT)
    return int(cfg.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


#: the most threads numba's parallel kernels may use
NUMBA_MAX = _configure()
_local = threading.local()  # .n: numba threads of the invoke running on this thread
_gate = threading.Lock()  # held by the invoke whose parallel kernels run now


def numba_threads() -> int:
    """How many threads the numba parallel kernels of the invoke running on this thread may use
    (1 outside an invoke with num_threads > 1, or while another thread's invoke holds them)."""
    return getattr(_local, "n", 1)


def threading_layer() -> str:
    """The threading layer numba's parallel kernels run on (loads it: for reports and tests)."""
    import numba

    numba.get_num_threads()  # starts the layer's threads
    return str(numba.threading_layer())


class ThreadLimit:
    """The thread limits of one compiled partition: `run(steps)` runs them with the BLAS pools
    and numba's parallel kernels at num_threads (when `active`).

    Threads pay only while the other cores are free: on a machine whose cores other jobs keep
    busy, a band (or a BLAS thread) waits for a core, and an invoke was measured 3 to 100 times
    slower than on one thread. So the partition times its invokes (wall clock, a moving average
    of each way: num_threads everywhere, or one thread everywhere) and every PROBE-th invoke
    runs the other way; it keeps to the faster. The int8 results do not depend on the way (the
    kernels are bit-exact across thread counts), the float ones stay within rounding."""

    #: invokes between two of the other way's
    PROBE = 32

    def __init__(self, num_threads: int, big_gemm: bool):
        self.n = int(num_threads) if num_threads is not None else -1
        self.active = self.n > 0 and big_gemm
        self.numba_n = max(1, min(self.n, NUMBA_MAX))
        self.invokes = 0
        self.seconds = [0.0, 0.0]  # moving average of an invoke: serial, parallel (0: not timed)
        self.parallel = True  # the way that was faster

    def run(self, steps: Iterable[Callable[[], None]]) -> None:
        n = self.numba_n
        if n > 1 and _gate.acquire(blocking=False):
            try:
                self.invokes += 1
                way = self.parallel != (self.invokes % self.PROBE == 0)
                t0 = perf_counter()
                if way:
                    self._run_parallel(steps, n)
                else:
                    self._run_serial(steps, 1)
                self._timed(way, perf_counter() - t0)
            finally:
                _gate.release()
        else:
            self._run_serial(steps, self.n)

    def _timed(self, way: bool, dt: float) -> None:
        if self.invokes <= 2:  # the first parallel invoke compiles the parallel kernels
            return
        s = self.seconds
        s[way] = dt if s[way] == 0.0 else 0.75 * s[way] + 0.25 * dt
        if s[0] and s[1]:
            self.parallel = s[1] <= s[0]

    @staticmethod
    def _run_serial(steps: Iterable[Callable[[], None]], blas_n: int) -> None:
        with blas_threads(blas_n):
            for f in steps:
                f()

    def _run_parallel(self, steps: Iterable[Callable[[], None]], n: int) -> None:
        # numba's own count (per thread) only when it must drop below NUMBA_MAX: asking starts
        # the threading layer, which a partition without parallel kernels never needs
        lower = n < NUMBA_MAX
        if lower:
            import numba

            prev_numba = numba.get_num_threads()
            numba.set_num_threads(n)
        _local.n = n
        try:
            with blas_threads(self.n):
                for f in steps:
                    f()
        finally:
            _local.n = 1
            if lower:
                numba.set_num_threads(prev_numba)
