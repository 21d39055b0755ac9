"""Pooling/normalization, complex/FFT, bit ops and FAKE_QUANT against LiteRT's reference kernels.

L2_POOL_2D, LOCAL_RESPONSE_NORMALIZATION, RFFT2D, REAL, IMAG, COMPLEX_ABS, ATAN2, BITWISE_XOR,
RIGHT_SHIFT and FAKE_QUANT over every dtype LiteRT accepts for them (BFLOAT16 ATAN2 through
CAST, since LiteRT's Python API cannot hold bfloat16 arrays).
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import allocate_error, rng_of
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from oracle import (
    assert_exact,
    assert_matches_litert,
    random_input,
    run_acelera,
    run_litert,
)

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.errors import AceleraError, UnsupportedOpError
from acelera.core.interpreter import Interpreter

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH"]
INT_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32]


def shapes(min_rank=1, max_rank=4, min_side=1, max_side=5):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def invoke_error(model: bytes, inputs) -> AceleraError:
    it = Interpreter(model_content=model)
    details = it.get_input_details()
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != np.shape(x):
            it.resize_tensor_input(d["index"], list(np.shape(x)))
    it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], x)
    with pytest.raises(AceleraError) as e:
        it.invoke()
    assert "node 0" in str(e.value)
    return e.value


def assert_complex_close(model: bytes, inputs, tol: float = 1e-4) -> np.ndarray:
    """complex64 outputs within tol * max(1, max|ref|), real and imaginary parts alike."""
    want, got = run_litert(model, inputs)[0], run_acelera(model, inputs)[0]
    assert got.dtype == want.dtype == np.complex64 and got.shape == want.shape
    w, g = want.view(np.float32).astype(np.float64), got.view(np.float32).astype(np.float64)
    bound = tol * max(1.0, float(np.max(np.abs(w), initial=0.0)))
    assert float(np.max(np.abs(g - w), initial=0.0)) <= bound
    return got


def litert_output_shape(model: bytes) -> tuple[int, ...]:
    """The output shape LiteRT's prepare computes (its Python API cannot return empty tensors)."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    it = LiteRT(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return tuple(int(d) for d in it.get_output_details()[0]["shape"])


def out_size(padding: str, size: int, filt: int, stride: int) -> int:
    return -(-size // stride) if padding == "SAME" else max(0, (size - filt) // stride + 1)


# --- L2_POOL_2D -------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), padding=st.sampled_from(["SAME", "VALID"]), act=st.sampled_from(ACTS),
       seed=st.integers(0, 2**31))
def test_l2_pool(data, padding, act, seed):
    n, h, w, c = data.draw(st.tuples(st.integers(1, 2), st.integers(1, 9), st.integers(1, 9), st.integers(1, 4)))
    fh, fw = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    sh, sw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    oh, ow = out_size(padding, h, fh, sh), out_size(padding, w, fw, sw)
    assume(oh > 0 and ow > 0)
    x = random_input((n, h, w, c), np.float32, rng_of(seed), -3, 3)
    m = single_op_model("L2_POOL_2D", [In(x.shape)], [Out((n, oh, ow, c))], padding=padding, stride_h=sh,
                        stride_w=sw, filter_height=fh, filter_width=fw, fused_activation_function=act)
    got = assert_matches_litert(m, [x])
    assert got[0].shape == (n, oh, ow, c)


def test_l2_pool_special_values():
    x = random_input((1, 4, 4, 2), np.float32, rng_of(3))
    x[0, 0, 0, 0], x[0, 3, 3, 1], x[0, 2, 0, 1] = np.inf, np.nan, 1e30
    m = single_op_model("L2_POOL_2D", [In(x.shape)], [Out((1, 2, 2, 2))], padding="VALID", stride_h=2,
                        stride_w=2, filter_height=2, filter_width=2)
    got = assert_matches_litert(m, [x])[0]  # inf clamps to FLT_MAX, nan passes (positions checked)
    assert got[0, 0, 0, 0] == np.finfo(np.float32).max and np.isnan(got[0, 1, 1, 1])


@pytest.mark.parametrize("fh,fw,want", [(2, 5, (0, 0)), (5, 2, (0, 2)), (2, 4, (2, 0)), (4, 4, (0, 0))])
def test_l2_pool_window_larger_than_input(fh, fw, want):
    # ComputeOutSizeChecked fails on a negative size (C++ division truncates: -1 // 1 fails, 0 does
    # not); ComputePaddingHeightWidth stops at the first failing axis, width first, leaving 0s.
    m = single_op_model("L2_POOL_2D", [In((1, 3, 3, 2))], [Out((1, 1, 1, 2))], padding="VALID", stride_h=1,
                        stride_w=1, filter_height=fh, filter_width=fw)
    assert run_acelera(m, [np.ones((1, 3, 3, 2), np.float32)])[0].shape == (1, *want, 2) == litert_output_shape(m)


@pytest.mark.parametrize("case", ["int8", "uint8", "int16", "rank", "stride", "out_type"])
def test_l2_pool_bad_models(case):
    x, out = In((1, 4, 4, 2)), Out((1, 2, 2, 2))
    opts = {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2, "filter_width": 2}
    if case in ("int8", "uint8", "int16"):
        dt = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16}[case]
        x, out = In((1, 4, 4, 2), dt, (0.1, 0)), Out((1, 2, 2, 2), dt, (0.1, 0))
    elif case == "rank":
        x = In((4, 4, 2))
    elif case == "stride":
        opts["stride_w"] = 0
    elif case == "out_type":
        out = Out((1, 2, 2, 2), np.int32)
    err = allocate_error(single_op_model("L2_POOL_2D", [x], [out], **opts))
    if case in ("int8", "uint8", "int16", "out_type"):
        assert isinstance(err, UnsupportedOpError)


# --- LOCAL_RESPONSE_NORMALIZATION -------------------------------------------------------------

@SETTINGS
@given(shape=shapes(4, 4, 1, 6).map(lambda s: s[:3] + (s[3] * 2,)), radius=st.integers(-1, 12),
       bias=st.floats(0.1, 3.0), alpha=st.floats(0.0, 2.0), beta=st.floats(0.0, 1.5),
       seed=st.integers(0, 2**31))
def test_local_response_norm(shape, radius, bias, alpha, beta, seed):
    x = random_input(shape, np.float32, rng_of(seed), -3, 3)
    m = single_op_model("LOCAL_RESPONSE_NORMALIZATION", [In(shape)], [Out(shape)], radius=radius, bias=bias,
                        alpha=alpha, beta=beta)
    assert_matches_litert(m, [x])


def test_local_response_norm_reference_window():
    # BUILTIN_REF sums channels [c - r, c + r): channel 0 with radius 1 sees only itself.
    x = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 1, 6)
    m = single_op_model("LOCAL_RESPONSE_NORMALIZATION", [In(x.shape)], [Out(x.shape)], radius=1, bias=0.0,
                        alpha=1.0, beta=1.0)
    got = assert_matches_litert(m, [x])[0]
    np.testing.assert_allclose(got.ravel()[:2], [1.0, 2.0 / 5.0], rtol=1e-6)


def test_local_response_norm_inf():
    x = random_input((1, 2, 2, 7), np.float32, rng_of(4))
    x[0, 0, 0, 3] = np.inf
    m = single_op_model("LOCAL_RESPONSE_NORMALIZATION", [In(x.shape)], [Out(x.shape)], radius=2, bias=1.0,
                        alpha=0.5, beta=0.75)
    assert_matches_litert(m, [x])


@pytest.mark.parametrize("case", ["rank", "int8", "out_type"])
def test_local_response_norm_bad_models(case):
    x, out = In((1, 2, 2, 4)), Out((1, 2, 2, 4))
    if case == "rank":
        x, out = In((2, 2, 4)), Out((2, 2, 4))
    elif case == "int8":
        x, out = In((1, 2, 2, 4), np.int8, (0.1, 0)), Out((1, 2, 2, 4), np.int8, (0.1, 0))
    elif case == "out_type":
        out = Out((1, 2, 2, 4), np.float16)
    err = allocate_error(single_op_model("LOCAL_RESPONSE_NORMALIZATION", [x], [out], radius=1, bias=1.0,
                                         alpha=1.0, beta=0.5))
    if case != "rank":
        assert isinstance(err, UnsupportedOpError)


# --- RFFT2D -----------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), const_len=st.booleans(), seed=st.integers(0, 2**31))
def test_rfft2d(data, const_len, seed):
    shape = data.draw(shapes(2, 4, 1, 9))
    fh = 1 << data.draw(st.integers(0, 4))
    fw = 1 << data.draw(st.integers(1, 5))
    x = random_input(shape, np.float32, rng_of(seed), -2, 2)
    out = shape[:-2] + (fh, fw // 2 + 1)
    lengths = np.array([fh, fw], np.int32)
    if const_len:
        m = single_op_model("RFFT2D", [In(shape), Const(lengths)], [Out(out, np.complex64)])
        got = assert_complex_close(m, [x])
    else:
        m = single_op_model("RFFT2D", [In(shape), In((2,), np.int32)], [Out(out, np.complex64)])
        got = assert_complex_close(m, [x, lengths])
    assert got.shape == out


def test_rfft2d_matches_numpy():
    x = random_input((2, 8, 16), np.float32, rng_of(5))
    m = single_op_model("RFFT2D", [In(x.shape), Const(np.array([8, 16], np.int32))], [Out((2, 8, 9), np.complex64)])
    got = assert_complex_close(m, [x])
    np.testing.assert_allclose(got, np.fft.rfft2(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["not_pow2", "width1", "zero", "len_type", "len_shape", "rank1", "int32_in",
                                  "out_type"])
def test_rfft2d_bad_models(case):
    x, lengths, out = In((4, 8)), Const(np.array([4, 8], np.int32)), Out((4, 5), np.complex64)
    if case == "not_pow2":
        lengths = Const(np.array([4, 6], np.int32))
    elif case == "width1":
        lengths = Const(np.array([4, 1], np.int32))
    elif case == "zero":
        lengths = Const(np.array([0, 8], np.int32))
    elif case == "len_type":
        lengths = Const(np.array([4, 8], np.int64))
    elif case == "len_shape":
        lengths = Const(np.array([4, 8, 2], np.int32))
    elif case == "rank1":
        x = In((8,))
    elif case == "int32_in":
        x = In((4, 8), np.int32)
    elif case == "out_type":
        out = Out((4, 5), np.float32)
    err = allocate_error(single_op_model("RFFT2D", [x, lengths], [out]))
    if case in ("len_type", "int32_in", "out_type"):
        assert isinstance(err, UnsupportedOpError)


@pytest.mark.parametrize("lengths", [[4, 6], [3, 8], [-4, 8], [4, 1], [-2147483648, 8]])
def test_rfft2d_bad_runtime_lengths(lengths):
    m = single_op_model("RFFT2D", [In((4, 8)), In((2,), np.int32)], [Out((4, 5), np.complex64)])
    invoke_error(m, [np.ones((4, 8), np.float32), np.array(lengths, np.int32)])


def test_rfft2d_huge_lengths_refused():
    m = single_op_model("RFFT2D", [In((4, 8)), In((2,), np.int32)], [Out((4, 5), np.complex64)])
    assert "limit" in str(invoke_error(m, [np.ones((4, 8), np.float32), np.array([1 << 30, 1 << 30], np.int32)]))


# --- REAL / IMAG / COMPLEX_ABS ----------------------------------------------------------------

@pytest.mark.parametrize("op", ["REAL", "IMAG", "COMPLEX_ABS"])
@pytest.mark.parametrize("dt,odt", [(np.complex64, np.float32), (np.complex128, np.float64)])
def test_complex_parts(op, dt, odt):
    rng = rng_of(6)
    x = (rng.standard_normal((5, 7)) * 10 + 1j * rng.standard_normal((5, 7)) * 10).astype(dt)
    x[0, :5] = [complex(np.inf, 1), complex(np.nan, 2), complex(3e38, 3e38), complex(-0.0, -0.0),
                complex(1, -np.inf)]
    m = single_op_model(op, [In(x.shape, dt)], [Out(x.shape, odt)])
    assert_exact(m, [x])


@SETTINGS
@given(op=st.sampled_from(["REAL", "IMAG", "COMPLEX_ABS"]), dt=st.sampled_from([np.complex64, np.complex128]),
       shape=shapes(0, 4, 0, 5), seed=st.integers(0, 2**31))
def test_complex_parts_shapes(op, dt, shape, seed):
    assume(0 not in shape)
    rng = rng_of(seed)
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    odt = np.float32 if dt == np.complex64 else np.float64
    assert_exact(single_op_model(op, [In(shape, dt)], [Out(shape, odt)]), [x])


@pytest.mark.parametrize("op", ["REAL", "IMAG", "COMPLEX_ABS"])
def test_complex_parts_bad_models(op):
    assert isinstance(allocate_error(single_op_model(op, [In((3,))], [Out((3,))])), UnsupportedOpError)
    assert isinstance(allocate_error(single_op_model(op, [In((3,), np.complex64)], [Out((3,), np.float64)])),
                      UnsupportedOpError)
    assert isinstance(allocate_error(single_op_model(op, [In((3,), np.complex128)], [Out((3,), np.float32)])),
                      UnsupportedOpError)


# --- ATAN2 ------------------------------------------------------------------------------------

@SETTINGS
@given(dt=st.sampled_from([np.float32, np.float64, np.float16]), shape=shapes(0, 4, 1, 6),
       scale=st.sampled_from([1e-3, 1.0, 1e4]), seed=st.integers(0, 2**31))
def test_atan2(dt, shape, scale, seed):
    rng = rng_of(seed)
    y = random_input(shape, dt, rng, -scale, scale)
    x = random_input(shape, dt, rng, -scale, scale)
    m = single_op_model("ATAN2", [In(shape, dt), In(shape, dt)], [Out(shape, dt)])
    if dt == np.float16:
        assert_exact(m, [y, x])
    else:
        assert_matches_litert(m, [y, x], tol=1e-6)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_atan2_special_values(dt):
    vals = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30], dt)
    y, x = np.meshgrid(vals, vals)
    m = single_op_model("ATAN2", [In(y.shape, dt), In(x.shape, dt)], [Out(y.shape, dt)])
    assert_exact(m, [y, x])


def test_atan2_bfloat16():
    """float32 -> bfloat16 (CAST) -> ATAN2 -> float32 (CAST): bfloat16 arrays cannot cross LiteRT's Python API."""
    rng = rng_of(7)
    y = np.concatenate([rng.standard_normal(200), [0.0, -0.0, np.inf, -np.inf, np.nan, 3.0]]).astype(np.float32)
    x = np.concatenate([rng.standard_normal(200), [-0.0, -0.0, np.inf, 1.0, 1.0, 0.0]]).astype(np.float32)
    b = ModelBuilder()
    iy, ix = b.add_input("y", y.shape, np.float32), b.add_input("x", x.shape, np.float32)
    by, bx = b.add_tensor("by", y.shape, "BFLOAT16"), b.add_tensor("bx", x.shape, "BFLOAT16")
    r, o = b.add_tensor("r", y.shape, "BFLOAT16"), b.add_tensor("o", y.shape, np.float32)
    b.add_operator("CAST", [iy], [by], version=7)
    b.add_operator("CAST", [ix], [bx], version=7)
    b.add_operator("ATAN2", [by, bx], [r])
    b.add_operator("CAST", [r], [o], version=7)
    b.mark_outputs(o)
    m = b.build()
    want, got = run_litert(m, [y, x])[0], run_acelera(m, [y, x])[0]
    np.testing.assert_array_equal(got, want)


def test_atan2_bad_models():
    assert isinstance(allocate_error(single_op_model("ATAN2", [In((3,)), In((3,), np.float64)], [Out((3,))])),
                      UnsupportedOpError)
    assert isinstance(allocate_error(single_op_model("ATAN2", [In((3,), np.int32), In((3,), np.int32)],
                                                     [Out((3,), np.int32)])), UnsupportedOpError)
    allocate_error(single_op_model("ATAN2", [In((3,)), In((1, 3))], [Out((3,))]))


def test_atan2_shape_mismatch_after_resize():
    # LiteRT only compares ranks (and would read past x); acelera refuses different shapes.
    it = Interpreter(model_content=single_op_model("ATAN2", [In((2, 3)), In((2, 3))], [Out((2, 3))]))
    it.resize_tensor_input(it.get_input_details()[1]["index"], [2, 4])
    with pytest.raises(AceleraError, match="node 0"):
        it.allocate_tensors()


# --- BITWISE_XOR / RIGHT_SHIFT ----------------------------------------------------------------

def broadcast_pair(data, max_rank=6):
    out = data.draw(shapes(0, max_rank, 1, 4))
    a = tuple(d if data.draw(st.booleans()) else 1 for d in out)
    b = tuple(d if data.draw(st.booleans()) else 1 for d in out)
    a = a[data.draw(st.integers(0, len(a))):]
    return a, b


@SETTINGS
@given(data=st.data(), op=st.sampled_from(["BITWISE_XOR", "RIGHT_SHIFT"]), dt=st.sampled_from(INT_TYPES),
       seed=st.integers(0, 2**31))
def test_bit_ops(data, op, dt, seed):
    sa, sb = broadcast_pair(data)
    rng = rng_of(seed)
    a = random_input(sa, dt, rng)
    if op == "RIGHT_SHIFT":
        bits = 8 * np.dtype(dt).itemsize
        lo = -bits if np.issubdtype(dt, np.signedinteger) else 0
        b = rng.integers(lo, 2 * bits, size=sb).astype(dt)
    else:
        b = random_input(sb, dt, rng)
    out = np.broadcast_shapes(sa, sb)
    m = single_op_model(op, [In(sa, dt), In(sb, dt)], [Out(out, dt)])
    got = assert_exact(m, [a, b])
    assert got[0].shape == out


@pytest.mark.parametrize("dt", INT_TYPES)
def test_right_shift_extremes(dt):
    info = np.iinfo(dt)
    a = np.array([info.min, info.max, -1 if info.min < 0 else 1, 0, info.min, info.max, 5], dt)
    b = np.array([1, 8 * a.itemsize - 1, 8 * a.itemsize, 3, info.max, info.max, info.min], dt)
    assert_exact(single_op_model("RIGHT_SHIFT", [In(a.shape, dt), In(b.shape, dt)], [Out(a.shape, dt)]), [a, b])


@pytest.mark.parametrize("op", ["BITWISE_XOR", "RIGHT_SHIFT"])
def test_bit_ops_bad_models(op):
    for dt in (np.int64, np.float32, np.bool_):
        err = allocate_error(single_op_model(op, [In((3,), dt), In((3,), dt)], [Out((3,), dt)]))
        assert isinstance(err, UnsupportedOpError)
    assert isinstance(allocate_error(single_op_model(op, [In((3,), np.int8), In((3,), np.int16)],
                                                     [Out((3,), np.int8)])), UnsupportedOpError)
    assert isinstance(allocate_error(single_op_model(op, [In((3,), np.int8), In((3,), np.int8)],
                                                     [Out((3,), np.int32)])), UnsupportedOpError)
    allocate_error(single_op_model(op, [In((2, 3), np.int32), In((4,), np.int32)], [Out((2, 3), np.int32)]))


# --- FAKE_QUANT -------------------------------------------------------------------------------

@SETTINGS
@given(num_bits=st.integers(2, 16), lo=st.floats(-20, 0), hi=st.floats(0, 20), version=st.sampled_from([1, 2]),
       shape=shapes(0, 4, 1, 6), seed=st.integers(0, 2**31))
def test_fake_quant(num_bits, lo, hi, version, shape, seed):
    assume(hi > lo)
    x = random_input(shape, np.float32, rng_of(seed), lo * 1.5 - 1, hi * 1.5 + 1)
    m = single_op_model("FAKE_QUANT", [In(shape)], [Out(shape)], version=version, min=lo, max=hi,
                        num_bits=num_bits)
    assert_exact(m, [x])


@pytest.mark.parametrize("lo,hi,num_bits", [(-1.0, 1.0, 8), (0.5, 3.0, 8), (-3.0, -0.5, 4), (-6.0, 6.0, 1),
                                            (-1.0, 1.0, 20), (-0.3, 2.7, 24), (2.0, -2.0, 8), (0.0, 0.0, 8),
                                            (-1e-30, 1e-30, 16)])
def test_fake_quant_edges(lo, hi, num_bits):
    # min > 0, max < 0, min > max, an empty range and zero points past uint16 all run in LiteRT.
    x = np.concatenate([np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, lo, hi], np.float32),
                        random_input((40,), np.float32, rng_of(9), -8, 8)])
    m = single_op_model("FAKE_QUANT", [In(x.shape)], [Out(x.shape)], version=2, min=lo, max=hi,
                        num_bits=num_bits)
    assert_exact(m, [x])


@pytest.mark.parametrize("case", ["narrow_range", "bits0", "bits31", "int8", "out_type"])
def test_fake_quant_bad_models(case):
    x, out, opts = In((4,)), Out((4,)), {"min": -1.0, "max": 1.0, "num_bits": 8}
    if case == "narrow_range":
        opts["narrow_range"] = True  # LiteRT refuses it at prepare too
    elif case == "bits0":
        opts["num_bits"] = 0
    elif case == "bits31":
        opts["num_bits"] = 31
    elif case == "int8":
        x, out = In((4,), np.int8, (0.1, 0)), Out((4,), np.int8, (0.1, 0))
    elif case == "out_type":
        out = Out((4,), np.float16)
    m = single_op_model("FAKE_QUANT", [x], [out], version=2, **opts)
    assert isinstance(allocate_error(m), UnsupportedOpError)
    if case == "narrow_range":
        with pytest.raises(Exception, match="narrow_range"):
            run_litert(m, [np.zeros(4, np.float32)])
