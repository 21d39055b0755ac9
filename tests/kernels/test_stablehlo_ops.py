"""STABLEHLO_GATHER, STABLEHLO_SCATTER, STABLEHLO_REDUCE_WINDOW, REDUCE_WINDOW and
STABLEHLO_RNG_BIT_GENERATOR against LiteRT's reference kernels (BUILTIN_REF registers all five).

A reduce_window body of STABLEHLO_AND loads only with LiteRT's builtin resolver (BUILTIN_REF has no
STABLEHLO_AND kernel), and one of STABLEHLO_OR loads in neither (LiteRT registers no STABLEHLO_OR
kernel at all, though its reduce_window kernel understands the body): those forms are compared
with `reference="builtin"` and with numpy respectively. STABLEHLO_CASE is tested with the
other control flow (tests/test_control_flow.py): the schema bindings lack it, acelera reads it by hand.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_exact, random_input, run_acelera, run_litert

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter
from acelera.core.kernels.stablehlo_ops import philox4x32, threefry2x32

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GATHER_DTYPES = [np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_, np.float16, np.float64,
                 np.uint16, np.uint32, np.uint64, np.complex64]
SCATTER_DTYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                  np.uint32, np.uint64, np.bool_]
WINDOW_DTYPES = [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]
SCATTER_BODIES = [None, "STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM"]
WINDOW_BODIES = ["ADD", "STABLEHLO_ADD", "MUL", "STABLEHLO_MULTIPLY", "MAXIMUM", "STABLEHLO_MAXIMUM", "MINIMUM",
                 "STABLEHLO_MINIMUM", "LOGICAL_AND", "LOGICAL_OR"]


def values(shape, dt, rng, scale=20.0):
    dt = np.dtype(dt)
    if dt == np.complex64:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if np.issubdtype(dt, np.floating):
        return (rng.standard_normal(shape) * scale).astype(dt)
    if dt == np.uint64:
        return rng.integers(0, 2**63, shape, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1)
    return random_input(shape, dt, rng)


def allocate_error(model: bytes) -> AceleraError:
    it = Interpreter(model_content=model)
    with pytest.raises(AceleraError) as e:
        it.allocate_tensors()
    return e.value


def litert_fails(model: bytes, inputs) -> bool:
    try:
        run_litert(model, inputs)
    except Exception:
        return True
    return False


# --- STABLEHLO_GATHER --------------------------------------------------------------------

def gather_model(shape, dt, ishape, idt, out_shape, **opts) -> bytes:
    return single_op_model("STABLEHLO_GATHER", [In(shape, dt), In(ishape, idt)], [Out(out_shape, dt)], **opts)


def gather_case(data):
    """A random valid gather: operand, start indices (some out of range, to be clamped), options.
    The index vector is always explicit (see test_implicit_index_vector)."""
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    collapsed = sorted(data.draw(st.sets(st.integers(0, rank - 1))))
    slice_sizes = [1 if d in collapsed else data.draw(st.integers(0, shape[d])) for d in range(rank)]
    start_map = data.draw(st.permutations(range(rank)))[:data.draw(st.integers(0, rank))]
    batch = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    ivd = data.draw(st.integers(0, len(batch)))
    ishape = batch[:ivd] + (len(start_map),) + batch[ivd:]
    n_off = rank - len(collapsed)
    out_rank = len(batch) + n_off
    offset_dims = sorted(data.draw(st.permutations(range(out_rank)))[:n_off])
    kept = iter(slice_sizes[d] for d in range(rank) if d not in collapsed)
    b = iter(batch)
    out_shape = tuple(next(kept) if d in offset_dims else next(b) for d in range(out_rank))
    opts = {"offset_dims": offset_dims, "collapsed_slice_dims": collapsed, "start_index_map": list(start_map),
                "index_vector_dim": ivd, "slice_sizes": slice_sizes}
    return shape, ishape, out_shape, opts


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(GATHER_DTYPES), idt=st.sampled_from([np.int32, np.int64]),
       seed=st.integers(0, 2**31))
def test_gather_matches_litert(data, dt, idt, seed):
    shape, ishape, out_shape, opts = gather_case(data)
    rng = np.random.default_rng(seed)
    x = values(shape, dt, rng)
    idx = rng.integers(-2, max(shape) + 2, ishape).astype(idt)
    got = assert_exact(gather_model(shape, dt, ishape, idt, out_shape, **opts), [x, idx])
    assert got[0].shape == out_shape


def test_gather_clamps_start_indices():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[5, 1], [-3, 3], [1, 2]], np.int32)
    m = gather_model((3, 4), np.float32, (3, 2), np.int32, (3, 2, 2), offset_dims=[1, 2], collapsed_slice_dims=[],
                     start_index_map=[0, 1], index_vector_dim=1, slice_sizes=[2, 2])
    got = assert_exact(m, [x, idx])[0]
    np.testing.assert_array_equal(got[0], [[5, 6], [9, 10]])  # start (5, 1) clamped to (1, 1)
    np.testing.assert_array_equal(got[1], [[2, 3], [6, 7]])   # start (-3, 3) clamped to (0, 2)


def test_gather_output_shape_comes_from_the_options():
    """LiteRT resizes the output from the options; a model declaring another shape still runs."""
    m = gather_model((5, 3), np.int32, (4, 1), np.int64, (1, 1), offset_dims=[1], collapsed_slice_dims=[0],
                     start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 3])
    x = np.arange(15, dtype=np.int32).reshape(5, 3)
    got = assert_exact(m, [x, np.array([[4], [0], [2], [9]], np.int64)])[0]
    np.testing.assert_array_equal(got, x[[4, 0, 2, 4]])


@pytest.mark.parametrize("opts,match", [
    ({"slice_sizes": [1]}, "slice_sizes"),
    ({"slice_sizes": [1, 5]}, "slice size 5"),
    ({"offset_dims": [1, 1]}, "offset_dims"),
    ({"collapsed_slice_dims": [0, 0]}, "collapsed_slice_dims"),
    ({"start_index_map": [2]}, "start_index_map"),
    ({"index_vector_dim": 3}, "index_vector_dim"),
    ({"start_index_map": [0, 1]}, "shorter than start_index_map"),
    ({"collapsed_slice_dims": []}, "do not add up"),
])
def test_gather_bad_options_are_refused(opts, match):
    base = {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1,
                "slice_sizes": [1, 3]}
    base.update(opts)
    err = allocate_error(gather_model((5, 3), np.float32, (4, 1), np.int32, (4, 3), **base))
    assert "node 0 (STABLEHLO_GATHER)" in str(err) and match in str(err)


def test_gather_bad_types_are_refused():
    opts = {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1,
                "slice_sizes": [1, 3]}
    assert "INT16" in str(allocate_error(gather_model((5, 3), np.float32, (4, 1), np.int16, (4, 3), **opts)))
    m = single_op_model("STABLEHLO_GATHER", [In((5, 3), np.float32), In((4, 1), np.int32)],
                        [Out((4, 3), np.int32)], **opts)
    assert "differs" in str(allocate_error(m))


# --- STABLEHLO_SCATTER -------------------------------------------------------------------

def scatter_model(shape, dt, ishape, idt, ushape, body, *, body_nodes=1, **opts) -> bytes:
    """A scatter whose update computation subgraph is `body` (None: no node, i.e. replace)."""
    b = ModelBuilder()
    x, i, u = b.add_input("x", shape, dt), b.add_input("i", ishape, idt), b.add_input("u", ushape, dt)
    o = b.add_tensor("o", shape, dt)
    sub = b.add_subgraph("update")
    b.add_operator("STABLEHLO_SCATTER", [x, i, u], [o], update_computation_subgraph_index=sub.index, **opts)
    b.mark_outputs(o)
    p, q = sub.add_input("a", (), dt), sub.add_input("b", (), dt)
    out = q
    for k in range(body_nodes if body is not None else 0):
        r = sub.add_tensor(f"r{k}", (), dt)
        sub.add_operator(body, [p, out], [r])
        out = r
    sub.mark_outputs(out)
    return b.build()


def scatter_case(data):
    """A random scatter: window sizes up to one past the operand (LiteRT skips out-of-bounds
    elements one by one), update_window_dims in any order, an explicit index vector."""
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    inserted = sorted(data.draw(st.sets(st.integers(0, rank - 1))))
    window = [data.draw(st.integers(0, shape[d] + 1)) for d in range(rank) if d not in inserted]
    sdod = data.draw(st.permutations(range(rank)))[:data.draw(st.integers(0, rank))]
    batch = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    ivd = data.draw(st.integers(0, len(batch)))
    ishape = batch[:ivd] + (len(sdod),) + batch[ivd:]
    urank = len(batch) + len(window)
    uwd = data.draw(st.permutations(range(urank)))[:len(window)]
    ushape = [0] * urank
    for j, d in enumerate(uwd):
        ushape[d] = window[j]
    rest = iter(batch)
    for d in range(urank):
        if d not in uwd:
            ushape[d] = next(rest)
    opts = {"update_window_dims": list(uwd), "inserted_window_dims": inserted,
                "scatter_dims_to_operand_dims": list(sdod), "index_vector_dim": ivd}
    return shape, ishape, tuple(ushape), opts


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(SCATTER_DTYPES), body=st.sampled_from(SCATTER_BODIES),
       idt=st.sampled_from([np.int32, np.int64]), seed=st.integers(0, 2**31))
def test_scatter_matches_litert(data, dt, body, idt, seed):
    shape, ishape, ushape, opts = scatter_case(data)
    rng = np.random.default_rng(seed)
    scale = 2.0 if body == "STABLEHLO_MULTIPLY" else 20.0
    x, u = values(shape, dt, rng, scale), values(ushape, dt, rng, scale)
    idx = rng.integers(-1, max(shape) + 1, ishape).astype(idt)
    assert_exact(scatter_model(shape, dt, ishape, idt, ushape, body, **opts), [x, idx, u])


@pytest.mark.parametrize("body", SCATTER_BODIES)
def test_scatter_repeated_indices_apply_in_order(body):
    """Every update reads what the earlier ones wrote (float sums round in that order)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3)).astype(np.float32) * 1e4
    u = rng.standard_normal((9, 3)).astype(np.float32)
    idx = np.array([[1], [1], [3], [1], [0], [3], [1], [2], [1]], np.int32)
    m = scatter_model((4, 3), np.float32, (9, 1), np.int32, (9, 3), body, update_window_dims=[1],
                      inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    assert_exact(m, [x, idx, u])


@pytest.mark.parametrize("body", ["STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM"])
def test_scatter_max_min_follow_cpp_nan_rules(body):
    """std::max/min keep the current value when a comparison with NaN is false."""
    x = np.array([np.nan, 1.0, 2.0, 0.0, -0.0], np.float32)
    u = np.array([5.0, np.nan, 3.0, -0.0, 0.0, np.nan, -1.0, 7.0], np.float32)
    idx = np.array([[0], [1], [2], [3], [4], [2], [1], [0]], np.int64)
    m = scatter_model((5,), np.float32, (8, 1), np.int64, (8,), body, update_window_dims=[],
                      inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    got = assert_exact(m, [x, idx, u])[0]
    assert np.isnan(got[0])
    np.testing.assert_array_equal(np.signbit(got[3:]), [False, True])


def test_implicit_index_vector():
    """index_vector_dim equal to the indices' rank means index vectors of size 1 (StableHLO). LiteRT
    then reads the size of a dimension past the indices' shape (undefined; it crashes on rank-0
    indices), so acelera's result on that form is compared with LiteRT's on the explicit form."""
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    idx = np.array([[3, 0], [4, 1]], np.int32)
    gopts = {"offset_dims": [2], "collapsed_slice_dims": [0], "start_index_map": [0], "slice_sizes": [1, 4]}
    implicit = run_acelera(gather_model((5, 4), np.float32, (2, 2), np.int32, (2, 2, 4), index_vector_dim=2,
                                        **gopts), [x, idx])
    explicit = run_litert(gather_model((5, 4), np.float32, (2, 2, 1), np.int32, (2, 2, 4), index_vector_dim=2,
                                       **gopts), [x, idx[..., None]])
    np.testing.assert_array_equal(implicit[0], explicit[0])
    u = np.ones((2, 2, 4), np.float32)
    sopts = {"update_window_dims": [2], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0]}
    implicit = run_acelera(scatter_model((5, 4), np.float32, (2, 2), np.int32, (2, 2, 4), "STABLEHLO_ADD",
                                         index_vector_dim=2, **sopts), [x, idx, u])
    explicit = run_litert(scatter_model((5, 4), np.float32, (2, 2, 1), np.int32, (2, 2, 4), "STABLEHLO_ADD",
                                        index_vector_dim=2, **sopts), [x, idx[..., None], u])
    np.testing.assert_array_equal(implicit[0], explicit[0])
    scalar = run_acelera(scatter_model((5, 4), np.float32, (), np.int32, (4,), None, index_vector_dim=0,
                                       **{**sopts, "update_window_dims": [0]}), [x, np.array(2, np.int32), u[0, 0]])
    np.testing.assert_array_equal(scalar[0][2], 1)


def test_scatter_integers_wrap():
    x = np.array([120, -120, 7], np.int8)
    u = np.array([10, 10, -10, 100], np.int8)
    idx = np.array([[0], [0], [1], [2]], np.int32)
    m = scatter_model((3,), np.int8, (4, 1), np.int32, (4,), "STABLEHLO_ADD", update_window_dims=[],
                      inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    np.testing.assert_array_equal(assert_exact(m, [x, idx, u])[0], [-116, 126, 107])


SCATTER_OPTS = {"update_window_dims": [1], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0],
                    "index_vector_dim": 1}


@pytest.mark.parametrize("body,nodes,match", [
    ("STABLEHLO_ADD", 2, "only one"),
    ("ADD", 1, "ADD is not supported"),
    ("STABLEHLO_SUBTRACT", 1, "not supported"),
])
def test_scatter_unsupported_update_computation_is_refused(body, nodes, match):
    m = scatter_model((4, 3), np.float32, (2, 1), np.int32, (2, 3), body, body_nodes=nodes, **SCATTER_OPTS)
    err = allocate_error(m)
    assert "node 0 (STABLEHLO_SCATTER)" in str(err) and match in str(err)
    assert litert_fails(m, [np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32),
                            np.zeros((2, 3), np.float32)])


@pytest.mark.parametrize("opts,ushape,match", [
    ({"update_window_dims": [1, 1]}, (2, 3), "update_window_dims"),
    ({"inserted_window_dims": []}, (2, 3), "do not add up"),
    ({"scatter_dims_to_operand_dims": [2]}, (2, 3), "scatter_dims_to_operand_dims"),
    ({"scatter_dims_to_operand_dims": [0, 1]}, (2, 3), "shorter than"),
    ({}, (3, 3), "do not match"),
    ({"index_vector_dim": 5}, (2, 3), "index_vector_dim"),
])
def test_scatter_bad_options_are_refused(opts, ushape, match):
    m = scatter_model((4, 3), np.float32, (2, 1), np.int32, ushape, "STABLEHLO_ADD", **{**SCATTER_OPTS, **opts})
    err = allocate_error(m)
    assert "node 0 (STABLEHLO_SCATTER)" in str(err) and match in str(err)


def test_scatter_bad_types_are_refused():
    m = scatter_model((4, 3), np.float32, (2, 1), np.float32, (2, 3), None, **SCATTER_OPTS)
    assert "scatter indices of type FLOAT32" in str(allocate_error(m))
    b = ModelBuilder()
    x, i, u = b.add_input("x", (4,), np.float32), b.add_input("i", (1, 1), np.int32), b.add_input("u", (1,), np.int32)
    o = b.add_tensor("o", (4,), np.float32)
    sub = b.add_subgraph("update")
    b.add_operator("STABLEHLO_SCATTER", [x, i, u], [o], update_computation_subgraph_index=sub.index,
                   update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    b.mark_outputs(o)
    sub.mark_outputs(sub.add_input("a", (), np.float32))
    assert "must have the operand's type" in str(allocate_error(b.build()))


# --- STABLEHLO_REDUCE_WINDOW / REDUCE_WINDOW ---------------------------------------------

def reduce_window_model(shape, dt, body, out_shape=(1,), **opts) -> bytes:
    b = ModelBuilder()
    x, init = b.add_input("x", shape, dt), b.add_input("init", (), dt)
    o = b.add_tensor("o", out_shape, dt)
    sub = b.add_subgraph("body")
    b.add_operator("STABLEHLO_REDUCE_WINDOW", [x, init], [o], body_subgraph_index=sub.index, **opts)
    b.mark_outputs(o)
    p, q = sub.add_input("a", (), dt), sub.add_input("b", (), dt)
    for k, op in enumerate([body] if isinstance(body, str) else body):
        r = sub.add_tensor(f"r{k}", (), dt)
        sub.add_operator(op, [p, q], [r])
        q = r
    sub.mark_outputs(q)
    return b.build()


def window_case(data):
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    opts = {}
    opts["window_dimensions"] = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    for key in ("window_strides", "base_dilations", "window_dilations"):
        if data.draw(st.booleans()):
            opts[key] = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    if data.draw(st.booleans()):
        dil = opts.get("base_dilations", [1] * rank)
        pad = []
        for n, d in zip(shape, dil):
            size = (n - 1) * d + 1
            lo = data.draw(st.integers(-(size - 1), 2))
            pad += [lo, data.draw(st.integers(-(size - 1 + min(lo, 0)), 2))]
        opts["padding"] = pad
    return shape, opts


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(WINDOW_DTYPES), body=st.sampled_from(WINDOW_BODIES),
       seed=st.integers(0, 2**31))
def test_stablehlo_reduce_window_matches_litert(data, dt, body, seed):
    shape, opts = window_case(data)
    rng = np.random.default_rng(seed)
    scale = 1.5 if body in ("MUL", "STABLEHLO_MULTIPLY") else 20.0
    x, init = values(shape, dt, rng, scale), values((), dt, rng, scale)
    if np.issubdtype(dt, np.floating) and data.draw(st.booleans()):
        x[rng.random(shape) < 0.2] = np.nan
    assert_exact(reduce_window_model(shape, dt, body, **opts), [x, init])


@pytest.mark.parametrize("body", ["ADD", "MUL", "MAXIMUM", "MINIMUM", "LOGICAL_AND", "LOGICAL_OR"])
@pytest.mark.parametrize("dt", [np.float32, np.int16, np.bool_])
def test_reduce_window_larger_than_its_output_matches_litert(body, dt):
    """Windows with more elements than the output has (folded one window at a time), NaNs and
    signed zeros included."""
    rng = np.random.default_rng(9)
    x = values((12, 10), dt, rng, 1.1 if body == "MUL" else 20.0)
    if dt == np.float32:
        x[rng.random((12, 10)) < 0.1] = np.nan
        x[rng.random((12, 10)) < 0.2] = 0.0
        x[rng.random((12, 10)) < 0.2] = -0.0
    m = reduce_window_model((12, 10), dt, body, window_dimensions=[6, 5], window_strides=[3, 4],
                            window_dilations=[2, 1], padding=[1, 2, 0, -1])
    for init in (values((), dt, rng), np.array(-0.0 if dt == np.float32 else 0).astype(dt)):
        got = assert_exact(m, [x, init])[0]
        assert got.shape == (2, 2)


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.bool_])
def test_stablehlo_and_body_matches_builtin_litert(dt):
    """BUILTIN_REF lacks a STABLEHLO_AND kernel, so the model only loads with the builtin resolver."""
    rng = np.random.default_rng(5)
    x, init = (rng.integers(0, 3, (4, 5)) * (rng.random((4, 5)) > 0.2)).astype(dt), np.array(1).astype(dt)
    m = reduce_window_model((4, 5), dt, "STABLEHLO_AND", window_dimensions=[2, 2], window_strides=[1, 2],
                            padding=[1, 0, 0, 1])
    assert_exact(m, [x, init], reference="builtin")


def test_stablehlo_or_body_reduces_with_logical_or():
    """LiteRT's reduce_window kernel maps a STABLEHLO_OR body to ANY, but LiteRT registers no
    STABLEHLO_OR kernel, so it cannot load such a model: compare with numpy."""
    x = np.array([[0, 0, 1], [0, 0, 0], [2, 0, 0]], np.int32)
    m = reduce_window_model((3, 3), np.int32, "STABLEHLO_OR", window_dimensions=[2, 2])
    assert litert_fails(m, [x, np.array(0, np.int32)])
    got = run_acelera(m, [x, np.array(0, np.int32)])[0]
    np.testing.assert_array_equal(got, [[0, 1], [1, 0]])


def test_reduce_window_float_sums_round_in_window_order():
    x = np.array([1e8, 1.0, -1e8, 1.0, 3.0, 1e-3], np.float32).reshape(1, 6)
    m = reduce_window_model((1, 6), np.float32, "ADD", window_dimensions=[1, 4], window_strides=[1, 1])
    got = assert_exact(m, [x, np.array(0.5, np.float32)])[0]
    assert got.shape == (1, 3)


@pytest.mark.parametrize("fn", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("dt", WINDOW_DTYPES)
def test_reduce_window_matches_litert(fn, dt):
    rng = np.random.default_rng(fn)
    x = values((3, 5, 4), dt, rng, 1.5 if fn == 2 else 20.0)
    init = values((), dt, rng)
    m = single_op_model("REDUCE_WINDOW", [In((3, 5, 4), dt), In((), dt), Const(np.array([2, 2, 1], np.int64)),
                                          Const(np.array([1, 2, 3], np.int64)), Const(np.array([1, 2, 1], np.int64))],
                        [Out((1,), dt)], reduce_function=fn)
    got = assert_exact(m, [x, init])[0]
    assert got.shape == (2, 2, 2)


@pytest.mark.parametrize("opts,match", [
    ({"window_dimensions": [2]}, "entries for an input of rank 2"),
    ({"window_dimensions": [2, 0]}, "window_dimensions"),
    ({"window_strides": [1, 0]}, "window_strides"),
    ({"base_dilations": [1, 2, 1]}, "entries"),
    ({"padding": [0, 0, -3, -1]}, "leaves no element"),
    ({"padding": [0, 0, 1]}, "entries"),
])
def test_stablehlo_reduce_window_bad_options_are_refused(opts, match):
    full = {"window_dimensions": [2, 2]}
    full.update(opts)
    err = allocate_error(reduce_window_model((3, 4), np.float32, "ADD", **full))
    assert "node 0 (STABLEHLO_REDUCE_WINDOW)" in str(err) and match in str(err)


@pytest.mark.parametrize("body,match", [(["ADD", "ADD"], "exactly one node"), ("SUB", "SUB is not supported")])
def test_stablehlo_reduce_window_bad_body_is_refused(body, match):
    m = reduce_window_model((3, 4), np.float32, body, window_dimensions=[2, 2])
    assert match in str(allocate_error(m))
    assert litert_fails(m, [np.zeros((3, 4), np.float32), np.zeros((), np.float32)])


def test_reduce_window_bad_inputs_are_refused():
    def model(fn=1, dims=None, window=None, dt=np.float32, init_dt=np.float32):
        window = window or Const(np.array([2, 2], np.int64))
        return single_op_model("REDUCE_WINDOW", [In(dims or (3, 4), dt), In((), init_dt), window,
                                                 Const(np.array([1, 1], np.int64)), Const(np.array([1, 1], np.int64))],
                               [Out((1,), dt)], reduce_function=fn)
    assert "reduce_function 0" in str(allocate_error(model(fn=0)))
    assert "constant" in str(allocate_error(model(window=In((2,), np.int64))))
    assert "must be INT64" in str(allocate_error(model(window=Const(np.array([2, 2], np.int32)))))
    assert "rank" in str(allocate_error(model(dims=(1, 1, 1, 1, 1, 1, 1))))
    assert "UINT16" in str(allocate_error(model(dt=np.uint16, init_dt=np.uint16)))
    assert "init value" in str(allocate_error(model(init_dt=np.int32)))


# --- STABLEHLO_RNG_BIT_GENERATOR ---------------------------------------------------------

def rng_model(algorithm: int, n_state: int, out_shape, dt) -> bytes:
    return single_op_model("STABLEHLO_RNG_BIT_GENERATOR", [In((n_state,), np.uint64)],
                           [Out((n_state,), np.uint64), Out(out_shape, dt)], algorithm=algorithm)


@pytest.mark.parametrize("algorithm,n_state", [(0, 2), (0, 3), (1, 2), (1, 3), (2, 2)])
@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("out_shape", [(2, 3), (7,), (1, 0), ()])
def test_rng_bit_generator_matches_litert(algorithm, n_state, dt, out_shape):
    m = rng_model(algorithm, n_state, out_shape, dt)
    for state in ([1, 2, 3], [2**64 - 1, 2**64 - 2, 2**63 + 5], [0xDEADBEEF12345678, 42, 7]):
        assert_exact(m, [np.array(state[:n_state], np.uint64)])


def test_rng_bit_generator_reproduces_litert_unit_test_vectors():
    key, out = run_acelera(rng_model(1, 3, (2, 3), np.uint32), [np.array([1, 2, 3], np.uint64)])
    np.testing.assert_array_equal(key, [1, 4, 3])
    np.testing.assert_array_equal(out.reshape(-1), [4031113034, 1366700262, 495645701, 3051723414, 89414891,
                                                    1917262711])
    key, out = run_acelera(rng_model(2, 2, (2, 3), np.int64), [np.array([1, 2], np.uint64)])
    np.testing.assert_array_equal(key, [1, 8])
    np.testing.assert_array_equal(out.reshape(-1), [-9209908263526143660, -2358953802017238317,
                                                    -233920680524772397, 2658481902456610144,
                                                    -2022031683723149139, -2324041912354448873])


def test_rng_generators_agree_with_scalar_loops():
    """The vectorized generators against a plain transcription of rng_util.cc's loops."""
    def philox_ref(k0, k1, c):
        c = list(c)
        for _ in range(10):
            p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
            c = [((p1 >> 32) ^ c[1] ^ k0) & 0xFFFFFFFF, p1 & 0xFFFFFFFF, ((p0 >> 32) ^ c[3] ^ k1) & 0xFFFFFFFF,
                 p0 & 0xFFFFFFFF]
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        return c
    m32 = 0xFFFFFFFF
    for k0, k1, c in [(0, 0, (0, 0, 0, 0)), (m32, 1, (m32, m32, 5, 9)), (123, 456, (7, 8, 9, 10))]:
        got = philox4x32(k0, k1, [np.array([v], np.uint32) for v in c])[0]
        assert [int(v) for v in got] == philox_ref(k0, k1, c)
    got = threefry2x32(0x13198A2E, 0x03707344, [np.array([0x243F6A88], np.uint32), np.array([0x85A308D3], np.uint32)])
    assert [int(v) for v in got[0]] == [0xC4923A9C, 0x483DF7A0]  # Random123's known-answer test


@pytest.mark.parametrize("algorithm,n_state,out_dt,key_dt,match", [
    (2, 3, np.int32, np.uint64, "THREEFRY needs"),
    (1, 4, np.int32, np.uint64, "PHILOX needs"),
    (7, 2, np.int32, np.uint64, "unknown RNG algorithm"),
    (1, 2, np.float32, np.uint64, "output type FLOAT32"),
    (1, 2, np.int32, np.int64, "output state"),
])
def test_rng_bit_generator_bad_models_are_refused(algorithm, n_state, out_dt, key_dt, match):
    m = single_op_model("STABLEHLO_RNG_BIT_GENERATOR", [In((n_state,), np.uint64)],
                        [Out((n_state,), key_dt), Out((4,), out_dt)], algorithm=algorithm)
    err = allocate_error(m)
    assert "node 0 (STABLEHLO_RNG_BIT_GENERATOR)" in str(err) and match in str(err)


# --- STABLEHLO_CASE ----------------------------------------------------------------------
