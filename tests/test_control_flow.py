"""Control flow (IF, WHILE, CALL_ONCE), resource variables, hashtables and data-dependent
shapes, each checked against LiteRT on models built with the ModelBuilder."""
from __future__ import annotations

import numpy as np
import pytest
from cf_models import (
    case_model,
    hashtable_model,
    if_model,
    variable_model,
    where_gather_model,
    while_sum_model,
)
from oracle import assert_exact, run_acelera, run_litert

from acelera.core.builder import ModelBuilder
from acelera.core.errors import AceleraError, ModelError
from acelera.core.interpreter import Interpreter
from acelera.core.model import load_model


def test_while_loop_matches_litert():
    model = while_sum_model()
    inputs = [np.array(0, np.int32), np.array(5, np.int32), np.array([1, -1], np.float32),
              np.array([0.5, 2], np.float32)]
    got = assert_exact(model, inputs)
    assert got[0] == 5


def test_while_loop_zero_iterations():
    model = while_sum_model()
    inputs = [np.array(3, np.int32), np.array(0, np.int32), np.array([1, -1], np.float32),
              np.array([0.5, 2], np.float32)]
    assert_exact(model, inputs)


@pytest.mark.parametrize("cond", [True, False])
def test_if_matches_litert(cond):
    assert_exact(if_model(), [np.array([cond]), np.array([1, 2, 3], np.float32)])


def test_loop_limit_is_an_error(monkeypatch):
    from acelera.core.kernels import control_flow

    monkeypatch.setattr(control_flow, "MAX_LOOP_ITERATIONS", 10)
    with pytest.raises(AceleraError, match="did not finish after 10 iterations"):
        run_acelera(while_sum_model(), [np.array(0, np.int32), np.array(1000, np.int32),
                                        np.zeros(2, np.float32), np.zeros(2, np.float32)])


def test_subgraph_cycle_refused():
    b = ModelBuilder()
    x = b.add_input("x", (1,), np.float32)
    y = b.add_tensor("y", (1,), np.float32)
    c = b.add_input("c", (1,), np.bool_)
    g = b.add_subgraph("loop")
    b.add_operator("IF", [c, x], [y], then_subgraph_index=1, else_subgraph_index=1)
    b.mark_outputs(y)
    gc = g.add_input("c", (1,), np.bool_)
    gx = g.add_input("x", (1,), np.float32)
    gy = g.add_tensor("y", (1,), np.float32)
    g.add_operator("IF", [gc, gx], [gy], then_subgraph_index=1, else_subgraph_index=0)
    g.mark_outputs(gy)
    with pytest.raises(ModelError, match="cycle"):
        load_model(b.build())


def test_subgraph_index_out_of_range_refused():
    b = ModelBuilder()
    c = b.add_input("c", (1,), np.bool_)
    x = b.add_input("x", (1,), np.float32)
    y = b.add_tensor("y", (1,), np.float32)
    b.add_operator("IF", [c, x], [y], then_subgraph_index=7, else_subgraph_index=0)
    b.mark_outputs(y)
    with pytest.raises(ModelError, match="out of range"):
        load_model(b.build())


def test_unsupported_op_in_body_fails_at_allocate():
    b = ModelBuilder()
    c = b.add_input("c", (1,), np.bool_)
    x = b.add_input("x", (1,), np.float32)
    y = b.add_tensor("y", (1,), np.float32)
    then, else_ = b.add_subgraph("then"), b.add_subgraph("else")
    b.add_operator("IF", [c, x], [y], then_subgraph_index=1, else_subgraph_index=2)
    b.mark_outputs(y)
    for g in (then, else_):
        gx = g.add_input("x", (1,), np.float32)
        gy = g.add_tensor("y", (1,), np.float32)
        g.add_operator("CUSTOM", [gx], [gy], custom_code="NoSuchOp")
        g.mark_outputs(gy)
    it = Interpreter(model_content=b.build())
    with pytest.raises(AceleraError, match="subgraph 1 node 0.*NoSuchOp"):
        it.allocate_tensors()


def _invoke(it, x):
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def test_variables_keep_state_like_litert():
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    model = variable_model()
    ours, theirs = Interpreter(model_content=model), LiteRT(model_content=model)
    ours.allocate_tensors()
    theirs.allocate_tensors()
    x = np.array([1, 2], np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(_invoke(ours, x), _invoke(theirs, x))
    np.testing.assert_array_equal(_invoke(ours, x), [14, 28])


def test_reset_all_variables_restarts_resource_variables():
    it = Interpreter(model_content=variable_model())
    it.allocate_tensors()
    x = np.array([1, 2], np.float32)
    _invoke(it, x)
    _invoke(it, x)
    it.reset_all_variables()
    np.testing.assert_array_equal(_invoke(it, x), [11, 22])


def test_read_before_assign_is_an_error():
    b = ModelBuilder()
    h = b.add_tensor("h", (), "RESOURCE")
    b.add_operator("VAR_HANDLE", [], [h], container="", shared_name="nope")
    v = b.add_tensor("v", (2,), np.float32)
    b.add_operator("READ_VARIABLE", [h], [v])
    b.mark_outputs(v)
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    with pytest.raises(AceleraError, match="read before it was assigned"):
        it.invoke()


def test_hashtable_matches_litert():
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    model = hashtable_model()
    q = np.array([b"dog", b"cow", b"cat"])
    results = []
    for cls in (LiteRT, Interpreter):
        it = cls(model_content=model)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], q)
        it.invoke()
        results.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(results[1][0], [2, -1, 1])


def test_data_dependent_shapes_replan_at_invoke():
    model = where_gather_model()
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    out = it.get_output_details()[0]["index"]
    for x in ([1, -1, 2, -2, 3, 0], [-1, -1, -1, -1, -1, 5], [1, 1, 1, 1, 1, 1], [-1] * 6):
        x = np.array(x, np.float32)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        np.testing.assert_array_equal(it.get_tensor(out), x[x > 0] * 2)
    assert_exact(model, [np.array([3, -1, 2, 0, 1, -5], np.float32)])
    assert tuple(it.get_output_details()[0]["shape"]) == (0,)


def test_strings_round_trip_through_gather():
    b = ModelBuilder()
    s = b.add_input("s", (4,), np.bytes_)
    i = b.add_input("i", (2,), np.int32)
    o = b.add_tensor("o", (2,), np.bytes_)
    b.add_operator("GATHER", [s, i], [o], axis=0)
    b.mark_outputs(o)
    got = run_acelera(b.build(), [np.array([b"a", b"bb", b"", b"dddd"], object), np.array([3, 1], np.int32)])
    want = run_litert(b.build(), [np.array([b"a", b"bb", b"", b"dddd"]), np.array([3, 1], np.int32)])
    assert [bytes(v) for v in got[0]] == [bytes(v) for v in want[0]] == [b"dddd", b"bb"]


@pytest.mark.parametrize("delegate", ["xnnpack-cpu", "nnapi"])
def test_delegated_partition_falls_back_when_shapes_change(delegate):
    import warnings

    from cf_models import runtime_reshape_model

    from acelera import load_delegate

    it = Interpreter(model_content=runtime_reshape_model(), experimental_delegates=[load_delegate(delegate)])
    it.allocate_tensors()
    assert it.delegation.node_delegate == {1: delegate, 2: delegate}
    x = np.arange(6, dtype=np.float32)
    for shape, warns in (([2, 3], False), ([3, 2], True), ([6, 1], False)):
        it.set_tensor(0, x)
        it.set_tensor(1, np.array(shape, np.int32))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            it.invoke()
        assert bool(w) == warns
        np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]),
                                      (x * 2 + 2).reshape(shape))
    assert it.delegation.node_delegate == {}
    assert "input shapes changed at invoke" in it.delegation.failures[0][2]



@pytest.mark.parametrize("index", [0, 1, 2, 7, -1])
def test_stablehlo_case_matches_litert(index):
    """Out-of-range indices select the last branch, as LiteRT's kernel does. BUILTIN_REF has no
    STABLEHLO_CASE, so LiteRT's builtin kernels are the oracle."""
    got = assert_exact(case_model(), [np.array(index, np.int32), np.array([1, 2, 3], np.float32)],
                       reference="builtin")
    want = {0: [2, 3, 4], 1: [3, 6, 9]}.get(index, [-1, -2, -3])
    np.testing.assert_array_equal(got[0], want)
