"""The newest op versions LiteRT registers, against LiteRT.

* float16: SOFTMAX v4, SIN / COS v2, GELU v3, MUL v8, ADD v6 (and MUL's COMPLEX64, v6), bit-exact
  with LiteRT's kernels. BUILTIN_REF lacks these versions, so they are compared with LiteRT's
  BUILTIN kernels (reference="builtin"), which run the same reference code for float16.
* SQUEEZE v2: STRING tensors (BUILTIN kernels, for the same reason).
* FLOAT8 (CONCATENATION v7, PAD / PADV2 v6, SPLIT v5, SPLIT_V v3, PACK v5, UNPACK v6): LiteRT
  compiles these kernels only with TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS, which the ai-edge-litert
  wheel lacks, and acelera's loader does not know the two FLOAT8 types yet. The versions are checked
  against LiteRT on the types both run; the FLOAT8 bit moves run with the loader given the types
  (held as uint8 bit patterns) and are compared with LiteRT where it accepts them, else with numpy.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import expect_unsupported, rng_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_exact, assert_matches_litert, random_input, run_acelera, run_litert

from acelera.core import dtypes
from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.errors import AceleraError, UnsupportedOpError
from acelera.core.interpreter import Interpreter

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
H = np.float16
ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH"]
F8 = ["FLOAT8_E4M3FN", "FLOAT8_E5M2"]


def shapes(min_rank=1, max_rank=4, max_side=5):
    return st.lists(st.integers(1, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def half_input(shape, rng, scale=4.0, specials=True) -> np.ndarray:
    x = (rng.standard_normal(shape) * scale).astype(H)
    if specials and x.size >= 4:
        flat = x.reshape(-1)
        flat[rng.choice(x.size, 3, replace=False)] = [np.inf, -np.inf, np.nan]
    return x


def every_half() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(H).reshape(256, 256)


def allocate_error(model: bytes) -> AceleraError:
    it = Interpreter(model_content=model)
    with pytest.raises(AceleraError) as e:
        it.allocate_tensors()
    return e.value


# --- SOFTMAX v4 -----------------------------------------------------------------------------

@SETTINGS
@given(shape=shapes(), beta=st.sampled_from([1.0, 0.5, 2.0, 0.01, 7.5]), seed=st.integers(0, 2**31))
def test_softmax_float16(shape, beta, seed):
    m = single_op_model("SOFTMAX", [In(shape, H)], [Out(shape, H)], version=4, beta=beta)
    assert_exact(m, [half_input(shape, rng_of(seed), specials=False)], reference="builtin")


def test_softmax_float16_long_rows_and_specials():
    rng = rng_of(3)
    x = half_input((3, 700), rng, scale=6.0, specials=False)
    m = single_op_model("SOFTMAX", [In(x.shape, H)], [Out(x.shape, H)], version=4, beta=1.0)
    assert_exact(m, [x], reference="builtin")
    # NaN never becomes the row max; an inf or an all -inf row gives NaN, as in LiteRT
    x = np.array([[np.nan, 1, 2], [-np.inf, -np.inf, -np.inf], [np.inf, 1, 0], [65504, -65504, 0]], H)
    m = single_op_model("SOFTMAX", [In(x.shape, H)], [Out(x.shape, H)], version=4, beta=1.0)
    assert_exact(m, [x], reference="builtin")


# --- SIN / COS v2, GELU v3: every float16 value -------------------------------------------------

@pytest.mark.parametrize("op,version,opts", [("SIN", 2, {}), ("COS", 2, {}), ("GELU", 3, {"approximate": False}),
                                             ("GELU", 3, {"approximate": True})])
def test_unary_float16_every_value(op, version, opts):
    x = every_half()
    m = single_op_model(op, [In(x.shape, H)], [Out(x.shape, H)], version=version, **opts)
    assert_exact(m, [x], reference="builtin")


@pytest.mark.parametrize("op,version", [("SIN", 2), ("COS", 2), ("GELU", 3)])
def test_unary_float16_scalar_and_empty(op, version):
    for shape in [(), (0, 3)]:
        x = np.full(shape, 0.75, H)
        m = single_op_model(op, [In(shape, H)], [Out(shape, H)], version=version)
        got = run_acelera(m, [x])[0]
        assert got.dtype == H and got.shape == shape
        if x.size:
            np.testing.assert_array_equal(got, run_litert(m, [x], "builtin")[0])


# --- MUL v8 / ADD v6 float16, MUL COMPLEX64 -----------------------------------------------------

@SETTINGS
@given(data=st.data(), op=st.sampled_from([("MUL", 8), ("ADD", 6)]), act=st.sampled_from(ACTIVATIONS),
       seed=st.integers(0, 2**31))
def test_binary_float16(data, op, act, seed):
    out = data.draw(shapes(0, 4))
    # each operand: the output shape with some dimensions broadcast (1) or dropped in front
    def operand():
        keep = data.draw(st.integers(0, len(out)))
        return tuple(1 if data.draw(st.booleans()) else d for d in out[len(out) - keep:])
    a, b = operand(), operand()
    out = tuple(np.broadcast_shapes(a, b))
    rng = rng_of(seed)
    m = single_op_model(op[0], [In(a, H), In(b, H)], [Out(out, H)], version=op[1], fused_activation_function=act)
    assert_exact(m, [half_input(a, rng, 300.0), half_input(b, rng, 300.0)], reference="builtin")


def test_binary_float16_overflow_clamps_to_half_max():
    x = np.array([60000, -60000, 300, np.inf], H)
    for op, v, want in (("MUL", 8, [65504, 65504, 65504, 65504]), ("ADD", 6, [65504, -65504, 600, 65504])):
        m = single_op_model(op, [In((4,), H), In((4,), H)], [Out((4,), H)], version=v)
        got = assert_exact(m, [x, x], reference="builtin")[0]
        np.testing.assert_array_equal(got, np.array(want, H))


def test_mul_complex64():
    rng = rng_of(5)

    def c(shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)

    for a, b in [((2, 3), (2, 3)), ((2, 3), (3,)), ((), (4,))]:
        m = single_op_model("MUL", [In(a, np.complex64), In(b, np.complex64)],
                            [Out(np.broadcast_shapes(a, b), np.complex64)], version=6)
        assert_exact(m, [c(a), c(b)])


def test_mul_complex64_infinities_and_overflow():
    # libgcc's __mulsc3 turns a NaN + NaN i product with an infinite operand (or an overflowing
    # partial product) back into an infinity (C99 Annex G)
    vals = [0.0, -0.0, 1.0, -1.0, 2.5, 3e38, -2e38, np.inf, -np.inf, np.nan]
    z = np.array([complex(a, b) for a in vals for b in vals], np.complex64)
    x, y = np.repeat(z, z.size), np.tile(z, z.size)
    m = single_op_model("MUL", [In(x.shape, np.complex64), In(y.shape, np.complex64)], [Out(x.shape, np.complex64)],
                        version=6)
    assert_exact(m, [x, y])


# --- SQUEEZE v2: strings ------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dims,out", [((1, 3, 1), [], (3,)), ((1, 3, 1), [2], (1, 3)),
                                            ((1, 1), [-1], (1,)), ((1,), [], ())])
def test_squeeze_strings(shape, dims, out):
    words = [b"ab", b"", b"xyz\x00q", b"\xff"]
    x = np.array([words[i % len(words)] for i in range(int(np.prod(shape)))], dtype=object).reshape(shape)
    m = single_op_model("SQUEEZE", [In(shape, np.bytes_)], [Out(out, np.bytes_)], version=2, squeeze_dims=dims)
    got = assert_exact(m, [x], reference="builtin")[0]
    assert got.shape == out


# --- the FLOAT8 versions on the types LiteRT's wheel runs --------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.int8, np.int16])
def test_float8_versions_on_other_types(dt):
    q = {np.int8: (0.1, 2), np.int16: (0.1, 0)}.get(dt)
    rng = rng_of(7)
    x, y = random_input((2, 4), dt, rng), random_input((2, 4), dt, rng)
    models = [
        (single_op_model("CONCATENATION", [In((2, 4), dt, q), In((2, 4), dt, q)], [Out((2, 8), dt, q)], version=7,
                         axis=1), [x, y]),
        (single_op_model("PAD", [In((2, 4), dt, q), Const(np.array([[1, 0], [0, 2]], np.int32))],
                         [Out((3, 6), dt, q)], version=6), [x]),
        (single_op_model("PADV2", [In((2, 4), dt, q), Const(np.array([[1, 0], [0, 2]], np.int32)), In((1,), dt, q)],
                         [Out((3, 6), dt, q)], version=6), [x, y.reshape(-1)[:1]]),
        (single_op_model("SPLIT", [Const(np.array([1], np.int32)), In((2, 4), dt, q)], [Out((2, 2), dt, q)] * 2,
                         version=5, num_splits=2), [x]),
        (single_op_model("SPLIT_V", [In((2, 4), dt, q), Const(np.array([1, -1], np.int32)),
                                     Const(np.array([1], np.int32))], [Out((2, 1), dt, q), Out((2, 3), dt, q)],
                         version=3, num_splits=2), [x]),
        (single_op_model("PACK", [In((2, 4), dt, q), In((2, 4), dt, q)], [Out((2, 2, 4), dt, q)], version=5,
                         values_count=2, axis=1), [x, y]),
        (single_op_model("UNPACK", [In((2, 4), dt, q)], [Out((2,), dt, q)] * 4, version=6, num=4, axis=1), [x]),
    ]
    for m, ins in models:
        assert_matches_litert(m, ins)


@pytest.fixture
def float8_loader(monkeypatch):
    """acelera's loader knowing TensorType 21/22 (FLOAT8_E4M3FN/E5M2) as uint8 bit patterns."""
    for code, name in ((21, "FLOAT8_E4M3FN"), (22, "FLOAT8_E5M2")):
        monkeypatch.setitem(dtypes.TYPE_NAMES, code, name)
        monkeypatch.setitem(dtypes.TYPE_CODES, name, code)
        monkeypatch.setitem(dtypes._NUMPY, code, np.dtype(np.uint8))


def litert_or(model: bytes, inputs, expected: list[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's outputs where its build has the FLOAT8 kernels, else the numpy expectation."""
    try:
        return [np.asarray(o).view(np.uint8) for o in run_litert(model, inputs)]
    except RuntimeError as e:  # the wheel refuses FLOAT8 at prepare or invoke
        assert "FLOAT8" in str(e) or "is_supported_type" in str(e), e
        return expected


@pytest.mark.parametrize("f8", F8)
def test_float8_bit_moves(float8_loader, f8):
    rng = rng_of(11)
    x = rng.integers(0, 256, (2, 3, 4), dtype=np.uint8)
    y = rng.integers(0, 256, (2, 3, 4), dtype=np.uint8)
    pads = np.array([[0, 1], [2, 0], [1, 1]], np.int32)
    c = np.array([0x38], np.uint8)  # 1.0 in E4M3FN
    cases = [
        (single_op_model("CONCATENATION", [In(x.shape, f8), In(y.shape, f8)], [Out((2, 3, 8), f8)], version=7,
                         axis=-1), [x, y], [np.concatenate([x, y], -1)]),
        (single_op_model("PAD", [In(x.shape, f8), Const(pads)], [Out((3, 5, 6), f8)], version=6), [x],
         [np.pad(x, pads)]),
        (single_op_model("PADV2", [In(x.shape, f8), Const(pads), In((1,), f8)], [Out((3, 5, 6), f8)], version=6),
         [x, c], [np.pad(x, pads, constant_values=0x38)]),
        (single_op_model("SPLIT", [Const(np.array([2], np.int32)), In(x.shape, f8)], [Out((2, 3, 2), f8)] * 2,
                         version=5, num_splits=2), [x], np.split(x, 2, axis=2)),
        (single_op_model("SPLIT_V", [In(x.shape, f8), Const(np.array([2, 1], np.int32)),
                                     Const(np.array([1], np.int32))], [Out((2, 2, 4), f8), Out((2, 1, 4), f8)],
                         version=3, num_splits=2), [x], [x[:, :2], x[:, 2:]]),
        (single_op_model("PACK", [In(x.shape, f8), In(y.shape, f8)], [Out((2, 2, 3, 4), f8)], version=5,
                         values_count=2), [x, y], [np.stack([x, y])]),
        (single_op_model("UNPACK", [In(x.shape, f8)], [Out((2, 4), f8)] * 3, version=6, num=3, axis=1), [x],
         [x[:, i] for i in range(3)]),
    ]
    for m, ins, expected in cases:
        want = litert_or(m, ins, expected)
        got = run_acelera(m, ins)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == np.uint8
            np.testing.assert_array_equal(g, w)


def test_float8_padv2_constant_type_must_match(float8_loader):
    m = single_op_model("PADV2", [In((2,), "FLOAT8_E4M3FN"), Const(np.array([[1, 1]], np.int32)), In((1,), np.uint8)],
                        [Out((4,), "FLOAT8_E4M3FN")], version=6)
    assert isinstance(allocate_error(m), UnsupportedOpError)


# --- refused at allocate_tensors ----------------------------------------------------------------

@pytest.mark.parametrize("op,version,ins,outs,opts", [
    ("SOFTMAX", 5, [In((2, 3), H)], [Out((2, 3), H)], {}),
    ("SIN", 3, [In((3,), H)], [Out((3,), H)], {}),
    ("COS", 3, [In((3,), H)], [Out((3,), H)], {}),
    ("GELU", 4, [In((3,), H)], [Out((3,), H)], {}),
    ("MUL", 9, [In((3,), H), In((3,), H)], [Out((3,), H)], {}),
    ("ADD", 7, [In((3,), H), In((3,), H)], [Out((3,), H)], {}),
    ("SQUEEZE", 3, [In((1, 3))], [Out((3,))], {}),
    ("CONCATENATION", 8, [In((3,)), In((3,))], [Out((6,))], {"axis": 0}),
    ("PAD", 7, [In((2,)), Const(np.array([[1, 1]], np.int32))], [Out((4,))], {}),
    ("PADV2", 7, [In((2,)), Const(np.array([[1, 1]], np.int32))], [Out((4,))], {}),
    ("SPLIT", 6, [Const(np.array([0], np.int32)), In((2,))], [Out((1,))] * 2, {"num_splits": 2}),
    ("SPLIT_V", 4, [In((2,)), Const(np.array([1, 1], np.int32)), Const(np.array([0], np.int32))], [Out((1,))] * 2,
     {"num_splits": 2}),
    ("PACK", 6, [In((2,))] * 2, [Out((2, 2))], {"values_count": 2}),
    ("UNPACK", 7, [In((2, 2))], [Out((2,))] * 2, {"num": 2}),
])
def test_versions_past_litert_are_refused(op, version, ins, outs, opts):
    expect_unsupported(single_op_model(op, ins, outs, version=version, **opts), match=f"version {version}")


def test_softmax_float16_needs_a_float16_output():
    # LiteRT's SoftmaxHalf would write half values into the float32 buffer; acelera refuses
    m = single_op_model("SOFTMAX", [In((2, 3), H)], [Out((2, 3))], version=4, beta=1.0)
    err = allocate_error(m)
    assert isinstance(err, UnsupportedOpError) and "node 0" in str(err)


@pytest.mark.parametrize("op,version,ins,outs,opts", [
    # float16 input with a float32 output
    ("SIN", 2, [In((3,), H)], [Out((3,))], {}),
    ("GELU", 3, [In((3,), H)], [Out((3,))], {}),
    # SUB has no float16 kernel in LiteRT (v5 is its newest); mixed input types
    ("SUB", 5, [In((3,), H), In((3,), H)], [Out((3,), H)], {}),
    ("MUL", 8, [In((3,), H), In((3,))], [Out((3,), H)], {}),
    # LiteRT refuses a fused activation on COMPLEX64 MUL; COS has no complex kernel
    ("MUL", 6, [In((3,), np.complex64), In((3,), np.complex64)], [Out((3,), np.complex64)],
     {"fused_activation_function": "RELU"}),
    ("COS", 2, [In((3,), np.int8, (0.1, 0))], [Out((3,), np.int8, (0.1, 0))], {}),
])
def test_bad_types_are_refused_like_litert(op, version, ins, outs, opts):
    m = single_op_model(op, ins, outs, version=version, **opts)
    err = allocate_error(m)
    assert isinstance(err, UnsupportedOpError) and "node 0" in str(err)
    x = [np.zeros(i.shape, i.dtype) for i in ins if isinstance(i, In)]
    with pytest.raises(RuntimeError):
        run_litert(m, x, "builtin")
