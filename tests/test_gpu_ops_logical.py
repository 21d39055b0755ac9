"""gpu-opencl: comparisons, LOGICAL_AND, CAST and SELECT / SELECT_V2 against the CPU reference.

Bool tensors are 0/1 floats on the device and int32 tensors floats holding the integer; the
host converts them at the partition boundary. Bool and int32 results must equal the reference
exactly in fp32 and in fp16 storage (the comparisons and casts read partition inputs and
constants in float32); SELECT's float results are held to the float tolerances.
"""
from __future__ import annotations

import numpy as np
import pytest

from acelera import Interpreter, load_delegate
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from test_plugin_gpu_opencl import F32, RNG, check, op1, rnd, run

BOOL, I32 = np.bool_, np.int32
COMPARISONS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")


def grid(*shape):
    """Values on a coarse grid, so that comparisons see ties."""
    return (RNG.integers(-4, 5, shape) / 2).astype(F32)


def near_pairs(n):
    """x, and y within one float32 ulp of x: equal in half storage, different in float32."""
    x = RNG.uniform(-3, 3, n).astype(F32)
    y = np.nextafter(x, np.where(RNG.random(n) < 0.5, np.inf, -np.inf).astype(F32)).astype(F32)
    y[::3] = x[::3]
    return x, y


def cases():
    c = {}
    for op in COMPARISONS:
        x, y = grid(1, 4, 5, 6), grid(1, 4, 5, 6)
        c[op] = op1(op, [x, y], x.shape, out_dtype=BOOL)
        c[f"{op}-bcast-const"] = op1(op, [grid(2, 3, 7), Const(np.array([0.5], F32))], (2, 3, 7), version=2,
                                     out_dtype=BOOL)
        c[f"{op}-bcast-channel"] = op1(op, [grid(1, 3, 4, 5), grid(1, 1, 1, 5)], (1, 3, 4, 5), out_dtype=BOOL)
        a, b = near_pairs(40)
        c[f"{op}-one-ulp"] = op1(op, [a.reshape(5, 8), b.reshape(5, 8)], (5, 8), out_dtype=BOOL)
    b1, b2 = RNG.random((2, 3, 4, 5)) < 0.5, RNG.random((1, 1, 4, 5)) < 0.5
    c["LOGICAL_AND"] = op1("LOGICAL_AND", [b1, b2], b1.shape, out_dtype=BOOL)
    c["LOGICAL_AND-const"] = op1("LOGICAL_AND", [b1, Const(RNG.random((2, 3, 4, 5)) < 0.5)], b1.shape, out_dtype=BOOL)
    big = (RNG.uniform(-1, 1, (3, 10)) * 10.0 ** RNG.integers(0, 10, (3, 10))).astype(F32)
    big[0, :6] = (np.nan, np.inf, -np.inf, 3e9, -3e9, -0.0)
    c["CAST-float-int32"] = op1("CAST", [big], big.shape, out_dtype=I32)
    c["CAST-int32-float"] = op1("CAST", [RNG.integers(-(2 ** 30), 2 ** 30, (4, 9)).astype(I32)], (4, 9))
    c["CAST-int32-int32"] = op1("CAST", [RNG.integers(-5000, 5000, (4, 9)).astype(I32)], (4, 9), out_dtype=I32)
    c["CAST-bool-float"] = op1("CAST", [RNG.random((2, 3, 5)) < 0.5], (2, 3, 5))
    fb = grid(3, 11)
    fb[0, :3] = (np.nan, -0.0, 1e-30)
    c["CAST-float-bool"] = op1("CAST", [fb], fb.shape, out_dtype=BOOL)
    c["CAST-float-float"] = op1("CAST", [rnd(3, 5)], (3, 5))
    x, y = rnd(1, 4, 5, 6), rnd(1, 4, 5, 6)
    c["SELECT"] = op1("SELECT", [x > 0, x, y], x.shape)
    c["SELECT-rank1-cond"] = op1("SELECT", [RNG.random(3) < 0.5, rnd(3, 4, 6), rnd(3, 4, 6)], (3, 4, 6))
    c["SELECT-scalar-cond"] = op1("SELECT", [np.array(False), rnd(2, 9), rnd(2, 9)], (2, 9), version=1)
    c["SELECT_V2"] = op1("SELECT_V2", [RNG.random((1, 4, 1, 6)) < 0.5, x, Const(np.array(0.25, F32))], x.shape)
    c["SELECT_V2-scalars"] = op1("SELECT_V2", [RNG.random((3, 7)) < 0.5, Const(np.array([1.5], F32)), rnd(3, 7)],
                                 (3, 7))
    return c


CASES = cases()
TESTED = {n.split("-")[0] for n in CASES}


def exact(model, inputs, half):
    outs, it = run(model, inputs, half)
    rep = it.delegation
    assert not rep.failures, rep.failures
    assert len(rep.nodes_of("gpu-opencl")) == len(it._runtime(0).ex.sg.operators), rep.rejections
    for ref, got in outs:
        assert got.dtype == ref.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
    return it


@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name, half):
    model, inputs = CASES[name]
    if name.startswith("SELECT"):
        check(model, inputs, half=half)
    else:
        exact(model, inputs, half)


def test_half_plan_keeps_bools_and_exact_inputs_in_float32():
    model, inputs = CASES["LESS-one-ulp"]
    it = exact(model, inputs, half=True)
    plan = it.execution_plan[0].fn.__self__.plan
    assert plan.half and [l.kernel for l in plan.launches] == ["binary"]
    assert all(p.float_storage for p in plan.inputs if p.buffer) and plan.outputs[0].float_storage
    assert plan.outputs[0].dtype == "BOOL" and plan.launches[0].params[13] == 1


def chain_model():
    """GREATER and LESS -> LOGICAL_AND -> SELECT_V2 and CAST(bool -> float) -> ADD -> CAST to
    int32 and back: bools and int32 stay on the device, three outputs of three types."""
    b = ModelBuilder()
    shape = (1, 4, 5, 6)
    x, y = b.add_input("x", shape, F32), b.add_input("y", shape, F32)
    count = iter(range(100))

    def node(op, ins, dtype=F32, **opt):
        t = b.add_tensor(f"t{next(count)}", shape, dtype)
        b.add_operator(op, ins, [t], **opt)
        return t
    g = node("GREATER", [x, y], BOOL)
    lt = node("LESS", [x, b.add_constant("half", np.array(0.5, F32))], BOOL)
    both = node("LOGICAL_AND", [g, lt], BOOL)
    sel = node("SELECT_V2", [both, x, y])
    f = node("CAST", [both])
    r = node("ADD", [sel, f], fused_activation_function="NONE")
    i = node("CAST", [r], I32)
    back = node("CAST", [i])
    b.mark_outputs(r, both, back)
    return b.build(), [grid(*shape), grid(*shape)]


@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
def test_bool_chain_runs_in_one_partition(half):
    model, inputs = chain_model()
    outs, it = run(model, inputs, half)
    assert len(it.execution_plan) == 1 and it.execution_plan[0].delegate == "gpu-opencl"
    for ref, got in outs:
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)


REFUSED = [
    ("cast-bool-int32", "CAST", [In((2, 3), BOOL)], [Out((2, 3), I32)], "CAST: bool -> float16/float32"),
    ("cast-int32-bool", "CAST", [In((2, 3), I32)], [Out((2, 3), BOOL)], "CAST: bool -> float16/float32"),
    ("select-bool-branches", "SELECT_V2", [In((2, 3), BOOL), In((2, 3), BOOL), In((2, 3), BOOL)], [Out((2, 3), BOOL)],
     "SELECT_V2: input type BOOL is not supported"),
    ("select-broadcast-else", "SELECT_V2", [In((2, 3), BOOL), In((2, 3)), In((1, 3))], [Out((2, 3))],
     "each the output's shape or a scalar"),
    ("select-const-2d", "SELECT", [In((2, 3), BOOL), In((2, 3)), Const(np.ones((2, 3), F32))], [Out((2, 3))],
     "a constant 2-D if/else is not supported"),
    ("equal-bool", "EQUAL", [In((2, 3), BOOL), In((2, 3), BOOL)], [Out((2, 3), BOOL)],
     "EQUAL: input type BOOL is not supported"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_like_tflite(case):
    _, op, ins, outs, why = case
    m = single_op_model(op, ins, outs)
    it = Interpreter(model_content=m, experimental_delegates=[load_delegate("gpu-opencl")])
    it.allocate_tensors()
    assert it.delegation.nodes_of("gpu-opencl") == []
    reason = it.delegation.rejections[0][0][1]
    assert why in reason, reason


def test_serialized_plan_keeps_float32_ports(tmp_path):
    """A cached plan (bool and int32 buffers, float32 input copies) loads and runs the same."""
    model, inputs = chain_model()
    opts = {"delegate_serialize_dir": str(tmp_path), "delegate_serialize_token": "bools"}
    runs = []
    for _ in range(2):
        d = load_delegate("gpu-opencl", opts)
        it = Interpreter(model_content=model, experimental_delegates=[d])
        it.allocate_tensors()
        for det, x in zip(it.get_input_details(), inputs):
            it.set_tensor(det["index"], x)
        it.invoke()
        runs.append((d.last_prepare, [it.get_tensor(o["index"]) for o in it.get_output_details()]))
    assert [r[0] for r in runs] == ["compiled", "cache"]
    for a, b in zip(runs[0][1], runs[1][1]):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
