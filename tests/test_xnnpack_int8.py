"""xnnpack-cpu's int8 CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED (and AVERAGE_POOL_2D, SOFTMAX)
fast paths.

They are built from the reference kernels' prepared quantization parameters
(acelera.core.kernels.prepared); every such node the delegate takes in the shared int8 models and
in the converter zoo's int8 models must run on its fast path (the compiled partition lists the
nodes that fall back, and why), and results stay bit-exact with acelera's reference kernels.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from numba import njit
from xnnpack_int8_models import conv_model, dw_model, fc_model, q8_filter
from xnnpack_testing import run

from acelera import Interpreter, load_delegate
from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.interpreter import OpResolverType
from acelera.core.kernels.prepared import QuantizedConvParams, QuantizedFCParams, prepared_params
from acelera.core.kernels.registry import NodeContext
from acelera.plugins.xnnpack_cpu import jit, qjit, threads
from acelera.plugins.xnnpack_cpu.int8_conv import FAST_OPS, QuantSpec, fallbacks

I8 = np.int8
ZOO = Path(__file__).parent / "models" / "zoo"
ZOO_INT8 = sorted(p.name for p in ZOO.glob("*_int8.tflite"))
SHARED_INT8 = ["face_detection_short_range_int8", "face_landmark_int8", "hand_recrop_int8", "mobilenet_v2_96_int8",
               "sine_float_int8", "small_cnn_int8"]


@pytest.fixture(autouse=True)
def numba_kernels(monkeypatch):
    monkeypatch.setattr(jit, "AVAILABLE", True)  # numba is a dependency; ACELERA_XNNPACK_NUMBA=0 must not hide a bug


def quant_specs(d) -> list[QuantSpec]:
    return [s for k in d.kernels for s in k.specs if isinstance(s, QuantSpec)]


def assert_fast_and_exact(model: bytes, seeds=(0,), **options) -> None:
    for seed in seeds:
        want, got, it, d = run(model, seed, **options)
        delegated = set(it.delegation.nodes_of("xnnpack-cpu"))
        ops = {i: op.name for i, op in enumerate(it.model.main.operators)}
        sg = it.model.main
        wanted = {i for i in delegated if ops[i] in FAST_OPS or (ops[i] == "SOFTMAX" and sg.tensors[
            sg.operators[i].inputs[0]].dtype in (np.int8, np.uint8))}
        slow = [f for k in d.kernels for f in fallbacks(k) if f.op in FAST_OPS + ("SOFTMAX",)]
        assert not slow, slow
        fast = {n for s in quant_specs(d) if s.op in FAST_OPS + ("SOFTMAX",) and not s.fallback for n in s.nodes}
        assert fast == wanted
        for w, g in zip(want, got):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


# --- the models -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SHARED_INT8)
def test_shared_int8_models_use_the_fast_paths_and_stay_exact(models_dir, name):
    assert_fast_and_exact((models_dir / f"{name}.tflite").read_bytes())


@pytest.mark.parametrize("name", ZOO_INT8)
def test_zoo_int8_models_use_the_fast_paths_and_stay_exact(name):
    assert_fast_and_exact((ZOO / name).read_bytes())


def test_the_zoo_has_int8_models():
    assert len(ZOO_INT8) >= 10


# --- single nodes: every variant the kernels tell apart -------------------------------------------

CONV_CASES = {
    "1x1_direct_tail_rows_and_channels": conv_model((1, 7, 5, 16), 24, 1, 1, act="RELU6"),
    "1x1_odd_channels": conv_model((1, 6, 6, 13), 40, 1, 1, padding="VALID"),
    "1x1_strided_half_block": conv_model((1, 9, 9, 8), 16, 1, 1, stride=2, padding="VALID", act="RELU"),
    "1x1_long_tail": conv_model((1, 3, 5, 32), 48, 1, 1),
    "3x3_s2_same_rgb": conv_model((1, 17, 15, 3), 32, 3, 3, stride=2, act="RELU6"),
    "3x3_dilated_valid": conv_model((1, 11, 12, 8), 48, 3, 3, dilation=2, padding="VALID"),
    "5x5_s2_same": conv_model((1, 13, 10, 4), 20, 5, 5, stride=2),
    "1x3_odd_outputs": conv_model((1, 1, 19, 6), 33, 1, 3, act="RELU_N1_TO_1"),
    "3x3_per_tensor_batch2": conv_model((2, 6, 7, 5), 7, 3, 3, per_channel=False),
    "3x3_wrapping_accumulator": conv_model((1, 5, 5, 64), 8, 3, 3, qx=(0.5, -128), big_bias=True),
    "1x1_left_shift": conv_model((1, 4, 4, 16), 16, 1, 1, qy=(0.0001, 5)),
    "8x8_s8_patches": conv_model((1, 16, 16, 3), 32, 8, 8, stride=8, padding="VALID"),
}
DW_CASES = {
    "3x3_s1_same": dw_model((1, 9, 10, 32), 3, act="RELU6"),
    "3x3_s2_same_phased": dw_model((1, 11, 9, 24), 3, stride=2),
    "3x3_s2_same_wide": dw_model((1, 8, 8, 96), 3, stride=2, act="RELU"),
    "5x5_dilated_valid": dw_model((1, 12, 13, 8), 5, dilation=2, padding="VALID"),
    "3x3_multiplier_2": dw_model((1, 6, 7, 6), 3, mult=2),
    "3x3_odd_channels_batch2": dw_model((2, 5, 6, 5), 3),
    "1x1_valid": dw_model((1, 4, 4, 16), 1, padding="VALID"),
    "3x3_s3": dw_model((1, 10, 10, 16), 3, stride=3, padding="VALID", qx=(0.02, -128)),
}
FC_CASES = {
    "single_row": fc_model(1, 32, 10),
    "rows_tail_odd_depth": fc_model(3, 33, 7, act="RELU"),
    "many_rows": fc_model(11, 64, 40, act="RELU6"),
    "per_tensor_no_bias": fc_model(2, 20, 6, per_channel=False, bias=False),
    "deep": fc_model(1, 1280, 100),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_2d_fast_path(case):
    assert_fast_and_exact(CONV_CASES[case], seeds=(0, 1))


@pytest.mark.parametrize("case", sorted(DW_CASES))
def test_depthwise_conv_2d_fast_path(case):
    assert_fast_and_exact(DW_CASES[case], seeds=(0, 1))


@pytest.mark.parametrize("case", sorted(FC_CASES))
def test_fully_connected_fast_path(case):
    assert_fast_and_exact(FC_CASES[case], seeds=(0, 1))


def test_requantization_extremes_match_the_reference():
    """Accumulators at the int32 limits, multipliers up to 2**31 - 1, left and long right shifts,
    through the micro-kernel's requantization (as the bias of zero products)."""
    from acelera.core.kernels.conv import Requantizer

    rng = np.random.default_rng(0)
    o = 40
    values = rng.integers(-(1 << 31), 1 << 31, (6, o), dtype=np.int64)
    values[0, :9] = [-(1 << 31), (1 << 31) - 1, 0, 1, -1, 1 << 20, -(1 << 20), 12345, -12345]
    values[1:3] //= rng.integers(1, 1 << 20, (2, o))
    mult = rng.integers(1 << 30, 1 << 31, o, dtype=np.int64)
    mult[0] = (1 << 31) - 1
    shift = rng.integers(-31, 8, o, dtype=np.int64)
    shift[:3] = [-31, 0, 7]
    for zp, lo, hi in ((0, -128, 127), (-7, -7, 127), (5, 5, 40)):
        req = Requantizer(mult, shift, zp, lo, hi, np.int8, wide=False)
        for row in values:
            np.testing.assert_array_equal(_tile_requant(row, mult, shift, zp, lo, hi), req(row.copy()))


def _tile_requant(values, mult, shift, zp, qmin, qmax):
    o = values.size
    packed, groups, nb = qjit.pack_filter(np.zeros((o, 1), I8))
    tab = qjit.requant_table(values, mult, shift).reshape(-1)
    out = np.zeros(nb * qjit.NR, I8)
    _tiles1(np.zeros(qjit.KG * groups, np.uint8), packed, groups, nb, tab, tab.size // qjit.TABLE_ROWS, out, zp,
            qmin - zp, qmax - zp)
    return out[:o]


@njit
def _tiles1(a, packed, groups, nb, tab, width, out, zp, lo, hi):
    for blk in range(nb):
        qjit._tq1(a, 0, qjit.KG * groups, 0, packed, blk * groups * qjit.KG * qjit.NR, groups, tab, blk * qjit.NR,
                  width, out, blk * qjit.NR, qjit.NR, zp, lo, hi)


# --- elementwise ops and MEAN: tables of their reference kernels -----------------------------------

QA, QB, QO = (0.05, 3), (0.06, -5), (0.08, -2)


def binary(op, act=None, b_shape=(1, 5, 6, 7)):
    opts = {} if act is None else {"fused_activation_function": act}
    return single_op_model(op, [In((1, 5, 6, 7), I8, QA), In(b_shape, I8, QB)], [Out((1, 5, 6, 7), I8, QO)],
                           version=2, **opts)


def unary(op, qout=QO, **opts):
    return single_op_model(op, [In((2, 3, 4, 5), I8, QA)], [Out((2, 3, 4, 5), I8, qout)], version=2, **opts)


def mean(h, w, keep_dims=False):
    out = (1, 1, 1, 6) if keep_dims else (1, 6)
    return single_op_model("MEAN", [In((1, h, w, 6), I8, QA), Const(np.array([1, 2], np.int32))], [Out(out, I8, QO)],
                           version=2, keep_dims=keep_dims)


TABLE_CASES = {
    "ADD_relu": binary("ADD", "RELU"),
    "SUB": binary("SUB", "NONE"),
    "MUL_relu6": binary("MUL", "RELU6"),
    "LOGISTIC": unary("LOGISTIC", (1 / 256, -128)),
    "TANH": unary("TANH", (1 / 128, 0)),
    "LEAKY_RELU": unary("LEAKY_RELU", alpha=0.3),
    "QUANTIZE_requantize": unary("QUANTIZE"),
    "MEAN_3x3": mean(3, 3),
    "MEAN_8x8_keep_dims": mean(8, 8, keep_dims=True),
}


@pytest.mark.parametrize("case", sorted(TABLE_CASES))
def test_elementwise_ops_and_mean_run_on_tables_of_the_reference(case):
    want, got, it, d = run(TABLE_CASES[case])
    assert it.delegation.nodes_of("xnnpack-cpu") == [0], it.delegation.rejections
    assert not [f for k in d.kernels for f in fallbacks(k)]
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("model, why", [(binary("ADD", "NONE", b_shape=(1, 1, 1, 7)), "broadcasting"),
                                        (mean(20, 20), "MEAN over 400 pixels")])
def test_what_does_not_tabulate_stays_on_the_reference(model, why):
    want, got, _, d = run(model)
    (fb,) = [f for k in d.kernels for f in fallbacks(k)]
    assert why in fb.reason
    np.testing.assert_array_equal(got[0], want[0])


# --- the contract ---------------------------------------------------------------------------------

def _contexts(model: bytes) -> list[NodeContext]:
    """The NodeContexts of the model's main graph, as a kernel's prepare sees them."""
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    g = it.model.main
    return [NodeContext(i, op, tuple(g.tensors[t] if t >= 0 else None for t in op.inputs),
                        tuple(g.tensors[t] for t in op.outputs)) for i, op in enumerate(g.operators)]


def test_prepared_params_are_typed_frozen_and_read_only():
    (ctx,) = _contexts(CONV_CASES["3x3_s2_same_rgb"])
    p = prepared_params(ctx)
    assert isinstance(p, QuantizedConvParams)
    assert (p.op, p.groups, p.depth_multiplier, p.wide) == ("CONV_2D", 1, 1, False)
    assert p.geometry.sh == 2 and p.output_shape == (1, 9, 8, 32)
    assert p.weights.shape == (32, 3, 3, 3) and p.weights.dtype == np.int32
    assert p.multiplier.shape == p.shift.shape == (32,) and p.bias.dtype == np.int64
    assert (p.input_zero_point, p.output_offset, p.qmin, p.qmax) == (3, -2, -2, 73)  # RELU6: 6 / 0.08 - 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.qmin = 0  # type: ignore[misc]
    with pytest.raises(ValueError):
        p.weights[0, 0, 0, 0] = 1
    (ctx,) = _contexts(DW_CASES["3x3_multiplier_2"])
    p = prepared_params(ctx)
    assert isinstance(p, QuantizedConvParams) and p.depth_multiplier == 2 and p.weights.shape == (3, 3, 12)
    (ctx,) = _contexts(FC_CASES["per_tensor_no_bias"])
    p = prepared_params(ctx)
    assert isinstance(p, QuantizedFCParams)
    assert not p.per_channel and p.bias is None and p.effective_scale.shape == (1,) and p.weights.shape == (6, 20)


def test_prepared_params_say_why_not():
    why: list[str] = []
    float_conv = single_op_model("CONV_2D", [In((1, 5, 5, 3)), Const(np.ones((4, 3, 3, 3), np.float32)), None],
                                 [Out((1, 5, 5, 4))], padding="SAME", stride_h=1, stride_w=1)
    (ctx,) = _contexts(float_conv)
    assert prepared_params(ctx, why) is None and "FLOAT32" in why[-1]
    add = single_op_model("ADD", [In((1, 4), I8, (0.1, 0)), In((1, 4), I8, (0.1, 0))], [Out((1, 4), I8, (0.2, 0))],
                          version=2, fused_activation_function="NONE")
    (ctx,) = _contexts(add)
    assert prepared_params(ctx, why) is None and "ADD" in why[-1]


def test_a_filter_from_the_graph_is_not_covered():
    q, wq = q8_filter(6, 1, 1, 8, 0, 7)
    model = single_op_model("CONV_2D", [In((1, 4, 4, 8), I8, (0.05, 3)), In((6, 1, 1, 8), I8, wq), None],
                            [Out((1, 4, 4, 6), I8, (0.08, -2))], version=3, padding="VALID", stride_h=1, stride_w=1,
                            fused_activation_function="NONE")
    why: list[str] = []
    (ctx,) = _contexts(model)
    assert prepared_params(ctx, why) is None and "not a constant" in why[-1]


def test_nodes_without_a_fast_path_say_why_and_stay_exact(monkeypatch):
    monkeypatch.setattr(jit, "AVAILABLE", False)
    want, got, _, d = run(CONV_CASES["3x3_s2_same_rgb"])
    (fb,) = [f for k in d.kernels for f in fallbacks(k)]
    assert fb.op == "CONV_2D" and "numba kernels are off" in fb.reason
    np.testing.assert_array_equal(got[0], want[0])


def test_other_quantized_ops_are_listed_as_reference_steps():
    concat = single_op_model("CONCATENATION", [In((1, 3, 4, 2), I8, QA), In((1, 3, 4, 5), I8, QA)],
                             [Out((1, 3, 4, 7), I8, QA)], version=2, axis=3, fused_activation_function="NONE")
    want, got, _, d = run(concat)
    (fb,) = [f for k in d.kernels for f in fallbacks(k)]
    assert fb.op == "CONCATENATION" and "no int8 fast path" in fb.reason
    np.testing.assert_array_equal(got[0], want[0])


# --- threads --------------------------------------------------------------------------------------

def test_parallel_kernels_honour_num_threads_and_stay_exact():
    big_conv = conv_model((1, 40, 40, 16), 64, 3, 3)  # > PARALLEL_MACS multiply-adds
    big_dw = dw_model((1, 48, 48, 64), 3)
    for model in (big_conv, big_dw):
        for n in (1, 2):
            assert_fast_and_exact(model, num_threads=n)
    assert threads.numba_threads() == 1  # restored after the invoke


# --- AVERAGE_POOL_2D (int8_pool.py) ---------------------------------------------------------------

def avg_pool(shape, out_shape, padding, stride, filt, act="NONE", q=(0.05, 3)):
    return single_op_model("AVERAGE_POOL_2D", [In(shape, I8, q)], [Out(out_shape, I8, q)], version=2,
                           padding=padding, stride_h=stride[0], stride_w=stride[1], filter_height=filt[0],
                           filter_width=filt[1], fused_activation_function=act)


POOL_CASES = {
    "2x2_s2_valid": avg_pool((1, 32, 32, 16), (1, 16, 16, 16), "VALID", (2, 2), (2, 2)),
    "3x3_s2_same_odd": avg_pool((2, 7, 9, 5), (2, 4, 5, 5), "SAME", (2, 2), (3, 3), "RELU"),
    "5x3_s1_same_relu6": avg_pool((1, 6, 6, 3), (1, 6, 6, 3), "SAME", (1, 1), (5, 3), "RELU6", (0.02, -7)),
    "3x3_s3_valid_n1to1": avg_pool((1, 10, 8, 4), (1, 3, 2, 4), "VALID", (3, 3), (3, 3), "RELU_N1_TO_1"),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_int8_average_pool_is_native_and_bit_exact(case):
    for seed in (0, 1):
        want, got, it, d = run(POOL_CASES[case], seed)
        assert it.delegation.nodes_of("xnnpack-cpu") == [0], it.delegation.rejections
        assert not [f for k in d.kernels for f in fallbacks(k)]
        assert [s.op for s in quant_specs(d)] == ["AVERAGE_POOL_2D"]
        np.testing.assert_array_equal(got[0], want[0])


# --- SOFTMAX (int8_softmax.py) --------------------------------------------------------------------

def softmax_model(shape, in_q=(0.05, 3)):
    return single_op_model("SOFTMAX", [In(shape, I8, in_q)], [Out(shape, I8, (1 / 256, -128))], version=2, beta=1.0)


SOFTMAX_CASES = {  # the op table takes int8 -> int8 with beta 1 only
    "1x10": softmax_model((1, 10)),
    "rows": softmax_model((3, 5, 17), in_q=(0.2, -5)),
    "many_rows": softmax_model((40, 33), in_q=(0.01, 0)),
    "long_rows": softmax_model((2, 600), in_q=(0.3, 1)),
    "one_column": softmax_model((6, 1), in_q=(0.05, 100)),
}


def _run_softmax(model: bytes, x: np.ndarray):
    ref = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    d = load_delegate("xnnpack-cpu")
    it = Interpreter(model_content=model, experimental_delegates=[d])
    outs = []
    for i in (ref, it):
        i.allocate_tensors()
        i.set_tensor(i.get_input_details()[0]["index"], x)
        i.invoke()
        outs.append(i.get_tensor(i.get_output_details()[0]["index"]))
    return outs[0], outs[1], it, d


@pytest.mark.parametrize("case", sorted(SOFTMAX_CASES))
def test_int8_softmax_is_native_and_bit_exact(case):
    model = SOFTMAX_CASES[case]
    for seed in (0, 1):
        want, got, it, d = run(model, seed)
        assert it.delegation.nodes_of("xnnpack-cpu") == [0], it.delegation.rejections
        assert not [f for k in d.kernels for f in fallbacks(k)]
        assert [s.op for s in quant_specs(d)] == ["SOFTMAX"]
        assert got[0].dtype == want[0].dtype
        np.testing.assert_array_equal(got[0], want[0])
    # inputs close to each other (many nonzero outputs), equal maxima, constant rows
    det = Interpreter(model_content=model).get_input_details()[0]
    info = np.iinfo(det["dtype"])
    rng = np.random.default_rng(2)
    shape = tuple(det["shape"])
    for x in (rng.integers(info.max - 12, info.max + 1, shape), np.full(shape, info.min), np.full(shape, info.max),
              rng.integers(-3, 4, shape) + (info.min + info.max) // 2):
        want_, got_, *_ = _run_softmax(model, x.astype(det["dtype"]))
        np.testing.assert_array_equal(got_, want_)
