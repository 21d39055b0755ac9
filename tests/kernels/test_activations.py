"""Activations, softmax and unary math kernels against LiteRT.

Quantized ops are elementwise functions of one 8/16-bit value, so most quantized tests feed
the whole input domain (every int8/uint8 value, or all 65536 int16 values) and let
hypothesis explore the quantization parameters. Ops absent from LiteRT's BUILTIN_REF
resolver (ELU, CEIL, ABS v4/v5) are checked against its builtin kernels without delegates.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import expect_unsupported
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert, random_input, run_acelera, run_litert

from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.interpreter import Interpreter

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def check(model: bytes, inputs, reference: bool = True) -> None:
    """Against LiteRT's reference kernels, or (reference=False) its builtin ones without XNNPACK."""
    if reference:
        assert_matches_litert(model, inputs)
        return
    want = run_litert(model, inputs, reference="builtin")
    got = run_acelera(model, inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.issubdtype(w.dtype, np.floating):
            finite = np.abs(w[np.isfinite(w)])
            bound = 1e-4 * max(1.0, float(np.max(finite, initial=0.0)))
            np.testing.assert_allclose(g, w, atol=bound, rtol=0)
        else:
            assert np.count_nonzero(g != w) == 0, f"{np.count_nonzero(g != w)} elements differ"


def full_domain(dtype, lo: int | None = None) -> np.ndarray:
    """Every value of an 8/16-bit dtype (from `lo`), as a 2-D input."""
    info = np.iinfo(dtype)
    v = np.arange(int(info.min) if lo is None else lo, int(info.max) + 1).astype(dtype)
    return v.reshape(-1, 256) if v.size % 256 == 0 and v.size > 256 else v.reshape(1, -1)


shapes = st.lists(st.integers(1, 7), min_size=1, max_size=4).map(tuple)
log_scales = st.floats(-7.0, 1.5)


def qparams(dtype):
    info = np.iinfo(dtype)
    zps = st.just(0) if dtype == np.int16 else st.integers(int(info.min), int(info.max))
    return st.tuples(log_scales.map(lambda e: float(np.float32(math.exp(e)))), zps)


def unary_model(op, dtype, in_q, out_q, shape, version=1, out_dtype=None, **options) -> bytes:
    return single_op_model(op, [In(shape, dtype, in_q)], [Out(shape, out_dtype or dtype, out_q)],
                           version=version, **options)


# --------------------------------------------------------------------------------------
# float32
# --------------------------------------------------------------------------------------

FLOAT_OPS = [
    ("RELU", {}, True), ("RELU6", {}, True), ("RELU_N1_TO_1", {}, True), ("RELU_0_TO_1", {}, True),
    ("LEAKY_RELU", {"alpha": 0.2}, True), ("LEAKY_RELU", {"alpha": 1.7}, True),
    ("LEAKY_RELU", {"alpha": -0.4}, True), ("ELU", {}, False), ("HARD_SWISH", {}, True),
    ("GELU", {"approximate": False}, True), ("GELU", {"approximate": True}, True),
    ("LOGISTIC", {}, True), ("TANH", {}, True), ("EXP", {}, True), ("LOG", {}, True),
    ("SQRT", {}, True), ("RSQRT", {}, True), ("ABS", {}, True), ("NEG", {}, True),
    ("SQUARE", {}, True), ("FLOOR", {}, True), ("CEIL", {}, False), ("SIN", {}, True),
    ("COS", {}, True),
]


@pytest.mark.parametrize("op,options,ref", FLOAT_OPS,
                         ids=[f"{o}-{sorted(k.values())}" for o, k, _ in FLOAT_OPS])
@SETTINGS
@given(shape=shapes, span=st.sampled_from([1.0, 8.0, 30.0]), seed=st.integers(0, 2**16))
def test_float(op, options, ref, shape, span, seed):
    rng = np.random.default_rng(seed)
    x = random_input(shape, np.float32, rng, -span, span)
    if op in ("LOG", "SQRT", "RSQRT"):
        x = np.abs(x) + np.float32(1e-3)
    check(unary_model(op, np.float32, None, None, shape, **options), [x], ref)


def test_float_special_values():
    x = np.array([[0.0, -0.0, np.inf, -np.inf, 1e-30, -1e-30, 88.0, -100.0, 17.0, -9.5]], np.float32)
    for op, options, ref in FLOAT_OPS:
        if op in ("LOG", "SQRT", "RSQRT", "SIN", "COS", "GELU"):
            continue
        check(unary_model(op, np.float32, None, None, x.shape, **options), [x], ref)


def test_scalar_input():
    x = np.array(-0.75, np.float32)
    for op in ("RELU", "TANH", "LOGISTIC", "ABS", "EXP"):
        check(unary_model(op, np.float32, None, None, ()), [x])
    q = np.array(-5, np.int8)
    check(unary_model("RELU", np.int8, (0.1, 3), (0.05, -128), (), version=2), [q])


# --------------------------------------------------------------------------------------
# 8-bit quantized elementwise ops (whole domain)
# --------------------------------------------------------------------------------------

Q8_OPS = [  # op, dtype, version, options, reference resolver
    ("RELU", np.int8, 2, {}, True), ("RELU", np.uint8, 2, {}, True),
    ("RELU6", np.int8, 2, {}, True), ("RELU6", np.uint8, 2, {}, True),
    ("RELU_N1_TO_1", np.int8, 1, {}, True), ("RELU_N1_TO_1", np.uint8, 1, {}, True),
    ("RELU_0_TO_1", np.int8, 1, {}, True), ("RELU_0_TO_1", np.uint8, 1, {}, True),
    ("LEAKY_RELU", np.int8, 1, {"alpha": 0.1}, True), ("LEAKY_RELU", np.uint8, 1, {"alpha": 0.3}, True),
    ("LEAKY_RELU", np.int8, 1, {"alpha": -0.6}, True), ("LEAKY_RELU", np.int8, 1, {"alpha": 2.5}, True),
    ("ELU", np.int8, 1, {}, False),
    ("GELU", np.int8, 2, {"approximate": False}, True), ("GELU", np.uint8, 2, {"approximate": True}, True),
    ("GELU", np.int8, 2, {"approximate": True}, True), ("GELU", np.uint8, 2, {"approximate": False}, True),
    ("TANH", np.int8, 2, {}, True), ("TANH", np.uint8, 1, {}, True),
    ("EXP", np.int8, 2, {}, True), ("LOG", np.int8, 2, {}, True), ("ABS", np.int8, 2, {}, True),
]


@pytest.mark.parametrize("op,dtype,version,options,ref", Q8_OPS,
                         ids=[f"{o}-{np.dtype(d).name}-{sorted(k.values())}" for o, d, _, k, _ in Q8_OPS])
@SETTINGS
@given(data=st.data())
def test_quantized_8bit(op, dtype, version, options, ref, data):
    in_q, out_q = data.draw(qparams(dtype)), data.draw(qparams(dtype))
    x = full_domain(dtype)
    check(unary_model(op, dtype, in_q, out_q, x.shape, version, **options), [x], ref)


def test_abs_int8_same_scale():
    x = full_domain(np.int8)
    check(unary_model("ABS", np.int8, (0.05, -7), (0.05, -100), x.shape, 2), [x])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@SETTINGS
@given(data=st.data())
def test_logistic_8bit(dtype, data):
    in_q = data.draw(qparams(dtype))
    out_zp = data.draw(st.integers(int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)))
    x = full_domain(dtype)
    check(unary_model("LOGISTIC", dtype, in_q, (1 / 256, out_zp), x.shape, 2), [x])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@SETTINGS
@given(data=st.data())
def test_hard_swish_8bit(dtype, data):
    in_q = data.draw(qparams(dtype))
    # LiteRT needs input_scale / 128 / output_scale < 1 (output exponent <= 0).
    out_scale = data.draw(st.floats(1.05, 500.0)) * in_q[0] / 128
    out_zp = data.draw(qparams(dtype))[1]
    x = full_domain(dtype)
    check(unary_model("HARD_SWISH", dtype, in_q, (out_scale, out_zp), x.shape), [x])


@pytest.mark.parametrize("op,version", [("SQRT", 2), ("RSQRT", 2)])
@SETTINGS
@given(data=st.data())
def test_sqrt_rsqrt_int8(op, version, data):
    in_q, out_q = data.draw(qparams(np.int8)), data.draw(qparams(np.int8))
    x = full_domain(np.int8, lo=in_q[1])  # LiteRT rejects values below the zero point
    check(unary_model(op, np.int8, in_q, out_q, x.shape, version), [x])


# --------------------------------------------------------------------------------------
# int16
# --------------------------------------------------------------------------------------

Q16_OPS = [
    ("RELU", 3, {}, True), ("RELU6", 3, {}, True), ("LEAKY_RELU", 2, {"alpha": 0.15}, True),
    ("LEAKY_RELU", 2, {"alpha": -1.3}, True), ("GELU", 2, {"approximate": False}, True),
    ("GELU", 2, {"approximate": True}, True), ("EXP", 2, {}, True), ("LOG", 2, {}, True),
    ("ABS", 3, {}, True),
]


@pytest.mark.parametrize("op,version,options,ref", Q16_OPS,
                         ids=[f"{o}-{sorted(k.values())}" for o, _, k, _ in Q16_OPS])
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_quantized_int16(op, version, options, ref, data):
    in_q, out_q = data.draw(qparams(np.int16)), data.draw(qparams(np.int16))
    if op == "EXP":  # keep exp(input range) finite-ish so the table is not all saturated
        in_q = (data.draw(st.floats(-14.0, -8.0).map(math.exp)), 0)
    x = full_domain(np.int16)
    check(unary_model(op, np.int16, in_q, out_q, x.shape, version, **options), [x], ref)


@pytest.mark.parametrize("op,version", [("SQRT", 2), ("RSQRT", 3)])
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_sqrt_rsqrt_int16(op, version, data):
    in_q, out_q = data.draw(qparams(np.int16)), data.draw(qparams(np.int16))
    x = full_domain(np.int16, lo=0)
    check(unary_model(op, np.int16, in_q, out_q, x.shape, version), [x])


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(in_scale=st.one_of(st.sampled_from([2.0**-12, 2.0**-11, 2.0**-10]),
                          st.floats(-13.0, -2.0).map(math.exp)))
def test_logistic_tanh_int16(op, in_scale):
    if op == "LOGISTIC" and in_scale == 2.0**-11:
        in_scale = 2.0**-12 * 1.3
    x = full_domain(np.int16)
    check(unary_model(op, np.int16, (in_scale, 0), (1 / 32768, 0), x.shape, 3), [x])


def test_abs_neg_plain_integers():
    rng = np.random.default_rng(7)
    edges = np.array([[-2**31, 2**31 - 1, 0]], np.int64)
    x32 = np.concatenate([random_input((1, 200), np.int32, rng), edges], axis=1).astype(np.int32)
    check(unary_model("ABS", np.int32, None, None, x32.shape, 5), [x32], reference=False)
    x16 = full_domain(np.int16)
    check(unary_model("ABS", np.int16, None, None, x16.shape, 4), [x16], reference=False)
    for dtype, q in [(np.int8, (0.1, 4)), (np.int16, (0.01, 0)), (np.int32, None), (np.int64, None)]:
        x = full_domain(dtype) if dtype in (np.int8, np.int16) else random_input((3, 50), dtype, rng)
        check(unary_model("NEG", dtype, q, q, x.shape), [x])


# --------------------------------------------------------------------------------------
# PRELU
# --------------------------------------------------------------------------------------

def _broadcast_alpha_shape(shape, draw):
    """An alpha shape that broadcasts to `shape` (trailing dims kept or set to 1)."""
    k = draw(st.integers(1, len(shape)))
    tail = shape[len(shape) - k:]
    return tuple(d if draw(st.booleans()) else 1 for d in tail)


@pytest.mark.parametrize("dtype,alpha_dtype", [(np.float32, np.float32), (np.int8, np.int8),
                                               (np.uint8, np.uint8), (np.int16, np.int8)])
@SETTINGS
@given(data=st.data(), const=st.booleans(), seed=st.integers(0, 2**16))
def test_prelu(dtype, alpha_dtype, data, const, seed):
    rng = np.random.default_rng(seed)
    shape = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple))
    ashape = _broadcast_alpha_shape(shape, data.draw)
    quant = dtype != np.float32
    in_q = data.draw(qparams(dtype)) if quant else None
    out_q = data.draw(qparams(dtype)) if quant else None
    a_q = data.draw(qparams(alpha_dtype)) if quant else None
    x = random_input(shape, dtype, rng, -3, 3)
    alpha = random_input(ashape, alpha_dtype, rng, -0.5, 1.5)
    a_spec = Const(alpha, a_q) if const else In(ashape, alpha_dtype, a_q)
    model = single_op_model("PRELU", [In(shape, dtype, in_q), a_spec], [Out(shape, dtype, out_q)])
    check(model, [x] if const else [x, alpha])


def test_prelu_int8_per_channel_alpha():
    """Per-channel alpha scales: LiteRT's kernel reads the legacy (0, 0) params."""
    rng = np.random.default_rng(3)
    shape = (1, 4, 5, 6)
    alpha = random_input((1, 1, 6), np.int8, rng)
    model = single_op_model("PRELU", [In(shape, np.int8, (0.05, 3)),
                                      Const(alpha, (np.linspace(0.01, 0.02, 6), np.zeros(6, int), 2))],
                            [Out(shape, np.int8, (0.04, -2))])
    check(model, [random_input(shape, np.int8, rng)])


def test_prelu_int16_many_alphas():
    rng = np.random.default_rng(4)
    shape = (2, 3, 100)
    alpha = random_input((100,), np.int8, rng)  # > 64 distinct values: direct path
    model = single_op_model("PRELU", [In(shape, np.int16, (0.001, 0)), Const(alpha, (0.02, 5))],
                            [Out(shape, np.int16, (0.0015, 0))])
    check(model, [random_input(shape, np.int16, rng)])


# --------------------------------------------------------------------------------------
# SOFTMAX / LOG_SOFTMAX
# --------------------------------------------------------------------------------------

betas = st.sampled_from([1.0, 0.5, 2.0, 0.1, 3.7])
row_shapes = st.lists(st.integers(1, 5), min_size=0, max_size=2).flatmap(
    lambda lead: st.integers(1, 80).map(lambda d: tuple(lead) + (d,)))


@SETTINGS
@given(shape=row_shapes, beta=betas, seed=st.integers(0, 2**16))
def test_softmax_float(shape, beta, seed):
    x = random_input(shape, np.float32, np.random.default_rng(seed), -10, 10)
    check(unary_model("SOFTMAX", np.float32, None, None, shape, beta=beta), [x])


SOFTMAX_Q = [  # in dtype, out dtype, out quant, version
    (np.int8, np.int8, (1 / 256, -128), 2), (np.uint8, np.uint8, (1 / 256, 0), 1),
    (np.int8, np.int16, (1 / 32768, 0), 2), (np.uint8, np.int16, (1 / 65536, -32768), 1),
]


@pytest.mark.parametrize("dtype,out_dtype,out_q,version", SOFTMAX_Q,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b, _, _ in SOFTMAX_Q])
@SETTINGS
@given(data=st.data(), shape=row_shapes, beta=betas, seed=st.integers(0, 2**16))
def test_softmax_quantized(dtype, out_dtype, out_q, version, data, shape, beta, seed):
    in_q = data.draw(qparams(dtype).filter(lambda q: beta * q[0] * 2**26 > 1))
    x = random_input(shape, dtype, np.random.default_rng(seed))
    check(unary_model("SOFTMAX", dtype, in_q, out_q, shape, version, out_dtype, beta=beta), [x])


@SETTINGS
@given(shape=row_shapes, beta=betas, in_scale=st.floats(-11.0, -2.0).map(math.exp),
       seed=st.integers(0, 2**16))
def test_softmax_int16(shape, beta, in_scale, seed):
    x = random_input(shape, np.int16, np.random.default_rng(seed))
    check(unary_model("SOFTMAX", np.int16, (in_scale, 0), (1 / 32768, 0), shape, 3, beta=beta), [x])


def test_softmax_int8_long_equal_rows():
    """Many equal maxima (LiteRT's fixed-point exponent edge) and a zero shape pass."""
    x = np.zeros((2, 400), np.int8)
    x[1, ::3] = 5
    check(unary_model("SOFTMAX", np.int8, (0.1, 0), (1 / 256, -128), x.shape, 2, beta=1.0), [x])
    big = np.zeros((1, 1000), np.int8)
    Interpreter(model_content=unary_model("SOFTMAX", np.int8, (0.1, 0), (1 / 256, -128), big.shape,
                                          2, beta=1.0)).allocate_tensors()


@SETTINGS
@given(shape=row_shapes, seed=st.integers(0, 2**16))
def test_log_softmax_float(shape, seed):
    x = random_input(shape, np.float32, np.random.default_rng(seed), -10, 10)
    check(unary_model("LOG_SOFTMAX", np.float32, None, None, shape), [x])


@pytest.mark.parametrize("dtype,out_q", [(np.int8, (16 / 256, 127)), (np.uint8, (16 / 256, 255))])
@SETTINGS
@given(data=st.data(), shape=row_shapes, seed=st.integers(0, 2**16))
def test_log_softmax_quantized(dtype, out_q, data, shape, seed):
    in_q = data.draw(qparams(dtype).filter(lambda q: q[0] * 2**26 > 1))
    x = random_input(shape, dtype, np.random.default_rng(seed))
    check(unary_model("LOG_SOFTMAX", dtype, in_q, out_q, shape, 2), [x])


# --------------------------------------------------------------------------------------
# Unsupported combinations
# --------------------------------------------------------------------------------------

UNSUPPORTED = [
    ("RELU_N1_TO_1", np.int16, np.int16, (0.01, 0), 1, {}),
    ("RELU", np.int32, np.int32, None, 1, {}),
    ("ELU", np.uint8, np.uint8, (0.1, 10), 1, {}),
    ("HARD_SWISH", np.int16, np.int16, (0.01, 0), 1, {}),
    ("LOG_SOFTMAX", np.int16, np.int16, (0.01, 0), 1, {}),
    ("SOFTMAX", np.int8, np.uint8, (0.1, 0), 2, {"beta": 1.0}),
    ("SOFTMAX", np.int32, np.int32, None, 1, {"beta": 1.0}),
    ("SQUARE", np.int32, np.int32, None, 1, {}),
    ("FLOOR", np.int32, np.int32, None, 1, {}),
    ("SIN", np.int8, np.int8, (0.1, 0), 1, {}),
    ("EXP", np.uint8, np.uint8, (0.1, 0), 1, {}),
    ("TANH", np.int32, np.int32, None, 1, {}),
    ("RELU6", np.float32, np.int8, (0.1, 0), 1, {}),  # mismatched output type
]


@pytest.mark.parametrize("op,dtype,out_dtype,q,version,options", UNSUPPORTED,
                         ids=[f"{u[0]}-{np.dtype(u[1]).name}-{np.dtype(u[2]).name}" for u in UNSUPPORTED])
def test_unsupported(op, dtype, out_dtype, q, version, options):
    model = single_op_model(op, [In((1, 4), dtype, q)], [Out((1, 4), out_dtype, q)],
                            version=version, **options)
    expect_unsupported(model)


def test_unsupported_prelu_alpha_type_and_shape():
    bad_type = single_op_model("PRELU", [In((1, 4, 4, 3), np.int8, (0.1, 0)),
                                         Const(np.ones(3, np.int16), (0.1, 0))],
                               [Out((1, 4, 4, 3), np.int8, (0.1, 0))])
    bad_shape = single_op_model("PRELU", [In((1, 4, 3)), Const(np.ones((2, 4, 3), np.float32))],
                                [Out((1, 4, 3))])
    for model in (bad_type, bad_shape):
        expect_unsupported(model)


def test_unsupported_versions():
    for op, version in [("SOFTMAX", 5), ("GELU", 4), ("SIN", 3), ("RELU", 4)]:
        model = unary_model(op, np.float32, None, None, (1, 4), version)
        expect_unsupported(model)


# --------------------------------------------------------------------------------------
# Shared models using these ops
# --------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["face_landmark_int8", "hand_recrop_int8", "mobilenet_v2_96_int8",
                                  "face_detection_short_range_int16x8"])
def test_shared_quantized_models(models_dir, name):
    data = (models_dir / f"{name}.tflite").read_bytes()
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    inputs = [random_input(d["shape"], d["dtype"], rng) for d in it.get_input_details()]
    assert_matches_litert(data, inputs)


def test_round_halves_to_even():
    from oracle import assert_matches_litert

    from acelera.core.builder import In, Out, single_op_model
    x = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -3.7, 1e9, np.inf]], np.float32)
    m = single_op_model("ROUND", [In(x.shape)], [Out(x.shape)])
    got = assert_matches_litert(m, [x], reference="builtin")[0]
    np.testing.assert_array_equal(got[0, :6], [-2, -2, -0, 0, 2, 2])
