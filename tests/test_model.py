"""Model loading and validation: good models load into the IR, bad ones raise one clear ModelError."""
import numpy as np
import pytest

from acelera import AceleraError, ModelError
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.model import load_model


def relu_model() -> bytes:
    return single_op_model("RELU", [In((1, 4))], [Out((1, 4))])


def test_shared_models_load(models_dir):
    for path in sorted(models_dir.glob("*.tflite")):
        m = load_model(path)
        sg = m.main
        assert sg.operators and sg.inputs and sg.outputs
        for op in sg.operators:
            assert op.version >= 1 and op.name
        assert sorted(sg.execution_order) == list(range(len(sg.operators)))


def test_ir_contents_of_int8_model(models_dir):
    m = load_model(models_dir / "mobilenet_v2_96_int8.tflite")
    sg = m.main
    conv = next(op for op in sg.operators if op.op == "CONV_2D")
    assert conv.version == 3 and conv.options["padding"] in (0, 1)
    w = sg.tensors[conv.inputs[1]]
    assert w.is_constant and w.dtype == np.int8 and w.quantization.per_channel
    assert w.quantization.scale.size == w.shape[0]
    assert m.signature_defs[0].key == "serving_default"
    assert "min_runtime_version" in m.metadata


def test_custom_op_and_options(models_dir):
    m = load_model(models_dir / "selfie_segmentation.tflite")
    custom = [op for op in m.main.operators if op.op == "CUSTOM"]
    assert custom and custom[0].custom_code == "Convolution2DTransposeBias"
    assert custom[0].custom_options
    deq = [op for op in m.main.operators if op.op == "DEQUANTIZE"]
    assert m.main.tensors[deq[0].inputs[0]].dtype == np.float16


def test_builder_roundtrip_options_and_signatures():
    b = ModelBuilder()
    x = b.add_input("x", (1, 5, 5, 2), np.float32, shape_signature=(-1, 5, 5, 2))
    y = b.add_tensor("y", (1, 3, 3, 2), np.float32)
    b.add_operator("MAX_POOL_2D", [x], [y], version=1, padding="VALID", stride_h=1, stride_w=1,
                   filter_height=3, filter_width=3, fused_activation_function="RELU6")
    b.mark_outputs(y)
    b.add_signature("serving_default", {"x": x}, {"y": y})
    b.add_metadata("note", b"hello")
    m = load_model(b.build())
    op = m.main.operators[0]
    assert op.op == "MAX_POOL_2D" and op.options["filter_height"] == 3 and op.options["fused_activation_function"] == 3
    assert m.main.tensors[x].shape_signature == (-1, 5, 5, 2)
    assert dict(m.signature_defs[0].inputs) == {"x": 0}
    assert m.metadata["note"] == b"hello"


def test_per_channel_quantization_roundtrip():
    w = np.arange(24, dtype=np.int8).reshape(4, 2, 3)
    data = single_op_model("DEQUANTIZE", [In((4, 2, 3), np.int8, ([0.5, 0.25, 0.125, 1.0], [0, 0, 0, 0], 0))],
                           [Out((4, 2, 3))], version=2)
    q = load_model(data).main.tensors[0].quantization
    assert q.per_channel and q.quantized_dimension == 0
    np.testing.assert_allclose(q.scale, [0.5, 0.25, 0.125, 1.0])
    assert w.size == 24


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:7], "too small"),
    (lambda b: b[:4] + b"XXXX" + b[8:], "TFL3"),
    (lambda b: b[: len(b) // 3], ""),
])
def test_bad_bytes_raise_model_error(mutate, message):
    with pytest.raises(ModelError) as e:
        load_model(mutate(relu_model()))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_file_is_model_error(tmp_path):
    with pytest.raises(ModelError, match="cannot read"):
        load_model(tmp_path / "nope.tflite")


def test_tensor_index_out_of_range():
    b = ModelBuilder()
    x = b.add_input("x", (4,), np.float32)
    b.add_operator("RELU", [x], [7])
    b.mark_outputs(x)
    with pytest.raises(ModelError, match=r"node 0 \(RELU\): output tensor index 7 out of range"):
        load_model(b.build(), name="m.tflite")


def test_buffer_size_mismatch_names_tensor():
    data = single_op_model("ADD", [In((2, 2)), Const(np.zeros(3, np.float32), shape=(2, 2))], [Out((2, 2))])
    with pytest.raises(ModelError, match=r"tensor 1: buffer has 12 bytes but shape \[2, 2\] of FLOAT32 needs 16"):
        load_model(data)


def test_cycle_is_detected():
    b = ModelBuilder()
    x = b.add_input("x", (2,), np.float32)
    t1 = b.add_tensor("t1", (2,), np.float32)
    t2 = b.add_tensor("t2", (2,), np.float32)
    b.add_operator("ADD", [x, t2], [t1])
    b.add_operator("RELU", [t1], [t2])
    b.mark_outputs(t2)
    with pytest.raises(ModelError, match="cycle"):
        load_model(b.build())


def test_unwritten_input_is_rejected():
    b = ModelBuilder()
    x = b.add_input("x", (2,), np.float32)
    ghost = b.add_tensor("ghost", (2,), np.float32)
    y = b.add_tensor("y", (2,), np.float32)
    b.add_operator("ADD", [x, ghost], [y])
    b.mark_outputs(y)
    with pytest.raises(ModelError, match="input tensor 1 \\('ghost'\\) is never written"):
        load_model(b.build())


def test_huge_shape_is_rejected():
    data = single_op_model("RELU", [In((1 << 20, 1 << 20))], [Out((1 << 20, 1 << 20))])
    with pytest.raises(ModelError, match="needs"):
        load_model(data)


def test_model_error_is_acelera_error():
    assert issubclass(ModelError, AceleraError)
