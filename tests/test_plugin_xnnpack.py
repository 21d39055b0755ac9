"""The xnnpack-cpu plugin: XNNPACK's op table and rules, compiled partitions against the CPU
reference (float32, forced float16, int8), fusion, the numpy fallback, the weight cache."""
import os
import stat
import warnings

import numpy as np
import pytest
from xnnpack_testing import run

from acelera import Interpreter, load_delegate
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.plugins.xnnpack_cpu import SPEC, jit
from acelera.plugins.xnnpack_cpu.weight_cache import WeightCacheWarning
from acelera.samples import tiny_cnn

F32, I8 = np.float32, np.int8
QX, QY = (0.05, 3), (0.08, -2)  # activation quantization of int8 cases


def check(model: bytes, rel: float = 1e-5, delegated: bool = True, **options):
    want, got, it, d = run(model, **options)
    if delegated:
        n = len(it.model.main.operators)
        assert len(it.delegation.nodes_of("xnnpack-cpu")) == n, it.delegation.rejections
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.issubdtype(w.dtype, np.floating):
            bound = rel * max(1.0, float(np.max(np.abs(w), initial=0)))
            np.testing.assert_allclose(g, w, rtol=0, atol=bound)
        else:
            np.testing.assert_array_equal(g, w)
    return it, d


def conv_w(o, kh, kw, i, seed=1):
    return np.random.default_rng(seed).normal(0, 0.3, (o, kh, kw, i)).astype(F32)


def q8_weights(w, axis):
    amax = np.max(np.abs(w), axis=tuple(d for d in range(w.ndim) if d != axis))
    scales = (np.maximum(amax, 1e-6) / 127).astype(F32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(I8)
    return q, (scales, np.zeros(len(scales), np.int64), axis)


def q8_bias(n, w_scales, seed=2):
    s = (QX[0] * np.asarray(w_scales, np.float64)).astype(F32)
    b = np.random.default_rng(seed).integers(-300, 300, n).astype(np.int32)
    return b, (s, np.zeros(len(s), np.int64), 0)


def unary(op, dtype=F32, qin=None, qout=None, version=1, **opts):
    return single_op_model(op, [In((1, 5, 6, 7), dtype, qin)], [Out((1, 5, 6, 7), dtype, qout)], version=version,
                           **opts)


def binary(op, dtype=F32, version=1, act="NONE", b_shape=(1, 4, 4, 6), q=False):
    qa, qb, qo = (QX, (0.06, -5), QY) if q else (None, None, None)
    if q and dtype == np.uint8:  # uint8 zero points lie in [0, 255]
        qa, qb, qo = (0.05, 131), (0.06, 123), (0.08, 126)
    opts = {} if op in ("MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE") else {"fused_activation_function": act}
    return single_op_model(op, [In((1, 4, 4, 6), dtype, qa), In(b_shape, dtype, qb)], [Out((1, 4, 4, 6), dtype, qo)],
                           version=version, **opts)


# --- float32: every declared op -----------------------------------------------------------------

FLOAT_CASES = {
    **{op: unary(op) for op in ("ABS", "CEIL", "FLOOR", "HARD_SWISH", "NEG", "RELU", "RELU6", "RELU_N1_TO_1",
                                "SQUARE", "ELU", "LOGISTIC", "TANH")},
    "SQRT": single_op_model("SQRT", [In((1, 5, 6, 7))], [Out((1, 5, 6, 7))]),  # NaN for x < 0 on both sides
    "LEAKY_RELU": unary("LEAKY_RELU", alpha=0.2),
    "LEAKY_RELU_neg_alpha": unary("LEAKY_RELU", alpha=-1.5),
    **{op: binary(op) for op in ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")},
    "ADD_relu6_channel_broadcast": binary("ADD", act="RELU6", b_shape=(1, 1, 1, 6)),
    "MUL_channel_broadcast": binary("MUL", b_shape=(6,)),
    "AVERAGE_POOL_2D": single_op_model("AVERAGE_POOL_2D", [In((1, 9, 7, 5))], [Out((1, 5, 4, 5))], padding="SAME",
                                       stride_h=2, stride_w=2, filter_height=3, filter_width=3,
                                       fused_activation_function="RELU"),
    "AVERAGE_POOL_2D_global": single_op_model("AVERAGE_POOL_2D", [In((2, 6, 6, 5))], [Out((2, 1, 1, 5))],
                                              padding="VALID", stride_h=1, stride_w=1, filter_height=6,
                                              filter_width=6),
    "MAX_POOL_2D": single_op_model("MAX_POOL_2D", [In((1, 8, 8, 4))], [Out((1, 4, 4, 4))], padding="VALID",
                                   stride_h=2, stride_w=2, filter_height=2, filter_width=2),
    "MAX_POOL_2D_same_3x3": single_op_model("MAX_POOL_2D", [In((1, 7, 9, 3))], [Out((1, 4, 5, 3))], padding="SAME",
                                            stride_h=2, stride_w=2, filter_height=3, filter_width=3,
                                            fused_activation_function="RELU6"),
    "CONCATENATION": single_op_model("CONCATENATION", [In((1, 3, 4, 2)), In((1, 3, 4, 5)), Const(np.ones((1, 3, 4, 1), F32))],
                                     [Out((1, 3, 4, 8))], axis=3, fused_activation_function="NONE"),
    "CONV_2D_same_s2_relu": single_op_model("CONV_2D", [In((1, 9, 11, 3)), Const(conv_w(6, 3, 3, 3)),
                                                        Const(np.linspace(-1, 1, 6).astype(F32))],
                                            [Out((1, 5, 6, 6))], padding="SAME", stride_h=2, stride_w=2,
                                            fused_activation_function="RELU"),
    "CONV_2D_valid_dilated": single_op_model("CONV_2D", [In((2, 10, 10, 4)), Const(conv_w(5, 3, 3, 4)),
                                                         Const(np.zeros(5, F32))],
                                             [Out((2, 6, 6, 5))], padding="VALID", stride_h=1, stride_w=1,
                                             dilation_h_factor=2, dilation_w_factor=2,
                                             fused_activation_function="RELU_N1_TO_1"),
    "CONV_2D_1x1_s2": single_op_model("CONV_2D", [In((1, 8, 8, 6)), Const(conv_w(4, 1, 1, 6)), Const(np.ones(4, F32))],
                                      [Out((1, 4, 4, 4))], padding="VALID", stride_h=2, stride_w=2,
                                      fused_activation_function="RELU6"),
    "CONV_2D_big_blocks": single_op_model("CONV_2D", [In((1, 64, 64, 3)), Const(conv_w(8, 3, 3, 3)),
                                                      Const(np.ones(8, F32))],
                                          [Out((1, 32, 32, 8))], padding="SAME", stride_h=2, stride_w=2),
    "DEPTHWISE_CONV_2D": single_op_model("DEPTHWISE_CONV_2D", [In((1, 9, 9, 6)), Const(conv_w(1, 3, 3, 6)),
                                                               Const(np.linspace(0, 1, 6).astype(F32))],
                                         [Out((1, 9, 9, 6))], padding="SAME", stride_h=1, stride_w=1,
                                         depth_multiplier=1, fused_activation_function="RELU6"),
    "DEPTHWISE_CONV_2D_5x5_s2": single_op_model("DEPTHWISE_CONV_2D", [In((1, 11, 10, 4)), Const(conv_w(1, 5, 5, 4)),
                                                                      Const(np.zeros(4, F32))],
                                                [Out((1, 6, 5, 4))], padding="SAME", stride_h=2, stride_w=2,
                                                depth_multiplier=1),
    "DEPTHWISE_CONV_2D_multiplier": single_op_model("DEPTHWISE_CONV_2D", [In((1, 6, 6, 3)), Const(conv_w(1, 3, 3, 6)),
                                                                          Const(np.zeros(6, F32))],
                                                    [Out((1, 4, 4, 6))], padding="VALID", stride_h=1, stride_w=1,
                                                    depth_multiplier=2),
    "DEPTH_TO_SPACE": single_op_model("DEPTH_TO_SPACE", [In((1, 3, 4, 8))], [Out((1, 6, 8, 2))], block_size=2),
    "SPACE_TO_DEPTH": single_op_model("SPACE_TO_DEPTH", [In((1, 6, 8, 2))], [Out((1, 3, 4, 8))], block_size=2),
    "FULLY_CONNECTED": single_op_model("FULLY_CONNECTED", [In((3, 40)), Const(conv_w(30, 1, 1, 40).reshape(30, 40)),
                                                           Const(np.ones(30, F32))],
                                       [Out((3, 30))], fused_activation_function="RELU"),
    "FULLY_CONNECTED_large_no_bias": single_op_model("FULLY_CONNECTED", [In((2, 300)),
                                                                         Const(conv_w(250, 1, 1, 300).reshape(250, 300)),
                                                                         None], [Out((2, 250))]),
    "MEAN_hw": single_op_model("MEAN", [In((2, 5, 6, 7)), Const(np.array([1, 2], np.int32))], [Out((2, 7))],
                               keep_dims=False),
    "MEAN_w_keep": single_op_model("MEAN", [In((1, 5, 6, 7)), Const(np.array([2], np.int32))], [Out((1, 5, 1, 7))],
                                   keep_dims=True),
    "PAD": single_op_model("PAD", [In((1, 4, 5, 3)), Const(np.array([[0, 0], [1, 2], [0, 1], [0, 4]], np.int32))],
                           [Out((1, 7, 6, 7))]),
    "PRELU": single_op_model("PRELU", [In((1, 4, 5, 6)), Const(np.linspace(-0.5, 0.5, 6).astype(F32).reshape(1, 1, 6))],
                             [Out((1, 4, 5, 6))]),
    "RESHAPE": single_op_model("RESHAPE", [In((1, 4, 6)), Const(np.array([3, 8], np.int32))], [Out((3, 8))]),
    "RESIZE_BILINEAR_half_pixel": single_op_model("RESIZE_BILINEAR", [In((1, 4, 5, 3)), Const(np.array([8, 9], np.int32))],
                                                  [Out((1, 8, 9, 3))], half_pixel_centers=True),
    "RESIZE_BILINEAR_align": single_op_model("RESIZE_BILINEAR", [In((1, 4, 5, 3)), Const(np.array([7, 9], np.int32))],
                                             [Out((1, 7, 9, 3))], align_corners=True),
    "SLICE": single_op_model("SLICE", [In((2, 5, 6, 3)), Const(np.array([0, 1, 2, 0], np.int32)),
                                       Const(np.array([2, 3, -1, 2], np.int32))], [Out((2, 3, 4, 2))]),
    "SOFTMAX": single_op_model("SOFTMAX", [In((3, 17))], [Out((3, 17))], beta=1.0),
    "SOFTMAX_large": single_op_model("SOFTMAX", [In((64, 300))], [Out((64, 300))], beta=1.0),
    "SPLIT": single_op_model("SPLIT", [Const(np.array(3, np.int32)), In((1, 2, 3, 9))],
                             [Out((1, 2, 3, 3))] * 3, num_splits=3),
    "STRIDED_SLICE": single_op_model("STRIDED_SLICE", [In((1, 6, 7, 4)), Const(np.array([0, 1, 0, 1], np.int32)),
                                                       Const(np.array([1, 5, 7, 3], np.int32)),
                                                       Const(np.ones(4, np.int32))],
                                     [Out((1, 4, 7, 2))], begin_mask=0, end_mask=4),
    "TRANSPOSE": single_op_model("TRANSPOSE", [In((2, 3, 4)), Const(np.array([2, 0, 1], np.int32))], [Out((4, 2, 3))]),
    "TRANSPOSE_CONV": single_op_model("TRANSPOSE_CONV", [Const(np.array([1, 8, 8, 3], np.int32)),
                                                         Const(conv_w(3, 3, 3, 4)), In((1, 4, 4, 4))],
                                      [Out((1, 8, 8, 3))], padding="SAME", stride_h=2, stride_w=2),
}


@pytest.mark.parametrize("case", sorted(FLOAT_CASES))
def test_float_ops_match_the_reference(case):
    check(FLOAT_CASES[case])


# --- int8: every op of the quantized table -------------------------------------------------------

def q8_conv(dw=False):
    w = conv_w(1 if dw else 5, 3, 3, 4)
    q, wq = q8_weights(w, 3 if dw else 0)
    b, bq = q8_bias(4 if dw else 5, wq[0])
    op = "DEPTHWISE_CONV_2D" if dw else "CONV_2D"
    extra = {"depth_multiplier": 1} if dw else {}
    return single_op_model(op, [In((1, 7, 7, 4), I8, QX), Const(q, wq), Const(b, bq)],
                           [Out((1, 4, 4, 4 if dw else 5), I8, QY)], version=3, padding="SAME", stride_h=2, stride_w=2,
                           fused_activation_function="RELU", **extra)


def q8_fc():
    q, wq = q8_weights(conv_w(6, 1, 1, 20).reshape(6, 20), 0)
    b, bq = q8_bias(6, wq[0])
    return single_op_model("FULLY_CONNECTED", [In((2, 20), I8, QX), Const(q, wq), Const(b, bq)], [Out((2, 6), I8, QY)],
                           version=4)


def q8_transpose_conv():
    q, wq = q8_weights(conv_w(3, 3, 3, 4), 0)
    return single_op_model("TRANSPOSE_CONV", [Const(np.array([1, 8, 8, 3], np.int32)), Const(q, wq),
                                              In((1, 4, 4, 4), I8, QX)], [Out((1, 8, 8, 3), I8, QY)], version=2,
                           padding="SAME", stride_h=2, stride_w=2)


INT8_CASES = {
    "ADD": binary("ADD", I8, 2, "RELU", q=True),
    "SUB": binary("SUB", I8, 2, q=True),
    "MUL": binary("MUL", I8, 2, q=True),
    "CONCATENATION": single_op_model("CONCATENATION", [In((1, 3, 4, 2), I8, QX), In((1, 3, 4, 5), I8, QX)],
                                     [Out((1, 3, 4, 7), I8, QX)], version=2, axis=3, fused_activation_function="NONE"),
    "CONV_2D": q8_conv(),
    "DEPTHWISE_CONV_2D": q8_conv(dw=True),
    "DEPTH_TO_SPACE": single_op_model("DEPTH_TO_SPACE", [In((1, 3, 4, 8), I8, QX)], [Out((1, 6, 8, 2), I8, QX)],
                                      version=2, block_size=2),
    "SPACE_TO_DEPTH": single_op_model("SPACE_TO_DEPTH", [In((1, 6, 8, 2), I8, QX)], [Out((1, 3, 4, 8), I8, QX)],
                                      version=2, block_size=2),
    "DEQUANTIZE": single_op_model("DEQUANTIZE", [In((2, 3, 5), I8, QX)], [Out((2, 3, 5))], version=2),
    "QUANTIZE_from_float": single_op_model("QUANTIZE", [In((2, 3, 5))], [Out((2, 3, 5), I8, QY)], version=2),
    "QUANTIZE_requantize": single_op_model("QUANTIZE", [In((2, 3, 5), I8, QX)], [Out((2, 3, 5), I8, QY)], version=2),
    "ELU": unary("ELU", I8, QX, QY),
    "LEAKY_RELU": unary("LEAKY_RELU", I8, QX, QY, 2, alpha=0.3),
    "LOGISTIC": unary("LOGISTIC", I8, QX, (1 / 256, -128), 2),
    "TANH": unary("TANH", I8, QX, (1 / 128, 0), 2),
    "FULLY_CONNECTED": q8_fc(),
    "MAX_POOL_2D": single_op_model("MAX_POOL_2D", [In((1, 8, 8, 4), I8, QX)], [Out((1, 4, 4, 4), I8, QX)], version=2,
                                   padding="VALID", stride_h=2, stride_w=2, filter_height=2, filter_width=2),
    "MEAN": single_op_model("MEAN", [In((1, 5, 6, 7), I8, QX), Const(np.array([1, 2], np.int32))],
                            [Out((1, 7), I8, QY)], version=2, keep_dims=False),
    "PAD": single_op_model("PAD", [In((1, 4, 5, 3), I8, QX), Const(np.array([[0, 0], [1, 1], [2, 0], [0, 0]], np.int32))],
                           [Out((1, 6, 7, 3), I8, QX)], version=2),
    "RESHAPE": single_op_model("RESHAPE", [In((1, 4, 6), I8, QX), Const(np.array([3, 8], np.int32))],
                               [Out((3, 8), I8, QX)]),
    "RESIZE_BILINEAR": single_op_model("RESIZE_BILINEAR", [In((1, 4, 5, 3), I8, QX), Const(np.array([8, 10], np.int32))],
                                       [Out((1, 8, 10, 3), I8, QX)], version=2),
    "SLICE": single_op_model("SLICE", [In((2, 5, 6, 3), I8, QX), Const(np.array([0, 1, 2, 0], np.int32)),
                                       Const(np.array([2, 3, 4, 2], np.int32))], [Out((2, 3, 4, 2), I8, QX)], version=2),
    "SPLIT": single_op_model("SPLIT", [Const(np.array(1, np.int32)), In((1, 4, 3), I8, QX)],
                             [Out((1, 2, 3), I8, QX)] * 2, version=2, num_splits=2),
    "TRANSPOSE": single_op_model("TRANSPOSE", [In((2, 3, 4), I8, QX), Const(np.array([1, 2, 0], np.int32))],
                                 [Out((3, 4, 2), I8, QX)], version=2),
    "TRANSPOSE_CONV": q8_transpose_conv(),
}


@pytest.mark.parametrize("case", sorted(INT8_CASES))
def test_int8_ops_are_bit_exact_with_the_reference(case):
    check(INT8_CASES[case])


def test_every_declared_op_has_a_case():
    # ROUND is in XNNPACK's table but acelera has no reference kernel for it yet, so no
    # graph holding it can be prepared: the delegate accepts it, nothing can run it.
    assert verdict(unary("ROUND")).ok
    def op_of(case):
        return max((op for op in SPEC.op_table.rows if case == op or case.startswith(op + "_")), key=len)
    from xnnpack_wide_cases import FLOAT_CASES as WIDE_FLOAT  # issue #15's ops
    from xnnpack_wide_cases import INT8_CASES as WIDE_INT8
    assert set(SPEC.op_table.rows) == {"ROUND"} | {op_of(k) for k in (*FLOAT_CASES, *WIDE_FLOAT)} | {
        op_of(k) for k in (*INT8_CASES, *WIDE_INT8)}
    int8_rows = {op for op, row in SPEC.op_table.rows.items() if "INT8" in row.dtypes}
    assert int8_rows == {op_of(k) for k in (*INT8_CASES, *WIDE_INT8)}


# --- the declaration and XNNPACK's rules ---------------------------------------------------------

def test_flags_and_spec():
    assert {f.name: (f.type, f.default) for f in SPEC.flags} == {
        "use_xnnpack": (bool, False), "xnnpack_force_fp16": (bool, False), "xnnpack_weight_cache_file_path": (str, "")}
    assert SPEC.enabled_by == ("use_xnnpack",) and SPEC.backend == "cpu" and SPEC.precision == "float32"
    assert SPEC.probe().ok
    d = load_delegate("xnnpack-cpu", {"num_threads": 2, "xnnpack_force_fp16": True})
    assert d.num_threads == 2 and d.force_fp16 and d.precision["float"] == "float16"


def verdict(model: bytes):
    it = Interpreter(model_content=model)
    return load_delegate("xnnpack-cpu").is_node_supported(it._rt.ex.node_context(0))


@pytest.mark.parametrize("model, reason", [
    (binary("ADD", act="TANH"), "fused activation must be NONE, RELU, RELU_N1_TO_1 or RELU6"),
    (single_op_model("CONV_2D", [In((1, 5, 5, 2)), In((3, 3, 3, 2)), Const(np.zeros(3, F32))], [Out((1, 5, 5, 3))],
                     padding="SAME", stride_h=1, stride_w=1), "filter must be static"),
    (single_op_model("CONV_2D", [In((1, 5, 5, 2)), Const(conv_w(3, 3, 3, 2)), None], [Out((1, 5, 5, 3))],
                     padding="SAME", stride_h=1, stride_w=1), "bias is mandatory"),
    (single_op_model("CONV_2D", [In((1, 5, 5, 2)), Const(np.ones((3, 3, 3, 2), I8), (0.1, 0)), Const(np.zeros(3, F32))],
                     [Out((1, 5, 5, 3))], version=2, padding="SAME", stride_h=1, stride_w=1),
     "dynamic-range quantization is not supported"),
    (single_op_model("MEAN", [In((1, 4, 4, 3)), Const(np.array([4], np.int32))], [Out((1, 4, 4, 3))]),
     "each within the input's rank"),
    (single_op_model("MEAN", [In((4, 4, 3)), In((1,), np.int32)], [Out((4, 3))]), "axes must be static"),
    (single_op_model("PAD", [In((1, 4)), Const(np.array([[0, 0], [-1, 2]], np.int32))], [Out((1, 5))]),
     "paddings must be non-negative"),
    (single_op_model("PAD", [In((1, 4)), In((2, 2), np.int32)], [Out((1, 5))]), "paddings must be static"),
    (single_op_model("PRELU", [In((1, 4, 5, 6)), Const(np.ones((1, 5, 6), F32))], [Out((1, 4, 5, 6))]),
     "only its channel (last) dimension different from 1"),
    (single_op_model("PRELU", [In((1, 4, 6)), In((1, 1, 6))], [Out((1, 4, 6))]), "slope must be static"),
    (single_op_model("SLICE", [In((4, 4)), In((2,), np.int32), Const(np.array([2, 2], np.int32))], [Out((2, 2))]),
     "begin must be static"),
    (single_op_model("STRIDED_SLICE", [In((6, 4)), Const(np.array([0, 0], np.int32)), Const(np.array([6, 4], np.int32)),
                                       Const(np.array([2, 1], np.int32))], [Out((3, 4))]), "strides must all be 1"),
    (single_op_model("STRIDED_SLICE", [In((6, 4)), Const(np.array([0, 0], np.int32)), Const(np.array([1, 4], np.int32)),
                                       Const(np.array([1, 1], np.int32))], [Out((4,))], shrink_axis_mask=1),
     "shrink-axis masks 0"),
    (single_op_model("SOFTMAX", [In((2, 5))], [Out((2, 5))], beta=2.0), "beta must be 1.0"),
    (single_op_model("CONCATENATION", [In((1, 2))] * 5, [Out((1, 10))], axis=1), "needs 2 to 4 inputs"),
    (single_op_model("SPLIT", [Const(np.array(1, np.int32)), In((1, 10))], [Out((1, 2))] * 5, num_splits=5),
     "needs 2 to 4 outputs"),
    (single_op_model("MAX_POOL_2D", [In((1, 4, 4, 2))], [Out((1, 2, 2, 2))], padding="VALID", stride_h=2, stride_w=2,
                     filter_height=1, filter_width=1), "1x1 pooling with a stride other than 1"),
    (single_op_model("DEPTH_TO_SPACE", [In((1, 2, 2, 4))], [Out((1, 2, 2, 4))], block_size=1),
     "block size must be greater than 1"),
    (single_op_model("TRANSPOSE", [In((2, 3)), In((2,), np.int32)], [Out((3, 2))]), "permutation must be static"),
    (single_op_model("RESIZE_BILINEAR", [In((1, 2, 2, 1)), In((2,), np.int32)], [Out((1, 4, 4, 1))]),
     "output size static"),
    (single_op_model("LEAKY_RELU", [In((1, 8), I8, (1.0, 0))], [Out((1, 8), I8, (0.001, 0))], version=2, alpha=0.5),
     "scale ratio must be in [1/256, 128]"),
    (single_op_model("QUANTIZE", [In((1, 8), I8, (1.0, 0))], [Out((1, 8), I8, (0.001, 0))], version=2),
     "scale ratio in [2^-8, 2^7]"),
])
def test_rules_reject_with_readable_reasons(model, reason):
    s = verdict(model)
    assert not s.ok and reason in s.reason, s.reason


@pytest.mark.parametrize("model, kind", [
    (binary("ADD", version=6), "version"),
    (binary("ADD", np.int16), "input type"),
    (binary("ADD", np.uint8, q=True), "input type"),
    (unary("RELU", I8, QX, QX, 1), "input type"),  # RELU is float-only in XNNPACK's quantized table
    (single_op_model("LOG_SOFTMAX", [In((2, 3))], [Out((2, 3))]), "op"),
])
def test_outside_the_table(model, kind):
    s = verdict(model)
    assert not s.ok and s.kind == kind


def test_rejected_nodes_stay_on_the_cpu_and_results_agree():
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 3), F32)
    h = b.add_tensor("h", (1, 4, 4, 3), F32)
    y = b.add_tensor("y", (1, 4, 4, 3), F32)
    z = b.add_tensor("z", (1, 4, 4, 3), F32)
    b.add_operator("RELU", [x], [h])
    b.add_operator("LOG_SOFTMAX", [h], [y])
    b.add_operator("ADD", [y, x], [z], fused_activation_function="RELU")
    b.mark_outputs(z)
    it, _ = check(b.build(), delegated=False)
    assert it.delegation.nodes_of("xnnpack-cpu") == [0, 2]


# --- fusion, buffers, numpy fallback --------------------------------------------------------------

def block(pad_channels: int = 0, act: str = "RELU", prelu: bool = False):
    """BlazeFace-style: dw -> 1x1 conv -> ADD(residual, maybe channel-PADded) -> activation."""
    b = ModelBuilder()
    c_in, c_out = 4, 4 + pad_channels
    x = b.add_input("x", (1, 8, 8, c_in), F32)
    d = b.add_tensor("d", (1, 8, 8, c_in), F32)
    b.add_operator("DEPTHWISE_CONV_2D", [x, b.add_constant("dw", conv_w(1, 3, 3, c_in)),
                                         b.add_constant("db", np.zeros(c_in, F32))], [d],
                   padding="SAME", stride_h=1, stride_w=1, depth_multiplier=1)
    c = b.add_tensor("c", (1, 8, 8, c_out), F32)
    b.add_operator("CONV_2D", [d, b.add_constant("w", conv_w(c_out, 1, 1, c_in)),
                               b.add_constant("b", np.full(c_out, 0.1, F32))], [c],
                   padding="VALID", stride_h=1, stride_w=1)
    r = x
    if pad_channels:
        r = b.add_tensor("p", (1, 8, 8, c_out), F32)
        b.add_operator("PAD", [x, b.add_constant("pp", np.array([[0, 0]] * 3 + [[0, pad_channels]], np.int32))], [r])
    s = b.add_tensor("s", (1, 8, 8, c_out), F32)
    b.add_operator("ADD", [c, r], [s], fused_activation_function="NONE")
    y = b.add_tensor("y", (1, 8, 8, c_out), F32)
    if prelu:
        b.add_operator("PRELU", [s, b.add_constant("a", np.linspace(0, 0.3, c_out).astype(F32).reshape(1, 1, c_out))],
                       [y])
    else:
        b.add_operator(act, [s], [y])
    b.mark_outputs(y)
    return b.build()


@pytest.mark.parametrize("pad, prelu", [(0, False), (4, False), (0, True), (2, True)])
def test_conv_pad_add_activation_chains_fuse_into_one_step(pad, prelu):
    _, d = check(block(pad, prelu=prelu))
    labels = d.kernels[0].labels
    assert len(labels) == 2 and labels[1].startswith("CONV_2D+" + ("PAD+" if pad else "") + "ADD+"), labels


def test_small_dense_layers_run_as_one_call_and_models_stay_exact():
    b = ModelBuilder()
    t = b.add_input("x", (2, 8), F32)
    for i, (k, n, act) in enumerate([(8, 16, "RELU"), (16, 16, "RELU6"), (16, 3, "NONE")]):
        o = b.add_tensor(f"h{i}", (2, n), F32)
        b.add_operator("FULLY_CONNECTED", [t, b.add_constant(f"w{i}", conv_w(n, 1, 1, k).reshape(n, k)),
                                           b.add_constant(f"b{i}", np.full(n, 0.05, F32))], [o],
                       fused_activation_function=act)
        t = o
    b.mark_outputs(t)
    _, d = check(b.build())
    assert d.kernels[0].labels == ["FULLY_CONNECTED+FULLY_CONNECTED+FULLY_CONNECTED (nodes 0, 1, 2)"] or \
        not jit.AVAILABLE


def test_buffers_are_reused_and_results_are_stable_across_invokes():
    model = tiny_cnn()
    want, got, it, d = run(model)
    k = d.kernels[0]
    outs = [it.get_tensor(o["index"]).copy() for o in it.get_output_details()]
    for _ in range(3):
        it.invoke()
        for o, prev in zip(it.get_output_details(), outs):
            np.testing.assert_array_equal(it.get_tensor(o["index"]), prev)
    intermediates = sum(int(np.prod(t.shape)) * 4 for n in k.partition.nodes for t in k.partition.contexts[n].outputs)
    assert k.arena_bytes < intermediates  # lifetimes let buffers be shared


def test_numpy_fallback_without_numba(monkeypatch):
    monkeypatch.setattr(jit, "AVAILABLE", False)
    for name in ("CONV_2D_same_s2_relu", "DEPTHWISE_CONV_2D_5x5_s2", "MAX_POOL_2D_same_3x3", "MEAN_hw",
                 "RESIZE_BILINEAR_half_pixel", "SOFTMAX", "PRELU", "MUL_channel_broadcast", "FULLY_CONNECTED"):
        check(FLOAT_CASES[name])
    for pad, prelu in ((4, False), (0, True)):
        check(block(pad, prelu=prelu))
    check(tiny_cnn(), rel=1e-4)


def test_threads_option_is_honoured_and_restored():
    from acelera.plugins.xnnpack_cpu.threads import blas_pools

    before = [lib.get_num_threads() for lib in blas_pools()]
    check(FLOAT_CASES["CONV_2D_big_blocks"], num_threads=1)
    check(FLOAT_CASES["CONV_2D_big_blocks"], num_threads=2)
    assert [lib.get_num_threads() for lib in blas_pools()] == before


# --- float16 -----------------------------------------------------------------------------------

def test_force_fp16_rounds_every_tensor_to_half():
    model = single_op_model("ADD", [In((1, 64)), In((1, 64))], [Out((1, 64))], fused_activation_function="NONE")
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(1, 64)).astype(F32), rng.normal(size=(1, 64)).astype(F32)
    it = Interpreter(model_content=model, experimental_delegates=[load_delegate("xnnpack-cpu", {"xnnpack_force_fp16": True})])
    it.allocate_tensors()
    ins = it.get_input_details()
    it.set_tensor(ins[0]["index"], a)
    it.set_tensor(ins[1]["index"], b)
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    h = np.float16
    want = (a.astype(h) + b.astype(h)).astype(F32)  # half inputs, half result
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, a + b)


@pytest.mark.parametrize("model", [tiny_cnn(), block(4, prelu=True)])
def test_force_fp16_is_close_to_the_reference(model):
    want, got, it, d = run(model, xnnpack_force_fp16=True)
    assert d.precision == {"float": "float16", "integer": "integer"}
    for w, g in zip(want, got):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=0, atol=2e-2 * max(1.0, float(np.max(np.abs(w)))))
        assert not np.array_equal(g, w)


# --- weight cache --------------------------------------------------------------------------------

def cached(model: bytes, path, expect_warning: str | None = None):
    d = load_delegate("xnnpack-cpu", {"xnnpack_weight_cache_file_path": str(path)})
    it = Interpreter(model_content=model, experimental_delegates=[d])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        it.allocate_tensors()
    msgs = [str(x.message) for x in w if issubclass(x.category, WeightCacheWarning)]
    if expect_warning is None:
        assert not msgs, msgs
    else:
        assert len(msgs) == 1 and expect_warning in msgs[0], msgs
    assert len(it.delegation.nodes_of("xnnpack-cpu")) == len(it.model.main.operators)
    return d.weight_cache


def test_weight_cache_hit_after_a_miss(tmp_path):
    path = tmp_path / "xnn.cache"
    model = tiny_cnn()
    wc = cached(model, path)
    assert (wc.hits, wc.misses) == (0, 1) and path.exists()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["xnn.cache"]  # no temporary file left behind
    wc = cached(model, path)
    assert (wc.hits, wc.misses) == (1, 0)
    check(model, xnnpack_weight_cache_file_path=str(path))  # results from cached weights


def test_weight_cache_stale_for_another_model_is_rebuilt(tmp_path):
    path = tmp_path / "xnn.cache"
    cached(tiny_cnn(seed=0), path)
    wc = cached(tiny_cnn(seed=1), path, "stale")
    assert wc.misses == 1
    assert cached(tiny_cnn(seed=1), path).hits == 1


def test_weight_cache_stale_plugin_version_is_rebuilt(tmp_path, monkeypatch):
    import acelera.plugins.xnnpack_cpu.delegate as dmod

    path = tmp_path / "xnn.cache"
    cached(tiny_cnn(), path)
    monkeypatch.setattr(dmod, "LAYOUT", "999")
    cached(tiny_cnn(), path, "stale (written by xnnpack-cpu")


@pytest.mark.parametrize("damage, why", [
    (lambda b: b[:len(b) // 2], "truncated"),
    (lambda b: b[:10], "truncated"),
    (lambda b: b[:200] + bytes([b[200] ^ 0xFF]) + b[201:], "corrupt"),
    (lambda b: b"garbage!" + b[8:], "corrupt"),
    (lambda b: b + b"x", "corrupt"),
])
def test_weight_cache_damaged_file_is_detected_and_rebuilt(tmp_path, damage, why):
    path = tmp_path / "xnn.cache"
    model = tiny_cnn()
    cached(model, path)
    path.write_bytes(damage(path.read_bytes()))
    wc = cached(model, path, why)
    assert wc.misses == 1
    assert cached(model, path).hits == 1  # the rebuilt file is valid


# --- the shared models -----------------------------------------------------------------------------

FLOAT_MODELS = ["face_detection_short_range", "face_landmark", "hand_recrop", "mobilenet_v2_96_f32",
                "selfie_segmentation", "sine_float", "small_cnn_f32"]
INT8_MODELS = ["face_detection_short_range_int8", "hand_recrop_int8", "mobilenet_v2_96_int8", "sine_float_int8",
               "small_cnn_int8"]


@pytest.mark.slow
@pytest.mark.parametrize("name, numba", [(m, True) for m in FLOAT_MODELS + INT8_MODELS] +
                         [(m, False) for m in FLOAT_MODELS])
def test_shared_models_match_the_reference(models_dir, name, numba, monkeypatch):
    if not numba:
        monkeypatch.setattr(jit, "AVAILABLE", False)
    model = (models_dir / f"{name}.tflite").read_bytes()
    want, got, it, _ = run(model)
    share = len(it.delegation.nodes_of("xnnpack-cpu")) / len(it.model.main.operators)
    assert share > (0.99 if name in FLOAT_MODELS and name != "selfie_segmentation" else 0.5)
    for w, g in zip(want, got):
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-4 * max(1.0, float(np.max(np.abs(w)))))
        else:
            np.testing.assert_array_equal(g, w)


# The int8 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED fast paths: tests/test_xnnpack_int8.py.
