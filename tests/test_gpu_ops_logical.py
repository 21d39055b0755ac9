"""gpu-opencl: comparisons, LOGICAL_AND, CAST and SELECT / SELECT_V2 against the CPU reference.

Bool tensors are 0/1 floats on the device and int32 tensors floats holding the integer; the
host converts them at the partition boundary. Bool and int32 results must equal the reference
exactly in fp32 and in fp16 storage (the comparisons and casts read partition inputs and
constants in float32); SELECT's float results are held to the float tolerances.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_testing import require_opencl

from acelera import Interpreter, load_delegate
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model

require_opencl()

from gpu_cases import BOOL, F32, I32, check, grid, run  # noqa: E402  (the cases)
from gpu_cases import LOGICAL_CASES as CASES


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
    plan = it.execution_plan[0].fn.kernel.plan
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
