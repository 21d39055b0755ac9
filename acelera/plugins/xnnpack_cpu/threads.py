"""--num_threads for the delegate: the BLAS pools and numba's thread count are limited around each
invoke.

acelera.core.threads limits the BLAS pools (threadpoolctl's limiter, pools restored afterwards),
and only for partitions with a GEMM large enough for OpenBLAS to split (smaller ones run on one
thread whatever the setting). The int8 numba kernels (qjit.py) run in parallel (prange) only
for steps that large too (their Spec.gemm_mnk says so); they read `numba_threads()` to pick
their serial version or the number of bands of their parallel one.
"""
from __future__ import annotations

from acelera.core.threads import blas_pools, blas_threads

__all__ = ["NUMBA_MAX", "ThreadLimit", "blas_pools", "numba_threads"]


def _numba_max() -> int:
    try:
        import numba

        return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    except Exception:  # pragma: no cover - numba is a dependency
        return 1


#: the most threads numba's parallel kernels may use
NUMBA_MAX = _numba_max()
#: numba threads of the invoke running now: 1 unless the delegate was given num_threads > 1
_numba_now = [1]


def numba_threads() -> int:
    """How many threads the numba parallel kernels of the running invoke may use."""
    return _numba_now[0]


class ThreadLimit:
    def __init__(self, num_threads: int, big_gemm: bool):
        self.n = int(num_threads) if num_threads is not None else -1
        self.active = self.n > 0 and big_gemm

    def run(self, steps) -> None:
        n = self.n
        prev = _numba_now[0]
        _numba_now[0] = min(n, NUMBA_MAX)
        try:
            with blas_threads(n):
                for f in steps:
                    f()
        finally:
            _numba_now[0] = prev
