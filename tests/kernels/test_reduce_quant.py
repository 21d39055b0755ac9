"""Reductions, (de)quantization, DENSIFY and LSTMs against LiteRT's reference kernels."""
from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import expect_unsupported
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert, random_input, run_acelera, run_litert

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.interpreter import Interpreter

# KERNEL_EXAMPLES=200 explores more cases (the default keeps the file well under a minute).
EXAMPLES = int(os.environ.get("KERNEL_EXAMPLES", "25"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
QTYPES = {np.int8: (-128, 127), np.uint8: (0, 255), np.int16: (-32768, 32767)}


# --- reductions ---------------------------------------------------------------------------
@st.composite
def reduce_case(draw, max_rank=4):
    rank = draw(st.integers(0, max_rank))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    if rank:
        axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank + 1))
    else:
        axes = draw(st.lists(st.integers(-1, 0), min_size=1, max_size=2))
    keep = draw(st.booleans())
    seed = draw(st.integers(0, 2**31 - 1))
    return shape, axes, keep, seed


def out_shape(shape, axes, keep):
    r = {a % len(shape) for a in axes} if shape else set()
    if keep:
        return tuple(1 if i in r else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in r)


def reduce_model(op, shape, axes, keep, dtype, qin=None, qout=None, const_axis=True, version=1):
    ax = np.array(axes, np.int32)
    axis_spec = Const(ax) if const_axis else In(ax.shape, np.int32)
    return single_op_model(op, [In(shape, dtype, qin), axis_spec],
                           [Out(out_shape(shape, axes, keep), dtype, qout)], version=version, keep_dims=keep)


def reduce_inputs(shape, axes, dtype, rng, const_axis=True, lo=-1.0, hi=1.0):
    x = random_input(shape, dtype, rng, lo, hi)
    return [x] if const_axis else [x, np.array(axes, np.int32)]


@pytest.mark.parametrize("op", ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
@SETTINGS
@given(case=reduce_case(), const_axis=st.booleans())
def test_reduce_float(op, case, const_axis):
    shape, axes, keep, seed = case
    rng = np.random.default_rng(seed)
    m = reduce_model(op, shape, axes, keep, np.float32, const_axis=const_axis)
    assert_matches_litert(m, reduce_inputs(shape, axes, np.float32, rng, const_axis, -2, 2))


@pytest.mark.parametrize("op", ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@settings(max_examples=max(10, EXAMPLES // 2), deadline=None)
@given(case=reduce_case())
def test_reduce_int(op, dtype, case):
    shape, axes, keep, seed = case
    rng = np.random.default_rng(seed)
    m = reduce_model(op, shape, axes, keep, dtype)
    x = rng.integers(-1000, 1000, size=shape).astype(dtype)
    if op == "REDUCE_PROD":
        x = rng.integers(-(2**31), 2**31, size=shape).astype(dtype)  # products wrap
    assert_matches_litert(m, [x])


@pytest.mark.parametrize("op", ["SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
def test_reduce_bool(op):
    rng = np.random.default_rng(0)
    for axes, keep in (([1], False), ([0, 2], True), ([-1, 0, 1], False)):
        m = reduce_model(op, (3, 4, 2), axes, keep, np.bool_)
        assert_matches_litert(m, [rng.integers(0, 2, (3, 4, 2)).astype(np.bool_)])


def test_reduce_float_special_values():
    x = np.array([[-np.inf, -np.inf, 1.0], [np.nan, 2.0, -np.inf], [np.nan, np.nan, np.nan]], np.float32)
    for op in ("REDUCE_MAX", "REDUCE_MIN"):
        for axes in ([1], [0], [0, 1]):
            m = reduce_model(op, x.shape, axes, False, np.float32)
            for v in (x, -x):
                np.testing.assert_array_equal(run_acelera(m, [v])[0], run_litert(m, [v])[0])


@st.composite
def qparams(draw, dtype):
    scale = draw(st.floats(0.002, 2.0))
    lo, hi = QTYPES[dtype]
    zp = 0 if dtype == np.int16 else draw(st.integers(lo, hi))
    return (scale, zp)


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@SETTINGS
@given(data=st.data(), case=reduce_case(), const_axis=st.booleans())
def test_reduce_quantized_mean_sum(op, dtype, data, case, const_axis):
    shape, axes, keep, seed = case
    qin = data.draw(qparams(dtype))
    qout = qin if data.draw(st.booleans()) else data.draw(qparams(dtype))
    version = {np.int8: 2, np.uint8: 1, np.int16: 3}[dtype]
    m = reduce_model(op, shape, axes, keep, dtype, qin, qout, const_axis, version=min(version, 2 if op == "SUM" else 3))
    rng = np.random.default_rng(seed)
    inputs = reduce_inputs(shape, axes, dtype, rng, const_axis)
    if op == "SUM" and dtype in (np.int8, np.int16):
        # LiteRT's reference int8/int16 SUM reads and writes through uint8 pointers (wrong or
        # garbage output); compare with the optimized kernel, which rounds in float.
        want = run_litert(m, inputs, reference="builtin")[0]
        got = run_acelera(m, inputs)[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.max(np.abs(got.astype(np.int64) - want), initial=0) <= 1
        return
    assert_matches_litert(m, inputs)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@SETTINGS
@given(data=st.data(), hw=st.tuples(st.integers(1, 12), st.integers(1, 12)), c=st.integers(1, 40),
       batch=st.integers(1, 2), seed=st.integers(0, 2**31 - 1))
def test_mean_quantized_spatial(dtype, data, hw, c, batch, seed):
    """The global-average-pool MEAN of mobilenet-style models: 4D over H, W with keep_dims."""
    shape = (batch, hw[0], hw[1], c)
    axes = data.draw(st.sampled_from([[1, 2], [2, 1], [-3, -2]]))
    keep = data.draw(st.booleans())
    qin, qout = data.draw(qparams(dtype)), data.draw(qparams(dtype))
    m = reduce_model("MEAN", shape, axes, keep, dtype, qin, qout, version=3)
    assert_matches_litert(m, [random_input(shape, dtype, np.random.default_rng(seed))])


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@settings(max_examples=max(10, EXAMPLES // 2), deadline=None)
@given(data=st.data(), case=reduce_case())
def test_reduce_quantized_max_min(op, dtype, data, case):
    shape, axes, keep, seed = case
    q = data.draw(qparams(dtype))
    m = reduce_model(op, shape, axes, keep, dtype, q, q, version=3 if dtype == np.int16 else 2)
    assert_matches_litert(m, [random_input(shape, dtype, np.random.default_rng(seed))])


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
@SETTINGS
@given(data=st.data(), case=reduce_case(max_rank=3))
def test_reduce_quantized_prod(dtype, data, case):
    shape, axes, keep, seed = case
    qin = (data.draw(st.floats(0.01, 0.2)), 0 if dtype == np.int16 else data.draw(st.integers(-20, 20)))
    qout = (data.draw(st.floats(0.01, 0.5)), 0 if dtype == np.int16 else data.draw(st.integers(-20, 20)))
    m = reduce_model("REDUCE_PROD", shape, axes, keep, dtype, qin, qout, version=2)
    assert_matches_litert(m, [random_input(shape, dtype, np.random.default_rng(seed))])


def test_reduce_unsupported():
    m = single_op_model("MEAN", [In((2, 3), np.float32), Const(np.array([1], np.int64))], [Out((2,))])
    expect_unsupported(m)
    m = single_op_model("MEAN", [In((2, 3), np.bool_), Const(np.array([1], np.int32))], [Out((2,), np.bool_)])
    expect_unsupported(m)
    m = reduce_model("REDUCE_MAX", (2, 3), [1], False, np.int8, (0.5, 1), (0.25, 1))
    expect_unsupported(m)
    m = reduce_model("REDUCE_PROD", (2, 3), [1], False, np.uint8, (0.5, 1), (0.5, 1))
    expect_unsupported(m)


def test_mean_shared_model_params():
    """MEAN nodes of mobilenet_v2_96_int8 and small_cnn_int8 (global average pool, int8)."""
    rng = np.random.default_rng(1)
    for shape, qin, qout in (((1, 3, 3, 1280), (0.023529412, -128), (0.008693951, -128)),
                             ((1, 8, 8, 32), (0.0020123676, -128), (0.0008909985, -128))):
        m = reduce_model("MEAN", shape, [1, 2], False, np.int8, qin, qout, version=2)
        assert_matches_litert(m, [random_input(shape, np.int8, rng)])
        mf = reduce_model("MEAN", shape, [1, 2], False, np.float32)
        assert_matches_litert(mf, [random_input(shape, np.float32, rng)])


# --- QUANTIZE / DEQUANTIZE ----------------------------------------------------------------
def float_values(shape, scale, rng):
    """Values around the quantized range, with exact .5 ties and a few extremes."""
    x = rng.uniform(-300, 300, size=shape) * scale
    flat = x.reshape(-1)
    n = flat.size
    if n:
        k = rng.integers(-200, 200, size=n)
        ties = rng.random(n) < 0.3
        flat[ties] = (k[ties] + 0.5) * scale
    x = x.astype(np.float32)
    if n > 4:
        x.reshape(-1)[:4] = [np.inf, -np.inf, 3e9, 0.49999997 * scale]
    return x


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(1, 6), min_size=0, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_quantize_float(dtype, data, shape, seed):
    rng = np.random.default_rng(seed)
    scale, zp = data.draw(qparams(dtype))
    if dtype == np.int16:
        zp = data.draw(st.integers(-100, 100))
    shape = tuple(shape)
    m = single_op_model("QUANTIZE", [In(shape, np.float32)], [Out(shape, dtype, (scale, zp))],
                        version=2 if dtype == np.int16 else 1)
    assert_matches_litert(m, [float_values(shape, scale, rng)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("scale", [1.0, 0.003921569, 1e-30, 3e-39, 1e30, 0.0123])
def test_quantize_float_step_table(dtype, scale):
    """The 8-bit QUANTIZE kernel's step table (bounds found by bisection) equals affine_quantize
    at every bound, one ulp either side, special values and random bit patterns."""
    from acelera.core.kernels.quantize import _per_tensor_quantize, _quantize_steps, affine_quantize
    rng = np.random.default_rng(11)
    s = np.float32(scale)
    info = np.iinfo(dtype)
    for zp in (int(info.min), int(info.max), 0, -5 if dtype == np.int8 else 5):
        bounds, _ = _quantize_steps(s, zp, np.dtype(dtype))
        with np.errstate(all="ignore"):
            x = _step_probes(bounds, scale, rng)
        x = x[: x.size // 4 * 4].reshape(-1, 4)
        with np.errstate(all="ignore"):
            want = affine_quantize(x, s, zp, dtype)
        got = _per_tensor_quantize(s, zp, np.dtype(dtype))(x)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)


def _step_probes(bounds, scale, rng):
    return np.concatenate([bounds, np.nextafter(bounds, np.float32(-np.inf)), np.nextafter(bounds, np.float32(np.inf)),
                           np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45], np.float32),
                           ((np.arange(-300, 300) + 0.5) * scale).astype(np.float32),
                           rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32).view(np.float32)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@settings(max_examples=max(15, EXAMPLES // 2), deadline=None)
@given(data=st.data(), shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_quantize_per_channel(dtype, data, shape, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    axis = data.draw(st.integers(0, len(shape) - 1))
    c = shape[axis]
    scales = rng.uniform(0.005, 0.5, c)
    lo, hi = QTYPES[dtype]
    zps = rng.integers(max(lo, -50), min(hi, 50) + 1, c) if dtype != np.int16 else np.zeros(c, np.int64)
    if dtype == np.uint8:
        zps = rng.integers(0, 255, c)
    m = single_op_model("QUANTIZE", [In(shape, np.float32)], [Out(shape, dtype, (scales, zps, axis))], version=3)
    x = (rng.uniform(-200, 200, size=shape) * np.mean(scales)).astype(np.float32)
    assert_matches_litert(m, [x])


REQUANT = [(np.int8, np.int8), (np.int8, np.uint8), (np.uint8, np.int8), (np.uint8, np.uint8),
           (np.int8, np.int16), (np.uint8, np.int16), (np.int16, np.int16), (np.int16, np.int8),
           (np.int16, np.int32), (np.int32, np.int8), (np.int32, np.int16)]


@pytest.mark.parametrize("din,dout", REQUANT)
@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(1, 6), min_size=0, max_size=3), seed=st.integers(0, 2**31 - 1))
def test_requantize(din, dout, data, shape, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    s_in = data.draw(st.floats(0.001, 1.0))
    mode = data.draw(st.sampled_from(["same", "shift128", "random"]))
    s_out = s_in if mode != "random" else data.draw(st.floats(0.001, 1.0))

    def zp(dt):
        if dt in (np.int16, np.int32) and (din == dout == np.int16 or dt == np.int16):
            return 0
        if dt == np.int32:
            return data.draw(st.integers(-1000, 1000))
        lo, hi = QTYPES[dt]
        return data.draw(st.integers(lo, hi))
    zp_in, zp_out = zp(din), zp(dout)
    if mode == "shift128" and {din, dout} == {np.int8, np.uint8}:
        zp_in = data.draw(st.integers(-128, 127)) if din == np.int8 else data.draw(st.integers(0, 255))
        zp_out = zp_in + 128 if din == np.int8 else zp_in - 128
    m = single_op_model("QUANTIZE", [In(shape, din, (s_in, zp_in))], [Out(shape, dout, (s_out, zp_out))],
                        version=2 if dout == np.int16 else 1)
    x = random_input(shape, din, rng)
    if din == np.int32:
        x = rng.integers(-100000, 100000, size=shape).astype(np.int32)
    assert_matches_litert(m, [x])


def test_quantize_shared_model_params():
    """Requantize nodes of face_detection_short_range_int8 / _int16x8."""
    rng = np.random.default_rng(2)
    for dt, qin, qout in ((np.int16, (0.0001769136, 0), (0.0022943397, 0)),
                          (np.int16, (0.0014749907, 0), (0.004832246, 0)),
                          (np.int8, (0.023256944, 127), (0.3033506, 127)),
                          (np.int8, (0.262944, -57), (0.79495406, -78))):
        m = single_op_model("QUANTIZE", [In((1, 512, 16), dt, qin)], [Out((1, 512, 16), dt, qout)], version=2)
        assert_matches_litert(m, [random_input((1, 512, 16), dt, rng)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(1, 6), min_size=0, max_size=4), seed=st.integers(0, 2**31 - 1),
       const=st.booleans())
def test_dequantize(dtype, data, shape, seed, const):
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    q = data.draw(qparams(dtype))
    x = random_input(shape, dtype, rng)
    version = {np.uint8: 1, np.int8: 2, np.int16: 3}[dtype]
    spec = Const(x, q) if const else In(shape, dtype, q)
    m = single_op_model("DEQUANTIZE", [spec], [Out(shape, np.float32)], version=version)
    assert_matches_litert(m, [] if const else [x])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@settings(max_examples=max(15, EXAMPLES // 2), deadline=None)
@given(data=st.data(), shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1),
       const=st.booleans())
def test_dequantize_per_channel(dtype, data, shape, seed, const):
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    axis = data.draw(st.integers(0, len(shape) - 1))
    c = shape[axis]
    scales = rng.uniform(0.001, 2.0, c)
    lo, hi = QTYPES[dtype]
    zps = rng.integers(lo, hi + 1, c)
    x = random_input(shape, dtype, rng)
    spec = Const(x, (scales, zps, axis)) if const else In(shape, dtype, (scales, zps, axis))
    m = single_op_model("DEQUANTIZE", [spec], [Out(shape, np.float32)], version=5)
    assert_matches_litert(m, [] if const else [x])


@pytest.mark.parametrize("const", [True, False])
def test_dequantize_fp16(const):
    rng = np.random.default_rng(3)
    for shape in ((), (7,), (4, 3, 3, 2)):
        x = (rng.standard_normal(shape) * 10).astype(np.float16)
        spec = Const(x) if const else In(shape, np.float16)
        m = single_op_model("DEQUANTIZE", [spec], [Out(shape, np.float32)], version=3)
        got = assert_matches_litert(m, [] if const else [x])
        np.testing.assert_array_equal(got[0], x.astype(np.float32))


def test_dequantize_int4():
    rng = np.random.default_rng(4)
    vals = rng.integers(-8, 8, size=(3, 5))
    flat = (vals.reshape(-1) & 0xF).astype(np.uint8)
    flat = np.concatenate([flat, np.zeros(len(flat) % 2, np.uint8)])
    packed = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)
    for quant in ((0.25, 1), (np.array([0.1, 0.2, 0.3]), np.zeros(3, np.int64), 0)):
        b = ModelBuilder()
        w = b.add_constant("w", packed, quant, shape=(3, 5))
        b.tensors[w].type = 17  # INT4
        y = b.add_tensor("y", (3, 5), np.float32)
        b.add_operator("DEQUANTIZE", [w], [y], version=6)
        b.mark_outputs(y)
        assert_matches_litert(b.build(), [])


def test_quantize_unsupported():
    expect_unsupported(single_op_model("QUANTIZE", [In((2,), np.float32)], [Out((2,), np.int32, (0.5, 0))]))
    expect_unsupported(single_op_model("QUANTIZE", [In((2,), np.float32)], [Out((2,), np.int8)]))
    expect_unsupported(single_op_model("QUANTIZE", [In((2,), np.int16, (0.5, 3))], [Out((2,), np.int16, (0.5, 0))]))
    expect_unsupported(single_op_model("QUANTIZE", [In((2,), np.int8, (0.5, 3))], [Out((2,), np.int32, (0.5, 0))]))
    expect_unsupported(single_op_model("DEQUANTIZE", [In((2,), np.int32, (0.5, 0))], [Out((2,), np.float32)]))
    expect_unsupported(single_op_model("DEQUANTIZE", [In((2,), np.int16, (0.5, 2))], [Out((2,), np.float32)]))


# --- DENSIFY ------------------------------------------------------------------------------
def encode_sparse(dense: np.ndarray, order, fmt, block_size, block_map):
    """Sparse encoding by LiteRT's own FormatConverter (DenseToSparse)."""
    from ai_edge_litert import format_converter_wrapper_pybind11 as fc
    kinds = [fc.TfLiteDimensionType.TF_LITE_DIM_DENSE, fc.TfLiteDimensionType.TF_LITE_DIM_SPARSE_CSR]
    conv = fc.FormatConverterFp32(list(dense.shape), list(order), [kinds[f] for f in fmt],
                                  list(block_size), list(block_map))
    conv.DenseToSparse(np.ascontiguousarray(dense, np.float32))
    meta = conv.GetDimMetadata()
    values = np.asarray(conv.GetData(), np.float32)
    rank = dense.ndim
    level_fmt = [fmt[order[i]] for i in range(rank)] + [0] * len(block_map)
    dims = []
    for i, f in enumerate(level_fmt):
        if f == 0:
            dims.append((0, int(meta[2 * i][0]), None, None))
        else:
            dims.append((1, 0, list(meta[2 * i]), list(meta[2 * i + 1])))
    return values, dict(traversal_order=list(order), block_map=list(block_map), dim_metadata=dims)


@st.composite
def sparse_case(draw):
    rank = draw(st.integers(1, 3))
    blocked = draw(st.lists(st.booleans(), min_size=rank, max_size=rank)) if rank >= 2 else [False]
    block_map = [d for d in range(rank) if blocked[d]]
    block_size = [draw(st.sampled_from([1, 2, 4])) for _ in block_map]
    shape = []
    for d in range(rank):
        mult = block_size[block_map.index(d)] if d in block_map else 1
        shape.append(mult * draw(st.integers(1, 4)))
    perm = draw(st.permutations(list(range(rank))))
    order = list(perm) + [rank + i for i in range(len(block_map))]
    fmt = draw(st.lists(st.integers(0, 1), min_size=rank, max_size=rank))
    density = draw(st.sampled_from([0.0, 0.2, 0.6, 1.0]))
    seed = draw(st.integers(0, 2**31 - 1))
    return tuple(shape), order, fmt, block_size, block_map, density, seed


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
@SETTINGS
@given(case=sparse_case())
def test_densify(dtype, case):
    shape, order, fmt, block_size, block_map, density, seed = case
    rng = np.random.default_rng(seed)
    dense = rng.integers(1, 100, size=shape).astype(np.float32) * (rng.random(shape) < density)
    dense.reshape(-1)[rng.integers(0, dense.size)] = 7  # an empty buffer would not be a constant
    values, sparsity = encode_sparse(dense, order, fmt, block_size, block_map)
    q = (0.5, 0) if dtype == np.int8 else None
    m = single_op_model("DENSIFY", [Const(values.astype(dtype), q, sparsity=sparsity, shape=shape)],
                        [Out(shape, dtype, q)])
    got = assert_matches_litert(m, [])
    np.testing.assert_array_equal(got[0], dense.astype(dtype))


def test_densify_feeds_an_op():
    """A sparse weight densified then used, and the kernel run on the (non-folded) values."""
    from acelera.core.kernels.registry import lookup
    from acelera.core.model import load_model
    dense = np.array([[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0]], np.float32)
    values, sparsity = encode_sparse(dense, [0, 1], [0, 1], [], [])
    m = single_op_model("DENSIFY", [Const(values, sparsity=sparsity, shape=dense.shape)], [Out(dense.shape)])
    model = load_model(m)
    from acelera.core.executor import Executor
    ex = Executor(model.main)
    ctx = ex.node_context(0)
    run = lookup(model.main.operators[0]).prepare(ctx)
    np.testing.assert_array_equal(run(values * 2), dense * 2)
    np.testing.assert_array_equal(run_acelera(m, [])[0], dense)


def test_densify_unsupported():
    dense = np.array([[1, 0], [0, 2]], np.int32)
    values, sparsity = encode_sparse(dense.astype(np.float32), [0, 1], [0, 1], [], [])
    m = single_op_model("DENSIFY", [Const(values.astype(np.int32), sparsity=sparsity, shape=(2, 2))],
                        [Out((2, 2), np.int32)])
    expect_unsupported(m)
    m = single_op_model("DENSIFY", [In((2, 2), np.float32)], [Out((2, 2))])
    expect_unsupported(m)


# --- LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM --------------------------------------------------
ACTS = ["NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT"]


def lstm_model(op, *, n_batch, n_time, n_input, n_cell, n_output, cifg=False, peephole=False,
               proj=False, proj_bias=False, ln=False, act="TANH", cell_clip=0.0, proj_clip=0.0,
               time_major=False, diag=False, n_inputs=24, version=1, seed=0, weight_scale=0.5,
               fp16_weights=False):
    """An LSTM / sequence LSTM node with constant weights and variable state tensors."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    if op == "LSTM":
        x_shape = (n_batch, n_input)
    else:
        x_shape = (n_time, n_batch, n_input) if time_major else (n_batch, n_time, n_input)
    x = b.add_input("x", x_shape, np.float32)

    def const(name, shape):
        data = (rng.standard_normal(shape) * weight_scale).astype(np.float32)
        if not fp16_weights or len(shape) < 2:
            return b.add_constant(name, data)
        h = b.add_constant(name + "_fp16", data.astype(np.float16))
        f = b.add_tensor(name, shape, np.float32)
        b.add_operator("DEQUANTIZE", [h], [f], version=3)
        return f

    def rec(name):
        return const(name, (n_cell,) if diag else (n_cell, n_output))
    ins = [x]
    ins += [-1 if cifg else const("i2i", (n_cell, n_input))]
    ins += [const(n, (n_cell, n_input)) for n in ("i2f", "i2c", "i2o")]
    ins += [-1 if cifg else rec("r2i")]
    ins += [rec(n) for n in ("r2f", "r2c", "r2o")]
    ins += [-1 if (cifg or not peephole) else const("c2i", (n_cell,))]
    ins += [const(n, (n_cell,)) if peephole else -1 for n in ("c2f", "c2o")]
    ins += [-1 if cifg else const("bi", (n_cell,))]
    ins += [const(n, (n_cell,)) for n in ("bf", "bc", "bo")]
    ins += [const("pw", (n_output, n_cell)) if proj else -1]
    ins += [const("pb", (n_output,)) if proj and proj_bias else -1]
    ins += [b.add_tensor("h", (n_batch, n_output), np.float32, is_variable=True),
            b.add_tensor("c", (n_batch, n_cell), np.float32, is_variable=True)]
    if n_inputs == 24:
        ins += [-1 if (cifg or not ln) else const("lni", (n_cell,))]
        ins += [const(n, (n_cell,)) if ln else -1 for n in ("lnf", "lnc", "lno")]
    out_shape = x_shape[:-1] + (n_output,)
    y = b.add_tensor("y", out_shape, np.float32)
    opts = dict(fused_activation_function=act, cell_clip=cell_clip, proj_clip=proj_clip)
    if op == "LSTM":
        opts["kernel_type"] = "FULL"
    else:
        opts["time_major"] = time_major
        if diag:
            opts["diagonal_recurrent_tensors"] = True
    b.add_operator(op, ins, [y], version=version, **opts)
    b.mark_outputs(y)
    return b.build(), x_shape


def run_invokes(interp_cls, model, inputs_seq, **kw):
    it = interp_cls(model_content=model, **kw)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    o = it.get_output_details()[0]
    outs = []
    for x in inputs_seq:
        it.set_tensor(d["index"], x)
        it.invoke()
        outs.append(it.get_tensor(o["index"]))
    return outs


def assert_lstm_matches(model, x_shape, seed, n_invokes=3, zero_steps=False, reference=True):
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType
    rng = np.random.default_rng(seed)
    xs = [rng.uniform(-1, 1, x_shape).astype(np.float32) for _ in range(n_invokes)]
    if zero_steps and len(x_shape) >= 2:
        xs[0].reshape(-1, x_shape[-1])[::2] = 0  # all-zero input rows/steps
        xs[1][...] = 0
    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    want = run_invokes(LiteRT, model, xs, experimental_op_resolver_type=kind, num_threads=1)
    got = run_invokes(Interpreter, model, xs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype
        bound = 1e-4 * max(1.0, float(np.max(np.abs(w), initial=0.0)))
        err = float(np.max(np.abs(g - w), initial=0.0))
        assert err <= bound, f"invoke {k}: max abs error {err} > {bound}"


@st.composite
def lstm_case(draw, sequence):
    n_cell = draw(st.integers(1, 6))
    proj = draw(st.booleans())
    return dict(
        n_batch=draw(st.integers(1, 3)), n_time=draw(st.integers(1, 4)) if sequence else 1,
        n_input=draw(st.integers(1, 5)), n_cell=n_cell,
        n_output=draw(st.integers(1, 6)) if proj else n_cell,
        cifg=draw(st.booleans()), peephole=draw(st.booleans()), proj=proj,
        proj_bias=draw(st.booleans()), ln=draw(st.booleans()), act=draw(st.sampled_from(ACTS)),
        cell_clip=draw(st.sampled_from([0.0, 0.5, 3.0])), proj_clip=draw(st.sampled_from([0.0, 0.3])),
        n_inputs=draw(st.sampled_from([20, 24])), seed=draw(st.integers(0, 2**31 - 1)))


@SETTINGS
@given(case=lstm_case(sequence=False), zero=st.booleans())
def test_lstm_full(case, zero):
    if case["n_inputs"] == 20:
        case["ln"] = False
    model, x_shape = lstm_model("LSTM", **case)
    assert_lstm_matches(model, x_shape, case["seed"], zero_steps=zero)


@SETTINGS
@given(case=lstm_case(sequence=True), time_major=st.booleans(), zero=st.booleans())
def test_unidirectional_sequence_lstm(case, time_major, zero):
    if case["n_inputs"] == 20:
        case["ln"] = False
    model, x_shape = lstm_model("UNIDIRECTIONAL_SEQUENCE_LSTM", time_major=time_major, **case)
    assert_lstm_matches(model, x_shape, case["seed"], zero_steps=zero)


@settings(max_examples=max(10, EXAMPLES // 2), deadline=None)
@given(case=lstm_case(sequence=True), time_major=st.booleans(), zero=st.booleans())
def test_unidirectional_sequence_lstm_diagonal(case, time_major, zero):
    """Version 4: 1-D (diagonal) recurrent weights; only the default resolver registers v4."""
    case.update(proj=False, n_output=case["n_cell"], n_inputs=24)
    model, x_shape = lstm_model("UNIDIRECTIONAL_SEQUENCE_LSTM", time_major=time_major, diag=True,
                                version=4, **case)
    assert_lstm_matches(model, x_shape, case["seed"], zero_steps=zero, reference=False)


def test_lstm_fp16_weights():
    """Weights produced by DEQUANTIZE nodes (folded at prepare), as in fp16 models."""
    for op in ("LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM"):
        model, x_shape = lstm_model(op, n_batch=2, n_time=3, n_input=4, n_cell=5, n_output=3, proj=True,
                                    peephole=True, ln=True, fp16_weights=True, seed=5)
        assert_lstm_matches(model, x_shape, 5)


def test_lstm_basic_kernel():
    rng = np.random.default_rng(6)
    nb, n_in, d = 2, 3, 4
    b = ModelBuilder()
    x = b.add_input("x", (nb, n_in), np.float32)
    a = b.add_tensor("a", (nb, d), np.float32, is_variable=True)
    w = b.add_constant("w", (rng.standard_normal((4 * d, n_in + d)) * 0.5).astype(np.float32))
    bias = b.add_constant("b", rng.standard_normal(4 * d).astype(np.float32))
    s = b.add_tensor("s", (nb, d), np.float32, is_variable=True)
    outs = [b.add_tensor(n, shp, np.float32) for n, shp in
            (("ao", (nb, d)), ("so", (nb, d)), ("ct", (nb, n_in + d)), ("at", (nb, 4 * d)))]
    b.add_operator("LSTM", [x, a, w, bias, s], outs, version=2, kernel_type="BASIC")
    b.mark_outputs(*outs)
    model = b.build()
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType
    xs = [rng.uniform(-1, 1, (nb, n_in)).astype(np.float32) for _ in range(3)]
    results = []
    for cls, kw in ((LiteRT, dict(experimental_op_resolver_type=OpResolverType.BUILTIN_REF)), (Interpreter, {})):
        it = cls(model_content=model, **kw)
        it.allocate_tensors()
        res = []
        for v in xs:
            it.set_tensor(it.get_input_details()[0]["index"], v)
            it.invoke()
            res.append([it.get_tensor(o["index"]) for o in it.get_output_details()])
        results.append(res)
    for want, got in zip(*results):
        for w_, g_ in zip(want, got):
            np.testing.assert_allclose(g_, w_, atol=1e-5)


def test_lstm_hybrid_matches_litert():
    """A hybrid LSTM (int8 weights, float activations) runs as LiteRT's does."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 2), np.float32)
    rng = np.random.default_rng(0)
    w8 = [b.add_constant(f"w{k}", rng.integers(-5, 5, (3, 2)).astype(np.int8), (0.1, 0)) for k in range(4)]
    r8 = [b.add_constant(f"r{k}", rng.integers(-5, 5, (3, 3)).astype(np.int8), (0.1, 0)) for k in range(4)]
    bs = [b.add_constant(f"b{k}", np.zeros(3, np.float32)) for k in range(4)]
    h = b.add_tensor("h", (1, 3), np.float32, is_variable=True)
    c = b.add_tensor("c", (1, 3), np.float32, is_variable=True)
    y = b.add_tensor("y", (1, 3), np.float32)
    b.add_operator("LSTM", [x, *w8, *r8, -1, -1, -1, *bs, -1, -1, h, c], [y], version=3,
                   fused_activation_function="TANH")
    b.mark_outputs(y)
    assert_matches_litert(b.build(), [np.array([[0.5, -1.0]], np.float32)])


def test_lstm_state_is_zero_after_allocate():
    model, _ = lstm_model("LSTM", n_batch=1, n_time=1, n_input=2, n_cell=3, n_output=3, seed=9)
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    for t in it.model.main.tensors:
        if t.is_variable:
            assert not np.any(it.get_tensor(t.index))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("scales", [(1e-4, 1e4), (1e-3, 30.0), (10.0, 1e-3), (0.5, 0.5)])
def test_reduce_quantized_extreme_scales(dtype, scales):
    """Multipliers far from 1 (MEAN's shift clamping, left shifts) and large element counts."""
    rng = np.random.default_rng(7)
    zp = 0 if dtype == np.int16 else {np.int8: -3, np.uint8: 130}[dtype]
    for shape, axes in (((4, 64), [1]), ((2, 40, 30), [1, 2]), ((1, 9, 9, 8), [1, 2]), ((3, 5), [0, 1])):
        for op in ("MEAN", "SUM"):
            if op == "SUM" and dtype in (np.int8, np.int16):
                continue  # LiteRT's reference int8/int16 SUM is wrong: see test_reduce_quantized_mean_sum
            m = reduce_model(op, shape, axes, True, dtype, (scales[0], zp), (scales[1], zp), version=2)
            assert_matches_litert(m, [random_input(shape, dtype, rng)])


def test_fast_multiplier_matches_shared_helper():
    """The scalar-multiplier MBQM (used by these kernels) is bit-identical to
    quant.multiply_by_quantized_multiplier."""
    from acelera.core.quant import multiply_by_quantized_multiplier, quantize_multiplier
    from acelera.core.quant import multiply_by_quantized_multiplier_scalar as mbqm
    rng = np.random.default_rng(8)
    for _ in range(300):
        m, s = quantize_multiplier(float(np.exp(rng.uniform(-25, 12))))
        x = rng.integers(-(2**31), 2**31, 500)
        x[:4] = [-(2**31), 2**31 - 1, 0, -1]
        np.testing.assert_array_equal(mbqm(x, m, s), multiply_by_quantized_multiplier(x, m, s))
