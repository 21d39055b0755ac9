"""gpu-opencl: the OpenCL GPU delegate against the CPU reference (PoCL where there is no GPU).

Skipped where pyopencl is missing or no OpenCL device works here, and failing instead under
CI=true (tests/needs.py). Every op of the declared table runs as a single-op model in fp32 and
fp16 storage (and int8 where declared), then whole models, the serialization cache, logging and
device selection. The OpenCL program is built once per process and storage precision (PoCL
caches kernels across sessions too). The cases shared with gpu-gl's tests are in gpu_cases.py.
"""
from __future__ import annotations

import logging
import stat
import sys

import numpy as np
import pytest
from gpu_testing import qin, qop, require_opencl

from acelera import Interpreter, load_delegate
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model

cl = require_opencl()

from gpu_cases import F32, FLOAT_CASES, LOGICAL_TESTED, LSTM_TESTED, RNG, check, rnd, run  # noqa: E402

from acelera.plugins import gpu_opencl  # noqa: E402
from acelera.plugins.gpu_opencl import device as gdev  # noqa: E402

# --- availability, spec --------------------------------------------------------------------------

def test_spec_flags_and_defaults():
    spec = gpu_opencl.SPEC
    names = {f.name: f for f in spec.flags}
    assert names["gpu_precision_loss_allowed"].default is True
    assert names["gpu_experimental_enable_quant"].default is True
    assert names["gpu_opencl_device"].default == ""
    assert spec.default_max_partitions == 1 and spec.fp16_weights_aware and spec.precision == "float16"
    assert spec.partition_limits({"max_delegated_partitions": 0}) == (1, 0)
    d = load_delegate("gpu-opencl", {"gpu_precision_loss_allowed": False})
    assert d.precision == {"float": "float32", "integer": "float-view"}
    assert load_delegate("gpu-opencl").precision["float"] == "float16"


def test_probe_without_pyopencl(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyopencl", None)
    monkeypatch.setattr(gdev, "_probe", None)
    monkeypatch.setattr(gdev, "_devices", {})
    monkeypatch.setattr(gdev, "_candidates", None)
    s = gdev.probe()
    assert not s.ok and "pyopencl is not installed" in s.reason


def test_probe_without_platforms(monkeypatch):
    def no_platforms():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")
    monkeypatch.setattr(cl, "get_platforms", no_platforms)
    monkeypatch.setattr(gdev, "_probe", None)
    monkeypatch.setattr(gdev, "_devices", {})
    monkeypatch.setattr(gdev, "_candidates", None)
    s = gdev.probe()
    assert not s.ok and "no OpenCL platform" in s.reason


def test_device_selection():
    found = gdev.list_devices()
    _, label = gdev.select(f"{found[0][0]}:{found[0][1]}")
    assert label.startswith(f"{found[0][0]}:{found[0][1]} ")
    name = found[0][3].name.split()[0]
    assert gdev.select(name)[0] is not None
    from acelera.registrar.registry import RegistryError
    with pytest.raises(RegistryError, match="no OpenCL device matches 'no-such-device'"):
        load_delegate("gpu-opencl", {"gpu_opencl_device": "no-such-device"})


# --- single ops, float (the cases: gpu_cases.py) ------------------------------------------------

@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_float_op(name, half):
    model, inputs = FLOAT_CASES[name]
    check(model, inputs, half=half)


def test_every_declared_op_is_tested():
    tested = {n.split("-")[0] for n in FLOAT_CASES} | set(QUANT_CASES_OPS) | {"QUANTIZE", "DEQUANTIZE"}
    assert set(gpu_opencl.OPS) <= tested | LOGICAL_TESTED | LSTM_TESTED


def test_runtime_weights():
    x, w, b = rnd(1, 6, 6, 5), rnd(4, 3, 3, 5), rnd(4)
    m = single_op_model("CONV_2D", [In(x.shape), In(w.shape), In(b.shape)], [Out((1, 6, 6, 4))], padding="SAME",
                        stride_h=1, stride_w=1)
    check(m, [x, w, b])
    fw = rnd(3, 10)
    m = single_op_model("FULLY_CONNECTED", [In((2, 10)), In(fw.shape), None], [Out((2, 3))])
    check(m, [rnd(2, 10), fw])
    # int8 per-channel runtime weights
    x, xq = qin((1, 5, 5, 3), 0.05, 1)
    wq = RNG.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    wspec = (np.array([0.01, 0.02, 0.03, 0.04], F32), np.zeros(4, np.int64), 0)
    m = single_op_model("CONV_2D", [In(x.shape, np.int8, xq), In(wq.shape, np.int8, wspec), None],
                        [Out((1, 5, 5, 4), np.int8, (0.05, 0))], version=3, padding="SAME", stride_h=1, stride_w=1)
    check(m, [x, wq], half=True, steps=1)


def test_activation_fused_into_producer():
    b = ModelBuilder()
    x = b.add_input("x", (1, 8, 8, 5), F32)
    w, bias = b.add_constant("w", rnd(6, 3, 3, 5)), b.add_constant("b", rnd(6))
    c = b.add_tensor("c", (1, 8, 8, 6), F32)
    b.add_operator("CONV_2D", [x, w, bias], [c], padding="SAME", stride_h=1, stride_w=1)
    r = b.add_tensor("r", (1, 8, 8, 6), F32)
    b.add_operator("LOGISTIC", [c], [r])
    y = b.add_tensor("y", (1, 8, 8, 6), F32)
    b.add_operator("RELU", [r], [y])
    b.mark_outputs(y)
    it = check(b.build(), [rnd(1, 8, 8, 5)])
    kernel = it.execution_plan[0].fn.kernel
    assert [l.kernel for l in kernel.plan.launches] == ["conv2d_x8"]


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_fused_into_producer(approximate):
    b = ModelBuilder()
    x = b.add_input("x", (2, 7, 9), F32)
    t = b.add_tensor("t", (2, 7, 9), F32)
    b.add_operator("ADD", [x, b.add_constant("one", np.ones(9, F32))], [t], fused_activation_function="NONE")
    y = b.add_tensor("y", (2, 7, 9), F32)
    b.add_operator("GELU", [t], [y], approximate=approximate)
    b.mark_outputs(y)
    it = check(b.build(), [rnd(2, 7, 9, lo=-4, hi=2)])
    assert [l.kernel for l in it.execution_plan[0].fn.kernel.plan.launches] == ["binary"]


# --- quantized ------------------------------------------------------------------------------------



def quant_cases(dtype):
    zp = 3 if dtype == np.int8 else 128
    x = lambda *s: qin(s, 0.05, zp, dtype)  # noqa: E731
    oq = (0.04, -5 if dtype == np.int8 else 120)
    w = Const(RNG.integers(-127, 128, (5, 3, 3, 6)).astype(np.int8), (np.full(5, 0.02, F32), np.zeros(5, np.int64), 0))
    dw = Const(RNG.integers(-127, 128, (1, 3, 3, 6)).astype(np.int8), (np.full(6, 0.03, F32), np.zeros(6, np.int64), 3))
    fw = Const(RNG.integers(-127, 128, (4, 12)).astype(np.int8), (np.full(4, 0.02, F32), np.zeros(4, np.int64), 0))
    bias = lambda n, s: Const(RNG.integers(-500, 500, n).astype(np.int32), (np.full(n, s, F32), np.zeros(n, np.int64), 0))  # noqa: E731
    conv_w = w if dtype == np.int8 else None
    cases = {
        "ADD": qop("ADD", [x(1, 4, 5, 6), qin((1, 4, 5, 6), 0.03, -2 if dtype == np.int8 else 100, dtype)], (1, 4, 5, 6),
                   oq, dtype, fused_activation_function="RELU"),
        "SUB": qop("SUB", [x(1, 4, 5, 6), x(1, 4, 5, 6)], (1, 4, 5, 6), oq, dtype),
        "MUL": qop("MUL", [x(1, 4, 5, 6), x(1, 4, 5, 6)], (1, 4, 5, 6), (0.01, oq[1]), dtype),
        "MAXIMUM": qop("MAXIMUM", [x(2, 7), x(2, 7)], (2, 7), (0.05, zp), dtype),
        "MINIMUM": qop("MINIMUM", [x(2, 7), x(2, 7)], (2, 7), (0.05, zp), dtype),
        "AVERAGE_POOL_2D": qop("AVERAGE_POOL_2D", [x(1, 6, 6, 5)], (1, 3, 3, 5), (0.05, zp), dtype, padding="VALID",
                               stride_h=2, stride_w=2, filter_height=2, filter_width=2),
        "MAX_POOL_2D": qop("MAX_POOL_2D", [x(1, 6, 6, 5)], (1, 3, 3, 5), (0.05, zp), dtype, padding="SAME",
                           stride_h=2, stride_w=2, filter_height=3, filter_width=3),
        "RESIZE_BILINEAR": qop("RESIZE_BILINEAR", [x(1, 3, 4, 5), Const(np.array([6, 7], np.int32))], (1, 6, 7, 5),
                               (0.05, zp), dtype),
        "RESIZE_NEAREST_NEIGHBOR": qop("RESIZE_NEAREST_NEIGHBOR", [x(1, 3, 4, 5), Const(np.array([6, 7], np.int32))],
                                       (1, 6, 7, 5), (0.05, zp), dtype),
        "SOFTMAX": qop("SOFTMAX", [x(2, 10)], (2, 10), (1 / 256, -128 if dtype == np.int8 else 0), dtype, beta=1.0),
        "MEAN": qop("MEAN", [x(1, 4, 5, 6), Const(np.array([1, 2], np.int32))], (1, 1, 1, 6), oq, dtype, keep_dims=True),
        "RESHAPE": qop("RESHAPE", [x(1, 4, 5, 6), Const(np.array([1, 20, 6], np.int32))], (1, 20, 6), (0.05, zp),
                       dtype, version=1),
        "CONCATENATION": qop("CONCATENATION", [x(1, 3, 3, 2), qin((1, 3, 3, 5), 0.02, 1, dtype)], (1, 3, 3, 7), oq,
                             dtype, axis=3) if dtype == np.uint8 else  # int8 needs equal scales
        qop("CONCATENATION", [x(1, 3, 3, 2), x(1, 3, 3, 5)], (1, 3, 3, 7), (0.05, zp), dtype, axis=3),
        "PAD": qop("PAD", [x(1, 3, 3, 2), Const(np.array([[0, 0], [1, 1], [0, 2], [1, 0]], np.int32))], (1, 5, 5, 3),
                   (0.05, zp), dtype),
        "SLICE": qop("SLICE", [x(1, 4, 5, 6), Const(np.array([0, 1, 1, 2], np.int32)),
                               Const(np.array([1, 2, 3, 3], np.int32))], (1, 2, 3, 3), (0.05, zp), dtype),
        "STRIDED_SLICE": qop("STRIDED_SLICE", [x(1, 4, 5, 6), Const(np.array([0, 0, 1, 0], np.int32)),
                                               Const(np.array([1, 4, 5, 6], np.int32)),
                                               Const(np.array([1, 2, 2, 1], np.int32))], (1, 2, 2, 6), (0.05, zp), dtype),
        "TRANSPOSE": qop("TRANSPOSE", [x(1, 4, 5, 6), Const(np.array([0, 2, 1, 3], np.int32))], (1, 5, 4, 6),
                         (0.05, zp), dtype),
        "DEPTH_TO_SPACE": qop("DEPTH_TO_SPACE", [x(1, 2, 3, 8)], (1, 4, 6, 2), (0.05, zp), dtype, version=1,
                              block_size=2),
        "SPACE_TO_DEPTH": qop("SPACE_TO_DEPTH", [x(1, 4, 4, 3)], (1, 2, 2, 12), (0.05, zp), dtype, block_size=2),
        "LOGISTIC": qop("LOGISTIC", [x(2, 9)], (2, 9), (1 / 256, -128 if dtype == np.int8 else 0), dtype),
        "TANH": qop("TANH", [x(2, 9)], (2, 9), (1 / 128, 0 if dtype == np.int8 else 128), dtype),
        "HARD_SWISH": qop("HARD_SWISH", [x(2, 9)], (2, 9), oq, dtype, version=1),
        "RELU": qop("RELU", [x(2, 9)], (2, 9), oq, dtype),
        "RELU6": qop("RELU6", [x(2, 9)], (2, 9), oq, dtype),
        "QUANTIZE": qop("QUANTIZE", [x(2, 9)], (2, 9), (0.13, -7 if dtype == np.int8 else 130), dtype),
    }
    if dtype == np.int8:
        cases["CONV_2D"] = qop("CONV_2D", [x(1, 6, 7, 6), conv_w, bias(5, 0.05 * 0.02)], (1, 3, 4, 5), (0.1, -3),
                               dtype, version=3, padding="SAME", stride_h=2, stride_w=2)
        cases["DEPTHWISE_CONV_2D"] = qop("DEPTHWISE_CONV_2D", [x(1, 6, 7, 6), dw, bias(6, 0.05 * 0.03)], (1, 6, 7, 6),
                                         (0.05, -1), dtype, version=3, padding="SAME", stride_h=1, stride_w=1,
                                         depth_multiplier=1)
        cases["FULLY_CONNECTED"] = qop("FULLY_CONNECTED", [x(2, 12), fw, bias(4, 0.05 * 0.02)], (2, 4), (0.1, 2),
                                       dtype, version=4)
        cases["PRELU"] = qop("PRELU", [x(1, 3, 4, 6), Const(RNG.integers(-127, 128, (1, 1, 6)).astype(np.int8),
                                                              (0.01, 0))], (1, 3, 4, 6), oq, dtype, version=1)
    return cases


QUANT_CASES = {("int8", k): v for k, v in quant_cases(np.int8).items()}
QUANT_CASES.update({("uint8", k): v for k, v in quant_cases(np.uint8).items()})
QUANT_CASES_OPS = {k for _, k in QUANT_CASES}


@pytest.mark.parametrize("key", sorted(QUANT_CASES), ids=lambda k: f"{k[0]}-{k[1]}")
def test_quantized_op(key):
    model, inputs = QUANT_CASES[key]
    check(model, inputs, half=True, steps=1)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float16])
def test_dequantize_runtime_input(dtype):
    if dtype == np.float16:
        x, q = RNG.uniform(-3, 3, (2, 9)).astype(np.float16), None
    else:
        x, q = qin((2, 9), 0.05, 3, dtype)
    m = single_op_model("DEQUANTIZE", [In(x.shape, dtype, q)], [Out((2, 9))], version=3)
    check(m, [x])


def test_quant_disabled_rejects_int8():
    m, data = QUANT_CASES[("int8", "ADD")]
    d = load_delegate("gpu-opencl", {"gpu_experimental_enable_quant": False})
    it = Interpreter(model_content=m, experimental_delegates=[d])
    it.allocate_tensors()
    assert it.delegation.nodes_of("gpu-opencl") == []
    assert "gpu_experimental_enable_quant" in it.delegation.rejections[0][0][1]


# --- models ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["face_detection_short_range", "hand_recrop", "selfie_segmentation"])
def test_models_float(models_dir, name):
    x = None
    for half, rel in ((False, 2e-6), (True, 2e-3)):
        path = models_dir / f"{name}.tflite"
        ref = Interpreter(model_path=str(path))
        ref.allocate_tensors()
        it = Interpreter(model_path=str(path), experimental_delegates=[
            load_delegate("gpu-opencl", {"gpu_precision_loss_allowed": half})])
        it.allocate_tensors()
        assert len(it.execution_plan) == 1 and it.execution_plan[0].delegate == "gpu-opencl"
        det = ref.get_input_details()[0]
        x = rnd(*det["shape"]) if x is None else x
        for i in (ref, it):
            i.set_tensor(det["index"], x)
            i.invoke()
        for o in ref.get_output_details():
            a, b = ref.get_tensor(o["index"]), it.get_tensor(o["index"])
            assert np.abs(a - b).mean() <= rel * max(np.abs(a).max(), 1.0), (name, half, np.abs(a - b).mean())


def test_model_int8(models_dir):
    m = (models_dir / "small_cnn_int8.tflite").read_bytes()
    x = RNG.integers(-128, 128, (1, 32, 32, 3)).astype(np.int8)
    check(m, [x], half=True, steps=2)


# --- partitioning and logs ------------------------------------------------------------------------

def partial_model():
    """x -> ADD -> ROUND (not declared) -> ADD -> ADD: two candidate partitions."""
    b = ModelBuilder()
    t = b.add_input("x", (2, 6), F32)
    one = b.add_constant("one", np.ones((2, 6), F32))
    for i, op in enumerate(["ADD", "ROUND", "ADD", "ADD"]):
        nxt = b.add_tensor(f"t{i}", (2, 6), F32)
        if op == "ROUND":
            b.add_operator("ROUND", [t], [nxt])
        else:
            b.add_operator("ADD", [t, one], [nxt], fused_activation_function="NONE")
        t = nxt
    b.mark_outputs(t)
    return b.build()


def test_partial_delegation_logs_like_tflite(caplog):
    with caplog.at_level(logging.INFO, logger="acelera.gpu_opencl"):
        outs, it = run(partial_model(), [rnd(2, 6)])
    for ref, got in outs:
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert it.delegation.nodes_of("gpu-opencl") == [2, 3]  # max_delegated_partitions defaults to 1
    text = caplog.text
    assert "Following operations are not supported by GPU delegate:" in text
    assert "ROUND: op is not supported by gpu-opencl" in text
    assert "2 operations will run on the GPU, and the remaining 2 operations will run on the CPU." in text
    _, it = run(partial_model(), [rnd(2, 6)], max_delegated_partitions=2)
    assert it.delegation.nodes_of("gpu-opencl") == [0, 2, 3]


# --- serialization cache ----------------------------------------------------------------------------

def test_serialization_cache(tmp_path, monkeypatch):
    from acelera.backends import cache_store
    from acelera.backends.gpu.cache import CacheWarning
    cache = tmp_path / "cache"
    model, inputs = FLOAT_CASES["CONV_2D"]
    opts = {"delegate_serialize_dir": str(cache), "delegate_serialize_token": "tok"}

    def prepare(**extra):
        d = load_delegate("gpu-opencl", {**opts, **extra})
        it = Interpreter(model_content=model, experimental_delegates=[d])
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], inputs[0])
        it.invoke()
        return d, it.get_tensor(it.get_output_details()[0]["index"])

    d, cold = prepare()
    assert d.last_prepare == "compiled"
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].name.startswith("tok_") and files[0].suffix == ".bin"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    d, warm = prepare()
    assert d.last_prepare == "cache"
    np.testing.assert_array_equal(warm, cold)
    d, _ = prepare(gpu_precision_loss_allowed=False)  # other options: another entry
    assert d.last_prepare == "compiled" and len(list(cache.iterdir())) == 2
    files[0].write_bytes(b"garbage")
    with pytest.warns(CacheWarning, match="corrupt"):
        d, again = prepare()
    assert d.last_prepare == "compiled"
    np.testing.assert_array_equal(again, cold)
    d, _ = prepare()
    assert d.last_prepare == "cache"
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp")]
    # a program binary the driver refuses (e.g. after a driver update): reported, rebuilt, re-stored
    meta, entries = cache_store.read_file(files[0])
    ((key, e),) = entries.items()
    e.arrays["__binary__"] = np.frombuffer(b"not a program", np.uint8)
    cache_store.write_file(files[0], meta, {key: e})  # sealed again: a valid entry, a bad binary
    monkeypatch.setattr(d.dev, "programs", {})
    with pytest.warns(CacheWarning, match="does not load"):
        d, again = prepare()
    assert d.last_prepare == "cache"
    np.testing.assert_array_equal(again, cold)
    ((_, e),) = cache_store.read_file(files[0])[1].items()
    assert e.arrays["__binary__"].tobytes() != b"not a program"
