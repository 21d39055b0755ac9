"""gpu-gl: the OpenGL ES 3.1 compute-shader GPU delegate against the CPU reference.

Skipped where moderngl is missing or no headless GL 4.3 context comes up through EGL (Mesa
llvmpipe where there is no GPU). Single-op models of every declared op in fp32 and fp16
storage, whole MediaPipe models, invoking from another thread, backend selection.
"""
from __future__ import annotations

import struct
import sys
import threading

import numpy as np
import pytest
from cli_flags import parse_cli
from gpu_testing import require_gl, run_pair  # noqa: E402

from acelera import Interpreter
from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.interpreter import OpResolverType

require_gl()

from acelera.plugins import gpu_gl  # noqa: E402
from acelera.plugins.gpu_gl import context as glctx  # noqa: E402

F32 = np.float32
RNG = np.random.default_rng(4321)


def rnd(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(F32)


def delegate(half=False):
    return gpu_gl.create({"gpu_precision_loss_allowed": half})


def run(model, inputs, half=False, model_path=None):
    kw = {"model_path": model_path} if model_path else {"model_content": model}
    return run_pair(inputs, delegate(half), **kw)


def check(model, inputs, half=False):
    outs, it = run(model, inputs, half)
    rep = it.delegation
    assert not rep.failures, rep.failures
    assert len(rep.nodes_of("gpu-gl")) == len(it._runtime(0).ex.sg.operators), rep.rejections
    for ref, got in outs:
        assert got.dtype == ref.dtype and got.shape == ref.shape
        scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1.0)
        np.testing.assert_allclose(got, ref, atol=(2e-3 if half else 1e-5) * scale, rtol=1e-2 if half else 1e-5)


def op1(op, ins, out_shape, *, version=1, custom_code=None, custom_options=b"", **opt):
    specs, data = [], []
    for x in ins:
        if isinstance(x, Const) or x is None:
            specs.append(x)
        else:
            specs.append(In(x.shape, x.dtype))
            data.append(x)
    m = single_op_model(op, specs, [Out(out_shape, F32)], version=version, custom_code=custom_code,
                        custom_options=custom_options, **opt)
    return m, data


def cases():
    x4 = rnd(2, 5, 7, 6)
    cases = {
        "CONV_2D": op1("CONV_2D", [rnd(1, 9, 11, 6), Const(rnd(10, 3, 3, 6)), Const(rnd(10))], (1, 5, 6, 10),
                       padding="SAME", stride_h=2, stride_w=2, fused_activation_function="RELU6"),
        "CONV_2D-1x1": op1("CONV_2D", [rnd(1, 6, 9, 13), Const(rnd(7, 1, 1, 13)), Const(rnd(7))], (1, 6, 9, 7),
                           padding="SAME", stride_h=1, stride_w=1),
        "CONV_2D-dilated": op1("CONV_2D", [rnd(2, 12, 10, 5), Const(rnd(9, 3, 3, 5)), Const(rnd(9))], (2, 8, 6, 9),
                               padding="VALID", stride_h=1, stride_w=1, dilation_h_factor=2, dilation_w_factor=2,
                               fused_activation_function="RELU_N1_TO_1"),
        "DEPTHWISE_CONV_2D": op1("DEPTHWISE_CONV_2D", [rnd(1, 9, 8, 6), Const(rnd(1, 3, 3, 6)), Const(rnd(6))],
                                 (1, 5, 4, 6), padding="SAME", stride_h=2, stride_w=2, depth_multiplier=1,
                                 fused_activation_function="RELU"),
        "DEPTHWISE_CONV_2D-mult2": op1("DEPTHWISE_CONV_2D", [rnd(1, 7, 7, 3), Const(rnd(1, 3, 3, 6)), Const(rnd(6))],
                                       (1, 5, 5, 6), padding="VALID", stride_h=1, stride_w=1, depth_multiplier=2),
        "DEPTHWISE_CONV_2D-5x5": op1("DEPTHWISE_CONV_2D", [rnd(1, 9, 9, 4), Const(rnd(1, 5, 5, 4)), None],
                                     (1, 5, 5, 4), padding="VALID", stride_h=1, stride_w=1, depth_multiplier=1),
        "PAD": op1("PAD", [x4, Const(np.array([[0, 0], [1, 2], [0, 1], [3, 2]], np.int32))], (2, 8, 8, 11)),
        "MAX_POOL_2D": op1("MAX_POOL_2D", [x4], (2, 2, 3, 6), padding="VALID", stride_h=2, stride_w=2,
                           filter_height=2, filter_width=2, fused_activation_function="RELU"),
        "AVERAGE_POOL_2D": op1("AVERAGE_POOL_2D", [x4], (2, 3, 4, 6), padding="SAME", stride_h=2, stride_w=2,
                               filter_height=3, filter_width=3),
        "RELU": op1("RELU", [x4], x4.shape),
        "HARD_SWISH": op1("HARD_SWISH", [rnd(1, 4, 5, 7, lo=-5, hi=5)], (1, 4, 5, 7)),
        "LOGISTIC": op1("LOGISTIC", [rnd(1, 4, 5, 7, lo=-8, hi=8)], (1, 4, 5, 7)),
        "ADD": op1("ADD", [x4, rnd(2, 5, 7, 6)], x4.shape, fused_activation_function="RELU"),
        "ADD-broadcast": op1("ADD", [x4, Const(rnd(6))], x4.shape),
        "MUL": op1("MUL", [x4, rnd(2, 1, 1, 6)], x4.shape),
        "PRELU": op1("PRELU", [x4, Const(rnd(1, 1, 6))], x4.shape),
        "RESHAPE": op1("RESHAPE", [x4, Const(np.array([10, 42], np.int32))], (10, 42)),
        "CONCATENATION": op1("CONCATENATION", [rnd(2, 5, 7, 3), x4, Const(rnd(2, 5, 7, 2))], (2, 5, 7, 11), axis=3),
        "CONCATENATION-axis1": op1("CONCATENATION", [rnd(1, 3, 16), rnd(1, 5, 16)], (1, 8, 16), axis=1),
        "STRIDED_SLICE": op1("STRIDED_SLICE", [x4, Const(np.array([0, 1, 0, 1], np.int32)),
                                               Const(np.array([2, 5, 7, 6], np.int32)),
                                               Const(np.array([1, 2, 3, 2], np.int32))], (2, 2, 3, 3)),
        "RESIZE_BILINEAR": op1("RESIZE_BILINEAR", [rnd(1, 5, 6, 5), Const(np.array([9, 13], np.int32))],
                               (1, 9, 13, 5), version=3, half_pixel_centers=True),
        "RESIZE_BILINEAR-align": op1("RESIZE_BILINEAR", [rnd(1, 5, 6, 3), Const(np.array([8, 8], np.int32))],
                                     (1, 8, 8, 3), align_corners=True),
        "Convolution2DTransposeBias": op1("CUSTOM", [rnd(1, 4, 5, 6), Const(rnd(3, 4, 4, 6)), Const(rnd(3))],
                                          (1, 8, 10, 3), custom_code="Convolution2DTransposeBias",
                                          custom_options=struct.pack("<iii", 1, 2, 2)),
        "FULLY_CONNECTED": op1("FULLY_CONNECTED", [rnd(3, 37), Const(rnd(11, 37)), Const(rnd(11))], (3, 11),
                               fused_activation_function="RELU"),
        "FULLY_CONNECTED-flatten": op1("FULLY_CONNECTED", [rnd(1, 2, 3, 5), Const(rnd(6, 30)), None], (1, 6)),
        "SOFTMAX": op1("SOFTMAX", [rnd(3, 13, lo=-5, hi=5)], (3, 13), beta=1.0),
        "MEAN": op1("MEAN", [x4, Const(np.array([1, 2], np.int32))], (2, 1, 1, 6), keep_dims=True),
        "MEAN-channels": op1("MEAN", [x4, Const(np.array([-1], np.int32))], (2, 5, 7), keep_dims=False),
        "TRANSPOSE_CONV": op1("TRANSPOSE_CONV", [Const(np.array([1, 10, 12, 5], np.int32)), Const(rnd(5, 3, 3, 6)),
                                                 rnd(1, 5, 6, 6), Const(rnd(5))], (1, 10, 12, 5),
                              version=3, padding="SAME", stride_h=2, stride_w=2),
        "RESIZE_NEAREST_NEIGHBOR": op1("RESIZE_NEAREST_NEIGHBOR", [rnd(2, 3, 4, 5), Const(np.array([7, 9], np.int32))],
                                       (2, 7, 9, 5)),
        "PADV2": op1("PADV2", [x4, Const(np.array([[0, 0], [1, 0], [2, 1], [0, 0]], np.int32)),
                               Const(np.array([0.5], F32))], (2, 6, 10, 6)),
        "MIRROR_PAD": op1("MIRROR_PAD", [x4, Const(np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32))],
                          (2, 8, 10, 6), mode="REFLECT"),
        "SLICE": op1("SLICE", [x4, Const(np.array([1, 1, 2, 1], np.int32)), Const(np.array([1, 3, -1, 4], np.int32))],
                     (1, 3, 5, 4)),
        "TRANSPOSE": op1("TRANSPOSE", [x4, Const(np.array([0, 3, 1, 2], np.int32))], (2, 6, 5, 7)),
        "DEPTH_TO_SPACE": op1("DEPTH_TO_SPACE", [rnd(1, 3, 2, 8)], (1, 6, 4, 2), block_size=2),
        "SPACE_TO_DEPTH": op1("SPACE_TO_DEPTH", [rnd(1, 4, 6, 3)], (1, 2, 3, 12), block_size=2),
        "LEAKY_RELU": op1("LEAKY_RELU", [x4], x4.shape, alpha=0.2),
        "POW": op1("POW", [rnd(3, 6, lo=0.5, hi=2), rnd(3, 6)], (3, 6)),
    }
    for op in ("RELU6", "RELU_N1_TO_1", "TANH", "EXP", "ABS", "NEG", "SIN", "COS", "SQUARE", "FLOOR", "ELU"):
        cases[op] = op1(op, [rnd(2, 3, 5, 5, lo=-4, hi=4)], (2, 3, 5, 5))
    for op in ("SQRT", "RSQRT", "LOG"):
        cases[op] = op1(op, [rnd(3, 7, lo=0.1, hi=4)], (3, 7))
    for op in ("SUB", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"):
        kw = {"fused_activation_function": "RELU6"} if op in ("SUB", "DIV") else {}
        b = rnd(*x4.shape, lo=0.5, hi=2) if op == "DIV" else rnd(*x4.shape)
        cases[op] = op1(op, [x4, b], x4.shape, **kw)
    return cases


CASES = cases()


def test_every_declared_op_has_a_case():
    """Every op declared with FLOAT32 has a float case here (int8/uint8: test_gpu_gl_quant.py;
    LSTM, comparisons, LOGICAL_AND, CAST, SELECT and the newer float ops: test_gpu_ops_gl.py)."""
    from gpu_cases import gl_new_op_cases

    from acelera.backends.gpu.optable import OPS as PLAN_OPS

    # float QUANTIZE input: the quantized tests
    covered = {k.split("-")[0] for k in [*CASES, *gl_new_op_cases()]} | {"QUANTIZE"}
    assert set(gpu_gl.OP_TABLE.rows) == set(gpu_gl.OPS) == set(gpu_gl.GL_OPS)
    assert {op for op, (_, dts) in gpu_gl.OPS.items() if "FLOAT32" in dts} <= covered
    assert all(gpu_gl.OPS[op] == PLAN_OPS[op] for op in gpu_gl.OPS)  # the shared table's rows


def test_pow_and_tanh_special_values():
    """C's pow where GLSL's is undefined (negative bases, zero), NaN through TANH."""
    x = np.array([[-2, -2, -2, -0.5, 0, 0, 0, 3, -3, 2, -1.5, 4, -0.0, np.nan, 1]], F32)
    y = np.array([[3, 2, 0.5, -1, 0, 2, -1, 0.5, -2, 10, 1, -0.5, -3, 2, np.nan]], F32)
    for half in (False, True):
        (ref, got), = run(op1("POW", [x, y], x.shape)[0], [x, y], half)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-2 if half else 1e-6, equal_nan=True)
        num = ~np.isnan(ref)
        assert np.array_equal(np.signbit(got[num]), np.signbit(ref[num]))  # -inf, -0
    t = np.array([[np.nan, -np.inf, np.inf, 0.5]], F32)
    (ref, got), = run(op1("TANH", [t], t.shape)[0], [t])[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_single_op(name, half):
    model, data = CASES[name]
    check(model, data, half)


def test_spec_and_flags():
    spec = gpu_gl.SPEC
    assert spec.fallback_for == "gpu-opencl" and spec.enabled_by == ("use_gpu",)
    assert spec.wants({"gpu_backend": "gl"}) and spec.wants({"gpu_backend": ""}) and not spec.wants({"gpu_backend": "cl"})
    from acelera.plugins.gpu_opencl import SPEC as CL
    shared = {f.name: f for f in CL.flags}
    for f in spec.flags:
        assert shared[f.name] == f  # identical specs of the shared GPU flags
    from acelera.backends.gpu.rules import gpu_precision
    assert delegate(True).precision == gpu_precision({"gpu_precision_loss_allowed": True})
    assert delegate(True).precision["float"] == "float16" and delegate(False).precision["float"] == "float32"
    assert spec.model_types == CL.model_types  # the same quantized-model behaviour as gpu-opencl
    assert "no program-binary serialization" not in spec.notes


def test_probe_without_moderngl(monkeypatch):
    monkeypatch.setitem(sys.modules, "moderngl", None)
    monkeypatch.setattr(glctx, "_device", None)
    monkeypatch.setattr(glctx, "_error", None)
    s = glctx.probe()
    assert not s.ok and "moderngl is not installed" in s.reason


def test_backend_selection(monkeypatch):
    from acelera.core.delegate import Support
    from acelera.registrar.registry import get_registry

    reg = get_registry()
    monkeypatch.setitem(reg._availability, "gpu-gl", Support(True))
    monkeypatch.setitem(reg._availability, "gpu-opencl", Support(True))
    names = lambda argv: [s.name for s in reg.enabled(parse_cli(reg.flagset, argv))]  # noqa: E731
    assert names(["--use_gpu", "--gpu_backend=gl"]) == ["gpu-gl"]
    assert names(["--use_gpu"]) == ["gpu-opencl"]
    monkeypatch.setitem(reg._availability, "gpu-opencl", Support(False, "no OpenCL"))
    with pytest.warns(UserWarning, match="falling back to gpu-gl"):
        assert names(["--use_gpu"]) == ["gpu-gl"]


def test_invoke_from_other_threads():
    model, data = CASES["CONV_2D"]
    ref = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], data[0])
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    it = Interpreter(model_content=model, experimental_delegates=[delegate()])
    it.allocate_tensors()
    got, errors = [], []

    def work():
        try:
            it.set_tensor(it.get_input_details()[0]["index"], data[0])
            it.invoke()
            got.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    for _ in range(3):
        t = threading.Thread(target=work)
        t.start()
        t.join(timeout=60)
        assert not t.is_alive(), "invoke from another thread hung"
    assert not errors, errors
    for g in got:
        np.testing.assert_allclose(g, want, atol=1e-5, rtol=1e-5)
    dev = glctx.open_device()
    assert dev._thread is not threading.current_thread()  # GL work runs on its own thread


@pytest.mark.parametrize("name,avg16", [("face_detection_short_range", 2e-2), ("hand_recrop", 3e-2),
                                        ("selfie_segmentation", 1e-4)])
def test_models_run_fully_on_gl(name, avg16, models_dir):
    path = str(models_dir / f"{name}.tflite")
    rng = np.random.default_rng(0)
    probe = Interpreter(model_path=path)
    probe.allocate_tensors()
    inputs = [rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]) for d in probe.get_input_details()]
    for half, avg in ((False, 1e-5), (True, avg16)):
        outs, it = run(None, inputs, half, model_path=path)
        rep = it.delegation
        assert not rep.failures and not rep.rejections
        for ref, got in outs:
            scale = max(float(np.abs(ref).max()), 1.0)
            assert float(np.mean(np.abs(got.astype(np.float64) - ref))) < avg * scale
