"""--num_threads for the delegate: the BLAS pools are limited around each invoke.

threadpoolctl finds the loaded pools once; per invoke only their get/set functions run, and
only for partitions with a GEMM large enough for OpenBLAS to split (smaller ones run on one
thread whatever the setting). Numba kernels here are single-threaded.
"""
from __future__ import annotations

_libs = None


def blas_pools() -> list:
    global _libs
    if _libs is None:
        try:
            from threadpoolctl import ThreadpoolController

            _libs = [lib for lib in ThreadpoolController().lib_controllers]
        except Exception:  # pragma: no cover - threadpoolctl is a dependency
            _libs = []
    return _libs


class ThreadLimit:
    def __init__(self, num_threads: int, big_gemm: bool):
        self.n = int(num_threads) if num_threads is not None else -1
        self.active = self.n > 0 and big_gemm and bool(blas_pools())

    def run(self, steps) -> None:
        n = self.n
        libs = blas_pools()
        old = [lib.get_num_threads() for lib in libs]
        changed = [(lib, o) for lib, o in zip(libs, old) if o != n]
        for lib, _ in changed:
            lib.set_num_threads(n)
        try:
            for f in steps:
                f()
        finally:
            for lib, o in changed:
                lib.set_num_threads(o)
