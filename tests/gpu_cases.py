"""Cases and helpers shared by the GPU test modules (gpu-opencl's and gpu-gl's): the float
single-op cases, the bool/int32 cases (comparisons, LOGICAL_AND, CAST, SELECT), the basic LSTM
model, and `run`/`check` against gpu-opencl. Test modules import these from here, never from
each other."""
from __future__ import annotations

import struct

import numpy as np
from gpu_testing import run_pair

from acelera import load_delegate
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model

F32 = np.float32

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


# --- float single-op cases (gpu-opencl, and gpu-gl's new ops) --------------------------------

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


# --- bool and int32 cases -----------------------------------------------------------------------

BOOL, I32 = np.bool_, np.int32
COMPARISONS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")


def grid(*shape):
    """Values on a coarse grid, so that comparisons see ties."""
    return (RNG.integers(-4, 5, shape) / 2).astype(F32)


def near_pairs(n):
    """x, and y within one float32 ulp of x: equal in half storage, different in float32."""
    x = RNG.uniform(-3, 3, n).astype(F32)
    y = np.nextafter(x, np.where(RNG.random(n) < 0.5, np.inf, -np.inf).astype(F32)).astype(F32)
    y[::3] = x[::3]
    return x, y


def logical_cases():
    c = {}
    for op in COMPARISONS:
        x, y = grid(1, 4, 5, 6), grid(1, 4, 5, 6)
        c[op] = op1(op, [x, y], x.shape, out_dtype=BOOL)
        c[f"{op}-bcast-const"] = op1(op, [grid(2, 3, 7), Const(np.array([0.5], F32))], (2, 3, 7), version=2,
                                     out_dtype=BOOL)
        c[f"{op}-bcast-channel"] = op1(op, [grid(1, 3, 4, 5), grid(1, 1, 1, 5)], (1, 3, 4, 5), out_dtype=BOOL)
        a, b = near_pairs(40)
        c[f"{op}-one-ulp"] = op1(op, [a.reshape(5, 8), b.reshape(5, 8)], (5, 8), out_dtype=BOOL)
    b1, b2 = RNG.random((2, 3, 4, 5)) < 0.5, RNG.random((1, 1, 4, 5)) < 0.5
    c["LOGICAL_AND"] = op1("LOGICAL_AND", [b1, b2], b1.shape, out_dtype=BOOL)
    c["LOGICAL_AND-const"] = op1("LOGICAL_AND", [b1, Const(RNG.random((2, 3, 4, 5)) < 0.5)], b1.shape, out_dtype=BOOL)
    big = (RNG.uniform(-1, 1, (3, 10)) * 10.0 ** RNG.integers(0, 10, (3, 10))).astype(F32)
    big[0, :6] = (np.nan, np.inf, -np.inf, 3e9, -3e9, -0.0)
    c["CAST-float-int32"] = op1("CAST", [big], big.shape, out_dtype=I32)
    c["CAST-int32-float"] = op1("CAST", [RNG.integers(-(2 ** 30), 2 ** 30, (4, 9)).astype(I32)], (4, 9))
    c["CAST-int32-int32"] = op1("CAST", [RNG.integers(-5000, 5000, (4, 9)).astype(I32)], (4, 9), out_dtype=I32)
    c["CAST-bool-float"] = op1("CAST", [RNG.random((2, 3, 5)) < 0.5], (2, 3, 5))
    fb = grid(3, 11)
    fb[0, :3] = (np.nan, -0.0, 1e-30)
    c["CAST-float-bool"] = op1("CAST", [fb], fb.shape, out_dtype=BOOL)
    c["CAST-float-float"] = op1("CAST", [rnd(3, 5)], (3, 5))
    x, y = rnd(1, 4, 5, 6), rnd(1, 4, 5, 6)
    c["SELECT"] = op1("SELECT", [x > 0, x, y], x.shape)
    c["SELECT-rank1-cond"] = op1("SELECT", [RNG.random(3) < 0.5, rnd(3, 4, 6), rnd(3, 4, 6)], (3, 4, 6))
    c["SELECT-scalar-cond"] = op1("SELECT", [np.array(False), rnd(2, 9), rnd(2, 9)], (2, 9), version=1)
    c["SELECT_V2"] = op1("SELECT_V2", [RNG.random((1, 4, 1, 6)) < 0.5, x, Const(np.array(0.25, F32))], x.shape)
    c["SELECT_V2-scalars"] = op1("SELECT_V2", [RNG.random((3, 7)) < 0.5, Const(np.array([1.5], F32)), rnd(3, 7)],
                                 (3, 7))
    return c


LOGICAL_CASES = logical_cases()
LOGICAL_TESTED = {n.split("-")[0] for n in LOGICAL_CASES}


# --- the basic LSTM ----------------------------------------------------------------------------

LSTM_TESTED = {"LSTM"}


def basic_lstm(nb=2, n_in=5, depth=8, variable=False, version=2, **opts):
    """input, previous activation, weights, biases, previous state -> activation, state,
    concat_temp, activ_temp; the state inputs are graph inputs unless `variable`."""
    b = ModelBuilder()
    x = b.add_input("x", (nb, n_in), F32)
    prev_a = (b.add_tensor("a", (nb, depth), F32, is_variable=True) if variable
              else b.add_input("a", (nb, depth), F32))
    w = b.add_constant("w", (RNG.standard_normal((4 * depth, n_in + depth)) * 0.5).astype(F32))
    bias = b.add_constant("b", RNG.standard_normal(4 * depth).astype(F32))
    prev_s = (b.add_tensor("s", (nb, depth), F32, is_variable=True) if variable
              else b.add_input("s", (nb, depth), F32))
    shapes = {"activ": (nb, depth), "state": (nb, depth), "concat": (nb, n_in + depth), "gates": (nb, 4 * depth)}
    outs = [b.add_tensor(n, shape, F32) for n, shape in shapes.items()]
    opts = {"kernel_type": "BASIC", "fused_activation_function": "TANH", **opts}
    b.add_operator("LSTM", [x, prev_a, w, bias, prev_s], outs, version=version, **opts)
    b.mark_outputs(*outs)
    inputs = [rnd(nb, n_in)] + ([] if variable else [rnd(nb, depth), rnd(nb, depth, lo=-2, hi=2)])
    return b.build(), inputs


# --- gpu-gl's newer shaders ----------------------------------------------------------------------

#: float ops whose GLSL versions test_gpu_ops_gl.py runs on the gpu-opencl cases above
GL_NEW_OPS = ("GELU", "SIGN", "ADD_N", "FLOOR_DIV", "FLOOR_MOD")


def gl_new_op_cases() -> dict:
    """The cases of gpu-gl's newer shaders: those float ops, the bool/int32 cases and the LSTM."""
    cases = {k: v for k, v in FLOAT_CASES.items() if k.split("-")[0] in GL_NEW_OPS}
    cases.update(LOGICAL_CASES)
    cases["LSTM"] = basic_lstm(2, 5, 8)
    return cases
