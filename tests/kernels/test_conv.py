"""CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV and MediaPipe's Convolution2DTransposeBias
against LiteRT: float within tolerance, int8/uint8/int16 bit-exact."""
from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
from helpers import expect_unsupported, quant_of, rng_of
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert, random_input, run_acelera, run_litert

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.model import load_model

ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH"]
QACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
SETTINGS = settings(max_examples=25, deadline=None)


# --- helpers ---------------------------------------------------------------------------------

def out_dim(pad: str, size: int, k: int, s: int, d: int = 1) -> int:
    eff = (k - 1) * d + 1
    num = size + s - 1 if pad == "SAME" else size + s - eff
    return int(num / s)  # C++ truncation


def out_scale(in_s: float, w_s: float, k: int, spread: float, target: float) -> float:
    """An output scale giving accumulators of ~`target` output quanta (times 1/factor)."""
    return float(in_s * w_s * math.sqrt(max(k, 1)) * spread / target)


def int4_pack(values: np.ndarray) -> bytes:
    flat = values.reshape(-1).astype(np.int16) & 0xF
    if flat.size % 2:
        flat = np.append(flat, 0)
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()


def model_with_int4_weights(op: str, x_spec: In, w: np.ndarray, w_quant, bias: np.ndarray,
                            out: Out, version: int, **options) -> bytes:
    """A single-op model whose (int8-valued) weights are stored as a packed INT4 tensor."""
    b = ModelBuilder()
    x = b.add_input("x", x_spec.shape, x_spec.dtype, x_spec.quant)
    wi = b.add_constant("w", w.astype(np.int8), w_quant)
    b.buffers[b.tensors[wi].buffer] = int4_pack(w)
    b.tensors[wi].type = 17
    bi = b.add_constant("b", bias)
    y = b.add_tensor("y", out.shape, out.dtype, out.quant)
    b.add_operator(op, [x, wi, bi], [y], version=version, **options)
    b.mark_outputs(y)
    return b.build()


@st.composite
def geometry(draw, max_hw: int = 9, max_k: int = 4, max_s: int = 3, max_d: int = 3):
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw))
    kh, kw = draw(st.integers(1, max_k)), draw(st.integers(1, max_k))
    sh, sw = draw(st.integers(1, max_s)), draw(st.integers(1, max_s))
    dh, dw = draw(st.integers(1, max_d)), draw(st.integers(1, max_d))
    pad = draw(st.sampled_from(["SAME", "VALID"]))
    if pad == "VALID":
        # LiteRT rejects a negative output size; zero-sized outputs are allowed.
        assume(h + sh - ((kh - 1) * dh + 1) > -sh and w + sw - ((kw - 1) * dw + 1) > -sw)
    return dict(n=n, h=h, w=w, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pad=pad)


def conv_options(g, act, **extra):
    return dict(padding=g["pad"], stride_h=g["sh"], stride_w=g["sw"], dilation_h_factor=g["dh"],
                dilation_w_factor=g["dw"], fused_activation_function=act, **extra)


def conv_out_shape(g, o):
    return (g["n"], out_dim(g["pad"], g["h"], g["kh"], g["sh"], g["dh"]),
            out_dim(g["pad"], g["w"], g["kw"], g["sw"], g["dw"]), o)


# --- CONV_2D ---------------------------------------------------------------------------------

@SETTINGS
@given(g=geometry(), c=st.integers(1, 6), o=st.integers(1, 5), groups=st.sampled_from([1, 1, 2, 3]),
       act=st.sampled_from(ACTS), seed=st.integers(0, 2 ** 16))
def test_conv2d_float(g, c, o, groups, act, seed):
    rng = rng_of(seed)
    ci = c
    c, o = ci * groups, o * groups  # grouped convolution (version 6) when groups > 1
    x = rng.uniform(-2, 2, (g["n"], g["h"], g["w"], c)).astype(np.float32)
    w = rng.uniform(-1, 1, (o, g["kh"], g["kw"], ci)).astype(np.float32)
    b = rng.uniform(-1, 1, o).astype(np.float32)
    model = single_op_model("CONV_2D", [In(x.shape), Const(w), Const(b)],
                            [Out(conv_out_shape(g, o))], version=6 if groups > 1 else 1,
                            **conv_options(g, act))
    assert_matches_litert(model, [x])


@SETTINGS
@given(g=geometry(), c=st.integers(1, 8), o=st.integers(1, 6), groups=st.sampled_from([1, 1, 1, 2]),
       act=st.sampled_from(QACTS), per_channel=st.booleans(), big_mult=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_conv2d_int8(g, c, o, groups, act, per_channel, big_mult, seed):
    rng = rng_of(seed)
    ci = c
    c, o = ci * groups, o * groups
    in_s, in_zp = float(rng.uniform(0.005, 0.1)), int(rng.integers(-128, 128))
    w_s = rng.uniform(0.001, 0.02, o if per_channel else 1).astype(np.float32)
    k = g["kh"] * g["kw"] * ci
    o_s = out_scale(in_s, float(w_s.mean()), k, 5400.0, 30.0) * float(rng.uniform(0.3, 3))
    if big_mult:
        o_s = in_s * float(w_s.min()) * float(rng.uniform(0.2, 0.9))  # effective scale > 1
    o_zp = int(rng.integers(-128, 128))
    x = random_input((g["n"], g["h"], g["w"], c), np.int8, rng)
    w = rng.integers(-127, 128, (o, g["kh"], g["kw"], ci)).astype(np.int8)
    b = rng.integers(-20000, 20000, o).astype(np.int32)
    wq = (w_s, np.zeros(o, np.int64), 0) if per_channel else (float(w_s[0]), 0)
    model = single_op_model("CONV_2D", [In(x.shape, np.int8, (in_s, in_zp)), Const(w, wq), Const(b)],
                            [Out(conv_out_shape(g, o), np.int8, (o_s, o_zp))],
                            version=6 if groups > 1 else 3, **conv_options(g, act))
    assert_matches_litert(model, [x])


@SETTINGS
@given(g=geometry(max_hw=7), c=st.integers(1, 5), o=st.integers(1, 5), act=st.sampled_from(QACTS),
       seed=st.integers(0, 2 ** 16))
def test_conv2d_uint8(g, c, o, act, seed):
    rng = rng_of(seed)
    in_s, in_zp = float(rng.uniform(0.005, 0.1)), int(rng.integers(0, 256))
    w_s, w_zp = float(rng.uniform(0.001, 0.02)), int(rng.integers(0, 256))
    k = g["kh"] * g["kw"] * c
    o_s = out_scale(in_s, w_s, k, 5400.0, 30.0) * float(rng.uniform(0.3, 3))
    x = random_input((g["n"], g["h"], g["w"], c), np.uint8, rng)
    w = rng.integers(0, 256, (o, g["kh"], g["kw"], c)).astype(np.uint8)
    b = rng.integers(-20000, 20000, o).astype(np.int32)
    model = single_op_model(
        "CONV_2D", [In(x.shape, np.uint8, (in_s, in_zp)), Const(w, (w_s, w_zp)),
                    Const(b, (float(np.float32(in_s) * np.float32(w_s)), 0))],
        [Out(conv_out_shape(g, o), np.uint8, (o_s, int(rng.integers(0, 256))))],
        **conv_options(g, act))
    assert_matches_litert(model, [x])


@SETTINGS
@given(g=geometry(max_hw=7), c=st.integers(1, 40), o=st.integers(1, 4), act=st.sampled_from(QACTS),
       bias32=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_conv2d_int16x8(g, c, o, act, bias32, seed):
    rng = rng_of(seed)
    in_s = float(rng.uniform(1e-4, 1e-3))
    w_s = rng.uniform(0.001, 0.02, o).astype(np.float32)
    k = g["kh"] * g["kw"] * c
    o_s = out_scale(in_s, float(w_s.mean()), k, 1.4e6, 5000.0) * float(rng.uniform(0.3, 3))
    x = random_input((g["n"], g["h"], g["w"], c), np.int16, rng)
    w = rng.integers(-127, 128, (o, g["kh"], g["kw"], c)).astype(np.int8)
    if bias32:  # CONV_2D v8: int32 bias (and accumulator) declared by quantized_bias_type
        b = rng.integers(-(2 ** 24), 2 ** 24, o).astype(np.int32)
        extra, version = dict(quantized_bias_type="INT32"), 8
    else:
        b = rng.integers(-(2 ** 34), 2 ** 34, o).astype(np.int64)
        extra, version = {}, 4
    model = single_op_model("CONV_2D", [In(x.shape, np.int16, (in_s, 0)),
                                        Const(w, (w_s, np.zeros(o, np.int64), 0)), Const(b)],
                            [Out(conv_out_shape(g, o), np.int16, (o_s, 0))], version=version,
                            **conv_options(g, act, **extra))
    assert_matches_litert(model, [x])


@SETTINGS
@given(g=geometry(max_hw=7), c=st.integers(1, 6), o=st.integers(1, 5), act=st.sampled_from(ACTS),
       scales=st.sampled_from(["tensor", "channel", "equal"]), groups=st.sampled_from([1, 1, 2]),
       seed=st.integers(0, 2 ** 16))
def test_conv2d_hybrid(g, c, o, act, scales, groups, seed):
    """Float input, int8 weights: v2 (per-tensor, symmetric input quantization) and v5
    (per-channel, asymmetric); grouped hybrid needs distinct per-channel scales."""
    assume(groups == 1 or scales == "channel")
    rng = rng_of(seed)
    ci = c
    c, o = ci * groups, o * groups
    lo, hi = sorted(rng.uniform(-3, 3, 2))
    x = rng.uniform(lo, hi, (g["n"], g["h"], g["w"], c)).astype(np.float32)
    w = rng.integers(-127, 128, (o, g["kh"], g["kw"], ci)).astype(np.int8)
    b = rng.uniform(-1, 1, o).astype(np.float32)
    if scales == "tensor":
        wq, version = (float(rng.uniform(0.005, 0.02)), 0), 2
    else:
        s = rng.uniform(0.005, 0.02, o) if scales == "channel" else np.full(o, 0.01)
        wq, version = (s.astype(np.float32), np.zeros(o, np.int64), 0), 5
    model = single_op_model("CONV_2D", [In(x.shape), Const(w, wq), Const(b)], [Out(conv_out_shape(g, o))],
                            version=version, **conv_options(g, act))
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_conv2d_runtime_weights_and_bias(dtype):
    """Filter and bias as graph inputs (e.g. fed by DEQUANTIZE): prepared per invoke."""
    rng = rng_of(3)
    x_shape, w_shape = (1, 8, 7, 5), (4, 3, 3, 5)
    if dtype == np.float32:
        ins = [In(x_shape), In(w_shape), In((4,))]
        vals = [rng.uniform(-1, 1, s).astype(np.float32) for s in (x_shape, w_shape, (4,))]
        out = Out((1, 4, 4, 4))
    else:
        w_s = rng.uniform(0.005, 0.02, 4).astype(np.float32)
        ins = [In(x_shape, np.int8, (0.05, 7)), In(w_shape, np.int8, (w_s, np.zeros(4, np.int64), 0)),
               In((4,), np.int32)]
        vals = [random_input(x_shape, np.int8, rng), rng.integers(-127, 128, w_shape).astype(np.int8),
                rng.integers(-5000, 5000, 4).astype(np.int32)]
        out = Out((1, 4, 4, 4), np.int8, (0.3, -3))
    model = single_op_model("CONV_2D", ins, [out], version=3, padding="SAME", stride_h=2, stride_w=2,
                            fused_activation_function="RELU")
    assert_matches_litert(model, vals)


@pytest.mark.parametrize("x_dtype", [np.int8, np.int16])
def test_conv2d_int4_weights(x_dtype):
    """CONV_2D v7: int8 activations with packed INT4 weights (and the same for int16)."""
    rng = rng_of(4)
    w = rng.integers(-8, 8, (6, 3, 3, 5)).astype(np.int8)
    w_s = rng.uniform(0.01, 0.05, 6).astype(np.float32)
    if x_dtype == np.int8:
        x_spec, out = In((1, 7, 7, 5), np.int8, (0.05, 3)), Out((1, 7, 7, 6), np.int8, (0.2, -2))
        b = rng.integers(-900, 900, 6).astype(np.int32)
    else:
        x_spec, out = In((1, 7, 7, 5), np.int16, (0.001, 0)), Out((1, 7, 7, 6), np.int16, (0.05, 0))
        b = rng.integers(-900, 900, 6).astype(np.int64)
    model = model_with_int4_weights("CONV_2D", x_spec, w, (w_s, np.zeros(6, np.int64), 0), b, out,
                                    version=7, padding="SAME", stride_h=1, stride_w=1)
    assert load_model(model).main.tensors[1].type_name == "INT4"
    assert_matches_litert(model, [random_input(x_spec.shape, x_dtype, rng)])


def test_conv2d_zero_sized_output():
    x = np.ones((1, 2, 2, 3), np.float32)
    model = single_op_model("CONV_2D", [In(x.shape), Const(np.ones((2, 3, 3, 3), np.float32)),
                                        Const(np.zeros(2, np.float32))], [Out((1, 0, 0, 2))],
                            padding="VALID", stride_h=2, stride_w=2)
    got = assert_matches_litert(model, [x])
    assert got[0].shape == (1, 0, 0, 2)


# --- DEPTHWISE_CONV_2D -----------------------------------------------------------------------

def dw_options(g, act, mult):
    return dict(conv_options(g, act), depth_multiplier=mult)


@SETTINGS
@given(g=geometry(), c=st.integers(1, 6), mult=st.integers(1, 3), act=st.sampled_from(ACTS),
       bias=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_depthwise_float(g, c, mult, act, bias, seed):
    rng = rng_of(seed)
    o = c * mult
    x = rng.uniform(-2, 2, (g["n"], g["h"], g["w"], c)).astype(np.float32)
    w = rng.uniform(-1, 1, (1, g["kh"], g["kw"], o)).astype(np.float32)
    ins = [In(x.shape), Const(w)] + ([Const(rng.uniform(-1, 1, o).astype(np.float32))] if bias else [])
    model = single_op_model("DEPTHWISE_CONV_2D", ins, [Out(conv_out_shape(g, o))], version=2,
                            **dw_options(g, act, mult))
    assert_matches_litert(model, [x])


@SETTINGS
@given(g=geometry(), c=st.integers(1, 8), mult=st.integers(1, 3), act=st.sampled_from(QACTS),
       dtype=st.sampled_from(["int8", "uint8", "int16"]), per_channel=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_depthwise_quantized(g, c, mult, act, dtype, per_channel, seed):
    rng = rng_of(seed)
    o = c * mult
    k = g["kh"] * g["kw"]
    x_shape = (g["n"], g["h"], g["w"], c)
    w_s = rng.uniform(0.001, 0.02, o if per_channel and dtype != "uint8" else 1).astype(np.float32)
    if dtype == "uint8":
        in_s, in_zp = float(rng.uniform(0.005, 0.1)), int(rng.integers(0, 256))
        w_zp = int(rng.integers(0, 256))
        x = random_input(x_shape, np.uint8, rng)
        w = rng.integers(0, 256, (1, g["kh"], g["kw"], o)).astype(np.uint8)
        b = Const(rng.integers(-20000, 20000, o).astype(np.int32), (float(np.float32(in_s) * w_s[0]), 0))
        o_s, o_zp = out_scale(in_s, float(w_s[0]), k, 5400.0, 30.0), int(rng.integers(0, 256))
        xq, wq, version = (in_s, in_zp), (float(w_s[0]), w_zp), 1
    elif dtype == "int8":
        in_s, in_zp = float(rng.uniform(0.005, 0.1)), int(rng.integers(-128, 128))
        x = random_input(x_shape, np.int8, rng)
        w = rng.integers(-127, 128, (1, g["kh"], g["kw"], o)).astype(np.int8)
        b = Const(rng.integers(-20000, 20000, o).astype(np.int32))
        o_s, o_zp = out_scale(in_s, float(w_s.mean()), k, 5400.0, 30.0), int(rng.integers(-128, 128))
        xq, wq, version = (in_s, in_zp), (w_s, np.zeros(w_s.size, np.int64), 3), 3
    else:
        in_s = float(rng.uniform(1e-4, 1e-3))
        x = random_input(x_shape, np.int16, rng)
        w = rng.integers(-127, 128, (1, g["kh"], g["kw"], o)).astype(np.int8)
        b = Const(rng.integers(-(2 ** 34), 2 ** 34, o).astype(np.int64))
        o_s, o_zp = out_scale(in_s, float(w_s.mean()), k, 1.4e6, 5000.0), 0
        xq, wq, version = (in_s, 0), (w_s, np.zeros(w_s.size, np.int64), 3), 5
    o_s *= float(rng.uniform(0.3, 3))
    model = single_op_model("DEPTHWISE_CONV_2D", [In(x_shape, x.dtype, xq), Const(w, wq), b],
                            [Out(conv_out_shape(g, o), x.dtype, (o_s, o_zp))], version=version,
                            **dw_options(g, act, mult))
    assert_matches_litert(model, [x])


@SETTINGS
@given(g=geometry(max_hw=7), c=st.integers(1, 6), mult=st.integers(1, 2), act=st.sampled_from(ACTS),
       seed=st.integers(0, 2 ** 16))
def test_depthwise_hybrid(g, c, mult, act, seed):
    """Float input, int8 per-channel weights (v6), asymmetric per-batch input quantization."""
    rng = rng_of(seed)
    o = c * mult
    lo, hi = sorted(rng.uniform(-3, 3, 2))
    x = rng.uniform(lo, hi, (g["n"], g["h"], g["w"], c)).astype(np.float32)
    w = rng.integers(-127, 128, (1, g["kh"], g["kw"], o)).astype(np.int8)
    wq = (rng.uniform(0.005, 0.02, o).astype(np.float32), np.zeros(o, np.int64), 3)
    model = single_op_model("DEPTHWISE_CONV_2D", [In(x.shape), Const(w, wq),
                                                  Const(rng.uniform(-1, 1, o).astype(np.float32))],
                            [Out(conv_out_shape(g, o))], version=6, **dw_options(g, act, mult))
    assert_matches_litert(model, [x])


def test_depthwise_int4_weights():
    """DEPTHWISE_CONV_2D v7 (INT4 weights) against LiteRT's optimized kernel (the reference
    resolver registers up to v6) and against its reference kernel at a lower version."""
    rng = rng_of(5)
    w = rng.integers(-8, 8, (1, 3, 3, 8)).astype(np.int8)
    wq = (rng.uniform(0.01, 0.05, 8).astype(np.float32), np.zeros(8, np.int64), 3)
    x_spec = In((2, 9, 8, 4), np.int8, (0.05, -7))
    x = random_input(x_spec.shape, np.int8, rng)
    b = rng.integers(-900, 900, 8).astype(np.int32)
    for version in (7, 3):
        model = model_with_int4_weights("DEPTHWISE_CONV_2D", x_spec, w, wq, b,
                                        Out((2, 5, 8, 8), np.int8, (0.1, 4)), version=version,
                                        padding="SAME", stride_h=2, stride_w=1, depth_multiplier=2,
                                        fused_activation_function="RELU6")
        if version == 7:
            # LiteRT's builtin optimized kernels (without XNNPACK).
            want = run_litert(model, [x], reference="builtin")[0]
            np.testing.assert_array_equal(run_acelera(model, [x])[0], want)
        else:
            assert_matches_litert(model, [x])


def test_depthwise_runtime_weights():
    rng = rng_of(6)
    x = rng.uniform(-1, 1, (1, 6, 6, 3)).astype(np.float32)
    w = rng.uniform(-1, 1, (1, 3, 3, 6)).astype(np.float32)
    b = rng.uniform(-1, 1, 6).astype(np.float32)
    model = single_op_model("DEPTHWISE_CONV_2D", [In(x.shape), In(w.shape), In(b.shape)],
                            [Out((1, 6, 6, 6))], padding="SAME", stride_h=1, stride_w=1, depth_multiplier=2)
    assert_matches_litert(model, [x, w, b])


# --- TRANSPOSE_CONV --------------------------------------------------------------------------

@st.composite
def tgeometry(draw):
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pad = draw(st.sampled_from(["SAME", "VALID"]))

    def out_for(size, k, s):
        if pad == "SAME":  # ceil(out / s) == size
            lo, hi = (size - 1) * s + 1, size * s
        else:  # (out + s - k) // s == size
            lo, hi = max((size - 1) * s + k, 1), size * s + k - 1
        return draw(st.integers(lo, hi))
    oh, ow = out_for(h, kh, sh), out_for(w, kw, sw)
    return dict(n=n, h=h, w=w, kh=kh, kw=kw, sh=sh, sw=sw, pad=pad, oh=oh, ow=ow)


def tconv_model(g, x_spec: In, w: np.ndarray, wq, bias, out_dtype, out_q, act="NONE", version=4,
                const_shape=True, **extra):
    o = w.shape[0]
    shape = np.array([g["n"], g["oh"], g["ow"], o], np.int32)
    s_in = Const(shape) if const_shape else In((4,), np.int32)
    return single_op_model("TRANSPOSE_CONV", [s_in, Const(w, wq), x_spec, bias],
                           [Out(tuple(shape), out_dtype, out_q)], version=version, padding=g["pad"],
                           stride_h=g["sh"], stride_w=g["sw"], fused_activation_function=act, **extra), shape


@SETTINGS
@given(g=tgeometry(), c=st.integers(1, 5), o=st.integers(1, 5), act=st.sampled_from(ACTS),
       bias=st.booleans(), const_shape=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_transpose_conv_float(g, c, o, act, bias, const_shape, seed):
    rng = rng_of(seed)
    x = rng.uniform(-2, 2, (g["n"], g["h"], g["w"], c)).astype(np.float32)
    w = rng.uniform(-1, 1, (o, g["kh"], g["kw"], c)).astype(np.float32)
    b = Const(rng.uniform(-1, 1, o).astype(np.float32)) if bias else None
    model, shape = tconv_model(g, In(x.shape), w, None, b, np.float32, None, act=act,
                               version=4 if act != "NONE" else (3 if bias else 1), const_shape=const_shape)
    assert_matches_litert(model, [x] if const_shape else [shape, x])


@SETTINGS
@given(g=tgeometry(), c=st.integers(1, 6), o=st.integers(1, 5), act=st.sampled_from(QACTS),
       dtype=st.sampled_from(["int8", "uint8", "int16", "int16_b32"]), per_channel=st.booleans(),
       bias=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_transpose_conv_quantized(g, c, o, act, dtype, per_channel, bias, seed):
    rng = rng_of(seed)
    x_shape = (g["n"], g["h"], g["w"], c)
    k = c * -(-g["kh"] // g["sh"]) * -(-g["kw"] // g["sw"])
    extra, version = {}, 4
    if dtype == "uint8":
        in_s, in_zp, w_s, w_zp = float(rng.uniform(0.005, 0.1)), int(rng.integers(0, 256)), \
            float(rng.uniform(0.001, 0.02)), int(rng.integers(0, 256))
        x = random_input(x_shape, np.uint8, rng)
        w = rng.integers(0, 256, (o, g["kh"], g["kw"], c)).astype(np.uint8)
        b = Const(rng.integers(-20000, 20000, o).astype(np.int32),
                  (float(np.float32(in_s) * np.float32(w_s)), 0))
        xq, wq = (in_s, in_zp), (w_s, w_zp)
        o_s, o_zp = out_scale(in_s, w_s, k, 5400.0, 30.0), int(rng.integers(0, 256))
    else:
        ws = rng.uniform(0.001, 0.02, o if per_channel else 1).astype(np.float32)
        wq = (ws, np.zeros(ws.size, np.int64), 0)
        w = rng.integers(-127, 128, (o, g["kh"], g["kw"], c)).astype(np.int8)
        if dtype == "int8":
            in_s, in_zp = float(rng.uniform(0.005, 0.1)), int(rng.integers(-128, 128))
            x = random_input(x_shape, np.int8, rng)
            b = Const(rng.integers(-20000, 20000, o).astype(np.int32))
            o_s, o_zp = out_scale(in_s, float(ws.mean()), k, 5400.0, 30.0), int(rng.integers(-128, 128))
        else:
            in_s, in_zp = float(rng.uniform(1e-4, 1e-3)), 0
            x = random_input(x_shape, np.int16, rng)
            if dtype == "int16_b32":  # TRANSPOSE_CONV v5
                b = Const(rng.integers(-(2 ** 24), 2 ** 24, o).astype(np.int32))
                extra, version = dict(quantized_bias_type="INT32"), 5
            else:
                b = Const(rng.integers(-(2 ** 34), 2 ** 34, o).astype(np.int64))
            o_s, o_zp = out_scale(in_s, float(ws.mean()), k, 1.4e6, 5000.0), 0
        xq = (in_s, in_zp)
    o_s *= float(rng.uniform(0.3, 3))
    model, _ = tconv_model(g, In(x_shape, x.dtype, xq), w, wq, b if bias else None, x.dtype, (o_s, o_zp),
                           act=act, version=version, **extra)
    assert_matches_litert(model, [x])


@SETTINGS
@given(g=tgeometry(), c=st.integers(1, 5), o=st.integers(1, 4), per_channel=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_transpose_conv_hybrid(g, c, o, per_channel, seed):
    rng = rng_of(seed)
    lo, hi = sorted(rng.uniform(-3, 3, 2))
    x = rng.uniform(lo, hi, (g["n"], g["h"], g["w"], c)).astype(np.float32)
    w = rng.integers(-127, 128, (o, g["kh"], g["kw"], c)).astype(np.int8)
    ws = rng.uniform(0.005, 0.02, o if per_channel else 1).astype(np.float32)
    model, _ = tconv_model(g, In(x.shape), w, (ws, np.zeros(ws.size, np.int64), 0),
                           Const(rng.uniform(-1, 1, o).astype(np.float32)), np.float32, None, version=3)
    assert_matches_litert(model, [x])


# --- MediaPipe Convolution2DTransposeBias ----------------------------------------------------

@SETTINGS
@given(n=st.integers(1, 2), h=st.integers(1, 8), w=st.integers(1, 8), c=st.integers(1, 8),
       o=st.integers(1, 4), k=st.integers(1, 4), s=st.integers(1, 3), same=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_convolution_2d_transpose_bias(n, h, w, c, o, k, s, same, seed):
    """LiteRT's default resolver runs this custom op through its XNNPACK delegate (which
    refuses strides larger than the kernel, leaving the op unresolved)."""
    assume(s <= k)
    rng = rng_of(seed)
    x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
    wt = rng.uniform(-1, 1, (o, k, k, c)).astype(np.float32)
    b = rng.uniform(-1, 1, o).astype(np.float32)
    ph = max(0, k - (h - 1) % s - 1) if same else 0
    pw = max(0, k - (w - 1) % s - 1) if same else 0
    out = (n, s * (h - 1) + k - ph, s * (w - 1) + k - pw, o)
    model = single_op_model("CUSTOM", [In(x.shape), Const(wt), Const(b)], [Out(out)],
                            custom_code="Convolution2DTransposeBias",
                            custom_options=struct.pack("<iii", 1 if same else 2, s, s))
    got = assert_matches_litert(model, [x], reference=False)
    assert got[0].shape == out


# --- unsupported combinations ----------------------------------------------------------------

def test_unsupported_dtypes_raise_at_allocate():
    i32 = np.zeros((2, 3, 3, 2), np.int32)
    cases = [
        single_op_model("CONV_2D", [In((1, 5, 5, 2), np.int32), Const(i32), Const(np.zeros(2, np.int32))],
                        [Out((1, 5, 5, 2), np.int32)], padding="SAME", stride_h=1, stride_w=1),
        single_op_model("DEPTHWISE_CONV_2D", [In((1, 5, 5, 2), np.int32), Const(i32[:1]),
                                              Const(np.zeros(3, np.int32))],
                        [Out((1, 5, 5, 3), np.int32)], padding="SAME", stride_h=1, stride_w=1,
                        depth_multiplier=1),
        single_op_model("TRANSPOSE_CONV", [Const(np.array([1, 5, 5, 2], np.int32)), Const(i32),
                                           In((1, 5, 5, 2), np.int32)],
                        [Out((1, 5, 5, 2), np.int32)], padding="SAME", stride_h=1, stride_w=1),
        single_op_model("CUSTOM", [In((1, 3, 3, 2), np.int8, (0.1, 0)), Const(i32.astype(np.int8), (0.1, 0)),
                                   Const(np.zeros(2, np.int32))], [Out((1, 6, 6, 2), np.int8, (0.1, 0))],
                        custom_code="Convolution2DTransposeBias",
                        custom_options=struct.pack("<iii", 1, 2, 2)),
        # int16 with an int32 bias but no quantized_bias_type: LiteRT reads the bias as int64.
        single_op_model("CONV_2D", [In((1, 5, 5, 2), np.int16, (0.01, 0)),
                                    Const(i32.astype(np.int8), ([0.1, 0.1], [0, 0], 0)),
                                    Const(np.zeros(2, np.int32))], [Out((1, 5, 5, 2), np.int16, (0.1, 0))],
                        version=4, padding="SAME", stride_h=1, stride_w=1),
        # uint8 convolutions are per-tensor only.
        single_op_model("CONV_2D", [In((1, 5, 5, 2), np.uint8, (0.01, 9)),
                                    Const(i32.astype(np.uint8), ([0.1, 0.2], [0, 0], 0)),
                                    Const(np.zeros(2, np.int32))], [Out((1, 5, 5, 2), np.uint8, (0.1, 0))],
                        padding="SAME", stride_h=1, stride_w=1),
    ]
    for model in cases:
        expect_unsupported(model)


# --- the shared models' convolutions, node by node -------------------------------------------

MODELS = ["face_detection_short_range", "face_detection_short_range_int8",
          "face_detection_short_range_int16x8", "face_landmark_int8", "hand_recrop",
          "mobilenet_v2_96_f32", "mobilenet_v2_96_int8", "selfie_segmentation", "small_cnn_int8"]
CONV_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CUSTOM")


def _node_model(sg, op) -> tuple[bytes, list]:
    """One node as a single-op model; fp16 weights (DEQUANTIZE outputs) become float32 constants."""
    producers = {o: p for p in sg.operators for o in p.outputs}
    ins = []
    for i in op.inputs:
        t = sg.tensors[i] if i >= 0 else None
        if t is None:
            ins.append(None)
        elif t.data is not None:
            ins.append(Const(t.data, quant_of(t)))
        elif i in producers and producers[i].op == "DEQUANTIZE" \
                and sg.tensors[producers[i].inputs[0]].data is not None:
            ins.append(Const(sg.tensors[producers[i].inputs[0]].data.astype(np.float32)))
        else:
            ins.append(In(t.shape, t.dtype, quant_of(t)))
    outs = [Out(sg.tensors[o].shape, sg.tensors[o].dtype, quant_of(sg.tensors[o])) for o in op.outputs]
    if op.op == "CUSTOM":
        return single_op_model("CUSTOM", ins, outs, custom_code=op.custom_code,
                               custom_options=op.custom_options), ins
    return single_op_model(op.op, ins, outs, version=op.version, **dict(op.options)), ins


@pytest.mark.parametrize("name", MODELS)
def test_model_convolutions(models_dir: Path, name: str):
    """Each distinct convolution configuration of a shared model, with its real weights."""
    sg = load_model(models_dir / f"{name}.tflite").main
    rng = rng_of(11)
    seen = set()
    for op in sg.operators:
        if op.op not in CONV_OPS:
            continue
        w = sg.tensors[op.inputs[1]]
        key = (op.op, w.shape[1:3], tuple(sorted(op.options.items())))
        if key in seen:
            continue
        seen.add(key)
        model, ins = _node_model(sg, op)
        inputs = [random_input(s.shape, s.dtype, rng) for s in ins if isinstance(s, In)]
        assert_matches_litert(model, inputs, reference=op.op != "CUSTOM")
    assert seen
