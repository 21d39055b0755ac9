"""Invalid quantization and broken graph wiring are refused at load, naming the tensor or node."""
from __future__ import annotations

import numpy as np
import pytest

from acelera import ModelError
from acelera.core.builder import ModelBuilder
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.model import load_model


def _relu_int8(out_quant: tuple, in_quant: tuple = (0.5, 0)) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), np.int8, in_quant)
    y = b.add_tensor("y", (1, 4), np.int8, out_quant)
    b.add_operator("RELU", [x], [y])
    b.mark_outputs(y)
    return b.build()


@pytest.mark.parametrize("scale, what", [(0.0, "not positive"), (-0.5, "not positive"),
                                         (1e-45, "denormal"), (float("nan"), "non-finite")])
def test_bad_output_scales_are_refused_naming_the_tensor(scale, what):
    with pytest.raises(ModelError, match=rf"tensor 1: .*{what}") as e:
        load_model(_relu_int8((scale, 0)))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("dtype, zp", [(np.int8, 128), (np.int8, -129), (np.uint8, 256), (np.uint8, -1),
                                       (np.int16, 40000)])
def test_zero_points_outside_the_type_are_refused(dtype, zp):
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), dtype, (0.5, zp))
    y = b.add_tensor("y", (1, 4), dtype, (0.5, 0))
    b.add_operator("RELU", [x], [y])
    b.mark_outputs(y)
    with pytest.raises(ModelError, match=rf"tensor 0: zero point {zp} is outside"):
        load_model(b.build())


def test_per_channel_scales_name_the_channel():
    b = ModelBuilder()
    x = b.add_input("x", (1, 2, 2, 2), np.int8, (0.5, 0))
    w = b.add_constant("w", np.ones((2, 1, 1, 2), np.int8),
                       (np.array([0.1, 0.0], np.float32), np.zeros(2, np.int64), 0))
    bias = b.add_constant("b", np.zeros(2, np.int32), (np.array([0.05, 0.05], np.float32), np.zeros(2, np.int64), 0))
    y = b.add_tensor("y", (1, 2, 2, 2), np.int8, (0.5, 0))
    b.add_operator("CONV_2D", [x, w, bias], [y], padding="VALID", stride_w=1, stride_h=1,
                   fused_activation_function="NONE")
    b.mark_outputs(y)
    with pytest.raises(ModelError, match=r"tensor 1: quantization scale 0.0 \(channel 1\) is not positive"):
        load_model(b.build())


def test_a_graph_output_no_node_writes_is_refused():
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), np.float32)
    y = b.add_tensor("y", (1, 4), np.float32)
    orphan = b.add_tensor("orphan", (1, 4), np.float32)
    b.add_operator("RELU", [x], [y])
    b.mark_outputs(y, orphan)
    with pytest.raises(ModelError, match=r"graph output tensor 2 \('orphan'\) is never written"):
        Interpreter(model_content=b.build(), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)


def test_a_node_writing_a_graph_input_is_refused():
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), np.float32)
    y = b.add_tensor("y", (1, 4), np.float32)
    b.add_operator("RELU", [y], [x])
    b.add_operator("RELU", [x], [y])
    b.mark_outputs(y)
    with pytest.raises(ModelError, match=r"node 0 \(RELU\): writes graph input tensor 0 \('x'\)"):
        load_model(b.build())


def test_outputs_that_are_inputs_or_constants_still_load():
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), np.float32)
    c = b.add_constant("c", np.ones((1, 4), np.float32))
    y = b.add_tensor("y", (1, 4), np.float32)
    b.add_operator("RELU", [x], [y])
    b.mark_outputs(y, x, c)
    it = Interpreter(model_content=b.build(), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(0, np.full((1, 4), -2, np.float32))
    it.invoke()
    assert [it.get_tensor(d["index"]).tolist() for d in it.get_output_details()] == [[[0] * 4], [[-2] * 4], [[1] * 4]]
