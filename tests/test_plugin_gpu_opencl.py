"""gpu-opencl: the OpenCL GPU delegate against the CPU reference (PoCL where there is no GPU).

Skipped where pyopencl is missing or no OpenCL device works here. Every op of the declared
table runs as a single-op model in fp32 and fp16 storage (and int8 where declared), then
whole models, the serialization cache, logging and device selection. The OpenCL program is
built once per process and storage precision (PoCL caches kernels across sessions too).
"""
from __future__ import annotations

import logging
import stat
import struct
import sys

import numpy as np
import pytest

from acelera import Interpreter, load_delegate
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model

cl = pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install pyopencl pocl-binary-distribution)")

from acelera.plugins import gpu_opencl  # noqa: E402
from acelera.plugins.gpu_opencl import device as gdev  # noqa: E402

_avail = gdev.probe()
if not _avail.ok:
    pytest.skip(f"no usable OpenCL device: {_avail.reason}", allow_module_level=True)

F32 = np.float32
from gpu_testing import qin, qop, run_pair  # noqa: E402

RNG = np.random.default_rng(1234)


def rnd(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(F32)


def run(model: bytes, inputs, half: bool = False, **opts):
    """(reference outputs, delegate outputs, delegated interpreter)."""
    return run_pair(inputs, load_delegate("gpu-opencl", {"gpu_precision_loss_allowed": half, **opts}),
                    model_content=model)


def check(model, inputs, half=False, full=True, atol=None, rtol=None, steps=None):
    outs, it = run(model, inputs, half)
    if full:
        rep = it.delegation
        assert not rep.failures, rep.failures
        assert len(rep.nodes_of("gpu-opencl")) == len(it._runtime(0).ex.sg.operators), rep.rejections
    for ref, got in outs:
        assert got.dtype == ref.dtype and got.shape == ref.shape
        if steps is not None:
            assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= steps
        else:
            scale = float(np.abs(ref).max()) if ref.size else 0.0
            a = atol if atol is not None else (2e-3 * max(scale, 1.0) if half else 1e-5 * max(scale, 1.0))
            np.testing.assert_allclose(got, ref, atol=a, rtol=rtol if rtol is not None else (1e-2 if half else 1e-5))
    return it


def op1(op, ins, out_shape, *, version=1, custom_code=None, custom_options=b"", out_dtype=F32, out_q=None, **opt):
    """A single-op model; `ins` is a list of arrays (graph inputs) or Const."""
    specs, data = [], []
    for x in ins:
        if isinstance(x, Const) or x is None:
            specs.append(x)
        else:
            specs.append(In(x.shape, x.dtype))
            data.append(x)
    m = single_op_model(op, specs, [Out(out_shape, out_dtype, out_q)], version=version, custom_code=custom_code,
                        custom_options=custom_options, **opt)
    return m, data


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
    s = gdev.probe()
    assert not s.ok and "pyopencl is not installed" in s.reason


def test_probe_without_platforms(monkeypatch):
    def no_platforms():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")
    monkeypatch.setattr(cl, "get_platforms", no_platforms)
    monkeypatch.setattr(gdev, "_probe", None)
    monkeypatch.setattr(gdev, "_devices", {})
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


# --- single ops, float ---------------------------------------------------------------------------

def conv_case(shape=(1, 9, 11, 6), o=10, k=3, stride=2, dil=1, padding="SAME", act="RELU6", batch=None):
    x = rnd(*shape)
    w, b = rnd(o, k, k, shape[3]), rnd(o)
    from acelera.core.kernels.conv import out_size
    p = 0 if padding == "SAME" else 1
    oh, ow = out_size(p, shape[1], k, stride, dil), out_size(p, shape[2], k, stride, dil)
    return op1("CONV_2D", [x, Const(w), Const(b)], (shape[0], oh, ow, o), padding=padding, stride_h=stride,
               stride_w=stride, dilation_h_factor=dil, dilation_w_factor=dil, fused_activation_function=act)


def float_cases():
    x4 = rnd(2, 5, 7, 6)
    cases = {
        "CONV_2D": conv_case(),
        "CONV_2D-1x1": conv_case((1, 6, 9, 13), o=7, k=1, stride=1, act="NONE"),
        "CONV_2D-valid-dilated": conv_case((2, 12, 10, 5), o=9, k=3, stride=1, dil=2, padding="VALID", act="RELU_N1_TO_1"),
        "DEPTHWISE_CONV_2D": op1("DEPTHWISE_CONV_2D", [rnd(1, 9, 8, 6), Const(rnd(1, 3, 3, 6)), Const(rnd(6))],
                                 (1, 5, 4, 6), padding="SAME", stride_h=2, stride_w=2, depth_multiplier=1,
                                 fused_activation_function="RELU"),
        "DEPTHWISE_CONV_2D-mult2": op1("DEPTHWISE_CONV_2D", [rnd(1, 7, 7, 3), Const(rnd(1, 3, 3, 6)), Const(rnd(6))],
                                       (1, 5, 5, 6), padding="VALID", stride_h=1, stride_w=1, depth_multiplier=2),
        "FULLY_CONNECTED": op1("FULLY_CONNECTED", [rnd(3, 37), Const(rnd(11, 37)), Const(rnd(11))], (3, 11),
                               fused_activation_function="RELU"),
        "FULLY_CONNECTED-flatten": op1("FULLY_CONNECTED", [rnd(1, 2, 3, 5), Const(rnd(6, 30)), None], (1, 6)),
        "FULLY_CONNECTED-keepdims": op1("FULLY_CONNECTED", [rnd(1, 4, 9), Const(rnd(5, 9)), Const(rnd(5))], (1, 4, 5),
                                        version=5, keep_num_dims=True),
        "TRANSPOSE_CONV": op1("TRANSPOSE_CONV", [Const(np.array([1, 10, 12, 5], np.int32)), Const(rnd(5, 3, 3, 6)),
                                                 rnd(1, 5, 6, 6), Const(rnd(5))], (1, 10, 12, 5),
                              version=3, padding="SAME", stride_h=2, stride_w=2),
        "Convolution2DTransposeBias": op1("CUSTOM", [rnd(1, 4, 5, 6), Const(rnd(3, 4, 4, 6)), Const(rnd(3))],
                                          (1, 8, 10, 3), custom_code="Convolution2DTransposeBias",
                                          custom_options=struct.pack("<iii", 1, 2, 2)),
        "AVERAGE_POOL_2D": op1("AVERAGE_POOL_2D", [x4], (2, 3, 4, 6), padding="SAME", stride_h=2, stride_w=2,
                               filter_height=3, filter_width=3),
        "MAX_POOL_2D": op1("MAX_POOL_2D", [x4], (2, 2, 3, 6), padding="VALID", stride_h=2, stride_w=2,
                           filter_height=2, filter_width=2, fused_activation_function="RELU"),
        "RESIZE_BILINEAR": op1("RESIZE_BILINEAR", [rnd(1, 5, 6, 5), Const(np.array([9, 13], np.int32))], (1, 9, 13, 5),
                               version=3, half_pixel_centers=True),
        "RESIZE_BILINEAR-align": op1("RESIZE_BILINEAR", [rnd(1, 5, 6, 3), Const(np.array([8, 8], np.int32))],
                                     (1, 8, 8, 3), align_corners=True),
        "RESIZE_NEAREST_NEIGHBOR": op1("RESIZE_NEAREST_NEIGHBOR", [rnd(2, 3, 4, 5), Const(np.array([7, 9], np.int32))],
                                       (2, 7, 9, 5)),
        "SOFTMAX": op1("SOFTMAX", [rnd(3, 13, lo=-5, hi=5)], (3, 13), beta=1.0),
        "SOFTMAX-4d": op1("SOFTMAX", [rnd(1, 3, 4, 6)], (1, 3, 4, 6), beta=1.0),
        "MEAN": op1("MEAN", [x4, Const(np.array([1, 2], np.int32))], (2, 1, 1, 6), keep_dims=True),
        "MEAN-channels": op1("MEAN", [x4, Const(np.array([-1], np.int32))], (2, 5, 7), keep_dims=False),
        "MEAN-flat": op1("MEAN", [x4, Const(np.array([1, 2], np.int32))], (2, 6), keep_dims=False),
        "RESHAPE": op1("RESHAPE", [x4, Const(np.array([2, 35, 6], np.int32))], (2, 35, 6)),
        "RESHAPE-channels": op1("RESHAPE", [x4, Const(np.array([10, 42], np.int32))], (10, 42)),
        "CONCATENATION": op1("CONCATENATION", [rnd(2, 5, 7, 3), x4, Const(rnd(2, 5, 7, 2))], (2, 5, 7, 11), axis=3),
        "CONCATENATION-axis1": op1("CONCATENATION", [rnd(1, 3, 16), rnd(1, 5, 16)], (1, 8, 16), axis=1,
                                   fused_activation_function="RELU"),
        "PAD": op1("PAD", [x4, Const(np.array([[0, 0], [1, 2], [0, 1], [3, 2]], np.int32))], (2, 8, 8, 11)),
        "PAD-channels": op1("PAD", [x4, Const(np.array([[0, 0], [0, 0], [0, 0], [0, 3]], np.int32))], (2, 5, 7, 9)),
        "CONCATENATION-slices": op1("CONCATENATION", [rnd(1, 3, 4, 8), rnd(1, 3, 4, 4)], (1, 3, 4, 12), axis=3),
        "DEPTHWISE_CONV_2D-s1": op1("DEPTHWISE_CONV_2D", [rnd(2, 7, 10, 5), Const(rnd(1, 3, 3, 5)), Const(rnd(5))],
                                    (2, 7, 10, 5), padding="SAME", stride_h=1, stride_w=1, depth_multiplier=1,
                                    fused_activation_function="RELU6"),
        "DEPTHWISE_CONV_2D-5x5": op1("DEPTHWISE_CONV_2D", [rnd(1, 9, 9, 4), Const(rnd(1, 5, 5, 4)), None],
                                     (1, 5, 5, 4), padding="VALID", stride_h=1, stride_w=1, dilation_h_factor=1,
                                     dilation_w_factor=1, depth_multiplier=1),
        "PADV2": op1("PADV2", [x4, Const(np.array([[0, 0], [1, 0], [2, 1], [0, 0]], np.int32)),
                               Const(np.array([0.5], F32))], (2, 6, 10, 6)),
        "MIRROR_PAD": op1("MIRROR_PAD", [x4, Const(np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32))],
                          (2, 8, 10, 6), mode="REFLECT"),
        "SLICE": op1("SLICE", [x4, Const(np.array([1, 1, 2, 1], np.int32)), Const(np.array([1, 3, -1, 4], np.int32))],
                     (1, 3, 5, 4)),
        "STRIDED_SLICE": op1("STRIDED_SLICE", [x4, Const(np.array([0, 1, 0, 1], np.int32)),
                                               Const(np.array([2, 5, 7, 6], np.int32)),
                                               Const(np.array([1, 2, 3, 2], np.int32))], (2, 2, 3, 3)),
        "TRANSPOSE": op1("TRANSPOSE", [x4, Const(np.array([0, 3, 1, 2], np.int32))], (2, 6, 5, 7)),
        "DEPTH_TO_SPACE": op1("DEPTH_TO_SPACE", [rnd(1, 3, 2, 8)], (1, 6, 4, 2), block_size=2),
        "SPACE_TO_DEPTH": op1("SPACE_TO_DEPTH", [rnd(1, 4, 6, 3)], (1, 2, 3, 12), block_size=2),
        "PRELU": op1("PRELU", [x4, Const(rnd(1, 1, 6))], x4.shape),
        "LEAKY_RELU": op1("LEAKY_RELU", [x4], x4.shape, alpha=0.2),
    }
    for op in ("RELU", "RELU6", "RELU_N1_TO_1", "LOGISTIC", "TANH", "HARD_SWISH", "EXP", "ABS", "NEG", "SIN", "COS",
               "SQUARE", "FLOOR", "ELU"):
        cases[op] = op1(op, [rnd(2, 3, 5, 5, lo=-4, hi=4)], (2, 3, 5, 5))
    for op in ("SQRT", "RSQRT", "LOG"):
        cases[op] = op1(op, [rnd(3, 7, lo=0.1, hi=4)], (3, 7))
    for op in ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"):
        kw = {"fused_activation_function": "RELU6"} if op in ("ADD", "SUB", "MUL", "DIV") else {}
        b = rnd(*x4.shape, lo=0.5, hi=2) if op == "DIV" else rnd(*x4.shape)
        cases[op] = op1(op, [x4, b], x4.shape, **kw)
    cases["ADD-broadcast-channel"] = op1("ADD", [x4, Const(rnd(6))], x4.shape)
    cases["MUL-broadcast-3d"] = op1("MUL", [rnd(1, 5, 7, 6), rnd(5, 1, 6)], (1, 5, 7, 6))
    cases["SUB-scalar"] = op1("SUB", [Const(np.array(0.5, F32)), x4], x4.shape)
    cases["MAXIMUM-splat"] = op1("MAXIMUM", [x4, rnd(2, 5, 7, 1)], x4.shape)
    cases["POW"] = op1("POW", [rnd(3, 6, lo=0.5, hi=2), rnd(3, 6)], (3, 6))
    cases["GELU"] = op1("GELU", [rnd(2, 3, 5, 5, lo=-4, hi=4)], (2, 3, 5, 5), approximate=False)
    cases["GELU-approximate"] = op1("GELU", [rnd(3, 7, lo=-4, hi=4)], (3, 7), version=2, approximate=True)
    cases["SIGN"] = op1("SIGN", [np.where(RNG.random((2, 5, 6)) < 0.2, 0, rnd(2, 5, 6)).astype(F32)], (2, 5, 6))
    cases["ADD_N"] = op1("ADD_N", [x4, rnd(*x4.shape)], x4.shape)
    divisor = (rnd(1, 1, 7, 6, lo=0.5, hi=3) * np.where(RNG.random((1, 1, 7, 6)) < 0.5, -1, 1)).astype(F32)
    for op in ("FLOOR_DIV", "FLOOR_MOD"):
        cases[op] = op1(op, [x4 * 4, divisor], x4.shape, version=2)
        cases[f"{op}-const"] = op1(op, [rnd(3, 8, lo=-9, hi=9), Const(np.array(-2.5, F32))], (3, 8), version=2)
    # float32 division rounds 62.576534 / 0.6075392 up to 103; TFLite's double quotient floors to 102
    num = np.array([[62.576534, 6.0, 7.0, -7.0, 1.0, -1.0, 0.3, 9.0]], F32)
    cases["FLOOR_DIV-double-quotient"] = op1("FLOOR_DIV", [num, Const(np.array([[0.6075392, 3.0, 7.0, 7.0, 0.1, 0.1, 0.1,
                                                                                 -3.0]], F32))], num.shape, version=2)
    return cases


FLOAT_CASES = float_cases()


@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_float_op(name, half):
    model, inputs = FLOAT_CASES[name]
    check(model, inputs, half=half)


def test_every_declared_op_is_tested():
    from test_gpu_ops_logical import TESTED as logical
    from test_gpu_ops_lstm import TESTED as lstm

    tested = {n.split("-")[0] for n in FLOAT_CASES} | set(QUANT_CASES_OPS) | {"QUANTIZE", "DEQUANTIZE"}
    assert set(gpu_opencl.OPS) <= tested | logical | lstm


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
    kernel = it.execution_plan[0].fn.__self__
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
    assert [l.kernel for l in it.execution_plan[0].fn.__self__.plan.launches] == ["binary"]


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
    from acelera.plugins.gpu_plan.cache import CacheWarning
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
    with np.load(files[0]) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["__binary__"] = np.frombuffer(b"not a program", np.uint8)
    with open(files[0], "wb") as f:
        np.savez(f, **arrays)
    monkeypatch.setattr(d.dev, "programs", {})
    with pytest.warns(CacheWarning, match="does not load"):
        d, again = prepare()
    assert d.last_prepare == "cache"
    np.testing.assert_array_equal(again, cold)
    with np.load(files[0]) as z:
        assert bytes(z["__binary__"]) != b"not a program"
