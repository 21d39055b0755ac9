"""numba DEPTHWISE_CONV_2D kernels of the float steps: the 1x1 per-channel scale (dw_1x1)
and the general case over rows packed into a zero-bordered, column-phase-split buffer
(dw_rows). Their numpy twins are in conv.py. Imported only when numba is available
(jit.AVAILABLE)."""
from __future__ import annotations

from numba import njit

from acelera.plugins.xnnpack_cpu.jit_helpers import _FAST, _U, _act_row, _jit, _jitf


@_jit
def dw_1x1(x, w, bias, lo, hi, alpha, kind, lo2, hi2, out):
    """1x1 stride-1 unpadded depthwise: out = act(x * w + bias) over rows of whole
    blocks (w, bias, alpha tiled to the block length)."""
    rows, row = out.shape
    lb = w.shape[0]
    nb = row // lb
    for r in range(rows):
        a = x[r]
        o = out[r]
        for blk in range(nb):
            k = _U(blk * lb)
            for j in range(_U(lb)):
                o[k + j] = min(max(a[k + j] * w[j] + bias[j], lo), hi)
            if kind != 0:
                _act_row(o[blk * lb:(blk + 1) * lb], kind, lo2, hi2, alpha)


@njit(inline="always", fastmath=_FAST, boundscheck=False)
def _dw_pack_rows(x, p, n, iy0, iy1, c, pt, pl, sw, hp, rowlen, pbt, plo, phi, pre):
    """Input rows iy0..iy1 of x (N, H, W*C) into the zero-bordered, column-phase-split flat
    buffer p (sw phases of Hp rows of Wq*C): padded column q goes to phase q % sw, column
    q // sw. With `pre` each value becomes min(max(v + pbt, plo), phi) on the way: the bias
    and clamp of the producing convolution (pbt: its bias tiled to W*C)."""
    wc = x.shape[2]
    w = wc // c
    plane = hp * rowlen
    for iy in range(iy0, iy1):
        src = x[n, iy]
        if sw == 1:
            d0 = _U((iy + pt) * rowlen + pl * c)
            if pre:
                for j in range(_U(wc)):
                    p[d0 + j] = min(max(src[j] + pbt[j], plo), phi)
            else:
                for j in range(_U(wc)):
                    p[d0 + j] = src[j]
        else:
            for ph in range(sw):
                ix = (ph - pl) % sw  # the first input column landing in this phase
                d0 = _U(ph * plane + (iy + pt) * rowlen + ((ix + pl) // sw) * c)
                s0 = _U(ix * c)
                step = _U(sw * c)
                while ix < w:
                    if pre:
                        for j in range(_U(c)):
                            p[d0 + j] = min(max(src[s0 + j] + pbt[s0 + j], plo), phi)
                    else:
                        for j in range(_U(c)):
                            p[d0 + j] = src[s0 + j]
                    ix += sw
                    d0 += _U(c)
                    s0 += step


@_jitf
def dw_rows(x, p, c, pt, pl, sh, sw, hp, rowlen, last, taps, wt, bias_t, lo, hi, alpha_t, kind, lo2, hi2, pbt,
            plo, phi, pre, out, oy0, oy1):
    """DEPTHWISE_CONV_2D (multiplier 1): out (N, OH, OW*C) = act2(clamp(bias + sum over taps
    t of p[oy*sh*Wq*C + taps[t] + ...] * wt[t])). p is x packed a few rows ahead of use into
    a zero-bordered buffer split into sw column phases, so every tap of an output row reads
    one contiguous run of OW*C values. The taps, bias and alpha are tiled to a block of lb
    values (whole pixels, a few hundred floats), so the loops are long whatever C is and
    the weights stay in L1; 3x3 taps are summed in registers. Only output rows oy0..oy1 of
    each batch (two threads take a half each: the input rows both need are packed by
    both, with the same values)."""
    n_, oh, row = out.shape
    h = x.shape[1]
    nt, lb = wt.shape
    nb = row // lb
    for n in range(n_):
        done = max(oy0 * sh - pt, 0)
        for oy in range(oy0, oy1):
            need = min(oy * sh + last - pt + 1, h)
            if need > done:
                _dw_pack_rows(x, p, n, done, need, c, pt, pl, sw, hp, rowlen, pbt, plo, phi, pre)
                done = need
            o = out[n, oy]
            base = oy * sh * rowlen
            if nt == 9:
                w0, w1, w2, w3, w4, w5, w6, w7, w8 = wt[0], wt[1], wt[2], wt[3], wt[4], wt[5], wt[6], wt[7], wt[8]
                for blk in range(nb):
                    k = _U(blk * lb)
                    a0, a1, a2 = _U(base + taps[0]) + k, _U(base + taps[1]) + k, _U(base + taps[2]) + k
                    a3, a4, a5 = _U(base + taps[3]) + k, _U(base + taps[4]) + k, _U(base + taps[5]) + k
                    a6, a7, a8 = _U(base + taps[6]) + k, _U(base + taps[7]) + k, _U(base + taps[8]) + k
                    for j in range(_U(lb)):
                        v = (bias_t[j] + p[a0 + j] * w0[j] + p[a1 + j] * w1[j] + p[a2 + j] * w2[j]
                             + p[a3 + j] * w3[j] + p[a4 + j] * w4[j] + p[a5 + j] * w5[j]
                             + p[a6 + j] * w6[j] + p[a7 + j] * w7[j] + p[a8 + j] * w8[j])
                        o[k + j] = min(max(v, lo), hi)
            else:
                for blk in range(nb):
                    k = _U(blk * lb)
                    for j in range(_U(lb)):
                        o[k + j] = bias_t[j]
                    t = 0
                    while t + 3 <= nt:
                        a0, a1, a2 = _U(base + taps[t]) + k, _U(base + taps[t + 1]) + k, _U(base + taps[t + 2]) + k
                        w0, w1, w2 = wt[t], wt[t + 1], wt[t + 2]
                        for j in range(_U(lb)):
                            o[k + j] += p[a0 + j] * w0[j] + p[a1 + j] * w1[j] + p[a2 + j] * w2[j]
                        t += 3
                    while t < nt:
                        a0 = _U(base + taps[t]) + k
                        w0 = wt[t]
                        for j in range(_U(lb)):
                            o[k + j] += p[a0 + j] * w0[j]
                        t += 1
                    for j in range(_U(lb)):
                        o[k + j] = min(max(o[k + j], lo), hi)
            if kind != 0:
                for blk in range(nb):
                    _act_row(o[blk * lb:(blk + 1) * lb], kind, lo2, hi2, alpha_t)
