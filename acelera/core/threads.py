"""`num_threads` for the BLAS/OpenMP pools numpy (and scipy, numba) use: limited around a call.

The Interpreter's `num_threads` and the xnnpack-cpu delegate's `--num_threads` both go through
`blas_threads(n)`: every pool threadpoolctl found is set to n for the call and put back to its
own setting afterwards, so nothing outside the call sees the limit. threadpoolctl finds the
loaded libraries once (its `threadpool_limits` looks again on every use, about 0.4 ms, and its
limiter object costs about 30 us); per call only each library's own get/set functions run, a
few microseconds, and nothing is set when a pool is already at n.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, Sequence

_pools: list[Any] | None = None


def blas_pools() -> list[Any]:
    """threadpoolctl's controllers of the BLAS/OpenMP libraries loaded when first asked."""
    global _pools
    if _pools is None:
        from threadpoolctl import ThreadpoolController

        _pools = list(ThreadpoolController().lib_controllers)
    return _pools


@contextlib.contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Run the `with` body with every BLAS/OpenMP pool at `n` threads, restoring them after;
    None or n < 1 leaves the pools as they are."""
    if n is None or n < 1:
        yield
        return
    changed = []
    try:
        for lib in _pools if _pools is not None else blas_pools():
            before = lib.get_num_threads()
            if before != n:
                lib.set_num_threads(n)
                changed.append((lib, before))
        yield
    finally:
        for lib, before in changed:
            lib.set_num_threads(before)


#: OpenBLAS runs a GEMM on one thread below M*N*K = 64**3 and a GEMV below about 9,216 matrix
#: elements, so a graph whose every tensor is smaller than this never uses a second BLAS thread
BLAS_SPLIT_ELEMENTS = 4096


def blas_may_split(shapes: Iterable[Sequence[int]]) -> bool:
    """Whether a graph with tensors of these shapes can reach a BLAS call big enough for its
    pool to use more than one thread (an unknown dimension, -1, counts as 1: at worst a BLAS
    call then runs on more threads than asked, never with another result)."""
    for shape in shapes:
        n = 1
        for d in shape:
            n *= max(d, 1)
        if n >= BLAS_SPLIT_ELEMENTS:
            return True
    return False
