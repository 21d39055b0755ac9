"""The float LSTM (lstm_eval.cc EvalFloat / LstmStepFloat) of LSTM's full kernel and
UNIDIRECTIONAL_SEQUENCE_LSTM, and the float helpers the other LSTM modules share.

Follows tflite/kernels/lstm_eval.cc (CalculateLstmGateFloat, UpdateLstmCellFloat,
CalculateLstmOutputFloat) and internal/reference/portable_tensor_utils.cc
(MeanStddevNormalization, ApplySigmoid, ApplyActivationToVector).

Without layer norm, peephole, diagonal recurrent weights or a NONE activation the step loop runs
on preallocated buffers (_FastLoop): the input products of all time steps (plus the biases) in
one matmul up front, entering each step's recurrent matmul through one-hot columns; the four gates
stacked [o, i, f, g] with the sigmoid gates computed as 0.5 + 0.5 tanh(x / 2) (their weights
halved), so one tanh serves all four; the cell state kept next to the cell gate so that
[i, f] * [g, c] is one product. CIFG's input gate 1 - f is sigmoid(-x): the forget gate's
weights negated.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from acelera.core.kernels import sequence_native
from acelera.core.kernels.common import NONE, RELU, RELU6, RELU_N1_TO_1, SIGN_BIT, TANH
from acelera.core.kernels.lstm_spec import (
    BC,
    BF,
    BI,
    BO,
    C2F,
    C2I,
    C2O,
    CELL_STATE,
    I2C,
    I2F,
    I2I,
    I2O,
    INPUT,
    LN_C,
    LN_F,
    LN_I,
    LN_O,
    OUT_STATE,
    PROJ_B,
    PROJ_W,
    R2C,
    R2F,
    R2I,
    R2O,
    SIGMOID,
    activation_and_clips,
)
from acelera.core.kernels.registry import NodeContext

try:  # the clip ufunc itself: np.clip's Python wrapper costs a few microseconds per call
    from numpy._core.umath import clip as clip_ufunc  # type: ignore[attr-defined]  # not in numpy's stubs
except ImportError:  # pragma: no cover - numpy < 2
    clip_ufunc = np.clip

F32 = np.float32
# The input products ride the recurrent matmul (one-hot columns) while that adds at most this many
# multiply-adds per step: about what the add it saves costs.
ONE_HOT_MACS = 4096


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The float32 logistic, 1 / (1 + exp(-x))."""
    with np.errstate(over="ignore"):
        return (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32, copy=False)


def activation(x: np.ndarray, act: int) -> np.ndarray:
    """ApplyActivationToVector (a new array; x itself for NONE)."""
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
        return sigmoid(x)
    return x


def sigmoid_inplace(x: np.ndarray) -> np.ndarray:
    """In-place logistic."""
    with np.errstate(over="ignore"):
        np.negative(x, out=x)
        np.exp(x, out=x)
        x += np.float32(1)
        np.reciprocal(x, out=x)
    return x


def activation_inplace(x: np.ndarray, act: int) -> np.ndarray:
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
        return sigmoid_inplace(x)
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
        self.arrays: list = []
        self.value = None
        # The arrays' ids (valid while self.arrays holds them), picked in one call.
        self.pick = operator.itemgetter(*indices, *indices[:1]) if indices else None
        self.top = max(indices, default=-1)
        self.ids: tuple | None = None

    def get(self, args):
        if self.pick is not None and len(args) > self.top and self.ids == tuple(map(id, self.pick(args))):
            return self.value
        arrays = [args[i] if i < len(args) else None for i in self.indices]
        if not self.arrays or not all(map(operator.is_, arrays, self.arrays)):
            self.value = self.build(tuple(arrays))
            self.arrays = arrays
        if self.pick is not None and len(args) > self.top:
            self.ids = tuple(map(id, self.pick(args)))
        return self.value


def _f32(a) -> np.ndarray | None:
    return None if a is None else np.asarray(a, np.float32)


_ZERO, _HALF, _ONE, _MINUS_ONE, _SIX = (np.array(v, F32) for v in (0, 0.5, 1, -1, 6))
VIEW_STEPS = 4096  # up to this many steps the loop's per-step views are made once, at prepare


def _act_into(x: np.ndarray, act: int, out: np.ndarray) -> None:
    """out = act(x) (act != NONE) in a few ufunc calls on preallocated arrays."""
    if act == TANH:
        np.tanh(x, out)
    elif act == RELU:
        np.maximum(x, _ZERO, out=out)
    elif act == RELU6:
        clip_ufunc(x, _ZERO, _SIX, out)
    elif act == RELU_N1_TO_1:
        clip_ufunc(x, _MINUS_ONE, _ONE, out)
    elif act == SIGMOID:
        np.copyto(out, x)
        sigmoid_inplace(out)
    else:  # SIGN_BIT
        np.copyto(out, np.signbit(x))


class _FastLoop:
    """Preallocated buffers and views of the fast float step loop, for one node's shapes.

    H [n_time + 1, batch, K] holds the output state entering each step (row 0: the initial state)
    in its first n_output columns and, for small enough sizes (ONE_HOT_MACS), one-hot columns that
    pick the step's row of input products, which W [K, 4 n_cell] holds below the recurrent
    weights (`xw`). P [batch, 5 n_cell] holds the gates [o, i, f, g], then the cell state."""

    def __init__(self, nt: int, nb: int, no: int, nc: int, time_major: bool, act: int, cell_clip: F32,
                 proj_clip: F32):
        rows = nt * nb
        self.one_hot = 0 < rows and nb * rows * 4 * nc <= ONE_HOT_MACS
        k = no + (rows if self.one_hot else 0)
        self.nt, self.no, self.act = nt, no, act
        self.H = np.zeros((nt + 1, nb, k), F32)
        if self.one_hot:
            t, b = np.meshgrid(np.arange(nt), np.arange(nb), indexing="ij")
            self.H[t, b, no + (t * nb + b if time_major else b * nt + t)] = 1
        self.W = np.zeros((k, 4 * nc), F32)
        self.xw = self.W[no:]
        P = self.P = np.zeros((nb, 5 * nc), F32)
        self.P4, self.S, self.O, self.IF = P[:, :4 * nc], P[:, :3 * nc], P[:, :nc], P[:, nc:3 * nc]
        self.G, self.GC, self.C = P[:, 3 * nc:4 * nc], P[:, 3 * nc:], P[:, 4 * nc:]
        self.Q = np.zeros((nb, 2 * nc), F32)
        self.Q1, self.Q2 = self.Q[:, :nc], self.Q[:, nc:]
        self.TC = np.zeros((nb, nc), F32)
        self.clip = (np.array(-cell_clip, F32), np.array(cell_clip, F32)) if cell_clip > 0 else None
        self.proj_clip = (np.array(-proj_clip, F32), np.array(proj_clip, F32)) if proj_clip > 0 else None
        self.views = self._views() if nt <= VIEW_STEPS else None
        self.rows, self.h0, self.h_last, self.out_view = rows, self.H[0, :, :no], self.H[nt, :, :no], self.H[1:, :, :no]

    def _views(self) -> tuple[list, list]:
        return [self.H[t] for t in range(self.nt)], [self.H[t + 1, :, :self.no] for t in range(self.nt)]

    def run(self, xw: np.ndarray | None, proj: tuple | None) -> None:
        """The n_time steps from H[0] and C: each step's output state lands in H[t + 1]."""
        mm, add, mul, tanh = np.matmul, np.add, np.multiply, np.tanh
        step_mm = np.dot if self.P4.flags.c_contiguous else mm  # np.dot: less overhead, C-contiguous out
        W, P4, S, O, G, C, IF, GC, Q, Q1, Q2, TC = (self.W, self.P4, self.S, self.O, self.G, self.C, self.IF,
                                                    self.GC, self.Q, self.Q1, self.Q2, self.TC)
        act, half, is_tanh = self.act, _HALF, self.act == TANH
        clip, (lo, hi) = self.clip is not None, self.clip or (None, None)
        h_in, h_out = self.views or self._views()
        for t in range(self.nt):
            step_mm(h_in[t], W, P4)
            if xw is not None:
                add(P4, xw[t], P4)
            if is_tanh:
                tanh(P4, P4)
            else:
                tanh(S, S)
                _act_into(G, act, G)
            mul(S, half, S)
            add(S, half, S)
            mul(IF, GC, Q)
            add(Q1, Q2, C)
            if clip:
                clip_ufunc(C, lo, hi, C)
            if is_tanh:
                tanh(C, TC)
            else:
                _act_into(C, act, TC)
            if proj is None:
                mul(O, TC, h_out[t])
            else:
                mul(O, TC, TC)
                h = h_out[t]
                mm(TC, proj[0], h)
                if proj[1] is not None:
                    add(h, proj[1], h)
                if self.proj_clip is not None:
                    clip_ufunc(h, self.proj_clip[0], self.proj_clip[1], h)


def state_view(a: np.ndarray, shape: tuple[int, int], dtype: type) -> tuple[np.ndarray, bool]:
    """A C-contiguous writable [batch, n] view of a state tensor, or a copy (True: write it back)."""
    if a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable:
        return a.reshape(shape), False
    return np.array(a, dtype).reshape(shape), True


def native_input(x, rows: int, n: int, dtype: type) -> np.ndarray:
    """x as the C-contiguous writable [rows, n] array numba's loops take (one signature)."""
    x = np.asarray(x, dtype).reshape(rows, n)
    return x if x.flags.writeable else x.copy()


class NativeDirection:
    """One direction of the float LSTM run by sequence_native.lstm_float: gates stacked [i, f,
    c, o] (CIFG: the i block unused), input products of all steps in one GEMM (inside the loop
    when small), the step loop in numba."""

    SMALL = 1 << 15  # rows * n_input * 4 n_cell up to which the loop computes the input products

    def __init__(self, kernel, gates: str, indices: tuple[int, ...], proj: tuple[int, int] | None,
                 shape: tuple[int, int, int, int, int], time_major: bool, reverse: bool, out_col: int,
                 act: int, clips: tuple[F32, F32]):
        from acelera.core.kernels import sequence_native as sn
        nt, nb, ni, nc, no = shape
        self.kernel, self.gates, self.shape = kernel, gates, shape
        rows = nt * nb
        self.project = rows * ni * 4 * nc <= self.SMALL
        cfg = [0] * (sn.ACT + 1)
        cfg[sn.N_TIME], cfg[sn.N_BATCH], cfg[sn.TIME_MAJOR], cfg[sn.REVERSE] = nt, nb, int(time_major), int(reverse)
        cfg[sn.OUT_COL], cfg[sn.CIFG], cfg[sn.PROJECT] = out_col, int("i" not in gates), int(self.project)
        cfg[sn.USE_PROJ], cfg[sn.ACT] = int(proj is not None), act
        self.cfg = np.array(cfg, np.int64)
        self.clips = np.array(clips, F32)
        self.xw = np.zeros((rows, 4 * nc), F32)
        self.params = _Weights(indices + (proj or ()), self._build)

    def _build(self, arrays):
        nt, nb, ni, nc, no = self.shape
        k = len(self.gates)
        w, r, b = (dict(zip(self.gates, arrays[j * k:(j + 1) * k])) for j in range(3))
        w_in = np.zeros((ni + 1, 4 * nc), F32)
        w_rec = np.zeros((no, 4 * nc), F32)
        for j, g in enumerate("ifco"):
            if g in w:
                w_in[:ni, j * nc:(j + 1) * nc] = _f32(w[g]).T
                w_in[ni, j * nc:(j + 1) * nc] = _f32(b[g])
                w_rec[:, j * nc:(j + 1) * nc] = _f32(r[g]).T
        proj = np.zeros((nc + 1, no), F32)
        if len(arrays) > 3 * k:
            proj[:nc] = _f32(arrays[3 * k]).T
            if arrays[3 * k + 1] is not None:
                proj[nc] = _f32(arrays[3 * k + 1])
        return w_in, w_rec, proj

    def __call__(self, args, x: np.ndarray, h: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
        """Runs the sequence x [rows, n_input] from states h, c (updated in place) into out."""
        w_in, w_rec, proj = self.params.get(args)
        xw = self.xw
        if not self.project and xw.size:
            np.matmul(x, w_in[:-1], xw)
            np.add(xw, w_in[-1], xw)
        self.kernel(x, w_in, xw, w_rec, proj, h, c, out, self.cfg, self.clips)


class FullLstm:
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

        # Fast path: no layer norm, peephole, diagonal weights or NONE activation.
        self.fast = not (self.use_ln or self.peephole or any(diag.values()) or self.act == NONE)
        self.native: NativeDirection | None = None
        kernels = sequence_native.kernels() if self.fast else None
        if kernels is not None:
            order = "".join(g for g in "ifco" if g in gates)
            self.native = NativeDirection(
                kernels["lstm_float"], order, tuple(w_idx[g] for g in order) + tuple(r_idx[g] for g in order)
                + tuple(b_idx[g] for g in order), (PROJ_W, PROJ_B) if self.use_proj else None,
                (self.n_time, self.n_batch, n_input, n_cell, n_output), self.time_major, False, 0, self.act,
                (self.cell_clip, self.proj_clip))
        elif self.fast:
            order = "".join(g for g in "ifco" if g in gates)
            self.loop = _FastLoop(self.n_time, self.n_batch, n_output, n_cell, self.time_major, self.act,
                                  self.cell_clip, self.proj_clip)
            self.fast_params = _Weights(
                tuple(w_idx[g] for g in order) + tuple(r_idx[g] for g in order)
                + tuple(b_idx[g] for g in order) + (PROJ_W, PROJ_B), self._build_fast)

    def _build_fast(self, arrays):
        """Stacked [o, i, f, g] input weights [n_input, 4 n_cell] and biases, the recurrent
        weights written into the loop's W; the sigmoid gates' halved, CIFG's input gate the
        negated forget gate."""
        k = len(self.gates)
        w, r, b = (dict(zip(self.gates, arrays[j * k:(j + 1) * k])) for j in range(3))
        pw, pb = arrays[3 * k:]
        if self.cifg:
            w["i"], r["i"], b["i"] = -_f32(w["f"]), -_f32(r["f"]), -_f32(b["f"])
        scale = {"o": F32(0.5), "i": F32(0.5), "f": F32(0.5), "c": F32(1)}

        def stack(d):
            return np.concatenate([_f32(d[g]) * scale[g] for g in "oifc"], 0)
        w_in = np.ascontiguousarray(stack(w).T)
        self.loop.W[:self.n_output] = stack(r).T
        proj = None
        if self.use_proj:
            proj = (np.ascontiguousarray(_f32(pw).T), None if pb is None else _f32(pb).reshape(1, -1))
        bias = stack(b)
        if self.loop.one_hot:  # added to the input products' rows: one same-shape add
            bias = np.broadcast_to(bias, self.loop.xw.shape).copy()
        return w_in, bias, proj

    def __call__(self, *args):
        if self.native is not None:
            return self._run_native(args)
        if self.fast:
            return self._run_fast(args)
        x = np.asarray(args[INPUT], np.float32)
        h_state, c_state = args[OUT_STATE], args[CELL_STATE]
        nb, nt, nc, no = self.n_batch, self.n_time, self.n_cell, self.n_output
        xs = x.reshape(nt, nb, -1) if self.time_major else x.reshape(nb, nt, -1).transpose(1, 0, 2)
        h = np.array(h_state, np.float32).reshape(nb, no)
        c = np.array(c_state, np.float32).reshape(nb, nc)
        out = np.empty((nt, nb, no), np.float32)
        h, c = self._run_general(args, xs, h, c, out)
        # The one allowed in-place write: the variable state tensors.
        h_state[...] = h.reshape(h_state.shape)
        c_state[...] = c.reshape(c_state.shape)
        if not self.time_major:
            out = np.ascontiguousarray(out.transpose(1, 0, 2))
        return out.reshape(self.out_shape)

    def _run_native(self, args) -> np.ndarray:
        nb, rows = self.n_batch, self.n_time * self.n_batch
        x = native_input(args[INPUT], rows, self.n_input, F32)
        h_state, c_state = args[OUT_STATE], args[CELL_STATE]
        h, h_copy = state_view(h_state, (nb, self.n_output), F32)
        c, c_copy = state_view(c_state, (nb, self.n_cell), F32)
        out = np.empty((rows, self.n_output), F32)
        assert self.native is not None
        self.native(args, x, h, c, out)
        # The one allowed in-place write: the variable state tensors.
        if h_copy:
            h_state[...] = h.reshape(h_state.shape)
        if c_copy:
            c_state[...] = c.reshape(c_state.shape)
        return out.reshape(self.out_shape)

    def _run_fast(self, args) -> np.ndarray:
        w_in, bias, proj = self.fast_params.get(args)
        loop = self.loop
        x2 = np.asarray(args[INPUT], np.float32).reshape(loop.rows, self.n_input)
        xw = None
        if loop.one_hot:
            np.matmul(x2, w_in, loop.xw)
            np.add(loop.xw, bias, loop.xw)
            if not math.isfinite(loop.xw.sum()):  # 0 * inf in the one-hot columns would reach every step
                xw = loop.xw.copy()
                loop.xw[...] = 0
        elif loop.rows:
            xw = x2 @ w_in
            xw += bias
        if xw is not None:
            xw = xw.reshape(self.n_time, self.n_batch, -1) if self.time_major else (
                xw.reshape(self.n_batch, self.n_time, -1).transpose(1, 0, 2))
        h_state, c_state = args[OUT_STATE], args[CELL_STATE]
        np.copyto(loop.h0, h_state.reshape(loop.h0.shape))
        np.copyto(loop.C, c_state.reshape(loop.C.shape))
        loop.run(xw, proj)
        # The one allowed in-place write: the variable state tensors.
        np.copyto(h_state, loop.h_last.reshape(h_state.shape))
        np.copyto(c_state, loop.C.reshape(c_state.shape))
        out = loop.out_view if self.time_major else loop.out_view.transpose(1, 0, 2)
        return np.array(out, order="C").reshape(self.out_shape)

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
                val[g] = sigmoid(v) if g != "c" else activation(v, self.act)
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
            o = sigmoid(vo)
            hc = o * (val["c"] if self.act == NONE else activation(c, self.act))
            if self.use_proj:
                hc = hc @ proj_w.T
                if proj_b is not None:
                    hc = hc + proj_b
                if self.proj_clip > 0:
                    hc = np.clip(hc, -self.proj_clip, self.proj_clip)
            h = hc.astype(np.float32, copy=False)
            out[t] = h
        return h, c

