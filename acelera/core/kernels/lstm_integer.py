"""The integer LSTM step (lstm_eval.cc LstmStepInteger8x8_16, the 8x8_16 kernel with its 5
intermediate tensors): int8 activations, int16 gates and cell state (a power-of-two scale),
gemmlowp's int16 logistic / tanh as lookup tables, the integer layer norm.

Mirrors tflite/kernels/lstm.cc (PopulateQuantizedLstmParams8x8_16) and lstm_eval.cc
(CalculateLstmGateInteger8x8_16, UpdateLstmCellInteger, CalculateLstmOutputInteger8x8_16),
with internal/reference/portable_tensor_utils.cc (MatrixBatchVectorMultiplyAccumulate,
CwiseMul, CwiseAdd, ApplySigmoid, ApplyTanh). Reproduced: the peephole loop walks n_output (not
n_cell) values per block; with a cell scale below 2^-15 ApplyTanh writes nothing and the hidden
state uses the input gate.
"""
from __future__ import annotations

import operator

import numpy as np

from acelera.core.kernels.common import scale_zp
from acelera.core.kernels.lstm_fixedpoint import checked_log2, layer_norm_int, lookup, rdbpot, table, wrap16, wrap32
from acelera.core.kernels.lstm_float import native_input, state_view
from acelera.core.kernels.lstm_spec import GATES, Spec, args_of
from acelera.core.kernels.registry import NodeContext
from acelera.core.kernels.rnn import Cached
from acelera.core.model import Tensor
from acelera.core.quant import multiply_by_quantized_multiplier, quantize_multiplier

try:  # the clip ufunc itself: np.clip's Python wrapper costs a few microseconds per call
    from numpy._core.umath import clip as clip_ufunc  # type: ignore[attr-defined]  # not in numpy's stubs
except ImportError:  # pragma: no cover - numpy < 2
    clip_ufunc = np.clip

def _intermediates(node: NodeContext) -> list[Tensor] | None:
    """The node's intermediate tensors, looked up in the model the node belongs to."""
    runtime = node.runtime
    if runtime is None:
        return None
    for sg in runtime.model.subgraphs:
        if node.index < len(sg.operators) and sg.operators[node.index] is node.op:
            return [sg.tensors[i] for i in node.op.intermediates]
    return None


class IntegerCell:
    """LstmStepInteger8x8_16 (PopulateQuantizedLstmParams8x8_16 at prepare)."""

    def __init__(self, node: NodeContext, spec: Spec, inp: Tensor, out: Tensor):
        self.spec = spec
        inter = _intermediates(node)
        if inter is None:
            raise node.unsupported("the integer LSTM needs the node's intermediate tensors")
        if len(inter) != 5:
            raise node.unsupported(f"the integer LSTM needs 5 intermediate tensors (8x8_16), got {len(inter)}")
        h_t, c_t = spec.tensor(node, "h"), spec.tensor(node, "c")
        assert h_t is not None and c_t is not None  # Spec refused missing state tensors
        for t, what in ((c_t, "cell state"), (out, "output"), (inter[4], "intermediate 4")) + tuple(
                (inter[k], f"intermediate {k}") for k in range(4) if spec.use_ln):
            if not t.quantized:
                raise node.unsupported(f"the integer LSTM needs a quantized {what}")
        f32 = np.float32

        def sc(t):
            return f32(scale_zp(t)[0]) if t is not None else f32(1)
        inter_scale = [sc(inter[k]) if spec.use_ln else f32(2.0 ** -12) for k in range(4)] + [sc(inter[4])]
        self.hidden_zp = scale_zp(inter[4])[1]
        ok, cell_log2 = checked_log2(float(scale_zp(c_t)[0]))
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
        self.tanh_out = table("tanh", 15 + cell_log2) if self.tanh_in_range else None
        self.sigmoid, self.tanh3 = table("logistic", 3), table("tanh", 3)
        L = spec.layout
        self.indices = tuple(L.w[gk[g]] for g in spec.gates) + tuple(L.r[gk[g]] for g in spec.gates) + tuple(
            L.b[gk[g]] for g in spec.gates) + tuple(
            L.peep["ifo".index(g)] if spec.peephole and g != "c" else None for g in spec.gates) + tuple(
            L.ln[gk[g]] if spec.use_ln and L.ln is not None else None for g in spec.gates) + (L.proj_w, L.proj_b)
        self.params = Cached(self._build)
        # IntegerSequence runs the cell when: no layer norm, peephole or projection; i * g shifts
        # right (cell scale >= 2^-29); the output multiplier does not shift left and its rounding
        # constant (with the zero point) stays in int64; the logistic stays in [0, 32767] (no
        # int16 wrap in f * c, i * g or 32767 - f).
        sh_h = self.m_hidden[1]
        e_h = max(0, -sh_h)
        self.fast = (not (spec.use_ln or spec.peephole or spec.use_proj) and 30 + cell_log2 >= 1 and sh_h <= 0
                     and (1 << 61) + (1 << 31) + (1 << (30 + e_h)) + abs(self.hidden_zp) * (1 << (31 + e_h)) < 1 << 63
                     and int(self.sigmoid.min()) >= 0 and int(self.sigmoid.max()) <= 32767)

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
            p["bw", g] = wrap32(in_bias - self.in_zp * w.sum(axis=1))
            p["br", g] = wrap32(-self.h_zp * r.sum(axis=1))
            p["b", g] = b
            p["p", g] = i64(arrays[3 * k + j])
            p["ln", g] = i64(arrays[4 * k + j])
        pw, pb = i64(arrays[5 * k]), i64(arrays[5 * k + 1])
        if pw is not None:
            p["pw"] = pw.T.copy()
            p["pb"] = wrap32((pb if pb is not None else 0) + self.hidden_zp * pw.sum(axis=1))
        return p

    def bind(self, args):
        return self.params.get(*args_of(args, self.indices))

    def _peephole(self, acc, weights, cell, m, time_major: bool):
        """VectorBatchVectorCwiseProductAccumulate with LiteRT's v_size = n_output: it walks the
        first n_output values of each batch row (batch-major) or of the flattened block."""
        n_out = self.spec.n_output
        if time_major:
            flat_acc, flat_cell = acc.reshape(-1), cell.reshape(-1)
            n = flat_acc.size // self.spec.n_cell * n_out
            w = np.tile(weights[:n_out], max(n // max(n_out, 1), 0))
            prod = multiply_by_quantized_multiplier(w * flat_cell[:n], *m)
            flat_acc[:n] = np.clip(flat_acc[:n] + prod, -32768, 32767)
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
                acc = layer_norm_int(acc, p["ln", g], p["b", g], a, s, guard)
            return lookup(acc, self.tanh3 if g == "c" else self.sigmoid)

        gi = gate("i", c) if not spec.cifg else None
        gf = gate("f", c)
        gc = gate("c", None)
        c_new = wrap16(rdbpot(gf * c, 15))
        shift = 30 + self.cell_log2
        if spec.cifg:
            scratch = wrap16(rdbpot(wrap16(32767 - gf) * gc, shift))
        else:
            scratch = wrap16(rdbpot(gi * gc, shift))
        c_new = np.clip(c_new + scratch, -32768, 32767)
        if self.cell_clip > 0:
            c_new = np.clip(c_new, -self.cell_clip, self.cell_clip)
        go = gate("o", c_new)
        t = lookup(c_new, self.tanh_out) if self.tanh_out is not None else gi  # tanh_in_range
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


# --- the fast integer loop -----------------------------------------------------------------------

SEG = 1 << 16  # entries of one int16 lookup table: the four gate tables sit side by side
VIEW_STEPS = 4096  # up to this many steps the per-step views are made once, at prepare
_EXACT = 1 << 53  # integers below this are exact in float64
_48, _63, _MIN16, _MAX16 = (np.array(v, np.int64) for v in (48, 63, -32768, 32767))


def _rolled(values: np.ndarray) -> np.ndarray:
    """A table of all int16 raw values (indexed x + 32768) indexed by x itself (x < 0 from the end)."""
    return np.concatenate([values[32768:], values[:32768]])


class _ColumnProducts:
    """acc = [v, 1] @ [w; bias] for int8 rows v, then MultiplyByQuantizedMultiplier(acc, m, shift)
    per column: one matmul and a few ufuncs.

    With e = max(-shift, 0) and a left shift folded into the multiplier (acc << shift must fit
    int32, `ok` is False otherwise), RoundingDivideByPOT(SRDHM(acc, m), e) is
    floor((acc m + 2^30 + 2^(30+e) - 2^31 [acc m < 0]) / 2^(31+e)) for e >= 1, and
    floor((acc m + 2^30) / 2^31) for e = 0. Where every value stays below 2^53 (`exact`) the matmul
    runs in float64 on the weights times m 2^-(31+e), half a unit of the result's grid coming in
    through the bias row, and the result is trunc(q + copysign(a, q)), a = 1/2 + 2^-(1+e) - 2^-(32+e)
    (1/2 - 2^-32 for e = 0); otherwise in int64, rounded with integer shifts."""

    def __init__(self, w: np.ndarray, bias: np.ndarray, m: np.ndarray, shift: np.ndarray, rows: int):
        pre, e = np.maximum(shift, 0), np.maximum(-shift, 0)
        m = m << pre
        bound = (np.abs(bias) + 128 * np.abs(w).sum(axis=0)) << pre
        self.ok = bool(bound.max(initial=0) < 1 << 31)
        # No result exceeds this in magnitude (|acc m| / 2^(31+e), rounded up, plus one).
        self.limit = max(((int(b) * int(mj)) >> (31 + int(ej))) + 2 for b, mj, ej in zip(bound, m, e)) if len(m) else 0
        self.exact = self.ok and all(2 * int(b) * int(mj) + (1 << (33 + int(ej))) < _EXACT
                                     for b, mj, ej in zip(bound, m, e))
        full = (rows, w.shape[1])
        if self.exact:
            self.dtype: type[np.generic] = np.float64
            scale = m.astype(np.float64) * np.exp2(-(31.0 + e))
            self.w = np.concatenate([w * scale, (bias * scale + np.exp2(-(32.0 + e)))[None]], 0)
            self.a = np.broadcast_to(0.5 + np.where(e > 0, np.exp2(-(1.0 + e)), 0.0) - np.exp2(-(32.0 + e)),
                                     full).copy()
        else:
            self.dtype = np.int64
            self.w = np.concatenate([w * m, (bias * m)[None]], 0)
            self.k, self.sign, self.s = (np.broadcast_to(a, full).copy() for a in (
                (1 << 30) + np.where(e > 0, np.int64(1) << (30 + e), 0), np.where(e > 0, np.int64(1) << 31, 0),
                31 + e))
        self.q, self.t = np.zeros(full, self.dtype), np.zeros(full, self.dtype)

    def __call__(self, v: np.ndarray, out: np.ndarray) -> None:
        """out (int64) = the products of the rows of v = [int8 values, 1] (of self.dtype)."""
        q, t = self.q, self.t
        np.dot(v, self.w, q)
        if self.exact:
            np.copysign(self.a, q, t)
            np.add(q, t, q)
            np.copyto(out, q, casting="unsafe")
        else:
            np.right_shift(q, _63, t)
            np.bitwise_and(t, self.sign, t)
            np.subtract(q, t, q)
            np.add(q, self.k, q)
            np.right_shift(q, self.s, out)


class IntegerSequence:
    """LstmStepInteger8x8_16 over a whole sequence on preallocated buffers, for an integer cell
    without layer norm, peephole or projection.

    The input-to-gate products of all steps are computed up front (and clamped to int16). Per step
    one matmul of [h, 1] with the stacked recurrent weights gives the recurrent products of the four
    gates (_ColumnProducts), whose sum with the input products is clamped to int16 only where the
    weights' bounds allow it to leave that range; the gate columns are laid out [o, i, f, g], offset
    into four side-by-side int16 tables so that one lookup serves the logistic and tanh (CIFG's
    input gate column is the forget gate's pre-activation, its table 32767 - logistic), and with the
    cell state after them [i, f] * [g, c] is one product. The output state's
    MultiplyByQuantizedMultiplier(o * tanh(c), m) takes m from the output gate's table, and its
    sign-dependent rounding constant from a table indexed by c (the sign of tanh(c)); below LiteRT's
    tanh range the input gate (>= 0) stands in for tanh(c) and the constant is fixed.
    """

    def __init__(self, cell: IntegerCell, nt: int, nb: int, time_major: bool, out_shape: tuple):
        spec = cell.spec
        self.out_shape, self.h_idx, self.c_idx = out_shape, spec.layout.h, spec.layout.c
        nc, no, ni = spec.n_cell, spec.n_output, spec.n_input
        self.cell, self.nt, self.nb, self.no, self.nc, self.ni = cell, nt, nb, no, nc, ni
        self.src = ["o", "f" if spec.cifg else "i", "f", "c"]
        L = spec.layout
        self.arg_idx = tuple(getattr(L, f)[GATES.index(g)] for f in ("w", "r", "b") for g in spec.gates)
        self.key: tuple | None = None
        self.built: tuple | None = None

        def cols(values) -> np.ndarray:
            return np.repeat(np.asarray(values, np.int64), nc)
        self.m_in, self.s_in = (cols([cell.m_in[g][k] for g in self.src]) for k in (0, 1))
        self.m_rec, self.s_rec = (cols([cell.m_rec[g][k] for g in self.src]) for k in (0, 1))
        seg_lo = cols([SEG * k for k in range(4)])
        self.offset = np.broadcast_to(seg_lo + 32768, (nt * nb, 4 * nc)).copy()
        self.lo, self.hi = (np.broadcast_to(a, (nb, 4 * nc)).copy() for a in (seg_lo, seg_lo + 65535))
        m_h, sh_h = cell.m_hidden
        e_h = -sh_h
        sig = cell.sigmoid
        self.table = np.concatenate([sig * m_h, 32767 - sig if spec.cifg else sig, sig, cell.tanh3])
        shift_i = 30 + cell.cell_log2
        self.wrap = shift_i < 15  # i * g >> shift_i can leave the int16 range (f * c >> 15 cannot)
        self.half = np.broadcast_to(np.repeat([1 << (shift_i - 1), 1 << 14], nc), (nb, 2 * nc)).copy()
        self.es = np.broadcast_to(np.repeat([shift_i, 15], nc), (nb, 2 * nc)).copy()
        # With the wrap, v >> e in int16 is (v << (48 - e)) >> 48 (the left shift on the uint64 view).
        self.es_left = (48 - self.es).astype(np.uint64)
        cc = cell.cell_clip
        self.c_lo = np.array(max(-32768, -cc) if cc > 0 else -32768, np.int64)
        self.c_hi = np.array(min(32767, cc) if cc > 0 else 32767, np.int64)
        k_h = (1 << 30) + ((1 << (30 + e_h)) if e_h else 0) + cell.hidden_zp * (1 << (31 + e_h))
        self.tanh: np.ndarray | None
        if cell.tanh_in_range:
            assert cell.tanh_out is not None
            sign = (1 << 31) if e_h else 0
            self.tanh, self.nk = _rolled(cell.tanh_out), _rolled(k_h - sign * (cell.tanh_out < 0))
        else:
            self.tanh, self.nk = None, np.array(k_h, np.int64)
        self.s_h = np.array(31 + e_h, np.int64)
        self.h_lo, self.h_hi = np.array(-128, np.int64), np.array(127, np.int64)
        rows = nt * nb
        self.IN = np.zeros((rows, 4 * nc), np.int64)
        self.IN3 = (self.IN.reshape(nt, nb, 4 * nc) if time_major
                    else self.IN.reshape(nb, nt, 4 * nc).transpose(1, 0, 2))
        self.time_major = time_major
        self.X: dict = {}  # [x, 1] rows of the input products, per dtype (made on first use)
        self.H: dict = {}  # per dtype: H [n_time + 1, batch, n_output + 1] ([h, 1] of each step) and views
        self.Z = np.zeros((nb, 5 * nc), np.int64)
        self.V, self.OUT = np.zeros((nb, 4 * nc), np.int64), np.zeros((nb, nc), np.int64)
        self.PR, self.NEG = np.zeros((nb, 2 * nc), np.int64), np.zeros((nb, 2 * nc), np.int64)
        self.PRu = self.PR.view(np.uint64)
        self.C = self.Z[:, 4 * nc:]

    def _rows(self, dt) -> np.ndarray:
        if dt not in self.X:
            self.X[dt] = np.ones((self.IN.shape[0], self.ni + 1), dt)
        return self.X[dt]

    def _states(self, dt) -> tuple:
        """H of dtype dt, its initial, last and output views, and the per-step views (or None)."""
        if dt not in self.H:
            nt, no = self.nt, self.no
            H = np.ones((nt + 1, self.nb, no + 1), dt)
            out = H[1:, :, :no] if self.time_major else H[1:, :, :no].transpose(1, 0, 2)
            self.H[dt] = (H, H[0, :, :no], H[nt, :, :no], out, self._views(H) if nt <= VIEW_STEPS else None)
        return self.H[dt]

    def _views(self, H: np.ndarray) -> tuple[list, list, list]:
        return ([H[t] for t in range(self.nt)], [H[t + 1, :, :self.no] for t in range(self.nt)],
                [self.IN3[t] for t in range(self.nt)])

    def _build(self, p: dict) -> tuple | None:
        """The input and recurrent products for the cell's params; None where a recurrent
        accumulator could wrap (the step-by-step path handles that)."""
        rec = _ColumnProducts(np.concatenate([p["r", g] for g in self.src], 1),
                              np.concatenate([p["br", g] for g in self.src]), self.m_rec, self.s_rec, self.nb)
        if not rec.ok:
            return None
        w_in = np.concatenate([p["w", g] for g in self.src], 1)
        bw = np.concatenate([p["bw", g] for g in self.src])
        inp = _ColumnProducts(w_in, bw, self.m_in, self.s_in, self.IN.shape[0])
        # Whether input + recurrent products can leave int16 (LiteRT clamps them at each step).
        saturate = not inp.ok or inp.limit + rec.limit > 32767
        return inp, rec, w_in, bw, saturate

    def __call__(self, args) -> np.ndarray | None:
        """The int8 output (updating the state tensors), or None when the weights need the
        step-by-step path."""
        key = tuple(args[i] for i in self.arg_idx)
        if self.key is None or any(a is not b for a, b in zip(key, self.key)):
            self.built, self.key = self._build(self.cell.bind(args)), key
        if self.built is None:
            return None
        inp, rec, w_in, bw, saturate = self.built
        x2 = np.asarray(args[0]).reshape(self.IN.shape[0], self.ni)
        IN = self.IN
        if inp.ok:
            X = self._rows(inp.dtype)
            X[:, :self.ni] = x2
            inp(X, IN)
        else:
            IN[...] = multiply_by_quantized_multiplier(x2.astype(np.int64) @ w_in + bw, self.m_in, self.s_in)
        if saturate:
            clip_ufunc(IN, _MIN16, _MAX16, IN)
        np.add(IN, self.offset, IN)
        H, h0, h_last, out, views = self._states(rec.dtype)
        h_state, c_state = args[self.h_idx], args[self.c_idx]
        np.copyto(h0, h_state.reshape(h0.shape))
        np.copyto(self.C, c_state.reshape(self.C.shape))
        self._run(rec, saturate, *(views or self._views(H)))
        np.copyto(h_state, h_last.reshape(h_state.shape), casting="unsafe")
        np.copyto(c_state, self.C.reshape(c_state.shape), casting="unsafe")
        return out.astype(np.int8, order="C").reshape(self.out_shape)

    def _run(self, rec: _ColumnProducts, saturate: bool, h_in: list, h_out: list, in_t: list) -> None:
        nc = self.nc
        dot, add, mul, rshift, clip = np.dot, np.add, np.multiply, np.right_shift, clip_ufunc
        Z, V, PR, NEG, OUT = self.Z, self.V, self.PR, self.NEG, self.OUT
        Z4, O, I, IF, GC, C = Z[:, :4 * nc], Z[:, :nc], Z[:, nc:2 * nc], Z[:, nc:3 * nc], Z[:, 3 * nc:], Z[:, 4 * nc:]
        PR1, PR2, PRu, es_left = PR[:, :nc], PR[:, nc:], self.PRu, self.es_left
        lo, hi, table, half, es, c_lo, c_hi = self.lo, self.hi, self.table, self.half, self.es, self.c_lo, self.c_hi
        tanh, nk, s_h, h_lo, h_hi, wrap = self.tanh, self.nk, self.s_h, self.h_lo, self.h_hi, self.wrap
        w, q, tmp, exact = rec.w, rec.q, rec.t, rec.exact
        if exact:
            a = rec.a
        else:
            k, sign, s = rec.k, rec.sign, rec.s
        for t in range(self.nt):
            dot(h_in[t], w, q)
            if exact:
                np.copysign(a, q, tmp)
                add(q, tmp, q)
                np.copyto(V, q, casting="unsafe")
            else:
                rshift(q, _63, tmp)
                np.bitwise_and(tmp, sign, tmp)
                np.subtract(q, tmp, q)
                add(q, k, q)
                rshift(q, s, V)
            add(V, in_t[t], V)
            if saturate:
                clip(V, lo, hi, V)
            Z4[...] = table[V]
            mul(IF, GC, PR)
            rshift(PR, _63, NEG)
            add(PR, NEG, PR)
            add(PR, half, PR)
            if wrap:
                np.left_shift(PRu, es_left, PRu)
                rshift(PR, _48, PR)
            else:
                rshift(PR, es, PR)
            add(PR1, PR2, C)
            clip(C, c_lo, c_hi, C)
            if tanh is not None:
                out = tanh[C]
                mul(out, O, out)
                add(out, nk[C], out)
            else:
                out = OUT
                mul(O, I, out)
                add(out, nk, out)
            rshift(out, s_h, out)
            if exact:  # h feeds the float64 matmul
                clip(out, h_lo, h_hi, out)
                np.copyto(h_out[t], out)
            else:
                clip(out, h_lo, h_hi, h_out[t])


class NativeSequence:
    """LstmStepInteger8x8_16 over a whole sequence in sequence_native.lstm_int8, for an integer
    cell without layer norm or peephole whose i * g product shifts right (cell scale >= 2^-30)."""

    def __init__(self, kernel, cell: IntegerCell, nt: int, nb: int, time_major: bool, out_shape: tuple):
        from acelera.core.kernels import sequence_native as sn
        spec = cell.spec
        self.kernel, self.cell, self.out_shape = kernel, cell, out_shape
        self.nt, self.nb, self.ni, self.nc, self.no = nt, nb, spec.n_input, spec.n_cell, spec.n_output
        self.h_idx, self.c_idx = spec.layout.h, spec.layout.c
        cfg = [0] * (sn.PROJ_CLIP + 1)
        cfg[sn.N_TIME], cfg[sn.N_BATCH], cfg[sn.TIME_MAJOR], cfg[sn.CIFG] = nt, nb, int(time_major), int(spec.cifg)
        cfg[sn.USE_PROJ], cfg[sn.CELL_SHIFT], cfg[sn.CELL_CLIP] = int(spec.use_proj), 30 + cell.cell_log2, cell.cell_clip
        cfg[sn.M_HIDDEN], cfg[sn.S_HIDDEN] = cell.m_hidden
        cfg[sn.HIDDEN_ZP], cfg[sn.TANH_IN_RANGE], cfg[sn.H_ZP] = cell.hidden_zp, int(cell.tanh_in_range), cell.h_zp
        if spec.use_proj:
            cfg[sn.M_PROJ], cfg[sn.S_PROJ] = cell.m_proj
            cfg[sn.PROJ_CLIP] = cell.proj_clip
        self.cfg = np.array(cfg, np.int64)
        tanh = cell.tanh_out if cell.tanh_out is not None else np.zeros(SEG, np.int64)
        self.tables = np.stack([cell.sigmoid, cell.tanh3, tanh]).astype(np.int64)
        self.key: dict | None = None
        self.built: tuple = ()
        indices = tuple(i for i in cell.indices if i is not None)
        # The weights' ids (valid while the cell's cache holds them), picked in one call.
        self.pick = operator.itemgetter(*indices, *indices[:1])
        self.top = max(indices)
        self.ids: tuple | None = None

    @staticmethod
    def applies(cell: IntegerCell) -> bool:
        spec = cell.spec
        return not (spec.use_ln or spec.peephole) and 30 + cell.cell_log2 >= 0

    def _build(self, p: dict) -> tuple:
        ni, nc, no = self.ni, self.nc, self.no
        w_in, w_rec = np.zeros((ni, 4 * nc), np.int64), np.zeros((no, 4 * nc), np.int64)
        cols = np.zeros((6, 4 * nc), np.int64)
        cell = self.cell
        for j, g in enumerate(GATES):
            if g not in cell.spec.gates:
                continue
            s = slice(j * nc, (j + 1) * nc)
            w_in[:, s], w_rec[:, s] = p["w", g], p["r", g]
            cols[0, s], cols[1, s], cols[2, s] = p["bw", g], *cell.m_in[g]
            cols[3, s], cols[4, s], cols[5, s] = p["br", g], *cell.m_rec[g]
        proj = np.zeros((nc + 1, no), np.int64)
        if cell.spec.use_proj:
            proj[:nc], proj[nc] = p["pw"], p["pb"]
        return w_in, w_rec, cols, proj

    def __call__(self, args) -> np.ndarray:
        """The int8 output (updating the state tensors)."""
        ids = tuple(map(id, self.pick(args))) if len(args) > self.top else None
        if ids is None or ids != self.ids:
            p = self.cell.bind(args)
            if p is not self.key:
                self.built, self.key = self._build(p), p
            self.ids = ids
        w_in, w_rec, cols, proj = self.built
        rows = self.nt * self.nb
        x = native_input(args[0], rows, self.ni, np.int8)
        h_state, c_state = args[self.h_idx], args[self.c_idx]
        h, h_copy = state_view(h_state, (self.nb, self.no), np.int8)
        c, c_copy = state_view(c_state, (self.nb, self.nc), np.int16)
        out = np.empty((rows, self.no), np.int8)
        self.kernel(x, w_in, w_rec, cols, self.tables, proj, h, c, out, self.cfg)
        if h_copy:
            h_state[...] = h.reshape(h_state.shape)
        if c_copy:
            c_state[...] = c.reshape(c_state.shape)
        return out.reshape(self.out_shape)

