"""Single-node int8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED models with per-channel
quantized filters, shared by the xnnpack-cpu int8 and threading tests."""
from __future__ import annotations

import numpy as np

from acelera.core.builder import Const, In, Out, single_op_model

I8 = np.int8


def q8_filter(o, kh, kw, i, axis, seed, per_channel=True):
    w = np.random.default_rng(seed).normal(0, 0.3, (o, kh, kw, i)).astype(np.float32)
    red = tuple(d for d in range(4) if d != axis) if per_channel else None
    amax = np.max(np.abs(w), axis=red)
    scales = np.atleast_1d((np.maximum(amax, 1e-6) / 127).astype(np.float32))
    shape = [1] * 4
    if per_channel:
        shape[axis] = -1
    q = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(I8)
    return q, (scales, np.zeros(len(scales), np.int64), axis if per_channel else 0)


def q8_bias(n, w_scales, x_scale, seed, big=False):
    s = (x_scale * np.asarray(w_scales, np.float64)).astype(np.float32)
    rng = np.random.default_rng(seed)
    b = rng.integers(-300, 300, n).astype(np.int32)
    if big:  # the int32 accumulator wraps
        b[::2] = np.int32(2 ** 31 - 7)
        b[1::2] = np.int32(-(2 ** 31) + 3)
    return b, (s, np.zeros(len(s), np.int64), 0)


def conv_model(x_shape, o, kh, kw, stride=1, dilation=1, padding="SAME", act="NONE", qx=(0.05, 3), qy=(0.08, -2),
               per_channel=True, big_bias=False, seed=1):
    n, h, w, c = x_shape
    q, wq = q8_filter(o, kh, kw, c, 0, seed, per_channel)
    b, bq = q8_bias(o, np.broadcast_to(wq[0], (o,)), qx[0], seed + 1, big_bias)
    oh = -(-h // stride) if padding == "SAME" else (h - (kh - 1) * dilation - 1) // stride + 1
    ow = -(-w // stride) if padding == "SAME" else (w - (kw - 1) * dilation - 1) // stride + 1
    return single_op_model("CONV_2D", [In(x_shape, I8, qx), Const(q, wq), Const(b, bq)], [Out((n, oh, ow, o), I8, qy)],
                           version=3, padding=padding, stride_h=stride, stride_w=stride, dilation_h_factor=dilation,
                           dilation_w_factor=dilation, fused_activation_function=act)


def dw_model(x_shape, k, stride=1, dilation=1, padding="SAME", mult=1, act="NONE", qx=(0.05, 3), qy=(0.08, -2),
             seed=3):
    n, h, w, c = x_shape
    o = c * mult
    q, wq = q8_filter(1, k, k, o, 3, seed)
    b, bq = q8_bias(o, wq[0], qx[0], seed + 1)
    oh = -(-h // stride) if padding == "SAME" else (h - (k - 1) * dilation - 1) // stride + 1
    ow = -(-w // stride) if padding == "SAME" else (w - (k - 1) * dilation - 1) // stride + 1
    return single_op_model("DEPTHWISE_CONV_2D", [In(x_shape, I8, qx), Const(q, wq), Const(b, bq)],
                           [Out((n, oh, ow, o), I8, qy)], version=3, padding=padding, stride_h=stride, stride_w=stride,
                           dilation_h_factor=dilation, dilation_w_factor=dilation, depth_multiplier=mult,
                           fused_activation_function=act)


def fc_model(batch, k, units, act="NONE", per_channel=True, bias=True, qx=(0.05, 3), qy=(0.08, -2), seed=5):
    q, wq = q8_filter(units, 1, 1, k, 0, seed, per_channel)
    q = q.reshape(units, k)
    b, bq = q8_bias(units, np.broadcast_to(wq[0], (units,)), qx[0], seed + 1)
    return single_op_model("FULLY_CONNECTED", [In((batch, k), I8, qx), Const(q, wq), Const(b, bq) if bias else None],
                           [Out((batch, units), I8, qy)], version=4, fused_activation_function=act)
