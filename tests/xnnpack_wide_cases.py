"""The op cases of xnnpack-cpu's wider op table (issue #15), shared by tests/test_xnnpack_ops_wide.py
(each compared with the reference through the delegate) and tests/test_plugin_xnnpack.py (every
declared op has a case)."""
from __future__ import annotations

import numpy as np

from acelera.core.builder import Const, In, Out, single_op_model

F32, I8 = np.float32, np.int8
QX, QY = (0.05, 3), (0.08, -2)


def w_(shape, seed=1):
    return np.random.default_rng(seed).normal(0, 0.3, shape).astype(F32)


def unary(op, version=1, **opts):
    return single_op_model(op, [In((2, 5, 6, 7))], [Out((2, 5, 6, 7))], version=version, **opts)


def reduce(op, in_shape, axes, out_shape, dtype=F32, q=None, version=1, keep_dims=False):
    return single_op_model(op, [In(in_shape, dtype, q), Const(np.array(axes, np.int32))],
                           [Out(out_shape, dtype, q)], version=version, keep_dims=keep_dims)


def fc(in_shape, out_shape, version, keep_num_dims, bias=True):
    return single_op_model("FULLY_CONNECTED", [In(in_shape), Const(w_((9, in_shape[-1]))),
                                               Const(w_((9,), 2)) if bias else None],
                           [Out(out_shape)], version=version, keep_num_dims=keep_num_dims,
                           fused_activation_function="RELU")


def bmm(a_shape, b_shape, out_shape, const_b=False, **opts):
    b = Const(w_(b_shape)) if const_b else In(b_shape)
    return single_op_model("BATCH_MATMUL", [In(a_shape), b], [Out(out_shape)], **opts)


def q8_fc_keep_dims():
    w = w_((6, 20))
    scales = (np.max(np.abs(w), axis=1) / 127).astype(F32)
    q = np.clip(np.round(w / scales[:, None]), -127, 127).astype(I8)
    b = np.random.default_rng(2).integers(-300, 300, 6).astype(np.int32)
    return single_op_model("FULLY_CONNECTED", [In((2, 3, 20), I8, QX),
                                               Const(q, (scales, np.zeros(6, np.int64), 0)),
                                               Const(b, ((QX[0] * scales.astype(np.float64)).astype(F32),
                                                         np.zeros(6, np.int64), 0))],
                           [Out((2, 3, 6), I8, QY)], version=5, keep_num_dims=True)


# (model, input range): positive inputs where the reference has a domain
FLOAT_CASES = {
    "FULLY_CONNECTED_v5_keep_num_dims": (fc((2, 4, 16), (2, 4, 9), 5, True), None),
    "FULLY_CONNECTED_v5_flat": (fc((2, 4, 16), (8, 9), 5, False), None),
    "FULLY_CONNECTED_v9_no_bias": (fc((3, 40), (3, 9), 9, False, bias=False), None),
    "FULLY_CONNECTED_v5_large": (single_op_model(
        "FULLY_CONNECTED", [In((1, 64, 96)), Const(w_((128, 96))), Const(w_((128,), 2))], [Out((1, 64, 128))],
        version=5, keep_num_dims=True), None),
    "BATCH_MATMUL": (bmm((2, 3, 5, 8), (2, 3, 8, 6), (2, 3, 5, 6)), None),
    "BATCH_MATMUL_adj_x": (bmm((2, 8, 5), (2, 8, 6), (2, 5, 6), adj_x=True), None),
    "BATCH_MATMUL_adj_y": (bmm((2, 5, 8), (2, 6, 8), (2, 5, 6), adj_y=True), None),
    "BATCH_MATMUL_broadcast": (bmm((3, 4, 5, 8), (8, 6), (3, 4, 5, 6)), None),
    "BATCH_MATMUL_const_rhs": (bmm((4, 5, 8), (1, 8, 6), (4, 5, 6), const_b=True), None),
    "MEAN_last_axis_keep": (reduce("MEAN", (1, 12, 32), [-1], (1, 12, 1), keep_dims=True), None),
    "MEAN_3d_axis1": (reduce("MEAN", (2, 12, 32), [1], (2, 32)), None),
    "MEAN_all_axes": (reduce("MEAN", (3, 4, 5), [0, 1, 2], ()), None),
    "MEAN_duplicate_axes": (reduce("MEAN", (2, 4, 5, 6), [3, -1, 1], (2, 5)), None),
    "MEAN_group_norm_5d": (reduce("MEAN", (1, 16, 16, 4, 4), [1, 2, 4], (1, 1, 1, 4, 1), keep_dims=True), None),
    "MEAN_outer_and_mid": (reduce("MEAN", (3, 4, 5, 6), [0, 2], (4, 6)), None),
    "SUM": (reduce("SUM", (2, 4, 5, 6), [1, 3], (2, 1, 5, 1), keep_dims=True), None),
    "REDUCE_MAX": (reduce("REDUCE_MAX", (2, 7, 9), [1], (2, 9)), None),
    "REDUCE_MIN": (reduce("REDUCE_MIN", (2, 7, 9), [0, 2], (7,)), None),
    "REDUCE_MAX_all_axes": (reduce("REDUCE_MAX", (2, 7, 9), [0, 1, 2], ()), None),
    "RSQRT": (unary("RSQRT"), (0.01, 4.0)),
    "GELU": (unary("GELU", approximate=False), None),
    "GELU_approximate": (unary("GELU", approximate=True), None),
    "EXP": (unary("EXP"), None),
    "LOG": (unary("LOG"), (0.01, 4.0)),
    "SIN": (unary("SIN"), (-4.0, 4.0)),
    "COS": (unary("COS"), (-4.0, 4.0)),
    "ABS_v5": (unary("ABS", version=5), None),
    "EXPAND_DIMS": (single_op_model("EXPAND_DIMS", [In((3, 5)), Const(np.array([-1], np.int32))],
                                    [Out((3, 5, 1))]), None),
    "SUB_v3": (single_op_model("SUB", [In((1, 4, 4, 6)), In((1, 1, 1, 6))], [Out((1, 4, 4, 6))], version=3,
                               fused_activation_function="NONE"), None),
    # broadcasting binary ops (jit_nd.binary_nd), transposes, unary ops and a pointwise GEMM of
    # more than SMALL_M rows on the native kernels; a BATCH_MATMUL above SMALL_BMM stays on numpy
    "ADD_const_rows": (single_op_model("ADD", [In((1, 16, 32)), Const(w_((16, 32)))], [Out((1, 16, 32))],
                                       fused_activation_function="RELU6"), None),
    "SQUARED_DIFFERENCE_per_row": (single_op_model("SQUARED_DIFFERENCE", [In((2, 6, 8)), In((2, 6, 1))],
                                                   [Out((2, 6, 8))]), None),
    "MUL_row_by_column": (single_op_model("MUL", [In((2, 6, 1)), In((1, 1, 8))], [Out((2, 6, 8))],
                                          fused_activation_function="NONE"), None),
    "MAXIMUM_middle_broadcast": (single_op_model("MAXIMUM", [In((2, 1, 5)), In((1, 3, 5))], [Out((2, 3, 5))]),
                                 None),
    "DIV_scalar_first": (single_op_model("DIV", [In((1,)), In((3, 4))], [Out((3, 4))],
                                         fused_activation_function="NONE"), (0.5, 2.0)),
    "TRANSPOSE_0213": (single_op_model("TRANSPOSE", [In((2, 5, 3, 4)), Const(np.array([0, 2, 1, 3], np.int32))],
                                       [Out((2, 3, 5, 4))]), None),
    "TRANSPOSE_0231": (single_op_model("TRANSPOSE", [In((1, 5, 3, 4)), Const(np.array([0, 2, 3, 1], np.int32))],
                                       [Out((1, 3, 4, 5))]), None),
    "TRANSPOSE_5d": (single_op_model("TRANSPOSE", [In((2, 3, 2, 4, 5)),
                                                   Const(np.array([4, 2, 0, 3, 1], np.int32))],
                                     [Out((5, 2, 2, 4, 3))], version=2), None),
    "NEG": (unary("NEG"), None),
    "SQUARE": (unary("SQUARE"), None),
    "TANH": (unary("TANH"), None),
    "FULLY_CONNECTED_v5_many_rows": (fc((2, 20, 16), (2, 20, 9), 5, True), None),
    "BATCH_MATMUL_large": (bmm((2, 64, 96), (2, 96, 64), (2, 64, 64)), None),
    "TRANSPOSE_CONV_v4": (single_op_model("TRANSPOSE_CONV", [Const(np.array([1, 8, 8, 3], np.int32)),
                                                             Const(w_((3, 3, 3, 4))), In((1, 4, 4, 4)),
                                                             Const(w_((3,), 2))],
                                          [Out((1, 8, 8, 3))], version=4, padding="SAME", stride_h=2,
                                          stride_w=2, fused_activation_function="RELU"), None),
}

INT8_CASES = {
    "AVERAGE_POOL_2D": single_op_model("AVERAGE_POOL_2D", [In((1, 8, 8, 4), I8, QX)], [Out((1, 4, 4, 4), I8, QX)],
                                       version=2, padding="SAME", stride_h=2, stride_w=2, filter_height=3,
                                       filter_width=3, fused_activation_function="RELU6"),
    "AVERAGE_POOL_2D_global": single_op_model("AVERAGE_POOL_2D", [In((1, 5, 5, 8), I8, QX)],
                                              [Out((1, 1, 1, 8), I8, QX)], version=2, padding="VALID", stride_h=1,
                                              stride_w=1, filter_height=5, filter_width=5),
    "SOFTMAX": single_op_model("SOFTMAX", [In((3, 17), I8, QX)], [Out((3, 17), I8, (1 / 256, -128))], version=2,
                               beta=1.0),
    "MEAN_last_axis": reduce("MEAN", (2, 6, 10), [2], (2, 6), I8, QX, version=2),
    "SUM": reduce("SUM", (2, 6, 10), [1], (2, 10), I8, QX, version=2),
    "REDUCE_MAX": reduce("REDUCE_MAX", (2, 6, 10), [1, 2], (2,), I8, QX, version=2),
    "REDUCE_MIN": reduce("REDUCE_MIN", (2, 6, 10), [0], (6, 10), I8, QX, version=2),
    "EXPAND_DIMS": single_op_model("EXPAND_DIMS", [In((3, 5), I8, QX), Const(np.array([0], np.int32))],
                                   [Out((1, 3, 5), I8, QX)]),
    "STRIDED_SLICE": single_op_model("STRIDED_SLICE", [In((1, 6, 7, 4), I8, QX), Const(np.array([0, 1, 0, 1], np.int32)),
                                                       Const(np.array([1, 5, 7, 3], np.int32)),
                                                       Const(np.ones(4, np.int32))],
                                     [Out((1, 4, 7, 2), I8, QX)], version=2, begin_mask=0, end_mask=4),
    "FULLY_CONNECTED_v5_keep_num_dims": q8_fc_keep_dims(),
}
