"""WHILE's loop runner (acelera/core/while_loop.py): loop variables that are constant in the
caller and passed through by the body ("pinned": the loop prepares its own cond and body with
them as constants), a body shared by two WHILE nodes, and the comparisons on 0-d operands that
conditions use, each checked against LiteRT."""
from __future__ import annotations

import gc

import numpy as np
import pytest
from oracle import assert_exact, assert_matches_litert

from acelera.core.builder import In, ModelBuilder, Out, single_op_model
from acelera.core.interpreter import Interpreter
from acelera.core.while_loop import WhileLoop

F32, I32 = np.float32, np.int32


def _rnn_model(shared_body: bool) -> bytes:
    """h = tanh(FC(h, W, b)) over i < n; W a float32 constant and b a DEQUANTIZEd float16
    constant, both loop variables the body passes through. With `shared_body` a second WHILE
    runs the same cond and body with other constants."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    n = b.add_input("n", (), I32)
    h = b.add_input("h", (1, 4), F32)
    zero = b.add_constant("zero", np.array(0, I32))
    specs = [((), I32), ((), I32), ((1, 4), F32), ((4, 4), F32), ((4,), F32)]

    def weights(tag: str) -> tuple[int, int]:
        w = b.add_constant(f"w{tag}", rng.uniform(-1, 1, (4, 4)).astype(F32))
        b16 = b.add_constant(f"b16{tag}", rng.uniform(-1, 1, 4).astype(np.float16))
        bias = b.add_tensor(f"bias{tag}", (4,), F32)
        b.add_operator("DEQUANTIZE", [b16], [bias])
        return w, bias

    cond, body = b.add_subgraph("cond"), b.add_subgraph("body")
    results = []
    for tag in ("a", "b") if shared_body else ("a",):
        w, bias = weights(tag)
        outs = [b.add_tensor(f"o{tag}{k}", s, d) for k, (s, d) in enumerate(specs)]
        b.add_operator("WHILE", [zero, n, h, w, bias], outs, cond_subgraph_index=cond.index,
                       body_subgraph_index=body.index)
        results.append(outs[2])
    b.mark_outputs(*results)

    ci = [cond.add_input(f"c{k}", s, d) for k, (s, d) in enumerate(specs)]
    c = cond.add_tensor("less", (), np.bool_)
    cond.add_operator("LESS", [ci[0], ci[1]], [c])
    cond.mark_outputs(c)

    bi = [body.add_input(f"b{k}", s, d) for k, (s, d) in enumerate(specs)]
    one = body.add_constant("one", np.array(1, I32))
    i2 = body.add_tensor("i2", (), I32)
    body.add_operator("ADD", [bi[0], one], [i2])
    y = body.add_tensor("y", (1, 4), F32)
    body.add_operator("FULLY_CONNECTED", [bi[2], bi[3], bi[4]], [y])
    h2 = body.add_tensor("h2", (1, 4), F32)
    body.add_operator("TANH", [y], [h2])
    body.mark_outputs(i2, bi[1], h2, bi[3], bi[4])
    return b.build()


def _loops(it: Interpreter) -> list[WhileLoop]:
    rt = it._model_runtime
    return [o for o in gc.get_objects() if isinstance(o, WhileLoop) and o.rt is rt]


@pytest.mark.parametrize("shared_body", [False, True])
@pytest.mark.parametrize("steps", [0, 1, 7, 40])
def test_pinned_loop_variables_match_litert(shared_body, steps):
    h = np.array([[0.5, -0.25, 1.0, 2.0]], F32)
    assert_matches_litert(_rnn_model(shared_body), [np.array(steps, I32), h])


def test_pinned_loop_prepares_its_own_executors():
    it = Interpreter(model_content=_rnn_model(shared_body=True))
    it.allocate_tensors()
    loops = _loops(it)
    assert len(loops) == 2 and all(lp.body is not None for lp in loops), "loop variables not pinned"
    for lp in loops:
        assert sorted(lp.body.pinned) == [lp.body.sg.inputs[3], lp.body.sg.inputs[4]]
        assert lp.body is not it._model_runtime._callees.get(lp.body_i)
    assert loops[0].body is not loops[1].body


@pytest.mark.parametrize("op", ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"])
@pytest.mark.parametrize("dtype", [I32, F32, np.int64])
def test_scalar_comparisons_match_litert(op, dtype):
    model = single_op_model(op, [In((), dtype), In((), dtype)], [Out((), np.bool_)])
    values = [0, 3, -3] if dtype != F32 else [0.0, -0.0, 1.5, np.nan, np.inf, -np.inf]
    for x in values:
        for y in values:
            assert_exact(model, [np.array(x, dtype), np.array(y, dtype)])


@pytest.mark.parametrize("op", ["LOGICAL_AND", "LOGICAL_OR"])
def test_scalar_logical_ops_match_litert(op):
    model = single_op_model(op, [In((), np.bool_), In((), np.bool_)], [Out((), np.bool_)])
    for x in (False, True):
        for y in (False, True):
            assert_exact(model, [np.array(x), np.array(y)])


def test_scalar_comparison_broadcasts_a_resized_operand():
    model = single_op_model("LESS", [In((), I32), In((), I32)], [Out((), np.bool_)])
    it = Interpreter(model_content=model)
    d = it.get_input_details()
    it.resize_tensor_input(d[1]["index"], [3])
    it.allocate_tensors()
    it.set_tensor(d[0]["index"], np.array(1, I32))
    it.set_tensor(d[1]["index"], np.array([0, 1, 2], I32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), [False, False, True])


def _counter_loop(cond_fn, specs, body_fn) -> bytes:
    """A WHILE over loop variables `specs` [(shape, dtype)] with cond `cond_fn(cond, inputs)`
    -> its output and body `body_fn(body, inputs)` -> its outputs; every variable is an output."""
    b = ModelBuilder()
    ins = [b.add_input(f"x{k}", s, d) for k, (s, d) in enumerate(specs)]
    outs = [b.add_tensor(f"o{k}", s, d) for k, (s, d) in enumerate(specs)]
    cond, body = b.add_subgraph("cond"), b.add_subgraph("body")
    b.add_operator("WHILE", ins, outs, cond_subgraph_index=cond.index, body_subgraph_index=body.index)
    b.mark_outputs(*outs)
    cond.mark_outputs(cond_fn(cond, [cond.add_input(f"c{k}", s, d) for k, (s, d) in enumerate(specs)]))
    body.mark_outputs(*body_fn(body, [body.add_input(f"b{k}", s, d) for k, (s, d) in enumerate(specs)]))
    return b.build()


def _op(g, op: str, ins, shape=(), dtype=np.bool_) -> int:
    out = g.add_tensor(f"{op.lower()}{len(ins)}_{ins[0]}", shape, dtype)
    g.add_operator(op, list(ins), [out])
    return out


def _step(g, x, step, dtype):
    return _op(g, "ADD", [x, g.add_constant(f"step{x}", np.array(step, dtype))], (), dtype)


def _two_counters_model() -> bytes:
    """The Keras-3 cond: i < n and j < 7 (two counters, one bound a constant)."""
    def cond(g, c):
        seven = g.add_constant("seven", np.array(7, I32))
        return _op(g, "LOGICAL_AND", [_op(g, "LESS", [c[0], c[2]]), _op(g, "LESS", [c[1], seven])])

    def body(g, v):
        return [_step(g, v[0], 1, I32), _step(g, v[1], 2, I32), v[2]]
    return _counter_loop(cond, [((), I32), ((), I32), ((), I32)], body)


@pytest.mark.parametrize("i, j, n", [(0, 0, 10), (0, 0, 2), (5, 0, 5), (0, 9, 10), (-3, -40, 4)])
def test_scalar_condition_matches_litert(i, j, n):
    model = _two_counters_model()
    assert_exact(model, [np.array(i, I32), np.array(j, I32), np.array(n, I32)])
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    assert [lp.predicate is not None for lp in _loops(it)] == [True]


@pytest.mark.parametrize("start", [0.0, 2.5, -0.0, np.nan, np.inf])
def test_float_scalar_condition_matches_litert(start):
    def cond(g, c):  # (not x >= 3 and x == x) or i > 20 (never): NaN compares as in the kernels
        ge = _op(g, "GREATER_EQUAL", [c[0], g.add_constant("three", np.array(3, F32))])
        ok = _op(g, "LOGICAL_AND", [_op(g, "LOGICAL_NOT", [ge]), _op(g, "EQUAL", [c[0], c[0]])])
        late = _op(g, "GREATER", [c[1], g.add_constant("twenty", np.array(20, I32))])
        return _op(g, "LOGICAL_OR", [ok, late])

    def body(g, v):
        return [_step(g, v[0], 0.5, F32), _step(g, v[1], 1, I32)]
    model = _counter_loop(cond, [((), F32), ((), I32)], body)
    assert_exact(model, [np.array(start, F32), np.array(0, I32)])


def test_condition_on_a_counter_that_grows_a_dimension():
    """The counter becomes a 1-vector after the first iteration: the cond's kernels take over
    from the Python predicate."""
    def cond(g, c):
        return _op(g, "LESS", [c[0], c[1]], shape=(1,))

    def body(g, v):
        one = g.add_constant("one", np.array([1], I32))
        return [_op(g, "ADD", [v[0], one], (1,), I32), v[1]]
    b = ModelBuilder()
    x = b.add_input("x", (), I32)
    n = b.add_input("n", (), I32)
    outs = [b.add_tensor("o0", (1,), I32, shape_signature=(-1,)), b.add_tensor("o1", (), I32)]
    c, bd = b.add_subgraph("cond"), b.add_subgraph("body")
    b.add_operator("WHILE", [x, n], outs, cond_subgraph_index=c.index, body_subgraph_index=bd.index)
    b.mark_outputs(*outs)
    c.mark_outputs(cond(c, [c.add_input("c0", (), I32, shape_signature=(-1,)), c.add_input("c1", (), I32)]))
    bd.mark_outputs(*body(bd, [bd.add_input("b0", (), I32, shape_signature=(-1,)), bd.add_input("b1", (), I32)]))
    assert_exact(b.build(), [np.array(0, I32), np.array(4, I32)])
