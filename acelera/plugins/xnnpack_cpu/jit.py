"""Optional numba kernels for the loops numpy cannot fuse: depthwise taps, im2col, pooling and
GEMM epilogues (bias + activation + residual). Each has a numpy twin in `kernels.py`;
`AVAILABLE` says whether these are used (numba importable, not disabled with
``ACELERA_XNNPACK_NUMBA=0``).

Arrays are C-contiguous float32. Inner loops index slices with the bare loop variable so numba
can drop its negative-index checks and LLVM vectorizes them. Compiled code is cached on disk
(``cache=True``): only the first process on a machine pays the compile time.
"""
from __future__ import annotations

import os

AVAILABLE = False
REASON = "numba is not installed"
if os.environ.get("ACELERA_XNNPACK_NUMBA", "1").strip().lower() in ("0", "false", "no", "off"):
    REASON = "disabled by ACELERA_XNNPACK_NUMBA=0"
else:
    try:
        import numba as _nb
        AVAILABLE = True
        REASON = f"numba {_nb.__version__}"
    except Exception as e:  # pragma: no cover - depends on the environment
        REASON = f"numba unavailable: {type(e).__name__}: {e}"


def bind(kernel, *args):
    """A zero-argument callable running `kernel(*args)`. The overload for these argument types
    is compiled (or loaded from the cache) now and called directly, skipping numba's
    per-call type dispatch (about half the cost of a small call)."""
    try:
        import numba

        entry = kernel.compile(tuple(numba.typeof(a) for a in args))
    except Exception:  # pragma: no cover - fall back to the dispatcher
        entry = kernel
    return lambda: entry(*args)


if AVAILABLE:
    import numpy as np
    from numba import njit

    _Z = np.float32(0.0)  # a float32 constant: 0.0 would widen the arithmetic to float64
    _U = np.uintp  # unsigned indices: no negative-index fix-ups in the inner loops
    _ONE, _THREE, _SIX = np.float32(1.0), np.float32(3.0), np.float32(6.0)
    _jit = njit(cache=True, fastmath={"contract"}, nogil=True, boundscheck=False)

    # Activations after the bias: clamp(lo1, hi1), then act2 of `kind`: 0 clamp(lo2, hi2),
    # 1 PReLU (max(v, 0) + min(v, 0) * alpha: the reference formula, branch-free), 2 HARD_SWISH
    # (v * clamp(v + 3, 0, 6) / 6), 3 LOGISTIC (1 / (1 + exp(-v))).
    CLAMP, PRELU, HSWISH, SIGMOID = 0, 1, 2, 3

    @njit(inline="always", fastmath={"contract"}, boundscheck=False)
    def _act(v, kind, lo, hi, a):
        """One value (used where there is no long inner loop to keep vectorized)."""
        if kind == 0:
            return min(max(v, lo), hi)
        if kind == 1:
            return max(v, _Z) + min(v, _Z) * a
        if kind == 2:
            t = min(max(v + _THREE, _Z), _SIX)
            return (t * v) / _SIX
        return _ONE / (_ONE + np.exp(-v))

    @njit(inline="always", fastmath={"contract"}, boundscheck=False)
    def _act_row(x, kind, lo, hi, alpha):
        """act2 in place over a row, the kind tested once outside the (vectorized) loops."""
        n = x.shape[0]
        if kind == 0:
            for j in range(n):
                x[j] = min(max(x[j], lo), hi)
        elif kind == 1:
            for j in range(n):
                v = x[j]
                x[j] = max(v, _Z) + min(v, _Z) * alpha[j]
        elif kind == 2:
            for j in range(n):
                v = x[j]
                t = min(max(v + _THREE, _Z), _SIX)
                x[j] = (t * v) / _SIX
        else:
            for j in range(n):
                x[j] = _ONE / (_ONE + np.exp(-x[j]))

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
    def im2col(x, h, w, c, cols, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, r0, r1):
        """Output rows r0..r1 (of N*OH) of im2col over flat arrays: x (N*H*W*C) -> cols
        ((r1-r0)*OW*KH*KW*C), zeros where a tap falls in the padding. Unsigned indices: numba
        then skips its negative-index fix-ups, which cost more than the copies here."""
        run = kw * c
        k = kh * run
        for rr in range(r0, r1):
            n = rr // oh
            oy = rr - n * oh
            xb = n * h * w * c
            for ox in range(ow):
                d0 = _U(((rr - r0) * ow + ox) * k)
                ix0 = ox * sw - pl
                inside_x = ix0 >= 0 and ix0 + (kw - 1) * dw < w and dw == 1
                for ky in range(kh):
                    iy = oy * sh - pt + ky * dh
                    d = d0 + _U(ky * run)
                    if iy < 0 or iy >= h:
                        for j in range(_U(run)):
                            cols[d + j] = 0.0
                    elif inside_x:
                        src = _U(xb + (iy * w + ix0) * c)
                        for j in range(_U(run)):
                            cols[d + j] = x[src + j]
                    else:
                        for kx in range(kw):
                            ix = ix0 + kx * dw
                            dd = d + _U(kx * c)
                            if ix < 0 or ix >= w:
                                for j in range(_U(c)):
                                    cols[dd + j] = 0.0
                            else:
                                src = _U(xb + (iy * w + ix) * c)
                                for j in range(_U(c)):
                                    cols[dd + j] = x[src + j]

    @njit(inline="always", boundscheck=False)
    def _pack_rows(x, c, p, n, iy0, iy1, pt, pl, sw):
        """Copy input rows iy0..iy1 of x (N, H, W*C) into the zero-bordered, column-phase-
        split p (N, sw, Hp, Wq*C): padded column q goes to phase q % sw, column q // sw."""
        wc = x.shape[2]
        w = wc // c
        for iy in range(iy0, iy1):
            src = x[n, iy]
            if sw == 1:
                dst = p[n, 0, iy + pt]
                d0 = _U(pl * c)
                for j in range(_U(wc)):
                    dst[d0 + j] = src[j]
            else:
                for ph in range(sw):
                    dst = p[n, ph, iy + pt]
                    ix = (ph - pl) % sw  # first input column landing in this phase
                    while ix < w:
                        d0 = _U(((ix + pl) // sw) * c)
                        s0 = _U(ix * c)
                        for j in range(_U(c)):
                            dst[d0 + j] = src[s0 + j]
                        ix += sw

    # Depthwise: weights, bias and alpha are tiled to a block of `lb` values (a whole number
    # of pixels, at most a few hundred floats) that stays in L1 while a row is swept.

    @_jit
    def dw_taps(x, c, p, pt, pl, sw, wt, bias_t, phase, rowoff, coloff, sh, lo, hi, alpha_t, kind, lo2, hi2,
                out):
        """Depthwise conv: out (N, OH, OW*C) = act(bias + sum over taps t of
        p[n, phase[t], oy*sh + rowoff[t], coloff[t]:coloff[t] + OW*C] * wt[t]), where p is x
        packed (zero borders, column phases) a few rows ahead of use, so it is read from cache."""
        n_, oh, row = out.shape
        h = x.shape[1]
        taps, lb = wt.shape
        nb = row // lb
        last = rowoff[taps - 1]
        for n in range(n_):
            done = 0
            for oy in range(oh):
                need = min(oy * sh + last - pt + 1, h)
                if need > done:
                    _pack_rows(x, c, p, n, done, need, pt, pl, sw)
                    done = need
                o = out[n, oy]
                for blk in range(nb):
                    base = _U(blk * lb)
                    for j in range(_U(lb)):
                        o[base + j] = bias_t[j]
                t = 0
                while t + 3 <= taps:  # three taps per pass: fewer loads and stores per tap
                    a = p[n, phase[t], oy * sh + rowoff[t], coloff[t]:coloff[t] + row]
                    b = p[n, phase[t + 1], oy * sh + rowoff[t + 1], coloff[t + 1]:coloff[t + 1] + row]
                    d = p[n, phase[t + 2], oy * sh + rowoff[t + 2], coloff[t + 2]:coloff[t + 2] + row]
                    wa, wb, wd = wt[t], wt[t + 1], wt[t + 2]
                    for blk in range(nb):
                        base = _U(blk * lb)
                        for j in range(_U(lb)):
                            o[base + j] += a[base + j] * wa[j] + b[base + j] * wb[j] + d[base + j] * wd[j]
                    t += 3
                while t < taps:
                    a = p[n, phase[t], oy * sh + rowoff[t], coloff[t]:coloff[t] + row]
                    wa = wt[t]
                    for blk in range(nb):
                        base = _U(blk * lb)
                        for j in range(_U(lb)):
                            o[base + j] += a[base + j] * wa[j]
                    t += 1
                for j in range(row):
                    o[j] = min(max(o[j], lo), hi)
                if kind != 0:
                    for blk in range(nb):
                        _act_row(o[blk * lb:(blk + 1) * lb], kind, lo2, hi2, alpha_t)

    @_jit
    def dw_taps9(x, c, p, pt, pl, sw, wt, bias_t, phase, rowoff, coloff, sh, lo, hi, alpha_t, kind, lo2, hi2,
                 out):
        """dw_taps for exactly 9 taps (3x3): all taps in one pass, nothing stored in between."""
        n_, oh, row = out.shape
        h = x.shape[1]
        lb = wt.shape[1]
        nb = row // lb
        last = rowoff[8]
        w0, w1, w2, w3, w4, w5, w6, w7, w8 = wt[0], wt[1], wt[2], wt[3], wt[4], wt[5], wt[6], wt[7], wt[8]
        for n in range(n_):
            done = 0
            for oy in range(oh):
                need = min(oy * sh + last - pt + 1, h)
                if need > done:
                    _pack_rows(x, c, p, n, done, need, pt, pl, sw)
                    done = need
                y = oy * sh
                x0 = p[n, phase[0], y + rowoff[0], coloff[0]:coloff[0] + row]
                x1 = p[n, phase[1], y + rowoff[1], coloff[1]:coloff[1] + row]
                x2 = p[n, phase[2], y + rowoff[2], coloff[2]:coloff[2] + row]
                x3 = p[n, phase[3], y + rowoff[3], coloff[3]:coloff[3] + row]
                x4 = p[n, phase[4], y + rowoff[4], coloff[4]:coloff[4] + row]
                x5 = p[n, phase[5], y + rowoff[5], coloff[5]:coloff[5] + row]
                x6 = p[n, phase[6], y + rowoff[6], coloff[6]:coloff[6] + row]
                x7 = p[n, phase[7], y + rowoff[7], coloff[7]:coloff[7] + row]
                x8 = p[n, phase[8], y + rowoff[8], coloff[8]:coloff[8] + row]
                o = out[n, oy]
                for blk in range(nb):
                    k = _U(blk * lb)
                    for j in range(_U(lb)):
                        v = (bias_t[j] + x0[k + j] * w0[j] + x1[k + j] * w1[j] + x2[k + j] * w2[j]
                             + x3[k + j] * w3[j] + x4[k + j] * w4[j] + x5[k + j] * w5[j]
                             + x6[k + j] * w6[j] + x7[k + j] * w7[j] + x8[k + j] * w8[j])
                        o[k + j] = min(max(v, lo), hi)
                    if kind != 0:
                        _act_row(o[blk * lb:(blk + 1) * lb], kind, lo2, hi2, alpha_t)

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

    @_jit
    def pool_max(x, out, c, kh, kw, sh, sw, pt, pl, lo, hi, tmp):
        """MAX_POOL_2D, separable like the reference kernel: the window's rows are reduced into
        `tmp` (W*C) with long vector passes, then each output pixel reduces its columns.
        std::max from the lowest float (NaNs skipped); windows clamped to the input; then
        clamp(lo, hi). x (N, H, W*C), out (N, OH, OW*C)."""
        n_, h, wc = x.shape
        _, oh, owc = out.shape
        w, ow = wc // c, owc // c
        lowest = np.float32(-3.4028234663852886e38)
        for n in range(n_):
            for oy in range(oh):
                y0 = oy * sh - pt
                ya, yb = max(y0, 0), min(y0 + kh, h)
                r = x[n, ya]
                if yb - ya == 2:  # the common 2-high window in one pass
                    r1 = x[n, ya + 1]
                    for j in range(wc):
                        v = r[j]
                        m = v if lowest < v else lowest
                        v = r1[j]
                        tmp[j] = v if m < v else m
                    start = yb
                else:
                    for j in range(wc):
                        v = r[j]
                        tmp[j] = v if lowest < v else lowest
                    start = ya + 1
                for iy in range(start, yb):
                    r = x[n, iy]
                    for j in range(wc):
                        v = r[j]
                        t = tmp[j]
                        tmp[j] = v if t < v else t
                o = out[n, oy]
                for ox in range(ow):
                    x0 = ox * sw - pl
                    xa, xb = max(x0, 0), min(x0 + kw, w)
                    d = _U(ox * c)
                    a = _U(xa * c)
                    if xb - xa == 2:  # the common 2-wide window in one pass
                        b = a + _U(c)
                        for j in range(_U(c)):
                            v0 = tmp[a + j]
                            v1 = tmp[b + j]
                            o[d + j] = min(max(v1 if v0 < v1 else v0, lo), hi)
                        continue
                    for j in range(_U(c)):
                        o[d + j] = tmp[a + j]
                    for ix in range(xa + 1, xb):
                        a = _U(ix * c)
                        for j in range(_U(c)):
                            v = tmp[a + j]
                            t = o[d + j]
                            o[d + j] = v if t < v else t
                    for j in range(_U(c)):
                        o[d + j] = min(max(o[d + j], lo), hi)

    @_jit
    def pool_avg(x, out, c, kh, kw, sh, sw, pt, pl, lo, hi, tmp):
        """AVERAGE_POOL_2D like pool_max: sums over the window clamped to the input, divided by
        the number of valid taps, then clamp(lo, hi)."""
        n_, h, wc = x.shape
        _, oh, owc = out.shape
        w, ow = wc // c, owc // c
        for n in range(n_):
            for oy in range(oh):
                y0 = oy * sh - pt
                ya, yb = max(y0, 0), min(y0 + kh, h)
                r = x[n, ya]
                for j in range(wc):
                    tmp[j] = r[j]
                for iy in range(ya + 1, yb):
                    r = x[n, iy]
                    for j in range(wc):
                        tmp[j] += r[j]
                o = out[n, oy]
                for ox in range(ow):
                    x0 = ox * sw - pl
                    xa, xb = max(x0, 0), min(x0 + kw, w)
                    d = _U(ox * c)
                    a = _U(xa * c)
                    for j in range(_U(c)):
                        o[d + j] = tmp[a + j]
                    for ix in range(xa + 1, xb):
                        a = _U(ix * c)
                        for j in range(_U(c)):
                            o[d + j] += tmp[a + j]
                    cnt = np.float32((yb - ya) * (xb - xa))
                    for j in range(_U(c)):
                        o[d + j] = min(max(o[d + j] / cnt, lo), hi)

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
            for m in range(m_rows):
                ob = _U(m * n)
                for j in range(_U(n)):
                    dst[ob + j] = params[_U(bo) + j]
                for kk in range(k):
                    xv = x[m, kk] if l == 0 else src[_U(m * k + kk)]
                    wb = _U(wo + kk * n)
                    for j in range(_U(n)):
                        dst[ob + j] += xv * params[wb + j]
                for j in range(_U(n)):
                    dst[ob + j] = _act(min(max(dst[ob + j], lo), hi), kind, lo2, hi2, _Z)

    @_jit
    def resize_bilinear(x, h, w, c, out, oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1, tmp):
        """RESIZE_BILINEAR over flat NHWC arrays: each output row interpolates two input rows
        into `tmp` (W*C), then columns; the reference kernel's float32 order."""
        n_ = x.size // (h * w * c)
        wc = w * c
        for n in range(n_):
            for oy in range(oh):
                a = _U((n * h + y0[oy]) * wc)
                b = _U((n * h + y1[oy]) * wc)
                fa, fb = wy0[oy], wy1[oy]
                for j in range(_U(wc)):
                    tmp[j] = x[a + j] * fa + x[b + j] * fb
                ob = (n * oh + oy) * ow * c
                for ox in range(ow):
                    d = _U(ob + ox * c)
                    s0 = _U(x0[ox] * c)
                    s1 = _U(x1[ox] * c)
                    ga, gb = wx0[ox], wx1[ox]
                    for j in range(_U(c)):
                        out[d + j] = tmp[s0 + j] * ga + tmp[s1 + j] * gb

    @_jit
    def mean_hw(x, h, wc, c, out, lo, hi, tmp):
        """Mean over H and W of flat NHWC x into out (N*C): rows are summed into tmp (W*C)
        with long vector adds, then tmp's pixels; then clamp(lo, hi)."""
        n_ = x.size // (h * wc)
        cnt = np.float32(h * (wc // c))
        for n in range(n_):
            b = _U(n * h * wc)
            for j in range(_U(wc)):
                tmp[j] = x[b + j]
            for r in range(1, h):
                b = _U((n * h + r) * wc)
                for j in range(_U(wc)):
                    tmp[j] += x[b + j]
            o = _U(n * c)
            for j in range(_U(c)):
                out[o + j] = _Z
            for px in range(wc // c):
                q = _U(px * c)
                for j in range(_U(c)):
                    out[o + j] += tmp[q + j]
            for j in range(_U(c)):
                out[o + j] = min(max(out[o + j] / cnt, lo), hi)

    @_jit
    def act_flat(out, kind, lo, hi, alpha):
        """out = act(out) in place over a flat array (alpha tiles it, PReLU only)."""
        n = out.shape[0]
        if kind == 1:
            k = alpha.shape[0]
            for r in range(n // k):
                _act_row(out[r * k:(r + 1) * k], kind, lo, hi, alpha)
        else:
            _act_row(out, kind, lo, hi, alpha)

    @_jit
    def softmax_rows(x, out):
        """SOFTMAX (beta 1) over the last axis of (rows, n): exp(x - max) / sum, float32."""
        rows, n = x.shape
        for r in range(rows):
            a = x[r]
            o = out[r]
            m = a[0]
            for j in range(1, n):
                m = max(m, a[j])
            sm = _Z
            for j in range(n):
                e = np.exp(a[j] - m)
                o[j] = e
                sm += e
            for j in range(n):
                o[j] = o[j] / sm
else:  # pragma: no cover - exercised with ACELERA_XNNPACK_NUMBA=0
    epilogue = epilogue_onto = epilogue_partial = im2col = dw_1x1 = dw_taps = dw_taps9 = pool_max = pool_avg = fc_chain = resize_bilinear = mean_hw = act_flat = softmax_rows = None  # noqa: E501
