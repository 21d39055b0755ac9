"""The executor's compiled plan (compiled_plan.Compiled): kernels called from one generated
function, shapes checked only where they may change, and the loop it runs before it is
generated (each test runs both ways). Errors still name the node, a shape that changes
mid-plan re-prepares only what it reaches, op profiling keeps per-step times, and the zoo's
GRU/LSTM loop models stay exact across repeated invokes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cf_models import loop_model
from oracle import run_litert

from acelera.core import executor
from acelera.core.builder import ModelBuilder
from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter, OpResolverType

F32, I32 = np.float32, np.int32
ZOO = Path(__file__).parent / "models" / "zoo"


@pytest.fixture(autouse=True, params=["generated", "interpreted"])
def plan_form(request, monkeypatch):
    monkeypatch.setattr(executor, "COMPILE_AFTER", 0 if request.param == "generated" else 10**9)
    return request.param


def _interpreter(model: bytes | Path) -> Interpreter:
    kw = {"model_path": str(model)} if isinstance(model, Path) else {"model_content": model}
    it = Interpreter(**kw, num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def _invoke(it: Interpreter, inputs) -> list[np.ndarray]:
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], np.asarray(x, d["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def reshape_model() -> bytes:
    """y = RESHAPE(x, s) + 1; z = GATHER(y, i); w = (x + 1) * 2: a run-time shape in the middle
    of a static chain."""
    b = ModelBuilder()
    x = b.add_input("x", (6,), F32)
    s = b.add_input("s", (2,), I32)
    i = b.add_input("i", (), I32)
    one = b.add_constant("one", np.array(1, F32))
    two = b.add_constant("two", np.array(2, F32))
    r = b.add_tensor("r", (2, 3), F32, shape_signature=(-1, -1))
    b.add_operator("RESHAPE", [x, s], [r])
    y = b.add_tensor("y", (2, 3), F32, shape_signature=(-1, -1))
    b.add_operator("ADD", [r, one], [y], fused_activation_function="NONE")
    z = b.add_tensor("z", (3,), F32, shape_signature=(-1,))
    b.add_operator("GATHER", [y, i], [z], axis=0)
    x1 = b.add_tensor("x1", (6,), F32)
    b.add_operator("ADD", [x, one], [x1], fused_activation_function="NONE")
    w = b.add_tensor("w", (6,), F32)
    b.add_operator("MUL", [x1, two], [w], fused_activation_function="NONE")
    b.mark_outputs(y, z, w)
    return b.build()


def test_shape_change_mid_plan_matches_litert_and_prepares_each_shape_once():
    model = reshape_model()
    it = _interpreter(model)
    x = np.arange(6, dtype=F32)
    cases = [([2, 3], 1), ([3, 2], 2), ([6, 1], 5), ([2, 3], 0), ([3, 2], 1)]
    calls = []
    original = executor.Executor.reference_step

    def counting(self, i):
        calls.append(i)
        return original(self, i)

    executor.Executor.reference_step = counting
    try:
        for k, (shape, i) in enumerate(cases):
            if k == 3:
                calls.clear()  # every shape seen once: nothing is prepared again
            inputs = [x, np.array(shape, I32), np.array(i, I32)]
            got = _invoke(it, inputs)
            for g, want in zip(got, run_litert(model, inputs)):
                np.testing.assert_array_equal(g, want)
            assert got[0].shape == tuple(shape)
    finally:
        executor.Executor.reference_step = original
    assert calls == []


def test_kernel_error_in_compiled_plan_names_the_node_and_recovers():
    model = reshape_model()
    it = _interpreter(model)
    x = np.arange(6, dtype=F32)
    with pytest.raises(AceleraError, match=r"node 2 \(GATHER\)"):
        _invoke(it, [x, np.array([2, 3], I32), np.array(7, I32)])
    inputs = [x, np.array([3, 2], I32), np.array(2, I32)]
    for g, want in zip(_invoke(it, inputs), run_litert(model, inputs)):
        np.testing.assert_array_equal(g, want)


def test_profiled_run_times_every_step_and_gives_the_same_outputs():
    model = reshape_model()
    it = _interpreter(model)
    inputs = [np.arange(6, dtype=F32), np.array([3, 2], I32), np.array(1, I32)]
    want = _invoke(it, inputs)
    for d, v in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], v)
    times = it.invoke_profiled()
    assert len(times) == len(it._rt.ex.plan) and all(t >= 0 for t in times)
    got = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_only_steps_whose_shapes_may_change_are_checked(plan_form):
    """RESHAPE by a constant shape fixes its output shape; one fed at run time does not."""
    it = _interpreter(reshape_model())
    _invoke(it, [np.arange(6, dtype=F32), np.array([3, 2], I32), np.array(1, I32)])
    ex = it._rt.ex
    code = ex._compiled
    assert code is not None and (code.fn is not None) == (plan_form == "generated")
    assert [at for at in code.guard_at if at] == [(0,), (0,)]  # ADD and GATHER read the reshape
    assert code.checked == [True, True, True, False, False]


@pytest.mark.parametrize("name", ["gru_keras3_float32", "lstm_keras3_float32", "gru_tfkeras_float32"])
def test_recurrent_loop_models_repeat_exactly(name):
    path = ZOO / f"{name}.tflite"
    it = _interpreter(path)
    rng = np.random.default_rng(1)
    d = it.get_input_details()[0]
    for _ in range(3):
        x = rng.uniform(-1, 1, d["shape"]).astype(F32)
        got = _invoke(it, [x])[0]
        want = run_litert(path.read_bytes(), [x])[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(_invoke(it, [x])[0], got)


def growing_slices_model() -> bytes:
    """while i < n: i += 1; acc = concat(acc, seq[:i]): the concatenation's inputs change shape
    both through a guarded slice and through the loop variable itself."""

    def body(g, bi):
        i, n, acc, seq = bi
        one = g.add_constant("one", np.array(1, I32))
        i2 = g.add_tensor("i2", (), I32)
        g.add_operator("ADD", [i, one], [i2])
        i1 = g.add_tensor("i1", (1,), I32)
        g.add_operator("RESHAPE", [i2, g.add_constant("shape1", np.array([1], I32))], [i1])
        s = g.add_tensor("s", (1,), F32, shape_signature=(-1,))
        g.add_operator("SLICE", [seq, g.add_constant("zero", np.array([0], I32)), i1], [s])
        acc2 = g.add_tensor("acc2", (2,), F32, shape_signature=(-1,))
        g.add_operator("CONCATENATION", [acc, s], [acc2], axis=0)
        return i2, n, acc2, seq

    specs = [("i", (), I32, None), ("n", (), I32, None), ("acc", (1,), F32, (-1,)), ("seq", (5,), F32, None)]
    return loop_model(ModelBuilder(), specs, body, (2,))


def test_guarded_variants_follow_changing_loop_variables():
    model = growing_slices_model()
    it = _interpreter(model)
    seq = np.arange(1, 6, dtype=F32)
    for start, n in ((0, 5), (2, 4), (0, 5), (4, 5), (1, 3)):
        inputs = [np.array(start, I32), np.array(n, I32), np.zeros(1, F32), seq]
        got = _invoke(it, inputs)[0]
        np.testing.assert_array_equal(got, run_litert(model, inputs)[0])


def test_an_axis_given_at_run_time_changes_the_output_shape():
    """MEAN over an axis tensor the model feeds at run time: the output shape follows the axis
    value, so the step is checked even though its input shapes never change."""
    b = ModelBuilder()
    x = b.add_input("x", (2, 3), F32)
    a = b.add_input("a", (1,), I32)
    two = b.add_constant("two", np.array(2, F32))
    m = b.add_tensor("m", (3,), F32, shape_signature=(-1,))
    b.add_operator("MEAN", [x, a], [m], keep_dims=False)
    y = b.add_tensor("y", (3,), F32, shape_signature=(-1,))
    b.add_operator("MUL", [m, two], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    it = _interpreter(b.build())
    x_val = np.arange(6, dtype=F32).reshape(2, 3)
    for axis in [0, 1, 0, 1] * 5:
        (got,) = _invoke(it, [x_val, [axis]])
        np.testing.assert_allclose(got, x_val.mean(axis=axis) * 2, rtol=1e-6)
        assert list(it.get_output_details()[0]["shape"]) == [3 if axis == 0 else 2]

