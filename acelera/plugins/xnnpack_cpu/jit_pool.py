"""numba spatial reductions of the float steps: MAX_POOL_2D and AVERAGE_POOL_2D (pool_max,
pool_avg), RESIZE_BILINEAR (resize_bilinear) and the mean over H and W (mean_hw). Their numpy
twins are in ops.py. Imported only when numba is available (jit.AVAILABLE)."""
from __future__ import annotations

import numpy as np

from acelera.plugins.xnnpack_cpu.jit_helpers import _U, _Z, _jit


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
