"""LSTM (full and basic kernels), UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM:
float32, hybrid (int8 / uint8 weights on float32 activations) and full-integer.

Follows tflite/kernels/lstm.cc, unidirectional_sequence_lstm.cc, bidirectional_sequence_lstm.cc
and lstm_eval.cc (EvalFloat / LstmStepFloat, EvalHybrid / LstmStepHybrid, EvalInteger8x8_16 /
LstmStepInteger8x8_16), internal/reference/portable_tensor_utils.cc (ApplyLayerNorm,
ApplySigmoid, ApplyTanh, CwiseMul, ...), gemmlowp's fixedpoint.h and, for the basic cell,
optimized_ops::LstmCell. Gates i (absent with CIFG), f, g (cell), o; optional peephole (i and f
see the previous cell state, o the new one), layer normalization, cell_clip, projection with bias
and proj_clip; sequence LSTMs may have diagonal (1-D) recurrent weights (version 4).

- Float: _FullLstm (LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM) and _FloatOrHybridCell (the
  bidirectional op, with its aux input). With a NONE cell activation ApplyActivationToVector
  writes nothing, so the cell gate keeps whatever its scratch buffer holds (which depends on the
  products that ran: all-zero input blocks are skipped) and the output uses the cell gate
  instead of the cell state.
- Hybrid: the float step with LiteRT's per-row activation quantization and int8 dot products
  (the arithmetic of rnn.py); peephole weights are int8 times their scale.
- Integer (8x8_16, 5 intermediate tensors): int8 activations, int16 gates and cell state (a
  power-of-two scale), gemmlowp's int16 logistic / tanh (as lookup tables), the integer layer
  norm. Reproduced: the peephole loop walks n_output (not n_cell) values per block; with a cell
  scale below 2^-15 ApplyTanh writes nothing and the hidden state uses the input gate.
- Basic cell (5 inputs): float32, or uint8 / int16 with 4 state integer bits.

The output_state and cell_state inputs are graph variables: the kernel reads the stored arrays
and writes the new state into them in place (the one in-place write kernels may do).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acelera.core.kernels.common import NONE, RELU, RELU6, RELU_N1_TO_1, SIGN_BIT, TANH, check_type, scale_zp
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.kernels.rnn import Cached, QuantWeights, fused_activation, hybrid_accumulate, quantize_rows
from acelera.core.model import Tensor
from acelera.core.quant import multiply_by_quantized_multiplier, quantize_multiplier, round_half_away, wrap_int32

# Input tensor indices of the full kernel (tflite/kernels/lstm_shared.h).
INPUT = 0
I2I, I2F, I2C, I2O = 1, 2, 3, 4
R2I, R2F, R2C, R2O = 5, 6, 7, 8
C2I, C2F, C2O = 9, 10, 11
BI, BF, BC, BO = 12, 13, 14, 15
PROJ_W, PROJ_B = 16, 17
OUT_STATE, CELL_STATE = 18, 19
LN_I, LN_F, LN_C, LN_O = 20, 21, 22, 23

SIGMOID = 6  # kTfLiteActSigmoid: a fused activation only the LSTMs take


def activation_and_clips(node: NodeContext) -> tuple[int, np.float32, np.float32]:
    """The options every LSTM kernel variant reads: fused activation, cell and projection clips."""
    opts = node.options
    cell_clip = np.float32(opts.get("cell_clip", 0.0))
    proj_clip = np.float32(opts.get("proj_clip", 0.0))
    if not (cell_clip >= 0 and proj_clip >= 0):
        raise node.unsupported("cell_clip and proj_clip must be >= 0")
    return fused_activation(opts), cell_clip, proj_clip


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32, copy=False)


def _activation(x: np.ndarray, act: int) -> np.ndarray:
    if act == RELU:
        return np.maximum(x, np.float32(0))
    if act == RELU_N1_TO_1:
        return np.clip(x, np.float32(-1), np.float32(1))
    if act == RELU6:
        return np.clip(x, np.float32(0), np.float32(6))
    if act == TANH:
        return np.tanh(x)
    if act == SIGN_BIT:
        return np.signbit(x).astype(np.float32)
    if act == SIGMOID:
        return _sigmoid(x)
    return x


def _sigmoid_(x: np.ndarray) -> np.ndarray:
    """In-place logistic."""
    with np.errstate(over="ignore"):
        np.negative(x, out=x)
        np.exp(x, out=x)
        x += np.float32(1)
        np.reciprocal(x, out=x)
    return x


def _activation_(x: np.ndarray, act: int) -> np.ndarray:
    """In-place activation (act != NONE)."""
    if act == TANH:
        return np.tanh(x, out=x)
    if act == RELU:
        return np.maximum(x, np.float32(0), out=x)
    if act == RELU6:
        return np.clip(x, np.float32(0), np.float32(6), out=x)
    if act == RELU_N1_TO_1:
        return np.clip(x, np.float32(-1), np.float32(1), out=x)
    if act == SIGMOID:
        return _sigmoid_(x)
    x[...] = np.signbit(x)
    return x


def _layer_norm(x: np.ndarray, coef: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """tensor_utils::MeanStddevNormalization, times the coefficients, plus the bias."""
    mean = np.mean(x, axis=-1, keepdims=True, dtype=np.float32)
    diff = x - mean
    var = np.mean(diff * diff, axis=-1, keepdims=True, dtype=np.float32)
    inv = np.float32(1) / np.sqrt(var + np.float32(1e-8))
    return diff * inv * coef + bias


class _Weights:
    """Stacked gate weights, rebuilt only when the weight arrays change (folded constants don't)."""

    def __init__(self, indices: tuple[int, ...], build):
        self.indices = indices
        self.build = build
        self.key: tuple | None = None
        self.arrays: tuple = ()
        self.value = None

    def get(self, args):
        arrays = tuple(args[i] if i < len(args) else None for i in self.indices)
        key = tuple(id(a) for a in arrays)
        if key != self.key or any(a is not b for a, b in zip(arrays, self.arrays)):
            self.value = self.build(arrays)
            self.key, self.arrays = key, arrays
        return self.value


def _f32(a) -> np.ndarray | None:
    return None if a is None else np.asarray(a, np.float32)


class _FullLstm:
    """The float LSTM of lstm_eval::EvalFloat, for both LSTM (full kernel) and the sequence op."""

    def __init__(self, node: NodeContext, sequence: bool):
        self.node = node
        n_in = len(node.inputs)
        if n_in not in (20, 24):
            raise node.unsupported(f"the full LSTM kernel expects 20 or 24 inputs, got {n_in}")
        if len(node.outputs) != 1:
            raise node.unsupported(f"the full LSTM kernel has 1 output, got {len(node.outputs)}")
        inp = node.input(INPUT)
        w_out = node.input(I2O)
        if inp is None or w_out is None:
            raise node.unsupported("missing input or input_to_output_weights")
        if inp.type_name != "FLOAT32":
            raise node.unsupported(f"input type {inp.type_name} is not supported (float32 only)")
        for i in (I2I, I2F, I2C, I2O, R2I, R2F, R2C, R2O, C2I, C2F, C2O, PROJ_W):
            t = node.input(i)
            if t is not None and t.type_name != "FLOAT32":
                raise node.unsupported(f"{t.type_name} weights (hybrid LSTM) are not supported")
        for i in (BI, BF, BC, BO, PROJ_B, LN_I, LN_F, LN_C, LN_O, OUT_STATE, CELL_STATE):
            t = node.input(i)
            if t is not None and t.type_name != "FLOAT32":
                raise node.unsupported(f"input {i} has type {t.type_name}, expected FLOAT32")
        opts = node.options
        self.act, self.cell_clip, self.proj_clip = activation_and_clips(node)
        self.use_ln = n_in == 24 and node.input(LN_F) is not None

        shape = tuple(inp.shape)
        if sequence:
            if len(shape) != 3:
                raise node.unsupported(f"input must be 3-D, got shape {list(shape)}")
            self.time_major = bool(opts.get("time_major", False))
            self.n_time, self.n_batch = (shape[0], shape[1]) if self.time_major else (shape[1], shape[0])
        else:
            if node.options.get("kernel_type", 0) != 0:
                raise node.unsupported("not a full-kernel LSTM")
            if len(shape) != 2:
                raise node.unsupported(f"input must be 2-D, got shape {list(shape)}")
            self.time_major = True
            self.n_time, self.n_batch = 1, shape[0]
        self.sequence = sequence
        n_input = shape[-1]
        if len(w_out.shape) != 2 or w_out.shape[1] != n_input:
            raise node.unsupported("input_to_output_weights must be [n_cell, n_input]")
        n_cell = w_out.shape[0]
        r_out = node.input(R2O)
        if r_out is None:
            raise node.unsupported("missing recurrent_to_output_weights")
        diag = {g: False for g in "ifco"}
        if len(r_out.shape) == 1 and sequence:
            n_output = r_out.shape[0]
        elif len(r_out.shape) == 2:
            n_output = r_out.shape[1]
        else:
            raise node.unsupported("recurrent_to_output_weights must be 2-D")
        if r_out.shape[0] != n_cell:
            raise node.unsupported("recurrent_to_output_weights rows must equal n_cell")
        self.n_input, self.n_cell, self.n_output = n_input, n_cell, n_output

        self.cifg = node.input(I2I) is None
        if self.cifg != (node.input(R2I) is None):
            raise node.unsupported("input gate weights must be all present or all absent (CIFG)")
        gates = "fco" if self.cifg else "ifco"
        self.gates = gates
        w_idx = dict(zip("ifco", (I2I, I2F, I2C, I2O)))
        r_idx = dict(zip("ifco", (R2I, R2F, R2C, R2O)))
        b_idx = dict(zip("ifco", (BI, BF, BC, BO)))
        ln_idx = dict(zip("ifco", (LN_I, LN_F, LN_C, LN_O)))
        for g in gates:
            w = node.input(w_idx[g])
            if w is None or tuple(w.shape) != (n_cell, n_input):
                raise node.unsupported(f"input weights of gate {g} must be [{n_cell}, {n_input}]")
            r = node.input(r_idx[g])
            if r is None:
                raise node.unsupported(f"missing recurrent weights of gate {g}")
            if len(r.shape) == 1 and sequence:
                diag[g] = True
                if r.shape[0] != n_cell:
                    raise node.unsupported(f"diagonal recurrent weights of gate {g} must have {n_cell} entries")
            elif tuple(r.shape) != (n_cell, n_output):
                raise node.unsupported(f"recurrent weights of gate {g} must be [{n_cell}, {n_output}]")
            b = node.input(b_idx[g])
            if b is None or tuple(b.shape) != (n_cell,):
                raise node.unsupported(f"bias of gate {g} must be [{n_cell}]")
            if self.use_ln:
                ln = node.input(ln_idx[g])
                if ln is None or tuple(ln.shape) != (n_cell,):
                    raise node.unsupported(f"layer norm coefficients of gate {g} must be [{n_cell}]")
        if self.cifg and node.input(BI) is not None:
            raise node.unsupported("CIFG LSTM must not have an input gate bias")
        if any(diag.values()) and n_output != n_cell:
            raise node.unsupported("diagonal recurrent weights need n_output == n_cell")
        self.diag = diag
        peep = [node.input(i) for i in (C2I, C2F, C2O)]
        present = [p is not None for p in peep]
        if present[1] or present[2] or (present[0] and not self.cifg):
            if not (present[1] and present[2] and (present[0] or self.cifg)):
                raise node.unsupported("peephole weights must be all present or all absent")
        elif present[0]:
            raise node.unsupported("peephole weights must be all present or all absent")
        for p in peep:
            if p is not None and tuple(p.shape) != (n_cell,):
                raise node.unsupported(f"peephole weights must be [{n_cell}]")
        self.peephole = present[1]
        pw, pb = node.input(PROJ_W), node.input(PROJ_B)
        if pw is not None and tuple(pw.shape) != (n_output, n_cell):
            raise node.unsupported(f"projection weights must be [{n_output}, {n_cell}]")
        if pb is not None and (pw is None or tuple(pb.shape) != (n_output,)):
            raise node.unsupported("projection bias needs projection weights and must be [n_output]")
        if pw is None and n_output != n_cell:
            raise node.unsupported("without projection n_output must equal n_cell")
        self.use_proj = pw is not None
        for idx, n in ((OUT_STATE, n_output), (CELL_STATE, n_cell)):
            t = node.input(idx)
            if t is None:
                raise node.unsupported(f"missing state tensor {idx}")
            if int(np.prod(t.shape, dtype=np.int64)) != self.n_batch * n:
                raise node.unsupported(f"state tensor {idx} must hold {self.n_batch * n} values")
        out = node.outputs[0]
        if out.type_name != "FLOAT32":
            raise node.unsupported(f"output type {out.type_name} is not supported")
        if sequence:
            self.out_shape = shape[:-1] + (n_output,)
        else:
            self.out_shape = (self.n_batch, n_output)

        # Stacked weights [n_input, G*n_cell], recurrent [n_output, G'*n_cell] for non-diagonal
        # gates, diagonal vectors, biases, layer norm, peephole, projection.
        self.w_in = _Weights(tuple(w_idx[g] for g in gates),
                             lambda a: np.ascontiguousarray(np.concatenate([_f32(w) for w in a], 0).T))
        full_gates = [g for g in gates if not diag[g]]
        self.full_gates = full_gates
        self.w_rec = _Weights(tuple(r_idx[g] for g in full_gates),
                              lambda a: np.ascontiguousarray(np.concatenate([_f32(w) for w in a], 0).T)
                              if a else None)
        self.diag_idx = {g: r_idx[g] for g in gates if diag[g]}
        self.b_idx = {g: b_idx[g] for g in gates}
        self.ln_idx = {g: ln_idx[g] for g in gates}
        self.peep_idx = dict(zip("ifo", (C2I, C2F, C2O)))

        # Fast path (no layer norm, peephole, diagonal weights or NONE activation): gates laid
        # out [i, f, o, c] so the sigmoid gates are one block.
        self.fast = not (self.use_ln or self.peephole or any(diag.values()) or self.act == NONE)
        if self.fast:
            order = [g for g in "ifoc" if g in gates]
            self.fast_params = _Weights(
                tuple(w_idx[g] for g in order) + tuple(r_idx[g] for g in order)
                + tuple(b_idx[g] for g in order) + (PROJ_W, PROJ_B), self._build_fast)

    def _build_fast(self, arrays):
        k = len(self.gates)
        w, r, b = arrays[:k], arrays[k:2 * k], arrays[2 * k:3 * k]
        pw, pb = arrays[3 * k:]
        w_in = np.ascontiguousarray(np.concatenate([_f32(a) for a in w], 0).T)
        w_rec = np.ascontiguousarray(np.concatenate([_f32(a) for a in r], 0).T)
        bias = np.concatenate([_f32(a) for a in b])
        proj = None
        if self.use_proj:
            proj = (np.ascontiguousarray(_f32(pw).T), None if pb is None else _f32(pb))
        return w_in, w_rec, bias, proj

    def _run_fast(self, args, xs, h, c, out):
        w_in, w_rec, bias, proj = self.fast_params.get(args)
        nt, nb, nc = self.n_time, self.n_batch, self.n_cell
        G = len(self.gates)
        S = (G - 1) * nc
        xw = xs.reshape(nt * nb, -1) @ w_in
        xw += bias
        xw = xw.reshape(nt, nb, G * nc)
        act, clip, pclip, cifg = self.act, self.cell_clip, self.proj_clip, self.cifg
        for t in range(nt):
            pre = h @ w_rec
            pre += xw[t]
            _sigmoid_(pre[:, :S])
            g = _activation_(pre[:, S:], act)
            if cifg:
                f, o = pre[:, :nc], pre[:, nc:2 * nc]
                c = f * c
                g *= np.float32(1) - f
            else:
                i, f, o = pre[:, :nc], pre[:, nc:2 * nc], pre[:, 2 * nc:3 * nc]
                c = f * c
                g *= i
            c += g
            if clip > 0:
                np.clip(c, -clip, clip, out=c)
            hc = _activation_(c.copy(), act)
            hc *= o
            if proj is not None:
                hc = hc @ proj[0]
                if proj[1] is not None:
                    hc += proj[1]
                if pclip > 0:
                    np.clip(hc, -pclip, pclip, out=hc)
            h = hc
            out[t] = h
        return h, c

    def __call__(self, *args):
        x = np.asarray(args[INPUT], np.float32)
        h_state, c_state = args[OUT_STATE], args[CELL_STATE]
        nb, nt, nc, no = self.n_batch, self.n_time, self.n_cell, self.n_output
        xs = x.reshape(nt, nb, -1) if self.time_major else x.reshape(nb, nt, -1).transpose(1, 0, 2)
        h = np.array(h_state, np.float32).reshape(nb, no)
        c = np.array(c_state, np.float32).reshape(nb, nc)
        out = np.empty((nt, nb, no), np.float32)
        if self.fast:
            h, c = self._run_fast(args, xs, h, c, out)
        else:
            h, c = self._run_general(args, xs, h, c, out)
        # The one allowed in-place write: the variable state tensors.
        h_state[...] = h.reshape(h_state.shape)
        c_state[...] = c.reshape(c_state.shape)
        if self.time_major:
            return out.reshape(self.out_shape)
        return np.ascontiguousarray(out.transpose(1, 0, 2)).reshape(self.out_shape)

    def _run_general(self, args, xs, h, c, out):
        nb, nt, nc = self.n_batch, self.n_time, self.n_cell
        gates = self.gates
        G = len(gates)
        # Input contributions of every step in one matmul: [T, B, G*n_cell].
        xw = (xs.reshape(nt * nb, -1) @ self.w_in.get(args)).reshape(nt, nb, G, nc)
        w_rec = self.w_rec.get(args)
        rec_pos = {g: k for k, g in enumerate(self.full_gates)}
        diag_w = {g: _f32(args[i]) for g, i in self.diag_idx.items()}
        bias = {g: _f32(args[self.b_idx[g]]) for g in gates}
        ln = {g: _f32(args[self.ln_idx[g]]) for g in gates} if self.use_ln else None
        peep = {g: _f32(args[i]) for g, i in self.peep_idx.items()
                if self.peephole and i < len(args) and args[i] is not None}
        proj_w = _f32(args[PROJ_W]) if self.use_proj else None
        proj_b = _f32(args[PROJ_B]) if self.use_proj and args[PROJ_B] is not None else None
        gi = {g: k for k, g in enumerate(gates)}
        if self.act == NONE:
            if self.time_major:  # IsZeroVector over the whole step
                nonzero = np.any(xs.reshape(nt, -1) != 0, axis=1)[:, None, None]
            else:  # batch-major steps one batch row at a time
                nonzero = np.any(xs != 0, axis=2)[:, :, None]
        for t in range(nt):
            rec = (h @ w_rec).reshape(nb, len(self.full_gates), nc) if w_rec is not None else None
            pre = {}
            for g in gates:
                v = xw[t, :, gi[g]]
                v = v + (h * diag_w[g] if g in diag_w else rec[:, rec_pos[g]])
                if g in ("i", "f") and g in peep:
                    v = v + c * peep[g]
                pre[g] = v
            val = {}
            for g in ("i", "f", "c"):
                if g not in pre:
                    continue
                v = _layer_norm(pre[g], ln[g], bias[g]) if self.use_ln else pre[g] + bias[g]
                val[g] = _sigmoid(v) if g != "c" else _activation(v, self.act)
            if self.act == NONE:
                init = np.zeros_like(val["c"]) if self.use_ln else np.broadcast_to(bias["c"], val["c"].shape)
                val["c"] = np.where(nonzero[t] != self.diag["c"], val["c"], init)
            f = val["f"]
            inp_gate = (np.float32(1) - f) if self.cifg else val["i"]
            c = f * c + val["c"] * inp_gate
            if self.cell_clip > 0:
                c = np.clip(c, -self.cell_clip, self.cell_clip)
            vo = pre["o"] + c * peep["o"] if "o" in peep else pre["o"]
            vo = _layer_norm(vo, ln["o"], bias["o"]) if self.use_ln else vo + bias["o"]
            o = _sigmoid(vo)
            hc = o * (val["c"] if self.act == NONE else _activation(c, self.act))
            if self.use_proj:
                hc = hc @ proj_w.T
                if proj_b is not None:
                    hc = hc + proj_b
                if self.proj_clip > 0:
                    hc = np.clip(hc, -self.proj_clip, self.proj_clip)
            h = hc.astype(np.float32, copy=False)
            out[t] = h
        return h, c


_BASIC_QUANT_TYPES = ("UINT8", "UINT8", "UINT8", "INT32", "INT16", "UINT8", "INT16", "UINT8", "INT16")


def _basic_lstm(node: NodeContext):
    """The 5-input basic LSTM cell (kernel_type BASIC, version 2): float32, or quantized (uint8
    activations and weights, int32 bias, int16 state with 4 integer bits)."""
    if len(node.inputs) != 5 or len(node.outputs) != 4:
        raise node.unsupported("the basic LSTM kernel expects 5 inputs and 4 outputs")
    x, prev_a, w, b, prev_s = node.inputs
    if any(t is None for t in node.inputs):
        raise node.unsupported("the basic LSTM kernel has no optional inputs")
    types = tuple(t.type_name for t in (*node.inputs, *node.outputs))
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
        i = _sigmoid(act[:, :depth])
        g = np.tanh(act[:, depth:2 * depth])
        f = _sigmoid(act[:, 2 * depth:3 * depth])
        o = _sigmoid(act[:, 3 * depth:])
        state = (i * g + f * prev_s).astype(np.float32)
        activ = (o * np.tanh(state)).astype(np.float32)
        # LiteRT copies the results back into the previous activation/state tensors.
        if write_back[0]:
            prev_a[...] = activ
        if write_back[1]:
            prev_s[...] = state
        return activ, state, concat, act.astype(np.float32, copy=False)
    return run



# --- gemmlowp int16 fixed point: the integer LSTM's sigmoid and tanh, as lookup tables ---------
# Raw FixedPoint<int16_t, k> values are held in int64 arrays; C++ int16 arithmetic wraps.

def _wrap16(x: np.ndarray) -> np.ndarray:
    return ((x + 32768) & 0xFFFF) - 32768


def _trunc_div(x: np.ndarray, d) -> np.ndarray:
    """C++ integer division (truncates toward zero) of int64 values."""
    q = np.abs(x) // d
    return np.where(x < 0, -q, q)


def _srdhm16(a: np.ndarray, b) -> np.ndarray:
    ab = a * b
    r = _trunc_div(ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14)), 1 << 15)
    return np.where((a == -32768) & (b == -32768), 32767, _wrap16(r))


def _rdbpot(x: np.ndarray, e: int) -> np.ndarray:
    if e == 0:
        return x
    mask = (1 << e) - 1
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0))


def _srmpot16(x: np.ndarray, e: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT<e> on int16 raw values."""
    if e <= 0:
        return _rdbpot(x, -e)
    threshold = (1 << (15 - e)) - 1
    return np.where(x > threshold, 32767, np.where(x < -threshold, -32768, _wrap16(x << e)))


def _c16(value: int) -> int:
    """A gemmlowp constant given as a 32-bit raw value, in 16 bits (RescaleConstantInitializer)."""
    return int(_rdbpot(np.int64(value), 16))


def _exp_on_quarter_interval(a: np.ndarray) -> np.ndarray:
    """exp(x) for F0 x in [-1/4, 0)."""
    const, third = _c16(1895147668), _c16(715827883)
    x = _wrap16(a + (1 << 12))
    x2 = _srdhm16(x, x)
    x3 = _srdhm16(x2, x)
    x4 = _srdhm16(x2, x2)
    poly = _srmpot16(_wrap16(_srdhm16(_wrap16(_srmpot16(x4, -2) + x3), third) + x2), -1)
    return np.clip(const + _srdhm16(np.int64(const), _wrap16(x + poly)), -32768, 32767)


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
               (3, 720401), (4, 242))


def _exp_on_negative_values(a: np.ndarray, int_bits: int) -> np.ndarray:
    frac = 15 - int_bits
    quarter = 1 << (frac - 2)
    a_mod = _wrap16((a & (quarter - 1)) - quarter)
    result = _exp_on_quarter_interval(_srmpot16(a_mod, int_bits))
    remainder = _wrap16(a_mod - a)
    for exponent, multiplier in _EXP_BARREL:
        if int_bits > exponent:
            bit = int(_wrap16(np.int64(1 << (frac + exponent))))
            result = np.where((remainder & bit) != 0, _srdhm16(result, _c16(multiplier)), result)
    if int_bits > 5:
        result = np.where(a < _c16(-(1 << (36 - int_bits))), 0, result)
    return np.where(a == 0, 32767, result)


def _newton_reciprocal(a: np.ndarray) -> np.ndarray:
    """The F2 Newton-Raphson iterate for 1 / (1 + a) of F0 a in (0, 1)."""
    s = a + 32767
    s = s + np.where(s >= 0, 1, -1)
    half = _wrap16(_trunc_div(s, 2))
    x = _wrap16(_c16(1515870810) + _srdhm16(half, _c16(-1010580540)))
    for _ in range(3):
        one_minus = _wrap16((1 << 13) - _srdhm16(half, x))
        x = _wrap16(x + _srmpot16(_srdhm16(x, one_minus), 2))
    return x


def _tanh16(a: np.ndarray, int_bits: int) -> np.ndarray:
    neg = a < 0
    n = np.where(neg, a, _wrap16(-a))
    t = _srmpot16(_wrap16(_newton_reciprocal(_exp_on_negative_values(n, int_bits + 1)) - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(neg, _wrap16(-t), t))


def _logistic16(a: np.ndarray, int_bits: int) -> np.ndarray:
    pos = a > 0
    absolute = np.where(pos, a, _wrap16(-a))
    r = _srmpot16(_newton_reciprocal(_exp_on_negative_values(_wrap16(-absolute), int_bits)), 1)
    return np.where(a == 0, _c16(1 << 30), np.where(pos, r, _wrap16(32767 - r)))


_TABLES: dict[tuple[str, int], np.ndarray] = {}


def _table(kind: str, int_bits: int) -> np.ndarray:
    """gemmlowp logistic / tanh of FixedPoint<int16, int_bits> over all int16 raw values."""
    key = (kind, int_bits)
    if key not in _TABLES:
        a = np.arange(-32768, 32768, dtype=np.int64)
        fn = _logistic16 if kind == "logistic" else _tanh16
        _TABLES[key] = fn(a, int_bits).astype(np.int64)
    return _TABLES[key]


def _lookup(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    return table[x + 32768]


# --- int32 fixed point for the integer layer norm ------------------------------------------------

def _wrap32(x):
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _srdhm32(a, b):
    ab = a * b
    r = _trunc_div(ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30)), 1 << 31)
    return np.where((a == -(1 << 31)) & (b == -(1 << 31)), (1 << 31) - 1, r)


def _srmpot32(x, e: int):
    if e <= 0:
        return _rdbpot(x, -e)
    threshold = (1 << (31 - e)) - 1
    return np.where(x > threshold, (1 << 31) - 1, np.where(x < -threshold, -(1 << 31), _wrap32(x << e)))


def _inv_sqrt_multiplier(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetInvSqrtQuantizedMultiplierExp(v, reverse_shift=-1) per element of int64 v."""
    v = np.array(v, np.int64)
    small = v <= 1
    v = np.where(small, 2, v)
    shift = np.full(v.shape, 11, np.int64)
    while np.any(v >= 1 << 29):
        big = v >= 1 << 29
        v = np.where(big, v // 4, v)
        shift += big
    clz = 32 - np.frexp(v.astype(np.float64))[1].astype(np.int64)
    pairs = (clz - 1) // 2 - 1
    shift -= pairs
    v = v << (2 * pairs)
    half_input = _rdbpot(v >> 1, 1)
    x = np.full(v.shape, 1 << 28, np.int64)
    for _ in range(5):
        x3 = _srmpot32(_srdhm32(_srdhm32(x, x), x), 6)
        x = _srmpot32(_wrap32(_srdhm32((1 << 28) + (1 << 27), x) - _srdhm32(half_input, x3)), 3)
    x = _srdhm32(x, 1518500250)
    x = np.where(shift < 0, _wrap32(x << np.maximum(-shift, 0)), x)
    shift = np.maximum(shift, 0)
    return np.where(small, (1 << 31) - 1, x), np.where(small, 0, -shift)


def _layer_norm_int(x: np.ndarray, weights: np.ndarray, bias: np.ndarray, multiplier: int, shift: int,
                    guard: int) -> np.ndarray:
    """PortableApplyLayerNorm on int16 rows [rows, n]."""
    n = x.shape[1]
    mean = _trunc_div(x.sum(axis=1) * 1024, n)
    variance = (x * x).sum(axis=1) * ((1 << 20) // n) - mean * mean
    variance = _trunc_div(variance, 1 << 20)
    inv, inv_shift = _inv_sqrt_multiplier(np.where(variance < 1, guard, variance))
    rescaled = multiply_by_quantized_multiplier(_wrap32(1024 * x - mean[:, None]), inv[:, None], inv_shift[:, None])
    v = _wrap32(_wrap32(rescaled * weights) + bias)
    v = _trunc_div(np.where(v > 0, v + 512, v - 512), 1024)
    return np.clip(multiply_by_quantized_multiplier(v, multiplier, shift + 12), -32768, 32767)


def _checked_log2(x: float) -> tuple[bool, int]:
    """CheckedLog2 in float32."""
    with np.errstate(all="ignore"):
        log2 = np.float32(np.log(np.float32(x)) * (np.float32(1) / np.log(np.float32(2))))
        rounded = np.float32(round_half_away(np.array(log2)))
    if not np.isfinite(rounded):
        return False, 0
    return bool(abs(np.float32(log2 - rounded)) < np.float32(1e-3)), int(rounded)


# --- one LSTM direction: validated layout, then float, hybrid or integer arithmetic ---------------

@dataclass(frozen=True)
class _Layout:
    """Input indices of one direction's tensors (gates in the order i, f, c, o)."""

    w: tuple[int, ...]
    r: tuple[int, ...]
    peep: tuple[int, ...]  # i, f, o
    b: tuple[int, ...]
    proj_w: int
    proj_b: int
    h: int
    c: int
    ln: tuple[int, ...] | None = None
    aux_w: tuple[int, ...] | None = None


SEQ_LAYOUT = _Layout((I2I, I2F, I2C, I2O), (R2I, R2F, R2C, R2O), (C2I, C2F, C2O), (BI, BF, BC, BO),
                     PROJ_W, PROJ_B, OUT_STATE, CELL_STATE, (LN_I, LN_F, LN_C, LN_O))
BIDI_FW = _Layout((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15), 16, 17, 35, 36, None,
                  (40, 41, 42, 43))
BIDI_BW = _Layout((18, 19, 20, 21), (22, 23, 24, 25), (26, 27, 28), (29, 30, 31, 32), 33, 34, 37, 38, None,
                  (44, 45, 46, 47))
GATES = "ifco"


class _Spec:
    """One direction's shapes, types and options, checked as LiteRT's Prepare does.

    mode is "float", "hybrid" (int8/uint8 weights, float activations) or "integer" (int8
    activations, the 8x8_16 kernel)."""

    def __init__(self, node: NodeContext, layout: _Layout, mode: str, n_input: int, n_batch: int,
                 *, sequence: bool, use_ln: bool, aux_size: int | None = None):
        self.layout, self.mode = layout, mode
        opts = node.options
        self.act, self.cell_clip, self.proj_clip = activation_and_clips(node)
        self.asymmetric = bool(opts.get("asymmetric_quantize_inputs", False))
        w_o = node.input(layout.w[3])
        r_o = node.input(layout.r[3])
        if w_o is None or r_o is None:
            raise node.unsupported("missing input_to_output or recurrent_to_output weights")
        if len(w_o.shape) != 2 or w_o.shape[1] != n_input:
            raise node.unsupported(f"input_to_output_weights must be [n_cell, {n_input}]")
        n_cell = w_o.shape[0]
        wtype = {"float": ("FLOAT32",), "hybrid": ("INT8", "UINT8"), "integer": ("INT8",)}[mode]
        self.cifg = node.input(layout.w[0]) is None
        if self.cifg != (node.input(layout.r[0]) is None):
            raise node.unsupported("input gate weights must be all present or all absent (CIFG)")
        self.gates = GATES[1:] if self.cifg else GATES
        self.diag: dict[str, bool] = {}
        n_output = None
        for g in self.gates:
            k = GATES.index(g)
            w, r = node.input(layout.w[k]), node.input(layout.r[k])
            if w is None or r is None:
                raise node.unsupported(f"missing weights of gate {g}")
            if tuple(w.shape) != (n_cell, n_input):
                raise node.unsupported(f"input weights of gate {g} must be [{n_cell}, {n_input}]")
            check_type(node, w, wtype, f"gate {g} input weights")
            if w.type != w_o.type:
                raise node.unsupported("all weights must have the same type")
            if w.sparsity is not None or r.sparsity is not None:
                raise node.unsupported("sparse LSTM weights are not supported")
            diag = len(r.shape) == 1
            if diag and not (sequence and mode != "integer"):
                raise node.unsupported("diagonal recurrent weights need a float or hybrid sequence LSTM")
            if diag:
                check_type(node, r, ("FLOAT32",), f"gate {g} diagonal recurrent weights")
                if r.shape[0] != n_cell:
                    raise node.unsupported(f"diagonal recurrent weights of gate {g} must have {n_cell} entries")
            else:
                if len(r.shape) != 2 or r.shape[0] != n_cell:
                    raise node.unsupported(f"recurrent weights of gate {g} must be [{n_cell}, n_output]")
                if r.type != w_o.type:
                    raise node.unsupported("all weights must have the same type")
            self.diag[g] = diag
        r_out = node.input(layout.r[3])
        n_output = r_out.shape[0] if self.diag["o"] else r_out.shape[1]
        for g in self.gates:
            r = node.input(layout.r[GATES.index(g)])
            if not self.diag[g] and r.shape[1] != n_output:
                raise node.unsupported(f"recurrent weights of gate {g} must be [{n_cell}, {n_output}]")
        if any(self.diag.values()) and n_output != n_cell:
            raise node.unsupported("diagonal recurrent weights need n_output == n_cell")
        self.n_cell, self.n_output, self.n_input = n_cell, n_output, n_input
        peep = [node.input(i) for i in layout.peep]
        has = [p is not None for p in peep]
        if not ((has[0] or self.cifg) and has[1] and has[2]) and any(has):
            raise node.unsupported("peephole weights must be all present or all absent")
        self.peephole = has[2]
        peep_type = ("INT16",) if mode == "integer" else wtype
        for p in peep:
            if p is not None:
                if tuple(p.shape) != (n_cell,):
                    raise node.unsupported(f"peephole weights must be [{n_cell}]")
                check_type(node, p, peep_type, "peephole weights")
        bias_type = ("INT32",) if mode == "integer" else ("FLOAT32",)
        if self.cifg and node.input(layout.b[0]) is not None:
            raise node.unsupported("CIFG LSTM must not have an input gate bias")
        for g in self.gates:
            b = node.input(layout.b[GATES.index(g)])
            if b is None or tuple(b.shape) != (n_cell,):
                raise node.unsupported(f"bias of gate {g} must be [{n_cell}]")
            check_type(node, b, bias_type, f"gate {g} bias")
        pw, pb = node.input(layout.proj_w), node.input(layout.proj_b)
        if pw is not None:
            if tuple(pw.shape) != (n_output, n_cell):
                raise node.unsupported(f"projection weights must be [{n_output}, {n_cell}]")
            check_type(node, pw, wtype, "projection weights")
        if pb is not None:
            if pw is None or tuple(pb.shape) != (n_output,):
                raise node.unsupported("projection bias needs projection weights and must be [n_output]")
            check_type(node, pb, bias_type, "projection bias")
        if pw is None and n_output != n_cell:
            raise node.unsupported("without projection n_output must equal n_cell")
        self.use_proj = pw is not None
        self.use_ln = use_ln
        if use_ln and mode == "integer" and n_cell == 0:
            raise node.unsupported("the integer layer norm divides by n_cell = 0")
        if use_ln:
            for g in GATES:
                t = node.input(layout.ln[GATES.index(g)])
                if g == "i" and self.cifg:
                    if t is not None:
                        raise node.unsupported("CIFG LSTM must not have input layer norm coefficients")
                    continue
                if t is None or tuple(t.shape) != (n_cell,):
                    raise node.unsupported(f"layer norm coefficients of gate {g} must be [{n_cell}]")
                check_type(node, t, ("INT16",) if mode == "integer" else ("FLOAT32",), "layer norm coefficients")
        self.aux_size = aux_size
        if aux_size is not None:
            for g in self.gates:
                t = node.input(layout.aux_w[GATES.index(g)])
                if t is None or tuple(t.shape) != (n_cell, aux_size):
                    raise node.unsupported(f"aux weights of gate {g} must be [{n_cell}, {aux_size}]")
                if t.type != w_o.type:
                    raise node.unsupported("aux weights must have the type of the other weights")
        state_types = ("INT8", "INT16") if mode == "integer" else ("FLOAT32", "FLOAT32")
        for idx, n, what, dtype in ((layout.h, n_output, "output state", state_types[0]),
                                    (layout.c, n_cell, "cell state", state_types[1])):
            t = node.input(idx)
            if t is None or not t.is_variable:
                raise node.unsupported(f"the {what} must be a variable tensor")
            check_type(node, t, (dtype,), what)
            if int(np.prod(t.shape, dtype=np.int64)) != n_batch * n:
                raise node.unsupported(f"the {what} must hold {n_batch * n} values")

    def tensor(self, node: NodeContext, field: str, g: str = "") -> Tensor | None:
        """The tensor of a _Layout field (of gate g for the per-gate fields)."""
        idx = getattr(self.layout, field)
        if isinstance(idx, tuple):
            idx = idx["ifo".index(g)] if field == "peep" else idx[GATES.index(g)]
        return node.input(idx)


def _args_of(args, indices):
    return tuple(args[i] if i is not None and i < len(args) else None for i in indices)


def _mean_stddev_norm(x: np.ndarray) -> np.ndarray:
    """MeanStddevNormalization (variance + 1e-8) over the last axis, float32."""
    mean = np.mean(x, axis=-1, keepdims=True, dtype=np.float32)
    diff = x - mean
    var = np.mean(diff * diff, axis=-1, keepdims=True, dtype=np.float32)
    return diff * (np.float32(1) / np.sqrt(var + np.float32(1e-8)))


class _FloatOrHybridCell:
    """LstmStepFloat / LstmStepHybrid for a block of batch rows.

    Hybrid rows are independent (LiteRT's all-zero skips only avoid adding zeros). The float
    kernel's NONE cell activation leaves the cell gate as its scratch buffers hold it, which
    depends on which of the input, aux input and recurrent products ran (all-zero input blocks
    are skipped): see _FloatOrHybridCell.step."""

    def __init__(self, node: NodeContext, spec: _Spec):
        self.spec = spec
        self.hybrid = spec.mode == "hybrid"
        L = spec.layout
        idx = [L.w[GATES.index(g)] for g in spec.gates] + [L.r[GATES.index(g)] for g in spec.gates]
        idx += [L.b[GATES.index(g)] for g in spec.gates]
        idx += [L.peep["ifo".index(g)] if spec.peephole and g != "c" and not (g == "i" and spec.cifg) else None
                for g in spec.gates]
        idx += [L.ln[GATES.index(g)] if spec.use_ln else None for g in spec.gates]
        idx += [L.aux_w[GATES.index(g)] if spec.aux_size is not None else None for g in spec.gates]
        idx += [L.proj_w, L.proj_b]
        self.indices = tuple(idx)
        self.scales = tuple(scale_zp(node.input(i))[0] if i is not None and node.input(i) is not None else 0.0
                            for i in idx)
        self.params = Cached(self._build)

    def _build(self, *arrays):
        k = len(self.spec.gates)
        sc = self.scales

        def mat(a, s):
            if a is None:
                return None
            if self.hybrid:
                return QuantWeights(a, s)
            return np.ascontiguousarray(np.asarray(a, np.float32).T)

        def f32(a):
            return None if a is None else np.asarray(a, np.float32)
        p = {}
        for j, g in enumerate(self.spec.gates):
            p["w", g] = mat(arrays[j], sc[j])
            r = arrays[k + j]
            p["r", g] = f32(r) if self.spec.diag[g] else mat(r, sc[k + j])
            p["b", g] = f32(arrays[2 * k + j])
            peep = arrays[3 * k + j]
            if peep is not None and self.hybrid:
                peep = (np.ascontiguousarray(peep).view(np.int8).astype(np.float32) * np.float32(sc[3 * k + j]))
            p["p", g] = f32(peep)
            p["ln", g] = f32(arrays[4 * k + j])
            p["aux", g] = mat(arrays[5 * k + j], sc[5 * k + j])
        p["pw"] = mat(arrays[6 * k], sc[6 * k])
        p["pb"] = f32(arrays[6 * k + 1])
        return p

    def bind(self, args):
        return self.params.get(*_args_of(args, self.indices))

    def step(self, p, x, aux, h, c, time_major: bool):
        spec = self.spec
        rows = x.shape[0]
        act = spec.act
        if self.hybrid:
            asym = spec.asymmetric
            qx = quantize_rows(x, asym) if np.any(x) else None
            qa = quantize_rows(aux, asym) if aux is not None and np.any(aux) else None
            qh = quantize_rows(h, asym) if np.any(h) else None
        else:
            if time_major:
                x_nz = np.full((rows, 1), bool(np.any(x)))
                a_nz = np.full((rows, 1), aux is not None and bool(np.any(aux)))
            else:
                x_nz = np.any(x, axis=1, keepdims=True)
                a_nz = np.any(aux, axis=1, keepdims=True) if aux is not None else np.zeros((rows, 1), bool)

        def gate(g, cell):
            init = np.zeros((rows, spec.n_cell), np.float32)
            if not spec.use_ln:
                init[...] = p["b", g]
            acc = init.copy()
            if self.hybrid:
                if qx is not None:
                    hybrid_accumulate(acc, None, p["w", g], asym, qx)
                if qa is not None:
                    hybrid_accumulate(acc, None, p["aux", g], asym, qa)
                if qh is not None:
                    if spec.diag[g]:
                        acc += p["r", g] * h
                    else:
                        hybrid_accumulate(acc, None, p["r", g], asym, qh)
                partial = None
            else:
                acc += x @ p["w", g]
                if aux is not None:
                    acc += aux @ p["aux", g]
                partial = acc.copy()
                acc += (p["r", g] * h) if spec.diag[g] else (h @ p["r", g])
            if cell is not None and p["p", g] is not None:
                acc += p["p", g] * cell
            if spec.use_ln:
                acc = _mean_stddev_norm(acc) * p["ln", g] + p["b", g]
            if g != "c":
                return _sigmoid_(acc)
            if act != NONE:
                return _activation_(acc, act)
            if self.hybrid:
                return acc
            # The scratch buffers swap after each product that runs: the cell gate keeps the
            # full value only after an odd number of swaps.
            swaps = x_nz.astype(np.int64) + a_nz
            full = (swaps + spec.diag[g]) % 2 == 1
            early = np.where(swaps == 2, partial, init) if not spec.diag[g] else init
            return np.where(full, acc, early).astype(np.float32)

        gi = gate("i", c) if not spec.cifg else None
        gf = gate("f", c)
        gc = gate("c", None)
        c_new = gf * c
        c_new += gc * (np.float32(1) - gf if spec.cifg else gi)
        if spec.cell_clip > 0:
            c_new = np.clip(c_new, -spec.cell_clip, spec.cell_clip)
        go = gate("o", c_new)
        hc = gc.copy() if act == NONE else _activation_(c_new.copy(), act)
        hc *= go
        if spec.use_proj:
            out = np.zeros((rows, spec.n_output), np.float32)
            if p["pb"] is not None:
                out[...] = p["pb"]
            if self.hybrid:
                if np.any(hc):
                    hybrid_accumulate(out, hc, p["pw"], spec.asymmetric)
            else:
                out += hc @ p["pw"]
            if spec.proj_clip > 0:
                out = np.clip(out, -spec.proj_clip, spec.proj_clip)
            hc = out
        return hc.astype(np.float32, copy=False), c_new.astype(np.float32, copy=False)


def _intermediates(node: NodeContext) -> list[Tensor] | None:
    """The node's intermediate tensors, looked up in the model the node belongs to."""
    runtime = node.runtime
    if runtime is None:
        return None
    for sg in runtime.model.subgraphs:
        if node.index < len(sg.operators) and sg.operators[node.index] is node.op:
            return [sg.tensors[i] for i in node.op.intermediates]
    return None


class _IntegerCell:
    """LstmStepInteger8x8_16 (PopulateQuantizedLstmParams8x8_16 at prepare)."""

    def __init__(self, node: NodeContext, spec: _Spec, inp: Tensor, out: Tensor):
        self.spec = spec
        inter = _intermediates(node)
        if inter is None:
            raise node.unsupported("the integer LSTM needs the node's intermediate tensors")
        if len(inter) != 5:
            raise node.unsupported(f"the integer LSTM needs 5 intermediate tensors (8x8_16), got {len(inter)}")
        h_t, c_t = spec.tensor(node, "h"), spec.tensor(node, "c")
        for t, what in ((c_t, "cell state"), (out, "output"), (inter[4], "intermediate 4")) + tuple(
                (inter[k], f"intermediate {k}") for k in range(4) if spec.use_ln):
            if not t.quantized:
                raise node.unsupported(f"the integer LSTM needs a quantized {what}")
        f32 = np.float32

        def sc(t):
            return f32(scale_zp(t)[0]) if t is not None else f32(1)
        inter_scale = [sc(inter[k]) if spec.use_ln else f32(2.0 ** -12) for k in range(4)] + [sc(inter[4])]
        self.hidden_zp = scale_zp(inter[4])[1]
        ok, cell_log2 = _checked_log2(float(scale_zp(c_t)[0]))
        if not ok or cell_log2 > -9:
            # LiteRT's Prepare fails here (CheckedLog2, cell_scale <= -9), ignores the failure and
            # runs with the remaining quantization parameters left at zero.
            raise node.unsupported("the cell state scale must be a power of two no larger than 2^-9")
        # ApplyTanh takes 0..6 integer bits; below 2^-15 LiteRT writes nothing and the output
        # reads what the scratch buffer holds: the input gate, or uninitialized memory with CIFG.
        self.tanh_in_range = 15 + cell_log2 >= 0
        if not self.tanh_in_range and spec.cifg:
            raise node.unsupported(f"cell state scale 2^{cell_log2} is below LiteRT's tanh range "
                                   "(2^-15..2^-9) and a CIFG LSTM has no input gate in its place")
        self.cell_log2 = cell_log2
        if spec.peephole and spec.n_output > spec.n_cell:
            raise node.unsupported("integer peephole with n_output > n_cell (LiteRT walks n_output "
                                   "peephole weights)")
        in_s, self.in_zp = sc(inp), scale_zp(inp)[1]
        h_s, self.h_zp = sc(h_t), scale_zp(h_t)[1]
        gk = {g: GATES.index(g) for g in GATES}
        self.m_in, self.m_rec, self.m_peep, self.m_ln = {}, {}, {}, {}
        for g in spec.gates:
            k = gk[g]
            self.m_in[g] = quantize_multiplier(float(f32(sc(spec.tensor(node, "w", g)) * in_s) / inter_scale[k]))
            self.m_rec[g] = quantize_multiplier(float(f32(sc(spec.tensor(node, "r", g)) * h_s) / inter_scale[k]))
            if spec.peephole and g != "c":
                real = 2.0 ** cell_log2 * float(sc(spec.tensor(node, "peep", g))) / float(inter_scale[k])
                self.m_peep[g] = quantize_multiplier(float(f32(real)))
            ln_scale = sc(spec.tensor(node, "ln", g)) if spec.use_ln else f32(1)
            self.m_ln[g] = quantize_multiplier(float(ln_scale)) + (max(1, int(f32(10000) * ln_scale)),)
        self.m_hidden = quantize_multiplier(float(f32(2.0 ** -15 / float(inter_scale[4]) * 2.0 ** -15)))
        if spec.use_proj:
            self.m_proj = quantize_multiplier(float(f32(sc(spec.tensor(node, "proj_w")) * inter_scale[4]) / h_s))
        cell_s = sc(c_t)
        out_s = sc(out)
        self.cell_clip = int(np.clip(f32(spec.cell_clip) / cell_s, -32768, 32767)) if spec.cell_clip > 0 else 0
        self.proj_clip = int(np.clip(f32(spec.proj_clip) / out_s, -128, 127)) if spec.proj_clip > 0 else 0
        self.tanh_out = _table("tanh", 15 + cell_log2) if self.tanh_in_range else None
        self.sigmoid, self.tanh3 = _table("logistic", 3), _table("tanh", 3)
        L = spec.layout
        self.indices = tuple(L.w[gk[g]] for g in spec.gates) + tuple(L.r[gk[g]] for g in spec.gates) + tuple(
            L.b[gk[g]] for g in spec.gates) + tuple(
            L.peep["ifo".index(g)] if spec.peephole and g != "c" else None for g in spec.gates) + tuple(
            L.ln[gk[g]] if spec.use_ln else None for g in spec.gates) + (L.proj_w, L.proj_b)
        self.params = Cached(self._build)

    def _build(self, *arrays):
        spec = self.spec
        k = len(spec.gates)

        def i64(a):
            return None if a is None else np.asarray(a, np.int64)
        p = {}
        for j, g in enumerate(spec.gates):
            w, r, b = i64(arrays[j]), i64(arrays[k + j]), i64(arrays[2 * k + j])
            p["w", g], p["r", g] = w.T.copy(), r.T.copy()
            in_bias = np.zeros(spec.n_cell, np.int64) if spec.use_ln else b
            p["bw", g] = _wrap32(in_bias - self.in_zp * w.sum(axis=1))
            p["br", g] = _wrap32(-self.h_zp * r.sum(axis=1))
            p["b", g] = b
            p["p", g] = i64(arrays[3 * k + j])
            p["ln", g] = i64(arrays[4 * k + j])
        pw, pb = i64(arrays[5 * k]), i64(arrays[5 * k + 1])
        if pw is not None:
            p["pw"] = pw.T.copy()
            p["pb"] = _wrap32((pb if pb is not None else 0) + self.hidden_zp * pw.sum(axis=1))
        return p

    def bind(self, args):
        return self.params.get(*_args_of(args, self.indices))

    def _peephole(self, acc, weights, cell, m, time_major: bool):
        """VectorBatchVectorCwiseProductAccumulate with LiteRT's v_size = n_output: it walks the
        first n_output values of each batch row (batch-major) or of the flattened block."""
        n_out = self.spec.n_output
        if time_major:
            flat_acc, flat_cell = acc.reshape(-1), cell.reshape(-1)
            n = flat_acc.size // self.spec.n_cell * n_out
            w = np.tile(weights[:n_out], max(n // max(n_out, 1), 0))
            flat_acc[:n] = np.clip(flat_acc[:n] + multiply_by_quantized_multiplier(w * flat_cell[:n], *m), -32768, 32767)
            return flat_acc.reshape(acc.shape)
        acc[:, :n_out] = np.clip(acc[:, :n_out] + multiply_by_quantized_multiplier(
            weights[:n_out] * cell[:, :n_out], *m), -32768, 32767)
        return acc

    def step(self, p, x, aux, h, c, time_major: bool):
        spec = self.spec

        def gate(g, cell):
            acc = np.clip(multiply_by_quantized_multiplier(p["bw", g] + x @ p["w", g], *self.m_in[g]), -32768, 32767)
            acc = np.clip(multiply_by_quantized_multiplier(p["br", g] + h @ p["r", g], *self.m_rec[g]) + acc,
                          -32768, 32767)
            if cell is not None and p["p", g] is not None:
                acc = self._peephole(acc, p["p", g], cell, self.m_peep[g], time_major)
            if spec.use_ln:
                a, s, guard = self.m_ln[g]
                acc = _layer_norm_int(acc, p["ln", g], p["b", g], a, s, guard)
            return _lookup(acc, self.tanh3 if g == "c" else self.sigmoid)

        gi = gate("i", c) if not spec.cifg else None
        gf = gate("f", c)
        gc = gate("c", None)
        c_new = _wrap16(_rdbpot(gf * c, 15))
        shift = 30 + self.cell_log2
        if spec.cifg:
            scratch = _wrap16(_rdbpot(_wrap16(32767 - gf) * gc, shift))
        else:
            scratch = _wrap16(_rdbpot(gi * gc, shift))
        c_new = np.clip(c_new + scratch, -32768, 32767)
        if self.cell_clip > 0:
            c_new = np.clip(c_new, -self.cell_clip, self.cell_clip)
        go = gate("o", c_new)
        t = _lookup(c_new, self.tanh_out) if self.tanh_in_range else gi
        prod = go * t
        if spec.use_proj:
            hidden = np.clip(multiply_by_quantized_multiplier(prod, *self.m_hidden) - self.hidden_zp, -128, 127)
            out = multiply_by_quantized_multiplier(p["pb"] + hidden @ p["pw"], *self.m_proj) + self.h_zp
            out = np.clip(out, -128, 127)
            if self.proj_clip > 0:
                out = np.clip(out, -self.proj_clip, self.proj_clip)
        else:
            out = np.clip(multiply_by_quantized_multiplier(prod, *self.m_hidden) + self.hidden_zp, -128, 127)
        return out, c_new


def _run_direction(cell, p, xs, auxs, h, c, forward: bool, time_major: bool, out: np.ndarray):
    """Steps one direction through the [time, batch, ...] sequence, writing its outputs."""
    steps = range(xs.shape[0]) if forward else range(xs.shape[0] - 1, -1, -1)
    for t in steps:
        h, c = cell.step(p, xs[t], None if auxs is None else auxs[t], h, c, time_major)
        out[t] = h
    return h, c


def _mode(node: NodeContext, inp: Tensor, w_out: Tensor | None) -> str:
    """float, hybrid or integer, as LiteRT's Eval dispatches on the weight and input types."""
    if w_out is None:
        raise node.unsupported("missing input_to_output_weights")
    check_type(node, inp, ("FLOAT32", "INT8"))
    if inp.type_name == "INT8":
        check_type(node, w_out, ("INT8",), "weights")
        return "integer"
    check_type(node, w_out, ("FLOAT32", "INT8", "UINT8"), "weights")
    return "float" if w_out.type_name == "FLOAT32" else "hybrid"


class _QuantizedLstm:
    """Hybrid and integer LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM (lstm_eval.cc EvalHybrid and
    EvalInteger8x8_16)."""

    def __init__(self, node: NodeContext, mode: str, sequence: bool):
        n_in = len(node.inputs)
        if n_in not in (20, 24):
            raise node.unsupported(f"the full LSTM kernel expects 20 or 24 inputs, got {n_in}")
        if len(node.outputs) != 1:
            raise node.unsupported(f"the full LSTM kernel has 1 output, got {len(node.outputs)}")
        inp = node.input(INPUT)
        shape = tuple(inp.shape)
        if sequence:
            if len(shape) != 3:
                raise node.unsupported(f"input must be 3-D, got shape {list(shape)}")
            self.time_major = bool(node.options.get("time_major", False))
            n_time, n_batch = (shape[0], shape[1]) if self.time_major else (shape[1], shape[0])
        else:
            if len(shape) != 2:
                raise node.unsupported(f"input must be 2-D, got shape {list(shape)}")
            self.time_major = True
            n_time, n_batch = 1, shape[0]
        self.n_time, self.n_batch, self.sequence = n_time, n_batch, sequence
        use_ln = n_in == 24 and node.input(LN_F) is not None
        self.spec = _Spec(node, SEQ_LAYOUT, mode, shape[-1], n_batch, sequence=sequence, use_ln=use_ln)
        out = node.outputs[0]
        if mode == "integer":
            check_type(node, out, ("INT8",), "output")
            self.cell = _IntegerCell(node, self.spec, inp, out)
            self.dtypes = (np.int64, np.int64, np.int8)
        else:
            check_type(node, out, ("FLOAT32",), "output")
            self.cell = _FloatOrHybridCell(node, self.spec)
            self.dtypes = (np.float32, np.float32, np.float32)
        self.out_shape = shape[:-1] + (self.spec.n_output,)

    def __call__(self, *args):
        spec = self.spec
        nb, nt = self.n_batch, self.n_time
        x = np.asarray(args[INPUT])
        xs = x.reshape(nt, nb, -1) if self.time_major else x.reshape(nb, nt, -1).transpose(1, 0, 2)
        xs = xs.astype(self.dtypes[0])
        h_state, c_state = args[OUT_STATE], args[CELL_STATE]
        h = np.asarray(h_state).reshape(nb, spec.n_output).astype(self.dtypes[0])
        c = np.asarray(c_state).reshape(nb, spec.n_cell).astype(self.dtypes[1])
        out = np.empty((nt, nb, spec.n_output), self.dtypes[0])
        h, c = _run_direction(self.cell, self.cell.bind(args), xs, None, h, c, True, self.time_major, out)
        h_state[...] = h.reshape(h_state.shape)
        c_state[...] = c.reshape(c_state.shape)
        if not self.time_major:
            out = out.transpose(1, 0, 2)
        return np.ascontiguousarray(out).reshape(self.out_shape).astype(self.dtypes[2])


def _gemm_multiplier(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """The int16-output GEMM's multiplier stage (cpu_backend_gemm on x86): the rounding
    doubling high multiply, then a rounding right shift whose ties go up (not away from zero)."""
    x = _wrap32(x << max(shift, 0))
    t = _srdhm32(x, multiplier)
    e = max(-shift, 0)
    return (t + (1 << (e - 1))) >> e if e else t


def _basic_lstm_quantized(node: NodeContext, depth: int, write_back: tuple[bool, bool]):
    """optimized_ops::LstmCell<4> (its scalar path on x86): a uint8 fully connected layer into
    Q3.12, gemmlowp logistic / tanh, the state in Q4.11, the output back to uint8."""
    state_out = node.outputs[1]
    ok, log2 = _checked_log2(scale_zp(state_out)[0])
    if not ok or 15 + log2 != 4:
        raise node.unsupported("the quantized basic LSTM needs a state scale of 2^-11 (4 integer bits)")
    w_zp = scale_zp(node.input(2))[1]
    accum = quantize_multiplier(4096 * float(np.float32(scale_zp(node.input(3))[0])))
    sigmoid, tanh3 = _table("logistic", 3), _table("tanh", 3)

    def run(x, prev_a, w, b, prev_s):
        concat = np.concatenate([np.asarray(x), np.asarray(prev_a)], axis=1)
        fc = wrap_int32((concat.astype(np.int64) - 128) @ (np.asarray(w, np.int64) - w_zp).T + np.asarray(b, np.int64))
        act = np.clip(_gemm_multiplier(fc, *accum), -32768, 32767)
        i = _lookup(act[:, :depth], sigmoid)
        g = _lookup(act[:, depth:2 * depth], tanh3)
        f = _lookup(act[:, 2 * depth:3 * depth], sigmoid)
        o = _lookup(act[:, 3 * depth:], sigmoid)
        state = np.clip(_rdbpot(_srdhm16(i, g), 4) + _srdhm16(f, np.asarray(prev_s, np.int64)), -32768, 32767)
        out = _srdhm16(o, _lookup(_srmpot16(state, 1), tanh3))
        activ = (np.clip(_rdbpot(out, 8), -128, 127) + 128).astype(np.uint8)
        state = state.astype(np.int16)
        if write_back[0]:
            prev_a[...] = activ
        if write_back[1]:
            prev_s[...] = state
        return activ, state, concat.astype(np.uint8), act.astype(np.int16)
    return run


@register("LSTM", max_version=4, dtypes=("FLOAT32", "INT8", "UINT8"))
def lstm(node: NodeContext):
    if not node.options:
        raise node.unsupported("LSTM needs its LSTMOptions (LiteRT's parser refuses the node)")
    kernel_type = node.options.get("kernel_type", 0)
    if kernel_type not in (0, 1):
        raise node.unsupported(f"unknown LSTM kernel type {kernel_type}")
    if kernel_type == 1:
        return _basic_lstm(node)
    if len(node.inputs) < 5 or node.input(INPUT) is None:
        raise node.unsupported("the full LSTM kernel expects 20 or 24 inputs")
    mode = _mode(node, node.input(INPUT), node.input(I2O))
    if mode == "float":
        return _FullLstm(node, sequence=False)
    return _QuantizedLstm(node, mode, sequence=False)


@register("UNIDIRECTIONAL_SEQUENCE_LSTM", max_version=4, dtypes=("FLOAT32", "INT8"))
def unidirectional_sequence_lstm(node: NodeContext):
    if len(node.inputs) < 5 or node.input(INPUT) is None:
        raise node.unsupported("the full LSTM kernel expects 20 or 24 inputs")
    mode = _mode(node, node.input(INPUT), node.input(I2O))
    if mode == "float":
        return _FullLstm(node, sequence=True)
    return _QuantizedLstm(node, mode, sequence=True)


@register("BIDIRECTIONAL_SEQUENCE_LSTM", max_version=3, dtypes=("FLOAT32",))
def bidirectional_sequence_lstm(node: NodeContext):
    """bidirectional_sequence_lstm.cc: a forward and a backward float or hybrid LSTM (no layer
    norm) over the same input, or the backward one over aux_input when aux_input comes without
    aux weights; with aux weights both cells also see aux_input."""
    opts = node.options
    merge = bool(opts.get("merge_outputs", False))
    if len(node.inputs) != 48:
        raise node.unsupported(f"BIDIRECTIONAL_SEQUENCE_LSTM takes 48 inputs, got {len(node.inputs)}")
    if len(node.outputs) != (1 if merge else 2):
        raise node.unsupported(f"expected {1 if merge else 2} outputs with merge_outputs={merge}")
    inp = node.input(INPUT)
    if inp is None:
        raise node.unsupported("missing input")
    check_type(node, inp, ("FLOAT32",))
    mode = _mode(node, inp, node.input(BIDI_FW.w[3]))
    bw_out = node.input(BIDI_BW.w[3])
    if bw_out is None or bw_out.type != node.input(BIDI_FW.w[3]).type:
        raise node.unsupported("backward weights must have the forward weights' type")
    if len(inp.shape) != 3:
        raise node.unsupported(f"input must be 3-D, got shape {list(inp.shape)}")
    time_major = bool(opts.get("time_major", False))
    n_time, n_batch = (inp.shape[0], inp.shape[1]) if time_major else (inp.shape[1], inp.shape[0])
    n_input = inp.shape[2]
    aux = node.input(39)
    has_aux_w = any(node.input(i) is not None for i in BIDI_FW.aux_w[1:] + BIDI_BW.aux_w[1:])
    if has_aux_w and not all(node.input(i) is not None for i in BIDI_FW.aux_w[1:] + BIDI_BW.aux_w[1:]):
        raise node.unsupported("aux weights must be all present or all absent")
    aux_size = None
    if aux is not None:
        check_type(node, aux, ("FLOAT32",), "aux input")
        if len(aux.shape) != 3 or tuple(aux.shape[:2]) != tuple(inp.shape[:2]):
            raise node.unsupported("aux input must be 3-D with the input's first two dimensions")
        if has_aux_w:
            aux_size = aux.shape[2]
        elif aux.shape[2] != n_input:
            raise node.unsupported("an aux input without aux weights must have the input's shape")
    elif has_aux_w:
        raise node.unsupported("aux weights need an aux input")
    fw = _Spec(node, BIDI_FW, mode, n_input, n_batch, sequence=True, use_ln=False, aux_size=aux_size)
    bw = _Spec(node, BIDI_BW, mode, n_input, n_batch, sequence=True, use_ln=False, aux_size=aux_size)
    if (fw.n_cell, fw.n_output) != (bw.n_cell, bw.n_output):
        raise node.unsupported("forward and backward cells must have the same n_cell and n_output")
    if any(fw.diag.values()) or any(bw.diag.values()):
        raise node.unsupported("diagonal recurrent weights are not supported")
    for k in range(len(node.outputs)):
        check_type(node, node.outputs[k], ("FLOAT32",), "output")
    if merge and not time_major and n_batch > 1:
        raise node.unsupported("batch-major merged outputs with batch > 1 (LiteRT indexes the "
                               "state tensors past their end)")
    cells = (_FloatOrHybridCell(node, fw), _FloatOrHybridCell(node, bw))
    bw_from_aux = aux is not None and not has_aux_w
    n_out = fw.n_output

    def run(*args):
        x = np.asarray(args[INPUT], np.float32)

        def seq(a):
            return a if time_major else a.transpose(1, 0, 2)
        xs = seq(x)
        aux_x = None if args[39] is None else seq(np.asarray(args[39], np.float32))
        aux_for_cells = aux_x if aux_size is not None else None
        outs = np.empty((n_time, n_batch, 2 * n_out), np.float32)
        for cell, spec, forward, src in ((cells[0], fw, True, xs), (cells[1], bw, False, aux_x if bw_from_aux else xs)):
            L = spec.layout
            h_state, c_state = args[L.h], args[L.c]
            h = np.asarray(h_state, np.float32).reshape(n_batch, n_out)
            c = np.asarray(c_state, np.float32).reshape(n_batch, spec.n_cell)
            view = outs[:, :, :n_out] if forward else outs[:, :, n_out:]
            h, c = _run_direction(cell, cell.bind(args), src, aux_for_cells, h, c, forward, time_major, view)
            h_state[...] = h.reshape(h_state.shape)
            c_state[...] = c.reshape(c_state.shape)
        res = (outs,) if merge else (outs[:, :, :n_out], outs[:, :, n_out:])
        res = tuple(np.ascontiguousarray(seq(r)) for r in res)
        return res[0] if merge else res
    return run
