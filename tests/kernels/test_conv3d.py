"""CONV_3D and CONV_3D_TRANSPOSE against LiteRT's reference kernels (BUILTIN_REF).

Float32 only (the only type LiteRT accepts): every padding, stride, dilation, fused activation,
optional bias, constant and runtime filters, constant and runtime output shapes; bad shapes and
options refused at allocate_tensors, bad runtime output shapes at invoke.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import allocate_error, rng_of
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert, random_input, run_acelera, run_litert

from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.errors import AceleraError, UnsupportedOpError
from acelera.core.interpreter import Interpreter
from acelera.core.kernels.conv3d import _out_size

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH"]


def conv_opts(padding, strides, dilations, act="NONE") -> dict:
    return {"padding": padding, "stride_d": strides[0], "stride_h": strides[1], "stride_w": strides[2],
            "dilation_d_factor": dilations[0], "dilation_h_factor": dilations[1],
            "dilation_w_factor": dilations[2], "fused_activation_function": act}


def invoke_error(model: bytes, inputs) -> AceleraError:
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    with pytest.raises(AceleraError) as e:
        it.invoke()
    assert "node 0" in str(e.value)
    return e.value


# --- CONV_3D ------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), padding=st.sampled_from(["SAME", "VALID"]), act=st.sampled_from(ACTS),
       bias=st.booleans(), const_filter=st.booleans(), seed=st.integers(0, 2**31))
def test_conv3d(data, padding, act, bias, const_filter, seed):
    n = data.draw(st.integers(1, 2))
    spatial = data.draw(st.tuples(*[st.integers(1, 7)] * 3))
    ci, co = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5))
    ksize = data.draw(st.tuples(*[st.integers(1, 3)] * 3))
    strides = data.draw(st.tuples(*[st.integers(1, 3)] * 3))
    dilations = data.draw(st.tuples(*[st.integers(1, 2)] * 3))
    pad = 0 if padding == "SAME" else 1
    outs = tuple(_out_size(pad, s, k, st_, d) for s, k, st_, d in zip(spatial, ksize, strides, dilations))
    assume(0 not in outs)  # LiteRT's Python API cannot return an empty tensor; see test_conv3d_empty_output
    rng = rng_of(seed)
    x = random_input((n, *spatial, ci), np.float32, rng, -2, 2)
    w = random_input((*ksize, ci, co), np.float32, rng)
    b = random_input((co,), np.float32, rng)
    ins = [In(x.shape), Const(w) if const_filter else In(w.shape)] + ([Const(b)] if bias else [])
    m = single_op_model("CONV_3D", ins, [Out((n, *outs, co))], **conv_opts(padding, strides, dilations, act))
    got = assert_matches_litert(m, [x] if const_filter else [x, w])
    assert got[0].shape == (n, *outs, co)


def test_conv3d_larger_and_inf_clamp():
    rng = rng_of(1)
    x = random_input((1, 6, 10, 9, 8), np.float32, rng)
    w = random_input((3, 3, 3, 8, 16), np.float32, rng)
    x[0, 0, 0, 0, 0] = np.inf  # NONE still clamps to +-FLT_MAX, as LiteRT's ActivationFunctionWithMinMax
    m = single_op_model("CONV_3D", [In(x.shape), Const(w), Const(random_input((16,), np.float32, rng))],
                        [Out((1, 6, 10, 9, 16))], **conv_opts("SAME", (1, 1, 1), (1, 1, 1)))
    got = assert_matches_litert(m, [x])
    assert not np.isinf(got[0]).any() and np.abs(got[0]).max() == np.finfo(np.float32).max


def test_conv3d_skips_padding_like_litert():
    # An inf filter tap that only ever meets padding: LiteRT skips it (no 0 * inf = nan).
    x = np.ones((1, 2, 2, 2, 1), np.float32)
    w = np.ones((3, 3, 3, 1, 1), np.float32)
    w[0, 0, 0, 0, 0] = np.inf
    m = single_op_model("CONV_3D", [In(x.shape), Const(w)], [Out((1, 1, 1, 1, 1))],
                        **conv_opts("SAME", (2, 2, 2), (1, 1, 1)))
    got = assert_matches_litert(m, [x])
    assert not np.isnan(got[0]).any()


def test_conv3d_empty_output():
    # VALID with a window larger than the input: ComputeOutSize gives 0, not an error.
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    m = single_op_model("CONV_3D", [In((1, 2, 5, 5, 1)), Const(np.ones((3, 1, 1, 1, 2), np.float32))],
                        [Out((1, 1, 5, 5, 2))], **conv_opts("VALID", (1, 1, 1), (1, 1, 1)))
    got = run_acelera(m, [np.ones((1, 2, 5, 5, 1), np.float32)])
    ref = LiteRT(model_content=m, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()  # its Python API cannot return the empty tensor, only its shape
    assert got[0].shape == (1, 0, 5, 5, 2) == tuple(ref.get_output_details()[0]["shape"])
    assert got[0].dtype == np.float32


@pytest.mark.parametrize("case", ["rank", "channels", "stride", "dilation", "bias_size", "int8", "bias_type",
                                  "out_type", "zero_filter", "padding"])
def test_conv3d_bad_models(case):
    x, w, b = In((1, 4, 4, 4, 2)), Const(np.ones((2, 2, 2, 2, 3), np.float32)), Const(np.ones(3, np.float32))
    opts = conv_opts("SAME", (1, 1, 1), (1, 1, 1))
    out = Out((1, 4, 4, 4, 3))
    if case == "rank":
        x = In((4, 4, 4, 2))
    elif case == "channels":
        w = Const(np.ones((2, 2, 2, 3, 3), np.float32))
    elif case == "stride":
        opts["stride_h"] = 0
    elif case == "dilation":
        opts["dilation_w_factor"] = -1
    elif case == "bias_size":
        b = Const(np.ones(4, np.float32))
    elif case == "int8":
        x, w = In((1, 4, 4, 4, 2), np.int8, (0.1, 0)), Const(np.ones((2, 2, 2, 2, 3), np.int8), (0.1, 0))
    elif case == "bias_type":
        b = Const(np.ones(3, np.int32))
    elif case == "out_type":
        out = Out((1, 4, 4, 4, 3), np.int32)
    elif case == "zero_filter":
        w = Const(np.ones((2, 0, 2, 2, 3), np.float32))
    elif case == "padding":
        opts["padding"] = 2  # neither SAME nor VALID: LiteRT fails to prepare
    m = single_op_model("CONV_3D", [x, w, b], [out], **opts)
    err = allocate_error(m)
    if case in ("rank", "channels", "stride", "dilation", "bias_size", "padding"):
        with pytest.raises(RuntimeError):
            run_litert(m, [np.ones(x.shape, np.float32)])
    if case in ("int8", "bias_type", "out_type"):
        assert isinstance(err, UnsupportedOpError)


def test_conv3d_missing_options_refused():
    # No options table: LiteRT's zero-initialized params have stride 0, which it refuses.
    m = single_op_model("CONV_3D", [In((1, 2, 2, 2, 1)), Const(np.ones((1, 1, 1, 1, 1), np.float32))],
                        [Out((1, 2, 2, 2, 1))])
    assert "stride" in str(allocate_error(m))


# --- CONV_3D_TRANSPOSE --------------------------------------------------------------------

def transpose_output(padding: str, spatial_in, ksize, strides, dilations, extra) -> list[int] | None:
    """A spatial output size per axis that convolves back to spatial_in (the `extra`-th one)."""
    pad = 0 if padding == "SAME" else 1
    sizes = []
    for ax in range(3):
        cands = [s for s in range(1, 40) if _out_size(pad, s, ksize[ax], strides[ax], dilations[ax]) == spatial_in[ax]]
        if not cands:
            return None
        sizes.append(cands[min(extra, len(cands) - 1)])
    return sizes


@SETTINGS
@given(data=st.data(), padding=st.sampled_from(["SAME", "VALID"]), act=st.sampled_from(ACTS),
       bias=st.booleans(), const_shape=st.booleans(), extra=st.integers(0, 2), seed=st.integers(0, 2**31))
def test_conv3d_transpose(data, padding, act, bias, const_shape, extra, seed):
    n = data.draw(st.integers(1, 2))
    spatial = data.draw(st.tuples(*[st.integers(1, 4)] * 3))
    ci, co = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    ksize = data.draw(st.tuples(*[st.integers(1, 3)] * 3))
    strides = data.draw(st.tuples(*[st.integers(1, 3)] * 3))
    dilations = data.draw(st.tuples(*[st.integers(1, 2)] * 3))
    sizes = transpose_output(padding, spatial, ksize, strides, dilations, extra)
    assume(sizes is not None)
    out_shape = np.array([n, *sizes, co], np.int32)
    rng = rng_of(seed)
    x = random_input((n, *spatial, ci), np.float32, rng, -2, 2)
    w = random_input((*ksize, co, ci), np.float32, rng)
    ins = [Const(out_shape) if const_shape else In((5,), np.int32), Const(w), In(x.shape)]
    if bias:
        ins.append(Const(random_input((co,), np.float32, rng)))
    m = single_op_model("CONV_3D_TRANSPOSE", ins, [Out(tuple(out_shape))],
                        **conv_opts(padding, strides, dilations, act))
    got = assert_matches_litert(m, [x] if const_shape else [out_shape, x])
    assert got[0].shape == tuple(out_shape)


@pytest.mark.parametrize("case", ["rank", "channels", "bias_size", "shape_len", "shape_type", "batch",
                                  "out_channels", "spatial", "negative", "int8"])
def test_conv3d_transpose_bad_models(case):
    shape = np.array([1, 4, 4, 4, 3], np.int32)
    x, w = In((1, 4, 4, 4, 2)), Const(np.ones((2, 2, 2, 3, 2), np.float32))
    b = Const(np.ones(3, np.float32))
    opts = conv_opts("SAME", (1, 1, 1), (1, 1, 1))
    if case == "rank":
        x = In((4, 4, 4, 2))
    elif case == "channels":
        w = Const(np.ones((2, 2, 2, 3, 5), np.float32))
    elif case == "bias_size":
        b = Const(np.ones(2, np.float32))
    elif case == "shape_len":
        shape = np.array([1, 4, 4, 3], np.int32)
    elif case == "shape_type":
        shape = shape.astype(np.int64)
    elif case == "batch":
        shape[0] = 2
    elif case == "out_channels":
        shape[4] = 6  # a multiple of the filter's channels: refused by current LiteRT
    elif case == "spatial":
        shape[2] = 9  # convolves to 9, not the input's 4
    elif case == "negative":
        shape[1] = -4
    elif case == "int8":
        x = In((1, 4, 4, 4, 2), np.int8, (0.1, 0))
    m = single_op_model("CONV_3D_TRANSPOSE", [Const(shape), w, x, b], [Out((1, 4, 4, 4, 3))], **opts)
    err = allocate_error(m)
    if case in ("shape_type", "int8"):
        assert isinstance(err, UnsupportedOpError)


@pytest.mark.parametrize("shape", [[2, 4, 4, 4, 3], [1, 4, 5, 4, 3], [1, -1, 4, 4, 3], [1, 4, 4, 4, 1]])
def test_conv3d_transpose_bad_runtime_shape(shape):
    m = single_op_model("CONV_3D_TRANSPOSE", [In((5,), np.int32), Const(np.ones((2, 2, 2, 3, 2), np.float32)),
                                              In((1, 4, 4, 4, 2))], [Out((1, 4, 4, 4, 3))],
                        **conv_opts("SAME", (1, 1, 1), (1, 1, 1)))
    invoke_error(m, [np.array(shape, np.int32), np.ones((1, 4, 4, 4, 2), np.float32)])


def test_conv3d_transpose_huge_output_refused():
    # Every output size up to 2**20 convolves (SAME, stride 2**20) back to 1: check the size first.
    stride = 1 << 20
    m = single_op_model("CONV_3D_TRANSPOSE", [In((5,), np.int32), Const(np.ones((1, 1, 1, 1, 1), np.float32)),
                                              In((1, 1, 1, 1, 1))], [Out((1, 1, 1, 1, 1))],
                        **conv_opts("SAME", (stride, stride, stride), (1, 1, 1)))
    err = invoke_error(m, [np.array([1, stride, stride, stride, 1], np.int32), np.ones((1, 1, 1, 1, 1), np.float32)])
    assert "limit" in str(err)
