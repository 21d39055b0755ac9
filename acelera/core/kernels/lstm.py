"""LSTM (full and basic kernels) and UNIDIRECTIONAL_SEQUENCE_LSTM, float32.

Follows tflite/kernels/lstm.cc, unidirectional_sequence_lstm.cc and lstm_eval.cc (EvalFloat /
LstmStepFloat): gates i (absent with CIFG), f, g (cell), o; optional peephole (i and f see the
previous cell state, o the new one), layer normalization (mean/stddev over the cell dimension
with epsilon 1e-8, times the coefficients, plus the bias), cell_clip, projection with bias and
proj_clip; sequence LSTMs may have diagonal (1-D) recurrent weights (version 4).

The output_state and cell_state inputs are graph variables: the kernel reads the stored arrays
and writes the new state into them in place (the one in-place write kernels may do).

A LiteRT quirk is reproduced: with a NONE cell activation, ApplyActivationToVector writes
nothing, so the cell gate keeps whatever its scratch buffer holds (the bias, or 0 with layer
norm, when the step's input is all zeros or the recurrent weights are diagonal) and the output
uses the cell gate instead of the cell state.

Hybrid (int8 weights with float input) and integer LSTMs are not implemented.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.common import NONE, RELU, RELU6, RELU_N1_TO_1, SIGN_BIT, TANH
from acelera.core.kernels.registry import NodeContext, register

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
        self.act = int(opts.get("fused_activation_function", 0))
        self.cell_clip = np.float32(opts.get("cell_clip", 0.0))
        self.proj_clip = np.float32(opts.get("proj_clip", 0.0))
        if self.cell_clip < 0 or self.proj_clip < 0:
            raise node.unsupported("cell_clip and proj_clip must be >= 0")
        if self.act not in (NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT, SIGMOID):
            raise node.unsupported(f"activation {self.act} is not supported")
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


def _basic_lstm(node: NodeContext):
    """The 5-input basic LSTM cell (kernel_type BASIC, version 2), float32."""
    if len(node.inputs) != 5 or len(node.outputs) != 4:
        raise node.unsupported("the basic LSTM kernel expects 5 inputs and 4 outputs")
    x, prev_a, w, b, prev_s = node.inputs
    if any(t is None for t in node.inputs):
        raise node.unsupported("the basic LSTM kernel has no optional inputs")
    if any(t.type_name != "FLOAT32" for t in (*node.inputs, *node.outputs)):
        raise node.unsupported("only the float32 basic LSTM kernel is supported")
    if len(x.shape) != 2 or len(prev_a.shape) != 2 or len(prev_s.shape) != 2:
        raise node.unsupported("input, activation and state must be 2-D")
    nb, depth = x.shape[0], prev_a.shape[1]
    total = x.shape[1] + depth
    if (prev_a.shape[0] != nb or tuple(w.shape) != (4 * depth, total) or tuple(b.shape) != (4 * depth,)
            or tuple(prev_s.shape) != (nb, depth)):
        raise node.unsupported("inconsistent basic LSTM shapes")
    write_back = (prev_a.is_variable, prev_s.is_variable)

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


@register("LSTM", max_version=4)
def lstm(node: NodeContext):
    if node.options.get("kernel_type", 0) == 1:
        return _basic_lstm(node)
    return _FullLstm(node, sequence=False)


@register("UNIDIRECTIONAL_SEQUENCE_LSTM", max_version=4)
def unidirectional_sequence_lstm(node: NodeContext):
    return _FullLstm(node, sequence=True)
