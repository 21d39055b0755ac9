"""Array creation, reversal, scan and selection kernels against LiteRT's reference kernels.

SHAPE, RANK, ZEROS_LIKE, FILL, RANGE, BROADCAST_TO, BROADCAST_ARGS, ONE_HOT, BITCAST, BUCKETIZE,
REVERSE_V2, REVERSE_SEQUENCE, MATRIX_DIAG, MATRIX_SET_DIAG, CUMSUM, DYNAMIC_UPDATE_SLICE, DILATE,
WHERE, UNIQUE, SPARSE_TO_DENSE, TOPK_V2 over every dtype LiteRT accepts for them. All of them
only move, compare or add values, so every output is compared bit-exactly (NaN == NaN).

LiteRT's Python get_tensor cannot read an empty dynamic output, so `litert_run` reads such an
output's shape from the tensor details instead.
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from helpers import allocate_error, invoke_error, litert_fails, rng_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import run_acelera, run_litert

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.dtypes import TYPE_CODES
from acelera.core.errors import UnsupportedOpError
from acelera.core.kernels.registry import registered

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
I32, I64 = TYPE_CODES["INT32"], TYPE_CODES["INT64"]


# --- harness -------------------------------------------------------------------------------



def exact(model: bytes, inputs, reference: bool | str = True) -> list[np.ndarray]:
    """acelera's outputs equal LiteRT's in dtype, shape and every bit of value (NaN == NaN)."""
    want = run_litert(model, inputs, reference)
    got = run_acelera(model, inputs)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"output {k}: dtype {g.dtype} != LiteRT {w.dtype}"
        assert g.shape == w.shape, f"output {k}: shape {g.shape} != LiteRT {w.shape}"
        if w.dtype.kind in "fc":  # bit-exact: -0.0 differs from 0.0, NaN equals NaN
            nan = np.isnan(w)
            np.testing.assert_array_equal(np.isnan(g), nan, err_msg=f"output {k}: NaN positions differ")
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
            assert np.where(nan, 0, g).tobytes() == np.where(nan, 0, w).tobytes(), f"output {k}: signed zeros differ"
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
    return got








def rand(shape, dtype, rng: np.random.Generator) -> np.ndarray:
    """Random values over a dtype's whole range (normal floats, complex, bool, all integers)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.standard_normal(shape) * 4
    elif dt.kind == "c":
        x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    elif dt == np.bool_:
        x = rng.integers(0, 2, shape)
    elif dt.kind == "u" and dt.itemsize == 8:
        x = rng.integers(0, 2**63, shape, dtype=np.int64).astype(dt) * 2 + 1
    else:
        info = np.iinfo(dt)
        x = rng.integers(int(info.min), int(info.max) + 1, shape, dtype=np.int64)
    return np.asarray(x).astype(dt)


def shapes(min_rank=1, max_rank=4, min_side=1, max_side=4):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def test_registrations_match_litert():
    want = {"SHAPE": 1, "RANK": 1, "ZEROS_LIKE": 1, "FILL": 5, "RANGE": 2, "BROADCAST_TO": 4,
            "BROADCAST_ARGS": 1, "ONE_HOT": 1, "BITCAST": 1, "BUCKETIZE": 1, "REVERSE_V2": 4,
            "REVERSE_SEQUENCE": 1, "MATRIX_DIAG": 1, "MATRIX_SET_DIAG": 1, "CUMSUM": 1,
            "DYNAMIC_UPDATE_SLICE": 6, "DILATE": 1, "WHERE": 2, "UNIQUE": 1, "SPARSE_TO_DENSE": 3,
            "TOPK_V2": 3}
    reg = registered()
    for op, version in want.items():
        assert reg[op].max_version == version, op
        assert reg[op].dtypes, op
    assert "ONES_LIKE" not in reg  # not a TFLite builtin operator


# --- SHAPE / RANK / ZEROS_LIKE ---------------------------------------------------------------

SHAPE_DTYPES = [np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_, np.float16,
                np.float64, np.complex64]


@pytest.mark.parametrize("out_dt,code", [(np.int32, I32), (np.int64, I64)])
@pytest.mark.parametrize("dt", SHAPE_DTYPES)
@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), (1, 0, 3), (1, 2, 1, 2, 1, 2)])
def test_shape(out_dt, code, dt, shape):
    m = single_op_model("SHAPE", [In(shape, dt)], [Out((len(shape),), out_dt)], out_type=code)
    got = exact(m, [rand(shape, dt, rng_of(1))])
    assert got[0].tolist() == list(shape)


def test_shape_of_strings_and_scalars():
    m = single_op_model("SHAPE", [In((2,), np.bytes_)], [Out((1,), np.int64)], out_type=I64)
    assert exact(m, [np.array([b"a", b"bc"], object)])[0].tolist() == [2]
    m = single_op_model("SHAPE", [In(())], [Out((0,), np.int32)], out_type=I32)
    got = exact(m, [np.float32(3)])
    assert got[0].shape == (0,) and got[0].dtype == np.int32


def test_shape_follows_resized_input():
    m = single_op_model("SHAPE", [In((2, 3))], [Out((2,), np.int32)], out_type=I32)
    assert exact(m, [np.zeros((4, 7, 2), np.float32)])[0].tolist() == [4, 7, 2]


@pytest.mark.parametrize("options,out_dt", [({}, np.int32), ({"out_type": TYPE_CODES["FLOAT32"]}, np.float32),
                                           ({"out_type": I64}, np.int32)])
def test_shape_bad_out_type(options, out_dt):
    m = single_op_model("SHAPE", [In((2, 3))], [Out((2,), out_dt)], **options)
    allocate_error(m, UnsupportedOpError)


@pytest.mark.parametrize("dt", SHAPE_DTYPES)
@pytest.mark.parametrize("shape", [(), (3,), (2, 0, 4), (1, 1, 1, 1, 1, 1, 1)])
def test_rank(dt, shape):
    m = single_op_model("RANK", [In(shape, dt)], [Out((), np.int32)])
    assert int(exact(m, [rand(shape, dt, rng_of(2))])[0]) == len(shape)


def test_rank_bad_output_type():
    allocate_error(single_op_model("RANK", [In((2,))], [Out((), np.int64)]), UnsupportedOpError)


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("shape", [(), (3,), (2, 0), (2, 3, 4)])
def test_zeros_like(dt, shape):
    m = single_op_model("ZEROS_LIKE", [In(shape, dt)], [Out(shape, dt)])
    got = exact(m, [rand(shape, dt, rng_of(3))])
    assert not got[0].any()


def test_zeros_like_refuses_other_types():
    m = single_op_model("ZEROS_LIKE", [In((2,), np.int8)], [Out((2,), np.int8)])
    assert litert_fails(m, [np.ones(2, np.int8)])
    allocate_error(m, UnsupportedOpError)
    allocate_error(single_op_model("ZEROS_LIKE", [In((2,))], [Out((2,), np.int32)]), UnsupportedOpError)


# --- FILL ------------------------------------------------------------------------------------

FILL_CASES = [(np.float32, None), (np.int8, (0.5, 3)), (np.uint8, (0.1, 128)), (np.int16, (0.25, 0)),
              (np.int32, None), (np.int64, None), (np.bool_, None), (np.float16, None), (np.float64, None),
              (np.uint16, None), (np.uint32, None), (np.uint64, None), (np.complex64, None), (np.int8, None)]


@pytest.mark.parametrize("dt,q", FILL_CASES)
@pytest.mark.parametrize("dims_dt", [np.int32, np.int64])
@pytest.mark.parametrize("dims", [[2, 3, 1], [4], [], [3, 0]])
def test_fill(dt, q, dims_dt, dims):
    m = single_op_model("FILL", [In((len(dims),), dims_dt), In((), dt, q)], [Out(dims, dt, q)], version=5)
    value = rand((), dt, rng_of(4))
    got = exact(m, [np.array(dims, dims_dt), value])
    assert got[0].shape == tuple(dims)


def test_fill_string_and_const_dims():
    m = single_op_model("FILL", [In((2,), np.int32), In((), np.bytes_)], [Out((2, 3), np.bytes_)], version=4)
    got = exact(m, [np.array([2, 3], np.int32), np.array(b"hey", object)])
    assert got[0].shape == (2, 3) and got[0][1, 2] == b"hey"
    m = single_op_model("FILL", [Const(np.array([3, 2], np.int64)), In(())], [Out((3, 2))])
    assert exact(m, [np.float32(-2.5)])[0].shape == (3, 2)


def test_fill_negative_dims_fail_at_invoke():
    m = single_op_model("FILL", [In((2,), np.int32), In(())], [Out((2, 3))])
    ins = [np.array([2, -1], np.int32), np.float32(1)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    m = single_op_model("FILL", [Const(np.array([2, -1], np.int32)), In(())], [Out((2, 3))])
    allocate_error(m)


def test_fill_huge_dims_refused():
    m = single_op_model("FILL", [In((3,), np.int64), In(())], [Out((1, 1, 1))])
    assert "too large" in str(invoke_error(m, [np.array([2**20, 2**20, 2**20], np.int64), np.float32(1)]))


@pytest.mark.parametrize("case", ["dims_2d", "dims_float", "value_vector", "quant_mismatch", "int16_zp",
                                  "out_type", "int4"])
def test_fill_bad_models(case):
    dims, value, out = In((2,), np.int32), In(()), Out((2, 3))
    if case == "dims_2d":
        dims = In((1, 2), np.int32)
    elif case == "dims_float":
        dims = In((2,), np.float32)
    elif case == "value_vector":
        value = In((1,))
    elif case == "quant_mismatch":
        value, out = In((), np.int8, (0.5, 1)), Out((2, 3), np.int8, (0.25, 1))
    elif case == "int16_zp":
        value, out = In((), np.int16, (0.5, 2)), Out((2, 3), np.int16, (0.5, 2))
    elif case == "out_type":
        out = Out((2, 3), np.int32)
    elif case == "int4":
        value, out = In((), "INT4", (0.5, 0)), Out((2, 3), "INT4", (0.5, 0))
    m = single_op_model("FILL", [dims, value], [out])
    allocate_error(m, UnsupportedOpError)


# --- RANGE -----------------------------------------------------------------------------------

def range_model(dt, version=1, const=None):
    if const is not None:
        return single_op_model("RANGE", [Const(np.array(v, dt), shape=()) for v in const], [Out((1,), dt)],
                               version=version)
    return single_op_model("RANGE", [In((), dt)] * 3, [Out((1,), dt)], version=version)


@SETTINGS
@given(start=st.integers(-50, 50), span=st.integers(0, 200), delta=st.integers(1, 30), down=st.booleans())
def test_range_int32(start, span, delta, down):
    s, l, d = (start, start + span, delta) if not down else (start + span, start, -delta)
    got = exact(range_model(np.int32), [np.int32(s), np.int32(l), np.int32(d)])
    assert got[0].tolist() == list(range(s, l, d))


@SETTINGS
@given(start=st.floats(-100, 100, width=32), span=st.floats(0, 300, width=32),
       delta=st.floats(0.0009765625, 50, width=32), down=st.booleans())
def test_range_float32(start, span, delta, down):
    s, l, d = (start, start + span, delta) if not down else (start + span, start, -delta)
    vals = [np.float32(s), np.float32(l), np.float32(d)]
    exact(range_model(np.float32), vals)


def test_range_float32_accumulates_like_litert():
    # value += delta in float32, element after element: drifts away from start + i * delta
    got = exact(range_model(np.float32), [np.float32(0.1), np.float32(5000.3), np.float32(0.1)])
    assert got[0].size == 50002
    exact(range_model(np.float32, const=(-3.3, 7.1, 0.7)), [])


def test_range_int64_v2():
    # BUILTIN_REF registers RANGE v1 only; v2 (int64) runs on the builtin kernels.
    ins = [np.int64(-5), np.int64(2**40), np.int64(2**37)]
    assert exact(range_model(np.int64, version=2), ins, reference="builtin")[0].size == 9
    exact(range_model(np.int64, version=2), [np.int64(7), np.int64(-30), np.int64(-4)], reference="builtin")
    exact(range_model(np.int64, const=(2**35, 2**35 + 10, 3)), [])


@pytest.mark.parametrize("dt", [np.int32, np.float32, np.int64])
@pytest.mark.parametrize("s,l,d", [(1, 5, 0), (5, 1, 1), (1, 5, -1)])
def test_range_bad_values_fail(dt, s, l, d):
    m = range_model(dt)
    ins = [np.array(v, dt) for v in (s, l, d)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    allocate_error(range_model(dt, const=(s, l, d)))


def test_range_empty_and_special_floats():
    assert run_acelera(range_model(np.int32), [np.int32(2), np.int32(2), np.int32(1)])[0].shape == (0,)
    invoke_error(range_model(np.float32), [np.float32(0), np.float32(np.inf), np.float32(1)])
    invoke_error(range_model(np.float32), [np.float32(0), np.float32(1), np.float32(np.nan)])
    err = invoke_error(range_model(np.int64), [np.int64(0), np.int64(2**40), np.int64(1)])
    assert "does not fit int32" in str(err)
    err = invoke_error(range_model(np.int64), [np.int64(0), np.int64(2**31 - 1), np.int64(1)])
    assert "too large" in str(err)


@pytest.mark.parametrize("case", ["vector_start", "mixed_types", "uint8", "out_type"])
def test_range_bad_models(case):
    ins, out = [In(()), In(()), In(())], Out((1,))
    if case == "vector_start":
        ins[0] = In((1,))
    elif case == "mixed_types":
        ins[2] = In((), np.int32)
    elif case == "uint8":
        ins, out = [In((), np.uint8)] * 3, Out((1,), np.uint8)
    elif case == "out_type":
        out = Out((1,), np.int32)
    allocate_error(single_op_model("RANGE", ins, [out]), UnsupportedOpError)


# --- BROADCAST_TO / BROADCAST_ARGS -------------------------------------------------------------

BROADCAST_DTYPES = [np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_, np.float16,
                    np.float64, np.uint16, np.uint32, np.uint64, np.complex64, np.complex128]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(BROADCAST_DTYPES), shape_dt=st.sampled_from([np.int32, np.int64]),
       version=st.integers(2, 4), const=st.booleans(), seed=st.integers(0, 2**31))
def test_broadcast_to(data, dt, shape_dt, version, const, seed):
    target = data.draw(shapes(0, 5, 1, 4))
    keep = data.draw(st.integers(0, len(target)))
    in_shape = tuple(d if data.draw(st.booleans()) else 1 for d in target[len(target) - keep:])
    shape = np.array(target, shape_dt)
    x = rand(in_shape, dt, rng_of(seed))
    if const:
        m = single_op_model("BROADCAST_TO", [In(in_shape, dt), Const(shape)], [Out(target, dt)], version=version)
        got = exact(m, [x])
    else:
        m = single_op_model("BROADCAST_TO", [In(in_shape, dt), In((len(target),), shape_dt)], [Out(target, dt)],
                            version=version)
        got = exact(m, [x, shape])
    assert got[0].shape == target


def test_broadcast_to_rank_9_and_zero_dims():
    m = single_op_model("BROADCAST_TO", [In((1,) * 9), In((9,), np.int32)], [Out((2,) * 9)], version=2)
    exact(m, [np.arange(1, dtype=np.float32).reshape((1,) * 9) + 3, np.full(9, 2, np.int32)])
    m = single_op_model("BROADCAST_TO", [In((1, 3)), In((2,), np.int32)], [Out((0, 3))], version=2)
    assert exact(m, [np.ones((1, 3), np.float32), np.array([0, 3], np.int32)])[0].shape == (0, 3)


def test_broadcast_to_incompatible_shape_fails():
    m = single_op_model("BROADCAST_TO", [In((3,)), In((2,), np.int64)], [Out((2, 4))], version=3)
    ins = [np.ones(3, np.float32), np.array([2, 4], np.int64)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    allocate_error(single_op_model("BROADCAST_TO", [In((3,)), Const(np.array([2, 4], np.int32))], [Out((2, 4))],
                                   version=2))
    invoke_error(m, [np.ones(1, np.float32), np.array([2, -4], np.int64)])


@pytest.mark.parametrize("case", ["version_1", "shape_2d", "rank_too_big", "string", "shape_float", "out_type"])
def test_broadcast_to_bad_models(case):
    x, shape, out, version = In((3,)), In((2,), np.int32), Out((2, 3)), 2
    if case == "version_1":
        version = 1
    elif case == "shape_2d":
        shape = In((1, 2), np.int32)
    elif case == "rank_too_big":
        x = In((1, 1, 3))
    elif case == "string":
        x, out = In((3,), np.bytes_), Out((2, 3), np.bytes_)
    elif case == "shape_float":
        shape = In((2,), np.float32)
    elif case == "out_type":
        out = Out((2, 3), np.int32)
    allocate_error(single_op_model("BROADCAST_TO", [x, shape], [out], version=version), UnsupportedOpError)


@pytest.mark.parametrize("dt", [np.int32, np.int64])
@pytest.mark.parametrize("a,b", [([2, 1, 3], [4, 1]), ([1], [5, 6, 7]), ([], [2, 3]), ([0, 1], [1, 1]),
                                 ([3, 4], [3, 4]), ([], [])])
def test_broadcast_args(dt, a, b):
    m = single_op_model("BROADCAST_ARGS", [In((len(a),), dt), In((len(b),), dt)], [Out((max(len(a), len(b)),), dt)])
    ins = [np.array(a, dt), np.array(b, dt)]
    got = exact(m, ins)
    if 0 not in a + b:
        assert tuple(got[0].tolist()) == np.broadcast_shapes(tuple(a), tuple(b))
    m = single_op_model("BROADCAST_ARGS", [Const(ins[0]), Const(ins[1])], [Out((max(len(a), len(b)),), dt)])
    exact(m, [])


def test_broadcast_args_int64_values_read_as_int():
    m = single_op_model("BROADCAST_ARGS", [In((1,), np.int64), In((1,), np.int64)], [Out((1,), np.int64)])
    assert exact(m, [np.array([2**33 + 3], np.int64), np.array([3], np.int64)])[0].tolist() == [3]


def test_broadcast_args_incompatible_fails():
    # LiteRT aborts the process here (TFLITE_CHECK_EQ), so only acelera is run.
    m = single_op_model("BROADCAST_ARGS", [In((2,), np.int32), In((2,), np.int32)], [Out((2,), np.int32)])
    invoke_error(m, [np.array([2, 3], np.int32), np.array([2, 4], np.int32)])


@pytest.mark.parametrize("case", ["types_differ", "float", "matrix", "out_type"])
def test_broadcast_args_bad_models(case):
    a, b, out = In((2,), np.int32), In((2,), np.int32), Out((2,), np.int32)
    if case == "types_differ":
        b = In((2,), np.int64)
    elif case == "float":
        a, b, out = In((2,)), In((2,)), Out((2,))
    elif case == "matrix":
        a = In((1, 2), np.int32)
    elif case == "out_type":
        out = Out((2,), np.int64)
    allocate_error(single_op_model("BROADCAST_ARGS", [a, b], [out]), UnsupportedOpError)


# --- ONE_HOT ---------------------------------------------------------------------------------

ONE_HOT_DTYPES = [np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ONE_HOT_DTYPES), idx_dt=st.sampled_from([np.int32, np.int64]),
       depth_const=st.booleans(), seed=st.integers(0, 2**31))
def test_one_hot(data, dt, idx_dt, depth_const, seed):
    shape = data.draw(shapes(0, 3, 1, 4))
    depth = data.draw(st.integers(0, 5))
    axis = data.draw(st.sampled_from([-1] + list(range(len(shape) + 1))))
    a = len(shape) if axis == -1 else axis
    out = shape[:a] + (depth,) + shape[a:]
    rng = rng_of(seed)
    idx = rng.integers(-2, depth + 2, shape).astype(idx_dt)
    on, off = rand((), dt, rng), rand((), dt, rng)
    d_in = Const(np.array(depth, np.int32), shape=()) if depth_const else In((), np.int32)
    m = single_op_model("ONE_HOT", [In(shape, idx_dt), d_in, In((), dt), In((), dt)], [Out(out, dt)], axis=axis)
    ins = [idx, on, off] if depth_const else [idx, np.int32(depth), on, off]
    got = exact(m, ins)
    assert got[0].shape == out


def test_one_hot_wide_indices_and_depth():
    # int64 indices are compared as ints (2**32 + 1 matches 1); an int64 depth is read as its
    # first int32 word.
    m = single_op_model("ONE_HOT", [In((3,), np.int64), In((), np.int64), In(()), In(())], [Out((3, 3))], axis=-1)
    got = exact(m, [np.array([2**32 + 1, 0, 2], np.int64), np.int64(3), np.float32(5), np.float32(-1)])
    assert got[0][0].tolist() == [-1, 5, -1]


def test_one_hot_negative_depth_fails():
    m = single_op_model("ONE_HOT", [In((3,), np.int32), In((), np.int32), In(()), In(())], [Out((3, 3))], axis=-1)
    ins = [np.array([2, 0, 2], np.int32), np.int32(-3), np.float32(5), np.float32(-1)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)


@pytest.mark.parametrize("case", ["axis", "int16", "on_off_types", "idx_float", "depth_vector", "out_type",
                                  "depth_float"])
def test_one_hot_bad_models(case):
    idx, depth, on, off, out, axis = In((3,), np.int32), In((), np.int32), In(()), In(()), Out((3, 3)), -1
    if case == "axis":
        axis = -2
    elif case == "int16":  # LiteRT's Prepare accepts it, then its Eval fails
        on, off, out = In((), np.int16), In((), np.int16), Out((3, 3), np.int16)
    elif case == "on_off_types":
        off = In((), np.int32)
    elif case == "idx_float":
        idx = In((3,))
    elif case == "depth_vector":
        depth = In((2,), np.int32)
    elif case == "out_type":
        out = Out((3, 3), np.int32)
    elif case == "depth_float":
        depth = In(())
    allocate_error(single_op_model("ONE_HOT", [idx, depth, on, off], [out], axis=axis), UnsupportedOpError)


# --- BITCAST ---------------------------------------------------------------------------------

BITCAST_TYPES = [np.float32, np.int32, np.uint32, np.uint8, np.int8, np.int16, np.uint16, np.float16,
                 np.int64, np.uint64, np.float64, np.complex64, np.complex128]


@SETTINGS
@given(a=st.sampled_from(BITCAST_TYPES), b=st.sampled_from(BITCAST_TYPES), lead=shapes(0, 2, 1, 3),
       seed=st.integers(0, 2**31))
def test_bitcast(a, b, lead, seed):
    ia, ib = np.dtype(a).itemsize, np.dtype(b).itemsize
    shape = lead + (ib // ia,) if ia < ib else lead
    out = shape + (ia // ib,) if ia > ib else (shape[:-1] if ia < ib else shape)
    raw = rng_of(seed).integers(0, 256, int(np.prod(shape, dtype=np.int64)) * ia, dtype=np.uint8)
    x = raw.view(a).reshape(shape)
    m = single_op_model("BITCAST", [In(shape, a)], [Out(out, b)])
    got = exact(m, [x])
    assert got[0].tobytes() == x.tobytes()


def test_bitcast_bool():
    m = single_op_model("BITCAST", [In((3,), np.bool_)], [Out((3,), np.uint8)])
    exact(m, [np.array([True, False, True])])


@pytest.mark.parametrize("case", ["last_dim", "scalar", "string", "int4"])
def test_bitcast_bad_models(case):
    x, out = In((3,), np.uint8), Out((), np.int32)
    if case == "scalar":
        x = In((), np.uint8)
    elif case == "string":
        x, out = In((3,), np.bytes_), Out((3,), np.bytes_)
    elif case == "int4":
        x, out = In((2,), "INT4"), Out((2,), np.int8)
    allocate_error(single_op_model("BITCAST", [x], [out]), UnsupportedOpError)


# --- BUCKETIZE -------------------------------------------------------------------------------

class _FloatOptionsBuilder(ModelBuilder):
    """ModelBuilder writing BucketizeOptions.boundaries as the float vector the schema declares."""

    def _options(self, b, op):
        if op.options_table != "BucketizeOptions":
            return super()._options(b, op)
        mod = importlib.import_module("tflite.BucketizeOptions")
        union = importlib.import_module("tflite.BuiltinOptions").BuiltinOptions
        bounds = [float(v) for v in op.options.get("boundaries", ())]
        mod.StartBoundariesVector(b, len(bounds))
        for v in reversed(bounds):
            b.PrependFloat32(v)
        vec = b.EndVector()
        mod.Start(b)
        mod.AddBoundaries(b, vec)
        return union.BucketizeOptions, mod.End(b)


def bucketize_model(shape, dt, boundaries, out_dt=np.int32) -> bytes:
    b = _FloatOptionsBuilder()
    x = b.add_input("x", shape, dt)
    y = b.add_tensor("y", shape, out_dt)
    b.add_operator("BUCKETIZE", [x], [y], boundaries=list(boundaries))
    b.mark_outputs(y)
    return b.build()


@SETTINGS
@given(data=st.data(), dt=st.sampled_from([np.float32, np.float64, np.int32, np.int64]), seed=st.integers(0, 2**31))
def test_bucketize(data, dt, seed):
    bounds = sorted(data.draw(st.lists(st.floats(-20, 20, width=32), max_size=8)))
    shape = data.draw(shapes(0, 3, 0, 5))
    rng = rng_of(seed)
    x = (rng.standard_normal(shape) * 10).astype(dt)
    if bounds and x.size:  # hit boundaries exactly too
        x.reshape(-1)[0] = np.asarray(bounds[0]).astype(dt)
    exact(bucketize_model(shape, dt, bounds), [x])


def test_bucketize_special_values():
    x = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1, 2, 3], np.float32)
    exact(bucketize_model((8,), np.float32, [-np.inf, 0, 1, 2, np.inf]), [x])
    # is_sorted lets NaN boundaries through; upper_bound's halving decides where values land
    exact(bucketize_model((8,), np.float32, [-np.inf, 0, 1, np.nan, 2, np.inf]), [x])
    exact(bucketize_model((8,), np.float32, [np.nan, 0, 1, 2, 3]), [x])
    exact(bucketize_model((8,), np.float64, [np.nan]), [x.astype(np.float64)])
    exact(bucketize_model((8,), np.float32, []), [x])
    # integers are compared as floats: 16777217 rounds to 16777216
    exact(bucketize_model((3,), np.int64, [16777216.0, 16777218.0]), [np.array([16777217, 16777218, 2**40], np.int64)])
    exact(bucketize_model((3,), np.int32, [16777216.0, 16777218.0]), [np.array([16777217, 16777219, 2**30], np.int32)])


@pytest.mark.parametrize("case", ["unsorted", "uint8", "out_type"])
def test_bucketize_bad_models(case):
    shape, dt, bounds, out = (4,), np.float32, [0.0, 1.0], np.int32
    if case == "unsorted":
        bounds = [1.0, 0.0]
    elif case == "uint8":
        dt = np.uint8
    elif case == "out_type":
        out = np.int64
    allocate_error(bucketize_model(shape, dt, bounds, out), UnsupportedOpError)


# --- REVERSE_V2 / REVERSE_SEQUENCE -------------------------------------------------------------

REVERSE_DTYPES = [np.float32, np.int32, np.uint8, np.int8, np.int16, np.int64, np.bool_, np.float16]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(REVERSE_DTYPES), const=st.booleans(), seed=st.integers(0, 2**31))
def test_reverse_v2(data, dt, const, seed):
    shape = data.draw(shapes(1, 5, 1, 4))  # LiteRT reads out of bounds for zero-sized inner dims
    r = len(shape)
    lo = data.draw(st.integers(0, r - 1))
    hi = data.draw(st.integers(lo, r - 1))
    axes = [a - r if data.draw(st.booleans()) else a for a in range(lo, hi + 1)]
    axes = data.draw(st.permutations(axes))
    axis = np.array(axes, np.int32)
    x = rand(shape, dt, rng_of(seed))
    version = data.draw(st.integers(1, 4))
    if const:
        m = single_op_model("REVERSE_V2", [In(shape, dt), Const(axis)], [Out(shape, dt)], version=version)
        got = exact(m, [x])
    else:
        m = single_op_model("REVERSE_V2", [In(shape, dt), In(axis.shape, np.int32)], [Out(shape, dt)], version=version)
        got = exact(m, [x, axis])
    np.testing.assert_array_equal(got[0], np.flip(x, [a % r for a in axes]))


def test_reverse_v2_bfloat16_no_axes_and_empty():
    # LiteRT's Python API cannot carry bfloat16 arrays; empty axes (it reads axes[-1]) and
    # zero-sized inner dimensions crash LiteRT's kernel: acelera alone, against numpy.
    x = np.arange(6, dtype=np.uint16).reshape(2, 3)
    m = single_op_model("REVERSE_V2", [In((2, 3), "BFLOAT16"), Const(np.array([1], np.int32))],
                        [Out((2, 3), "BFLOAT16")], version=4)
    np.testing.assert_array_equal(run_acelera(m, [x])[0], x[:, ::-1])
    m = single_op_model("REVERSE_V2", [In((2, 3)), In((0,), np.int32)], [Out((2, 3))])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run_acelera(m, [x, np.zeros(0, np.int32)])[0], x)
    m = single_op_model("REVERSE_V2", [In((3, 0)), Const(np.array([0], np.int32))], [Out((3, 0))])
    assert run_acelera(m, [np.zeros((3, 0), np.float32)])[0].shape == (3, 0)


@pytest.mark.parametrize("axes", [[0, 2], [1, 1], [3], [-4]])
def test_reverse_v2_bad_axes_fail_at_invoke(axes):
    m = single_op_model("REVERSE_V2", [In((2, 3, 4)), In((len(axes),), np.int32)], [Out((2, 3, 4))])
    ins = [np.zeros((2, 3, 4), np.float32), np.array(axes, np.int32)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    m = single_op_model("REVERSE_V2", [In((2, 3, 4)), Const(np.array(axes, np.int32))], [Out((2, 3, 4))])
    allocate_error(m)


@pytest.mark.parametrize("case", ["axis_int64", "axis_2d", "too_many_axes", "rank_9", "string", "out_type"])
def test_reverse_v2_bad_models(case):
    x, axis, out = In((2, 3)), In((1,), np.int32), Out((2, 3))
    if case == "axis_int64":
        axis = In((1,), np.int64)
    elif case == "axis_2d":
        axis = In((1, 1), np.int32)
    elif case == "too_many_axes":
        axis = In((3,), np.int32)
    elif case == "rank_9":
        x, out = In((1,) * 9), Out((1,) * 9)
    elif case == "string":
        x, out = In((2, 3), np.bytes_), Out((2, 3), np.bytes_)
    elif case == "out_type":
        out = Out((2, 3), np.int32)
    allocate_error(single_op_model("REVERSE_V2", [x, axis], [out]), UnsupportedOpError)


@SETTINGS
@given(data=st.data(), dt=st.sampled_from([np.float32, np.int32, np.uint8, np.int16, np.int64]),
       len_dt=st.sampled_from([np.int32, np.int64]), seed=st.integers(0, 2**31))
def test_reverse_sequence(data, dt, len_dt, seed):
    shape = data.draw(shapes(2, 4, 1, 5))
    seq_dim, batch_dim = data.draw(st.permutations(range(len(shape))))[:2]
    rng = rng_of(seed)
    lengths = rng.integers(-1, shape[seq_dim] + 1, shape[batch_dim]).astype(len_dt)
    lengths[0] = max(lengths[0], 0)  # LiteRT checks only the first length; negatives pass through
    m = single_op_model("REVERSE_SEQUENCE", [In(shape, dt), In((shape[batch_dim],), len_dt)], [Out(shape, dt)],
                        seq_dim=seq_dim, batch_dim=batch_dim)
    exact(m, [rand(shape, dt, rng), lengths])


def test_reverse_sequence_too_long_fails_at_invoke():
    m = single_op_model("REVERSE_SEQUENCE", [In((3, 4)), In((3,), np.int64)], [Out((3, 4))], seq_dim=1, batch_dim=0)
    ins = [np.zeros((3, 4), np.float32), np.array([5, 4, 1], np.int64)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    # LiteRT checks only seq_lengths[0] and then writes out of bounds; acelera checks them all
    invoke_error(m, [np.zeros((3, 4), np.float32), np.array([1, 9, 1], np.int64)])


@pytest.mark.parametrize("case", ["same_dims", "seq_dim_range", "negative_dim", "batch_mismatch", "int8",
                                  "lengths_float", "lengths_2d"])
def test_reverse_sequence_bad_models(case):
    x, lens, out, opts = In((3, 4)), In((3,), np.int32), Out((3, 4)), {"seq_dim": 1, "batch_dim": 0}
    if case == "same_dims":
        opts = {"seq_dim": 0, "batch_dim": 0}
    elif case == "seq_dim_range":
        opts = {"seq_dim": 2, "batch_dim": 0}
    elif case == "negative_dim":
        opts = {"seq_dim": 1, "batch_dim": -2}
    elif case == "batch_mismatch":
        lens = In((4,), np.int32)
    elif case == "int8":
        x, out = In((3, 4), np.int8), Out((3, 4), np.int8)
    elif case == "lengths_float":
        lens = In((3,))
    elif case == "lengths_2d":
        lens = In((3, 1), np.int32)
    allocate_error(single_op_model("REVERSE_SEQUENCE", [x, lens], [out], **opts), UnsupportedOpError)


# --- MATRIX_DIAG / MATRIX_SET_DIAG -------------------------------------------------------------

DIAG_DTYPES = [np.float32, np.int64, np.int32, np.int16, np.int8, np.uint8]


@pytest.mark.parametrize("dt", DIAG_DTYPES)
@pytest.mark.parametrize("shape", [(4,), (1,), (2, 3), (2, 2, 3), (0,), (2, 0), (0, 3)])
def test_matrix_diag(dt, shape):
    x = rand(shape, dt, rng_of(5))
    got = exact(single_op_model("MATRIX_DIAG", [In(shape, dt)], [Out(shape + shape[-1:], dt)]), [x])
    if x.size:
        np.testing.assert_array_equal(np.diagonal(got[0], axis1=-2, axis2=-1), x)


def test_matrix_diag_quantized_writes_raw_zero():
    q = (0.5, 10)
    got = exact(single_op_model("MATRIX_DIAG", [In((3,), np.int8, q)], [Out((3, 3), np.int8, q)]),
                [np.array([1, 2, 3], np.int8)])
    assert got[0][0, 1] == 0


@pytest.mark.parametrize("dt", DIAG_DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3), (4, 2), (2, 3, 4), (2, 2, 3, 3), (0, 2, 2), (3, 0)])
def test_matrix_set_diag(dt, shape):
    rng = rng_of(6)
    x = rand(shape, dt, rng)
    d = rand(shape[:-2] + (min(shape[-2:]),), dt, rng)
    got = exact(single_op_model("MATRIX_SET_DIAG", [In(shape, dt), In(d.shape, dt)], [Out(shape, dt)]), [x, d])
    if x.size:
        np.testing.assert_array_equal(np.diagonal(got[0], axis1=-2, axis2=-1), d)


@pytest.mark.parametrize("op,ins,out", [
    ("MATRIX_DIAG", [In(())], Out((1, 1))),
    ("MATRIX_DIAG", [In((3,), np.bool_)], Out((3, 3), np.bool_)),
    ("MATRIX_DIAG", [In((3,))], Out((3, 3), np.int32)),
    ("MATRIX_SET_DIAG", [In((3,)), In((3,))], Out((3,))),
    ("MATRIX_SET_DIAG", [In((2, 3, 3)), In((3,))], Out((2, 3, 3))),
    ("MATRIX_SET_DIAG", [In((3, 3)), In((3,), np.int32)], Out((3, 3))),
    ("MATRIX_SET_DIAG", [In((3, 3), np.float16), In((3,), np.float16)], Out((3, 3), np.float16)),
])
def test_matrix_diag_bad_models(op, ins, out):
    allocate_error(single_op_model(op, ins, [out]), UnsupportedOpError)


# --- CUMSUM ----------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from([np.float32, np.int32, np.int64]), exclusive=st.booleans(),
       reverse=st.booleans(), const=st.booleans(), seed=st.integers(0, 2**31))
def test_cumsum(data, dt, exclusive, reverse, const, seed):
    shape = data.draw(shapes(1, 4, 0, 6))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = rand(shape, dt, rng_of(seed))
    a = np.array(axis, np.int32)
    opts = {"exclusive": exclusive, "reverse": reverse}
    if const:
        m = single_op_model("CUMSUM", [In(shape, dt), Const(a, shape=())], [Out(shape, dt)], **opts)
        exact(m, [x])
    else:
        m = single_op_model("CUMSUM", [In(shape, dt), In((), np.int32)], [Out(shape, dt)], **opts)
        exact(m, [x, a])


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_float_order_and_specials(exclusive, reverse):
    x = np.array([-0.0, 1e8, 1.0, -1e8, 3.0, 1e-3, np.inf, -np.inf, np.nan, 2.0], np.float32)
    m = single_op_model("CUMSUM", [In((10,)), In((), np.int32)], [Out((10,))], exclusive=exclusive, reverse=reverse)
    exact(m, [x, np.int32(0)])
    exact(m, [np.array([-0.0] * 10, np.float32), np.int32(0)])  # the scan starts from +0.0
    x = (rng_of(7).standard_normal(4000) * 1e4).astype(np.float32)
    m = single_op_model("CUMSUM", [In((4000,)), In((), np.int32)], [Out((4000,))], exclusive=exclusive, reverse=reverse)
    exact(m, [x, np.int32(-1)])


def test_cumsum_integer_wraps():
    m = single_op_model("CUMSUM", [In((3,), np.int32), In((), np.int32)], [Out((3,), np.int32)])
    got = exact(m, [np.array([2**31 - 1, 5, 7], np.int32), np.int32(0)])
    assert got[0][1] == -(2**31) + 4


def test_cumsum_bad_axis_fails():
    m = single_op_model("CUMSUM", [In((2, 3)), In((), np.int32)], [Out((2, 3))])
    ins = [np.ones((2, 3), np.float32), np.int32(2)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    invoke_error(m, [ins[0], np.int32(-3)])
    allocate_error(single_op_model("CUMSUM", [In((2, 3)), Const(np.array(5, np.int32), shape=())], [Out((2, 3))]))


@pytest.mark.parametrize("case", ["axis_int64", "axis_vector", "scalar", "int8", "out_type"])
def test_cumsum_bad_models(case):
    x, axis, out = In((2, 3)), In((), np.int32), Out((2, 3))
    if case == "axis_int64":
        axis = In((), np.int64)
    elif case == "axis_vector":
        axis = In((2,), np.int32)
    elif case == "scalar":
        x, out = In(()), Out(())
    elif case == "int8":
        x, out = In((2, 3), np.int8), Out((2, 3), np.int8)
    elif case == "out_type":
        out = Out((2, 3), np.int32)
    allocate_error(single_op_model("CUMSUM", [x, axis], [out]), UnsupportedOpError)


# --- DYNAMIC_UPDATE_SLICE / DILATE ---------------------------------------------------------------

DUS_DTYPES = [np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_, np.float16, np.float64,
              np.uint16, np.uint32, np.uint64, np.complex64]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(DUS_DTYPES), idx_dt=st.sampled_from([np.int32, np.int64]),
       version=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_dynamic_update_slice(data, dt, idx_dt, version, seed):
    shape = data.draw(shapes(0, 4, 0, 5))
    upd = tuple(data.draw(st.integers(0, d)) for d in shape)
    start = np.array([data.draw(st.integers(-3, d + 3)) for d in shape], idx_dt)
    rng = rng_of(seed)
    x, u = rand(shape, dt, rng), rand(upd, dt, rng)
    m = single_op_model("DYNAMIC_UPDATE_SLICE", [In(shape, dt), In(upd, dt), In((len(shape),), idx_dt)],
                        [Out(shape, dt)], version=version)
    got = exact(m, [x, u, start])
    begin = [min(max(0, int(s)), d - ud) for s, d, ud in zip(start, shape, upd)]
    want = x.copy()
    want[tuple(slice(b, b + ud) for b, ud in zip(begin, upd))] = u
    np.testing.assert_array_equal(got[0], want)


def test_dynamic_update_slice_int4():
    # acelera and LiteRT's Python API both hold INT4 values one per int8
    m = single_op_model("DYNAMIC_UPDATE_SLICE", [In((2, 4), "INT4"), In((1, 2), "INT4"), In((2,), np.int64)],
                        [Out((2, 4), "INT4")], version=6)
    x = np.array([[1, 2, 3, 4], [-8, 7, 0, -1]], np.int8)
    got = exact(m, [x, np.array([[-5, 6]], np.int8), np.array([1, 3], np.int64)])
    assert got[0].tolist() == [[1, 2, 3, 4], [-8, 7, -5, 6]]


def test_shape_and_rank_of_resource():
    b = ModelBuilder()
    h = b.add_tensor("h", (), "RESOURCE")
    s = b.add_tensor("s", (0,), np.int32)
    r = b.add_tensor("r", (), np.int32)
    b.add_operator("VAR_HANDLE", [], [h], shared_name="v")
    b.add_operator("SHAPE", [h], [s], out_type=I32)
    b.add_operator("RANK", [h], [r])
    b.mark_outputs(s, r)
    got = exact(b.build(), [])
    assert got[0].shape == (0,) and int(got[1]) == 0


@pytest.mark.parametrize("case", ["update_bigger", "update_rank", "indices_len", "indices_2d", "indices_float",
                                  "types_differ", "string", "out_type"])
def test_dynamic_update_slice_bad_models(case):
    x, u, idx, out = In((3, 4)), In((2, 2)), In((2,), np.int32), Out((3, 4))
    if case == "update_bigger":
        u = In((2, 5))
    elif case == "update_rank":
        u = In((2,))
    elif case == "indices_len":
        idx = In((3,), np.int32)
    elif case == "indices_2d":
        idx = In((1, 2), np.int32)
    elif case == "indices_float":
        idx = In((2,))
    elif case == "types_differ":
        u = In((2, 2), np.int32)
    elif case == "string":
        x, u, out = In((3, 4), np.bytes_), In((2, 2), np.bytes_), Out((3, 4), np.bytes_)
    elif case == "out_type":
        out = Out((3, 4), np.int32)
    allocate_error(single_op_model("DYNAMIC_UPDATE_SLICE", [x, u, idx], [out]), UnsupportedOpError)


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(DUS_DTYPES), const=st.booleans(), seed=st.integers(0, 2**31))
def test_dilate(data, dt, const, seed):
    shape = data.draw(shapes(1, 4, 1, 4))
    dil = np.array([data.draw(st.integers(1, 3)) for _ in shape], np.int32)
    out = tuple((s - 1) * int(d) + 1 for s, d in zip(shape, dil))
    rng = rng_of(seed)
    x, pad = rand(shape, dt, rng), rand((), dt, rng)
    if const:
        m = single_op_model("DILATE", [In(shape, dt), Const(dil), In((), dt)], [Out(out, dt)])
        got = exact(m, [x, pad])
    else:
        m = single_op_model("DILATE", [In(shape, dt), In((len(shape),), np.int32), In((), dt)], [Out(out, dt)])
        got = exact(m, [x, dil, pad])
    np.testing.assert_array_equal(got[0][tuple(slice(None, None, int(d)) for d in dil)], x)


def test_dilate_bad_factor_fails_at_invoke():
    m = single_op_model("DILATE", [In((2, 3)), In((2,), np.int32), In(())], [Out((3, 3))])
    ins = [np.ones((2, 3), np.float32), np.array([0, 1], np.int32), np.float32(1)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    # LiteRT checks only the first factor; acelera checks them all
    invoke_error(m, [ins[0], np.array([1, -2], np.int32), ins[2]])
    allocate_error(single_op_model("DILATE", [In((2, 3)), Const(np.array([2, 0], np.int32)), In(())], [Out((3, 3))]))


@pytest.mark.parametrize("case", ["scalar", "dilations_len", "dilations_int64", "pad_type", "pad_empty", "string"])
def test_dilate_bad_models(case):
    x, dil, pad, out = In((2, 3)), In((2,), np.int32), In(()), Out((3, 5))
    if case == "scalar":
        x, dil = In(()), In((0,), np.int32)
    elif case == "dilations_len":
        dil = In((3,), np.int32)
    elif case == "dilations_int64":
        dil = In((2,), np.int64)
    elif case == "pad_type":
        pad = In((), np.int32)
    elif case == "pad_empty":
        pad = In((0,))
    elif case == "string":
        x, pad, out = In((2, 3), np.bytes_), In((), np.bytes_), Out((3, 5), np.bytes_)
    allocate_error(single_op_model("DILATE", [x, dil, pad], [out]), UnsupportedOpError)


# --- WHERE / UNIQUE / SPARSE_TO_DENSE ------------------------------------------------------------

WHERE_DTYPES = [np.bool_, np.float32, np.int64, np.int32, np.int8, np.uint8, np.uint32]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(WHERE_DTYPES), version=st.integers(1, 2), seed=st.integers(0, 2**31))
def test_where(data, dt, version, seed):
    shape = data.draw(shapes(1, 4, 0, 5))
    rng = rng_of(seed)
    cond = np.where(rng.integers(0, 3, shape) == 0, rand(shape, dt, rng), np.zeros(shape, dt)).astype(dt)
    m = single_op_model("WHERE", [In(shape, dt)], [Out((1, len(shape)), np.int64)], version=version)
    got = exact(m, [cond])
    np.testing.assert_array_equal(got[0], np.argwhere(cond))


def test_where_float_specials_and_const():
    x = np.array([np.nan, -0.0, 0.0, 1, np.inf], np.float32)
    assert exact(single_op_model("WHERE", [In((5,))], [Out((1, 1), np.int64)]), [x])[0].ravel().tolist() == [0, 3, 4]
    m = single_op_model("WHERE", [Const(np.array([[True, False], [False, True]]))], [Out((2, 2), np.int64)])
    assert exact(m, [])[0].tolist() == [[0, 0], [1, 1]]


@pytest.mark.parametrize("case", ["scalar", "int16", "out_type", "three_inputs"])
def test_where_bad_models(case):
    ins, out = [In((3,), np.bool_)], Out((1, 1), np.int64)
    if case == "scalar":
        ins = [In((), np.bool_)]
    elif case == "int16":
        ins = [In((3,), np.int16)]
    elif case == "out_type":
        out = Out((1, 1), np.int32)
    elif case == "three_inputs":
        ins = [In((3,), np.bool_), In((3,)), In((3,))]
    allocate_error(single_op_model("WHERE", ins, [out]), UnsupportedOpError)


UNIQUE_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.float32, np.uint8]


@SETTINGS
@given(dt=st.sampled_from(UNIQUE_DTYPES), idx_type=st.sampled_from([I32, I64]), n=st.integers(0, 30),
       spread=st.integers(1, 100), seed=st.integers(0, 2**31))
def test_unique(dt, idx_type, n, spread, seed):
    lo = 0 if np.dtype(dt).kind == "u" else -spread // 2
    x = rng_of(seed).integers(lo, lo + spread, n).astype(dt)
    idx_dt = np.int64 if idx_type == I64 else np.int32
    m = single_op_model("UNIQUE", [In((n,), dt)], [Out((n,), dt), Out((n,), idx_dt)], idx_out_type=idx_type)
    vals, idx = exact(m, [x])
    np.testing.assert_array_equal(vals[idx], x)


@pytest.mark.parametrize("x", [
    [1.0, np.nan, -0.0, 0.0, 3.0, np.nan, -1.0, np.nan, -5.0, 0.5, np.nan],  # NaN: index of the smallest so far
    [np.nan, 1.0, 2.0, np.nan],  # a leading NaN swallows everything
    [0.0, -0.0, 2.0, -0.0],  # -0.0 == 0.0, the first spelling is kept
    [3.0, np.nan, 2.0, np.nan, 2.0, 1.0, np.nan, np.inf, np.nan],
    [np.inf, np.nan, np.inf, -np.inf, np.nan],
])
def test_unique_float_specials(x):
    x = np.array(x, np.float32)
    m = single_op_model("UNIQUE", [In(x.shape)], [Out(x.shape), Out(x.shape, np.int32)], idx_out_type=I32)
    exact(m, [x])


@pytest.mark.parametrize("case", ["matrix", "idx_type", "values_type", "bool"])
def test_unique_bad_models(case):
    x, outs, idx_type = In((4,)), [Out((4,)), Out((4,), np.int32)], I32
    if case == "matrix":
        x = In((2, 2))
    elif case == "idx_type":
        idx_type = I64
    elif case == "values_type":
        outs[0] = Out((4,), np.int32)
    elif case == "bool":
        x, outs[0] = In((4,), np.bool_), Out((4,), np.bool_)
    allocate_error(single_op_model("UNIQUE", [x], outs, idx_out_type=idx_type), UnsupportedOpError)


SPARSE_DTYPES = [np.float32, np.int32, np.int64, np.int8, np.uint8]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(SPARSE_DTYPES), idx_dt=st.sampled_from([np.int32, np.int64]),
       shape_dt=st.sampled_from([np.int32, np.int64]), scalar_value=st.booleans(), version=st.integers(1, 3),
       seed=st.integers(0, 2**31))
def test_sparse_to_dense(data, dt, idx_dt, shape_dt, scalar_value, version, seed):
    out_shape = data.draw(shapes(1, 4, 1, 4))
    n = data.draw(st.integers(0, 8))
    rng = rng_of(seed)
    coords = np.stack([rng.integers(0, d, n) for d in out_shape], axis=1).astype(idx_dt)  # repeats allowed
    one_d = len(out_shape) == 1 and data.draw(st.booleans())
    indices = coords[:, 0] if one_d else coords
    values = rand((), dt, rng) if scalar_value else rand((n,), dt, rng)
    m = single_op_model("SPARSE_TO_DENSE", [In(indices.shape, idx_dt), In((len(out_shape),), shape_dt),
                                            In(values.shape, dt), In((), dt)], [Out(out_shape, dt)], version=version)
    exact(m, [indices, np.array(out_shape, shape_dt), values, rand((), dt, rng)])


def test_sparse_to_dense_scalar_index_and_const_shape():
    m = single_op_model("SPARSE_TO_DENSE", [In((), np.int32), In((1,), np.int32), In(()), In(())], [Out((3,))])
    assert exact(m, [np.int32(1), np.array([3], np.int32), np.float32(5), np.float32(-1)])[0].tolist() == [-1, 5, -1]
    m = single_op_model("SPARSE_TO_DENSE", [In((3, 4), np.int32), Const(np.array([2, 3, 2, 2], np.int64)), In((3,)),
                                            In(())], [Out((2, 3, 2, 2))])
    exact(m, [np.array([[0, 0, 0, 0], [1, 2, 1, 1], [0, 1, 0, 1]], np.int32), np.array([1, 2, 3], np.float32),
              np.float32(-1)])


@pytest.mark.parametrize("bad", [[1, 3], [1, -1]])
def test_sparse_to_dense_bad_index_fails_at_invoke(bad):
    m = single_op_model("SPARSE_TO_DENSE", [In((2,), np.int32), In((1,), np.int32), In((2,)), In(())], [Out((3,))])
    ins = [np.array(bad, np.int32), np.array([3], np.int32), np.array([5, 6], np.float32), np.float32(-1)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    invoke_error(m, [np.array([0, 1], np.int32), np.array([-3], np.int32), ins[2], ins[3]])


@pytest.mark.parametrize("case", ["rank_5", "indices_3d", "values_2d", "default_vector", "default_type",
                                  "values_count", "indices_width", "one_d_rank_2", "int16", "idx_float",
                                  "shape_2d"])
def test_sparse_to_dense_bad_models(case):
    idx, shape, vals, default, out = In((2, 2), np.int32), In((2,), np.int32), In((2,)), In(()), Out((3, 3))
    if case == "rank_5":
        idx, shape, out = In((2, 5), np.int32), In((5,), np.int32), Out((1,) * 5)
    elif case == "indices_3d":
        idx = In((1, 2, 2), np.int32)
    elif case == "values_2d":
        vals = In((2, 1))
    elif case == "default_vector":
        default = In((2,))
    elif case == "default_type":
        default = In((), np.int32)
    elif case == "values_count":
        vals = In((3,))
    elif case == "indices_width":
        idx = In((2, 3), np.int32)
    elif case == "one_d_rank_2":
        idx = In((2,), np.int32)
    elif case == "int16":
        vals, default, out = In((2,), np.int16), In((), np.int16), Out((3, 3), np.int16)
    elif case == "idx_float":
        idx = In((2, 2))
    elif case == "shape_2d":
        shape = In((1, 2), np.int32)
    allocate_error(single_op_model("SPARSE_TO_DENSE", [idx, shape, vals, default], [out]), UnsupportedOpError)


# --- TOPK_V2 ---------------------------------------------------------------------------------

TOPK_DTYPES = [np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(TOPK_DTYPES), k_dt=st.sampled_from([np.int32, np.int16]),
       idx_dt=st.sampled_from([np.int32, np.int16]), const_k=st.booleans(), seed=st.integers(0, 2**31))
def test_topk_v2(data, dt, k_dt, idx_dt, const_k, seed):
    shape = data.draw(shapes(1, 3, 1, 12))
    k = data.draw(st.integers(-1, shape[-1]))
    rng = rng_of(seed)
    narrow = data.draw(st.booleans())  # many ties
    x = rng.integers(0, 4, shape).astype(dt) if narrow else rand(shape, dt, rng)
    out = shape[:-1] + (max(k, 0),)
    kk = np.array([k], k_dt)
    k_in = Const(kk) if const_k else In((1,), k_dt)
    m = single_op_model("TOPK_V2", [In(shape, dt), k_in], [Out(out, dt), Out(out, idx_dt)],
                        version=data.draw(st.integers(1, 3)))
    vals = exact(m, [x] if const_k else [x, kk])[0]
    assert vals.shape == out


def test_topk_v2_nan_and_ties():
    x = np.array([np.nan, 1, -0.0, 0.0, np.nan, np.inf, -np.inf, 1, 0.0, -0.0], np.float32)
    for k in (1, 5, 10):
        m = single_op_model("TOPK_V2", [In((10,)), In((), np.int32)], [Out((k,)), Out((k,), np.int32)])
        idx = exact(m, [x, np.int32(k)])[1]
    assert idx.tolist() == [5, 1, 7, 2, 3, 8, 9, 6, 0, 4]
    xx = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1, 5], np.int64)
    m = single_op_model("TOPK_V2", [In((5,), np.int64), In((), np.int32)], [Out((5,), np.int64), Out((5,), np.int32)])
    exact(m, [xx, np.int32(5)])
    xx = np.concatenate([np.array([-128, 127, 0], np.int8), rng_of(8).integers(-128, 128, 400).astype(np.int8)])
    m = single_op_model("TOPK_V2", [In((403,), np.int8), In((), np.int32)], [Out((7,), np.int8), Out((7,), np.int32)])
    exact(m, [xx, np.int32(7)])


def test_topk_v2_k_too_large_fails():
    m = single_op_model("TOPK_V2", [In((2, 4)), In((), np.int32)], [Out((2, 5)), Out((2, 5), np.int32)])
    ins = [np.zeros((2, 4), np.float32), np.int32(5)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    m = single_op_model("TOPK_V2", [In((2, 4)), Const(np.array([5], np.int32))], [Out((2, 5)), Out((2, 5), np.int32)])
    allocate_error(m)


def test_topk_v2_int16_index_range():
    n = 40000
    m = single_op_model("TOPK_V2", [In((1, n)), In((), np.int32)], [Out((1, 2)), Out((1, 2), np.int16)])
    ins = [np.zeros((1, n), np.float32), np.int32(2)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)


@pytest.mark.parametrize("case", ["k_int64", "k_vector", "scalar", "idx_int64", "out_type", "float16"])
def test_topk_v2_bad_models(case):
    x, k, outs = In((2, 4)), In((), np.int32), [Out((2, 2)), Out((2, 2), np.int32)]
    if case == "k_int64":
        k = In((), np.int64)
    elif case == "k_vector":
        k = In((2,), np.int32)
    elif case == "scalar":
        x = In(())
    elif case == "idx_int64":
        outs[1] = Out((2, 2), np.int64)
    elif case == "out_type":
        outs[0] = Out((2, 2), np.int32)
    elif case == "float16":
        x, outs[0] = In((2, 4), np.float16), Out((2, 2), np.float16)
    allocate_error(single_op_model("TOPK_V2", [x, k], outs), UnsupportedOpError)


def _without_options(op: str, ins, outs) -> bytes:
    b = ModelBuilder()
    idx = [b.add_input(f"in{k}", shape, dt) for k, (shape, dt) in enumerate(ins)]
    out = [b.add_tensor(f"out{k}", shape, dt) for k, (shape, dt) in enumerate(outs)]
    b.add_operator(op, idx, out)
    b.ops[-1].options_table = None
    b.mark_outputs(*out)
    return b.build()


def test_missing_builtin_options():
    # UNIQUE and SHAPE need their options (LiteRT's zeroed params name no type); ONE_HOT and
    # CUMSUM fall back to axis 0, not exclusive, not reverse.
    allocate_error(_without_options("UNIQUE", [((4,), np.float32)], [((4,), np.float32), ((4,), np.int32)]),
                   UnsupportedOpError)
    allocate_error(_without_options("SHAPE", [((4,), np.float32)], [((1,), np.int32)]), UnsupportedOpError)
    m = _without_options("ONE_HOT", [((3,), np.int32), ((), np.int32), ((), np.float32), ((), np.float32)],
                         [((3, 3), np.float32)])
    got = exact(m, [np.array([0, 2, 1], np.int32), np.int32(3), np.float32(1), np.float32(0)])
    assert got[0][1].tolist() == [0, 0, 1]
    m = _without_options("CUMSUM", [((3,), np.float32), ((), np.int32)], [((3,), np.float32)])
    assert exact(m, [np.array([1, 2, 3], np.float32), np.int32(0)])[0].tolist() == [1, 3, 6]


# --- graphs with value-dependent shapes ------------------------------------------------------------

def test_graph_shape_fill_reverse():
    b = ModelBuilder()
    x = b.add_input("x", (2, 3), np.float32)
    v = b.add_input("v", (), np.float32)
    s = b.add_tensor("s", (2,), np.int32)
    f = b.add_tensor("f", (2, 3), np.float32)
    c = b.add_tensor("c", (2, 3), np.float32)
    axis = b.add_constant("axis", np.array(1, np.int32), shape=())
    b.add_operator("SHAPE", [x], [s], out_type=I32)
    b.add_operator("FILL", [s, v], [f])
    b.add_operator("CUMSUM", [f, axis], [c], reverse=True)
    b.mark_outputs(c)
    m = b.build()
    got = exact(m, [np.zeros((4, 5), np.float32), np.float32(0.5)])
    assert got[0].shape == (4, 5) and got[0][0].tolist() == [2.5, 2.0, 1.5, 1.0, 0.5]


def test_graph_where_unique_topk():
    b = ModelBuilder()
    cond = b.add_input("cond", (6,), np.bool_)
    k = b.add_input("k", (), np.int32)
    w = b.add_tensor("w", (1, 1), np.int64)
    flat = b.add_tensor("flat", (1,), np.int64)
    u = b.add_tensor("u", (1,), np.int64)
    ui = b.add_tensor("ui", (1,), np.int32)
    uc = b.add_tensor("uc", (1,), np.int32)
    tv = b.add_tensor("tv", (1,), np.int32)
    ti = b.add_tensor("ti", (1,), np.int32)
    shp = b.add_constant("shp", np.array([-1], np.int32))
    b.add_operator("WHERE", [cond], [w])
    b.add_operator("RESHAPE", [w, shp], [flat])
    b.add_operator("UNIQUE", [flat], [u, ui], idx_out_type=I32)
    b.add_operator("CAST", [u], [uc])
    b.add_operator("TOPK_V2", [uc, k], [tv, ti])
    b.mark_outputs(tv, ti)
    m = b.build()
    got = exact(m, [np.array([False, True, True, False, True, True]), np.int32(3)])
    assert got[0].tolist() == [5, 4, 2]


def test_graph_range_one_hot_dynamic():
    b = ModelBuilder()
    lim = b.add_input("lim", (), np.int32)
    depth = b.add_input("depth", (), np.int32)
    start = b.add_constant("start", np.array(0, np.int32), shape=())
    delta = b.add_constant("delta", np.array(1, np.int32), shape=())
    on = b.add_constant("on", np.array(1.0, np.float32), shape=())
    off = b.add_constant("off", np.array(0.0, np.float32), shape=())
    r = b.add_tensor("r", (1,), np.int32)
    o = b.add_tensor("o", (1, 1), np.float32)
    b.add_operator("RANGE", [start, lim, delta], [r])
    b.add_operator("ONE_HOT", [r, depth, on, off], [o], axis=-1)
    b.mark_outputs(o)
    m = b.build()
    got = exact(m, [np.int32(4), np.int32(3)])
    assert got[0].shape == (4, 3)
    assert exact(m, [np.int32(2), np.int32(5)])[0].shape == (2, 5)
