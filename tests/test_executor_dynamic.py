"""The executor's invoke-time shape handling: loop bodies whose tensors change shape every
iteration (growing loop variables, slices sized by the loop counter), repeated invokes that
reuse the steps prepared at invoke, and recovery after an invoke fails half-way. Each model is
checked against LiteRT."""
from __future__ import annotations

import numpy as np
import pytest
from cf_models import loop_model
from oracle import assert_exact, run_litert

from acelera.core.builder import ModelBuilder
from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter, OpResolverType

F32, I32 = np.float32, np.int32


def growing_model() -> bytes:
    """while i < n: i += 1; acc = concat(acc, x): a loop variable one row longer each time."""
    def body(g, bi):
        i, n, acc, x = bi
        one = g.add_constant("one", np.array(1, I32))
        i2 = g.add_tensor("i2", (), I32)
        g.add_operator("ADD", [i, one], [i2])
        acc2 = g.add_tensor("acc2", (2, 2), F32, shape_signature=(-1, 2))
        g.add_operator("CONCATENATION", [acc, x], [acc2], axis=0)
        return i2, n, acc2, x

    specs = [("i", (), I32, None), ("n", (), I32, None), ("acc", (1, 2), F32, (-1, 2)), ("x", (1, 2), F32, None)]
    return loop_model(ModelBuilder(), specs, body, (0, 2))


def prefix_sum_model() -> bytes:
    """while i < n: i += 1; acc += sum(seq[:i]): a slice sized by the counter, so the slice
    and the reduction change shape every iteration and repeat them on the next invoke."""
    def body(g, bi):
        i, n, acc, seq = bi
        one = g.add_constant("one", np.array(1, I32))
        i2 = g.add_tensor("i2", (), I32)
        g.add_operator("ADD", [i, one], [i2])
        shape1 = g.add_constant("shape1", np.array([1], I32))
        i1 = g.add_tensor("i1", (1,), I32)
        g.add_operator("RESHAPE", [i2, shape1], [i1])
        rest = g.add_constant("rest", np.array([-1], I32))
        size = g.add_tensor("size", (2,), I32)
        g.add_operator("CONCATENATION", [i1, rest], [size], axis=0)
        begin = g.add_constant("begin", np.array([0, 0], I32))
        cut = g.add_tensor("cut", (1, 3), F32, shape_signature=(-1, 3))
        g.add_operator("SLICE", [seq, begin, size], [cut])
        axis = g.add_constant("axis", np.array([0], I32))
        total = g.add_tensor("total", (3,), F32)
        g.add_operator("SUM", [cut, axis], [total], keep_dims=False)
        acc2 = g.add_tensor("acc2", (3,), F32)
        g.add_operator("ADD", [acc, total], [acc2])
        return i2, n, acc2, seq

    specs = [("i", (), I32, None), ("n", (), I32, None), ("acc", (3,), F32, None), ("seq", (5, 3), F32, None)]
    return loop_model(ModelBuilder(), specs, body, (2,))


def gather_loop_model() -> bytes:
    """while i < n: acc += seq[i]; i += 1 (GATHER fails once i passes the sequence)."""
    def body(g, bi):
        i, n, acc, seq = bi
        row = g.add_tensor("row", (3,), F32)
        g.add_operator("GATHER", [seq, i], [row], axis=0)
        acc2 = g.add_tensor("acc2", (3,), F32)
        g.add_operator("ADD", [acc, row], [acc2])
        one = g.add_constant("one", np.array(1, I32))
        i2 = g.add_tensor("i2", (), I32)
        g.add_operator("ADD", [i, one], [i2])
        return i2, n, acc2, seq

    specs = [("i", (), I32, None), ("n", (), I32, None), ("acc", (3,), F32, None), ("seq", (4, 3), F32, None)]
    return loop_model(ModelBuilder(), specs, body, (2,))


def _interpreter(model: bytes) -> Interpreter:
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def _invoke(it: Interpreter, inputs) -> list[np.ndarray]:
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], np.asarray(x, d["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


@pytest.mark.parametrize("n", [0, 1, 4])
def test_growing_loop_variable_matches_litert(n):
    x = np.array([[1.5, -2]], F32)
    got = assert_exact(growing_model(), [np.array(0, I32), np.array(n, I32), np.zeros((1, 2), F32), x])
    assert got[1].shape == (n + 1, 2)


def test_growing_loop_repeated_invokes():
    """The same interpreter, invoked with loops of different lengths, matches fresh LiteRT runs."""
    model = growing_model()
    it = _interpreter(model)
    x = np.array([[0.5, 3]], F32)
    for n in (3, 1, 5, 3, 0, 2):
        inputs = [np.array(0, I32), np.array(n, I32), np.zeros((1, 2), F32), x]
        got = _invoke(it, inputs)
        want = run_litert(model, inputs)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_slice_sized_by_the_counter_matches_litert():
    model = prefix_sum_model()
    it = _interpreter(model)
    seq = np.arange(15, dtype=F32).reshape(5, 3) / 4
    for n in (5, 2, 5, 0, 4):
        inputs = [np.array(0, I32), np.array(n, I32), np.zeros(3, F32), seq]
        got = _invoke(it, inputs)
        np.testing.assert_array_equal(got[0], run_litert(model, inputs)[0])


def test_loop_body_steps_are_prepared_once_per_shape():
    """Re-running a loop whose body shapes alternate prepares no step again."""
    from acelera.core import executor

    model = prefix_sum_model()
    it = _interpreter(model)
    seq = np.ones((5, 3), F32)
    inputs = [np.array(0, I32), np.array(5, I32), np.zeros(3, F32), seq]
    _invoke(it, inputs)
    calls = []
    original = executor.Executor.reference_step

    def counting(self, i):
        calls.append(i)
        return original(self, i)

    executor.Executor.reference_step = counting
    try:
        got = _invoke(it, inputs)
    finally:
        executor.Executor.reference_step = original
    assert calls == []
    np.testing.assert_array_equal(got[0], [15, 15, 15])  # 1 + 2 + 3 + 4 + 5 rows of ones


def test_invoke_after_a_failed_loop_recovers():
    """A loop that fails part-way (index out of range) leaves the executors usable: the next
    invoke with valid inputs gives LiteRT's answer."""
    model = gather_loop_model()
    it = _interpreter(model)
    seq = np.arange(12, dtype=F32).reshape(4, 3)
    with pytest.raises(AceleraError, match="out of bounds"):
        _invoke(it, [np.array(0, I32), np.array(6, I32), np.zeros(3, F32), seq])
    for n in (4, 2):
        inputs = [np.array(0, I32), np.array(n, I32), np.zeros(3, F32), seq]
        np.testing.assert_array_equal(_invoke(it, inputs)[0], run_litert(model, inputs)[0])


def stale_model() -> bytes:
    """r = RESHAPE(x, s); y = GATHER(r, i); z = CONCATENATION(r, r): when GATHER fails after
    the reshape changed shape, CONCATENATION has not been re-prepared for the new shape."""
    b = ModelBuilder()
    x = b.add_input("x", (6,), F32)
    s = b.add_input("s", (2,), I32)
    i = b.add_input("i", (), I32)
    r = b.add_tensor("r", (2, 3), F32, shape_signature=(-1, -1))
    b.add_operator("RESHAPE", [x, s], [r])
    y = b.add_tensor("y", (3,), F32, shape_signature=(-1,))
    b.add_operator("GATHER", [r, i], [y], axis=0)
    z = b.add_tensor("z", (4, 3), F32, shape_signature=(-1, -1))
    b.add_operator("CONCATENATION", [r, r], [z], axis=0)
    b.mark_outputs(y, z)
    return b.build()


def test_failed_dynamic_run_does_not_leave_stale_steps():
    """After an invoke fails half-way through re-preparing steps, later invokes (some with the
    shapes of the failed one) give LiteRT's answers."""
    model = stale_model()
    it = _interpreter(model)
    x = np.arange(6, dtype=F32)
    _invoke(it, [x, np.array([2, 3], I32), np.array(1, I32)])
    with pytest.raises(AceleraError, match="out of bounds"):
        _invoke(it, [x, np.array([3, 2], I32), np.array(5, I32)])
    for shape, i in (([3, 2], 2), ([6, 1], 4), ([2, 3], 0)):
        inputs = [x, np.array(shape, I32), np.array(i, I32)]
        got = _invoke(it, inputs)
        want = run_litert(model, inputs)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
