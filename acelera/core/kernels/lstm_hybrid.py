"""One direction's float or hybrid LSTM step on a block of batch rows (lstm_eval.cc LstmStepFloat
and LstmStepHybrid), as the hybrid LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM and both directions of
BIDIRECTIONAL_SEQUENCE_LSTM run it.

Mirrors tflite/kernels/lstm_eval.cc (CalculateLstmGateFloat / CalculateLstmGateHybrid,
UpdateLstmCellFloat, CalculateLstmOutputFloat / CalculateLstmOutputHybrid), with the hybrid
arithmetic (per-row activation quantization, int8 dot products) of rnn.py; peephole weights of a
hybrid cell are int8 times their scale.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.common import NONE, scale_zp
from acelera.core.kernels.lstm_float import activation_inplace, sigmoid_inplace
from acelera.core.kernels.lstm_spec import GATES, Spec, args_of
from acelera.core.kernels.registry import NodeContext
from acelera.core.kernels.rnn import Cached, QuantWeights, hybrid_accumulate, quantize_rows


def _mean_stddev_norm(x: np.ndarray) -> np.ndarray:
    """MeanStddevNormalization (variance + 1e-8) over the last axis, float32."""
    mean = np.mean(x, axis=-1, keepdims=True, dtype=np.float32)
    diff = x - mean
    var = np.mean(diff * diff, axis=-1, keepdims=True, dtype=np.float32)
    return diff * (np.float32(1) / np.sqrt(var + np.float32(1e-8)))


class FloatOrHybridCell:
    """LstmStepFloat / LstmStepHybrid for a block of batch rows.

    Hybrid rows are independent (LiteRT's all-zero skips only avoid adding zeros). The float
    kernel's NONE cell activation leaves the cell gate as its scratch buffers hold it, which
    depends on which of the input, aux input and recurrent products ran (all-zero input blocks
    are skipped): see FloatOrHybridCell.step."""

    def __init__(self, node: NodeContext, spec: Spec):
        self.spec = spec
        self.hybrid = spec.mode == "hybrid"
        L = spec.layout
        idx: list[int | None] = []
        idx += [L.w[GATES.index(g)] for g in spec.gates] + [L.r[GATES.index(g)] for g in spec.gates]
        idx += [L.b[GATES.index(g)] for g in spec.gates]
        idx += [L.peep["ifo".index(g)] if spec.peephole and g != "c" and not (g == "i" and spec.cifg) else None
                for g in spec.gates]
        idx += [L.ln[GATES.index(g)] if spec.use_ln and L.ln is not None else None for g in spec.gates]
        idx += [L.aux_w[GATES.index(g)] if spec.aux_size is not None and L.aux_w is not None else None for g in spec.gates]
        idx += [L.proj_w, L.proj_b]
        self.indices = tuple(idx)
        self.scales = tuple(scale_zp(t)[0] if i is not None and (t := node.input(i)) is not None else 0.0
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
        return self.params.get(*args_of(args, self.indices))

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
                return sigmoid_inplace(acc)
            if act != NONE:
                return activation_inplace(acc, act)
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
        hc = gc.copy() if act == NONE else activation_inplace(c_new.copy(), act)
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
