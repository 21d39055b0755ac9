"""FULLY_CONNECTED v14 with INT2 weights on a float32 input (LiteRT's hybrid path: EvalHybridDense
unpacks the 2-bit weights to int8 and runs the int8 hybrid arithmetic), against LiteRT's
reference kernels, the same weights with int8/int16 inputs (EvalQuantized, bit-exact), and the
refusal of a non-zero weight zero point.

The builder has no INT2 type: the weights are packed here (4 values per byte, low bits first)
and the tensor's type patched to INT2.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import expect_unsupported
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert, random_input

from acelera.core.builder import ModelBuilder

INT2 = 19  # TensorType


def pack_int2(w: np.ndarray) -> np.ndarray:
    flat = w.reshape(-1).astype(np.uint8) & 0x3
    flat = np.append(flat, np.zeros(-flat.size % 4, np.uint8))
    return (flat[0::4] | (flat[1::4] << 2) | (flat[2::4] << 4) | (flat[3::4] << 6)).astype(np.uint8)


def int2_fc_model(rng, xshape: tuple, units: int, *, per_channel: bool = False, bias: bool = True,
                  act: str = "NONE", asym: bool = False, keep: bool = False, zero_point: int = 0,
                  x_dt=np.float32) -> bytes:
    k = xshape[-1]
    w = rng.integers(-2, 2, (units, k)).astype(np.int8)
    b = ModelBuilder()
    if x_dt == np.float32:
        x = b.add_input("x", xshape, np.float32)
        out_shape = tuple(xshape[:-1]) + (units,) if keep else (int(np.prod(xshape)) // k, units)
        y = b.add_tensor("y", out_shape, np.float32)
    else:
        x = b.add_input("x", xshape, x_dt, (0.05, 0))
        y = b.add_tensor("y", (int(np.prod(xshape)) // k, units), x_dt, (0.02 if x_dt == np.int8 else 0.1, 0))
    if per_channel:
        wq = (rng.uniform(0.01, 0.2, units).astype(np.float32), np.full(units, zero_point, np.int64), 0)
    else:
        wq = (float(rng.uniform(0.01, 0.2)), zero_point)
    wt = b.add_constant("w", pack_int2(w), wq, shape=(units, k))
    b.tensors[wt].type = INT2
    bt = b.add_constant("b", rng.standard_normal(units).astype(np.float32)) if bias else -1
    b.add_operator("FULLY_CONNECTED", [x, wt, bt], [y], version=14, fused_activation_function=act,
                   keep_num_dims=keep, asymmetric_quantize_inputs=asym)
    b.mark_outputs(y)
    return b.build()


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "TANH"])
def test_fc_int2_hybrid(per_channel, asym, act):
    rng = np.random.default_rng(3 + per_channel + 2 * asym)
    m = int2_fc_model(rng, (3, 10), 7, per_channel=per_channel, asym=asym, act=act)
    x = random_input((3, 10), np.float32, rng, -3, 2)
    x[1] = 0  # an all-zero row
    assert_matches_litert(m, [x])


def test_fc_int2_hybrid_no_bias_keep_dims():
    rng = np.random.default_rng(11)
    m = int2_fc_model(rng, (2, 3, 9), 5, bias=False, keep=True)
    assert_matches_litert(m, [random_input((2, 3, 9), np.float32, rng)])


def test_fc_int2_hybrid_zero_input():
    rng = np.random.default_rng(12)
    m = int2_fc_model(rng, (2, 6), 4)
    assert_matches_litert(m, [np.zeros((2, 6), np.float32)])


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 4), k=st.integers(1, 33), units=st.integers(1, 9), seed=st.integers(0, 2 ** 16),
       asym=st.booleans())
def test_fc_int2_hybrid_shapes(batch, k, units, seed, asym):
    rng = np.random.default_rng(seed)
    m = int2_fc_model(rng, (batch, k), units, asym=asym)
    assert_matches_litert(m, [random_input((batch, k), np.float32, rng, -2, 2)])


def test_fc_int2_nonzero_zero_point_refused():
    m = int2_fc_model(np.random.default_rng(0), (2, 8), 3, zero_point=1)
    expect_unsupported(m, "zero point")


@pytest.mark.parametrize("x_dt", [np.int8, np.int16])
@pytest.mark.parametrize("per_channel", [False, True])
def test_fc_int2_quantized_input(x_dt, per_channel):
    """int8/int16 inputs with INT2 weights: EvalQuantized unpacks them to int8 too."""
    rng = np.random.default_rng(7 + per_channel)
    m = int2_fc_model(rng, (3, 12), 5, x_dt=x_dt, per_channel=per_channel, bias=False)
    assert_matches_litert(m, [random_input((3, 12), x_dt, rng)])
