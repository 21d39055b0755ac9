"""numba loops of the sequence kernels: the time-step recurrences numpy cannot vectorize.

- lstm_float: lstm_eval.cc EvalFloat (LstmStepFloat: CalculateLstmGateFloat, UpdateLstmCellFloat,
  CalculateLstmOutputFloat) without layer norm, peephole or diagonal weights, for a
  non-NONE activation; the sums run in LiteRT's order (bias + input products + recurrent products).
- lstm_int8: lstm_eval.cc EvalInteger8x8_16 (LstmStepInteger8x8_16) without layer norm or
  peephole: int32 accumulators (wrapped), MultiplyByQuantizedMultiplier, gemmlowp's int16
  logistic / tanh as tables, in int64 arithmetic.

Every jitted function of the reference lives in this module and calls none of another module
(numba's cache watches only the defining file). numba is imported, and the loops compiled (or
loaded from numba's on-disk cache), on first use: `kernels()` returns them, or None when numba
cannot be imported (the callers then run their numpy loops).

Argument layout (all C-contiguous): per-step rows of x / out are t * batch + b (time-major) or
b * time + t (batch-major); the four gates' columns are [i, f, c, o] blocks of n_cell; the state
arrays are [batch, n] and are updated in place.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

# cfg (int64) indices shared by both loops
N_TIME, N_BATCH, TIME_MAJOR, REVERSE, OUT_COL, CIFG, PROJECT, USE_PROJ = range(8)
# lstm_float cfg: ACT = 8; lstm_int8 cfg: the fixed-point parameters from 8 on
ACT = 8
CELL_SHIFT, CELL_CLIP, M_HIDDEN, S_HIDDEN, HIDDEN_ZP, TANH_IN_RANGE, M_PROJ, S_PROJ, H_ZP, PROJ_CLIP = range(8, 18)
# lstm_int8 per-column rows of `cols`
C_BIAS_IN, C_M_IN, C_S_IN, C_BIAS_REC, C_M_REC, C_S_REC = range(6)


def _act(z, act):  # pragma: no cover - compiled
    """ApplyActivationToVector on one float32 value (act != NONE); numba's float32 tanh is
    several times slower than the exp form."""
    one = np.float32(1.0)
    zero = np.float32(0.0)
    if act == 4:
        return one - np.float32(2.0) / (one + np.exp(np.float32(2.0) * z))
    if act == 1:
        return max(z, zero)
    if act == 3:
        return min(max(z, zero), np.float32(6.0))
    if act == 2:
        return min(max(z, -one), one)
    if act == 6:
        return one / (one + np.exp(-z))
    return one if math.copysign(1.0, z) < 0 else zero


def _lstm_float(x, w_in, xw, w_rec, proj, h, c, out, cfg, clips):  # pragma: no cover - compiled
    """x [rows, n_in], w_in [n_in + 1, 4 n_cell] (the last row: the biases), xw [rows, 4 n_cell]
    (filled here when cfg[PROJECT], else the caller's bias + input products), w_rec
    [n_output, 4 n_cell], proj [n_cell + 1, n_output] (the last row: its bias), h [batch,
    n_output], c [batch, n_cell], out [rows, >= OUT_COL + n_output]."""
    nt, nb, tm, rev, col, cifg, act = cfg[N_TIME], cfg[N_BATCH], cfg[TIME_MAJOR], cfg[REVERSE], cfg[OUT_COL], \
        cfg[CIFG], cfg[ACT]
    use_proj = cfg[USE_PROJ]
    cell_clip, proj_clip = clips[0], clips[1]
    ni = x.shape[1]
    g4 = w_rec.shape[1]
    nc = g4 // 4
    no = w_rec.shape[0]
    one = np.float32(1.0)
    zero = np.float32(0.0)
    if cfg[PROJECT]:
        acc = np.empty(g4, np.float32)
        for r in range(x.shape[0]):
            for j in range(g4):
                acc[j] = zero
            for k in range(ni):
                v = x[r, k]
                for j in range(g4):
                    acc[j] += v * w_in[k, j]
            for j in range(g4):
                xw[r, j] = w_in[ni, j] + acc[j]
    g = np.empty(g4, np.float32)
    m = np.empty(nc, np.float32)
    for s in range(nt):
        t = nt - 1 - s if rev else s
        for b in range(nb):
            row = t * nb + b if tm else b * nt + t
            for j in range(g4):
                g[j] = zero
            for k in range(no):
                v = h[b, k]
                for j in range(g4):
                    g[j] += v * w_rec[k, j]
            for j in range(g4):
                g[j] = xw[row, j] + g[j]
            for j in range(nc):
                f = one / (one + np.exp(-g[nc + j]))
                i = one - f if cifg else one / (one + np.exp(-g[j]))
                z = _act(g[2 * nc + j], act)
                cv = c[b, j] * f + z * i
                if cell_clip > zero:
                    cv = min(max(cv, -cell_clip), cell_clip)
                c[b, j] = cv
                m[j] = one / (one + np.exp(-g[3 * nc + j])) * _act(cv, act)
            if use_proj:
                for k in range(no):
                    h[b, k] = zero
                for j in range(nc):
                    v = m[j]
                    for k in range(no):
                        h[b, k] += v * proj[j, k]
                for k in range(no):
                    v = proj[nc, k] + h[b, k]
                    if proj_clip > zero:
                        v = min(max(v, -proj_clip), proj_clip)
                    h[b, k] = v
            else:
                for j in range(nc):
                    h[b, j] = m[j]
            for k in range(no):
                out[row, col + k] = h[b, k]


def _mbqm(acc, mult, shift):  # pragma: no cover - compiled (inlined)
    """MultiplyByQuantizedMultiplier of an int32 value (int64 carrier), multiplier >= 0."""
    if shift > 0:
        acc = ((acc << shift) + 2147483648 & 4294967295) - 2147483648
    v = (acc * mult + 1073741824) >> 31
    e = -shift if shift < 0 else 0
    if e == 0:
        return v
    mask = (np.int64(1) << e) - 1
    rem = v & mask
    thr = (mask >> 1) + (1 if v < 0 else 0)
    return (v >> e) + (1 if rem > thr else 0)


def _lstm_int8(x, w_in, w_rec, cols, tables, proj, h, c, out, cfg):  # pragma: no cover - compiled
    """x int8 [rows, n_in], w_in int64 [n_in, 4 n_cell], w_rec int64 [n_output, 4 n_cell], cols
    int64 [6, 4 n_cell] (effective biases, multipliers and shifts of the input and recurrent
    products), tables int64 [3, 65536] (logistic, tanh with 3 integer bits, the cell state's
    tanh; indexed raw + 32768), proj int64 [n_cell + 1, n_output] (its effective bias last),
    h int8 [batch, n_output], c int16 [batch, n_cell], out int8 [rows, >= OUT_COL + n_output]."""
    nt, nb, tm, rev, col, cifg = cfg[N_TIME], cfg[N_BATCH], cfg[TIME_MAJOR], cfg[REVERSE], cfg[OUT_COL], cfg[CIFG]
    use_proj, sh_c, cclip = cfg[USE_PROJ], cfg[CELL_SHIFT], cfg[CELL_CLIP]
    m_h, s_h, hzp, tanh_ok = cfg[M_HIDDEN], cfg[S_HIDDEN], cfg[HIDDEN_ZP], cfg[TANH_IN_RANGE]
    m_p, s_p, ozp, pclip = cfg[M_PROJ], cfg[S_PROJ], cfg[H_ZP], cfg[PROJ_CLIP]
    ni = x.shape[1]
    g4 = w_rec.shape[1]
    nc = g4 // 4
    no = w_rec.shape[0]
    rows = x.shape[0]
    gin = np.empty((rows, g4), np.int64)
    acc = np.empty(g4, np.int64)
    for r in range(rows):
        for j in range(g4):
            acc[j] = 0
        for k in range(ni):
            v = np.int64(x[r, k])
            for j in range(g4):
                acc[j] += v * w_in[k, j]
        for j in range(g4):
            a = ((cols[C_BIAS_IN, j] + acc[j]) + 2147483648 & 4294967295) - 2147483648
            a = _mbqm(a, cols[C_M_IN, j], cols[C_S_IN, j])
            gin[r, j] = min(max(a, -32768), 32767)
    hid = np.empty(nc, np.int64)
    hsum = np.empty(no, np.int64)
    for s in range(nt):
        t = nt - 1 - s if rev else s
        for b in range(nb):
            row = t * nb + b if tm else b * nt + t
            for j in range(g4):
                acc[j] = 0
            for k in range(no):
                v = np.int64(h[b, k])
                for j in range(g4):
                    acc[j] += v * w_rec[k, j]
            for j in range(g4):
                a = ((cols[C_BIAS_REC, j] + acc[j]) + 2147483648 & 4294967295) - 2147483648
                a = _mbqm(a, cols[C_M_REC, j], cols[C_S_REC, j]) + gin[row, j]
                acc[j] = min(max(a, -32768), 32767) + 32768
            for j in range(nc):
                f = tables[0, acc[nc + j]]
                i = 32767 - f if cifg else tables[0, acc[j]]
                z = tables[1, acc[2 * nc + j]]
                o = tables[0, acc[3 * nc + j]]
                fc = np.int64(c[b, j]) * f
                mask = (np.int64(1) << 15) - 1
                fc = (fc >> 15) + (1 if (fc & mask) > (mask >> 1) + (1 if fc < 0 else 0) else 0)
                fc = ((fc + 32768) & 65535) - 32768
                iz = i * z
                if sh_c > 0:
                    mask = (np.int64(1) << sh_c) - 1
                    iz = (iz >> sh_c) + (1 if (iz & mask) > (mask >> 1) + (1 if iz < 0 else 0) else 0)
                iz = ((iz + 32768) & 65535) - 32768
                cv = min(max(fc + iz, -32768), 32767)
                if cclip > 0:
                    cv = min(max(cv, -cclip), cclip)
                c[b, j] = cv
                th = tables[2, cv + 32768] if tanh_ok else i
                if use_proj:
                    hid[j] = min(max(_mbqm(o * th, m_h, s_h) - hzp, -128), 127)
                else:
                    hid[j] = min(max(_mbqm(o * th, m_h, s_h) + hzp, -128), 127)
            if use_proj:
                for k in range(no):
                    hsum[k] = 0
                for j in range(nc):
                    v = hid[j]
                    for k in range(no):
                        hsum[k] += v * proj[j, k]
                for k in range(no):
                    a = ((proj[nc, k] + hsum[k]) + 2147483648 & 4294967295) - 2147483648
                    a = min(max(_mbqm(a, m_p, s_p) + ozp, -128), 127)
                    if pclip > 0:
                        a = min(max(a, -pclip), pclip)
                    h[b, k] = a
            else:
                for j in range(nc):
                    h[b, j] = hid[j]
            for k in range(no):
                out[row, col + k] = h[b, k]


_KERNELS: dict[str, Any] | None = None
_FAILED = False


def kernels() -> dict[str, Any] | None:
    """{'lstm_float': ..., 'lstm_int8': ...} compiled on first call (None without numba)."""
    global _KERNELS, _FAILED, _mbqm, _act
    if _KERNELS is None and not _FAILED:
        try:
            import numba
        except Exception:  # pragma: no cover - numba is a dependency
            _FAILED = True
            return None
        _mbqm = numba.njit(cache=True)(_mbqm)
        _act = numba.njit(cache=True)(_act)
        _KERNELS = {name: numba.njit(cache=True, nogil=True)(fn)
                    for name, fn in (("lstm_float", _lstm_float), ("lstm_int8", _lstm_int8))}
    return _KERNELS
