"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL against LiteRT's kernels.

With seed/seed2 set, outputs must be bit-identical to LiteRT's over several invokes in a row
(the Philox state advances at each invoke, never in allocate_tensors' shape pass) and after a
resize (LiteRT re-prepares the node, which reseeds it). With both seeds 0 LiteRT seeds from a
random device: then only shapes, dtypes, ranges and statistics are checked.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import rng_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.errors import AceleraError, UnsupportedOpError
from acelera.core.interpreter import Interpreter
from acelera.core.kernels.random import Philox

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = [(1, 2), (0, 5), (7, 0), (-7, 3), (123456, -1), (2**31 + 5, 2**40 + 3), (-(2**40), 9)]


def litert(model: bytes):
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    return LiteRT(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF, num_threads=1)


def invokes(it, inputs, n: int = 3, reallocate: bool = False) -> list[np.ndarray]:
    """Outputs of `n` invokes in a row (allocate_tensors again before each when `reallocate`)."""
    details = it.get_input_details()
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != np.shape(x):
            it.resize_tensor_input(d["index"], list(np.shape(x)))
    it.allocate_tensors()
    outs = []
    for _ in range(n):
        if reallocate:
            it.allocate_tensors()
        for d, x in zip(details, inputs):
            it.set_tensor(d["index"], np.asarray(x, d["dtype"]))
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    return outs


def assert_same_as_litert(model: bytes, inputs, n: int = 3, advancing: bool = True, **kw) -> list[np.ndarray]:
    """Bit-identical outputs over n invokes; `advancing`: the first two must differ."""
    want = invokes(litert(model), inputs, n, **kw)
    got = invokes(Interpreter(model_content=model), inputs, n, **kw)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=f"invoke {k}")
    if advancing and got[0].size:
        assert not np.array_equal(got[0], got[1]), "the generator state did not advance"
    return got


def random_model(op: str, shape, seed: int, seed2: int, const_shape: bool) -> tuple[bytes, list]:
    dims = np.array(shape, np.int32)
    if const_shape:
        return single_op_model(op, [Const(dims)], [Out(shape)], seed=seed, seed2=seed2), []
    return single_op_model(op, [In((len(shape),), np.int32)], [Out(shape)], seed=seed, seed2=seed2), [dims]


# --- Philox itself ----------------------------------------------------------------------------

def test_philox_known_answer():
    # Random123's published Philox4x32-10 vectors: key (k0, k1), counter (c0..c3) -> output.
    cases = [((0, 0), (0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF,) * 4, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0xA4093822, 0x299F31D0), (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for key, ctr, want in cases:
        g = Philox(0, 0)
        g.key = key[0] | key[1] << 32
        g.counter = ctr[0] | ctr[1] << 32 | ctr[2] << 64 | ctr[3] << 96
        assert tuple(int(v) for v in g.generate(1)) == want


def test_philox_counter_carry_and_skip():
    g = Philox(3, 4)
    g.counter = (1 << 64) - 2  # low 64 bits about to wrap into counter words 2 and 3
    many = g.generate(4)
    one_by_one = []
    h = Philox(3, 4)
    h.counter = (1 << 64) - 2
    for _ in range(4):
        one_by_one.extend(h.generate(1).tolist())
    assert many.tolist() == one_by_one and g.counter == h.counter == (1 << 64) + 2
    s = Philox(0, 0)
    s.counter = 0xFFFFFFFF
    s.skip(1)
    assert s.counter == 1 << 32
    s.counter = 0xFFFFFFFF | 0xFFFFFFFF << 32
    s.skip(1 | 0xFFFFFFFF << 32)  # TSL loses this carry: the high word overflows back to 0
    assert s.counter == 0xFFFFFFFF << 32


# --- RANDOM_UNIFORM / RANDOM_STANDARD_NORMAL --------------------------------------------------

@pytest.mark.parametrize("op", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"])
@pytest.mark.parametrize("seed,seed2", SEEDS)
def test_random_matches_litert(op, seed, seed2):
    for shape, const in [((3,), True), ((5, 7), False), ((2, 3, 5), True), ((1, 1, 1, 1, 1), False)]:
        m, ins = random_model(op, shape, seed, seed2, const)
        got = assert_same_as_litert(m, ins)
        if op == "RANDOM_UNIFORM":
            assert all(((g >= 0) & (g < 1)).all() for g in got)


@SETTINGS
@given(op=st.sampled_from(["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"]),
       shape=st.lists(st.integers(1, 9), min_size=0, max_size=4).map(tuple),
       seed=st.integers(-(2**31), 2**31 - 1), seed2=st.integers(-(2**31), 2**31 - 1), const=st.booleans())
def test_random_matches_litert_shapes(op, shape, seed, seed2, const):
    if seed == 0 and seed2 == 0:
        seed = 1
    m, ins = random_model(op, shape, seed, seed2, const)
    assert_same_as_litert(m, ins, n=2)


def test_random_normal_large_bit_exact():
    # Enough Box-Muller pairs that logf/sinf/cosf rounding cases near a midpoint occur.
    m, ins = random_model("RANDOM_STANDARD_NORMAL", (40001,), 11, 13, True)
    got = assert_same_as_litert(m, ins, n=2)
    assert abs(float(got[0].mean())) < 0.02 and abs(float(got[0].std()) - 1) < 0.02


def test_random_reallocate_keeps_state():
    # allocate_tensors on an allocated interpreter is a no-op in LiteRT: the state goes on.
    m, ins = random_model("RANDOM_UNIFORM", (6,), 3, 4, True)
    assert_same_as_litert(m, ins, reallocate=True)


def test_random_resize_reseeds():
    m = single_op_model("RANDOM_UNIFORM", [In((2,), np.int32)], [Out((2, 3))], seed=5, seed2=6)
    for it in (litert(m), Interpreter(model_content=m)):
        first = invokes(it, [np.array([2, 3], np.int32)], n=1)[0]
        it.resize_tensor_input(it.get_input_details()[0]["index"], [3])
        again = invokes(it, [np.array([1, 2, 3], np.int32)], n=1)[0]
        # prepared again: the stream starts over
        np.testing.assert_array_equal(again.reshape(-1), first.reshape(-1))


@pytest.mark.parametrize("op", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"])
@pytest.mark.parametrize("seed,seed2", [(0, 0), (2**32, 0)])  # 2**32 narrows to the C int 0
def test_random_unseeded_statistics(op, seed, seed2):
    m, ins = random_model(op, (200, 100), seed, seed2, True)
    a = invokes(Interpreter(model_content=m), ins, n=2)
    b = invokes(Interpreter(model_content=m), ins, n=1)[0]
    for x in a + [b]:
        assert x.shape == (200, 100) and x.dtype == np.float32 and np.isfinite(x).all()
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a[0], b)
    x = a[0]
    if op == "RANDOM_UNIFORM":
        assert ((x >= 0) & (x < 1)).all()
        assert abs(float(x.mean()) - 0.5) < 0.01 and abs(float(x.var()) - 1 / 12) < 0.005
    else:
        assert abs(float(x.mean())) < 0.03 and abs(float(x.std()) - 1) < 0.03
        assert np.abs(x).max() < 6.5  # Box-Muller with u1 >= 1e-7 bounds |x| by 5.68


@pytest.mark.parametrize("op", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"])
def test_random_bad_models(op):
    bad = [single_op_model(op, [Const(np.array([2, 3], np.int64))], [Out((2, 3))], seed=1),
           single_op_model(op, [Const(np.array([2, 3], np.int32))], [Out((2, 3), np.int32)], seed=1),
           single_op_model(op, [Const(np.array([2, 3], np.int32))], [Out((2, 3), np.float64)], seed=1)]
    for m in bad:
        it = Interpreter(model_content=m)
        with pytest.raises(UnsupportedOpError, match="node 0"):
            it.allocate_tensors()
    for dims in ([[2, 3]], [2, -3]):
        it = Interpreter(model_content=single_op_model(op, [Const(np.array(dims, np.int32))], [Out((2, 3))], seed=1))
        with pytest.raises(AceleraError, match="node 0"):
            it.allocate_tensors()


@pytest.mark.parametrize("dims", [[2, -3], [1 << 20, 1 << 20, 1 << 10]])
def test_random_bad_runtime_shape(dims):
    m = single_op_model("RANDOM_UNIFORM", [In((len(dims),), np.int32)], [Out((1,) * len(dims))], seed=1, seed2=2)
    it = Interpreter(model_content=m)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.array(dims, np.int32))
    with pytest.raises(AceleraError, match="node 0"):
        it.invoke()


def test_random_feeds_a_consumer():
    # A runtime shape: the output keeps its declared shape until invoke, so ADD prepares on it.
    b = ModelBuilder()
    s = b.add_input("s", (2,), np.int32)
    r, o = b.add_tensor("r", (2, 3), np.float32), b.add_tensor("o", (2, 3), np.float32)
    b.add_operator("RANDOM_STANDARD_NORMAL", [s], [r], seed=1, seed2=2)
    b.add_operator("ADD", [r, b.add_constant("c", np.ones(3, np.float32))], [o])
    b.mark_outputs(o)
    assert_same_as_litert(b.build(), [np.array([2, 3], np.int32)])


# --- MULTINOMIAL ------------------------------------------------------------------------------

def multinomial_model(batch: int, classes: int, ns: int, out_dtype, seed: int, seed2: int,
                      const_ns: bool) -> tuple[bytes, list]:
    n_in = Const(np.array(ns, np.int32), shape=()) if const_ns else In((), np.int32)
    m = single_op_model("MULTINOMIAL", [In((batch, classes)), n_in], [Out((batch, ns), out_dtype)],
                        seed=seed, seed2=seed2)
    return m, [] if const_ns else [np.array(ns, np.int32)]


@pytest.mark.parametrize("out_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("seed,seed2", SEEDS[:4])
@pytest.mark.parametrize("const_ns", [True, False])
def test_multinomial_matches_litert(out_dtype, seed, seed2, const_ns):
    logits = np.log(rng_of(seed & 0xFFFF).uniform(0.01, 1, (3, 6))).astype(np.float32)
    logits[1, 2] = -np.inf
    logits[2] = [np.nan, 1, np.inf, -np.inf, 0, 2]  # non-finite logits never get picked
    for ns in (1, 5, 17):
        m, extra = multinomial_model(3, 6, ns, out_dtype, seed, seed2, const_ns)
        got = assert_same_as_litert(m, [logits] + extra)
        assert all(((g >= 0) & (g < 6)).all() for g in got)
        assert not np.isin(np.stack(got)[:, 1], [2]).any()
        assert np.isin(np.stack(got)[:, 2], [1, 4, 5]).all()


@SETTINGS
@given(batch=st.integers(1, 4), classes=st.integers(1, 8), ns=st.integers(1, 40),
       seed=st.integers(-(2**31), 2**31 - 1), seed2=st.integers(-(2**31), 2**31 - 1),
       scale=st.sampled_from([0.1, 1.0, 30.0]), data_seed=st.integers(0, 2**31))
def test_multinomial_matches_litert_shapes(batch, classes, ns, seed, seed2, scale, data_seed):
    if seed == 0 and seed2 == 0:
        seed2 = 1
    logits = (rng_of(data_seed).standard_normal((batch, classes)) * scale).astype(np.float32)
    m, extra = multinomial_model(batch, classes, ns, np.int64, seed, seed2, True)
    assert_same_as_litert(m, [logits] + extra, n=2, advancing=False)


def test_multinomial_all_non_finite_row():
    # cumulative total 0: upper_bound returns the end, i.e. the number of classes
    logits = np.array([[-np.inf, np.nan, np.inf], [0.0, 1.0, 2.0]], np.float32)
    m, extra = multinomial_model(2, 3, 8, np.int64, 4, 2, True)
    got = assert_same_as_litert(m, [logits] + extra, n=2)
    assert (got[0][0] == 3).all() and (got[1][0] == 3).all()


def test_multinomial_resize_reseeds():
    m, extra = multinomial_model(2, 4, 6, np.int64, 9, 1, True)
    logits = np.zeros((2, 4), np.float32)
    outs = {}
    for name, it in (("litert", litert(m)), ("acelera", Interpreter(model_content=m))):
        first = invokes(it, [logits] + extra, n=2)
        again = invokes(it, [np.zeros((3, 4), np.float32)] + extra, n=1)[0]
        np.testing.assert_array_equal(again[:2], first[0])  # reseeded: the first rows repeat
        outs[name] = (first, again)
    for a, b in zip(outs["litert"][0] + [outs["litert"][1]], outs["acelera"][0] + [outs["acelera"][1]]):
        np.testing.assert_array_equal(a, b)


def test_multinomial_unseeded_statistics():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    logits = np.log(np.tile(p, (4, 1))).astype(np.float32) + 3.0
    m, extra = multinomial_model(4, 4, 5000, np.int64, 0, 0, True)
    a = invokes(Interpreter(model_content=m), [logits] + extra, n=2)
    for x in a:
        assert x.shape == (4, 5000) and x.dtype == np.int64 and ((x >= 0) & (x < 4)).all()
        freq = np.bincount(x.reshape(-1), minlength=4) / x.size
        np.testing.assert_allclose(freq, p, atol=0.015)
    assert not np.array_equal(a[0], a[1])


def test_multinomial_zero_samples():
    m, extra = multinomial_model(2, 3, 0, np.int32, 1, 2, False)
    got = invokes(Interpreter(model_content=m), [np.zeros((2, 3), np.float32)] + extra, n=2)
    assert got[0].shape == (2, 0) and got[0].dtype == np.int32


@pytest.mark.parametrize("case", ["rank3", "int32_logits", "ns_int64", "ns_vector", "out_float", "no_classes",
                                  "ns_negative", "ns_huge"])
def test_multinomial_bad_models(case):
    logits, ns, out = In((2, 3)), Const(np.array(4, np.int32), shape=()), Out((2, 4), np.int64)
    if case == "rank3":
        logits = In((2, 3, 1))
    elif case == "int32_logits":
        logits = In((2, 3), np.int32)
    elif case == "ns_int64":
        ns = Const(np.array(4, np.int64), shape=())
    elif case == "ns_vector":
        ns = Const(np.array([4], np.int32))
    elif case == "out_float":
        out = Out((2, 4))
    elif case == "no_classes":
        logits = In((2, 0))
    elif case == "ns_negative":
        ns = Const(np.array(-2, np.int32), shape=())
    elif case == "ns_huge":
        ns = Const(np.array(2**31 - 1, np.int32), shape=())
    it = Interpreter(model_content=single_op_model("MULTINOMIAL", [logits, ns], [out], seed=1, seed2=1))
    with pytest.raises(AceleraError, match="node 0") as e:
        it.allocate_tensors()
    if case in ("int32_logits", "ns_int64", "out_float"):
        assert isinstance(e.value, UnsupportedOpError)


@pytest.mark.parametrize("ns", [-1, 2**31 - 1])
def test_multinomial_bad_runtime_num_samples(ns):
    m, _ = multinomial_model(64, 3, 1, np.int64, 1, 2, False)
    it = Interpreter(model_content=m)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.zeros((64, 3), np.float32))
    it.set_tensor(it.get_input_details()[1]["index"], np.array(ns, np.int32))
    with pytest.raises(AceleraError, match="node 0"):
        it.invoke()
