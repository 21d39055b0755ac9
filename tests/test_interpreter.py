"""The LiteRT Interpreter API: same calls, same dict keys, clear errors on misuse."""
import numpy as np
import pytest
from oracle import run_litert

from acelera import AceleraError, Interpreter
from acelera.core.builder import In, ModelBuilder, Out, single_op_model
from acelera.core.errors import UnsupportedOpError
from acelera.samples import tiny_cnn


def add_model(sig: bool = True) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 3), np.float32, shape_signature=(-1, 3))
    y = b.add_input("y", (1, 3), np.float32, shape_signature=(-1, 3))
    z = b.add_tensor("z", (1, 3), np.float32)
    b.add_operator("ADD", [x, y], [z], fused_activation_function="NONE")
    b.mark_outputs(z)
    if sig:
        b.add_signature("serving_default", {"x": x, "y": y}, {"z": z})
    return b.build()


def litert(model: bytes):
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    return LiteRT(model_content=model)


def test_details_match_litert_keys_and_values():
    m = tiny_cnn(quantized=True)
    ours, theirs = Interpreter(model_content=m), litert(m)
    ours.allocate_tensors(), theirs.allocate_tensors()
    for a, b in zip(ours.get_input_details() + ours.get_output_details(),
                    theirs.get_input_details() + theirs.get_output_details()):
        assert set(b) - {"quantization_parameters"} <= set(a)
        for key in ("name", "index", "dtype", "quantization"):
            assert a[key] == b[key], key
        np.testing.assert_array_equal(a["shape"], b["shape"])
        np.testing.assert_array_equal(a["quantization_parameters"]["scales"], b["quantization_parameters"]["scales"])
        np.testing.assert_array_equal(a["quantization_parameters"]["zero_points"], b["quantization_parameters"]["zero_points"])


def test_invoke_before_allocate_is_an_error():
    it = Interpreter(model_content=add_model())
    with pytest.raises(AceleraError, match="allocate_tensors"):
        it.invoke()


def test_set_tensor_checks_dtype_shape_and_index():
    it = Interpreter(model_content=add_model())
    it.allocate_tensors()
    with pytest.raises(ValueError, match="float64"):
        it.set_tensor(0, np.zeros((1, 3)))
    with pytest.raises(AceleraError, match="Dimension mismatch"):
        it.set_tensor(0, np.zeros((2, 3), np.float32))
    with pytest.raises(AceleraError, match="out of range"):
        it.set_tensor(42, np.zeros((1, 3), np.float32))
    with pytest.raises(AceleraError, match="out of range"):
        it.get_tensor(-1)


def test_resize_and_invoke_matches_numpy():
    it = Interpreter(model_content=add_model())
    it.resize_tensor_input(0, [4, 3])
    it.resize_tensor_input(1, [4, 3])
    it.allocate_tensors()
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    it.set_tensor(0, a)
    it.set_tensor(1, a)
    it.invoke()
    out = it.get_output_details()[0]
    assert list(out["shape"]) == [4, 3]
    np.testing.assert_array_equal(it.get_tensor(out["index"]), 2 * a)
    with pytest.raises(AceleraError, match="unknown dimensions"):
        it.resize_tensor_input(0, [4, 5], strict=True)
    with pytest.raises(AceleraError, match="not an input"):
        it.resize_tensor_input(2, [1, 3])


def test_signature_runner():
    it = Interpreter(model_content=add_model())
    assert it.get_signature_list() == {"serving_default": {"inputs": ["x", "y"], "outputs": ["z"]}}
    run = it.get_signature_runner()
    out = run(x=np.ones((2, 3), np.float32), y=np.full((2, 3), 2, np.float32))
    np.testing.assert_array_equal(out["z"], np.full((2, 3), 3, np.float32))
    with pytest.raises(AceleraError, match="expected"):
        run(x=np.ones((1, 3), np.float32))
    with pytest.raises(AceleraError, match="signature_key"):
        it.get_signature_runner("nope")
    with pytest.raises(AceleraError, match="no signatures"):
        Interpreter(model_content=add_model(sig=False)).get_signature_runner()


def test_outputs_are_copies_and_repeatable():
    m = tiny_cnn()
    it = Interpreter(model_content=m)
    it.allocate_tensors()
    x = np.random.default_rng(0).uniform(-1, 1, (1, 32, 32, 3)).astype(np.float32)
    it.set_tensor(0, x)
    it.invoke()
    idx = it.get_output_details()[0]["index"]
    first = it.get_tensor(idx)
    first[...] = 0
    it.invoke()
    second = it.get_tensor(idx)
    assert second.sum() > 0
    np.testing.assert_allclose(second, run_litert(m, [x])[0], atol=1e-5)


def test_unsupported_custom_op_and_version():
    m = single_op_model("CUSTOM", [In((2,))], [Out((2,))], custom_code="Landmarks2TransformMatrix")
    it = Interpreter(model_content=m)
    with pytest.raises(UnsupportedOpError, match="node 0: custom op 'Landmarks2TransformMatrix' is not supported"):
        it.allocate_tensors()
    m = single_op_model("RELU", [In((2,))], [Out((2,))], version=99)
    with pytest.raises(UnsupportedOpError, match=r"node 0: RELU version 99 is not supported \(max \d+\)"):
        Interpreter(model_content=m).allocate_tensors()


def test_constructor_errors():
    with pytest.raises(AceleraError, match="Exactly one"):
        Interpreter()
    with pytest.raises(AceleraError):
        Interpreter(model_content=b"garbage!")
