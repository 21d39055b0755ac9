"""allocate_tensors() checks a memory budget before allocating, and never leaks a raw MemoryError."""
from __future__ import annotations

import resource

import numpy as np
import pytest

from acelera import AceleraError
from acelera.core import memory
from acelera.core.builder import ModelBuilder
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.memory import MemoryBudgetError

REF = OpResolverType.BUILTIN_REF


def _chain(n: int, elems: int) -> bytes:
    """A tiny file whose n RELU activations each hold `elems` float32 values."""
    b = ModelBuilder()
    t = b.add_input("x", (elems,), np.float32)
    for i in range(n):
        nxt = b.add_tensor(f"t{i}", (elems,), np.float32)
        b.add_operator("RELU", [t], [nxt])
        t = nxt
    b.mark_outputs(t)
    return b.build()


def _big_conv() -> bytes:
    """64 MiB in and out, but a 6.4 GB im2col matrix."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 512, 512, 64), np.float32)
    w = b.add_constant("w", np.zeros((64, 7, 7, 64), np.float32))
    bias = b.add_constant("b", np.zeros(64, np.float32))
    y = b.add_tensor("y", (1, 512, 512, 64), np.float32)
    b.add_operator("CONV_2D", [x, w, bias], [y], padding="SAME", stride_w=1, stride_h=1,
                   fused_activation_function="NONE")
    b.mark_outputs(y)
    return b.build()


def test_twelve_gib_of_activations_in_a_1kb_file_are_refused_before_allocating():
    model = _chain(12, 1 << 28)
    assert len(model) < 2048
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    it = Interpreter(model_content=model, experimental_op_resolver_type=REF, max_memory_bytes=4 << 30)
    with pytest.raises(MemoryBudgetError, match=r"needs 13.00 GiB .* budget is 4.00 GiB") as e:
        it.allocate_tensors()
    assert isinstance(e.value, AceleraError) and "\n" not in str(e.value)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 256 * 1024  # KiB: nothing large allocated


def test_a_convolution_scratch_over_budget_is_named():
    # 128 MiB of activations + a 64 MiB band of the (tiled) im2col matrix
    it = Interpreter(model_content=_big_conv(), experimental_op_resolver_type=REF, max_memory_bytes=150 << 20)
    with pytest.raises(MemoryBudgetError, match=r"kernel scratch; .*largest scratch at node 0 \(CONV_2D\)"):
        it.allocate_tensors()


def test_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv("ACELERA_MAX_MEMORY_BYTES", str(1 << 19))
    it = Interpreter(model_content=_chain(3, 1 << 16), experimental_op_resolver_type=REF)
    assert it.max_memory_bytes == 1 << 19
    with pytest.raises(MemoryBudgetError, match="budget is 0.5 MiB"):
        it.allocate_tensors()
    monkeypatch.setenv("ACELERA_MAX_MEMORY_BYTES", "lots")
    with pytest.raises(MemoryBudgetError, match="ACELERA_MAX_MEMORY_BYTES"):
        Interpreter(model_content=_chain(1, 4), experimental_op_resolver_type=REF)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1G", True])
def test_bad_budgets_are_refused(bad):
    with pytest.raises(MemoryBudgetError, match="max_memory_bytes"):
        Interpreter(model_content=_chain(1, 4), experimental_op_resolver_type=REF, max_memory_bytes=bad)


def test_models_within_the_default_budget_run():
    it = Interpreter(model_content=_chain(3, 1 << 16), experimental_op_resolver_type=REF)
    assert it.max_memory_bytes == memory.default_budget() > 0
    it.allocate_tensors()
    it.set_tensor(0, np.full(1 << 16, -1, np.float32))
    it.invoke()
    assert it.get_tensor(it.get_output_details()[0]["index"]).max() == 0


def test_numpy_size_errors_never_escape_raw():
    b = ModelBuilder()
    x = b.add_input("x", (0, 2**31 - 1, 2**31 - 1), np.float32)
    y = b.add_tensor("y", (0, 2**31 - 1, 2**31 - 1), np.float32)
    b.add_operator("RELU", [x], [y])
    b.mark_outputs(y)
    it = Interpreter(model_content=b.build(), experimental_op_resolver_type=REF)
    with pytest.raises(AceleraError, match="cannot allocate tensors"):
        it.allocate_tensors()


def test_a_large_convolution_runs_in_bounded_im2col_tiles(monkeypatch):
    """The float conv builds its patch matrix a band of rows at a time: same result as whole."""
    from acelera.core.kernels import conv

    b = ModelBuilder()
    x = b.add_input("x", (1, 20, 18, 5), np.float32)
    rng = np.random.default_rng(0)
    w = b.add_constant("w", rng.standard_normal((7, 3, 3, 5)).astype(np.float32))
    bias = b.add_constant("b", rng.standard_normal(7).astype(np.float32))
    y = b.add_tensor("y", (1, 10, 9, 7), np.float32)
    b.add_operator("CONV_2D", [x, w, bias], [y], padding="SAME", stride_w=2, stride_h=2,
                   dilation_w_factor=1, dilation_h_factor=1, fused_activation_function="RELU")
    b.mark_outputs(y)
    model = b.build()
    xv = rng.standard_normal((1, 20, 18, 5)).astype(np.float32)

    def run() -> np.ndarray:
        it = Interpreter(model_content=model, experimental_op_resolver_type=REF)
        it.allocate_tensors()
        it.set_tensor(0, xv)
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"])
    whole = run()
    monkeypatch.setattr(memory, "TILE_BYTES", 2000)  # a band of one or two output rows
    calls = []
    orig = conv.Geometry.im2col_rows
    monkeypatch.setattr(conv.Geometry, "im2col_rows", lambda self, *a: calls.append(a) or orig(self, *a))
    tiled = run()
    assert len(calls) >= 5
    np.testing.assert_allclose(tiled, whole, rtol=1e-6, atol=1e-6)


def test_a_shape_that_data_makes_at_invoke_is_checked_before_the_next_step_allocates():
    """TILE's multiples are fed at run time: 64 MiB out of a 4 KiB input. The ADD after it is
    re-prepared for the new shape and refused before it allocates a second 64 MiB."""
    b = ModelBuilder()
    x = b.add_input("x", (1024,), np.float32)
    m = b.add_input("m", (1,), np.int32)
    one = b.add_constant("one", np.array(1, np.float32))
    t = b.add_tensor("t", (1024,), np.float32, shape_signature=(-1,))
    b.add_operator("TILE", [x, m], [t])
    y = b.add_tensor("y", (1024,), np.float32, shape_signature=(-1,))
    b.add_operator("ADD", [t, one], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    it = Interpreter(model_content=b.build(), experimental_op_resolver_type=REF, max_memory_bytes=96 << 20)
    it.allocate_tensors()
    x_in, m_in, y_out = it.get_input_details()[0]["index"], it.get_input_details()[1]["index"], \
        it.get_output_details()[0]["index"]
    it.set_tensor(x_in, np.ones(1024, np.float32))
    it.set_tensor(m_in, np.array([2], np.int32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(y_out), np.full(2048, 2, np.float32))
    it.set_tensor(m_in, np.array([1 << 14], np.int32))
    with pytest.raises(MemoryBudgetError, match=r"node 1 \(ADD\).*budget"):
        it.invoke()
    it.set_tensor(m_in, np.array([3], np.int32))  # back within the budget: runs again
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(y_out), np.full(3072, 2, np.float32))
