"""Kernels whose temporaries grow with their input work in tiles (kernels/tiling.py), and the
memory budget (core/memory.py) counts what they allocate.

Tiled kernels are run with a tiny tile (so every path splits into many boxes) and compared with
LiteRT or with the same kernel untiled; the budget's declared scratch is compared with the
temporaries tracemalloc sees while a kernel runs.
"""
from __future__ import annotations

import tracemalloc
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert, run_acelera

from acelera.core import memory
from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.kernels import tiling

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.function_scoped_fixture])
REF = OpResolverType.BUILTIN_REF


@pytest.fixture
def tiny_tiles(monkeypatch):
    """Tiles of `n` bytes (and broadcast blocks of `n` elements) in the kernels and the budget."""
    def set_tile(n: int) -> None:
        monkeypatch.setattr(memory, "TILE_BYTES", n)
        monkeypatch.setattr(memory, "BROADCAST_BLOCK", n)
    return set_tile


def _interpreter(model: bytes, inputs, budget: int = 8 << 30) -> Interpreter:
    it = Interpreter(model_content=model, experimental_op_resolver_type=REF, max_memory_bytes=budget)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    return it


def declared_scratch(model: bytes) -> int:
    it = Interpreter(model_content=model, experimental_op_resolver_type=REF)
    rt = it._rt
    return memory.plan(rt.sg, rt.ex.shapes)[1]


def invoke_temporaries(model: bytes, inputs) -> tuple[np.ndarray, int]:
    """(output, bytes beyond the output that invoke() held at its peak)."""
    it = _interpreter(model, inputs)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        it.invoke()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    return out, peak - base - out.nbytes


# --- the helpers ------------------------------------------------------------------------------

@SETTINGS
@given(shape=st.lists(st.integers(0, 7), min_size=0, max_size=5), elem=st.integers(1, 40),
       tile=st.integers(1, 600))
def test_boxes_partition_the_shape_within_the_tile(shape, elem, tile):
    hits = np.zeros(shape, np.int64)
    for box in tiling.boxes(shape, elem, tile):
        assert len(box) == len(shape)
        view = hits[box]
        assert view.size * elem <= max(tile, elem)  # one element may be larger than the tile
        hits[box] += 1
    assert (hits == 1).all()


def test_boxes_of_a_fitting_shape_are_the_whole_shape():
    assert list(tiling.boxes((2, 3, 4), 8, 1 << 20)) == [(slice(0, 2), slice(0, 3), slice(0, 4))]
    assert list(tiling.boxes((2, 0, 4), 8, 1 << 20)) == []


@st.composite
def broadcast_pair(draw):
    rank = draw(st.integers(0, 4))
    out = [draw(st.integers(1, 9)) for _ in range(rank)]

    def operand():
        keep = draw(st.integers(0, rank))
        return tuple(d if draw(st.booleans()) else 1 for d in out[rank - keep:])
    return operand(), operand()


def _fixed_point(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """An int64-heavy element-wise function like the int16 kernels' (several temporaries)."""
    r = x.astype(np.int64) * 3 + y
    r = (r << 4) - (r >> 2) + x * y
    return np.clip(r, -32768, 32767).astype(np.int16)


@SETTINGS
@given(shapes=broadcast_pair(), block=st.integers(1, 64), seed=st.integers(0, 2 ** 16))
def test_broadcast_tiles_match_the_whole_evaluation(shapes, block, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3000, 3000, shapes[0]).astype(np.int16)
    y = rng.integers(-3000, 3000, shapes[1]).astype(np.int16)
    want = _fixed_point(x, y)
    got = tiling.broadcast_tiles(_fixed_point, np.int16, block=block)(x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)

    def into(a, b, out):
        np.copyto(out, _fixed_point(a, b))
    got = tiling.broadcast_tiles_into(into, np.int16, block=block)(x, y)
    np.testing.assert_array_equal(got, want)


def test_broadcast_tiles_hold_no_output_sized_temporary():
    x = np.arange(512, dtype=np.int16).reshape(512, 1, 1)
    y = np.arange(2048, dtype=np.int16).reshape(1, 1, 2048)
    z = np.ones((1, 16, 1), np.int16)

    def fn(a, b, c):
        return _fixed_point(a, b) + c
    run = tiling.broadcast_tiles(fn, np.int16)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = run(x, y, z)
        extra = tracemalloc.get_traced_memory()[1] - base - out.nbytes
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(out, fn(x, y, z))
    assert out.nbytes == 32 << 20
    # whole: about 4 int64 temporaries of the output (512 MiB); tiled: a few blocks' worth
    assert extra < 64 * memory.BROADCAST_BLOCK


# --- TRANSPOSE_CONV -------------------------------------------------------------------------

@st.composite
def tgeometry(draw):
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kh, kw, sh, sw = (draw(st.integers(1, 4)) for _ in range(4))
    pad = draw(st.sampled_from(["SAME", "VALID"]))

    def out_for(size, k, s):
        lo, hi = ((size - 1) * s + 1, size * s) if pad == "SAME" else (max((size - 1) * s + k, 1), size * s + k - 1)
        return draw(st.integers(lo, hi))
    return dict(n=n, h=h, w=w, kh=kh, kw=kw, sh=sh, sw=sw, pad=pad, oh=out_for(h, kh, sh), ow=out_for(w, kw, sw))


def _tconv(g, x_spec, w, wq, bias, out_dtype, out_q, const_shape=True, version=3):
    shape = np.array([g["n"], g["oh"], g["ow"], w.shape[0]], np.int32)
    s_in = Const(shape) if const_shape else In((4,), np.int32)
    model = single_op_model("TRANSPOSE_CONV", [s_in, Const(w, wq), x_spec, bias],
                            [Out(tuple(shape), out_dtype, out_q)], version=version, padding=g["pad"],
                            stride_h=g["sh"], stride_w=g["sw"])
    return model, shape


@SETTINGS
@given(g=tgeometry(), c=st.integers(1, 4), o=st.integers(1, 4), tile=st.sampled_from([1, 40, 300, 2000]),
       kind=st.sampled_from(["float", "int8", "uint8", "int16", "hybrid"]), const_shape=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_tiled_transpose_conv_matches_litert(tiny_tiles, g, c, o, tile, kind, const_shape, seed):
    tiny_tiles(tile)
    rng = np.random.default_rng(seed)
    xs = (g["n"], g["h"], g["w"], c)
    wk = (o, g["kh"], g["kw"], c)
    if kind == "float":
        x = rng.uniform(-2, 2, xs).astype(np.float32)
        model, shape = _tconv(g, In(xs), rng.uniform(-1, 1, wk).astype(np.float32), None,
                              Const(rng.uniform(-1, 1, o).astype(np.float32)), np.float32, None, const_shape)
    elif kind == "hybrid":
        x = rng.uniform(-2, 2, xs).astype(np.float32)
        model, shape = _tconv(g, In(xs), rng.integers(-127, 128, wk).astype(np.int8), (0.01, 0),
                              Const(rng.uniform(-1, 1, o).astype(np.float32)), np.float32, None, const_shape)
    elif kind == "uint8":
        x = rng.integers(0, 256, xs).astype(np.uint8)
        model, shape = _tconv(g, In(xs, np.uint8, (0.05, 120)), rng.integers(0, 256, wk).astype(np.uint8),
                              (0.01, 130), Const(rng.integers(-500, 500, o).astype(np.int32), (0.0005, 0)),
                              np.uint8, (0.2, 128), const_shape)
    elif kind == "int8":
        x = rng.integers(-128, 128, xs).astype(np.int8)
        model, shape = _tconv(g, In(xs, np.int8, (0.05, -3)), rng.integers(-127, 128, wk).astype(np.int8),
                              (0.01, 0), Const(rng.integers(-500, 500, o).astype(np.int32)), np.int8, (0.2, 5),
                              const_shape)
    else:
        x = rng.integers(-30000, 30000, xs).astype(np.int16)
        model, shape = _tconv(g, In(xs, np.int16, (0.001, 0)), rng.integers(-127, 128, wk).astype(np.int8),
                              (0.01, 0), Const(rng.integers(-5000, 5000, o).astype(np.int64)), np.int16, (0.05, 0),
                              const_shape, version=4)
    assert_matches_litert(model, [x] if const_shape else [shape, x])


def test_tiled_transpose_conv_uses_many_tiles_and_equals_whole(tiny_tiles, monkeypatch):
    rng = np.random.default_rng(3)
    g = dict(n=2, h=9, w=7, kh=3, kw=4, sh=2, sw=3, pad="SAME", oh=18, ow=21)
    x = rng.integers(-128, 128, (2, 9, 7, 5)).astype(np.int8)
    model, _ = _tconv(g, In(x.shape, np.int8, (0.05, 1)), rng.integers(-127, 128, (6, 3, 4, 5)).astype(np.int8),
                      (0.01, 0), None, np.int8, (0.3, 0))
    whole = run_acelera(model, [x])[0]
    tiny_tiles(3 * 4 * 6 * 4 * 5)  # five input pixels' tap products (exact in float32)
    calls = []
    orig = tiling.boxes
    monkeypatch.setattr(tiling, "boxes", lambda *a: calls.append(a) or orig(*a))
    tiled = run_acelera(model, [x])[0]
    np.testing.assert_array_equal(tiled, whole)
    assert len(list(orig(*calls[-1]))) == 2 * 9 * 2  # per batch and row: 7 pixels in boxes of 5


def test_convolution_2d_transpose_bias_tiled(tiny_tiles):
    import struct

    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (1, 5, 6, 3)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 4).astype(np.float32)
    model = single_op_model("CUSTOM", [In(x.shape), Const(w), Const(b)], [Out((1, 10, 12, 4))],
                            custom_code="Convolution2DTransposeBias", custom_options=struct.pack("<iii", 1, 2, 2))
    whole = run_acelera(model, [x])[0]
    tiny_tiles(100)
    np.testing.assert_allclose(run_acelera(model, [x])[0], whole, rtol=1e-6, atol=1e-6)


# --- CONV_3D / CONV_3D_TRANSPOSE ------------------------------------------------------------

def _conv3d_opts(padding, strides, dilations):
    return dict(padding=padding, stride_d=strides[0], stride_h=strides[1], stride_w=strides[2],
                dilation_d_factor=dilations[0], dilation_h_factor=dilations[1], dilation_w_factor=dilations[2])


@SETTINGS
@given(padding=st.sampled_from(["SAME", "VALID"]), strides=st.tuples(*[st.integers(1, 2)] * 3),
       dilations=st.tuples(*[st.integers(1, 2)] * 3), tile=st.sampled_from([1, 50, 400]),
       seed=st.integers(0, 2 ** 16))
def test_tiled_conv3d_matches_litert(tiny_tiles, padding, strides, dilations, tile, seed):
    from acelera.core.kernels.conv3d import _out_size

    tiny_tiles(tile)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (2, 5, 6, 4, 3)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 3, 2, 3, 4)).astype(np.float32)
    pad = 0 if padding == "SAME" else 1
    outs = tuple(_out_size(pad, s, k, st_, d) for s, k, st_, d in zip(x.shape[1:4], w.shape[:3], strides, dilations))
    if 0 in outs:
        return
    model = single_op_model("CONV_3D", [In(x.shape), Const(w), Const(rng.uniform(-1, 1, 4).astype(np.float32))],
                            [Out((2, *outs, 4))], **_conv3d_opts(padding, strides, dilations))
    assert_matches_litert(model, [x])


@SETTINGS
@given(padding=st.sampled_from(["SAME", "VALID"]), strides=st.tuples(*[st.integers(1, 2)] * 3),
       tile=st.sampled_from([1, 50, 400]), seed=st.integers(0, 2 ** 16))
def test_tiled_conv3d_transpose_matches_litert(tiny_tiles, padding, strides, tile, seed):
    tiny_tiles(tile)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (2, 3, 4, 3, 3)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 3, 2, 4, 3)).astype(np.float32)
    k = w.shape[:3]
    sp = [(s - 1) * st_ + 1 if padding == "SAME" else (s - 1) * st_ + kk for s, st_, kk in zip(x.shape[1:4], strides, k)]
    shape = np.array([2, *sp, 4], np.int32)
    model = single_op_model("CONV_3D_TRANSPOSE", [Const(shape), Const(w), In(x.shape)], [Out(tuple(shape))],
                            **_conv3d_opts(padding, strides, (1, 1, 1)))
    assert_matches_litert(model, [x])


# --- ONE_HOT --------------------------------------------------------------------------------

@SETTINGS
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), depth=st.integers(0, 6),
       axis=st.integers(-1, 3), block=st.integers(1, 20), wide=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_one_hot_in_blocks(tiny_tiles, shape, depth, axis, block, wide, seed):
    axis = min(axis, len(shape))
    tiny_tiles(block)
    rng = np.random.default_rng(seed)
    idx = rng.integers(-2, depth + 2, shape)
    if wide:
        idx = idx.astype(np.int64) + (rng.integers(0, 2, shape) << 32)  # static_cast<int> drops the high word
    else:
        idx = idx.astype(np.int32)
    a = len(shape) if axis == -1 else axis
    out_shape = tuple(shape[:a]) + (depth,) + tuple(shape[a:])
    model = single_op_model("ONE_HOT", [In(idx.shape, idx.dtype), Const(np.array(depth, np.int32)),
                                        Const(np.array(7, np.int16).astype(np.int32)),
                                        Const(np.array(-1, np.int32))], [Out(out_shape, np.int32)], axis=axis)
    got = run_acelera(model, [idx])[0]
    hot = np.expand_dims(idx.astype(np.int32), a) == np.arange(depth).reshape((-1,) + (1,) * (len(shape) - a))
    np.testing.assert_array_equal(got, np.where(hot, 7, -1).astype(np.int32))


# --- the budget counts what the kernels allocate --------------------------------------------

def _big_tconv(dtype) -> tuple[bytes, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    g = dict(n=1, h=48, w=48, kh=5, kw=5, sh=2, sw=2, pad="SAME", oh=96, ow=96)
    wk = (16, 5, 5, 16)
    if dtype == np.float32:
        x = rng.standard_normal((1, 48, 48, 16)).astype(np.float32)
        return _tconv(g, In(x.shape), rng.standard_normal(wk).astype(np.float32), None, None, np.float32, None)[0], [x]
    x = rng.integers(-128, 128, (1, 48, 48, 16)).astype(np.int8)
    return _tconv(g, In(x.shape, np.int8, (0.1, 2)), rng.integers(-127, 128, wk).astype(np.int8), (0.01, 0), None,
                  np.int8, (0.5, 0))[0], [x]


def _big_conv3d(transpose: bool) -> tuple[bytes, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 32, 32, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 16, 16)).astype(np.float32)
    opts = _conv3d_opts("SAME", (1, 1, 1), (1, 1, 1))
    if transpose:
        return single_op_model("CONV_3D_TRANSPOSE", [Const(np.array([1, 8, 32, 32, 16], np.int32)), Const(w),
                                                     In(x.shape)], [Out((1, 8, 32, 32, 16))], **opts), [x]
    return single_op_model("CONV_3D", [In(x.shape), Const(w)], [Out((1, 8, 32, 32, 16))], **opts), [x]


def _big_one_hot() -> tuple[bytes, list[np.ndarray]]:
    idx = np.random.default_rng(0).integers(0, 500, (2048, 4)).astype(np.int32)
    return single_op_model("ONE_HOT", [In(idx.shape, np.int32), Const(np.array(500, np.int32)),
                                       Const(np.array(1, np.int8)), Const(np.array(0, np.int8))],
                           [Out((2048, 4, 500), np.int8)], axis=-1), [idx]


@pytest.mark.parametrize("case", ["tconv_float", "tconv_int8", "conv3d", "conv3d_transpose", "one_hot"])
def test_tiled_kernels_allocate_what_the_budget_declares(tiny_tiles, case):
    model, inputs = {"tconv_float": lambda: _big_tconv(np.float32), "tconv_int8": lambda: _big_tconv(np.int8),
                     "conv3d": lambda: _big_conv3d(False), "conv3d_transpose": lambda: _big_conv3d(True),
                     "one_hot": _big_one_hot}[case]()
    untiled_out, untiled = invoke_temporaries(model, inputs)
    tiny_tiles(128 << 10)
    out, temporaries = invoke_temporaries(model, inputs)
    np.testing.assert_allclose(out, untiled_out, rtol=1e-5, atol=1e-4)
    declared = declared_scratch(model)
    assert temporaries <= declared, (temporaries, declared)
    if case != "one_hot":  # ONE_HOT's blocks are already small
        assert temporaries < untiled, (temporaries, untiled)
    if case.startswith("conv3d"):
        assert declared == 2 * memory.TILE_BYTES  # the tiles, not the whole product


def test_conv3d_scratch_is_no_longer_the_filter_times_the_output():
    """The budget used to count CONV_3D's positions x (kh*kw*ci*co) as if it built an im2col:
    72 GiB for a 128 MiB output, so the model was refused under any real budget."""
    x_shape, w = (1, 64, 128, 128, 32), np.zeros((3, 3, 3, 32, 32), np.float32)
    model = single_op_model("CONV_3D", [In(x_shape), Const(w)], [Out(x_shape)],
                            **_conv3d_opts("SAME", (1, 1, 1), (1, 1, 1)))
    assert declared_scratch(model) == 2 * memory.TILE_BYTES
    Interpreter(model_content=model, experimental_op_resolver_type=REF, max_memory_bytes=1 << 30)._rt.allocate()


def test_a_transpose_conv_over_budget_is_named_with_its_tile():
    x_shape = (1, 512, 512, 32)
    w = np.zeros((32, 7, 7, 32), np.float32)
    model, _ = _tconv(dict(n=1, oh=1024, ow=1024, pad="SAME", sh=2, sw=2), In(x_shape), w, None, None,
                      np.float32, None)
    # 32 MiB in + 128 MiB out; scratch: one 64 MiB tile + the padded accumulator
    it = Interpreter(model_content=model, experimental_op_resolver_type=REF, max_memory_bytes=300 << 20)
    with pytest.raises(memory.MemoryBudgetError, match=r"largest scratch at node 0 \(TRANSPOSE_CONV\)"):
        it.allocate_tensors()


ELEMENTWISE_CASES = [(op, kind) for op, kinds in memory.ELEMENTWISE_BROADCAST.items() for kind in kinds] + [
    (op, kind) for op, kinds in memory.ELEMENTWISE_WHOLE.items() for kind in kinds]
_DTYPES = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "INT32": np.int32, "FLOAT32": np.float32,
           "COMPLEX64": np.complex64}
_COMPARISONS = {"EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"}


def _elementwise(op: str, kind: str, a_shape, b_shape, out_shape):
    dt = _DTYPES[kind]
    q = {"INT8": (0.05, -1), "UINT8": (0.05, 120), "INT16": (0.05, 0)}.get(kind)
    if op in ("POW", "FLOOR_DIV", "FLOOR_MOD") or (op == "DIV" and kind == "INT32") or kind == "COMPLEX64":
        q = None
    out_dt, out_q = (np.bool_, None) if op in _COMPARISONS else (dt, q)
    model = single_op_model(op, [In(a_shape, dt, q), In(b_shape, dt, q)], [Out(out_shape, out_dt, out_q)])
    rng = np.random.default_rng(1)
    ins = []
    for s in (a_shape, b_shape):
        v = rng.integers(1, 4, s)  # no divisor at a zero point, no negative POW exponent
        ins.append((v + 1j * v).astype(dt) if kind == "COMPLEX64" else v.astype(dt))
    return model, ins


@pytest.mark.parametrize("op,kind", ELEMENTWISE_CASES)
def test_elementwise_broadcast_temporaries_are_declared(op, kind):
    """A broadcast the element-wise kernels cannot split into rows: what they allocate beyond
    the output is within what the budget declares for the node."""
    model, ins = _elementwise(op, kind, (32, 1, 256), (1, 32, 1), (32, 32, 256))
    _, temporaries = invoke_temporaries(model, ins)
    assert temporaries <= declared_scratch(model) + (64 << 10), (temporaries, declared_scratch(model))


@pytest.mark.parametrize("op,kind", [("DIV", "INT16"), ("ADD", "INT8"), ("EQUAL", "INT16")])
def test_elementwise_row_broadcasts_declare_one_block(op, kind):
    model, _ = _elementwise(op, kind, (64, 64, 256), (1, 1, 256), (64, 64, 256))
    assert declared_scratch(model) <= memory.ELEMENTWISE_BROADCAST[op][kind] * memory.BROADCAST_BLOCK


# --- CONV_2D (integer paths) and DEPTHWISE_CONV_2D in bands of output rows ------------------

@pytest.fixture
def tiny_conv_bands(monkeypatch):
    """Bands of at most `n` bytes in kernels/conv_im2col.py and the budget; counts the bands run."""
    from acelera.core.kernels import conv_im2col

    bands: list[tuple[int, int]] = []
    orig = conv_im2col.row_bands

    def counted(g, row_bytes):
        for band in orig(g, row_bytes):
            bands.append(band)
            yield band
    monkeypatch.setattr(conv_im2col, "row_bands", counted)

    def set_tile(n: int) -> list[tuple[int, int]]:
        bands.clear()
        monkeypatch.setattr(memory, "TILE_BYTES", n)
        return bands
    return set_tile


def _out_dim(pad: str, size: int, k: int, s: int, d: int) -> int:
    eff = (k - 1) * d + 1
    return int((size + s - 1 if pad == "SAME" else size + s - eff) / s)


@st.composite
def cgeometry(draw):
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(2, 9)), draw(st.integers(1, 7))
    kh, kw, sh, sw, dh, dw = (draw(st.integers(1, 3)) for _ in range(6))
    pad = draw(st.sampled_from(["SAME", "VALID"]))
    oh, ow = _out_dim(pad, h, kh, sh, dh), _out_dim(pad, w, kw, sw, dw)
    return dict(n=n, h=h, w=w, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pad=pad, oh=max(oh, 0), ow=max(ow, 0))


def _conv_model(kind: str, g, c: int, o: int, rng, depthwise: bool, mult: int = 1, groups: int = 1):
    """A (DEPTHWISE_)CONV_2D of `kind` ("int8", "uint8", "int16", "hybrid", "hybrid_channel",
    "float") and its input; a grouped CONV_2D (version 6) when `groups` > 1."""
    xs = (g["n"], g["h"], g["w"], c)
    if depthwise:
        o = c * mult
    wk = (1, g["kh"], g["kw"], o) if depthwise else (o, g["kh"], g["kw"], c // groups)
    opts = dict(padding=g["pad"], stride_h=g["sh"], stride_w=g["sw"], dilation_h_factor=g["dh"],
                dilation_w_factor=g["dw"], fused_activation_function="RELU")
    if depthwise:
        opts["depth_multiplier"] = mult
    out = (g["n"], g["oh"], g["ow"], o)
    qd = 3 if depthwise else 0
    if kind in ("float", "hybrid", "hybrid_channel"):
        x = rng.uniform(-2, 2, xs).astype(np.float32)
        b = Const(rng.uniform(-1, 1, o).astype(np.float32))
        if kind == "float":
            w, wq, version = rng.uniform(-1, 1, wk).astype(np.float32), None, 1
        elif kind == "hybrid" and not depthwise:
            w, wq, version = rng.integers(-127, 128, wk).astype(np.int8), (0.01, 0), 2
        else:
            s = rng.uniform(0.005, 0.02, o).astype(np.float32)
            w, wq = rng.integers(-127, 128, wk).astype(np.int8), (s, np.zeros(o, np.int64), qd)
            version = 6 if depthwise else 5
        ins, out_spec = [In(xs), Const(w, wq), b], Out(out)
    elif kind == "uint8":
        x = rng.integers(0, 256, xs).astype(np.uint8)
        w = rng.integers(0, 256, wk).astype(np.uint8)
        b = Const(rng.integers(-20000, 20000, o).astype(np.int32), (float(np.float32(0.05) * np.float32(0.01)), 0))
        ins, out_spec, version = [In(xs, np.uint8, (0.05, 120)), Const(w, (0.01, 130)), b], \
            Out(out, np.uint8, (0.3, 128)), 1
    elif kind == "int8":
        x = rng.integers(-128, 128, xs).astype(np.int8)
        s = rng.uniform(0.005, 0.02, o).astype(np.float32)
        w = rng.integers(-127, 128, wk).astype(np.int8)
        ins = [In(xs, np.int8, (0.05, -3)), Const(w, (s, np.zeros(o, np.int64), qd)),
               Const(rng.integers(-20000, 20000, o).astype(np.int32))]
        out_spec, version = Out(out, np.int8, (0.2, 5)), 3
    else:
        x = rng.integers(-30000, 30000, xs).astype(np.int16)
        s = rng.uniform(0.005, 0.02, o).astype(np.float32)
        w = rng.integers(-127, 128, wk).astype(np.int8)
        ins = [In(xs, np.int16, (0.0005, 0)), Const(w, (s, np.zeros(o, np.int64), qd)),
               Const(rng.integers(-(2 ** 30), 2 ** 30, o).astype(np.int64))]
        out_spec, version = Out(out, np.int16, (0.05, 0)), 5 if depthwise else 4
    op = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
    return single_op_model(op, ins, [out_spec], version=6 if groups > 1 else version, **opts), x


@SETTINGS
@given(g=cgeometry(), c=st.integers(1, 4), o=st.integers(1, 4), mult=st.integers(1, 2),
       tile=st.sampled_from([1, 300, 3000]), depthwise=st.booleans(),
       kind=st.sampled_from(["int8", "uint8", "int16", "hybrid", "hybrid_channel", "float"]),
       seed=st.integers(0, 2 ** 16))
def test_banded_conv_matches_untiled_and_litert(tiny_conv_bands, g, c, o, mult, tile, depthwise, kind, seed):
    if g["oh"] * g["ow"] == 0 or (kind == "float" and not depthwise):
        return  # the float CONV_2D is banded by test_memory_budget.py
    if kind == "hybrid" and depthwise:
        kind = "hybrid_channel"  # the hybrid depthwise takes per-channel scales only
    rng = np.random.default_rng(seed)
    model, x = _conv_model(kind, g, c, o, rng, depthwise, mult)
    tiny_conv_bands(64 << 20)  # hypothesis reuses the fixture: untiled first
    whole = run_acelera(model, [x])[0]
    bands = tiny_conv_bands(tile)
    from acelera.core.kernels import conv_integer
    with mock.patch.object(conv_integer, "dw_taps_kernel", lambda: None):  # the banded path, not the compiled taps
        got = assert_matches_litert(model, [x])[0]
    assert got.dtype == whole.dtype
    np.testing.assert_array_equal(got, whole)  # bit-exact with the untiled path, float ones too
    if tile == 1 and (depthwise or g["kh"] * g["kw"] > 1):
        assert set(bands) == {(r, r + 1) for r in range(g["oh"])}  # a band a row (pointwise CONV_2D: one matmul)


def test_small_convolutions_run_in_one_band(tiny_conv_bands):
    rng = np.random.default_rng(5)
    g = dict(n=1, h=6, w=5, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, pad="SAME", oh=6, ow=5)
    bands = tiny_conv_bands(64 << 20)
    for depthwise in (False, True):
        for kind in ("int8", "hybrid_channel"):
            model, x = _conv_model(kind, g, 3, 4, rng, depthwise)
            assert_matches_litert(model, [x])
    assert set(bands) == {(0, 6)}  # one band: every row


def _big_conv(kind: str, depthwise: bool) -> tuple[bytes, list[np.ndarray]]:
    g = dict(n=1, h=96, w=96, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, pad="SAME", oh=96, ow=96)
    c, mult = (16, 4) if depthwise else (32, 1)  # depthwise: temporaries of the output, 4x the input
    model, x = _conv_model(kind, g, c, 32, np.random.default_rng(0), depthwise, mult)
    return model, [x]


@pytest.mark.parametrize("case", ["conv_int8", "conv_hybrid", "dw_int8", "dw_int16", "dw_hybrid"])
def test_banded_convolutions_allocate_what_the_budget_declares(tiny_conv_bands, monkeypatch, case):
    kind = {"conv_int8": "int8", "conv_hybrid": "hybrid_channel", "dw_int8": "int8", "dw_int16": "int16",
            "dw_hybrid": "hybrid_channel"}[case]
    if case == "dw_hybrid":  # the banded numpy path; the compiled taps are checked below
        from acelera.core.kernels import conv_integer
        monkeypatch.setattr(conv_integer, "dw_taps_kernel", lambda: None)
    model, inputs = _big_conv(kind, case.startswith("dw"))
    untiled_out, untiled = invoke_temporaries(model, inputs)
    assert untiled <= declared_scratch(model), (untiled, declared_scratch(model))  # the whole path
    bands = tiny_conv_bands(256 << 10)
    out, temporaries = invoke_temporaries(model, inputs)
    np.testing.assert_array_equal(out, untiled_out)
    assert len(bands) > 4
    declared = declared_scratch(model)
    assert temporaries <= declared, (temporaries, declared)
    # what stays whole is the converted, channel-repeated and padded input
    assert temporaries < (untiled / 2 if case.startswith("conv") else untiled), (temporaries, untiled)


@SETTINGS
@given(g=cgeometry(), ci=st.integers(1, 3), og=st.integers(1, 3), groups=st.sampled_from([2, 3]),
       tile=st.sampled_from([1, 300, 3000]), kind=st.sampled_from(["int8", "hybrid_channel", "float"]),
       seed=st.integers(0, 2 ** 16))
def test_grouped_conv_runs_in_bands(tiny_conv_bands, g, ci, og, groups, tile, kind, seed):
    """Grouped CONV_2D (quantized, hybrid, float) builds its im2col a band of rows at a time too."""
    if g["oh"] * g["ow"] == 0:
        return
    rng = np.random.default_rng(seed)
    model, x = _conv_model(kind, g, ci * groups, og * groups, rng, False, groups=groups)
    tiny_conv_bands(64 << 20)
    whole = run_acelera(model, [x])[0]
    bands = tiny_conv_bands(tile)
    got = assert_matches_litert(model, [x])[0] if kind != "float" else run_acelera(model, [x])[0]
    if kind == "float":
        np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-5)  # other matmul shapes: BLAS rounding
    else:
        np.testing.assert_array_equal(got, whole)
    if tile == 1:
        assert set(bands) == {(r, r + 1) for r in range(g["oh"])}


def test_a_large_grouped_conv_declares_its_bands(tiny_conv_bands):
    g = dict(n=1, h=64, w=64, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, pad="SAME", oh=64, ow=64)
    model, x = _conv_model("int8", g, 32, 32, np.random.default_rng(1), False, groups=4)
    untiled_out, _ = invoke_temporaries(model, [x])
    bands = tiny_conv_bands(256 << 10)
    out, temporaries = invoke_temporaries(model, [x])
    np.testing.assert_array_equal(out, untiled_out)
    assert len(bands) > 4
    assert temporaries <= declared_scratch(model), (temporaries, declared_scratch(model))


def test_compiled_hybrid_depthwise_needs_no_bands(tiny_conv_bands):
    """The compiled hybrid depthwise taps read the input in place: no band, no im2col copy, and
    within the declared scratch whatever the tile."""
    model, inputs = _big_conv("hybrid_channel", True)
    untiled_out, untiled = invoke_temporaries(model, inputs)
    bands = tiny_conv_bands(256 << 10)
    out, temporaries = invoke_temporaries(model, inputs)
    np.testing.assert_array_equal(out, untiled_out)
    assert bands == [] and temporaries <= untiled <= declared_scratch(model), (temporaries, untiled)
