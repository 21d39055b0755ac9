"""EMBEDDING_LOOKUP, EMBEDDING_LOOKUP_SPARSE, HASHTABLE_LOOKUP, LSH_PROJECTION, SKIP_GRAM and
NON_MAX_SUPPRESSION_V4/V5 against LiteRT's reference kernels."""
from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import expect_unsupported, rng_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_exact, random_input, run_acelera, run_litert

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.errors import AceleraError
from acelera.core.executor import KernelError
from acelera.core.interpreter import Interpreter
from acelera.core.kernels.embedding import fingerprint64

EXAMPLES = int(os.environ.get("KERNEL_EXAMPLES", "25"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

ROW_DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
              np.int64, np.uint64, np.bool_]


def rows_input(shape, dt, rng) -> np.ndarray:
    """Random table rows: any bit pattern for integer types, moderate values for floats and bools."""
    dt = np.dtype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 256, size=tuple(shape) + (dt.itemsize,), dtype=np.uint8).view(dt).reshape(shape)
    return random_input(shape, dt, rng, -5, 5)


def litert_fails(model: bytes, inputs) -> bool:
    try:
        run_litert(model, inputs)
    except Exception:
        return True
    return False


def invoke_error(model: bytes, inputs) -> KernelError:
    with pytest.raises(KernelError) as e:
        run_acelera(model, inputs)
    assert "node 0" in str(e.value)
    return e.value


def allocate_error(model: bytes) -> AceleraError:
    with pytest.raises(AceleraError) as e:
        Interpreter(model_content=model).allocate_tensors()
    assert "node 0" in str(e.value)
    return e.value


def assert_same_strings(model: bytes, inputs) -> np.ndarray:
    want, got = run_litert(model, inputs), run_acelera(model, inputs)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert g.reshape(-1).tolist() == w.reshape(-1).tolist()
    return got


# --- EMBEDDING_LOOKUP ---------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ROW_DTYPES), const=st.booleans(), seed=st.integers(0, 2**31))
def test_embedding_lookup(data, dt, const, seed):
    rng = rng_of(seed)
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=4)))
    n = data.draw(st.integers(0, 6))
    ids = rng.integers(0, shape[0], n).astype(np.int32)
    table = rows_input(shape, dt, rng)
    out = (n,) + shape[1:]
    if const:
        m = single_op_model("EMBEDDING_LOOKUP", [In((n,), np.int32), Const(table)], [Out(out, dt)], version=5)
        assert_exact(m, [ids])
    else:
        m = single_op_model("EMBEDDING_LOOKUP", [In((n,), np.int32), In(shape, dt)], [Out(out, dt)], version=5)
        assert_exact(m, [ids, table])


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_raw_row_ops_complex(dt):
    rng = rng_of(4)
    table = (rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))).astype(dt)
    ids = np.array([2, 0, 2], np.int32)
    m = single_op_model("EMBEDDING_LOOKUP", [In((3,), np.int32), In((3, 2), dt)], [Out((3, 2), dt)], version=5)
    assert_exact(m, [ids, table])
    m = single_op_model("HASHTABLE_LOOKUP", [In((3,), np.int32), Const(np.array([0, 2, 5], np.int32)), In((3, 2), dt)],
                        [Out((3, 2), dt), Out((3,), np.uint8)])
    assert_exact(m, [ids, table])
    m = single_op_model("LSH_PROJECTION", [Const(rng.standard_normal((2, 8)).astype(np.float32)), In((3, 2), dt)],
                        [Out((16,), np.int32)], type=2)
    assert_exact(m, [table])


def test_embedding_lookup_quantized_copies_raw_rows():
    table = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    m = single_op_model("EMBEDDING_LOOKUP", [In((2,), np.int32), Const(table, (0.5, -3))],
                        [Out((2, 4), np.int8, (0.5, -3))], version=3)
    got = assert_exact(m, [np.array([2, 0], np.int32)])[0]
    np.testing.assert_array_equal(got, table[[2, 0]])


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("od", [np.float32, np.float16])
@pytest.mark.parametrize("per_channel", [False, True])
def test_embedding_lookup_hybrid(dt, od, per_channel):
    rng = rng_of(5)
    info = np.iinfo(dt)
    table = rng.integers(info.min, int(info.max) + 1, size=(5, 2, 3)).astype(dt)
    quant = (np.array([0.1, 0.25, 1.5, 0.003, 7.0], np.float32), np.zeros(5, np.int64), 0) if per_channel \
        else (0.37, 0)
    ids = np.array([4, 0, 2, 2, 1, 3], np.int32)
    m = single_op_model("EMBEDDING_LOOKUP", [In((6,), np.int32), Const(table, quant)], [Out((6, 2, 3), od)],
                        version=5)
    got = assert_exact(m, [ids])[0]
    # LiteRT reads uint8 tables as int8 bytes (legacy hybrid models stored int8 weights as uint8).
    scale = quant[0][ids][:, None, None] if per_channel else np.float32(quant[0])
    want = (table[ids].view(np.int8).astype(np.float32) * scale).astype(od)
    np.testing.assert_array_equal(got, want)


def int4_table_model(values: np.ndarray, quant, od, n_ids: int) -> bytes:
    """EMBEDDING_LOOKUP over an INT4 constant (two values per byte, low nibble first)."""
    b = ModelBuilder()
    ids = b.add_input("ids", (n_ids,), np.int32)
    flat = values.reshape(-1).astype(np.int64) & 0xF
    if flat.size % 2:
        flat = np.append(flat, 0)
    c = b.add_constant("table", (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8), quant, shape=values.shape)
    b.tensors[c].type = 17  # INT4
    o = b.add_tensor("out", (n_ids,) + values.shape[1:], od)
    b.add_operator("EMBEDDING_LOOKUP", [ids, c], [o], version=5)
    b.mark_outputs(o)
    return b.build()


@pytest.mark.parametrize("od", [np.float32, np.float16])
@pytest.mark.parametrize("per_channel", [False, True])
def test_embedding_lookup_int4(od, per_channel):
    rng = rng_of(6)
    values = rng.integers(-8, 8, size=(4, 6)).astype(np.int8)
    quant = (np.array([0.5, 0.125, 3.0, 0.01], np.float32), np.zeros(4, np.int64), 0) if per_channel else (0.25, 0)
    ids = np.array([3, 1, 0, 1, 2], np.int32)
    got = assert_exact(int4_table_model(values, quant, od, 5), [ids])[0]
    scale = quant[0][ids][:, None] if per_channel else np.float32(quant[0])
    np.testing.assert_array_equal(got, (values[ids].astype(np.float32) * scale).astype(od))


def test_embedding_lookup_int4_odd_rows_are_dequantized_correctly():
    # With an odd number of values per row LiteRT starts odd rows one nibble early (it unpacks
    # from byte offset // 2); acelera dequantizes the row's own values.
    values = rng_of(7).integers(-8, 8, size=(3, 5)).astype(np.int8)
    ids = np.array([1, 0, 2, 1], np.int32)
    m = int4_table_model(values, (1.0, 0), np.float32, 4)
    got = run_acelera(m, [ids])[0]
    np.testing.assert_array_equal(got, values[ids].astype(np.float32))
    want = run_litert(m, [ids])[0]
    np.testing.assert_array_equal(got[[1, 2]], want[[1, 2]])  # even rows agree


@pytest.mark.parametrize("bad", [3, -1])
def test_embedding_lookup_bad_index_fails_at_invoke(bad):
    for table, od in ((Const(np.ones((3, 2), np.float32)), np.float32), (Const(np.ones((3, 2), np.int8), (0.5, 0)), np.float32)):
        m = single_op_model("EMBEDDING_LOOKUP", [In((2,), np.int32), table], [Out((2, 2), od)], version=5)
        Interpreter(model_content=m).allocate_tensors()
        ins = [np.array([0, bad], np.int32)]
        assert litert_fails(m, ins)
        assert "out of bounds" in str(invoke_error(m, ins))


@pytest.mark.parametrize("inputs,out,match", [
    ([In((2,), np.int64), Const(np.ones((3, 2), np.float32))], Out((2, 2)), "INT32"),
    ([In((2, 1), np.int32), Const(np.ones((3, 2), np.float32))], Out((2, 1, 2)), "vector"),
    ([In((2,), np.int32), Const(np.ones((3,), np.float32))], Out((2,)), "rank"),
    ([In((2,), np.int32), Const(np.ones((3, 2), np.int8), (0.5, 1))], Out((2, 2)), "zero_point"),
    ([In((2,), np.int32), Const(np.ones((3, 2), np.int8), (np.ones(2, np.float32), np.zeros(2, np.int64), 1))],
     Out((2, 2)), "dimension 0"),
    ([In((2,), np.int32), Const(np.ones((3, 2), np.int16), (np.ones(3, np.float32), np.zeros(3, np.int64), 0))],
     Out((2, 2)), "per-channel"),
    ([In((2,), np.int32), Const(np.ones((3, 2), np.float32))], Out((2, 2), np.float16), "dequantize"),
    ([In((2,), np.int32), Const(np.ones((3, 2), np.int8))], Out((2, 2), np.int32), "not supported"),
])
def test_embedding_lookup_refused_at_allocate(inputs, out, match):
    expect_unsupported(single_op_model("EMBEDDING_LOOKUP", inputs, [out], version=5), match)


# --- EMBEDDING_LOOKUP_SPARSE --------------------------------------------------------------

@SETTINGS
@given(data=st.data(), combiner=st.sampled_from([0, 1, 2]), order=st.sampled_from(["sorted", "random"]),
       seed=st.integers(0, 2**31))
def test_embedding_lookup_sparse(data, combiner, order, seed):
    rng = rng_of(seed)
    dense = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    emb = tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    rows = data.draw(st.integers(1, 5))
    n = data.draw(st.integers(0, 8))
    idx = np.stack([rng.integers(0, d, n) for d in dense], 1).astype(np.int32)
    if order == "sorted" and n:
        idx = idx[np.lexsort(idx[:, ::-1].T)]
    ids = rng.integers(0, rows, n).astype(np.int32)
    w = rng.uniform(-1, 2, n).astype(np.float32)
    table = random_input((rows,) + emb, np.float32, rng)
    out = tuple(dense[:-1]) + emb
    m = single_op_model("EMBEDDING_LOOKUP_SPARSE",
                        [In((n,), np.int32), In((n, len(dense)), np.int32), In((len(dense),), np.int32),
                         In((n,), np.float32), Const(table)], [Out(out)], combiner=combiner)
    got = assert_exact(m, [ids, idx, np.array(dense, np.int32), w])
    assert got[0].shape == out


def test_embedding_lookup_sparse_const_dense_shape():
    rng = rng_of(8)
    idx = np.array([[0, 0], [0, 1], [2, 0], [2, 3]], np.int32)
    table = random_input((5, 4), np.float32, rng)
    for combiner in (0, 1, 2, 7):  # LiteRT parses an unknown combiner as SUM
        m = single_op_model("EMBEDDING_LOOKUP_SPARSE",
                            [In((4,), np.int32), Const(idx), Const(np.array([3, 4], np.int32)), In((4,), np.float32),
                             Const(table)], [Out((3, 4))], combiner=combiner)
        assert_exact(m, [np.array([1, 3, 0, 1], np.int32), np.array([2.0, 0.5, 1.0, 3.0], np.float32)])


def test_embedding_lookup_sparse_bad_values():
    m = single_op_model("EMBEDDING_LOOKUP_SPARSE",
                        [In((2,), np.int32), In((2, 2), np.int32), In((2,), np.int32), In((2,), np.float32),
                         Const(np.ones((3, 2), np.float32))], [Out((2, 2))], combiner=1)
    Interpreter(model_content=m).allocate_tensors()
    w = np.ones(2, np.float32)
    ins = [np.array([0, 3], np.int32), np.array([[0, 0], [1, 0]], np.int32), np.array([2, 1], np.int32), w]
    assert litert_fails(m, ins)
    assert "out of bounds" in str(invoke_error(m, ins))
    # LiteRT writes outside its output for rows outside dense_shape; acelera refuses them.
    invoke_error(m, [np.array([0, 1], np.int32), np.array([[0, 0], [5, 0]], np.int32), np.array([2, 1], np.int32), w])
    invoke_error(m, [np.array([0, 1], np.int32), np.array([[0, 0], [1, 0]], np.int32), np.array([-2, 1], np.int32), w])


@pytest.mark.parametrize("dense,idx_w,table_dt,match", [
    ((3,), 2, np.float32, "dense_shape"),
    ((2,), 2, np.int8, "INT8"),
    ((0,), 0, np.float32, "dense_shape"),
])
def test_embedding_lookup_sparse_refused_at_allocate(dense, idx_w, table_dt, match):
    m = single_op_model("EMBEDDING_LOOKUP_SPARSE",
                        [In((2,), np.int32), In((2, idx_w), np.int32), In(dense, np.int32), In((2,), np.float32),
                         Const(np.ones((3, 2), table_dt))], [Out((2, 2))])
    expect_unsupported(m, match)


# --- HASHTABLE_LOOKUP ---------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ROW_DTYPES), sort=st.booleans(), seed=st.integers(0, 2**31))
def test_hashtable_lookup(data, dt, sort, seed):
    rng = rng_of(seed)
    n = data.draw(st.integers(1, 8))
    pool = np.array([-2**31, -2**31 + 1, -7, -1, 0, 1, 3, 7, 2**30, 2**31 - 1], np.int64)
    keys = rng.choice(pool, n).astype(np.int32)
    if sort:
        keys = np.sort(keys)
    lookups = rng.choice(pool, data.draw(st.integers(0, 8))).astype(np.int32)
    tail = tuple(data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    values = rows_input((n,) + tail, dt, rng)
    m = single_op_model("HASHTABLE_LOOKUP", [In(lookups.shape, np.int32), In((n,), np.int32), In(values.shape, dt)],
                        [Out(lookups.shape + tail, dt), Out(lookups.shape, np.uint8)])
    got = assert_exact(m, [lookups, keys, values])
    if sort:
        np.testing.assert_array_equal(got[1], np.isin(lookups, keys).astype(np.uint8))


def test_hashtable_lookup_strings():
    keys = np.array([-4, 0, 9, 12], np.int32)
    values = np.array([b"minus four", b"", b"nine", b"tw\x00elve"], object)
    lookups = np.array([9, 1, 12, -4, 0, 100], np.int32)
    m = single_op_model("HASHTABLE_LOOKUP", [In((6,), np.int32), Const(keys), Const(values)],
                        [Out((6,), np.bytes_), Out((6,), np.uint8)])
    got = assert_same_strings(m, [lookups])
    assert got[0].tolist() == [b"nine", b"", b"tw\x00elve", b"minus four", b"", b""]
    assert got[1].tolist() == [1, 0, 1, 1, 1, 0]


def test_hashtable_lookup_quantized_values():
    values = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    m = single_op_model("HASHTABLE_LOOKUP", [In((2,), np.int32), Const(np.array([1, 2, 3], np.int32)),
                                             Const(values, (0.5, 2))],
                        [Out((2, 4), np.int8, (0.5, 2)), Out((2,), np.uint8)])
    assert_exact(m, [np.array([3, 5], np.int32)])


def test_hashtable_lookup_empty_table_fails_at_invoke():
    m = single_op_model("HASHTABLE_LOOKUP", [In((2,), np.int32), In((0,), np.int32), In((0, 2))],
                        [Out((2, 2)), Out((2,), np.uint8)])
    Interpreter(model_content=m).allocate_tensors()
    invoke_error(m, [np.array([1, 2], np.int32), np.zeros(0, np.int32), np.zeros((0, 2), np.float32)])


@pytest.mark.parametrize("inputs,outputs,match", [
    ([In((2,), np.int32), In((3,), np.int32), In((2, 2))], [Out((2, 2)), Out((2,), np.uint8)], "do not match"),
    ([In((2,), np.int32), In((3,), np.int32), In((3, 2))], [Out((2, 2)), Out((2,), np.int32)], "UINT8"),
    ([In((2,), np.int32), In((3,), np.int32), In((3, 2))], [Out((2, 2), np.int32), Out((2,), np.uint8)],
     "output type"),
    ([In((2,), np.int64), In((3,), np.int32), In((3, 2))], [Out((2, 2)), Out((2,), np.uint8)], "INT32"),
    ([In((2,), np.int32), In((3,), np.int32), In((3, 2), np.bytes_)], [Out((2, 2), np.bytes_), Out((2,), np.uint8)],
     "vector"),
])
def test_hashtable_lookup_refused_at_allocate(inputs, outputs, match):
    expect_unsupported(single_op_model("HASHTABLE_LOOKUP", inputs, outputs), match)


# --- LSH_PROJECTION -----------------------------------------------------------------------

def test_fingerprint64_known_value():
    assert fingerprint64(b"") == 0x9AE16A3B2F90404F  # farmhashna::Hash64 of no bytes is k2


@pytest.mark.parametrize("row_bytes", [0, 1, 3, 4, 8, 12, 13, 28, 29, 44, 60, 61, 64, 124, 125, 200, 300])
def test_lsh_projection_key_lengths(row_bytes):
    # Each dense bit is the sign of one Fingerprint64 (weight 0 on the second row), so every
    # hash branch (keys of 4 + row_bytes bytes: 0-16, 17-32, 33-64, longer) is checked.
    rng = rng_of(row_bytes)
    seeds = rng.standard_normal((6, 16)).astype(np.float32)
    x = rng.integers(0, 256, size=(2, row_bytes)).astype(np.uint8)
    m = single_op_model("LSH_PROJECTION", [Const(seeds), In(x.shape, np.uint8), In((2,), np.float32)],
                        [Out((96,), np.int32)], type=2)
    assert_exact(m, [x, np.array([1.0, 0.0], np.float32)])


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([1, 2]), weighted=st.booleans(),
       dt=st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8, np.uint16, np.bool_]),
       seed=st.integers(0, 2**31))
def test_lsh_projection(data, kind, weighted, dt, seed):
    rng = rng_of(seed)
    num_hash = data.draw(st.integers(1, 4))
    num_bits = data.draw(st.sampled_from([1, 2, 7, 16, 31, 32]))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    seeds = rng.standard_normal((num_hash, num_bits)).astype(np.float32)
    x = random_input(shape, dt, rng, -100, 100)
    out = (num_hash,) if kind == 1 else (num_hash * num_bits,)
    inputs, ins = [Const(seeds), In(shape, dt)], [x]
    if weighted:
        inputs.append(In((shape[0],), np.float32))
        ins.append(rng.uniform(-1, 1, shape[0]).astype(np.float32))
    m = single_op_model("LSH_PROJECTION", inputs, [Out(out, np.int32)], type=kind)
    assert_exact(m, ins)


def test_lsh_projection_strings():
    # LiteRT hashes the raw string buffer (count, offsets, bytes) cut into rows of equal size.
    rng = rng_of(9)
    seeds = rng.standard_normal((3, 8)).astype(np.float32)
    x = np.array([b"hello", b"world", b"", b"a longer string of text"], object)
    for kind, out in ((1, (3,)), (2, (24,))):
        m = single_op_model("LSH_PROJECTION", [Const(seeds), In((4,), np.bytes_), In((4,), np.float32)],
                            [Out(out, np.int32)], type=kind)
        assert_exact(m, [x, np.array([0.5, -1.0, 2.0, 1.0], np.float32)])


@pytest.mark.parametrize("inputs,kind,match", [
    ([Const(np.ones((2, 33), np.float32)), In((3,), np.int32)], 1, "exceed 32"),
    ([Const(np.ones((2, 4), np.float32)), In((3,), np.int32)], 0, "type"),
    ([Const(np.ones((2, 4), np.float32)), In((0,), np.int32)], 1, "row"),
    ([Const(np.ones((2, 4), np.float32)), In((3,), np.int32), In((2,))], 1, "weight"),
    ([Const(np.ones((2, 4), np.float32)), In((3,), np.int32), None], 1, "absent"),
    ([Const(np.ones((8,), np.float32)), In((3,), np.int32)], 1, "rank-2"),
])
def test_lsh_projection_refused_at_allocate(inputs, kind, match):
    expect_unsupported(single_op_model("LSH_PROJECTION", inputs, [Out((2,), np.int32)], type=kind), match)


# --- SKIP_GRAM ----------------------------------------------------------------------------

SENTENCES = [b"the quick brown fox jumps over the lazy dog", b" leading space drops a word", b"a  b\tc\nd\x0be\x0cf\rg ",
             b"", b"one", b"two words", b"\xc3\xa9t\xc3\xa9 caf\xc3\xa9 na\xc3\xafve"]


@pytest.mark.parametrize("sentence", SENTENCES)
@pytest.mark.parametrize("ngram,skip,include_all", [(1, 0, False), (2, 0, False), (2, 1, True), (3, 2, False),
                                                    (3, 2, True), (4, 5, True), (0, 1, True), (-1, 1, False),
                                                    (2, -1, True), (9, 0, True)])
def test_skip_gram(sentence, ngram, skip, include_all):
    m = single_op_model("SKIP_GRAM", [In((1,), np.bytes_)], [Out((1,), np.bytes_)], ngram_size=ngram,
                        max_skip_size=skip, include_all_ngrams=include_all)
    assert_same_strings(m, [np.array([sentence], object)])


def test_skip_gram_reads_only_the_first_string():
    m = single_op_model("SKIP_GRAM", [In((2,), np.bytes_)], [Out((1,), np.bytes_)], ngram_size=2, max_skip_size=1)
    got = assert_same_strings(m, [np.array([b"x y z", b"ignored words here"], object)])
    assert sorted(got[0].tolist()) == [b"x y", b"x z", b"y z"]


def test_skip_gram_refuses_explosive_outputs():
    words = b" ".join(b"w%d" % i for i in range(300))
    m = single_op_model("SKIP_GRAM", [In((1,), np.bytes_)], [Out((1,), np.bytes_)], ngram_size=300,
                        max_skip_size=300, include_all_ngrams=True)
    assert "too many" in str(invoke_error(m, [np.array([words], object)]))


def test_skip_gram_refused_at_allocate():
    expect_unsupported(single_op_model("SKIP_GRAM", [In((1,), np.int32)], [Out((1,), np.bytes_)], ngram_size=2),
                       "STRING")


# --- NON_MAX_SUPPRESSION_V4 / V5 ----------------------------------------------------------

def nms_model(n: int, max_out: int, soft: bool, const_max: bool = True, op: str | None = None) -> bytes:
    ins = [In((n, 4)), In((n,)), Const(np.array(max_out, np.int32), shape=()) if const_max else In((), np.int32),
           In(()), In(())]
    outs = [Out((max_out,), np.int32)]
    if soft:
        ins.append(In(()))
        outs.append(Out((max_out,), np.float32))
    outs.append(Out((), np.int32))
    op = op or ("NON_MAX_SUPPRESSION_V5" if soft else "NON_MAX_SUPPRESSION_V4")
    return single_op_model(op, ins, outs)


def nms_case(rng, n: int, ties: bool, degenerate: bool):
    centers = rng.uniform(0, 1, (n, 2))
    sizes = rng.uniform(0.05, 0.5, (n, 2))
    boxes = np.concatenate([centers - sizes / 2, centers + sizes / 2], 1).astype(np.float32)
    flip = rng.random(n) < 0.3
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]  # corners in either order
    if degenerate and n:
        boxes[rng.integers(0, n)] = [0.2, 0.2, 0.2, 0.7]  # zero area: its IoU is always 0
    scores = (rng.choice([0.1, 0.3, 0.6, 0.9], n) if ties else rng.uniform(0, 1, n)).astype(np.float32)
    return boxes, scores


@SETTINGS
@given(n=st.integers(0, 24), max_out=st.integers(1, 10), soft=st.booleans(), const_max=st.booleans(),
       ties=st.booleans(), degenerate=st.booleans(), iou=st.sampled_from([0.0, 0.3, 0.5, 1.0, 1.5]),
       thr=st.sampled_from([-1.0, 0.0, 0.2, 0.5]), sigma=st.sampled_from([0.0, 0.1, 0.5, 2.0]),
       seed=st.integers(0, 2**31))
def test_nms(n, max_out, soft, const_max, ties, degenerate, iou, thr, sigma, seed):
    boxes, scores = nms_case(rng_of(seed), n, ties, degenerate)
    ins = [boxes, scores] + ([] if const_max else [np.array(max_out, np.int32)]) + [np.float32(iou), np.float32(thr)]
    if soft:
        ins.append(np.float32(sigma))
    got = assert_exact(nms_model(n, max_out, soft, const_max), ins)
    count = int(got[-1])
    assert (got[0][count:] == 0).all()


def test_nms_many_equal_scores_keep_litert_order():
    rng = rng_of(10)
    boxes = np.concatenate([np.stack([np.arange(40) * 2.0] * 2, 1), np.stack([np.arange(40) * 2.0 + 1] * 2, 1)],
                           1).astype(np.float32)  # disjoint boxes
    scores = rng.choice([0.25, 0.5], 40).astype(np.float32)
    for soft in (False, True):
        ins = [boxes, scores, np.float32(0.5), np.float32(0.0)] + ([np.float32(0.5)] if soft else [])
        assert_exact(nms_model(40, 30, soft), ins)


def test_nms_v4_op_with_six_inputs_is_soft_and_zero_output_size():
    rng = rng_of(11)
    boxes, scores = nms_case(rng, 10, False, False)
    ins = [boxes, scores, np.float32(0.6), np.float32(0.1), np.float32(0.5)]
    assert_exact(nms_model(10, 5, True, op="NON_MAX_SUPPRESSION_V4"), ins)
    got = run_acelera(nms_model(10, 0, False), [boxes, scores, np.float32(0.5), np.float32(0.0)])
    assert got[0].shape == (0,) and int(got[1]) == 0


def test_nms_bad_values_fail_at_invoke():
    boxes, scores = nms_case(rng_of(12), 5, False, False)
    m = nms_model(5, 3, False, const_max=False)
    Interpreter(model_content=m).allocate_tensors()
    ins = [boxes, scores, np.array(-1, np.int32), np.float32(0.5), np.float32(0.0)]
    assert litert_fails(m, ins)
    invoke_error(m, ins)
    ins = [boxes, scores, np.array(2**31 - 1, np.int32), np.float32(0.5), np.float32(0.0)]
    assert "size limit" in str(invoke_error(m, ins))
    m = nms_model(5, 3, True)
    ins = [boxes, scores, np.float32(0.5), np.float32(0.0), np.float32(-1.0)]
    assert litert_fails(m, ins)
    assert "sigma" in str(invoke_error(m, ins))


@pytest.mark.parametrize("inputs,outputs,match", [
    ([In((3, 4)), In((3,)), In((), np.int32), In(())], [Out((2,), np.int32), Out((), np.int32)], "5 or 6"),
    ([In((3, 5)), In((3,)), In((), np.int32), In(()), In(())], [Out((2,), np.int32), Out((), np.int32)], "boxes"),
    ([In((3, 4)), In((2,)), In((), np.int32), In(()), In(())], [Out((2,), np.int32), Out((), np.int32)], "scores"),
    ([In((3, 4)), In((3,)), In((1,), np.int32), In(()), In(())], [Out((2,), np.int32), Out((), np.int32)],
     "max_output_size"),
    ([In((3, 4)), In((3,)), In((), np.int32), In((1,)), In(())], [Out((2,), np.int32), Out((), np.int32)], "scalars"),
    ([In((3, 4)), In((3,)), In((), np.int32), In(()), In(())], [Out((2,)), Out((), np.int32)], "outputs"),
    ([In((3, 4)), In((3,)), Const(np.array(-2, np.int32), shape=()), In(()), In(())],
     [Out((2,), np.int32), Out((), np.int32)], "negative"),
])
def test_nms_refused_at_allocate(inputs, outputs, match):
    expect_unsupported(single_op_model("NON_MAX_SUPPRESSION_V4", inputs, outputs), match)
