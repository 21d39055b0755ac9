"""LSTM's basic kernel (kernel_type BASIC, 5 inputs, 4 outputs): float32, or uint8 activations
and weights with an int16 state of 4 integer bits.

Mirrors tflite/kernels/lstm.cc (basic::Prepare / Eval) and optimized_ops::LstmCell /
LstmCell<4> (the quantized cell's scalar path on x86: a uint8 fully connected layer into Q3.12,
gemmlowp logistic / tanh, the state in Q4.11).
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.common import scale_zp
from acelera.core.kernels.lstm_fixedpoint import checked_log2, lookup, rdbpot, srdhm16, srdhm32, srmpot16, table, wrap32
from acelera.core.kernels.lstm_float import sigmoid
from acelera.core.kernels.registry import NodeContext
from acelera.core.quant import quantize_multiplier, wrap_int32

_BASIC_QUANT_TYPES = ("UINT8", "UINT8", "UINT8", "INT32", "INT16", "UINT8", "INT16", "UINT8", "INT16")


def basic_lstm(node: NodeContext):
    """The 5-input basic LSTM cell (kernel_type BASIC, version 2): float32, or quantized (uint8
    activations and weights, int32 bias, int16 state with 4 integer bits)."""
    if len(node.inputs) != 5 or len(node.outputs) != 4:
        raise node.unsupported("the basic LSTM kernel expects 5 inputs and 4 outputs")
    x, prev_a, w, b, prev_s = node.inputs
    if x is None or prev_a is None or w is None or b is None or prev_s is None:
        raise node.unsupported("the basic LSTM kernel has no optional inputs")
    types = tuple(t.type_name for t in (x, prev_a, w, b, prev_s, *node.outputs))
    quantized = types == _BASIC_QUANT_TYPES
    if not quantized and any(t != "FLOAT32" for t in types):
        raise node.unsupported("the basic LSTM kernel takes all float32 tensors, or uint8 input/activation/"
                               "weights, int32 bias and int16 state")
    if len(x.shape) != 2 or len(prev_a.shape) != 2 or len(prev_s.shape) != 2:
        raise node.unsupported("input, activation and state must be 2-D")
    nb, depth = x.shape[0], prev_a.shape[1]
    total = x.shape[1] + depth
    if (prev_a.shape[0] != nb or tuple(w.shape) != (4 * depth, total) or tuple(b.shape) != (4 * depth,)
            or tuple(prev_s.shape) != (nb, depth)):
        raise node.unsupported("inconsistent basic LSTM shapes")
    write_back = (prev_a.is_variable, prev_s.is_variable)
    if quantized:
        return _basic_lstm_quantized(node, depth, write_back)

    def run(x, prev_a, w, b, prev_s):
        concat = np.concatenate([np.asarray(x, np.float32), np.asarray(prev_a, np.float32)], axis=1)
        act = concat @ np.asarray(w, np.float32).T + np.asarray(b, np.float32)
        i = sigmoid(act[:, :depth])
        g = np.tanh(act[:, depth:2 * depth])
        f = sigmoid(act[:, 2 * depth:3 * depth])
        o = sigmoid(act[:, 3 * depth:])
        state = (i * g + f * prev_s).astype(np.float32)
        activ = (o * np.tanh(state)).astype(np.float32)
        # LiteRT copies the results back into the previous activation/state tensors.
        if write_back[0]:
            prev_a[...] = activ
        if write_back[1]:
            prev_s[...] = state
        return activ, state, concat, act.astype(np.float32, copy=False)
    return run



def _gemm_multiplier(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """The int16-output GEMM's multiplier stage (cpu_backend_gemm on x86): the rounding
    doubling high multiply, then a rounding right shift whose ties go up (not away from zero)."""
    x = wrap32(x << max(shift, 0))
    t = srdhm32(x, multiplier)
    e = max(-shift, 0)
    return (t + (1 << (e - 1))) >> e if e else t


def _basic_lstm_quantized(node: NodeContext, depth: int, write_back: tuple[bool, bool]):
    """optimized_ops::LstmCell<4> (its scalar path on x86): a uint8 fully connected layer into
    Q3.12, gemmlowp logistic / tanh, the state in Q4.11, the output back to uint8."""
    state_out = node.outputs[1]
    ok, log2 = checked_log2(scale_zp(state_out)[0])
    if not ok or 15 + log2 != 4:
        raise node.unsupported("the quantized basic LSTM needs a state scale of 2^-11 (4 integer bits)")
    w_t, b_t = node.input(2), node.input(3)
    assert w_t is not None and b_t is not None  # basic_lstm refused missing inputs
    w_zp = scale_zp(w_t)[1]
    accum = quantize_multiplier(4096 * float(np.float32(scale_zp(b_t)[0])))
    sigmoid, tanh3 = table("logistic", 3), table("tanh", 3)

    def run(x, prev_a, w, b, prev_s):
        concat = np.concatenate([np.asarray(x), np.asarray(prev_a)], axis=1)
        fc = wrap_int32((concat.astype(np.int64) - 128) @ (np.asarray(w, np.int64) - w_zp).T + np.asarray(b, np.int64))
        act = np.clip(_gemm_multiplier(fc, *accum), -32768, 32767)
        i = lookup(act[:, :depth], sigmoid)
        g = lookup(act[:, depth:2 * depth], tanh3)
        f = lookup(act[:, 2 * depth:3 * depth], sigmoid)
        o = lookup(act[:, 3 * depth:], sigmoid)
        state = np.clip(rdbpot(srdhm16(i, g), 4) + srdhm16(f, np.asarray(prev_s, np.int64)), -32768, 32767)
        out = srdhm16(o, lookup(srmpot16(state, 1), tanh3))
        activ = (np.clip(rdbpot(out, 8), -128, 127) + 128).astype(np.uint8)
        state = state.astype(np.int16)
        if write_back[0]:
            prev_a[...] = activ
        if write_back[1]:
            prev_s[...] = state
        return activ, state, concat.astype(np.uint8), act.astype(np.int16)
    return run
