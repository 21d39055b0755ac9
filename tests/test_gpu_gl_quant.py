"""gpu-gl on quantized models: TFLite's float view (constants dequantized at prepare, int8/uint8
boundaries (de)quantized on the host, quantization simulators in the shaders' epilogues).

Every op gpu-gl declares with INT8/UINT8 runs as a single-op model in fp16 and fp32 storage,
within one quantization step of the integer reference; DEQUANTIZE/QUANTIZE boundaries; whole
int8 models fully on GL.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_testing import qin, qop, require_gl, run_pair  # noqa: E402

from acelera import Interpreter, load_delegate
from acelera.core.builder import Const, In, Out, single_op_model

require_gl()

from acelera.plugins import gpu_gl  # noqa: E402

F32 = np.float32
RNG = np.random.default_rng(2024)


def run(model: bytes, inputs, half: bool = True, **opts):
    return run_pair(inputs, load_delegate("gpu-gl", {"gpu_precision_loss_allowed": half, **opts}),
                    model_content=model)


def check(model, inputs, half=True, steps=1):
    outs, it = run(model, inputs, half)
    rep = it.delegation
    assert not rep.failures, rep.failures
    assert len(rep.nodes_of("gpu-gl")) == len(it._runtime(0).ex.sg.operators), rep.rejections
    for ref, got in outs:
        assert got.dtype == ref.dtype and got.shape == ref.shape
        if ref.dtype.kind in "iu":
            assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= steps
        else:
            np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5 if not half else 1e-3)




def weights(shape, dtype, axis=0, scale=0.02):
    """Per-channel symmetric int8 weights, or per-tensor uint8 weights (zero point 128)."""
    if dtype == np.int8:
        n = shape[axis]
        return Const(RNG.integers(-127, 128, shape).astype(np.int8),
                     (np.full(n, scale, F32), np.zeros(n, np.int64), axis))
    return Const(RNG.integers(0, 256, shape).astype(np.uint8), (scale, 128))


def bias(n, scale):
    return Const(RNG.integers(-500, 500, n).astype(np.int32), (np.full(n, scale, F32), np.zeros(n, np.int64), 0))


def quant_cases(dtype):
    i8 = dtype == np.int8
    zp = 3 if i8 else 128
    x = lambda *s: qin(s, 0.05, zp, dtype)  # noqa: E731
    oq = (0.04, -5 if i8 else 120)
    same = (0.05, zp)
    return {
        "ADD": qop("ADD", [x(1, 4, 5, 6), qin((1, 4, 5, 6), 0.03, -2 if i8 else 100, dtype)], (1, 4, 5, 6), oq, dtype,
                   fused_activation_function="RELU"),
        "SUB": qop("SUB", [x(1, 4, 5, 6), x(1, 4, 5, 6)], (1, 4, 5, 6), oq, dtype),
        "MUL": qop("MUL", [x(1, 4, 5, 6), x(1, 1, 1, 6)], (1, 4, 5, 6), (0.01, oq[1]), dtype),
        "MAXIMUM": qop("MAXIMUM", [x(2, 7), x(2, 7)], (2, 7), same, dtype),
        "MINIMUM": qop("MINIMUM", [x(2, 7), x(2, 7)], (2, 7), same, dtype),
        "PRELU": qop("PRELU", [x(1, 3, 4, 6), Const(*qin((1, 1, 6), 0.01, 0 if i8 else 128, dtype))], (1, 3, 4, 6),
                     oq, dtype, version=1),
        "CONV_2D": qop("CONV_2D", [x(1, 6, 7, 6), weights((5, 3, 3, 6), dtype), bias(5, 0.05 * 0.02)], (1, 3, 4, 5),
                       (0.1, -3 if i8 else 125), dtype, version=3, padding="SAME", stride_h=2, stride_w=2,
                       fused_activation_function="RELU6"),
        "DEPTHWISE_CONV_2D": qop("DEPTHWISE_CONV_2D", [x(1, 6, 7, 6), weights((1, 3, 3, 6), dtype, 3, 0.03),
                                                       bias(6, 0.05 * 0.03)], (1, 6, 7, 6), (0.05, -1 if i8 else 127),
                                 dtype, version=3, padding="SAME", stride_h=1, stride_w=1, depth_multiplier=1),
        "FULLY_CONNECTED": qop("FULLY_CONNECTED", [x(2, 12), weights((4, 12), dtype), bias(4, 0.05 * 0.02)], (2, 4),
                               (0.1, 2 if i8 else 130), dtype, version=4 if i8 else 1),
        "AVERAGE_POOL_2D": qop("AVERAGE_POOL_2D", [x(1, 6, 6, 5)], (1, 3, 3, 5), same, dtype, padding="VALID",
                               stride_h=2, stride_w=2, filter_height=2, filter_width=2),
        "MAX_POOL_2D": qop("MAX_POOL_2D", [x(1, 6, 6, 5)], (1, 3, 3, 5), same, dtype, padding="SAME",
                           stride_h=2, stride_w=2, filter_height=3, filter_width=3),
        "RESIZE_BILINEAR": qop("RESIZE_BILINEAR", [x(1, 3, 4, 5), Const(np.array([6, 7], np.int32))], (1, 6, 7, 5),
                               same, dtype),
        "RESIZE_NEAREST_NEIGHBOR": qop("RESIZE_NEAREST_NEIGHBOR", [x(1, 3, 4, 5), Const(np.array([6, 7], np.int32))],
                                       (1, 6, 7, 5), same, dtype),
        "SOFTMAX": qop("SOFTMAX", [x(2, 10)], (2, 10), (1 / 256, -128 if i8 else 0), dtype, beta=1.0),
        "MEAN": qop("MEAN", [x(1, 4, 5, 6), Const(np.array([1, 2], np.int32))], (1, 1, 1, 6), oq, dtype,
                    keep_dims=True),
        "RESHAPE": qop("RESHAPE", [x(1, 4, 5, 6), Const(np.array([1, 20, 6], np.int32))], (1, 20, 6), same, dtype,
                       version=1),
        "CONCATENATION": qop("CONCATENATION", [x(1, 3, 3, 2), x(1, 3, 3, 5)], (1, 3, 3, 7), same, dtype, axis=3),
        "PAD": qop("PAD", [x(1, 3, 3, 2), Const(np.array([[0, 0], [1, 1], [0, 2], [1, 0]], np.int32))], (1, 5, 5, 3),
                   same, dtype),
        "SLICE": qop("SLICE", [x(1, 4, 5, 6), Const(np.array([0, 1, 1, 2], np.int32)),
                               Const(np.array([1, 2, 3, 3], np.int32))], (1, 2, 3, 3), same, dtype),
        "STRIDED_SLICE": qop("STRIDED_SLICE", [x(1, 4, 5, 6), Const(np.array([0, 0, 1, 0], np.int32)),
                                               Const(np.array([1, 4, 5, 6], np.int32)),
                                               Const(np.array([1, 2, 2, 1], np.int32))], (1, 2, 2, 6), same, dtype),
        "TRANSPOSE": qop("TRANSPOSE", [x(1, 4, 5, 6), Const(np.array([0, 2, 1, 3], np.int32))], (1, 5, 4, 6), same,
                         dtype),
        "DEPTH_TO_SPACE": qop("DEPTH_TO_SPACE", [x(1, 2, 3, 8)], (1, 4, 6, 2), same, dtype, version=1, block_size=2),
        "SPACE_TO_DEPTH": qop("SPACE_TO_DEPTH", [x(1, 4, 4, 3)], (1, 2, 2, 12), same, dtype, block_size=2),
        "LOGISTIC": qop("LOGISTIC", [x(2, 9)], (2, 9), (1 / 256, -128 if i8 else 0), dtype),
        "TANH": qop("TANH", [x(2, 9)], (2, 9), (1 / 128, 0 if i8 else 128), dtype),
        "HARD_SWISH": qop("HARD_SWISH", [x(2, 9)], (2, 9), oq, dtype, version=1),
        "RELU": qop("RELU", [x(2, 9)], (2, 9), oq, dtype),
        "RELU6": qop("RELU6", [x(2, 9)], (2, 9), oq, dtype),
        "QUANTIZE": qop("QUANTIZE", [x(2, 9)], (2, 9), (0.13, -7 if i8 else 130), dtype),  # requantize
        "QUANTIZE-float": (single_op_model("QUANTIZE", [In((2, 9))], [Out((2, 9), dtype, (0.02, -7 if i8 else 130))]),
                           [RNG.uniform(-2.5, 2.5, (2, 9)).astype(F32)]),
        "DEQUANTIZE": (single_op_model("DEQUANTIZE", [In((2, 9), dtype, same)], [Out((2, 9))], version=3),
                       [qin((2, 9), 0.05, zp, dtype)[0]]),
    }


CASES = {(dt.__name__, k): v for dt in (np.int8, np.uint8) for k, v in quant_cases(dt).items()}


def test_every_declared_quantized_combination_has_a_case():
    for dt in ("INT8", "UINT8"):
        declared = {op for op, (_, dts) in gpu_gl.OPS.items() if dt in dts}
        assert declared == {k.split("-")[0] for d, k in CASES if d == dt.lower()}, dt


@pytest.mark.parametrize("half", [True, False], ids=["fp16", "fp32"])
@pytest.mark.parametrize("key", sorted(CASES), ids=lambda k: f"{k[0]}-{k[1]}")
def test_quantized_op(key, half):
    model, inputs = CASES[key]
    check(model, inputs, half)


def test_dequantize_fp16_runtime_input():
    x = RNG.uniform(-3, 3, (2, 9)).astype(np.float16)
    check(single_op_model("DEQUANTIZE", [In(x.shape, np.float16)], [Out((2, 9))], version=3), [x], half=False)


def test_quant_disabled_rejects_int8():
    m, _ = CASES[("int8", "ADD")]
    it = Interpreter(model_content=m, experimental_delegates=[
        load_delegate("gpu-gl", {"gpu_experimental_enable_quant": False})])
    it.allocate_tensors()
    assert it.delegation.nodes_of("gpu-gl") == []
    assert "gpu_experimental_enable_quant" in it.delegation.rejections[0][0][1]


def test_spec_accepts_quantized_models():
    assert {"dynamic-range", "full-integer"} <= gpu_gl.SPEC.model_types


@pytest.mark.parametrize("name,avg_steps", [("small_cnn_int8", 1.0), ("hand_recrop_int8", 3.0)])
def test_int8_models_run_fully_on_gl(models_dir, name, avg_steps):
    m = (models_dir / f"{name}.tflite").read_bytes()
    probe = Interpreter(model_content=m)
    probe.allocate_tensors()
    inputs = [RNG.integers(-128, 128, d["shape"]).astype(d["dtype"]) for d in probe.get_input_details()]
    for half in (True, False):
        outs, it = run(m, inputs, half=half)
        assert not it.delegation.failures and not it.delegation.rejections
        for ref, got in outs:  # int8 outputs: the differences are quantization steps
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            assert diff.mean() <= avg_steps, (name, half, diff.mean(), diff.max())
