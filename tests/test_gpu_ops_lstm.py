"""gpu-opencl: the basic LSTM kernel (kernel_type BASIC) against the CPU reference, and the
LSTM forms TFLite's GPU delegate refuses."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_testing import require_opencl

from acelera import Interpreter, load_delegate
from acelera.core.builder import ModelBuilder
from acelera.core.interpreter import OpResolverType

require_opencl()

from gpu_cases import F32, basic_lstm, check, rnd  # noqa: E402  (basic_lstm is shared with gpu-gl's tests)


@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
@pytest.mark.parametrize("shape", [(1, 5, 8), (3, 4, 4), (2, 13, 12)], ids=lambda s: "b{}_in{}_d{}".format(*s))
@pytest.mark.parametrize("version", [1, 4])
def test_basic_lstm(shape, half, version):
    model, inputs = basic_lstm(*shape, version=version)
    it = check(model, inputs, half=half)
    plan = it.execution_plan[0].fn.kernel.plan
    kernels = [l.kernel for l in plan.launches]
    assert kernels[-3:] == ["fully_connected", "lstm_cell", "lstm_cell"], kernels


def test_state_fed_back_over_steps():
    """Running the cell over a sequence by feeding activation and state back stays on the reference."""
    model, (x, a, s) = basic_lstm(2, 5, 8)
    ref = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    gpu = Interpreter(model_content=model, experimental_delegates=[load_delegate("gpu-opencl", {
        "gpu_precision_loss_allowed": False})])
    states = {}
    for it in (ref, gpu):
        it.allocate_tensors()
        ins, outs = it.get_input_details(), it.get_output_details()
        cur_a, cur_s = a, s
        for step in range(4):
            for d, v in zip(ins, (x + step, cur_a, cur_s)):
                it.set_tensor(d["index"], v)
            it.invoke()
            cur_a, cur_s = it.get_tensor(outs[0]["index"]), it.get_tensor(outs[1]["index"])
        states[it is gpu] = (cur_a, cur_s)
    for want, got in zip(states[False], states[True]):
        np.testing.assert_allclose(got, want, atol=1e-5)


REFUSED = [
    ("variable-state", dict(variable=True), "not variable tensors"),
    ("depth-not-multiple-of-4", dict(depth=6), "a multiple of 4"),
    ("cell-clip", dict(cell_clip=3.0), "no cell_clip or proj_clip"),
    ("relu", dict(fused_activation_function="RELU"), "TANH activation"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_like_tflite(case):
    _, kw, why = case
    model, _ = basic_lstm(**kw)
    it = Interpreter(model_content=model, experimental_delegates=[load_delegate("gpu-opencl")])
    it.allocate_tensors()
    assert it.delegation.nodes_of("gpu-opencl") == []
    reason = it.delegation.rejections[0][0][1]
    assert why in reason, reason


def test_full_kernel_refused():
    b = ModelBuilder()
    n_in, n_cell = 3, 4
    x = b.add_input("x", (1, n_in), F32)
    w = [b.add_constant(f"w{k}", rnd(n_cell, n_in)) for k in range(4)]
    r = [b.add_constant(f"r{k}", rnd(n_cell, n_cell)) for k in range(4)]
    bs = [b.add_constant(f"b{k}", rnd(n_cell)) for k in range(4)]
    h = b.add_tensor("h", (1, n_cell), F32, is_variable=True)
    c = b.add_tensor("c", (1, n_cell), F32, is_variable=True)
    y = b.add_tensor("y", (1, n_cell), F32)
    b.add_operator("LSTM", [x, *w, *r, -1, -1, -1, *bs, -1, -1, h, c], [y], fused_activation_function="TANH")
    b.mark_outputs(y)
    it = Interpreter(model_content=b.build(), experimental_delegates=[load_delegate("gpu-opencl")])
    it.allocate_tensors()
    assert it.delegation.nodes_of("gpu-opencl") == []
    assert "basic kernel only" in it.delegation.rejections[0][0][1]
