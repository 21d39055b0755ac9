"""Optional numba kernels for the loops numpy cannot fuse: depthwise convolution rows, im2col,
few-row GEMMs with their epilogue, GEMM epilogues (bias + activation + residual), pooling,
element-wise ops, copies and LOGISTIC/swish. Their numpy twins are in conv.py, ops.py and
spec.py; `AVAILABLE` says whether these are used (numba importable, not disabled with
``ACELERA_XNNPACK_NUMBA=0``).

Steps call them through `Native` records: a run of records is one call of `run_native` on the
partition's arena, so a chain of numba steps costs one Python call (see "native steps" below).

Arrays are C-contiguous float32. Inner loops index slices with the bare loop variable so numba
can drop its negative-index checks and LLVM vectorizes them. Compiled code is cached on disk
(``cache=True``): only the first process on a machine pays the compile time (about 40 s of CPU
for run_native and everything it calls).
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


# --- native steps ----------------------------------------------------------------------------
# A step that is only numba work is a `Native` record instead of a Python closure: consecutive
# records of a partition are encoded into one int64 array (M) with a float32 side array (F) and
# run by one call, run_native(A, M, F), where A is the partition's whole arena as float32. So a
# run of such steps costs one Python call and three argument conversions, however long it is.
#
# Record: [length, op, fields...]. Fields, by argument type:
#   int / bool          the value
#   float               index of the value in F
#   float32 ndarray     [where, offset, *shape]: where 0 = a view into the arena (offset in
#                       floats), 1 = a constant copied into F at offset
#   int ndarray (1-D)   [start, n]: the values inline in M at start (after the fixed fields)
# Each op's decoder (_n_*) reads its fields in the order its encoder wrote them.

OP_EPILOGUE, OP_EPILOGUE_ONTO, OP_EPILOGUE_PARTIAL, OP_DW_1X1, OP_DW, OP_POOL_MAX, OP_POOL_AVG = range(1, 8)
OP_FC_CHAIN, OP_RESIZE, OP_MEAN_HW, OP_ACT, OP_SOFTMAX, OP_GEMM, OP_COPY, OP_BINARY = range(8, 16)
OP_IM2COL_PADDED, OP_SIGMOID = 16, 17


class Native:
    """A native step: op code and arguments (see above)."""

    __slots__ = ("op", "args")

    def __init__(self, op: int, *args):
        self.op = op
        self.args = args


class Par:
    """One step in two halves (lists of closures and native records) that two threads may run
    at once; `whole` (default: first then second) is what runs on one thread."""

    __slots__ = ("first", "second", "whole")

    def __init__(self, first: list, second: list, whole: list | None = None):
        self.first, self.second = list(first), list(second)
        self.whole = list(whole) if whole is not None else self.first + self.second


def encode(records: list, offset_of) -> tuple:
    """(M, F) for run_native from Native records; offset_of(array) -> its float offset in the
    arena, or None for an array outside it (a constant: copied into F)."""
    import numpy as np

    m: list[int] = []
    f: list = []
    flen = 0
    for r in records:
        fields: list = []
        tables: list = []
        for a in r.args:
            if isinstance(a, np.ndarray):
                if a.dtype == np.float32:
                    off = offset_of(a)
                    if off is not None:
                        fields += [0, int(off)]
                    else:
                        flat = np.ascontiguousarray(a, np.float32).reshape(-1)
                        pad = (-flen) % 16
                        if pad:
                            f.append(np.zeros(pad, np.float32))
                            flen += pad
                        fields += [1, flen]
                        f.append(flat)
                        flen += flat.size
                    fields += [int(d) for d in a.shape]
                else:
                    tables.append((len(fields), np.asarray(a, np.int64).reshape(-1)))
                    fields += [0, int(a.size)]
            elif isinstance(a, (bool, int, np.integer)):
                fields.append(int(a))
            elif isinstance(a, (float, np.floating)):
                f.append(np.array([a], np.float32))
                fields.append(flen)
                flen += 1
            else:
                raise TypeError(f"native argument of type {type(a).__name__}")
        start = len(m)
        pos = start + 2 + len(fields)
        for k, t in tables:
            fields[k] = pos
            pos += t.size
        m += [pos - start, r.op] + fields
        for _, t in tables:
            m += [int(v) for v in t]
    M = np.array(m, np.int64)
    F = np.concatenate(f).astype(np.float32) if f else np.zeros(1, np.float32)
    return M, F


if AVAILABLE:
    import numpy as np
    from numba import njit, prange

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
    # Sums may be reassociated (vector lanes, taps in any order; float32 results then differ from
    # the reference's order by rounding only), but NaN and infinity keep their meaning.
    _FAST = {"contract", "reassoc", "nsz", "arcp"}
    _jitf = njit(cache=True, fastmath=_FAST, nogil=True, boundscheck=False, error_model="numpy")

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

    # Element-wise binary ops: 0 ADD, 1 SUB, 2 MUL, 3 DIV, 4 MAXIMUM, 5 MINIMUM (LiteRT's
    # a > b ? a : b and a < b ? a : b: NaN in b passes), 6 SQUARED_DIFFERENCE; then a clamp.

    @njit(inline="always", boundscheck=False)
    def _bin_loop(a, b, o, op, lo, hi):
        """o = clamp(a op b) over equal-length 1-D arrays; o may be a or b itself."""
        n = _U(o.shape[0])
        if op == 0:
            for j in range(n):
                o[j] = min(max(a[j] + b[j], lo), hi)
        elif op == 1:
            for j in range(n):
                o[j] = min(max(a[j] - b[j], lo), hi)
        elif op == 2:
            for j in range(n):
                o[j] = min(max(a[j] * b[j], lo), hi)
        elif op == 3:
            for j in range(n):
                o[j] = min(max(a[j] / b[j], lo), hi)
        elif op == 4:
            for j in range(n):
                u, v = a[j], b[j]
                o[j] = min(max(u if u > v else v, lo), hi)
        elif op == 5:
            for j in range(n):
                u, v = a[j], b[j]
                o[j] = min(max(u if u < v else v, lo), hi)
        else:
            for j in range(n):
                d = a[j] - b[j]
                o[j] = min(max(d * d, lo), hi)

    @njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")  # x / 0 is inf or NaN
    def binary(x, y, out, op, mode, lo, hi, tile):
        """out = clamp(x op y). mode 0: x, y and out of one size; 1: y is a vector of C values
        repeated over x (rows of C, or a scalar, C = 1); 2: x is the vector. The vector is tiled
        into `tile` (a whole number of its periods) so the loops run over long blocks."""
        if mode == 0:
            _bin_loop(x, y, out, op, lo, hi)
            return
        v = y if mode == 1 else x
        full = x if mode == 1 else y
        c = v.shape[0]
        lb = tile.shape[0]
        for j in range(lb):
            tile[j] = v[j % c]
        n = out.shape[0]
        for b0 in range(0, n, lb):
            b1 = min(b0 + lb, n)
            if mode == 1:
                _bin_loop(full[b0:b1], tile[:b1 - b0], out[b0:b1], op, lo, hi)
            else:
                _bin_loop(tile[:b1 - b0], full[b0:b1], out[b0:b1], op, lo, hi)

    @_jit
    def copy_runs(src, out, d0, run, reps, sst, dstr, lo, hi, clamp):
        """reps runs of `run` values: src[r*sst:...] to out[d0 + r*dstr:...], clamped or not."""
        for r in range(reps):
            s = _U(r * sst)
            d = _U(d0 + r * dstr)
            if clamp:
                for j in range(_U(run)):
                    out[d + j] = min(max(src[s + j], lo), hi)
            else:
                for j in range(_U(run)):
                    out[d + j] = src[s + j]

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

    # LOGISTIC with vector arithmetic only (numba's exp is a scalar libm call): exp(-x) =
    # p(r) * 2^n, n = round(-x / ln 2), r = -x - n ln 2 (two-constant split), p the degree-5
    # Taylor polynomial; 2^n is built as float bits (int32 (n + 127) << 23) in a scratch read
    # back as float32. Within a few units in the last place of 1 / (1 + exp(-x)) except far
    # below 1e-37; NaN stays NaN, +-inf give 1 and 0 (and x * sigmoid(x) at -inf gives NaN,
    # as MUL(x, LOGISTIC(x)) does).
    _SIG_FAST = {"contract", "nsz", "arcp"}  # no reassoc: the rounding trick must not fold
    _SIG_BLOCK = 512

    @njit(cache=True, fastmath=_SIG_FAST, nogil=True, boundscheck=False)
    def sigmoid(x, out, swish, scratch):
        """out = 1 / (1 + exp(-x)), or x times that with `swish`; out may be x. scratch: 1024
        float32 (powers of two, then polynomial values, of a block)."""
        fb = scratch[:_SIG_BLOCK]
        ib = fb.view(np.int32)
        pb = scratch[_SIG_BLOCK:2 * _SIG_BLOCK]
        n_ = out.shape[0]
        for b0 in range(0, n_, _SIG_BLOCK):
            m = min(_SIG_BLOCK, n_ - b0)
            xs = x[b0:b0 + m]
            os_ = out[b0:b0 + m]
            for j in range(_U(m)):
                z = -xs[j]
                zc = min(max(z, np.float32(-87.0)), np.float32(88.0))
                t = zc * np.float32(1.4426950408889634)
                nf = (t + np.float32(12582912.0)) - np.float32(12582912.0)
                r = zc - nf * np.float32(0.693145751953125) - nf * np.float32(1.428606765330187e-06)
                p = np.float32(1.0) + r * (np.float32(1.0) + r * (np.float32(0.49999997) + r * (
                    np.float32(0.16666654) + r * (np.float32(0.041665796) + r * np.float32(0.008333452)))))
                ib[j] = (np.int32(nf) + np.int32(127)) << np.int32(23)
                pb[j] = p
            if swish:
                for j in range(_U(m)):
                    v = xs[j]
                    e = pb[j] * fb[j]
                    e = np.float32(np.inf) if v < np.float32(-88.0) else e
                    sg = v * (np.float32(1) / (np.float32(1) + e))
                    os_[j] = sg if v == v else v
            else:
                for j in range(_U(m)):
                    v = xs[j]
                    e = pb[j] * fb[j]
                    e = np.float32(np.inf) if v < np.float32(-88.0) else e
                    sg = np.float32(1) / (np.float32(1) + e)
                    os_[j] = sg if v == v else v

    # --- decoders of native records (see encode): each reads its fields with a cursor k ------

    @njit(inline="always", boundscheck=False)
    def _r1(A, F, M, k):
        src = A if M[k] == 0 else F
        o = M[k + 1]
        return src[o:o + M[k + 2]], k + 3

    @njit(inline="always", boundscheck=False)
    def _r2(A, F, M, k):
        src = A if M[k] == 0 else F
        o, d0, d1 = M[k + 1], M[k + 2], M[k + 3]
        return src[o:o + d0 * d1].reshape((d0, d1)), k + 4

    @njit(inline="always", boundscheck=False)
    def _r3(A, F, M, k):
        src = A if M[k] == 0 else F
        o, d0, d1, d2 = M[k + 1], M[k + 2], M[k + 3], M[k + 4]
        return src[o:o + d0 * d1 * d2].reshape((d0, d1, d2)), k + 5

    @njit(inline="always", boundscheck=False)
    def _ri(M, k):
        return M[k], k + 1

    @njit(inline="always", boundscheck=False)
    def _rf(F, M, k):
        return F[M[k]], k + 1

    @njit(inline="always", boundscheck=False)
    def _rt(M, k):
        s = M[k]
        return M[s:s + M[k + 1]], k + 2

    @_jit
    def _n_epilogue(A, M, F, k):
        o, k = _r2(A, F, M, k)
        bias, k = _r1(A, F, M, k)
        lo1, k = _rf(F, M, k)
        hi1, k = _rf(F, M, k)
        res, k = _r2(A, F, M, k)
        has_res, k = _ri(M, k)
        alpha, k = _r1(A, F, M, k)
        lo2, k = _rf(F, M, k)
        hi2, k = _rf(F, M, k)
        kind, k = _ri(M, k)
        epilogue(o, bias, lo1, hi1, res, has_res, alpha, lo2, hi2, kind)

    @_jit
    def _n_epilogue_onto(A, M, F, k):
        acc, k = _r2(A, F, M, k)
        bias, k = _r1(A, F, M, k)
        lo1, k = _rf(F, M, k)
        hi1, k = _rf(F, M, k)
        alpha, k = _r1(A, F, M, k)
        lo2, k = _rf(F, M, k)
        hi2, k = _rf(F, M, k)
        kind, k = _ri(M, k)
        o, k = _r2(A, F, M, k)
        epilogue_onto(acc, bias, lo1, hi1, alpha, lo2, hi2, kind, o)

    @_jit
    def _n_epilogue_partial(A, M, F, k):
        o, k = _r2(A, F, M, k)
        bias, k = _r1(A, F, M, k)
        lo1, k = _rf(F, M, k)
        hi1, k = _rf(F, M, k)
        res, k = _r2(A, F, M, k)
        ow, k = _ri(M, k)
        alpha, k = _r1(A, F, M, k)
        lo2, k = _rf(F, M, k)
        hi2, k = _rf(F, M, k)
        kind, k = _ri(M, k)
        epilogue_partial(o, bias, lo1, hi1, res, ow, alpha, lo2, hi2, kind)

    @_jit
    def _n_gemm(A, M, F, k):
        x, k = _r2(A, F, M, k)
        w, k = _r2(A, F, M, k)
        bias, k = _r1(A, F, M, k)
        lo1, k = _rf(F, M, k)
        hi1, k = _rf(F, M, k)
        res, k = _r2(A, F, M, k)
        has_res, k = _ri(M, k)
        alpha, k = _r1(A, F, M, k)
        lo2, k = _rf(F, M, k)
        hi2, k = _rf(F, M, k)
        kind, k = _ri(M, k)
        acc, k = _r2(A, F, M, k)
        out, k = _r2(A, F, M, k)
        n0, k = _ri(M, k)
        n1, k = _ri(M, k)
        gemm_small(x, w, bias, lo1, hi1, res, has_res, alpha, lo2, hi2, kind, acc, out, n0, n1)

    @_jit
    def _n_sigmoid(A, M, F, k):
        x, k = _r1(A, F, M, k)
        out, k = _r1(A, F, M, k)
        swish, k = _ri(M, k)
        scratch, k = _r1(A, F, M, k)
        sigmoid(x, out, swish, scratch)

    @_jit
    def _n_binary(A, M, F, k):
        x, k = _r1(A, F, M, k)
        y, k = _r1(A, F, M, k)
        out, k = _r1(A, F, M, k)
        op, k = _ri(M, k)
        mode, k = _ri(M, k)
        lo, k = _rf(F, M, k)
        hi, k = _rf(F, M, k)
        tile, k = _r1(A, F, M, k)
        binary(x, y, out, op, mode, lo, hi, tile)

    @_jit
    def _n_copy(A, M, F, k):
        """Copies of runs: count, then (src run, dst offset in out, run length, repeats, src
        stride, dst stride) each; then clamp bounds and flag. For CONCATENATION and PAD."""
        out, k = _r1(A, F, M, k)
        cnt, k = _ri(M, k)
        k0 = k
        for _ in range(cnt):
            k += 3  # skip the source array's fields to reach the flag position
            k += 5
        lo, k = _rf(F, M, k)
        hi, k = _rf(F, M, k)
        clamp, k = _ri(M, k)
        k = k0
        for _ in range(cnt):
            src, k = _r1(A, F, M, k)
            d0, run, reps, sst, dst_ = M[k], M[k + 1], M[k + 2], M[k + 3], M[k + 4]
            k += 5
            copy_runs(src, out, d0, run, reps, sst, dst_, lo, hi, clamp)

    @_jit
    def _n_im2col_padded(A, M, F, k):
        xp, k = _r1(A, F, M, k)
        hp, wp, c = M[k], M[k + 1], M[k + 2]
        cols, k = _r1(A, F, M, k + 3)
        im2col_padded(xp, hp, wp, c, cols, M[k], M[k + 1], M[k + 2], M[k + 3], M[k + 4], M[k + 5], M[k + 6],
                      M[k + 7], M[k + 8], M[k + 9])

    @_jit
    def _n_dw_1x1(A, M, F, k):
        x, k = _r2(A, F, M, k)
        w, k = _r1(A, F, M, k)
        bias, k = _r1(A, F, M, k)
        lo, k = _rf(F, M, k)
        hi, k = _rf(F, M, k)
        alpha, k = _r1(A, F, M, k)
        kind, k = _ri(M, k)
        lo2, k = _rf(F, M, k)
        hi2, k = _rf(F, M, k)
        out, k = _r2(A, F, M, k)
        dw_1x1(x, w, bias, lo, hi, alpha, kind, lo2, hi2, out)

    @_jit
    def _n_dw(A, M, F, k):
        x, k = _r3(A, F, M, k)
        p, k = _r1(A, F, M, k)
        c, pt, pl, sh, sw, hp, rowlen, last = M[k], M[k + 1], M[k + 2], M[k + 3], M[k + 4], M[k + 5], M[k + 6], \
            M[k + 7]
        taps, k = _rt(M, k + 8)
        wt, k = _r2(A, F, M, k)
        bias_t, k = _r1(A, F, M, k)
        lo, k = _rf(F, M, k)
        hi, k = _rf(F, M, k)
        alpha_t, k = _r1(A, F, M, k)
        kind, k = _ri(M, k)
        lo2, k = _rf(F, M, k)
        hi2, k = _rf(F, M, k)
        pbt, k = _r1(A, F, M, k)
        plo, k = _rf(F, M, k)
        phi, k = _rf(F, M, k)
        pre, k = _ri(M, k)
        out, k = _r3(A, F, M, k)
        oy0, k = _ri(M, k)
        oy1, k = _ri(M, k)
        dw_rows(x, p, c, pt, pl, sh, sw, hp, rowlen, last, taps, wt, bias_t, lo, hi, alpha_t, kind, lo2, hi2, pbt,
                plo, phi, pre, out, oy0, oy1)

    @_jit
    def _n_pool(A, M, F, k, is_max):
        x, k = _r3(A, F, M, k)
        out, k = _r3(A, F, M, k)
        c, kh, kw, sh, sw, pt, pl = M[k], M[k + 1], M[k + 2], M[k + 3], M[k + 4], M[k + 5], M[k + 6]
        lo, k = _rf(F, M, k + 7)
        hi, k = _rf(F, M, k)
        tmp, k = _r1(A, F, M, k)
        if is_max:
            pool_max(x, out, c, kh, kw, sh, sw, pt, pl, lo, hi, tmp)
        else:
            pool_avg(x, out, c, kh, kw, sh, sw, pt, pl, lo, hi, tmp)

    @_jit
    def _n_fc_chain(A, M, F, k):
        x, k = _r2(A, F, M, k)
        params, k = _r1(A, F, M, k)
        meta, k = _rt(M, k)
        buf, k = _r2(A, F, M, k)
        out, k = _r1(A, F, M, k)
        fc_chain(x, params, meta.reshape((meta.shape[0] // 6, 6)), buf, out)

    @_jit
    def _n_resize(A, M, F, k):
        x, k = _r1(A, F, M, k)
        h, w, c = M[k], M[k + 1], M[k + 2]
        out, k = _r1(A, F, M, k + 3)
        oh, ow = M[k], M[k + 1]
        y0, k = _rt(M, k + 2)
        y1, k = _rt(M, k)
        wy0, k = _r1(A, F, M, k)
        wy1, k = _r1(A, F, M, k)
        x0, k = _rt(M, k)
        x1, k = _rt(M, k)
        wx0, k = _r1(A, F, M, k)
        wx1, k = _r1(A, F, M, k)
        tmp, k = _r1(A, F, M, k)
        resize_bilinear(x, h, w, c, out, oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1, tmp)

    @_jit
    def _n_mean_hw(A, M, F, k):
        x, k = _r1(A, F, M, k)
        h, wc, c = M[k], M[k + 1], M[k + 2]
        out, k = _r1(A, F, M, k + 3)
        lo, k = _rf(F, M, k)
        hi, k = _rf(F, M, k)
        tmp, k = _r1(A, F, M, k)
        mean_hw(x, h, wc, c, out, lo, hi, tmp)

    @_jit
    def _n_act(A, M, F, k):
        out, k = _r1(A, F, M, k)
        kind, k = _ri(M, k)
        lo, k = _rf(F, M, k)
        hi, k = _rf(F, M, k)
        alpha, k = _r1(A, F, M, k)
        act_flat(out, kind, lo, hi, alpha)

    @_jit
    def _n_softmax(A, M, F, k):
        x, k = _r2(A, F, M, k)
        out, k = _r2(A, F, M, k)
        softmax_rows(x, out)

    @_jit
    def run_native(A, M, F):
        """Run the native records of M (see encode) in order."""
        i = 0
        end = M.shape[0]
        while i < end:
            op = M[i + 1]
            j = i + 2
            if op == OP_EPILOGUE:
                _n_epilogue(A, M, F, j)
            elif op == OP_EPILOGUE_ONTO:
                _n_epilogue_onto(A, M, F, j)
            elif op == OP_EPILOGUE_PARTIAL:
                _n_epilogue_partial(A, M, F, j)
            elif op == OP_GEMM:
                _n_gemm(A, M, F, j)
            elif op == OP_BINARY:
                _n_binary(A, M, F, j)
            elif op == OP_COPY:
                _n_copy(A, M, F, j)
            elif op == OP_SIGMOID:
                _n_sigmoid(A, M, F, j)
            elif op == OP_IM2COL_PADDED:
                _n_im2col_padded(A, M, F, j)
            elif op == OP_DW_1X1:
                _n_dw_1x1(A, M, F, j)
            elif op == OP_DW:
                _n_dw(A, M, F, j)
            elif op == OP_POOL_MAX:
                _n_pool(A, M, F, j, True)
            elif op == OP_POOL_AVG:
                _n_pool(A, M, F, j, False)
            elif op == OP_FC_CHAIN:
                _n_fc_chain(A, M, F, j)
            elif op == OP_RESIZE:
                _n_resize(A, M, F, j)
            elif op == OP_MEAN_HW:
                _n_mean_hw(A, M, F, j)
            elif op == OP_ACT:
                _n_act(A, M, F, j)
            elif op == OP_SOFTMAX:
                _n_softmax(A, M, F, j)
            else:
                raise ValueError("unknown native op")
            i += M[i]

    @njit(cache=True, nogil=True, parallel=True)
    def run_native2(A, M1, F1, M2, F2):
        """Two lists of native records at once, on two of numba's threads (the halves of a
        split step: they write disjoint outputs)."""
        for t in prange(2):
            if t == 0:
                run_native(A, M1, F1)
            else:
                run_native(A, M2, F2)
else:  # pragma: no cover - exercised with ACELERA_XNNPACK_NUMBA=0
    epilogue = epilogue_onto = epilogue_partial = dw_1x1 = pool_max = pool_avg = fc_chain = resize_bilinear = None
    mean_hw = act_flat = softmax_rows = dw_rows = gemm_small = binary = copy_runs = im2col_padded = None
    sigmoid = run_native = run_native2 = None
