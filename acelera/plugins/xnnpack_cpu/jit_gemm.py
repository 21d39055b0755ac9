"""numba GEMM kernels of the float steps: the GEMM epilogues (bias + activation + residual,
one kernel per aliasing pattern), few-row GEMMs with their epilogue fused (gemm_small), chains
of small FULLY_CONNECTED layers (fc_chain) and im2col from a zero-bordered input. Their numpy
twins are in conv.py and spec.py. Imported only when numba is available (jit.AVAILABLE)."""
from __future__ import annotations

import numpy as np

from acelera.plugins.xnnpack_cpu.jit_helpers import _U, _Z, _act, _act_row, _jit, _jitf

# GEMM epilogues. LLVM only vectorizes a loop whose arrays it can prove distinct (or
# identical), so each aliasing pattern has its own kernel. A clamp act2 is fused into the
# main loop; other kinds take a second pass over the row while it is in L1.

@_jit
def epilogue(o, bias, lo1, hi1, res, has_res, alpha, lo2, hi2, kind):
    """In place on rows of equal length: o = act2(clamp(o + bias, lo1, hi1) [+ res]), res
    another array of o's shape. Rows are whole output rows (bias and alpha tiled)."""
    rows, n = o.shape
    if kind != 0:
        lo2, hi2 = -np.float32(np.inf), np.float32(np.inf)
    for r in range(rows):
        x = o[r]
        if has_res:
            rr = res[r]
            for j in range(n):
                x[j] = min(max(min(max(x[j] + bias[j], lo1), hi1) + rr[j], lo2), hi2)
        else:
            for j in range(n):
                x[j] = min(max(min(max(x[j] + bias[j], lo1), hi1), lo2), hi2)
        if kind != 0:
            _act_row(x, kind, lo2, hi2, alpha)


@_jit
def epilogue_onto(acc, bias, lo1, hi1, alpha, lo2, hi2, kind, o):
    """o = act2(clamp(acc + bias, lo1, hi1) + o): the output overwrites the residual."""
    rows, n = o.shape
    if kind != 0:
        lo2, hi2 = -np.float32(np.inf), np.float32(np.inf)
    for r in range(rows):
        a = acc[r]
        x = o[r]
        for j in range(n):
            x[j] = min(max(min(max(a[j] + bias[j], lo1), hi1) + x[j], lo2), hi2)
        if kind != 0:
            _act_row(x, kind, lo2, hi2, alpha)


@_jit
def epilogue_partial(o, bias, lo1, hi1, res, ow, alpha, lo2, hi2, kind):
    """In place on output rows (OW*C, bias and alpha tiled) with a residual res (rows,
    OW*cres) on the first cres channels of each pixel only (a channel-PADded residual):
    a long pass for bias and clamp, a per-pixel pass for the residual, a long pass for act2."""
    rows, n = o.shape
    c = n // ow
    cres = res.shape[1] // ow
    for r in range(rows):
        x = o[r]
        rr = res[r]
        for j in range(n):
            x[j] = min(max(x[j] + bias[j], lo1), hi1)
        for px in range(ow):
            d = _U(px * c)
            q = _U(px * cres)
            for j in range(_U(cres)):
                x[d + j] += rr[q + j]
        _act_row(x, kind, lo2, hi2, alpha)


@_jit
def fc_chain(x, params, meta, buf, out):
    """A chain of small FULLY_CONNECTED layers in one call. Layer l: meta[l] = (K, N,
    weight offset, bias offset, bounds offset, act2 kind) into `params`, which holds the
    (K, N) row-major weights, the bias and (lo1, hi1, lo2, hi2). x (M, K0), out (M, N_last);
    `buf` (2, M * max width) holds the activations in between."""
    m_rows = x.shape[0]
    layers = meta.shape[0]
    for l in range(layers):
        k, n, wo, bo, ao, kind = meta[l, 0], meta[l, 1], meta[l, 2], meta[l, 3], meta[l, 4], meta[l, 5]
        lo, hi, lo2, hi2 = params[ao], params[ao + 1], params[ao + 2], params[ao + 3]
        src = buf[(l + 1) % 2]
        dst = out.reshape(-1) if l == layers - 1 else buf[l % 2]
        bias = params[bo:bo + n]
        for m in range(m_rows):
            d = dst[m * n:(m + 1) * n]
            for j in range(_U(n)):
                d[j] = bias[j]
            for kk in range(k):
                xv = x[m, kk] if l == 0 else src[_U(m * k + kk)]
                wr = params[wo + kk * n:wo + (kk + 1) * n]
                for j in range(_U(n)):
                    d[j] += xv * wr[j]
            if kind == 0:
                for j in range(_U(n)):
                    d[j] = min(max(min(max(d[j], lo), hi), lo2), hi2)
            else:
                for j in range(_U(n)):
                    d[j] = _act(min(max(d[j], lo), hi), kind, lo2, hi2, _Z)


@_jitf
def gemm_small(x, w, bias, lo1, hi1, res, has_res, alpha, lo2, hi2, kind, acc, out, n0, n1):
    """out (M, N) = act2(clamp(x (M, K) @ w (K, N) + bias, lo1, hi1) [+ res]) for few rows:
    the weights stream through once, four rows of w per pass over the M accumulator rows
    (`acc`, which is `out` unless out overwrites res), which stay in L1. BLAS repacks w on
    every call, which costs more than the product when M is small. Only output columns
    n0..n1 (two threads take a half each)."""
    m_, k_ = x.shape
    n = _U(n1 - n0)
    b0 = _U(n0)
    for m in range(m_):
        a = acc[m]
        for j in range(n):
            a[b0 + j] = bias[b0 + j]
    k = 0
    while k + 4 <= k_:
        w0, w1, w2, w3 = w[k], w[k + 1], w[k + 2], w[k + 3]
        for m in range(m_):
            a = acc[m]
            xr = x[m]
            x0, x1, x2, x3 = xr[k], xr[k + 1], xr[k + 2], xr[k + 3]
            for j in range(n):
                a[b0 + j] += x0 * w0[b0 + j] + x1 * w1[b0 + j] + x2 * w2[b0 + j] + x3 * w3[b0 + j]
        k += 4
    while k < k_:
        w0 = w[k]
        for m in range(m_):
            a = acc[m]
            x0 = x[m, k]
            for j in range(n):
                a[b0 + j] += x0 * w0[b0 + j]
        k += 1
    if kind != 0:
        lo2c, hi2c = -np.float32(np.inf), np.float32(np.inf)
    else:
        lo2c, hi2c = lo2, hi2
    for m in range(m_):
        a = acc[m]
        o = out[m]
        if has_res:
            r = res[m]
            for j in range(n):
                o[b0 + j] = min(max(min(max(a[b0 + j], lo1), hi1) + r[b0 + j], lo2c), hi2c)
        else:
            for j in range(n):
                o[b0 + j] = min(max(min(max(a[b0 + j], lo1), hi1), lo2c), hi2c)
        if kind != 0:
            _act_row(o[n0:n1], kind, lo2, hi2, alpha[n0:n1])


@_jit
def im2col_padded(xp, hp, wp, c, cols, kh, kw, sh, sw, dh, dw, oh, ow, r0, r1):
    """Output rows r0..r1 (of N*OH) of im2col from a zero-bordered input xp (N*Hp*Wp*C,
    flat): no bounds to test. A run of taps shorter than 16 values is copied as 16 (the
    excess lands where the next run goes, or in the 16 values of slack after cols and xp),
    which a loop over a few values costs far more than."""
    k = kh * kw * c
    run = kw * c if dw == 1 else c
    nrun = kh if dw == 1 else kh * kw
    for rr in range(r0, r1):
        n = rr // oh
        oy = rr - n * oh
        for ox in range(ow):
            d = _U(((rr - r0) * ow + ox) * k)
            for t in range(nrun):
                if dw == 1:
                    ky, kx = t, 0
                else:
                    ky, kx = t // kw, t - (t // kw) * kw
                src = _U(((n * hp + oy * sh + ky * dh) * wp + ox * sw + kx * dw) * c)
                if run <= 16:
                    for j in range(_U(16)):
                        cols[d + j] = xp[src + j]
                else:
                    for j in range(_U(run)):
                        cols[d + j] = xp[src + j]
                d += _U(run)
