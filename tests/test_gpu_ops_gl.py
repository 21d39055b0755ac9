"""The GLSL versions of the new GPU ops (gpu_gl/shaders.py: GELU, SIGN, ADD_N, FLOOR_DIV,
FLOOR_MOD, comparisons, LOGICAL_AND, CAST, SELECT, basic LSTM) run the same plans as gpu-opencl.

Bool and int32 results must equal the reference; float results are held to the float
tolerances (GLSL has no fmod: FLOOR_MOD's truncated remainder is x - y trunc(x / y) there).
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_testing import require_gl  # noqa: E402

from acelera import Interpreter

require_gl()

from gpu_cases import gl_new_op_cases  # noqa: E402  (the cases gpu-opencl's tests run too)

from acelera.plugins import gpu_gl  # noqa: E402

CASES = gl_new_op_cases()


@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_new_op_on_gl(name, half):
    model, inputs = CASES[name]
    ref = Interpreter(model_content=model)
    ref.allocate_tensors()
    d = gpu_gl.create({"gpu_precision_loss_allowed": half})
    it = Interpreter(model_content=model, experimental_delegates=[d])
    it.allocate_tensors()
    assert not it.delegation.failures and len(it.delegation.nodes_of("gpu-gl")) == 1, it.delegation.rejections
    for det, x in zip(ref.get_input_details(), inputs):
        ref.set_tensor(det["index"], x)
        it.set_tensor(det["index"], x)
    ref.invoke()
    it.invoke()
    for o in ref.get_output_details():
        want, got = ref.get_tensor(o["index"]), it.get_tensor(o["index"])
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype.kind != "f":
            np.testing.assert_array_equal(got, want)
        else:
            scale = max(float(np.abs(want).max()), 1.0)
            np.testing.assert_allclose(got, want, atol=(2e-3 if half else 2e-6) * scale, rtol=1e-2 if half else 1e-5)
