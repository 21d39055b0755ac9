"""Elementwise binary ops, comparisons, logical ops and SELECT against LiteRT's reference kernels."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import expect_unsupported
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert, random_input, run_acelera, run_litert

from acelera.core import quant
from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter
from acelera.core.kernels import binary_common as binary

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # float overflow on purpose
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
QRANGE = {np.int8: (-128, 127), np.uint8: (0, 255), np.int16: (0, 0)}


@st.composite
def shapes2(draw, max_rank=6, allow_zero=False):
    """Two numpy-broadcastable shapes and their broadcast shape."""
    rank = draw(st.integers(0, max_rank))
    lo = 0 if allow_zero and draw(st.integers(0, 9)) == 0 else 1
    full = draw(st.lists(st.integers(lo, 4), min_size=rank, max_size=rank))

    def operand():
        r = draw(st.integers(0, rank))
        dims = full[rank - r:]
        return tuple(1 if draw(st.booleans()) and draw(st.booleans()) else d for d in dims)

    a, b = operand(), operand()
    if draw(st.integers(0, 3)) == 0:
        b = a  # same shapes: the non-broadcast kernels
    return a, b, tuple(np.broadcast_shapes(a, b))


def qparam(draw, dtype, lo=0.002, hi=0.2):
    zlo, zhi = QRANGE[dtype]
    return (float(draw(st.floats(lo, hi))), int(draw(st.integers(zlo, zhi))))


def binary_model(op, a, b, out, dtype, q1=None, q2=None, qo=None, out_dtype=None, version=1, **opts):
    return single_op_model(op, [In(a, dtype, q1), In(b, dtype, q2)], [Out(out, out_dtype or dtype, qo)],
                           version=version, **opts)


def special_floats(x: np.ndarray, rng) -> np.ndarray:
    """Sprinkle zeros, infinities and NaNs over a float input."""
    x = x.copy()
    if x.size:
        idx = rng.integers(0, x.size, size=max(1, x.size // 4))
        x.reshape(-1)[idx] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, -3e38], np.float32),
                                        size=idx.size)
    return x


# --- float ---------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"])
@SETTINGS
@given(shapes=shapes2(allow_zero=True), act=st.sampled_from(ACTS), special=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_float(op, shapes, act, special, seed):
    a, b, out = shapes
    rng = np.random.default_rng(seed)
    opts = {"fused_activation_function": act} if op in ("ADD", "SUB", "MUL", "DIV") else {}
    model = binary_model(op, a, b, out, np.float32, **opts)
    x, y = random_input(a, np.float32, rng, -4, 4), random_input(b, np.float32, rng, -4, 4)
    if special:
        x, y = special_floats(x, rng), special_floats(y, rng)
    assert_matches_litert(model, [x, y])
    assert_nonfinite_match(model, [x, y])


def assert_nonfinite_match(model, inputs):
    """NaN/inf positions and infinite values exactly as LiteRT (the oracle's bound is inf then)."""
    want, got = run_litert(model, inputs)[0], run_acelera(model, inputs)[0]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want) | np.isinf(got)
    assert np.array_equal(got[inf], want[inf])


def test_float_tanh_activation_is_ignored_and_inf_clamped():
    # CalculateActivationRange<float> treats TANH as no activation; results still clamp to FLT_MAX.
    model = binary_model("ADD", (4,), (4,), (4,), np.float32, fused_activation_function="TANH")
    x = np.array([1.0, np.inf, -np.inf, 3e38], np.float32)
    got = assert_matches_litert(model, [x, np.array([2.0, 1.0, 1.0, 3e38], np.float32)])[0]
    assert got[0] == 3.0 and got[1] == np.finfo(np.float32).max


def test_scalar_operands():
    for op in ("ADD", "MUL", "MAXIMUM", "POW"):
        model = binary_model(op, (), (), (), np.float32)
        assert_matches_litert(model, [np.array(1.5, np.float32), np.array(2.0, np.float32)])
    model = binary_model("ADD", (), (), (), np.int8, (0.1, 3), (0.05, -2), (0.2, 1), version=2)
    assert_matches_litert(model, [np.array(17, np.int8), np.array(-100, np.int8)])


# --- plain integers ------------------------------------------------------------------------
INT_CASES = [("ADD", np.int32, 1), ("ADD", np.int64, 4), ("ADD", np.int16, 5), ("SUB", np.int32, 1),
             ("SUB", np.int64, 4), ("MUL", np.int32, 1), ("MUL", np.int64, 5), ("MUL", np.int16, 7),
             ("MUL", np.uint32, 7), ("DIV", np.int32, 1), ("MAXIMUM", np.int32, 1),
             ("MAXIMUM", np.int64, 1), ("MINIMUM", np.int16, 4), ("MINIMUM", np.int8, 2),
             ("MAXIMUM", np.uint8, 1), ("SQUARED_DIFFERENCE", np.int32, 1)]


@pytest.mark.parametrize("op,dtype,version", INT_CASES)
@SETTINGS
@given(shapes=shapes2(), act=st.sampled_from(ACTS), small=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_integer(op, dtype, version, shapes, act, small, seed):
    a, b, out = shapes
    rng = np.random.default_rng(seed)
    opts = {"fused_activation_function": act} if op in ("ADD", "SUB", "MUL", "DIV") else {}
    model = binary_model(op, a, b, out, dtype, version=version, **opts)
    info = np.iinfo(dtype)
    if small:  # values around the activation bounds as well as wrapping ones
        lo, hi = max(int(info.min), -10), min(int(info.max), 10)
        x = rng.integers(lo, hi + 1, size=a).astype(dtype)
        y = rng.integers(lo, hi + 1, size=b).astype(dtype)
    else:
        x, y = random_input(a, dtype, rng), random_input(b, dtype, rng)
    if op == "DIV":
        y = np.where(y == 0, 7, y).astype(dtype)
        y = np.where((x.min(initial=0) == info.min) & (y == -1), 3, y).astype(dtype)  # no INT_MIN / -1
    assert_matches_litert(model, [x, y])


def test_int32_div_truncates():
    model = binary_model("DIV", (6,), (6,), (6,), np.int32)
    got = assert_matches_litert(model, [np.array([7, -7, 7, -7, 0, 9], np.int32),
                                        np.array([2, 2, -2, -2, 5, 3], np.int32)])[0]
    assert got.tolist() == [3, -3, -3, 3, 0, 3]


def test_int32_div_constant_zero_divisor_is_rejected():
    model = single_op_model("DIV", [In((3,), np.int32), Const(np.array([1, 0, 2], np.int32))],
                            [Out((3,), np.int32)])
    expect_unsupported(model)


# --- quantized ADD / SUB / MUL --------------------------------------------------------------
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@SETTINGS
@given(data=st.data(), shapes=shapes2(), act=st.sampled_from(ACTS), seed=st.integers(0, 2**31 - 1))
def test_quant8_add_sub_mul(op, dtype, data, shapes, act, seed):
    a, b, out = shapes
    q1, q2 = qparam(data.draw, dtype), qparam(data.draw, dtype)
    qo = qparam(data.draw, dtype, 0.01, 0.5) if op == "MUL" else qparam(data.draw, dtype, 0.005, 0.3)
    model = binary_model(op, a, b, out, dtype, q1, q2, qo, version=2 if dtype == np.int8 else 1,
                         fused_activation_function=act)
    rng = np.random.default_rng(seed)
    assert_matches_litert(model, [random_input(a, dtype, rng), random_input(b, dtype, rng)])


def all_pairs(dtype, exclude_b=None):
    info = np.iinfo(dtype)
    v = np.arange(int(info.min), int(info.max) + 1)
    w = v if exclude_b is None else v[v != exclude_b]
    return np.repeat(v, w.size).astype(dtype), np.tile(w, v.size).astype(dtype)


# Realistic per-tensor parameters from int8 models (residual adds with unequal scales, a MUL
# with a rescale >= 1 (MUL v3), a tiny output scale).
REALISTIC8 = [((0.0235, -128), (0.0412, 5), (0.0517, -20)),
              ((0.1076, 3), (0.0039, -128), (0.1101, -1)),
              ((0.00392, -128), (0.00392, -128), (0.00784, -128)),
              ((0.5, 0), (0.25, 10), (0.01, -3)),
              ((0.0625, 0), (0.0625, 0), (0.0625, 0))]


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "DIV"])
@pytest.mark.parametrize("params", REALISTIC8)
def test_quant8_all_pairs_exact(op, params):
    """Every (a, b) int8 pair, bit-exact against LiteRT, for realistic scale combinations."""
    q1, q2, qo = params
    x, y = all_pairs(np.int8, q2[1] if op == "DIV" else None)
    model = binary_model(op, x.shape, y.shape, x.shape, np.int8, q1, q2, qo, version=2)
    assert_matches_litert(model, [x, y])


def test_uint8_add_all_pairs_with_broadcast_activation():
    x, y = all_pairs(np.uint8)
    model = binary_model("ADD", (256, 256), (256,), (256, 256), np.uint8, (0.02, 128), (0.07, 100),
                         (0.05, 90), fused_activation_function="RELU6")
    assert_matches_litert(model, [x.reshape(256, 256), y[:256]])


@pytest.mark.parametrize("op", ["ADD", "SUB"])
@SETTINGS
@given(data=st.data(), shapes=shapes2(), act=st.sampled_from(ACTS), seed=st.integers(0, 2**31 - 1))
def test_quant16_general(op, data, shapes, act, seed):
    """int16x8 ADD/SUB with general scales (the path shared models use)."""
    a, b, out = shapes
    s = [float(data.draw(st.floats(1e-5, 2e-3))) for _ in range(3)]
    pot = data.draw(st.booleans())  # pot_scale_int16=True still takes the general path here
    model = binary_model(op, a, b, out, np.int16, (s[0], 0), (s[1], 0), (s[2], 0), version=3,
                         fused_activation_function=act, pot_scale_int16=pot)
    rng = np.random.default_rng(seed)
    assert_matches_litert(model, [random_input(a, np.int16, rng), random_input(b, np.int16, rng)])


@pytest.mark.parametrize("op", ["ADD", "SUB"])
@pytest.mark.parametrize("scales", [(3.0517578e-05, 6.1035156e-05, 9.1552734e-05),
                                    (1.2207e-4, 1.2207e-4, 2.4414e-4), (4.5e-4, 3.05e-5, 5.0e-4)])
def test_quant16_realistic_full_range(op, scales):
    rng = np.random.default_rng(7)
    x = np.concatenate([np.arange(-32768, 32768), rng.integers(-32768, 32768, 65536)]).astype(np.int16)
    y = np.concatenate([rng.integers(-32768, 32768, 65536), np.arange(-32768, 32768)[::-1]]).astype(np.int16)
    s1, s2, so = scales
    model = binary_model(op, x.shape, y.shape, x.shape, np.int16, (s1, 0), (s2, 0), (so, 0), version=3,
                         pot_scale_int16=False)
    assert_matches_litert(model, [x, y])


@pytest.mark.parametrize("op", ["ADD", "SUB"])
@SETTINGS
@given(e=st.tuples(st.integers(-15, -10), st.integers(-15, -10)), which=st.booleans(),
       act=st.sampled_from(ACTS), seed=st.integers(0, 2**31 - 1), broadcast=st.booleans())
def test_quant16_pot(op, e, which, act, seed, broadcast):
    """pot_scale_int16 with power-of-two scales: the LSTM fixed-point path (saturating)."""
    lo = min(e)
    e_out = max(e)
    e1, e2 = (lo, e_out) if which else (e_out, lo)  # one input matches the output scale
    shape_b = (3,) if broadcast and op == "SUB" else (2, 3)
    model = binary_model(op, (2, 3), shape_b, (2, 3), np.int16, (2.0 ** e1, 0), (2.0 ** e2, 0),
                         (2.0 ** e_out, 0), fused_activation_function=act, pot_scale_int16=True)
    rng = np.random.default_rng(seed)
    assert_matches_litert(model, [random_input((2, 3), np.int16, rng), random_input(shape_b, np.int16, rng)])


@SETTINGS
@given(data=st.data(), shapes=shapes2(), act=st.sampled_from(ACTS), seed=st.integers(0, 2**31 - 1))
def test_mul_int16_quantized(data, shapes, act, seed):
    a, b, out = shapes
    s = [float(data.draw(st.floats(1e-5, 1e-2))) for _ in range(3)]
    model = binary_model("MUL", a, b, out, np.int16, (s[0], 0), (s[1], 0), (s[2], 0), version=4,
                         fused_activation_function=act)
    rng = np.random.default_rng(seed)
    assert_matches_litert(model, [random_input(a, np.int16, rng), random_input(b, np.int16, rng)])


@pytest.mark.parametrize("out_dtype", [np.int8, np.uint8])
@SETTINGS
@given(data=st.data(), act=st.sampled_from(ACTS), seed=st.integers(0, 2**31 - 1))
def test_mul_int16_to_8bit(out_dtype, data, act, seed):
    qo = qparam(data.draw, out_dtype, 0.001, 0.1)
    shape = (2, 5, 7)
    model = binary_model("MUL", shape, shape, shape, np.int16, (2 ** -15, 0), (2 ** -15, 0), qo,
                         out_dtype=out_dtype, fused_activation_function=act)
    rng = np.random.default_rng(seed)
    x, y = random_input(shape, np.int16, rng), random_input(shape, np.int16, rng)
    x.reshape(-1)[:2] = -32768
    y.reshape(-1)[:1] = -32768
    assert_matches_litert(model, [x, y])


# --- quantized DIV / SQUARED_DIFFERENCE ------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@SETTINGS
@given(data=st.data(), shapes=shapes2(), act=st.sampled_from(ACTS), seed=st.integers(0, 2**31 - 1))
def test_div_quantized(dtype, data, shapes, act, seed):
    a, b, out = shapes
    if dtype == np.int16:
        q1, q2, qo = ((float(data.draw(st.floats(1e-4, 1e-2))), 0) for _ in range(3))
    else:
        q1, q2, qo = qparam(data.draw, dtype), qparam(data.draw, dtype), qparam(data.draw, dtype, 0.01, 1.0)
    model = binary_model("DIV", a, b, out, dtype, q1, q2, qo, fused_activation_function=act)
    rng = np.random.default_rng(seed)
    x, y = random_input(a, dtype, rng), random_input(b, dtype, rng)
    y = np.where(y == q2[1], q2[1] + (1 if q2[1] < np.iinfo(dtype).max else -1), y).astype(dtype)
    assert_matches_litert(model, [x, y])


@SETTINGS
@given(data=st.data(), shapes=shapes2(), seed=st.integers(0, 2**31 - 1))
def test_squared_difference_int8(data, shapes, seed):
    a, b, out = shapes
    q1, q2, qo = qparam(data.draw, np.int8), qparam(data.draw, np.int8), qparam(data.draw, np.int8, 0.01, 1.0)
    model = binary_model("SQUARED_DIFFERENCE", a, b, out, np.int8, q1, q2, qo, version=2)
    rng = np.random.default_rng(seed)
    assert_matches_litert(model, [random_input(a, np.int8, rng), random_input(b, np.int8, rng)])


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_max_min_quantized_compares_raw_values(op, dtype):
    """MAXIMUM/MINIMUM ignore (even unequal) quantization parameters."""
    rng = np.random.default_rng(3)
    zlo, zhi = QRANGE[dtype]
    model = binary_model(op, (3, 8), (8,), (3, 8), dtype, (0.1, zlo), (0.3, zhi), (0.2, zlo),
                         version=4 if dtype == np.int16 else 2)
    assert_matches_litert(model, [random_input((3, 8), dtype, rng), random_input((8,), dtype, rng)])


# --- POW -----------------------------------------------------------------------------------
@SETTINGS
@given(shapes=shapes2(), seed=st.integers(0, 2**31 - 1),
       exponent=st.sampled_from([None, 0.0, 1.0, 2.0, 3.0, 7.0, 0.5, 2.000001, 40.0]))
def test_pow_float(shapes, seed, exponent):
    a, b, out = shapes
    rng = np.random.default_rng(seed)
    x = random_input(a, np.float32, rng, 0.1, 3.0)
    if exponent is None:
        y = random_input(b, np.float32, rng, -3.0, 3.0)
    else:  # a single exponent: the broadcast path uses repeated squaring for integer ones
        b = (1,) * len(a) if a and seed % 2 else ()
        y = np.full(b, exponent, np.float32)
        out = tuple(np.broadcast_shapes(a, b))
    if seed % 3 == 0:
        x = -x  # negative bases (NaN for fractional exponents)
    assert_matches_litert(binary_model("POW", a, b, out, np.float32), [x, y])


@SETTINGS
@given(shapes=shapes2(), seed=st.integers(0, 2**31 - 1), scalar=st.booleans())
def test_pow_int32(shapes, seed, scalar):
    a, b, out = shapes
    rng = np.random.default_rng(seed)
    if scalar:
        b = ()
        out = a
    x = rng.integers(-12, 13, size=a).astype(np.int32)
    y = rng.integers(0, 12, size=b).astype(np.int32)  # includes results beyond int32
    assert_matches_litert(binary_model("POW", a, b, out, np.int32), [x, y])


def test_pow_int32_negative_exponent_fails_like_litert():
    model = binary_model("POW", (2,), (2,), (2,), np.int32)
    args = [np.array([2, 3], np.int32), np.array([1, -1], np.int32)]
    with pytest.raises(Exception):
        run_litert(model, args)
    with pytest.raises(AceleraError):
        run_acelera(model, args)


# --- comparisons -----------------------------------------------------------------------------
CMP = ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"]


@pytest.mark.parametrize("op", CMP)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int16, np.bool_])
@SETTINGS
@given(shapes=shapes2(), seed=st.integers(0, 2**31 - 1))
def test_compare_plain(op, dtype, shapes, seed):
    if dtype == np.bool_ and op not in ("EQUAL", "NOT_EQUAL"):
        pytest.skip("ordering comparisons do not take BOOL")
    if dtype == np.int16 and op == "NOT_EQUAL":
        pytest.skip("LiteRT leaves unquantized int16 NOT_EQUAL's output unwritten")
    a, b, out = shapes
    rng = np.random.default_rng(seed)
    if dtype == np.float32:
        x, y = special_floats(random_input(a, dtype, rng), rng), special_floats(random_input(b, dtype, rng), rng)
    elif dtype == np.bool_:
        x, y = random_input(a, dtype, rng), random_input(b, dtype, rng)
    else:
        x, y = rng.integers(-3, 4, size=a).astype(dtype), rng.integers(-3, 4, size=b).astype(dtype)
    assert_matches_litert(binary_model(op, a, b, out, dtype, out_dtype=np.bool_), [x, y])


@pytest.mark.parametrize("op", CMP)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@SETTINGS
@given(data=st.data(), shapes=shapes2(), seed=st.integers(0, 2**31 - 1))
def test_compare_quantized(op, dtype, data, shapes, seed):
    a, b, out = shapes
    if dtype == np.int16:
        q1 = (float(data.draw(st.floats(1e-4, 1e-2))), 0)
        q2 = (q1[0] * data.draw(st.sampled_from([1.0, 2.0, 0.5, 0.37])), 0)
    else:
        q1 = qparam(data.draw, dtype)
        q2 = (q1[0] * data.draw(st.sampled_from([1.0, 2.0, 0.5, 0.37])), qparam(data.draw, dtype)[1])
    model = binary_model(op, a, b, out, dtype, q1, q2, out_dtype=np.bool_,
                         version=3 if dtype == np.int16 and op in ("LESS", "GREATER_EQUAL") else 2)
    rng = np.random.default_rng(seed)
    x = random_input(a, dtype, rng)
    y = random_input(b, dtype, rng)
    if data.draw(st.booleans()):  # many pairs that compare equal after rescaling
        y = x.copy()
        if y.size:
            y.reshape(-1)[::3] = random_input(y.reshape(-1)[::3].shape, dtype, rng)
        model = binary_model(op, a, a, a, dtype, q1, q1, out_dtype=np.bool_, version=2)
    assert_matches_litert(model, [x, y])


# --- logical -------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["LOGICAL_AND", "LOGICAL_OR"])
@SETTINGS
@given(shapes=shapes2(allow_zero=True), seed=st.integers(0, 2**31 - 1))
def test_logical(op, shapes, seed):
    a, b, out = shapes
    rng = np.random.default_rng(seed)
    model = binary_model(op, a, b, out, np.bool_)
    assert_matches_litert(model, [random_input(a, np.bool_, rng), random_input(b, np.bool_, rng)])


def test_logical_not():
    rng = np.random.default_rng(0)
    for shape in [(), (5,), (2, 3, 4)]:
        model = single_op_model("LOGICAL_NOT", [In(shape, np.bool_)], [Out(shape, np.bool_)])
        assert_matches_litert(model, [random_input(shape, np.bool_, rng)])


# --- SELECT --------------------------------------------------------------------------------
SELECT_TYPES = [(np.float32, None), (np.int32, None), (np.int64, None), (np.bool_, None),
                (np.int8, (0.1, 3)), (np.uint8, (0.1, 128)), (np.int16, (0.01, 0))]


@pytest.mark.parametrize("dtype,q", SELECT_TYPES)
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_select_v2_broadcast(dtype, q, data, seed):
    a, b, out1 = data.draw(shapes2())
    c, _, _ = data.draw(shapes2(max_rank=len(out1)))
    c = tuple(1 if d != o else d for d, o in zip(c, out1[len(out1) - len(c):]))
    out = tuple(np.broadcast_shapes(c, a, b))
    model = single_op_model("SELECT_V2", [In(c, np.bool_), In(a, dtype, q), In(b, dtype, q)],
                            [Out(out, dtype, q)])
    rng = np.random.default_rng(seed)
    assert_matches_litert(model, [random_input(c, np.bool_, rng), random_input(a, dtype, rng),
                                  random_input(b, dtype, rng)])


@pytest.mark.parametrize("dtype,q", SELECT_TYPES)
@pytest.mark.parametrize("kind", ["same", "scalar", "rank1", "single"])
def test_select_v1(dtype, q, kind):
    rng = np.random.default_rng(5)
    shape = (1,) if kind == "single" else (4, 3, 2)
    cond = {"same": shape, "scalar": (), "rank1": (4,), "single": ()}[kind]
    for op, version in (("SELECT", 1), ("SELECT", 2), ("SELECT_V2", 1)):
        model = single_op_model(op, [In(cond, np.bool_), In(shape, dtype, q), In(shape, dtype, q)],
                                [Out(shape, dtype, q)], version=version)
        if op == "SELECT_V2" and kind == "rank1":  # not numpy-broadcastable: both refuse
            with pytest.raises(AceleraError):
                Interpreter(model_content=model).allocate_tensors()
            continue
        for _ in range(3):
            assert_matches_litert(model, [random_input(cond, np.bool_, rng), random_input(shape, dtype, rng),
                                          random_input(shape, dtype, rng)])


def test_select_v1_rejects_broadcast():
    model = single_op_model("SELECT", [In((3,), np.bool_), In((4, 3), np.float32), In((4, 3), np.float32)],
                            [Out((4, 3), np.float32)])
    with pytest.raises(AceleraError):
        Interpreter(model_content=model).allocate_tensors()


# --- large tensors (blocked evaluation) ---------------------------------------------------
BIG = (2, 96, 96, 16)


@pytest.mark.parametrize("other", [BIG, (16,), (1,), (96, 1, 16), (2, 1, 1, 1)])
@pytest.mark.parametrize("case", ["add_int16", "sub_int8", "div_int16", "mul_int16", "equal_int16", "div_int32",
                                  "less_uint8"])
def test_large_blocked(case, other):
    rng = np.random.default_rng(13)
    op, dt = {"add_int16": ("ADD", np.int16), "sub_int8": ("SUB", np.int8), "div_int16": ("DIV", np.int16),
              "mul_int16": ("MUL", np.int16), "equal_int16": ("EQUAL", np.int16),
              "div_int32": ("DIV", np.int32), "less_uint8": ("LESS", np.uint8)}[case]
    q = None if dt == np.int32 else ((2e-4, 0) if dt == np.int16 else (0.03, 5))
    q2 = None if q is None else (q[0] * 1.7, q[1])
    qo = None if op in ("EQUAL", "LESS") else q
    out_dtype = np.bool_ if op in ("EQUAL", "LESS") else dt
    out = tuple(np.broadcast_shapes(BIG, other))
    for a, b in ((BIG, other), (other, BIG)):
        model = binary_model(op, a, b, out, dt, q, q2, qo, out_dtype=out_dtype, version=2,
                             pot_scale_int16=False) if op in ("ADD", "SUB") else \
            binary_model(op, a, b, out, dt, q, q2, qo, out_dtype=out_dtype, version=2)
        x, y = random_input(a, dt, rng), random_input(b, dt, rng)
        if op == "DIV":
            y = np.where(y == 0, 1, y).astype(dt)
        if op == "EQUAL":
            y = (x if a == b else y)
        assert_matches_litert(model, [x, y])


# --- constants, unsupported combinations, helpers -------------------------------------------
def test_constant_operands():
    rng = np.random.default_rng(11)
    w = rng.integers(-128, 128, size=(8,)).astype(np.int8)
    model = single_op_model("ADD", [In((2, 8), np.int8, (0.05, 1)), Const(w, (0.02, -4))],
                            [Out((2, 8), np.int8, (0.06, 2))], version=2)
    assert_matches_litert(model, [random_input((2, 8), np.int8, rng)])
    model = single_op_model("MUL", [In((3, 4), np.float32), Const(np.float32(rng.standard_normal(4)))],
                            [Out((3, 4), np.float32)], fused_activation_function="RELU")
    assert_matches_litert(model, [random_input((3, 4), np.float32, rng)])


UNSUPPORTED = [
    ("ADD", np.bool_, None, np.bool_), ("POW", np.int8, (0.1, 0), np.int8),
    ("LOGICAL_AND", np.float32, None, np.float32), ("SUB", np.int16, None, np.int16),
    ("LESS", np.int8, None, np.bool_), ("LESS", np.bool_, None, np.bool_),
    ("SQUARED_DIFFERENCE", np.uint8, (0.1, 0), np.uint8), ("DIV", np.int64, None, np.int64),
    ("ADD", np.int8, None, np.int8), ("ADD", np.float32, None, np.int32),
]


@pytest.mark.parametrize("op,dtype,q,out_dtype", UNSUPPORTED)
def test_unsupported(op, dtype, q, out_dtype):
    expect_unsupported(binary_model(op, (2, 3), (2, 3), (2, 3), dtype, q, q, q, out_dtype=out_dtype))


def test_resized_inputs():
    """Models re-prepared after resize_tensor_input (the oracle resizes to the fed shapes)."""
    rng = np.random.default_rng(2)
    add8 = binary_model("ADD", (1, 4), (1, 4), (1, 4), np.int8, (0.1, 2), (0.07, -3), (0.15, 0), version=2)
    sel = single_op_model("SELECT_V2", [In((1,), np.bool_), In((1, 4), np.float32), In((1, 4), np.float32)],
                          [Out((1, 4), np.float32)], version=1)
    for sa, sb in [((2, 3, 4), (4,)), ((5, 1), (1, 6)), ((3, 4), (3, 4))]:
        assert_matches_litert(add8, [random_input(sa, np.int8, rng), random_input(sb, np.int8, rng)])
        assert_matches_litert(sel, [random_input(sa[-1:], np.bool_, rng), random_input(sa, np.float32, rng),
                                    random_input(sb, np.float32, rng)])


def test_unsupported_select_condition_and_mixed_types():
    expect_unsupported(single_op_model("LOGICAL_NOT", [In((2,), np.int32)], [Out((2,), np.int32)]))
    expect_unsupported(single_op_model("SELECT_V2", [In((2,), np.int32), In((2,), np.float32), In((2,), np.float32)],
                                       [Out((2,), np.float32)]))
    expect_unsupported(single_op_model("ADD", [In((2,), np.float32), In((2,), np.int32)], [Out((2,), np.float32)]))


@settings(max_examples=200, deadline=None)
@given(x=st.integers(-2**31, 2**31 - 1), m=st.integers(2**30, 2**31 - 1), shift=st.integers(-31, 8),
       pre=st.integers(0, 20), e=st.integers(0, 31))
def test_fixed_point_helpers_match_quant(x, m, shift, pre, e):
    xs = np.array([x, -x if x > -2**31 else x, x // 3, 0, -1, 1], np.int64)
    want = quant.multiply_by_quantized_multiplier(xs, m, shift)
    assert np.array_equal(quant.multiply_by_quantized_multiplier_scalar(xs, m, shift), want)
    assert np.array_equal(binary.srdhm(xs, m), quant.saturating_rounding_doubling_high_mul(xs, m))
    small = xs >> pre  # the pre-shifted form used with a folded left shift
    if shift <= 0:
        assert np.array_equal(quant.multiply_by_quantized_multiplier_scalar_inplace(small.copy(), m, shift, pre),
                              quant.multiply_by_quantized_multiplier(small << pre, m, shift))
    ties = np.array([(k << e) + (1 << e >> 1) for k in range(-3, 3)] + list(xs), np.int64)
    want = quant.rounding_divide_by_pot(ties, e)
    assert np.array_equal(binary.rdbpot_inplace(ties.copy(), e), want)
    assert np.array_equal(binary.rdbpot_vec(ties, np.full(ties.shape, e)), want)
