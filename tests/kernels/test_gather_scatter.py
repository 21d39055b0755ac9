"""GATHER_ND, SCATTER_ND, segment reductions and REDUCE_ANY / REDUCE_ALL against LiteRT.

SEGMENT_SUM is not in LiteRT's BUILTIN_REF resolver, so it is compared with the builtin
(optimized, no XNNPACK) resolver, whose SEGMENT_SUM kernel is the same reference code.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import allocate_error, expect_unsupported, rng_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_exact, random_input, run_acelera, run_litert

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.executor import KernelError
from acelera.core.interpreter import Interpreter

EXAMPLES = int(os.environ.get("KERNEL_EXAMPLES", "25"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

GATHER_DTYPES = [np.float32, np.float16, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_]
SCATTER_DTYPES = [np.float32, np.int8, np.uint8, np.int32, np.int64, np.bool_]


def litert_fails(model: bytes, inputs, reference=True) -> bool:
    try:
        run_litert(model, inputs, reference)
    except Exception:
        return True
    return False


def invoke_error(model: bytes, inputs) -> KernelError:
    with pytest.raises(KernelError) as e:
        run_acelera(model, inputs)
    assert "node 0" in str(e.value)
    return e.value


def random_indices(rng, outer: tuple[int, ...], dims: tuple[int, ...], dtype) -> np.ndarray:
    cols = [rng.integers(0, d, size=outer) for d in dims]
    return np.stack(cols, -1).astype(dtype) if cols else np.zeros(outer + (0,), dtype)


# --- GATHER_ND ----------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from(GATHER_DTYPES),
       it=st.sampled_from([np.int16, np.int32, np.int64]), const=st.booleans(), seed=st.integers(0, 2**31))
def test_gather_nd(data, dt, it, const, seed):
    rng = rng_of(seed)
    pshape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    nd = data.draw(st.integers(1, len(pshape)))
    outer = tuple(data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    idx = random_indices(rng, outer, pshape[:nd], it)
    out = outer + pshape[nd:]
    x = random_input(pshape, dt, rng)
    if const:
        m = single_op_model("GATHER_ND", [In(pshape, dt), Const(idx)], [Out(out, dt)], version=6)
        got = assert_exact(m, [x])
    else:
        m = single_op_model("GATHER_ND", [In(pshape, dt), In(idx.shape, it)], [Out(out, dt)], version=6)
        got = assert_exact(m, [x, idx])
    want = np.asarray([x[tuple(r)] for r in idx.reshape(-1, nd)]).reshape(out)
    np.testing.assert_array_equal(got[0], want)


def test_gather_nd_quantized_keeps_raw_values():
    x = np.arange(-12, 12, dtype=np.int8).reshape(4, 6)
    m = single_op_model("GATHER_ND", [In((4, 6), np.int8, (0.5, 3)), Const(np.array([[3], [0], [3]], np.int32))],
                        [Out((3, 6), np.int8, (0.5, 3))], version=6)
    assert_exact(m, [x])


def test_gather_nd_strings():
    x = np.array([[b"a", b"bb"], [b"", b"dddd"], [b"e\x00f", b"g"]], object)
    for idx, out in (([[2], [0], [2]], (3, 2)), ([[1, 1], [2, 0]], (2,))):
        idx = np.array(idx, np.int32)
        m = single_op_model("GATHER_ND", [In((3, 2), np.bytes_), In(idx.shape, np.int32)], [Out(out, np.bytes_)],
                            version=6)
        got = assert_exact(m, [x, idx])
        assert got[0].dtype == object and all(isinstance(v, bytes) for v in got[0].reshape(-1))


def test_gather_nd_bfloat16_moves_bits():
    # LiteRT's Python API cannot return bfloat16 arrays; the kernel only moves 16-bit patterns.
    b = ModelBuilder()
    c = b.add_constant("p", (np.arange(12, dtype=np.uint16) * 1234).reshape(3, 4))
    b.tensors[c].type = 18  # BFLOAT16
    i = b.add_input("i", (2, 2), np.int32)
    o = b.add_tensor("o", (2,), "BFLOAT16")
    b.add_operator("GATHER_ND", [c, i], [o], version=6)
    b.mark_outputs(o)
    got = run_acelera(b.build(), [np.array([[2, 3], [0, 1]], np.int32)])[0]
    np.testing.assert_array_equal(got, np.array([11 * 1234, 1234], np.uint16))


def test_gather_nd_whole_rows_and_empty():
    x = random_input((3, 4), np.float32, rng_of(1))
    m = single_op_model("GATHER_ND", [In((3, 4)), In((0, 1), np.int32)], [Out((0, 4))], version=6)
    assert run_acelera(m, [x, np.zeros((0, 1), np.int32)])[0].shape == (0, 4)
    # Empty params with empty indices are fine; empty params with indices fail like LiteRT.
    m = single_op_model("GATHER_ND", [In((0, 4)), In((2, 0, 1), np.int32)], [Out((2, 0, 4))], version=6)
    assert run_acelera(m, [np.zeros((0, 4), np.float32), np.zeros((2, 0, 1), np.int32)])[0].shape == (2, 0, 4)
    m = single_op_model("GATHER_ND", [In((0, 4)), In((1, 1), np.int32)], [Out((1, 4))], version=6)
    ins = [np.zeros((0, 4), np.float32), np.zeros((1, 1), np.int32)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)


def test_gather_nd_zero_depth_indices_fail_like_litert():
    m = single_op_model("GATHER_ND", [In((2, 3)), In((4, 0), np.int32)], [Out((4, 2, 3))], version=6)
    ins = [random_input((2, 3), np.float32, rng_of(2)), np.zeros((4, 0), np.int32)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)


@pytest.mark.parametrize("bad", [[[3, 0]], [[0, 4]], [[-1, 0]], [[2, -3]]])
@pytest.mark.parametrize("it", [np.int16, np.int64])
def test_gather_nd_bad_index_fails_at_invoke(bad, it):
    m = single_op_model("GATHER_ND", [In((3, 4)), In((1, 2), it)], [Out((1,))], version=6)
    ins = [random_input((3, 4), np.float32, rng_of(3)), np.array(bad, it)]
    assert litert_fails(m, ins)
    msg = str(invoke_error(m, ins))
    assert "out of bounds" in msg or "negative" in msg
    it_ = Interpreter(model_content=m)
    it_.allocate_tensors()  # the shape pass never fails on index values


def test_gather_nd_bad_index_string():
    m = single_op_model("GATHER_ND", [In((2,), np.bytes_), In((1, 1), np.int32)], [Out((1,), np.bytes_)], version=6)
    ins = [np.array([b"x", b"y"], object), np.array([[2]], np.int32)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)


@pytest.mark.parametrize("inputs,outputs,match", [
    ([In((3, 4)), In((2, 3), np.int32)], [Out((2,))], "depth"),
    ([In((3, 4)), In((2, 1), np.float32)], [Out((2, 4))], "indices"),
    ([In((3, 4)), In((2, 1), np.uint8)], [Out((2, 4))], "indices"),
    ([In((3, 4)), In((2, 1), np.int32)], [Out((2, 4), np.int32)], "output type"),
    ([In(()), In((1, 0), np.int32)], [Out((1,))], "vector"),
    ([In((3,)), In((), np.int32)], [Out(())], "vector"),
    ([In((3,), np.complex64), In((1, 1), np.int32)], [Out((1,), np.complex64)], "COMPLEX64"),
])
def test_gather_nd_refused_at_allocate(inputs, outputs, match):
    m = single_op_model("GATHER_ND", inputs, outputs, version=6)
    expect_unsupported(m, match)


# --- SCATTER_ND ---------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from(SCATTER_DTYPES), const_shape=st.booleans(), seed=st.integers(0, 2**31))
def test_scatter_nd(data, dt, const_shape, seed):
    rng = rng_of(seed)
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    ix = data.draw(st.integers(1, len(shape)))
    outer = tuple(data.draw(st.lists(st.integers(1, 4), min_size=int(ix == len(shape)), max_size=2)))
    idx = random_indices(rng, outer, shape[:ix], np.int32)  # small dims: duplicates are common
    ushape = outer + shape[ix:]
    u = random_input(ushape, dt, rng, -10, 10)
    shape_arr = np.array(shape, np.int32)
    if const_shape:
        m = single_op_model("SCATTER_ND", [In(idx.shape, np.int32), In(ushape, dt), Const(shape_arr)], [Out(shape, dt)])
        got = assert_exact(m, [idx, u])
    else:
        m = single_op_model("SCATTER_ND", [In(idx.shape, np.int32), In(ushape, dt), In((len(shape),), np.int32)],
                            [Out(shape, dt)])
        got = assert_exact(m, [idx, u, shape_arr])
    assert got[0].shape == shape


def test_scatter_nd_duplicates_add_and_wrap():
    idx = np.array([[1], [1], [0], [1]], np.int32)
    for dt, vals in ((np.int8, [100, 100, -128, 100]), (np.uint8, [200, 100, 7, 1]), (np.bool_, [1, 0, 0, 1])):
        u = np.array(vals, np.int64).astype(dt)
        m = single_op_model("SCATTER_ND", [In((4, 1), np.int32), In((4,), dt), Const(np.array([3], np.int32))],
                            [Out((3,), dt)])
        got = assert_exact(m, [idx, u])[0]
        if dt == np.int8:
            assert got.tolist() == [-128, 44, 0]  # 300 wraps to 44
    u = np.array([0.1, 0.2, 0.3, 1e8], np.float32)
    m = single_op_model("SCATTER_ND", [In((4, 1), np.int32), In((4,)), Const(np.array([2], np.int32))], [Out((2,))])
    assert_exact(m, [idx, u])  # float additions in LiteRT's order


def test_scatter_nd_constant_indices():
    idx = np.array([[1, 0], [2, 1], [1, 0], [0, 2]], np.int32)  # a duplicate: added in order
    u = np.array([[0.1, 0.2], [1e8, 3.0], [0.3, -0.4], [5.0, 6.0]], np.float32)
    m = single_op_model("SCATTER_ND", [Const(idx), In((4, 2)), Const(np.array([3, 3, 2], np.int32))],
                        [Out((3, 3, 2))])
    got = assert_exact(m, [u])[0]
    assert got.shape == (3, 3, 2) and got[1, 0].tolist() == (u[0] + u[2]).tolist()
    bad = single_op_model("SCATTER_ND", [Const(np.array([[0], [3]], np.int32)), In((2,)),
                                         Const(np.array([3], np.int32))], [Out((3,))])
    Interpreter(model_content=bad).allocate_tensors()
    assert "out of bounds" in str(invoke_error(bad, [np.ones(2, np.float32)]))


def test_scatter_nd_zero_depth_indices_add_whole_updates():
    u = random_input((3, 2, 2), np.float32, rng_of(4))
    m = single_op_model("SCATTER_ND", [In((3, 0), np.int32), In((3, 2, 2)), Const(np.array([2, 2], np.int32))],
                        [Out((2, 2))])
    got = assert_exact(m, [np.zeros((3, 0), np.int32), u])[0]
    np.testing.assert_allclose(got, u.sum(0), rtol=1e-6)


def test_scatter_nd_bad_index_fails_at_invoke():
    m = single_op_model("SCATTER_ND", [In((2, 2), np.int32), In((2,)), In((2,), np.int32)], [Out((3, 3))])
    Interpreter(model_content=m).allocate_tensors()
    for bad in ([[0, 0], [3, 0]], [[0, -1], [1, 1]]):
        ins = [np.array(bad, np.int32), np.ones(2, np.float32), np.array([3, 3], np.int32)]
        assert litert_fails(m, ins)
        assert "out of bounds" in str(invoke_error(m, ins))


def test_scatter_nd_shape_input_mismatch_fails_at_invoke():
    m = single_op_model("SCATTER_ND", [In((2, 1), np.int32), In((2, 3)), In((2,), np.int32)], [Out((4, 3))])
    ins = [np.array([[0], [1]], np.int32), np.ones((2, 3), np.float32), np.array([4, 5], np.int32)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    ins[2] = np.array([4, -3], np.int32)
    invoke_error(m, ins)


def test_scatter_nd_hostile_shape_is_refused_not_allocated():
    m = single_op_model("SCATTER_ND", [In((1, 1), np.int32), In((1, 4)), In((2,), np.int32)], [Out((1, 4))])
    ins = [np.zeros((1, 1), np.int32), np.ones((1, 4), np.float32), np.array([2**31 - 1, 4], np.int32)]
    assert "size limit" in str(invoke_error(m, ins))


@pytest.mark.parametrize("inputs,outputs,match", [
    ([In((2, 1), np.int64), In((2,)), Const(np.array([3], np.int64))], [Out((3,))], "INT64"),
    ([In((2, 1), np.int32), In((2,)), Const(np.array([3], np.int64))], [Out((3,))], "same type"),
    ([In((2, 1), np.int32), In((2,), np.int16), Const(np.array([3], np.int32))], [Out((3,), np.int16)], "INT16"),
    ([In((2, 1), np.int32), In((2,), np.float16), Const(np.array([3], np.int32))], [Out((3,), np.float16)], "FLOAT16"),
    ([In((2, 1), np.int32), In((3,)), Const(np.array([3], np.int32))], [Out((3,))], "disagree"),
    ([In((2, 1), np.int32), In((2, 2)), Const(np.array([3, 3], np.int32))], [Out((3, 3))], "does not match"),
    ([In((2, 1), np.int32), In((2,)), Const(np.array([3], np.int32))], [Out((3,), np.int32)], "output type"),
    ([In((1,), np.int32), In(()), Const(np.array([3], np.int32))], [Out((3,))], "rank"),
])
def test_scatter_nd_refused_at_allocate(inputs, outputs, match):
    expect_unsupported(single_op_model("SCATTER_ND", inputs, outputs), match)


# --- SEGMENT_SUM --------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from([np.float32, np.int32]), const_ids=st.booleans(),
       seed=st.integers(0, 2**31))
def test_segment_sum(data, dt, const_ids, seed):
    rng = rng_of(seed)
    n = data.draw(st.integers(1, 8))
    tail = tuple(data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    ids = np.concatenate([[0], np.cumsum(rng.integers(0, 2, n - 1))]).astype(np.int32)
    x = random_input((n,) + tail, dt, rng, -5, 5) if dt == np.float32 else \
        rng.integers(-2**31, 2**31, size=(n,) + tail).astype(dt)  # int sums wrap
    out = (int(ids[-1]) + 1,) + tail
    if const_ids:
        m = single_op_model("SEGMENT_SUM", [In(x.shape, dt), Const(ids)], [Out(out, dt)])
        assert_exact(m, [x], reference="builtin")
    else:
        m = single_op_model("SEGMENT_SUM", [In(x.shape, dt), In(ids.shape, np.int32)], [Out(out, dt)])
        assert_exact(m, [x, ids], reference="builtin")


@pytest.mark.parametrize("ids", [[1, 1, 2], [0, 2, 2], [0, 1, 0]])
def test_segment_sum_bad_ids(ids):
    ids = np.array(ids, np.int32)
    m = single_op_model("SEGMENT_SUM", [In((3, 2)), In((3,), np.int32)], [Out((3, 2))])
    ins = [np.ones((3, 2), np.float32), ids]
    assert litert_fails(m, ins, "builtin")
    invoke_error(m, ins)
    allocate_error(single_op_model("SEGMENT_SUM", [In((3, 2)), Const(ids)], [Out((3, 2))]))


@pytest.mark.parametrize("inputs,match", [
    ([In((3, 2), np.int64), In((3,), np.int32)], "INT64"),
    ([In((3, 2)), In((3,), np.int64)], "INT32"),
    ([In((3, 2)), In((2,), np.int32)], "do not match"),
    ([In((3, 2)), In((3, 1), np.int32)], "do not match"),
])
def test_segment_sum_refused_at_allocate(inputs, match):
    dt = inputs[0].dtype
    expect_unsupported(single_op_model("SEGMENT_SUM", inputs, [Out((3, 2), dt)]), match)


# --- UNSORTED_SEGMENT_* -------------------------------------------------------------------

UNSORTED = ["UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN"]


@pytest.mark.parametrize("op", UNSORTED)
@settings(max_examples=max(8, EXAMPLES // 2), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), dt=st.sampled_from([np.float32, np.int32]), how=st.sampled_from(["const", "input", "vec"]),
       seed=st.integers(0, 2**31))
def test_unsorted_segment(op, data, dt, how, seed):
    rng = rng_of(seed)
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    r = data.draw(st.integers(1, len(shape)))
    num = data.draw(st.integers(1, 5))
    ids = rng.integers(-1, num, size=shape[:r]).astype(np.int32)  # -1 rows are dropped
    x = random_input(shape, dt, rng, -3, 3) if dt == np.float32 else rng.integers(-50, 50, size=shape).astype(dt)
    out = (num,) + shape[r:]
    if how == "const":
        m = single_op_model(op, [In(shape, dt), Const(ids), Const(np.array(num, np.int32), shape=())], [Out(out, dt)])
        assert_exact(m, [x])
    elif how == "input":
        m = single_op_model(op, [In(shape, dt), In(ids.shape, np.int32), In((), np.int32)], [Out(out, dt)])
        assert_exact(m, [x, ids, np.array(num, np.int32)])
    else:
        m = single_op_model(op, [In(shape, dt), In(ids.shape, np.int32), In((1,), np.int32)], [Out(out, dt)])
        assert_exact(m, [x, ids, np.array([num], np.int32)])


@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_unsorted_segment_empty_segments_get_identities(dt):
    ids = np.array([0, 0, 3], np.int32)
    x = np.array([[2, 3], [4, 5], [6, 7]], dt)
    want = {"UNSORTED_SEGMENT_SUM": 0, "UNSORTED_SEGMENT_PROD": 1,
            "UNSORTED_SEGMENT_MAX": np.finfo(dt).min if dt == np.float32 else np.iinfo(dt).min,
            "UNSORTED_SEGMENT_MIN": np.finfo(dt).max if dt == np.float32 else np.iinfo(dt).max}
    for op, init in want.items():
        m = single_op_model(op, [In((3, 2), dt), In((3,), np.int32), In((), np.int32)], [Out((5, 2), dt)])
        got = assert_exact(m, [x, ids, np.array(5, np.int32)])[0]
        assert (got[[1, 2, 4]] == init).all()


@pytest.mark.parametrize("op", ["UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN"])
def test_unsorted_segment_float_specials_bitwise(op):
    x = np.array([[-0.0, np.nan, 0.0], [0.0, 1.0, -0.0], [np.nan, -np.inf, np.inf], [-0.0, np.nan, 0.0]], np.float32)
    ids = np.array([0, 0, 1, 2], np.int32)
    m = single_op_model(op, [In((4, 3)), In((4,), np.int32), In((), np.int32)], [Out((3, 3))])
    ins = [x, ids, np.array(3, np.int32)]
    want, got = run_litert(m, ins)[0], run_acelera(m, ins)[0]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("op", UNSORTED)
def test_unsorted_segment_int_wraps(op):
    x = np.array([2**30, 2**30, 3, -2**31, 2**31 - 1], np.int32)
    ids = np.array([0, 0, 0, 1, 1], np.int32)
    m = single_op_model(op, [In((5,), np.int32), In((5,), np.int32), In((), np.int32)], [Out((2,), np.int32)])
    assert_exact(m, [x, ids, np.array(2, np.int32)])


def test_unsorted_segment_bad_values():
    m = single_op_model("UNSORTED_SEGMENT_SUM", [In((3,)), In((3,), np.int32), In((), np.int32)], [Out((2,))])
    for ids, num in (([0, 2, 1], 2), ([0, 1, 1], -1)):
        ins = [np.ones(3, np.float32), np.array(ids, np.int32), np.array(num, np.int32)]
        assert litert_fails(m, ins)
        invoke_error(m, ins)
    ins = [np.ones(3, np.float32), np.array([0, 1, 1], np.int32), np.array(2**31 - 1, np.int32)]
    m = single_op_model("UNSORTED_SEGMENT_SUM", [In((3, 4096)), In((3,), np.int32), In((), np.int32)], [Out((2, 4096))])
    ins[0] = np.ones((3, 4096), np.float32)
    assert "size limit" in str(invoke_error(m, ins))
    # Constant ids and count are checked when the model is allocated.
    allocate_error(single_op_model("UNSORTED_SEGMENT_MAX", [In((3,)), Const(np.array([0, 5, 1], np.int32)),
                                                            Const(np.array([2], np.int32))], [Out((2,))]))


@pytest.mark.parametrize("inputs,match", [
    ([In((3, 2)), In((2,), np.int32), In((), np.int32)], "prefix"),
    ([In((3, 2)), In((3, 2, 1), np.int32), In((), np.int32)], "prefix"),
    ([In((3, 2)), In((3,), np.int32), In((2,), np.int32)], "scalar"),
    ([In((3, 2)), In((3,), np.int32), In((), np.int64)], "INT32"),
    ([In((3, 2), np.int8), In((3,), np.int32), In((), np.int32)], "INT8"),
])
def test_unsorted_segment_refused_at_allocate(inputs, match):
    dt = inputs[0].dtype
    expect_unsupported(single_op_model("UNSORTED_SEGMENT_PROD", inputs, [Out((2, 2), dt)]), match)


# --- REDUCE_ANY / REDUCE_ALL --------------------------------------------------------------

@pytest.mark.parametrize("op", ["REDUCE_ANY", "REDUCE_ALL"])
@SETTINGS
@given(data=st.data(), keep=st.booleans(), const=st.booleans(), seed=st.integers(0, 2**31))
def test_reduce_any_all(op, data, keep, const, seed):
    rng = rng_of(seed)
    rank = data.draw(st.integers(0, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axes = data.draw(st.lists(st.integers(-max(rank, 1), max(rank, 1) - 1), min_size=1, max_size=3))
    red = {a % rank for a in axes} if rank else set()
    out = tuple(1 if i in red else d for i, d in enumerate(shape)) if keep else \
        tuple(d for i, d in enumerate(shape) if i not in red)
    # mostly-true or mostly-false data so both answers occur
    x = rng.random(shape) < data.draw(st.sampled_from([0.1, 0.5, 0.9]))
    ax = np.array(axes, np.int32)
    if const:
        m = single_op_model(op, [In(shape, np.bool_), Const(ax)], [Out(out, np.bool_)], keep_dims=keep)
        assert_exact(m, [x])
    else:
        m = single_op_model(op, [In(shape, np.bool_), In(ax.shape, np.int32)], [Out(out, np.bool_)], keep_dims=keep)
        assert_exact(m, [x, ax])


@pytest.mark.parametrize("op", ["REDUCE_ANY", "REDUCE_ALL"])
def test_reduce_any_all_empty_axis(op):
    m = single_op_model(op, [In((2, 0, 3), np.bool_), Const(np.array([1], np.int32))], [Out((2, 3), np.bool_)])
    got = run_acelera(m, [np.zeros((2, 0, 3), np.bool_)])[0]
    assert got.dtype == np.bool_ and (got == (op == "REDUCE_ALL")).all()


@pytest.mark.parametrize("op", ["REDUCE_ANY", "REDUCE_ALL"])
@pytest.mark.parametrize("inputs,match", [
    ([In((2, 3)), Const(np.array([1], np.int32))], "FLOAT32"),
    ([In((2, 3), np.int32), Const(np.array([1], np.int32))], "INT32"),
    ([In((2, 3), np.bool_), Const(np.array([1], np.int64))], "axis"),
    ([In((2, 3), np.bool_), Const(np.array([2], np.int32))], "out of range"),
])
def test_reduce_any_all_refused_at_allocate(op, inputs, match):
    dt = inputs[0].dtype
    expect_unsupported(single_op_model(op, inputs, [Out((2,), dt)]), match)
