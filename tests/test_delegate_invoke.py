"""A delegate kernel is checked on every invoke, and may fall back to the CPU when it raises."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from acelera.core.builder import ModelBuilder
from acelera.core.delegate import Delegate, DelegateKernel, OpSupport, OpTable
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.partition import DelegateInvokeError, DelegationWarning
from acelera.core.subplan import ReferenceKernel


def _model() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 10), np.float32)
    y = b.add_tensor("y", (1, 10), np.float32)
    z = b.add_tensor("z", (1, 10), np.float32)
    b.add_operator("RELU", [x], [y])
    b.add_operator("TANH", [y], [z])
    b.mark_outputs(z)
    return b.build()


class _Flaky(DelegateKernel):
    """The reference on the first (shape-pass) call, then `mode` at invoke."""

    def __init__(self, partition, mode: str):
        super().__init__(partition)
        self.inner, self.mode, self.calls = ReferenceKernel(partition), mode, 0

    def invoke(self, *inputs):
        self.calls += 1
        good = self.inner.invoke(*inputs)
        if self.calls == 1 or self.mode == "ok":
            return good
        if self.mode == "raise":
            raise RuntimeError("device lost")
        if self.mode == "shape":
            return (np.zeros((7, 10), np.float64),)
        if self.mode == "count":
            return tuple(good) + (good[0],)
        return (np.asarray(good[0], np.float64),)  # dtype


class Flaky(Delegate):
    backend = "cpu"

    def __init__(self, mode: str):
        super().__init__()
        self.name, self.mode = "flaky", mode
        self.op_table = OpTable.of([OpSupport("RELU", 1), OpSupport("TANH", 1)], "flaky")

    def prepare(self, partition):
        return _Flaky(partition, self.mode)


def _run(mode: str, fallback: bool = False) -> np.ndarray:
    it = Interpreter(model_content=_model(), experimental_delegates=[Flaky(mode)],
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.delegate_cpu_fallback = fallback
    it.allocate_tensors()
    it.set_tensor(0, np.linspace(-2, 2, 10, dtype=np.float32).reshape(1, 10))
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


EXPECTED = np.tanh(np.maximum(np.linspace(-2, 2, 10, dtype=np.float32), 0)).reshape(1, 10)


@pytest.mark.parametrize("mode, message", [
    ("shape", r"flaky delegate returned float64\[7, 10\] for output tensor 2 at invoke, the model declares float32\[1, 10\]"),
    ("dtype", r"flaky delegate returned float64\[1, 10\] for output tensor 2"),
    ("count", r"flaky delegate returned 2 outputs at invoke, expected 1"),
    ("raise", r"flaky delegate failed during invoke: RuntimeError: device lost"),
])
def test_bad_delegate_outputs_at_invoke_fail_naming_the_delegate(mode, message):
    with pytest.raises(DelegateInvokeError, match=message) as e:
        _run(mode)
    assert isinstance(e.value, RuntimeError) and "\n" not in str(e.value)


def test_cpu_fallback_runs_the_partition_on_the_reference_for_that_invoke():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = _run("raise", fallback=True)
    np.testing.assert_allclose(out, EXPECTED, rtol=1e-6)
    msgs = [str(x.message) for x in w if issubclass(x.category, DelegationWarning)]
    assert any("flaky delegate failed during invoke on nodes [0, 1] (RuntimeError: device lost)" in m and "CPU" in m for m in msgs)


def test_a_good_delegate_is_unchanged():
    np.testing.assert_allclose(_run("ok"), EXPECTED, rtol=1e-6)
