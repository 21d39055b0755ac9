"""Constant folding at prepare (Executor.prepare / _foldable): shape computations over shapes the
plan knows, and constant expressions, run once at allocate_tensors and leave the plan; their
values are shown to kernels and delegates as constants."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from cf_models import loop_model
from oracle import assert_exact, run_litert

from acelera.core.builder import ModelBuilder
from acelera.core.executor import MAX_FOLDED_BYTES
from acelera.core.interpreter import Interpreter, InterpreterWithCustomOps, OpResolverType

F32, I32 = np.float32, np.int32


def reshape_chain_model() -> tuple[bytes, dict[str, int]]:
    """x[-1, 4, 6] -> SHAPE -> STRIDED_SLICE (batch) -> PACK [batch, 24] -> RESHAPE(x) -> RELU,
    the converter's flatten of an unfixed batch; the packed shape is an output too."""
    b = ModelBuilder()
    x = b.add_input("x", (2, 4, 6), F32, shape_signature=(-1, 4, 6))
    shp = b.add_tensor("shape", (3,), I32)
    batch = b.add_tensor("batch", (), I32)
    target = b.add_tensor("target", (2,), I32)
    flat = b.add_tensor("flat", (2, 24), F32, shape_signature=(-1, 24))
    y = b.add_tensor("y", (2, 24), F32, shape_signature=(-1, 24))
    begin, end, strides = (b.add_constant(n, np.array(v, I32)) for n, v in
                           (("begin", [0]), ("end", [1]), ("strides", [1])))
    width = b.add_constant("width", np.array(24, I32))
    nodes = {
        "shape": b.add_operator("SHAPE", [x], [shp], out_type=2),
        "slice": b.add_operator("STRIDED_SLICE", [shp, begin, end, strides], [batch], shrink_axis_mask=1),
        "pack": b.add_operator("PACK", [batch, width], [target], values_count=2, axis=0),
        "reshape": b.add_operator("RESHAPE", [x, target], [flat]),
        "relu": b.add_operator("RELU", [flat], [y]),
    }
    b.mark_outputs(y, target)
    return b.build(), nodes


def reference(model: bytes, **kw) -> Interpreter:
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF, **kw)
    it.allocate_tensors()
    return it


def plan_nodes(it: Interpreter) -> list[int]:
    return [n for s in it._rt.ex.plan for n in s.nodes]


def invoke(it: Interpreter, x: np.ndarray) -> list[np.ndarray]:
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def test_shape_chain_is_folded_and_matches_litert():
    model, nodes = reshape_chain_model()
    it = reference(model)
    ex = it._rt.ex
    assert plan_nodes(it) == [nodes["reshape"], nodes["relu"]]
    assert it.delegation is None or set(it.delegation.folded) >= {nodes["shape"], nodes["slice"], nodes["pack"]}
    x = np.random.default_rng(0).standard_normal((2, 4, 6)).astype(F32)
    want = run_litert(model, [x])
    for _ in range(3):  # graph outputs computed by folded nodes read correctly at every invoke
        got = invoke(it, x)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
    # the RESHAPE's kernel and the delegates see the folded target as a constant
    target = ex.sg.operators[nodes["reshape"]].inputs[1]
    ctx = ex.node_context(nodes["reshape"])
    assert ctx.inputs[1].is_constant and ctx.const(1).tolist() == [2, 24]
    assert not ex.sg.tensors[target].is_constant  # the model itself is unchanged
    assert_exact(model, [x])


def test_folded_values_are_read_only():
    model, nodes = reshape_chain_model()
    ex = reference(model)._rt.ex
    assert ex.folded
    for t in ex.folded:
        assert not ex.values[t].flags.writeable
        with pytest.raises(ValueError):
            ex.values[t][...] = 0


def test_resize_folds_again():
    model, nodes = reshape_chain_model()
    it = reference(model)
    rng = np.random.default_rng(1)
    for batch in (5, 1, 3):
        x = rng.standard_normal((batch, 4, 6)).astype(F32)
        it.resize_tensor_input(it.get_input_details()[0]["index"], [batch, 4, 6])
        it.allocate_tensors()
        assert plan_nodes(it) == [nodes["reshape"], nodes["relu"]]
        got = invoke(it, x)
        want = run_litert(model, [x])
        assert got[0].shape == (batch, 24) and got[1].tolist() == [batch, 24]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_xnnpack_takes_the_reshape():
    from acelera.registrar.registry import load_delegate

    model, nodes = reshape_chain_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = Interpreter(model_content=model, experimental_delegates=[load_delegate("xnnpack-cpu", {})],
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
    rep = it.delegation
    assert set(rep.folded) == {nodes["shape"], nodes["slice"], nodes["pack"]}
    assert rep.nodes_of("xnnpack-cpu") == sorted([nodes["reshape"], nodes["relu"]])
    assert all(s.delegate == "xnnpack-cpu" for s in it._rt.ex.plan)
    x = np.random.default_rng(2).standard_normal((2, 4, 6)).astype(F32)
    got = invoke(it, x)
    for g, w in zip(got, run_litert(model, [x])):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def fill_model(dims: list[int]) -> tuple[bytes, int]:
    """FILL(constant dims, 1.0) + x: a constant expression feeding a run-time ADD."""
    b = ModelBuilder()
    x = b.add_input("x", dims, F32)
    d = b.add_constant("dims", np.array(dims, I32))
    v = b.add_constant("value", np.array(1.5, F32))
    ones = b.add_tensor("ones", dims, F32)
    y = b.add_tensor("y", dims, F32)
    fill = b.add_operator("FILL", [d, v], [ones])
    b.add_operator("ADD", [x, ones], [y])
    b.mark_outputs(y)
    return b.build(), fill


@pytest.mark.parametrize("dims, folded", [([4, 8], True), ([128, 128], True), ([129, 128], False)])
def test_folded_outputs_are_size_capped(dims, folded):
    assert 128 * 128 * 4 == MAX_FOLDED_BYTES
    model, fill = fill_model(dims)
    it = reference(model)
    assert (fill not in plan_nodes(it)) == folded
    x = np.random.default_rng(3).standard_normal(dims).astype(F32)
    got = invoke(it, x)
    np.testing.assert_array_equal(got[0], x + np.float32(1.5))
    assert_exact(model, [x])


def test_random_ops_are_never_folded():
    b = ModelBuilder()
    shape = b.add_constant("shape", np.array([3, 4], I32))
    r = b.add_tensor("r", (3, 4), F32)
    node = b.add_operator("RANDOM_UNIFORM", [shape], [r], seed=0, seed2=0)
    b.mark_outputs(r)
    it = reference(b.build())
    assert plan_nodes(it) == [node]
    it.invoke()
    first = it.get_tensor(it.get_output_details()[0]["index"]).copy()
    it.invoke()
    second = it.get_tensor(it.get_output_details()[0]["index"])
    assert not np.array_equal(first, second)  # an unseeded generator draws anew at every invoke


def test_variable_ops_are_never_folded():
    b = ModelBuilder()
    x = b.add_input("x", (2,), F32)
    h = b.add_tensor("h", (), "RESOURCE")
    init = b.add_constant("init", np.array([1.0, 2.0], F32))
    y = b.add_tensor("y", (2,), F32)
    z = b.add_tensor("z", (2,), F32)
    b.add_operator("VAR_HANDLE", [], [h], shared_name="v")
    b.add_operator("ASSIGN_VARIABLE", [h, init], [])
    b.add_operator("READ_VARIABLE", [h], [y])
    b.add_operator("ADD", [x, y], [z])
    b.mark_outputs(z)
    it = reference(b.build())
    assert plan_nodes(it) == [0, 1, 2, 3] and not it._rt.ex.folded
    got = invoke(it, np.array([10.0, 20.0], F32))
    np.testing.assert_array_equal(got[0], [11.0, 22.0])


def test_a_users_kernel_is_never_folded():
    calls = []

    def my_ops(r):
        def prepare(node):
            def run(d, v):
                calls.append(1)
                return np.full(tuple(int(k) for k in d), v, np.float32)
            return run
        r.add_builtin("FILL", prepare)

    model, fill = fill_model([2, 3])
    it = InterpreterWithCustomOps(custom_op_registerers=[my_ops], model_content=model)
    it.allocate_tensors()
    assert fill in plan_nodes(it)
    n = len(calls)
    invoke(it, np.zeros((2, 3), F32))
    assert len(calls) == n + 1


def test_constant_failure_stays_a_run_time_error():
    """A constant expression whose kernel fails on its real values (a GATHER_ND index out of
    range, which the shape pass lets through) is not folded: allocate_tensors succeeds and
    invoke fails, as without folding."""
    from acelera.core.errors import AceleraError

    b = ModelBuilder()
    x = b.add_input("x", (1, 2), F32)
    params = b.add_constant("params", np.array([[1.0, 2.0], [3.0, 4.0]], F32))
    idx = b.add_constant("idx", np.array([[5]], I32))
    g = b.add_tensor("g", (1, 2), F32)
    y = b.add_tensor("y", (1, 2), F32)
    node = b.add_operator("GATHER_ND", [params, idx], [g])
    b.add_operator("ADD", [x, g], [y])
    b.mark_outputs(y)
    it = reference(b.build())
    assert node in plan_nodes(it)
    with pytest.raises(AceleraError, match="GATHER_ND"):
        invoke(it, np.zeros((1, 2), F32))


def _shape_in_loop_model() -> bytes:
    """while i < n: i += 1; rows = SHAPE(acc); acc = concat(acc, x): the loop variable `acc`
    grows every iteration, so SHAPE of it must run at invoke, never be folded at prepare."""
    def body(g, bi):
        i, n, acc, x, rows = bi
        one = g.add_constant("one", np.array(1, I32))
        i2 = g.add_tensor("i2", (), I32)
        g.add_operator("ADD", [i, one], [i2])
        rows2 = g.add_tensor("rows2", (2,), I32)
        g.add_operator("SHAPE", [acc], [rows2], out_type=2)
        acc2 = g.add_tensor("acc2", (2, 2), F32, shape_signature=(-1, 2))
        g.add_operator("CONCATENATION", [acc, x], [acc2], axis=0)
        return i2, n, acc2, x, rows2

    specs = [("i", (), I32, None), ("n", (), I32, None), ("acc", (1, 2), F32, (-1, 2)),
             ("x", (1, 2), F32, None), ("rows", (2,), I32, None)]
    return loop_model(ModelBuilder(), specs, body, (2, 4))


@pytest.mark.parametrize("n", [1, 3, 5])
def test_shape_of_a_loop_variable_that_grows_is_not_folded(n):
    x = np.array([[1.5, -2]], np.float32)
    got = assert_exact(_shape_in_loop_model(), [np.array(0, np.int32), np.array(n, np.int32),
                                                np.zeros((1, 2), np.float32), x, np.zeros(2, np.int32)])
    assert got[0].shape == (n + 1, 2)
    assert list(got[1]) == [n, 2]


def test_fold_constants_false_keeps_litert_plan():
    """Interpreter(fold_constants=False) (what certification uses) keeps SHAPE, STRIDED_SLICE and
    PACK in the plan, with the same outputs."""
    model, _ = reshape_chain_model()
    outs = []
    plans = []
    for fold in (True, False):
        it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                         fold_constants=fold)
        it.allocate_tensors()
        d = it.get_input_details()[0]
        it.set_tensor(d["index"], np.arange(48, dtype=F32).reshape(2, 4, 6) - 20)
        it.invoke()
        outs.append([it.get_tensor(o["index"]) for o in it.get_output_details()])
        plans.append(sorted(n for step in it.execution_plan for n in step.nodes))
    assert len(plans[1]) == len(plans[0]) + 3
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
