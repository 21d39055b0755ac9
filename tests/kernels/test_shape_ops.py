"""Shape and data-movement kernels (part A) against LiteRT's reference kernels.

RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, PAD, PADV2, MIRROR_PAD, STRIDED_SLICE, SLICE,
CONCATENATION, SPLIT, SPLIT_V, PACK, UNPACK over every dtype LiteRT accepts for them.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import rng_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_exact, assert_matches_litert, random_input, run_acelera, run_litert

from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.errors import AceleraError, UnsupportedOpError
from acelera.core.interpreter import Interpreter, OpResolverType

REF = OpResolverType.BUILTIN_REF  # the reference kernels, not LiteRT's default XNNPACK

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# dtype -> quantization used for its tensors (None: not quantized)
DTYPES = {np.float32: None, np.int8: (0.05, 3), np.uint8: (0.05, 128), np.int16: (0.01, 0),
          np.int32: None, np.int64: None, np.bool_: None}
ALL = list(DTYPES)


def q(dt):
    return DTYPES.get(dt)


def shapes(min_rank=1, max_rank=4, min_side=1, max_side=4):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def allocate_error(model: bytes) -> Exception:
    it = Interpreter(experimental_op_resolver_type=REF, model_content=model)
    with pytest.raises(AceleraError) as e:
        it.allocate_tensors()
    return e.value


def assert_matches_builtin(model: bytes, inputs) -> list[np.ndarray]:
    """Bit-exact against LiteRT's BUILTIN kernels without XNNPACK, for versions past BUILTIN_REF's.

    (The oracle's reference=False means the AUTO resolver, whose XNNPACK delegate reads some
    options differently, e.g. it ignores STRIDED_SLICE's `offset`.)
    """
    return assert_exact(model, inputs, reference="builtin")


def litert_rejects(model: bytes, inputs) -> bool:
    try:
        run_litert(model, inputs)
    except Exception:
        return True
    return False


# --- RESHAPE / SQUEEZE / EXPAND_DIMS -----------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ALL), how=st.sampled_from(["option", "const", "input"]),
       seed=st.integers(0, 2**31))
def test_reshape(data, dt, how, seed):
    shape = data.draw(shapes(0, 5, 1, 4))
    n = int(np.prod(shape))
    # a random factorization of n, maybe with one -1
    dims = []
    rest = n
    for _ in range(data.draw(st.integers(0, 4))):
        divs = [d for d in range(1, rest + 1) if rest % d == 0]
        d = data.draw(st.sampled_from(divs))
        dims.append(d)
        rest //= d
    dims.append(rest)
    out_shape = tuple(dims)
    new = list(dims)
    if data.draw(st.booleans()):
        new[data.draw(st.integers(0, len(new) - 1))] = -1
    x = random_input(shape, dt, rng_of(seed))
    if how == "option":
        m = single_op_model("RESHAPE", [In(shape, dt, q(dt))], [Out(out_shape, dt, q(dt))], new_shape=new)
        ins = [x]
    elif how == "const":
        m = single_op_model("RESHAPE", [In(shape, dt, q(dt)), Const(np.array(new, np.int32))],
                            [Out(out_shape, dt, q(dt))])
        ins = [x]
    else:
        m = single_op_model("RESHAPE", [In(shape, dt, q(dt)), In((len(new),), np.int32)],
                            [Out(out_shape, dt, q(dt))])
        ins = [x, np.array(new, np.int32)]
    got = assert_matches_litert(m, ins)
    assert got[0].shape == out_shape


@pytest.mark.parametrize("shape,new,want", [
    ((1, 1), [0], ()),            # legacy scalar spelling
    ((0, 4), [-1, 0], (4, 0)),    # zero-sized stretch rules of ResolveOutputShape
    ((0, 4), [-1, 2], (0, 2)),
    ((2, 0), [0, -1], (0, 2)),
    ((), [1, 1, -1], (1, 1, 1)),
])
def test_reshape_edge_shapes(shape, new, want):
    m = single_op_model("RESHAPE", [In(shape)], [Out(want)], new_shape=new)
    got = assert_matches_litert(m, [random_input(shape, np.float32, rng_of(0))])
    assert got[0].shape == want


def test_reshape_int64_shape_tensor_falls_back_to_option():
    # LiteRT only reads an int32 vector shape tensor; otherwise the new_shape option applies.
    m = single_op_model("RESHAPE", [In((2, 6)), Const(np.array([4, 3], np.int64))], [Out((3, 4))], new_shape=[3, 4])
    got = assert_matches_litert(m, [random_input((2, 6), np.float32, rng_of(1))])
    assert got[0].shape == (3, 4)


def test_reshape_invalid_shape_raises():
    m = single_op_model("RESHAPE", [In((2, 3))], [Out((4, 2))], new_shape=[4, 2])
    allocate_error(m)


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ALL), seed=st.integers(0, 2**31))
def test_squeeze(data, dt, seed):
    shape = data.draw(shapes(1, 6, 1, 3))
    ones = [i for i, d in enumerate(shape) if d == 1]
    chosen = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    dims = [i - len(shape) if data.draw(st.booleans()) else i for i in chosen]
    drop = set(chosen) if chosen else set(ones)
    out = tuple(d for i, d in enumerate(shape) if i not in drop)
    m = single_op_model("SQUEEZE", [In(shape, dt, q(dt))], [Out(out, dt, q(dt))], squeeze_dims=dims)
    assert_matches_litert(m, [random_input(shape, dt, rng_of(seed))])


def test_squeeze_non_unit_dim_raises():
    m = single_op_model("SQUEEZE", [In((2, 3))], [Out((3,))], squeeze_dims=[0])
    allocate_error(m)


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ALL), axis_dt=st.sampled_from([np.int32, np.int64]),
       const=st.booleans(), seed=st.integers(0, 2**31))
def test_expand_dims(data, dt, axis_dt, const, seed):
    shape = data.draw(shapes(0, 4))
    r = len(shape)
    axis = data.draw(st.integers(-r - 1, r))
    a = axis + r + 1 if axis < 0 else axis
    out = shape[:a] + (1,) + shape[a:]
    ax = np.array([axis], axis_dt)
    x = random_input(shape, dt, rng_of(seed))
    if const:
        m = single_op_model("EXPAND_DIMS", [In(shape, dt, q(dt)), Const(ax)], [Out(out, dt, q(dt))])
        assert_matches_litert(m, [x])
    else:
        m = single_op_model("EXPAND_DIMS", [In(shape, dt, q(dt)), In((1,), axis_dt)], [Out(out, dt, q(dt))])
        assert_matches_litert(m, [x, ax])


def test_expand_dims_requires_same_quantization():
    m = single_op_model("EXPAND_DIMS", [In((3,), np.int8, (0.1, 0)), Const(np.array([0], np.int32))],
                        [Out((1, 3), np.int8, (0.2, 0))])
    assert isinstance(allocate_error(m), UnsupportedOpError)


# --- TRANSPOSE ----------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ALL), const=st.booleans(), seed=st.integers(0, 2**31))
def test_transpose(data, dt, const, seed):
    shape = data.draw(shapes(1, 6, 1, 3))
    r = len(shape)
    perm = data.draw(st.permutations(range(r)))
    perm = [p - r if data.draw(st.booleans()) else p for p in perm]
    out = tuple(shape[p] for p in perm)
    version = 6 if r > 5 else 4 if r > 4 else 1
    x = random_input(shape, dt, rng_of(seed))
    if const:
        m = single_op_model("TRANSPOSE", [In(shape, dt, q(dt)), Const(np.array(perm, np.int32))],
                            [Out(out, dt, q(dt))], version=version)
        assert_matches_litert(m, [x])
    else:
        m = single_op_model("TRANSPOSE", [In(shape, dt, q(dt)), In((r,), np.int32)], [Out(out, dt, q(dt))],
                            version=version)
        assert_matches_litert(m, [x, np.array(perm, np.int32)])


def test_transpose_rank8_v8():
    shape = (2, 1, 2, 3, 1, 2, 2, 1)
    perm = [7, 3, 0, 6, 1, 5, 2, 4]
    m = single_op_model("TRANSPOSE", [In(shape), Const(np.array(perm, np.int32))],
                        [Out(tuple(shape[p] for p in perm))], version=8)
    assert_matches_litert(m, [random_input(shape, np.float32, rng_of(2))])


def test_transpose_float16_v9():
    m = single_op_model("TRANSPOSE", [In((2, 3, 4), np.float16), Const(np.array([1, 2, 0], np.int32))],
                        [Out((3, 4, 2), np.float16)], version=9)
    assert_matches_builtin(m, [random_input((2, 3, 4), np.float16, rng_of(3))])


def test_transpose_rejects_int64_perm():
    # LiteRT reads the permutation as int32 whatever its type: an int64 one is garbage there.
    m = single_op_model("TRANSPOSE", [In((2, 3)), Const(np.array([1, 0], np.int64))], [Out((3, 2))])
    assert isinstance(allocate_error(m), UnsupportedOpError)


# --- PAD / PADV2 --------------------------------------------------------------------------

PAD_DTYPES = ALL + [np.float16]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(PAD_DTYPES), op=st.sampled_from(["PAD", "PADV2"]),
       pad_dt=st.sampled_from([np.int32, np.int64]), const_pads=st.booleans(), seed=st.integers(0, 2**31))
def test_pad(data, dt, op, pad_dt, const_pads, seed):
    shape = data.draw(shapes(1, 5, 1, 4))
    r = len(shape)
    image_style = r == 4 and data.draw(st.booleans())
    pads = [[data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))] for _ in range(r)]
    if image_style:  # LiteRT's PadImageStyle path
        pads[0] = [0, 0]
        pads[3] = [0, 0]
    out = tuple(d + a + b for d, (a, b) in zip(shape, pads))
    rng = rng_of(seed)
    x = random_input(shape, dt, rng)
    quant = q(dt)
    if dt in (np.int8, np.int16) and data.draw(st.booleans()):
        quant = None  # not-quantized int8/int16 pad with 0, not with a zero point
    if dt == np.uint8 and data.draw(st.booleans()):
        quant = (0.05, data.draw(st.integers(0, 255)))
    if dt == np.int8 and quant is not None:
        quant = (0.05, data.draw(st.integers(-128, 127)))
    version = 4 if r > 4 else {np.int8: 2, np.int16: 3, np.bool_: 5}.get(dt, 1)
    p = np.array(pads, pad_dt)
    inputs = [In(shape, dt, quant), Const(p) if const_pads else In((r, 2), pad_dt)]
    feed = [x] if const_pads else [x, p]
    if op == "PADV2":
        c = random_input((1,), dt, rng)
        inputs.append(Const(c, quant))
    m = single_op_model(op, inputs, [Out(out, dt, quant)], version=version)
    assert_matches_litert(m, feed)


@pytest.mark.parametrize("pad_dt", [np.int8, np.int16, np.bool_])
def test_pad_small_padding_types(pad_dt):
    p = np.array([[1, 0], [0, 1]], pad_dt)
    m = single_op_model("PAD", [In((2, 3)), Const(p)], [Out((3, 4))])
    assert_matches_litert(m, [random_input((2, 3), np.float32, rng_of(4))])


def test_padv2_constant_from_input():
    m = single_op_model("PADV2", [In((2, 3)), Const(np.array([[1, 1], [2, 0]], np.int32)), In((1,))], [Out((4, 5))])
    assert_matches_litert(m, [random_input((2, 3), np.float32, rng_of(5)), np.array([-7.5], np.float32)])


def test_pad_shared_model_channel_pad_int8():
    # The face detector's channel padding: (1,64,64,24) -> 28 channels, zero point -128.
    quant = (0.0307, -128)
    p = np.array([[0, 0], [0, 0], [0, 0], [0, 4]], np.int32)
    m = single_op_model("PAD", [In((1, 64, 64, 24), np.int8, quant), Const(p)], [Out((1, 64, 64, 28), np.int8, quant)],
                        version=2)
    assert_matches_litert(m, [random_input((1, 64, 64, 24), np.int8, rng_of(6))])


def test_padv2_quantized_constant_needs_output_params():
    m = single_op_model("PADV2", [In((2,), np.uint8, (0.1, 10)), Const(np.array([[1, 1]], np.int32)),
                                  Const(np.array([3], np.uint8), (0.2, 10))], [Out((4,), np.uint8, (0.1, 10))])
    assert isinstance(allocate_error(m), UnsupportedOpError)


def test_pad_negative_padding_raises():
    m = single_op_model("PAD", [In((2, 3)), Const(np.array([[1, -1], [0, 0]], np.int32))], [Out((2, 3))])
    allocate_error(m)


# --- MIRROR_PAD ---------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ALL), mode=st.sampled_from(["REFLECT", "SYMMETRIC"]),
       pad_dt=st.sampled_from([np.int32, np.int64]), const_pads=st.booleans(), seed=st.integers(0, 2**31))
def test_mirror_pad(data, dt, mode, pad_dt, const_pads, seed):
    shape = data.draw(shapes(1, 4, 1, 5))
    off = 1 if mode == "REFLECT" else 0
    pads = [[data.draw(st.integers(0, d - off)), data.draw(st.integers(0, d - off))] for d in shape]
    out = tuple(d + a + b for d, (a, b) in zip(shape, pads))
    p = np.array(pads, pad_dt)
    x = random_input(shape, dt, rng_of(seed))
    version = {np.int8: 2, np.int16: 3}.get(dt, 1)
    if const_pads:
        m = single_op_model("MIRROR_PAD", [In(shape, dt, q(dt)), Const(p)], [Out(out, dt, q(dt))], mode=mode,
                            version=version)
        assert_matches_litert(m, [x])
    else:
        m = single_op_model("MIRROR_PAD", [In(shape, dt, q(dt)), In((len(shape), 2), pad_dt)], [Out(out, dt, q(dt))],
                            mode=mode, version=version)
        assert_matches_litert(m, [x, p])


def test_mirror_pad_too_large_raises():
    m = single_op_model("MIRROR_PAD", [In((3,)), Const(np.array([[3, 0]], np.int32))], [Out((6,))], mode="REFLECT")
    allocate_error(m)


# --- STRIDED_SLICE ------------------------------------------------------------------------

def _ss_case(data, shape, allow_ellipsis_new_axis):
    r = len(shape)
    n = data.draw(st.integers(1 if r else 0, r))
    begin, end, strides = [], [], []
    for d in shape[:n]:
        s = data.draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
        begin.append(data.draw(st.integers(-d - 2, d + 2)))
        end.append(data.draw(st.integers(-d - 2, d + 2)))
        strides.append(s)
    bits = lambda: data.draw(st.integers(0, (1 << n) - 1)) if n else 0  # noqa: E731
    begin_mask, end_mask = bits(), bits()
    shrink = 0
    for i in range(n):  # shrink only on in-range indices with positive strides (LiteRT is undefined otherwise)
        if strides[i] > 0 and data.draw(st.booleans()) and data.draw(st.booleans()):
            b = begin[i] + shape[i] if begin[i] < 0 else begin[i]
            if (begin_mask >> i) & 1:
                b = 0
            if 0 <= b < shape[i]:
                shrink |= 1 << i
    ellipsis = new_axis = 0
    if allow_ellipsis_new_axis and n:
        if data.draw(st.booleans()):
            ellipsis = 1 << data.draw(st.integers(0, n - 1))
        if data.draw(st.booleans()):
            new_axis = bits() & ~ellipsis & ~shrink
    return begin, end, strides, dict(begin_mask=begin_mask, end_mask=end_mask, shrink_axis_mask=shrink,
                                     ellipsis_mask=ellipsis, new_axis_mask=new_axis)


def _ss_model(shape, dt, begin, end, strides, opts, out, version, const=True):
    idx = [np.array(v, np.int32) for v in (begin, end, strides)]
    if const:
        ins = [In(shape, dt, q(dt))] + [Const(v) for v in idx]
    else:
        ins = [In(shape, dt, q(dt))] + [In(v.shape, np.int32) for v in idx]
    return single_op_model("STRIDED_SLICE", ins, [Out(out, dt, q(dt))], version=version, **opts)


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ALL), ellipsis=st.booleans(), const=st.booleans(),
       seed=st.integers(0, 2**31))
def test_strided_slice(data, dt, ellipsis, const, seed):
    shape = data.draw(shapes(1, 5, 1, 5))
    begin, end, strides, opts = _ss_case(data, shape, ellipsis)
    x = random_input(shape, dt, rng_of(seed))
    # The declared output shape only matters for the shape pass: take LiteRT's.
    probe = _ss_model(shape, dt, begin, end, strides, opts, (1,), 1)
    want = run_litert(probe, [x])[0].shape
    version = 4 if len(shape) > 4 else {np.int8: 2, np.bool_: 3}.get(dt, 1)
    const = const or 0 in want  # LiteRT's Python API cannot read an empty dynamic tensor
    m = _ss_model(shape, dt, begin, end, strides, opts, want, version, const)
    feed = [x] if const else [x] + [np.array(v, np.int32) for v in (begin, end, strides)]
    assert_matches_litert(m, feed)


@pytest.mark.parametrize("shape,begin,end,strides,opts", [
    ((2, 3, 4), [0, 1], [0, 3], [1, 1], dict(ellipsis_mask=1)),                  # [..., 1:3]
    ((2, 3, 4), [0, 0, 1], [0, 0, 2], [1, 1, 1], dict(ellipsis_mask=2, new_axis_mask=1)),  # [None, ..., 1:2]
    ((2, 3, 4), [1, 0, 0], [2, 0, 0], [1, 1, 1], dict(new_axis_mask=6, shrink_axis_mask=1)),  # [1, None, None]
    ((2, 3, 4), [0, 0, -1], [0, 0, 0], [1, 1, -1], dict(ellipsis_mask=2, new_axis_mask=1, end_mask=4)),
    ((4, 5), [-1, 3], [0, 0], [-1, -2], dict(end_mask=1)),
    ((4, 5), [0, 2], [0, 0], [1, 1], dict(begin_mask=1, end_mask=3, shrink_axis_mask=0)),
])
def test_strided_slice_ellipsis_new_axis_v6(shape, begin, end, strides, opts):
    x = random_input(shape, np.float32, rng_of(7))
    probe = _ss_model(shape, np.float32, begin, end, strides, opts, (1,), 1)
    want = run_litert(probe, [x])[0].shape
    # v6 is the version for ellipsis/new_axis masks (the default resolver); v1 runs them on BUILTIN_REF.
    assert_matches_builtin(_ss_model(shape, np.float32, begin, end, strides, opts, want, 6), [x])
    assert_matches_litert(_ss_model(shape, np.float32, begin, end, strides, opts, want, 1), [x])


@SETTINGS
@given(data=st.data(), dt=st.sampled_from([np.float32, np.int8, np.int16]), seed=st.integers(0, 2**31))
def test_strided_slice_offset_v8(data, dt, seed):
    shape = data.draw(shapes(1, 4, 1, 5))
    begin, size, strides = [], [], []
    for d in shape:
        b = data.draw(st.integers(0, d - 1))
        s = data.draw(st.integers(0, d - b))
        st_ = data.draw(st.sampled_from([1, 2]))
        begin.append(b)
        size.append(s)
        strides.append(st_)
    out = tuple(-(-s // k) for s, k in zip(size, strides))
    m = _ss_model(shape, dt, begin, size, strides, dict(offset=True), out, 8)
    got = assert_matches_builtin(m, [random_input(shape, dt, rng_of(seed))])
    assert got[0].shape == out


def test_strided_slice_shared_model_int8():
    # hand_recrop_int8: x[:, :, :, :16] on (1, 2, 2, 32), version 2
    quant = (0.209, -81)
    m = single_op_model("STRIDED_SLICE", [In((1, 2, 2, 32), np.int8, quant), Const(np.array([0, 0, 0, 0], np.int32)),
                                          Const(np.array([1, 2, 2, 16], np.int32)), Const(np.array([1, 1, 1, 1], np.int32))],
                        [Out((1, 2, 2, 16), np.int8, quant)], version=2)
    assert_matches_litert(m, [random_input((1, 2, 2, 32), np.int8, rng_of(8))])


def test_strided_slice_rejects_int64_indices():
    m = single_op_model("STRIDED_SLICE", [In((4,)), Const(np.array([0], np.int64)), Const(np.array([2], np.int64)),
                                          Const(np.array([1], np.int64))], [Out((2,))])
    assert isinstance(allocate_error(m), UnsupportedOpError)


def test_strided_slice_zero_stride_raises():
    m = single_op_model("STRIDED_SLICE", [In((4,)), Const(np.array([0], np.int32)), Const(np.array([2], np.int32)),
                                          Const(np.array([0], np.int32))], [Out((2,))])
    allocate_error(m)


# --- SLICE --------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dt=st.sampled_from(ALL), idx_dt=st.sampled_from([np.int32, np.int64]),
       const=st.booleans(), seed=st.integers(0, 2**31))
def test_slice(data, dt, idx_dt, const, seed):
    shape = data.draw(shapes(1, 6, 1, 4))
    begin, size = [], []
    for d in shape:
        b = data.draw(st.integers(0, d))
        begin.append(b)
        size.append(-1 if data.draw(st.booleans()) else data.draw(st.integers(0, d - b)))
    out = tuple(d - b if s == -1 else s for d, b, s in zip(shape, begin, size))
    b_, s_ = np.array(begin, idx_dt), np.array(size, idx_dt)
    version = 5 if len(shape) > 4 else {np.int8: 2, np.int16: 4}.get(dt, 1)
    x = random_input(shape, dt, rng_of(seed))
    if const or 0 in out:  # LiteRT's Python API cannot read an empty dynamic tensor
        m = single_op_model("SLICE", [In(shape, dt, q(dt)), Const(b_), Const(s_)], [Out(out, dt, q(dt))], version=version)
        got = assert_matches_litert(m, [x])
    else:
        m = single_op_model("SLICE", [In(shape, dt, q(dt)), In(b_.shape, idx_dt), In(s_.shape, idx_dt)],
                            [Out(out, dt, q(dt))], version=version)
        got = assert_matches_litert(m, [x, b_, s_])
    assert got[0].shape == out


@pytest.mark.parametrize("dt,version", [(np.uint32, 6), (np.float16, 8)])
def test_slice_extra_types(dt, version):
    m = single_op_model("SLICE", [In((3, 4), dt), Const(np.array([1, 1], np.int32)), Const(np.array([2, -1], np.int32))],
                        [Out((2, 3), dt)], version=version)
    x = np.arange(12).reshape(3, 4).astype(dt)
    assert_matches_litert(m, [x])


def test_slice_out_of_range_raises():
    m = single_op_model("SLICE", [In((3,)), Const(np.array([2], np.int32)), Const(np.array([2], np.int32))], [Out((2,))])
    allocate_error(m)


# --- CONCATENATION ------------------------------------------------------------------------

CONCAT_DTYPES = ALL + [np.float16, np.uint32]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(CONCAT_DTYPES), seed=st.integers(0, 2**31))
def test_concatenation(data, dt, seed):
    shape = data.draw(shapes(1, 5, 1, 4))
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    a = axis % r
    n = data.draw(st.integers(1, 4))
    sizes = [data.draw(st.integers(0 if n > 1 else 1, 4)) for _ in range(n)]
    in_shapes = [shape[:a] + (s,) + shape[a + 1:] for s in sizes]
    out = shape[:a] + (sum(sizes),) + shape[a + 1:]
    rng = rng_of(seed)
    version = {np.int8: 2, np.int16: 3, np.uint32: 4, np.float16: 6}.get(dt, 1)
    m = single_op_model("CONCATENATION", [In(s, dt, q(dt)) for s in in_shapes], [Out(out, dt, q(dt))],
                        axis=axis, version=version)
    feed = [random_input(s, dt, rng) for s in in_shapes]
    if version == 6:  # past BUILTIN_REF's registered versions
        assert_matches_builtin(m, feed)
    else:
        assert_matches_litert(m, feed)


@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**31))
def test_concatenation_uint8_requantizes(data, seed):
    n = data.draw(st.integers(1, 4))
    scale = st.floats(0.001, 2.0, allow_nan=False).map(lambda f: float(np.float32(f)))
    quants = [(data.draw(scale), data.draw(st.integers(0, 255))) for _ in range(n)]
    out_q = data.draw(st.sampled_from(quants)) if data.draw(st.booleans()) else (data.draw(scale), data.draw(st.integers(0, 255)))
    sizes = [data.draw(st.integers(1, 5)) for _ in range(n)]
    rng = rng_of(seed)
    m = single_op_model("CONCATENATION", [In((3, s), np.uint8, qq) for s, qq in zip(sizes, quants)],
                        [Out((3, sum(sizes)), np.uint8, out_q)], axis=1)
    assert_matches_litert(m, [random_input((3, s), np.uint8, rng) for s in sizes])


def test_concatenation_int16_different_scales_copies_raw():
    m = single_op_model("CONCATENATION", [In((2,), np.int16, (0.5, 0)), In((2,), np.int16, (0.25, 0))],
                        [Out((4,), np.int16, (1.0, 0))], axis=0, version=3)
    assert_matches_litert(m, [np.array([10, -20], np.int16), np.array([300, 40], np.int16)])


def test_concatenation_int8_needs_output_params():
    m = single_op_model("CONCATENATION", [In((2,), np.int8, (0.5, 0)), In((2,), np.int8, (0.25, 0))],
                        [Out((4,), np.int8, (0.5, 0))], axis=0, version=2)
    assert isinstance(allocate_error(m), UnsupportedOpError)


def test_concatenation_constant_scalars():
    m = single_op_model("CONCATENATION", [Const(np.array(1.5, np.float32)), Const(np.array(-2.0, np.float32))],
                        [Out((2,))], axis=0)
    got = assert_matches_litert(m, [])
    assert got[0].tolist() == [1.5, -2.0]


@pytest.mark.parametrize("act,lo,hi", [("RELU", 0.0, np.inf), ("RELU6", 0.0, 6.0), ("RELU_N1_TO_1", -1.0, 1.0)])
def test_concatenation_fused_activation_float(act, lo, hi):
    # LiteRT refuses a fused activation on CONCATENATION; acelera clamps the result.
    a = np.array([[-3.0, 0.5, 7.0]], np.float32)
    b = np.array([[2.0, -0.25, 10.0]], np.float32)
    m = single_op_model("CONCATENATION", [In((1, 3)), In((1, 3))], [Out((2, 3))], axis=0, fused_activation_function=act)
    assert litert_rejects(m, [a, b])
    got = run_acelera(m, [a, b])[0]
    np.testing.assert_array_equal(got, np.clip(np.concatenate([a, b]), lo, hi))
    assert a[0, 0] == -3.0  # inputs untouched


def test_concatenation_fused_activation_quantized():
    quant = (0.05, 10)
    a = np.array([0, 10, 200, 255], np.uint8)
    m = single_op_model("CONCATENATION", [In((4,), np.uint8, quant), In((4,), np.uint8, quant)],
                        [Out((8,), np.uint8, quant)], axis=0, fused_activation_function="RELU6")
    got = run_acelera(m, [a, a[::-1].copy()])[0]
    hi = 10 + round(6.0 / 0.05)
    np.testing.assert_array_equal(got, np.clip(np.concatenate([a, a[::-1]]), 10, hi))


# --- SPLIT / SPLIT_V ----------------------------------------------------------------------

SPLIT_DTYPES = [np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(SPLIT_DTYPES), const_axis=st.booleans(), seed=st.integers(0, 2**31))
def test_split(data, dt, const_axis, seed):
    shape = list(data.draw(shapes(1, 4, 1, 4)))
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    num = data.draw(st.integers(1, 4))
    shape[axis % r] *= num
    shape = tuple(shape)
    piece = tuple(d // num if i == axis % r else d for i, d in enumerate(shape))
    version = {np.int8: 2, np.int32: 3, np.int16: 4}.get(dt, 1)
    ax = np.array([axis], np.int32)
    x = random_input(shape, dt, rng_of(seed))
    outs = [Out(piece, dt, q(dt))] * num
    if const_axis:
        m = single_op_model("SPLIT", [Const(ax), In(shape, dt, q(dt))], outs, num_splits=num, version=version)
        assert_matches_litert(m, [x])
    else:
        m = single_op_model("SPLIT", [In((1,), np.int32), In(shape, dt, q(dt))], outs, num_splits=num, version=version)
        assert_matches_litert(m, [ax, x])


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(SPLIT_DTYPES), size_dt=st.sampled_from([np.int32, np.int64]),
       const=st.booleans(), seed=st.integers(0, 2**31))
def test_split_v(data, dt, size_dt, const, seed):
    shape = list(data.draw(shapes(1, 4, 1, 4)))
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    a = axis % r
    sizes = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    if sum(sizes) == 0:
        sizes[0] = 1
    shape[a] = sum(sizes)
    shape = tuple(shape)
    spec = list(sizes)
    if data.draw(st.booleans()):
        spec[data.draw(st.integers(0, len(spec) - 1))] = -1
    outs = [Out(shape[:a] + (s,) + shape[a + 1:], dt, q(dt)) for s in sizes]
    version = 2 if dt == np.int8 else 1
    x = random_input(shape, dt, rng_of(seed))
    sz = np.array(spec, size_dt)
    ax = np.array([axis], np.int32)
    if const or 0 in sizes:  # LiteRT's Python API cannot read an empty dynamic tensor
        m = single_op_model("SPLIT_V", [In(shape, dt, q(dt)), Const(sz), Const(ax)], outs, num_splits=len(sizes),
                            version=version)
        assert_matches_litert(m, [x])
    else:
        m = single_op_model("SPLIT_V", [In(shape, dt, q(dt)), In(sz.shape, size_dt), In((1,), np.int32)], outs,
                            num_splits=len(sizes), version=version)
        assert_matches_litert(m, [x, sz, ax])


# --- PACK / UNPACK ------------------------------------------------------------------------

PACK_DTYPES = [np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32]
UNPACK_DTYPES = [np.float32, np.int8, np.uint8, np.int16, np.int32, np.bool_, np.float16]


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(PACK_DTYPES), seed=st.integers(0, 2**31))
def test_pack(data, dt, seed):
    shape = data.draw(shapes(0, 4))
    r = len(shape)
    axis = data.draw(st.integers(-r - 1, r))
    a = axis + r + 1 if axis < 0 else axis
    n = data.draw(st.integers(1, 4))
    out = shape[:a] + (n,) + shape[a:]
    version = {np.int8: 2, np.int16: 3, np.uint32: 4}.get(dt, 1)
    rng = rng_of(seed)
    m = single_op_model("PACK", [In(shape, dt, q(dt))] * n, [Out(out, dt, q(dt))], values_count=n, axis=axis,
                        version=version)
    assert_matches_litert(m, [random_input(shape, dt, rng) for _ in range(n)])


@SETTINGS
@given(data=st.data(), dt=st.sampled_from(UNPACK_DTYPES), seed=st.integers(0, 2**31))
def test_unpack(data, dt, seed):
    shape = data.draw(shapes(1, 4))
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    a = axis % r
    piece = shape[:a] + shape[a + 1:]
    version = {np.int8: 2, np.uint8: 2, np.bool_: 3, np.int16: 4, np.float16: 5}.get(dt, 1)
    m = single_op_model("UNPACK", [In(shape, dt, q(dt))], [Out(piece, dt, q(dt))] * shape[a], num=shape[a], axis=axis,
                        version=version)
    assert_matches_litert(m, [random_input(shape, dt, rng_of(seed))])


# --- unsupported combinations -------------------------------------------------------------

@pytest.mark.parametrize("op,inputs,outputs,opts", [
    ("SPLIT", [Const(np.array([0], np.int32)), In((2, 2), np.bool_)], [Out((1, 2), np.bool_)] * 2, dict(num_splits=2)),
    ("SPLIT_V", [In((2, 2), np.bool_), Const(np.array([1, 1], np.int32)), Const(np.array([0], np.int32))],
     [Out((1, 2), np.bool_)] * 2, dict(num_splits=2)),
    ("PACK", [In((2,), np.bool_)] * 2, [Out((2, 2), np.bool_)], dict(values_count=2, axis=0)),
    ("UNPACK", [In((2, 2), np.int64)], [Out((2,), np.int64)] * 2, dict(num=2, axis=0)),
    ("PAD", [In((2,), np.uint32), Const(np.array([[1, 1]], np.int32))], [Out((4,), np.uint32)], {}),
    ("CONCATENATION", [In((2,), np.float64), In((2,), np.float64)], [Out((4,), np.float64)], dict(axis=0)),
    ("SLICE", [In((4,)), Const(np.array([0], np.int32)), Const(np.array([2], np.int64))], [Out((2,))], {}),
    ("MIRROR_PAD", [In((3,)), Const(np.array([[1, 1]], np.int8))], [Out((5,))], dict(mode="REFLECT")),
    ("RESHAPE", [In((2, 2)), Const(np.array([4], np.int32))], [Out((4,), np.int32)], {}),
])
def test_unsupported_raises_at_allocate(op, inputs, outputs, opts):
    m = single_op_model(op, inputs, outputs, **opts)
    assert isinstance(allocate_error(m), UnsupportedOpError)


def test_unsupported_versions():
    for op, v, ins, outs, opts in [
        ("RESHAPE", 2, [In((2, 2))], [Out((4,))], dict(new_shape=[4])),
        ("PAD", 7, [In((2,)), Const(np.array([[1, 1]], np.int32))], [Out((4,))], {}),
        ("SPLIT", 6, [Const(np.array([0], np.int32)), In((2,))], [Out((1,))] * 2, dict(num_splits=2)),
    ]:
        assert isinstance(allocate_error(single_op_model(op, ins, outs, version=v, **opts)), UnsupportedOpError)


# --- cheapness: views, inputs untouched ---------------------------------------------------

def _values_after_invoke(model, feed):
    it = Interpreter(experimental_op_resolver_type=REF, model_content=model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feed):
        x = x.reshape(d["shape"])
        it.set_tensor(d["index"], x)
    it.invoke()
    ex = it._rt.ex
    sg = it.model.main
    return [ex.values[i] for i in sg.inputs], [ex.values[i] for i in sg.outputs]


@pytest.mark.parametrize("model", [
    single_op_model("RESHAPE", [In((2, 6))], [Out((3, 4))], new_shape=[3, -1]),
    single_op_model("SQUEEZE", [In((1, 12))], [Out((12,))]),
    single_op_model("EXPAND_DIMS", [In((2, 6)), Const(np.array([1], np.int32))], [Out((2, 1, 6))]),
    single_op_model("TRANSPOSE", [In((2, 6)), Const(np.array([1, 0], np.int32))], [Out((6, 2))]),
    single_op_model("STRIDED_SLICE", [In((2, 6)), Const(np.array([0, 1], np.int32)), Const(np.array([2, 5], np.int32)),
                                      Const(np.array([1, 2], np.int32))], [Out((2, 2))]),
    single_op_model("SLICE", [In((2, 6)), Const(np.array([1, 0], np.int32)), Const(np.array([1, -1], np.int32))],
                    [Out((1, 6))]),
    single_op_model("SPLIT", [Const(np.array([1], np.int32)), In((2, 6))], [Out((2, 3))] * 2, num_splits=2),
    single_op_model("UNPACK", [In((2, 6))], [Out((6,))] * 2, num=2, axis=0),
])
def test_outputs_are_views(model):
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    (inp,), outs = _values_after_invoke(model, [x])
    for o in outs:
        assert np.shares_memory(o, inp)
    np.testing.assert_array_equal(inp.reshape(-1), x.reshape(-1))


def test_pad_and_concat_leave_inputs_untouched():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = single_op_model("PAD", [In((2, 3)), Const(np.array([[1, 1], [1, 1]], np.int32))], [Out((4, 5))])
    (inp,), _ = _values_after_invoke(m, [x])
    np.testing.assert_array_equal(inp, x)
    m = single_op_model("CONCATENATION", [In((2, 3)), In((2, 3))], [Out((2, 6))], axis=1,
                        fused_activation_function="RELU")
    ins, _ = _values_after_invoke(m, [x - 3, x])
    np.testing.assert_array_equal(ins[0], x - 3)


# --- large shapes (the contiguous-run copy path) and chains of views ----------------------

@pytest.mark.parametrize("dt", [np.float32, np.int8, np.uint8, np.int16, np.bool_, np.float16, np.int64])
def test_pad_and_concat_many_short_runs(dt):
    rng = rng_of(9)
    quant = q(dt)
    shape = (2, 32, 32, 5)
    x = random_input(shape, dt, rng)
    p = np.array([[0, 1], [2, 0], [0, 0], [1, 3]], np.int32)
    version = {np.int8: 2, np.int16: 3, np.bool_: 5}.get(dt, 1)
    m = single_op_model("PAD", [In(shape, dt, quant), Const(p)], [Out((3, 34, 32, 9), dt, quant)], version=version)
    (assert_matches_builtin if dt == np.float16 else assert_matches_litert)(m, [x])
    ys = [random_input((2, 32, 32, c), dt, rng) for c in (3, 1, 6)]
    version = {np.int8: 2, np.int16: 3, np.float16: 6}.get(dt, 1)
    m = single_op_model("CONCATENATION", [In(y.shape, dt, quant) for y in ys], [Out((2, 32, 32, 10), dt, quant)],
                        axis=-1, version=version)
    (assert_matches_builtin if dt == np.float16 else assert_matches_litert)(m, ys)


def test_concatenation_uint8_requant_many_runs():
    rng = rng_of(10)
    ys = [random_input((1, 32, 32, c), np.uint8, rng) for c in (4, 8)]
    m = single_op_model("CONCATENATION", [In((1, 32, 32, 4), np.uint8, (0.02, 7)), In((1, 32, 32, 8), np.uint8, (0.05, 200))],
                        [Out((1, 32, 32, 12), np.uint8, (0.04, 100))], axis=3)
    assert_matches_litert(m, ys)


def test_chain_of_views_into_copies():
    # TRANSPOSE and STRIDED_SLICE hand non-contiguous views to PAD, CONCATENATION and RESHAPE.
    from acelera.core.builder import ModelBuilder

    for dt in (np.float32, np.int8):
        quant = q(dt)
        b = ModelBuilder()
        x = b.add_input("x", (1, 6, 32, 32), dt, quant)
        perm = b.add_constant("perm", np.array([0, 2, 3, 1], np.int32))
        t = b.add_tensor("t", (1, 32, 32, 6), dt, quant)
        b.add_operator("TRANSPOSE", [x, perm], [t])
        sb = b.add_constant("b", np.array([0, 0, 0, 1], np.int32))
        se = b.add_constant("e", np.array([1, 32, 32, 6], np.int32))
        ss = b.add_constant("s", np.array([1, 1, 1, 2], np.int32))
        s = b.add_tensor("s_out", (1, 32, 32, 3), dt, quant)
        b.add_operator("STRIDED_SLICE", [t, sb, se, ss], [s])
        pads = b.add_constant("pads", np.array([[0, 0], [1, 1], [0, 0], [0, 2]], np.int32))
        p = b.add_tensor("p", (1, 34, 32, 5), dt, quant)
        b.add_operator("PAD", [s, pads], [p])
        cs = b.add_constant("cb", np.array([0, 1, 0, 0], np.int32))
        csz = b.add_constant("csz", np.array([-1, 32, -1, -1], np.int32))
        c = b.add_tensor("c", (1, 32, 32, 5), dt, quant)
        b.add_operator("SLICE", [p, cs, csz], [c])
        cat = b.add_tensor("cat", (1, 32, 32, 11), dt, quant)
        b.add_operator("CONCATENATION", [c, t], [cat], axis=3)
        r = b.add_tensor("r", (1, 1024, 11), dt, quant)
        b.add_operator("RESHAPE", [cat], [r], new_shape=[1, -1, 11])
        b.mark_outputs(r, s)
        assert_matches_litert(b.build(), [random_input((1, 6, 32, 32), dt, rng_of(11))])


def test_partially_dynamic_index_inputs():
    # Only some index tensors are graph inputs: the executor's shape pass feeds zeros for them.
    rng = rng_of(12)
    x = random_input((4, 6), np.float32, rng)
    m = single_op_model("STRIDED_SLICE", [In((4, 6)), Const(np.array([1, 0], np.int32)), Const(np.array([4, 6], np.int32)),
                                          In((2,), np.int32)], [Out((3, 3))])
    got = assert_matches_litert(m, [x, np.array([1, 2], np.int32)])
    assert got[0].shape == (3, 3)
    m = single_op_model("SPLIT_V", [In((4, 6)), In((2,), np.int32), Const(np.array([1], np.int32))],
                        [Out((4, 2)), Out((4, 4))], num_splits=2)
    assert_matches_litert(m, [x, np.array([2, -1], np.int32)])
    m = single_op_model("SPLIT", [In((1,), np.int32), In((4, 6))], [Out((4, 2))] * 3, num_splits=3)
    assert_matches_litert(m, [np.array([1], np.int32), x])
