"""The fast hybrid input quantizers (acelera/core/kernels/hybrid_quant.py) against the general
ones they shortcut (fully_connected.quantize_rows, conv_quantization.asymmetric_quantize), and
the hybrid FULLY_CONNECTED / CONV_2D / DEPTHWISE_CONV_2D paths that use them against LiteRT:
many rows (the vectorized parameters), 1x1 convolutions (the im2col shortcut, strided too),
channel counts with a tail after the 8-value blocks, and batches of 2; and the compiled hybrid
FULLY_CONNECTED loop (hybrid_native.py) against the numpy path."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert

from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.kernels import fully_connected, hybrid_native
from acelera.core.kernels.conv_quantization import asymmetric_quantize
from acelera.core.kernels.fully_connected import quantize_rows
from acelera.core.kernels.hybrid_quant import neon_asymmetric_batches, portable_asymmetric_rows

SETTINGS = settings(max_examples=60, deadline=None)


def sample(rng: np.random.Generator, shape: tuple, kind: int) -> np.ndarray:
    """Inputs of several kinds: normal, coarse fractions (ties), huge/tiny magnitudes, one
    sign only, and rows of zeros."""
    if kind == 0:
        x = rng.standard_normal(shape)
    elif kind == 1:
        x = rng.integers(-300, 300, shape) / rng.integers(1, 8)
    elif kind == 2:
        x = np.abs(rng.standard_normal(shape)) * 10.0 ** rng.integers(-30, 30)
    elif kind == 3:
        x = -np.abs(rng.standard_normal(shape))
    else:
        x = rng.standard_normal(shape)
        x[rng.random(shape[0]) < 0.4] = 0
    return np.asarray(x, np.float32)


@SETTINGS
@given(rows=st.integers(1, 60), k=st.integers(1, 40), kind=st.integers(0, 4), seed=st.integers(0, 2**32 - 1))
def test_portable_rows_match_quantize_rows(rows, k, kind, seed):
    x = sample(np.random.default_rng(seed), (rows, k), kind)
    q, sf, offset = quantize_rows(x, True)
    got = portable_asymmetric_rows(x)
    assert got is not None
    shifted, sf2, off2 = got
    np.testing.assert_array_equal(sf2, sf)
    np.testing.assert_array_equal(off2, offset)
    np.testing.assert_array_equal(shifted, q - offset[:, None].astype(np.float32))


@SETTINGS
@given(n=st.integers(1, 3), size=st.integers(1, 70), kind=st.integers(0, 4), seed=st.integers(0, 2**32 - 1))
def test_neon_batches_match_asymmetric_quantize(n, size, kind, seed):
    x = sample(np.random.default_rng(seed), (n, size), kind)
    got = neon_asymmetric_batches(x)
    assert got is not None
    shifted, factors = got
    for i in range(n):
        q, sf, off = asymmetric_quantize(x[i])
        assert factors[i] == sf
        np.testing.assert_array_equal(shifted[i], q.astype(np.float32) - off)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("rows", [1, 30])
def test_non_finite_rows_take_the_general_path(bad, rows):
    x = np.ones((rows, 9), np.float32)
    x[rows // 2, 3] = bad
    assert portable_asymmetric_rows(x) is None
    assert neon_asymmetric_batches(x.reshape(rows, 9)) is None


@pytest.mark.parametrize("lead,k,units,per_channel", [((40,), 24, 12, True), ((2, 20), 33, 7, False),
                                                       ((1,), 50, 9, True)])
def test_fc_hybrid_many_rows(lead, k, units, per_channel):
    rng = np.random.default_rng(k)
    w = rng.integers(-127, 128, (units, k)).astype(np.int8)
    if per_channel:
        wq, version = (rng.uniform(0.002, 0.02, units).astype(np.float32), np.zeros(units, np.int64), 0), 12
    else:
        wq, version = (0.01, 0), 9
    xshape = lead + (k,)
    m = single_op_model("FULLY_CONNECTED", [In(xshape), Const(w, wq), Const(rng.standard_normal(units).astype(np.float32))],
                        [Out((int(np.prod(lead)), units))], version=version, asymmetric_quantize_inputs=True,
                        fused_activation_function="RELU")
    x = rng.uniform(-3, 2, xshape).astype(np.float32)
    x.reshape(-1, k)[3 % x.reshape(-1, k).shape[0]] = 0
    assert_matches_litert(m, [x])


@pytest.mark.parametrize("n,h,c,o,stride,act", [(1, 6, 20, 9, 1, "NONE"), (2, 7, 13, 5, 2, "RELU6"),
                                                  (1, 5, 8, 16, 3, "RELU")])
def test_conv_hybrid_pointwise(n, h, c, o, stride, act):
    rng = np.random.default_rng(c)
    w = rng.integers(-127, 128, (o, 1, 1, c)).astype(np.int8)
    wq = (rng.uniform(0.005, 0.02, o).astype(np.float32), np.zeros(o, np.int64), 0)
    oh = (h + stride - 1) // stride
    m = single_op_model("CONV_2D", [In((n, h, h, c)), Const(w, wq), Const(rng.uniform(-1, 1, o).astype(np.float32))],
                        [Out((n, oh, oh, o))], version=5, padding="SAME", stride_h=stride, stride_w=stride,
                        fused_activation_function=act)
    x = rng.uniform(-2, 3, (n, h, h, c)).astype(np.float32)
    assert_matches_litert(m, [x])


@pytest.mark.parametrize("n,h,c,k,mult,stride,dil,pad", [(2, 6, 11, 3, 1, 1, 1, "SAME"), (1, 7, 24, 5, 1, 1, 1, "SAME"),
                                                           (1, 9, 3, 3, 2, 2, 2, "SAME"), (2, 8, 5, 2, 3, 1, 1, "VALID")])
def test_depthwise_hybrid_batches(n, h, c, k, mult, stride, dil, pad):
    """The compiled taps (hybrid_native.py) with batches, depth multipliers, strides, dilations."""
    rng = np.random.default_rng(h)
    o = c * mult
    w = rng.integers(-127, 128, (1, k, k, o)).astype(np.int8)
    wq = (rng.uniform(0.005, 0.02, o).astype(np.float32), np.zeros(o, np.int64), 3)
    span = (k - 1) * dil + 1
    oh = (h + stride - 1) // stride if pad == "SAME" else (h - span) // stride + 1
    m = single_op_model("DEPTHWISE_CONV_2D", [In((n, h, h, c)), Const(w, wq), Const(rng.uniform(-1, 1, o).astype(np.float32))],
                        [Out((n, oh, oh, o))], version=6, padding=pad, stride_h=stride, stride_w=stride,
                        dilation_h_factor=dil, dilation_w_factor=dil, depth_multiplier=mult,
                        fused_activation_function="RELU6")
    x = rng.uniform(-1, 4, (n, h, h, c)).astype(np.float32)
    assert_matches_litert(m, [x])


def _invoke(model: bytes, xs: list[np.ndarray]) -> list[np.ndarray]:
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    outs = []
    for x in xs:
        it.set_tensor(i, x)
        it.invoke()
        outs.append(it.get_tensor(o).copy())
    return outs


@pytest.mark.parametrize("per_channel", [True, False])
def test_fc_native_loop_matches_numpy_path(per_channel, monkeypatch):
    """hybrid_native's compiled loop against the numpy path it replaces, bit for bit."""
    assert hybrid_native.fc_hybrid_kernel() is not None  # numba is a dependency
    rng = np.random.default_rng(7 + per_channel)
    for trial in range(12):
        rows, k, units = int(rng.integers(1, 30)), int(rng.integers(1, 70)), int(rng.integers(1, 20))
        w = rng.integers(-128, 128, (units, k)).astype(np.int8)
        if per_channel:
            wq, version = (rng.uniform(0.002, 0.02, units).astype(np.float32), np.zeros(units, np.int64), 0), 12
        else:
            wq, version = (float(rng.uniform(0.002, 0.02)), 0), 9
        bias = Const(rng.standard_normal(units).astype(np.float32)) if trial % 3 else None
        m = single_op_model("FULLY_CONNECTED", [In((rows, k)), Const(w, wq), bias], [Out((rows, units))],
                            version=version, asymmetric_quantize_inputs=True,
                            fused_activation_function=["NONE", "RELU", "RELU6", "TANH"][trial % 4])
        xs = [sample(rng, (rows, k), kind) for kind in range(5)]
        native = _invoke(m, xs)
        monkeypatch.setattr(fully_connected, "fc_hybrid_kernel", lambda: None)
        numpy_path = _invoke(m, xs)
        monkeypatch.undo()
        for a, b in zip(native, numpy_path):
            np.testing.assert_array_equal(a, b)
