"""Dtypes added to existing kernels, against LiteRT's reference kernels.

* FLOAT16/BFLOAT16 TANH, LOGISTIC, FLOOR, ROUND, NEG over every 16-bit pattern, MAXIMUM, MINIMUM
  and the comparisons over special and random values; SIGN FLOAT64.
* STRING RESHAPE, SQUEEZE, EXPAND_DIMS, SLICE, STRIDED_SLICE, TILE, EQUAL, NOT_EQUAL.
* BFLOAT16, FLOAT8_E4M3FN/E5M2, COMPLEX64 and INT4 through the ops that only move data.
* CAST and DEQUANTIZE of FLOAT8; the reduction dtypes; RESOURCE and VARIANT reshapes.

LiteRT's Python API carries bfloat16 as ml_dtypes.bfloat16 and FLOAT8 as int8 bytes: `litert`
hands it acelera's bit patterns (uint16, uint8) as such and outputs are compared bit for bit.
INT4 cannot cross it (acelera holds int4 unpacked, LiteRT packed), so INT4 goes in as a packed
constant and comes out through DEQUANTIZE. The ai-edge-litert wheel is built without
TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS, so the FLOAT8 paths of GATHER, GATHER_ND,
CONCATENATION, PAD, PADV2, UNPACK, REVERSE_V2, CAST and DEQUANTIZE are checked against numpy
(and ml_dtypes for the FLOAT8 arithmetic) instead, as is anything LiteRT's interpreter crashes
on (a reshaped RESOURCE handle) or cannot hold (VARIANT). Where BUILTIN_REF lacks a version
(TRANSPOSE 9, STRIDED_SLICE 5-8, TILE 3, ROUND) the test relabels the version for BUILTIN_REF
and also runs LiteRT's builtin kernels at the real one.
"""
from __future__ import annotations

import helpers
import ml_dtypes
import numpy as np
import pytest
from helpers import allocate_error, invoke_error, rng_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import run_acelera, run_litert

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.dtypes import TYPE_CODES, numpy_dtype
from acelera.core.errors import AceleraError, UnsupportedOpError
from acelera.core.interpreter import Interpreter
from acelera.core.kernels.registry import registered
from acelera.core.model import load_model

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F8 = ("FLOAT8_E4M3FN", "FLOAT8_E5M2")
ML_F8 = {"FLOAT8_E4M3FN": ml_dtypes.float8_e4m3fn, "FLOAT8_E5M2": ml_dtypes.float8_e5m2}
HALF = ("FLOAT16", "BFLOAT16")
MOVED = ("BFLOAT16", *F8, "COMPLEX64")  # types the data-movement ops gained


# --- harness -------------------------------------------------------------------------------

def np_type(type_name: str) -> np.dtype:
    """The numpy dtype acelera holds a TFLite type in."""
    return numpy_dtype(TYPE_CODES[type_name])


def to_litert(x: np.ndarray, dtype) -> np.ndarray:
    """acelera's representation of an input as LiteRT's Python API takes it."""
    dt = np.dtype(dtype)
    if x.dtype == object:
        return np.array([bytes(v) for v in x.reshape(-1)], dtype=object).reshape(x.shape)
    if x.dtype != dt and x.dtype.itemsize == dt.itemsize and x.dtype.kind in "ui" and dt.kind not in "c":
        return x.view(dt)  # bfloat16 bits, FLOAT8 bytes
    return np.asarray(x, dt)


def litert(model: bytes, inputs, reference: bool | str = True) -> list[np.ndarray]:
    return run_litert(model, inputs, reference, convert=lambda x, dtype: to_litert(np.asarray(x), dtype))


def litert_fails(model: bytes, inputs, reference: bool | str = True) -> bool:
    return helpers.litert_fails(model, inputs, reference, run=litert)


def output_types(model: bytes) -> list[np.dtype]:
    sg = load_model(model).subgraphs[0]
    return [sg.tensors[i].dtype for i in sg.outputs]


def assert_same_bits(got: np.ndarray, want: np.ndarray, k: int = 0) -> None:
    assert got.shape == want.shape, f"output {k}: shape {got.shape} != LiteRT {want.shape}"
    if got.dtype == object:
        assert [bytes(v) for v in got.reshape(-1)] == [bytes(v) for v in want.reshape(-1)], f"output {k}"
        return
    assert got.dtype.itemsize == want.dtype.itemsize, f"output {k}: {got.dtype} vs LiteRT {want.dtype}"
    g, w = np.ascontiguousarray(got), np.ascontiguousarray(want)
    if g.tobytes() != w.tobytes():
        u = np.dtype(f"u{g.dtype.itemsize}") if g.dtype.itemsize <= 8 else np.uint8
        bad = np.nonzero(g.view(u).reshape(-1) != w.view(u).reshape(-1))[0]
        pytest.fail(f"output {k}: {bad.size} of {g.size} elements differ, first at {bad[:4].tolist()}: "
                    f"{g.reshape(-1)[bad[:4]]} vs LiteRT {w.reshape(-1)[bad[:4]]}")


def exact(model: bytes, inputs, reference: bool | str = True) -> list[np.ndarray]:
    """acelera's outputs have the declared dtypes and LiteRT's bits."""
    want = litert(model, inputs, reference)
    got = run_acelera(model, inputs)
    assert len(got) == len(want)
    for k, (g, w, dt) in enumerate(zip(got, want, output_types(model))):
        assert g.dtype == dt, f"output {k}: dtype {g.dtype}, the model declares {dt}"
        assert_same_bits(g, w, k)
    return got


def acelera_only(model: bytes, inputs, expected) -> None:
    """acelera's outputs against numpy's (LiteRT cannot run the model)."""
    got = run_acelera(model, inputs)
    for k, (g, w, dt) in enumerate(zip(got, expected, output_types(model))):
        assert g.dtype == dt, f"output {k}: dtype {g.dtype}, the model declares {dt}"
        assert_same_bits(g, np.asarray(w, dt), k)








def rand(shape, type_name: str, rng: np.random.Generator) -> np.ndarray:
    """Random values in acelera's representation: any bit pattern for BFLOAT16/FLOAT8 (the ops
    under test move bits), complex normals, short byte strings, int4 in [-8, 7]."""
    shape = tuple(shape)
    if type_name == "STRING":
        letters = b"abcxyz\xc3\xa9 "
        out = np.empty(shape, dtype=object)
        for i in np.ndindex(shape):
            n = int(rng.integers(0, 5))
            out[i] = bytes(letters[j] for j in rng.integers(0, len(letters), n))
        return out
    if type_name == "INT4":
        return rng.integers(-8, 8, shape).astype(np.int8)
    dt = np_type(type_name)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 4).astype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dt)
    return rng.integers(int(info.min), int(info.max) + 1, shape, dtype=np.int64).astype(dt)


def shapes(min_rank=1, max_rank=4, min_side=1, max_side=4):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


# --- registrations ---------------------------------------------------------------------------

GAINED = {
    "TANH": HALF, "LOGISTIC": HALF, "MAXIMUM": HALF, "MINIMUM": HALF, "GREATER": HALF, "LESS": HALF,
    "GREATER_EQUAL": ("FLOAT16",), "LESS_EQUAL": ("FLOAT16",), "FLOOR": HALF, "ROUND": HALF, "NEG": HALF,
    "EQUAL": ("FLOAT16", "STRING"), "NOT_EQUAL": ("FLOAT16", "STRING"), "SIGN": ("FLOAT64",),
    "RESHAPE": ("STRING", "RESOURCE", "VARIANT", "INT4", *MOVED), "SQUEEZE": ("RESOURCE", "VARIANT", "INT4", *MOVED),
    "EXPAND_DIMS": ("STRING", "RESOURCE", "VARIANT", "INT4", *MOVED), "TRANSPOSE": ("INT4", *MOVED),
    "SLICE": ("STRING", "INT4", *MOVED), "STRIDED_SLICE": ("STRING", *MOVED), "TILE": ("STRING",),
    "GATHER": F8, "GATHER_ND": F8, "CONCATENATION": ("BFLOAT16", "INT4"), "PAD": ("BFLOAT16",),
    "PADV2": ("BFLOAT16",), "MIRROR_PAD": MOVED, "UNPACK": ("BFLOAT16",), "FILL": F8, "REVERSE_V2": F8,
    "BROADCAST_TO": F8, "BITCAST": F8, "DYNAMIC_UPDATE_SLICE": F8, "DILATE": F8, "SHAPE": ("VARIANT", *F8),
    "RANK": ("VARIANT", *F8), "CAST": F8, "DEQUANTIZE": F8,
    "MEAN": ("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16"),
    "SUM": ("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16", "BOOL"),
    "REDUCE_PROD": ("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16", "BOOL"),
    "REDUCE_MAX": ("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16", "BOOL"),
    "REDUCE_MIN": ("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16", "BOOL"),
}


def test_declared_dtypes():
    reg = registered()
    for op, types in GAINED.items():
        assert set(types) <= set(reg[op].dtypes), (op, set(types) - set(reg[op].dtypes))


def test_litert_table_resource_ops():
    from acelera.core import litert_ops as L

    for op in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
        assert L.OPS[op].dtypes == ("RESOURCE",)
    rows = {r.op: r for r in L.coverage()}
    for op in [*GAINED, "READ_VARIABLE", "ASSIGN_VARIABLE"]:
        # what may remain are the types acelera's loader lacks (INT2, UINT4)
        assert not any(gap.startswith(("dtypes", "v")) for gap in rows[op].missing.split("; ") if gap), rows[op]


# --- FLOAT16 / BFLOAT16 elementwise ------------------------------------------------------------

ALL16 = np.arange(1 << 16, dtype=np.uint16)


def half_bits(type_name: str, bits: np.ndarray) -> np.ndarray:
    return bits.view(np.float16) if type_name == "FLOAT16" else bits


@pytest.mark.parametrize("type_name", HALF)
@pytest.mark.parametrize("op,version", [("TANH", 3), ("LOGISTIC", 3), ("FLOOR", 1), ("ROUND", 1), ("NEG", 1)])
def test_unary_every_half_value(op, version, type_name):
    """Every float16/bfloat16 bit pattern (NaNs, infinities, subnormals, signed zeros)."""
    m = single_op_model(op, [In((1 << 16,), type_name)], [Out((1 << 16,), type_name)], version=version)
    exact(m, [half_bits(type_name, ALL16)], reference="builtin" if op == "ROUND" else True)


def special16(type_name: str) -> np.ndarray:
    if type_name == "FLOAT16":
        return np.array([0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x3C00, 0xBC00, 1, 0x8001, 0x7BFF,
                         0x3C01], np.uint16)
    return np.array([0, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x3F80, 0xBF80, 1, 0x8001, 0x7F7F,
                     0x3F81], np.uint16)


BINARY16 = [("MAXIMUM", 4, HALF), ("MINIMUM", 4, HALF), ("GREATER", 2, HALF), ("LESS", 3, HALF),
            ("GREATER_EQUAL", 3, ("FLOAT16",)), ("LESS_EQUAL", 2, ("FLOAT16",)), ("EQUAL", 5, ("FLOAT16",)),
            ("NOT_EQUAL", 4, ("FLOAT16",))]


@pytest.mark.parametrize("op,version,types", BINARY16)
def test_binary_half_pairs(op, version, types):
    """Every pair of special values (NaN on either side, +-0, +-inf) and random bit patterns."""
    rng = rng_of(7)
    for type_name in types:
        sp = special16(type_name)
        a = np.concatenate([np.repeat(sp, sp.size), rng.integers(0, 1 << 16, 3000).astype(np.uint16)])
        b = np.concatenate([np.tile(sp, sp.size), rng.integers(0, 1 << 16, 3000).astype(np.uint16)])
        out = type_name if op in ("MAXIMUM", "MINIMUM") else np.bool_
        m = single_op_model(op, [In(a.shape, type_name), In(b.shape, type_name)], [Out(a.shape, out)],
                            version=version)
        exact(m, [half_bits(type_name, a), half_bits(type_name, b)])


@SETTINGS
@given(data=st.data(), case=st.sampled_from([(op, v, t) for op, v, ts in BINARY16 for t in ts]),
       seed=st.integers(0, 2**31))
def test_binary_half_broadcast(data, case, seed):
    op, version, type_name = case
    sa = data.draw(shapes(0, 4, 1, 3))
    sb = tuple(d if data.draw(st.booleans()) else 1 for d in sa[len(sa) - data.draw(st.integers(0, len(sa))):])
    out_shape = np.broadcast_shapes(sa, sb)
    if data.draw(st.booleans()):
        sa, sb = sb, sa
    rng = rng_of(seed)
    a = rng.integers(0, 1 << 16, sa).astype(np.uint16)
    b = np.where(rng.random(sb) < 0.3, 0, rng.integers(0, 1 << 16, sb)).astype(np.uint16)
    out = type_name if op in ("MAXIMUM", "MINIMUM") else np.bool_
    m = single_op_model(op, [In(sa, type_name), In(sb, type_name)], [Out(out_shape, out)], version=version)
    exact(m, [half_bits(type_name, a), half_bits(type_name, b)])


@pytest.mark.parametrize("op", ["GREATER_EQUAL", "LESS_EQUAL", "EQUAL", "NOT_EQUAL"])
def test_bfloat16_comparisons_litert_lacks_are_refused(op):
    m = single_op_model(op, [In((3,), "BFLOAT16"), In((3,), "BFLOAT16")], [Out((3,), np.bool_)])
    x = np.ones(3, np.uint16)
    assert litert_fails(m, [x, x])
    allocate_error(m, UnsupportedOpError)


@pytest.mark.parametrize("case", ["mixed", "out_type", "bool_out"])
def test_half_bad_models(case):
    if case == "mixed":  # bfloat16 and uint16 share acelera's numpy dtype; the types still differ
        m = single_op_model("MAXIMUM", [In((2,), "BFLOAT16"), In((2,), np.uint16)], [Out((2,), "BFLOAT16")])
    elif case == "out_type":
        m = single_op_model("MINIMUM", [In((2,), np.float16), In((2,), np.float16)], [Out((2,), "BFLOAT16")])
    else:
        m = single_op_model("LESS", [In((2,), "BFLOAT16"), In((2,), "BFLOAT16")], [Out((2,), "BFLOAT16")])
    allocate_error(m, UnsupportedOpError)
    for op in ("TANH", "FLOOR", "NEG"):
        allocate_error(single_op_model(op, [In((2,), np.float16)], [Out((2,), "BFLOAT16")]), UnsupportedOpError)


@pytest.mark.parametrize("op,type_name", [("MAXIMUM", "FLOAT8_E4M3FN"), ("LESS", "FLOAT8_E5M2"), ("ADD", "BFLOAT16"),
                                          ("SQUARED_DIFFERENCE", "FLOAT8_E4M3FN"), ("RELU", "BFLOAT16"),
                                          ("RELU", "FLOAT8_E4M3FN"), ("ABS", "FLOAT8_E5M2"), ("NEG", "FLOAT8_E5M2"),
                                          ("SUM", "FLOAT8_E4M3FN"), ("REDUCE_MAX", "BFLOAT16"), ("ADD", "INT4"),
                                          ("EQUAL", "INT4"), ("MEAN", "INT4")])
def test_types_held_in_another_dtype_are_refused(op, type_name):
    """BFLOAT16 (uint16), FLOAT8 (uint8) and INT4 (int8) must not pass for the type whose numpy
    dtype acelera holds them in where LiteRT's kernel refuses them."""
    q = (0.5, 0) if type_name == "INT4" else None
    x = In((2, 2), type_name, q)
    if op in ("SUM", "MEAN", "REDUCE_MAX"):
        m = single_op_model(op, [x, Const(np.array([0], np.int32))], [Out((2,), type_name, q)])
    elif op in ("RELU", "ABS", "NEG"):
        m = single_op_model(op, [x], [Out((2, 2), type_name, q)])
    else:
        out = np.bool_ if op in ("LESS", "EQUAL") else type_name
        m = single_op_model(op, [x, x], [Out((2, 2), out, None if out is np.bool_ else q)])
    if type_name != "INT4":  # (LiteRT's Python API cannot hold int4 inputs)
        v = rand((2, 2), type_name, rng_of(0))
        assert litert_fails(m, [v] * len(load_model(m).subgraphs[0].inputs))
    allocate_error(m, UnsupportedOpError)


@pytest.mark.parametrize("version", [1, 2])
def test_sign_float64(version):
    x = np.array([1.5, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -1e300], np.float64)
    m = single_op_model("SIGN", [In(x.shape, np.float64)], [Out(x.shape, np.float64)], version=version)
    exact(m, [x])
    x = rng_of(3).standard_normal((3, 4))
    m = single_op_model("SIGN", [In(x.shape, np.float64)], [Out(x.shape, np.float64)], version=version)
    exact(m, [x])
    allocate_error(single_op_model("SIGN", [In((2,), np.float64)], [Out((2,), np.float32)]), UnsupportedOpError)


# --- STRING ----------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), op=st.sampled_from([("EQUAL", 5), ("NOT_EQUAL", 4), ("EQUAL", 1)]), seed=st.integers(0, 2**31))
def test_string_comparisons(data, op, seed):
    name, version = op
    # (no 0-d string inputs: both Python APIs store a 0-d numpy bytes array's raw buffer)
    sa = data.draw(shapes(1, 4, 1, 3))
    sb = tuple(d if data.draw(st.booleans()) else 1 for d in sa[len(sa) - data.draw(st.integers(1, len(sa))):])
    if data.draw(st.booleans()):
        sa, sb = sb, sa
    rng = rng_of(seed)
    a, b = rand(sa, "STRING", rng), rand(sb, "STRING", rng)
    m = single_op_model(name, [In(sa, np.bytes_), In(sb, np.bytes_)], [Out(np.broadcast_shapes(sa, sb), np.bool_)],
                        version=version)
    got = exact(m, [a, b])[0]
    want = np.vectorize(lambda u, v: (u == v) == (name == "EQUAL"), otypes=[bool])(a, b)
    np.testing.assert_array_equal(got, want)


def test_string_comparison_bad_models():
    allocate_error(single_op_model("EQUAL", [In((2,), np.bytes_), In((2,), np.int32)], [Out((2,), np.bool_)]),
                   UnsupportedOpError)
    m = single_op_model("LESS", [In((2,), np.bytes_), In((2,), np.bytes_)], [Out((2,), np.bool_)])
    assert litert_fails(m, [rand((2,), "STRING", rng_of(0))] * 2)
    allocate_error(m, UnsupportedOpError)


@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_string_reshape_squeeze_expand_dims(data, seed):
    shape = data.draw(shapes(1, 4, 1, 3))
    x = rand(shape, "STRING", rng_of(seed))
    n = x.size
    new = [n] if data.draw(st.booleans()) else [-1, 1]
    out = (n,) if new == [n] else (n, 1)
    dynamic = data.draw(st.booleans())
    if dynamic:
        m = single_op_model("RESHAPE", [In(shape, np.bytes_), In((len(new),), np.int32)], [Out(out, np.bytes_)])
        exact(m, [x, np.array(new, np.int32)])
    else:
        m = single_op_model("RESHAPE", [In(shape, np.bytes_), Const(np.array(new, np.int32))], [Out(out, np.bytes_)])
        exact(m, [x])
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    a = axis + len(shape) + 1 if axis < 0 else axis
    m = single_op_model("EXPAND_DIMS", [In(shape, np.bytes_), Const(np.array(axis, np.int32))],
                        [Out(shape[:a] + (1,) + shape[a:], np.bytes_)])
    exact(m, [x])
    sq = tuple(d for d in shape if d != 1)
    for version, ref in ((1, True), (2, "builtin")):  # BUILTIN_REF registers SQUEEZE v1 only
        m = single_op_model("SQUEEZE", [In(shape, np.bytes_)], [Out(sq, np.bytes_)], version=version)
        exact(m, [x], ref)


@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_string_slice_and_strided_slice(data, seed):
    shape = data.draw(shapes(1, 4, 1, 4))
    x = rand(shape, "STRING", rng_of(seed))
    begin = [data.draw(st.integers(0, d - 1)) for d in shape]
    size = [data.draw(st.sampled_from([-1, d - b])) if d - b else -1 for d, b in zip(shape, begin)]
    size = [s if s == -1 else data.draw(st.integers(0, s)) for s in size]
    out = tuple(d - b if s == -1 else s for d, b, s in zip(shape, begin, size))
    idx_dt = data.draw(st.sampled_from([np.int32, np.int64]))
    m = single_op_model("SLICE", [In(shape, np.bytes_), Const(np.array(begin, idx_dt)), Const(np.array(size, idx_dt))],
                        [Out(out, np.bytes_)], version=8)
    exact(m, [x])
    m = single_op_model("SLICE", [In(shape, np.bytes_), In((len(shape),), idx_dt), In((len(shape),), idx_dt)],
                        [Out(out, np.bytes_)], version=8)
    exact(m, [x, np.array(begin, idx_dt), np.array(size, idx_dt)])

    b = [data.draw(st.integers(-d, d)) for d in shape]
    e = [data.draw(st.integers(-d - 1, d + 1)) for d in shape]
    s = [data.draw(st.sampled_from([1, 2, -1, -2])) for _ in shape]
    masks = {k: data.draw(st.integers(0, (1 << len(shape)) - 1)) for k in ("begin_mask", "end_mask")}
    bm, em = masks["begin_mask"], masks["end_mask"]
    want = x[tuple(slice(None if (bm >> i) & 1 else b[i], None if (em >> i) & 1 else e[i], s[i])
                   for i in range(len(shape)))]
    for version, ref in ((4, True), (8, "builtin")):
        m = single_op_model("STRIDED_SLICE", [In(shape, np.bytes_), Const(np.array(b, np.int32)),
                                              Const(np.array(e, np.int32)), Const(np.array(s, np.int32))],
                            [Out(want.shape, np.bytes_)], version=version, **masks)
        got = exact(m, [x], reference=ref)[0]
        assert [bytes(v) for v in got.reshape(-1)] == [bytes(v) for v in want.reshape(-1)]


@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_string_tile(data, seed):
    shape = data.draw(shapes(1, 3, 1, 3))
    reps = [data.draw(st.integers(0 if data.draw(st.booleans()) else 1, 3)) for _ in shape]
    x = rand(shape, "STRING", rng_of(seed))
    out = tuple(d * r for d, r in zip(shape, reps))
    m_dt = data.draw(st.sampled_from([np.int32, np.int64]))
    for version, ref in ((2, True), (3, "builtin")):
        if data.draw(st.booleans()):
            m = single_op_model("TILE", [In(shape, np.bytes_), Const(np.array(reps, m_dt))], [Out(out, np.bytes_)],
                                version=version)
            got = exact(m, [x], ref)[0]
        else:
            m = single_op_model("TILE", [In(shape, np.bytes_), In((len(shape),), m_dt)], [Out(out, np.bytes_)],
                                version=version)
            got = exact(m, [x, np.array(reps, m_dt)], ref)[0]
        assert [bytes(v) for v in got.reshape(-1)] == [bytes(v) for v in np.tile(x, reps).reshape(-1)]


def test_string_bad_indices_fail_at_invoke():
    x = rand((2, 3), "STRING", rng_of(1))
    m = single_op_model("SLICE", [In((2, 3), np.bytes_), In((2,), np.int32), In((2,), np.int32)],
                        [Out((1, 2), np.bytes_)])
    bad = [x, np.array([1, 2], np.int32), np.array([1, 2], np.int32)]
    assert litert_fails(m, bad)
    with pytest.raises(AceleraError):
        run_acelera(m, bad)
    m = single_op_model("TILE", [In((2, 3), np.bytes_), In((2,), np.int32)], [Out((2, 3), np.bytes_)])
    invoke_error(m, [x, np.array([1, -1], np.int32)])


# --- data movement: BFLOAT16, FLOAT8, COMPLEX64 --------------------------------------------

def _move_case(op: str, type_name: str, data, rng):
    """(model, inputs, numpy expectation, LiteRT resolver or None) for one data-movement op."""
    t = type_name
    shape = data.draw(shapes(1, 4, 1, 4))
    x = rand(shape, t, rng)
    r = len(shape)
    if op == "TRANSPOSE":
        perm = list(data.draw(st.permutations(range(r))))
        version = data.draw(st.sampled_from([8, 9]))  # BUILTIN_REF registers TRANSPOSE up to v8
        m = single_op_model(op, [In(shape, t), Const(np.array(perm, np.int32))], [Out(x.transpose(perm).shape, t)],
                            version=version)
        return m, [x], x.transpose(perm), True if version == 8 else "builtin"
    if op == "RESHAPE":
        m = single_op_model(op, [In(shape, t), Const(np.array([-1], np.int32))], [Out((x.size,), t)])
        return m, [x], x.reshape(-1), True
    if op == "SQUEEZE":
        x = x.reshape((1,) + shape)
        m = single_op_model(op, [In(x.shape, t)], [Out(shape, t)], squeeze_dims=[0], version=2)
        return m, [x], x[0], "builtin"
    if op == "EXPAND_DIMS":
        m = single_op_model(op, [In(shape, t), Const(np.array(-1, np.int32))], [Out(shape + (1,), t)])
        return m, [x], x[..., None], True
    if op == "SLICE":
        begin = [data.draw(st.integers(0, d - 1)) for d in shape]
        size = [-1 if data.draw(st.booleans()) else data.draw(st.integers(0, d - b)) for d, b in zip(shape, begin)]
        want = x[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))]
        m = single_op_model(op, [In(shape, t), Const(np.array(begin, np.int32)), Const(np.array(size, np.int32))],
                            [Out(want.shape, t)], version=8)
        return m, [x], want, True
    if op == "STRIDED_SLICE":
        s = [data.draw(st.sampled_from([1, 2, -1])) for _ in shape]
        want = x[tuple(slice(None, None, v) for v in s)]
        m = single_op_model(op, [In(shape, t), Const(np.zeros(r, np.int32)), Const(np.zeros(r, np.int32)),
                                 Const(np.array(s, np.int32))], [Out(want.shape, t)], version=8,
                            begin_mask=(1 << r) - 1, end_mask=(1 << r) - 1)
        return m, [x], want, "builtin"
    if op == "MIRROR_PAD":
        mode = data.draw(st.sampled_from([0, 1]))  # REFLECT (no edge repeat: pads up to d - 1), SYMMETRIC
        pads = [[data.draw(st.integers(0, d - 1 + mode)), data.draw(st.integers(0, d - 1 + mode))] for d in shape]
        want = np.pad(x, pads, mode="reflect" if mode == 0 else "symmetric")
        m = single_op_model(op, [In(shape, t), Const(np.array(pads, np.int32))], [Out(want.shape, t)], version=3,
                            mode=mode)
        return m, [x], want, True
    if op in ("PAD", "PADV2"):
        pads = [[data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))] for _ in shape]
        if op == "PAD":
            want = np.pad(x, pads)
            m = single_op_model(op, [In(shape, t), Const(np.array(pads, np.int32))], [Out(want.shape, t)], version=6)
            return m, [x], want, True
        c = rand((), t, rng)
        want = np.pad(x, pads, constant_values=c)
        m = single_op_model(op, [In(shape, t), Const(np.array(pads, np.int32)), In((), t)], [Out(want.shape, t)],
                            version=6)
        return m, [x, c], want, True
    if op == "CONCATENATION":
        axis = data.draw(st.integers(-r, r - 1))
        y = rand(shape[:axis % r] + (data.draw(st.integers(1, 3)),) + shape[axis % r + 1:], t, rng)
        want = np.concatenate([x, y], axis)
        m = single_op_model(op, [In(shape, t), In(y.shape, t)], [Out(want.shape, t)], version=7, axis=axis)
        return m, [x, y], want, True
    if op == "UNPACK":
        axis = data.draw(st.integers(0, r - 1))
        outs = [Out(shape[:axis] + shape[axis + 1:], t) for _ in range(shape[axis])]
        m = single_op_model(op, [In(shape, t)], outs, version=6, num=shape[axis], axis=axis)
        return m, [x], [np.take(x, i, axis) for i in range(shape[axis])], True
    if op == "GATHER":
        idx = rng.integers(0, shape[0], data.draw(st.integers(1, 4))).astype(np.int32)
        m = single_op_model(op, [In(shape, t), In(idx.shape, np.int32)], [Out((idx.size,) + shape[1:], t)],
                            version=8)
        return m, [x, idx], x[idx], True
    if op == "GATHER_ND":
        idx = np.stack([rng.integers(0, d, 3) for d in shape[:1]], -1).astype(np.int32)
        m = single_op_model(op, [In(shape, t), Const(idx)], [Out((3,) + shape[1:], t)], version=6)
        return m, [x], x[idx[:, 0]], True
    if op == "REVERSE_V2":
        axis = data.draw(st.integers(0, r - 1))
        m = single_op_model(op, [In(shape, t), Const(np.array([axis], np.int32))], [Out(shape, t)], version=4)
        return m, [x], np.flip(x, axis), True
    if op == "FILL":
        v = rand((), t, rng)
        m = single_op_model(op, [Const(np.array(shape, np.int32)), In((), t)], [Out(shape, t)], version=5)
        return m, [v], np.full(shape, v), True
    if op == "BROADCAST_TO":
        target = (data.draw(st.integers(1, 3)),) + shape
        m = single_op_model(op, [In(shape, t), Const(np.array(target, np.int32))], [Out(target, t)], version=4)
        return m, [x], np.broadcast_to(x, target), True
    if op == "BITCAST":
        other = data.draw(st.sampled_from([t, "UINT8", "INT8"] if x.dtype.itemsize == 1 else [t, "UINT16", "INT16"]
                                          if x.dtype.itemsize == 2 else [t, "INT64", "UINT64"]))
        m = single_op_model(op, [In(shape, t)], [Out(shape, other)])
        return m, [x], x.view(np_type(other)), True
    if op == "DYNAMIC_UPDATE_SLICE":
        u = rand(tuple(data.draw(st.integers(1, d)) for d in shape), t, rng)
        start = np.array([data.draw(st.integers(-1, d)) for d in shape], np.int32)
        want = x.copy()
        lo = [min(max(int(s), 0), d - n) for s, d, n in zip(start, shape, u.shape)]
        want[tuple(slice(a, a + n) for a, n in zip(lo, u.shape))] = u
        m = single_op_model(op, [In(shape, t), In(u.shape, t), In((r,), np.int32)], [Out(shape, t)], version=6)
        return m, [x, u, start], want, True
    if op == "DILATE":
        f = [data.draw(st.integers(1, 3)) for _ in shape]
        pad = rand((), t, rng)
        want = np.full([(d - 1) * k + 1 for d, k in zip(shape, f)], pad, x.dtype)
        want[tuple(slice(None, None, k) for k in f)] = x
        m = single_op_model(op, [In(shape, t), Const(np.array(f, np.int32)), In((), t)], [Out(want.shape, t)])
        return m, [x, pad], want, True
    raise AssertionError(op)


# (op, types LiteRT's wheel runs it for); the others are checked against numpy
MOVE_OPS = [
    ("TRANSPOSE", MOVED), ("RESHAPE", MOVED), ("SQUEEZE", MOVED), ("EXPAND_DIMS", MOVED), ("SLICE", MOVED),
    ("STRIDED_SLICE", MOVED), ("MIRROR_PAD", MOVED), ("PAD", ("BFLOAT16",)), ("PADV2", ("BFLOAT16",)),
    ("CONCATENATION", ("BFLOAT16",)), ("UNPACK", ("BFLOAT16",)), ("GATHER", ()), ("GATHER_ND", ()),
    ("REVERSE_V2", ()), ("FILL", MOVED), ("BROADCAST_TO", MOVED), ("BITCAST", MOVED),
    ("DYNAMIC_UPDATE_SLICE", MOVED), ("DILATE", MOVED),
]
_NUMPY_ONLY = {"PAD": F8, "PADV2": F8, "CONCATENATION": F8, "UNPACK": F8, "GATHER": F8, "GATHER_ND": F8,
               "REVERSE_V2": F8}


@settings(SETTINGS, max_examples=400)
@given(data=st.data(), case=st.sampled_from([(op, t) for op, ts in MOVE_OPS for t in ts]
                                            + [(op, t) for op, ts in _NUMPY_ONLY.items() for t in ts]),
       seed=st.integers(0, 2**31))
def test_data_movement(data, case, seed):
    op, type_name = case
    m, inputs, want, ref = _move_case(op, type_name, data, rng_of(seed))
    wants = want if isinstance(want, list) else [want]
    if type_name in _NUMPY_ONLY.get(op, ()):
        assert litert_fails(m, inputs)  # not in the wheel's build: numpy decides
        acelera_only(m, inputs, wants)
        return
    got = exact(m, inputs, ref)
    for g, w in zip(got, wants):
        assert_same_bits(g, np.asarray(w, g.dtype))


@pytest.mark.parametrize("type_name", [*F8, "BFLOAT16", "COMPLEX64"])
def test_shape_and_rank(type_name):
    x = rand((2, 3, 1), type_name, rng_of(0))
    for out_dt, code in ((np.int32, "INT32"), (np.int64, "INT64")):
        m = single_op_model("SHAPE", [In(x.shape, type_name)], [Out((3,), out_dt)], out_type=code)
        exact(m, [x])
    exact(single_op_model("RANK", [In(x.shape, type_name)], [Out((), np.int32)]), [x])


def test_gather_float8_bad_index_fails_at_invoke():
    m = single_op_model("GATHER", [In((3,), "FLOAT8_E4M3FN"), In((1,), np.int32)], [Out((1,), "FLOAT8_E4M3FN")])
    invoke_error(m, [np.arange(3, dtype=np.uint8), np.array([3], np.int32)])
    m = single_op_model("GATHER_ND", [In((3,), "FLOAT8_E5M2"), In((1, 1), np.int32)], [Out((1,), "FLOAT8_E5M2")])
    invoke_error(m, [np.arange(3, dtype=np.uint8), np.array([[-1]], np.int32)])


@pytest.mark.parametrize("op", ["PAD", "CONCATENATION", "GATHER", "UNPACK"])
def test_complex_where_litert_refuses_it(op):
    """COMPLEX64 stays refused where LiteRT's kernel refuses it."""
    t = "COMPLEX64"
    if op == "PAD":
        m = single_op_model(op, [In((2,), t), Const(np.array([[1, 1]], np.int32))], [Out((4,), t)])
    elif op == "CONCATENATION":
        m = single_op_model(op, [In((2,), t), In((2,), t)], [Out((4,), t)], axis=0)
    elif op == "GATHER":
        m = single_op_model(op, [In((2,), t), Const(np.array([0], np.int32))], [Out((1,), t)])
    else:
        m = single_op_model(op, [In((2, 2), t)], [Out((2,), t), Out((2,), t)], num=2, axis=0)
    allocate_error(m, UnsupportedOpError)


# --- INT4 --------------------------------------------------------------------------------------

def _int4_model(op: str, values: np.ndarray, out_shape, extra=(), second: np.ndarray | None = None,
                **options) -> bytes:
    """Packed INT4 constant(s) -> op -> DEQUANTIZE (scale 1) -> float32 output."""
    b = ModelBuilder()

    def int4_const(name, v):
        flat = (v.reshape(-1).astype(np.int64) & 0xF).astype(np.uint8)
        if flat.size % 2:
            flat = np.append(flat, np.uint8(0))
        packed = flat[0::2] | (flat[1::2] << 4)
        k = b.add_constant(name, packed, quant=(1.0, 0), shape=v.shape)
        b.tensors[k].type = TYPE_CODES["INT4"]
        return k

    ins = [int4_const("x", values)]
    if second is not None:
        ins.append(int4_const("y", second))
    ins += [b.add_constant(f"c{i}", c) for i, c in enumerate(extra)]
    mid = b.add_tensor("mid", out_shape, "INT4", (1.0, 0))
    b.add_operator(op, ins, [mid], **options)
    out = b.add_tensor("out", out_shape, np.float32)
    b.add_operator("DEQUANTIZE", [mid], [out])
    b.mark_outputs(out)
    return b.build()


@SETTINGS
@given(data=st.data(), op=st.sampled_from(["RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "SLICE",
                                           "CONCATENATION"]), seed=st.integers(0, 2**31))
def test_int4(data, op, seed):
    rng = rng_of(seed)
    shape = data.draw(shapes(1, 4, 1, 4))
    x = rand(shape, "INT4", rng)
    r = len(shape)
    if op == "RESHAPE":
        m, want = _int4_model(op, x, (x.size,), [np.array([-1], np.int32)]), x.reshape(-1)
    elif op == "SQUEEZE":
        x = x.reshape((1,) + shape)
        m, want = _int4_model(op, x, shape, squeeze_dims=[0]), x[0]
    elif op == "EXPAND_DIMS":
        m, want = _int4_model(op, x, (1,) + shape, [np.array(0, np.int32)]), x[None]
    elif op == "TRANSPOSE":
        perm = list(data.draw(st.permutations(range(r))))
        want = x.transpose(perm)
        m = _int4_model(op, x, want.shape, [np.array(perm, np.int32)], version=8)
    elif op == "SLICE":
        begin = [data.draw(st.integers(0, d - 1)) for d in shape]
        size = [data.draw(st.integers(1, d - b)) for d, b in zip(shape, begin)]
        want = x[tuple(slice(b, b + s) for b, s in zip(begin, size))]
        m = _int4_model(op, x, want.shape, [np.array(begin, np.int32), np.array(size, np.int32)], version=8)
    else:
        axis = data.draw(st.integers(0, r - 1))
        y = rand(shape[:axis] + (data.draw(st.integers(1, 3)),) + shape[axis + 1:], "INT4", rng)
        want = np.concatenate([x, y], axis)
        m = _int4_model(op, x, want.shape, second=y, version=7, axis=axis)
    got = exact(m, [])[0]
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_int4_graph_inputs():
    """Non-constant INT4 tensors (acelera holds them unpacked) through the same ops, against numpy."""
    x = rand((2, 3), "INT4", rng_of(4))
    cases = [
        (single_op_model("RESHAPE", [In((2, 3), "INT4"), Const(np.array([3, 2], np.int32))], [Out((3, 2), "INT4")]),
         [x], x.reshape(3, 2)),
        (single_op_model("TRANSPOSE", [In((2, 3), "INT4"), Const(np.array([1, 0], np.int32))], [Out((3, 2), "INT4")],
                         version=9), [x], x.T),
        (single_op_model("SLICE", [In((2, 3), "INT4"), In((2,), np.int32), In((2,), np.int32)], [Out((1, 2), "INT4")],
                         version=8), [x, np.array([1, 1], np.int32), np.array([1, 2], np.int32)], x[1:, 1:]),
        (single_op_model("CONCATENATION", [In((2, 3), "INT4"), In((2, 3), "INT4")], [Out((2, 6), "INT4")],
                         version=7, axis=1), [x, x], np.concatenate([x, x], 1)),
        (single_op_model("EXPAND_DIMS", [In((2, 3), "INT4"), Const(np.array(2, np.int32))], [Out((2, 3, 1), "INT4")]),
         [x], x[..., None]),
    ]
    for m, ins, want in cases:
        acelera_only(m, ins, [want])


def test_int4_bad_models():
    b = ModelBuilder()  # LiteRT concatenates constant scalars except int4 ones
    xs = []
    for i in range(2):
        k = b.add_constant(f"c{i}", np.array([i], np.uint8), shape=())
        b.tensors[k].type = TYPE_CODES["INT4"]
        xs.append(k)
    out = b.add_tensor("o", (2,), "INT4")
    b.add_operator("CONCATENATION", xs, [out], axis=0)
    b.mark_outputs(out)
    allocate_error(b.build())
    allocate_error(single_op_model("TILE", [In((2,), "INT4"), Const(np.array([2], np.int32))], [Out((4,), "INT4")]),
                   UnsupportedOpError)


# --- RESOURCE / VARIANT --------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["RESHAPE", "EXPAND_DIMS", "SQUEEZE"])
def test_reshaped_resource_handle(op):
    """A variable handle through RESHAPE / EXPAND_DIMS / SQUEEZE still names the variable (LiteRT's
    interpreter crashes on this model, so acelera alone: the value assigned through the reshaped
    handle is read back through the original one)."""
    b = ModelBuilder()
    x = b.add_input("x", (2,), np.float32)
    h = b.add_tensor("h", (), "RESOURCE")
    b.add_operator("VAR_HANDLE", [], [h], shared_name="v")
    h1 = b.add_tensor("h1", (1,), "RESOURCE")
    if op == "EXPAND_DIMS":
        b.add_operator(op, [h, b.add_constant("a", np.array(0, np.int32))], [h1])
    else:
        b.add_operator("RESHAPE", [h, b.add_constant("s", np.array([1], np.int32))], [h1])
    if op == "SQUEEZE":
        h2 = b.add_tensor("h2", (), "RESOURCE")
        b.add_operator(op, [h1], [h2])
        h1 = h2
    b.add_operator("ASSIGN_VARIABLE", [h1, x], [])
    y = b.add_tensor("y", (2,), np.float32)
    b.add_operator("READ_VARIABLE", [h], [y])
    b.mark_outputs(y)
    x_in = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(run_acelera(b.build(), [x_in])[0], x_in)


def test_variant_shape_ops():
    """VARIANT tensors (no TensorList kernels produce them here; an unset graph input) have a shape."""
    b = ModelBuilder()
    v = b.add_input("v", (2, 1, 3), "VARIANT")
    r = b.add_tensor("r", (2, 3), "VARIANT")
    b.add_operator("RESHAPE", [v, b.add_constant("s", np.array([2, 3], np.int32))], [r])
    sq = b.add_tensor("sq", (2, 3), "VARIANT")
    b.add_operator("SQUEEZE", [v], [sq], squeeze_dims=[1])
    e = b.add_tensor("e", (2, 3, 1), "VARIANT")
    b.add_operator("EXPAND_DIMS", [r, b.add_constant("a", np.array(-1, np.int32))], [e])
    s = b.add_tensor("s_out", (3,), np.int32)
    b.add_operator("SHAPE", [e], [s], out_type=TYPE_CODES["INT32"])
    k = b.add_tensor("k", (), np.int32)
    b.add_operator("RANK", [sq], [k])
    b.mark_outputs(s, k)
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    it.invoke()
    outs = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    np.testing.assert_array_equal(outs[0], [2, 3, 1])
    assert int(outs[1]) == 2


# --- CAST / DEQUANTIZE of FLOAT8 -----------------------------------------------------------------

F8_CODES = np.arange(256, dtype=np.uint8)
CAST_TARGETS = [np.float32, np.float64, np.float16, "BFLOAT16", np.int32, np.int8, np.uint8, np.int64, np.bool_,
                np.complex64, *F8, "INT4"]


def _ml_reference(x_f32: np.ndarray, dst) -> np.ndarray:
    """LiteRT's copyToTensor from float32 values, computed with numpy/ml_dtypes."""
    if dst in F8:
        return x_f32.astype(ML_F8[dst]).view(np.uint8)
    if dst == "BFLOAT16":
        return x_f32.astype(ml_dtypes.bfloat16).view(np.uint16)
    if dst == "INT4":
        return np.trunc(np.where(np.isnan(x_f32), 7, np.clip(x_f32, -8, 7))).astype(np.int8)
    dt = np.dtype(dst)
    if dt == np.float16:
        h = x_f32.astype(np.float16)
        h.view(np.uint16)[np.isnan(x_f32)] = np.where(np.signbit(x_f32[np.isnan(x_f32)]), 0xFE00, 0x7E00)
        return h
    if dt.kind in "iu":  # SafeCast: NaN and values past the top -> max, below -> min, else truncate
        info = np.iinfo(dt)
        return np.array([info.max if np.isnan(v) or v >= 2.0 ** (info.bits - (info.min < 0)) else
                         info.min if v < info.min else int(v) for v in x_f32.astype(np.float64)], dt)
    return x_f32.astype(dt)


@pytest.mark.parametrize("src", F8)
@pytest.mark.parametrize("dst", CAST_TARGETS)
def test_cast_from_float8(src, dst):
    """Every FLOAT8 value widened exactly (ml_dtypes), then converted as from float32."""
    m = single_op_model("CAST", [In((256,), src)], [Out((256,), dst)], version=9)
    assert litert_fails(m, [F8_CODES])  # not in the wheel's build
    with np.errstate(invalid="ignore", over="ignore"):
        want = F8_CODES if dst == src else _ml_reference(F8_CODES.view(ML_F8[src]).astype(np.float32), dst)
    acelera_only(m, [F8_CODES], [want])


# FLOAT8 edges: E4M3FN's largest (448) and its rounding tie (464), E5M2's largest (57344) and tie
# (61440, rounds to infinity), subnormal ties, float16's largest, float32 subnormals, NaN, inf
FLOAT_SPECIALS = np.array([0.0, -0.0, 1.0, -1.5, 0.1, 447.9, 448.0, 464.0, 464.1, 480.0, 57344.0, 61440.0,
                           61441.0, 1e9, -1e9, np.inf, -np.inf, np.nan, -np.nan, 2.0 ** -9, 2.0 ** -10, 2.0 ** -17,
                           1.5 * 2.0 ** -10, 3e-39, 65504.0], np.float32)


@pytest.mark.parametrize("dst", F8)
@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16, "BFLOAT16", np.int32, np.int64, np.uint8,
                                 np.bool_, np.complex64, *F8])
def test_cast_to_float8(src, dst):
    """static_cast<float> of the source, then ml_dtypes' rounding (nearest even, no saturation)."""
    rng = rng_of(5)
    f = np.concatenate([FLOAT_SPECIALS, (rng.standard_normal(200) * 300).astype(np.float32)])
    if src == "BFLOAT16":
        x = f.astype(ml_dtypes.bfloat16).view(np.uint16)
        as_f32 = x.view(ml_dtypes.bfloat16).astype(np.float32)
    elif src in F8:
        x = F8_CODES
        as_f32 = x.view(ML_F8[src]).astype(np.float32)
    elif src is np.complex64:
        x = np.zeros(f.shape, np.complex64)
        x.real, x.imag = f, f[::-1]
        as_f32 = x.real.astype(np.float32)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            x = f.astype(np.float64) * (1 + 2.0 ** -30) if src is np.float64 else (
                f if np.dtype(src).kind == "f" else
                np.clip(np.nan_to_num(f), np.iinfo(src).min, np.iinfo(src).max) if src is not np.bool_ else f > 0
            ).astype(src)
        as_f32 = np.asarray(x).astype(np.float32)
    m = single_op_model("CAST", [In(x.shape, src)], [Out(x.shape, dst)], version=9)
    with np.errstate(invalid="ignore", over="ignore"):
        acelera_only(m, [x], [x if src == dst else as_f32.astype(ML_F8[dst]).view(np.uint8)])


def test_cast_int4_and_float8():
    b = ModelBuilder()  # INT4 -> FLOAT8 and FLOAT8 -> INT4 go through float32 in LiteRT
    x = b.add_input("x", (16,), "FLOAT8_E4M3FN")
    t = b.add_tensor("t", (16,), "INT4")
    o = b.add_tensor("o", (16,), "FLOAT8_E5M2")
    b.add_operator("CAST", [x], [t], version=9)
    b.add_operator("CAST", [t], [o], version=9)
    b.mark_outputs(o)
    v = np.array([-9, -8, -7.5, -1, -0.5, 0, 0.4, 1, 2.5, 3, 6, 7, 7.9, 100, np.nan, -np.inf], np.float32)
    x_in = v.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    vals = x_in.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    i4 = np.trunc(np.where(np.isnan(vals), 7, np.clip(vals, -8, 7))).astype(np.int8)
    acelera_only(b.build(), [x_in], [i4.astype(np.float32).astype(ml_dtypes.float8_e5m2).view(np.uint8)])
    allocate_error(single_op_model("CAST", [In((2,), "FLOAT16")], [Out((2,), "INT4")]), UnsupportedOpError)


def test_cast_float_nan_to_float16():
    """float -> float16 turns every NaN into 0x7E00 with its sign (fp16_ieee_from_fp32_value)."""
    x = np.array([0x7FC00000, 0x7F800001, 0xFFC12345, 0x7FFFFFFF, 0x3F800000, 0x477FF000], np.uint32).view(np.float32)
    exact(single_op_model("CAST", [In((6,), np.float32)], [Out((6,), np.float16)], version=7), [x])
    with np.errstate(invalid="ignore"):  # float32 -> float64 of a signaling NaN
        x64 = x.astype(np.float64)
    exact(single_op_model("CAST", [In((6,), np.float64)], [Out((6,), np.float16)], version=7), [x64])


@pytest.mark.parametrize("src", F8)
def test_dequantize_float8(src):
    """DequantizeFloat8: the value, whatever the per-tensor scale."""
    want = F8_CODES.view(ML_F8[src]).astype(np.float32)
    for quant in (None, (0.25, 3)):
        m = single_op_model("DEQUANTIZE", [In((256,), src, quant)], [Out((256,), np.float32)], version=9)
        assert litert_fails(m, [F8_CODES])
        acelera_only(m, [F8_CODES], [want])
    m = single_op_model("DEQUANTIZE", [In((2, 2), src, (np.array([0.5, 1.0], np.float32), np.zeros(2, np.int64), 0))],
                        [Out((2, 2), np.float32)], version=9)
    allocate_error(m, UnsupportedOpError)


# --- reductions ----------------------------------------------------------------------------------

REDUCE_QUANT = {"INT8": (0.5, -3), "UINT8": (0.5, 120), "INT16": (0.25, 0)}


@pytest.mark.parametrize("op,version", [("MEAN", 3), ("SUM", 2), ("REDUCE_PROD", 2), ("REDUCE_MAX", 3),
                                        ("REDUCE_MIN", 3)])
def test_reduction_dtypes(op, version):
    """Each declared input type of the reductions against LiteRT."""
    rng = rng_of(11)
    for type_name in registered()[op].dtypes:
        q = REDUCE_QUANT.get(type_name) if op != "REDUCE_PROD" or type_name != "UINT8" else None
        dt = np_type(type_name)
        x = rand((2, 3, 4), type_name, rng)
        if op == "REDUCE_PROD" and dt.kind in "iu":
            x = (x % 3).astype(dt)  # small factors: the products stay comparable
        for axis, keep in (([1], False), ([0, 2], True), ([-1], False)):
            out_shape = np.sum(np.zeros((2, 3, 4)), axis=tuple(axis), keepdims=keep).shape
            m = single_op_model(op, [In(x.shape, dt, q), Const(np.array(axis, np.int32))], [Out(out_shape, dt, q)],
                                version=version, keep_dims=keep)
            # int8/int16 SUM: acelera sums correctly, as LiteRT's optimized kernel (see reduce.py)
            ref = "builtin" if op == "SUM" and type_name in ("INT8", "INT16") else True
            if type_name != "FLOAT32":
                exact(m, [x], ref)
                continue
            # float32 sums: numpy's pairwise order against LiteRT's running sum
            got, want = run_acelera(m, [x])[0], litert(m, [x], ref)[0]
            assert got.dtype == want.dtype and got.shape == want.shape
            bound = 1e-4 * max(1.0, float(np.max(np.abs(want))))
            assert float(np.max(np.abs(got.astype(np.float64) - want))) <= bound
    m = single_op_model("MEAN", [In((2, 2), np.bool_), Const(np.array([0], np.int32))], [Out((2,), np.bool_)])
    assert litert_fails(m, [np.ones((2, 2), bool)])
    allocate_error(m, UnsupportedOpError)
