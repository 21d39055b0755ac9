"""What acelera changes in the process: BLAS/OpenMP pools only while a limited call runs
(acelera.core.threads), glibc's malloc thresholds only once an Interpreter is made."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from acelera import Interpreter
from acelera.core import executor
from acelera.core.builder import ModelBuilder
from acelera.core.interpreter import OpResolverType
from acelera.core.threads import blas_pools, blas_threads
from acelera.samples import tiny_cnn


def pool_sizes() -> list[int]:
    return [lib.get_num_threads() for lib in blas_pools()]


def test_blas_threads_limits_the_pools_inside_and_restores_them_after():
    before = pool_sizes()
    assert before, "numpy's BLAS was not found by threadpoolctl"
    other = 1 if max(before) > 1 else 2
    with blas_threads(other):
        assert pool_sizes() == [other] * len(before)
        with blas_threads(other):  # already there: nothing set, nothing restored
            assert pool_sizes() == [other] * len(before)
        assert pool_sizes() == [other] * len(before)
    assert pool_sizes() == before
    for n in (None, 0, -1):  # no limit
        with blas_threads(n):
            assert pool_sizes() == before
    try:
        with blas_threads(other):
            raise KeyError("x")
    except KeyError:
        pass
    assert pool_sizes() == before


def big_fc() -> bytes:
    """One FULLY_CONNECTED with a 64 x 128 weight matrix: big enough for OpenBLAS to split."""
    b = ModelBuilder()
    x = b.add_input("x", (4, 128), np.float32)
    w = b.add_constant("w", np.ones((64, 128), np.float32))
    y = b.add_tensor("y", (4, 64), np.float32)
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y])
    b.mark_outputs(y)
    return b.build()


@pytest.mark.parametrize("model,limited", [(big_fc, True), (tiny_cnn, False)])
def test_interpreter_num_threads_leaves_the_pools_as_they_were(model, limited):
    """Limited during invoke where a BLAS call could split (restored after); a model whose
    every tensor is under threads.BLAS_SPLIT_ELEMENTS never touches the pools."""
    before = pool_sizes()
    seen = []
    it = Interpreter(model_content=model(), num_threads=1 if max(before) > 1 else 2,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    it.set_tensor(inp["index"], np.zeros(inp["shape"], inp["dtype"]))
    run = it._rt.ex.run

    def spy() -> None:
        seen.append(pool_sizes())
        run()
    it._rt.ex.run = spy
    it.invoke()
    assert seen == [[it.num_threads] * len(before) if limited else before]
    assert pool_sizes() == before


def test_malloc_is_tuned_by_the_first_interpreter_not_at_import(monkeypatch):
    code = ("import acelera, acelera.core.executor as e; import acelera.cli.app; print(e._malloc_tuned); "
            "from acelera.samples import tiny_cnn; acelera.Interpreter(model_content=tiny_cnn()); print(e._malloc_tuned)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]

    calls = []

    class FakeLibc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1
    monkeypatch.setattr(executor, "_malloc_tuned", False)
    monkeypatch.setattr("ctypes.CDLL", lambda name: FakeLibc())
    monkeypatch.delenv("ACELERA_NO_MALLOPT", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    for _ in range(3):
        Interpreter(model_content=tiny_cnn(), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    assert calls == [(-3, 256 << 20), (-1, 512 << 20)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD: once
