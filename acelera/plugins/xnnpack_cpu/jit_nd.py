"""numba kernels for the small steps of transformer-like graphs, so that they run as native
records (one call per run of steps) instead of numpy closures: broadcasting binary ops over up
to four (collapsed) dimensions (binary_nd), element-wise unary ops including GELU (unary),
MEAN over a contiguous group of axes (mean_mid), TRANSPOSE (transpose4) and small BATCH_MATMULs
(bmm). Their numpy twins are in ops.py. Imported only when numba is available (jit.AVAILABLE)."""
from __future__ import annotations

import numpy as np
from numba import njit

from acelera.plugins.xnnpack_cpu.jit_elementwise import _bin_loop as _vv  # o = clamp(a op b), rows
from acelera.plugins.xnnpack_cpu.jit_helpers import _U, _Z, _jit


@njit(inline="always", boundscheck=False, error_model="numpy")
def _vs(a, v, o, op, lo, hi):
    """o = clamp(a op v), v a scalar (in place: see jit_elementwise._bin_loop)."""
    if o.ctypes.data == a.ctypes.data:
        _vs_ops(o, v, o, op, lo, hi)
    else:
        _vs_ops(a, v, o, op, lo, hi)


@njit(inline="always", boundscheck=False, error_model="numpy")
def _vs_ops(a, v, o, op, lo, hi):
    n = _U(o.shape[0])
    if op == 0:
        for j in range(n):
            o[j] = min(max(a[j] + v, lo), hi)
    elif op == 1:
        for j in range(n):
            o[j] = min(max(a[j] - v, lo), hi)
    elif op == 2:
        for j in range(n):
            o[j] = min(max(a[j] * v, lo), hi)
    elif op == 3:
        for j in range(n):
            o[j] = min(max(a[j] / v, lo), hi)
    elif op == 4:
        for j in range(n):
            u = a[j]
            o[j] = min(max(u if u > v else v, lo), hi)
    elif op == 5:
        for j in range(n):
            u = a[j]
            o[j] = min(max(u if u < v else v, lo), hi)
    else:
        for j in range(n):
            d = a[j] - v
            o[j] = min(max(d * d, lo), hi)


@njit(inline="always", boundscheck=False, error_model="numpy")
def _sv(u, b, o, op, lo, hi):
    """o = clamp(u op b), u a scalar (in place: see jit_elementwise._bin_loop)."""
    if o.ctypes.data == b.ctypes.data:
        _sv_ops(u, o, o, op, lo, hi)
    else:
        _sv_ops(u, b, o, op, lo, hi)


@njit(inline="always", boundscheck=False, error_model="numpy")
def _sv_ops(u, b, o, op, lo, hi):
    n = _U(o.shape[0])
    if op == 0:
        for j in range(n):
            o[j] = min(max(u + b[j], lo), hi)
    elif op == 1:
        for j in range(n):
            o[j] = min(max(u - b[j], lo), hi)
    elif op == 2:
        for j in range(n):
            o[j] = min(max(u * b[j], lo), hi)
    elif op == 3:
        for j in range(n):
            o[j] = min(max(u / b[j], lo), hi)
    elif op == 4:
        for j in range(n):
            v = b[j]
            o[j] = min(max(u if u > v else v, lo), hi)
    elif op == 5:
        for j in range(n):
            v = b[j]
            o[j] = min(max(u if u < v else v, lo), hi)
    else:
        for j in range(n):
            d = u - b[j]
            o[j] = min(max(d * d, lo), hi)


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def binary_nd(x, y, out, op, lo, hi, shp, sx, sy):
    """out = clamp(x op y) over a 4-D index space `shp` (C order, out contiguous); sx, sy: the
    operands' element strides per dimension (0 where broadcast; the last is 0 or 1)."""
    d0, d1, d2, n = shp[0], shp[1], shp[2], shp[3]
    ix3, iy3 = sx[3], sy[3]
    o = 0
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                bx = i0 * sx[0] + i1 * sx[1] + i2 * sx[2]
                by = i0 * sy[0] + i1 * sy[1] + i2 * sy[2]
                if ix3 == 1 and iy3 == 1:
                    _vv(x[bx:bx + n], y[by:by + n], out[o:o + n], op, lo, hi)
                elif ix3 == 1:
                    _vs(x[bx:bx + n], y[by], out[o:o + n], op, lo, hi)
                elif iy3 == 1:
                    _sv(x[bx], y[by:by + n], out[o:o + n], op, lo, hi)
                else:
                    _vs(x[bx:bx + 1], y[by], out[o:o + 1], op, lo, hi)
                    r = out[o]
                    for j in range(1, n):
                        out[o + j] = r
                o += n


#: erfc by Abramowitz & Stegun 7.1.26: the float32 formula of acelera's reference GELU
_P = np.float32(0.3275911)
_A1, _A2, _A3, _A4, _A5 = (np.float32(1.061405429), np.float32(-1.453152027), np.float32(1.421413741),
                           np.float32(-0.284496736), np.float32(0.254829592))
_SQRT1_2 = np.float32(np.sqrt(0.5))
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)


# exp of non-positive arguments with vector arithmetic only (numba's exp is a scalar libm
# call), jit_elementwise.sigmoid's formula: exp(z) = p(r) * 2^n, n = round(z / ln 2), 2^n built
# as float bits in a scratch block. Below -87 the result is 0 (exp would be a denormal there),
# NaN stays NaN.
_EXP_FAST = {"contract", "nsz", "arcp"}  # no reassoc: the rounding trick must not fold
_BLOCK = 512


@njit(inline="always", fastmath=_EXP_FAST, boundscheck=False)
def _exp_nonpos(z, dst, m, scratch):
    """dst[:m] = exp(z[:m]) for z <= 0 (or NaN); scratch: 2 * _BLOCK float32, m <= _BLOCK."""
    fb = scratch[:_BLOCK]
    ib = fb.view(np.int32)
    pb = scratch[_BLOCK:2 * _BLOCK]
    for j in range(_U(m)):
        zc = max(min(z[j], np.float32(0.0)), np.float32(-87.0))
        t = zc * np.float32(1.4426950408889634)
        nf = (t + np.float32(12582912.0)) - np.float32(12582912.0)
        r = zc - nf * np.float32(0.693145751953125) - nf * np.float32(1.428606765330187e-06)
        p = np.float32(1.0) + r * (np.float32(1.0) + r * (np.float32(0.49999997) + r * (
            np.float32(0.16666654) + r * (np.float32(0.041665796) + r * np.float32(0.008333452)))))
        ib[j] = (np.int32(nf) + np.int32(127)) << np.int32(23)
        pb[j] = p
    for j in range(_U(m)):
        v = z[j]
        e = pb[j] * fb[j]
        e = np.float32(0.0) if v < np.float32(-87.0) else e
        dst[j] = e if v == v else v


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def softmax_rows_fast(x, out, scratch):
    """SOFTMAX (beta 1) over the last axis of (rows, n): exp(x - max) / sum, out (C-contiguous)
    may be x. The differences of all rows are exponentiated in blocks of _BLOCK values."""
    rows, n = x.shape
    for r in range(rows):
        a = x[r]
        o = out[r]
        mx = a[0]
        for j in range(1, n):
            mx = max(mx, a[j])
        for j in range(_U(n)):
            o[j] = a[j] - mx
    flat = out.reshape(-1)
    total = rows * n
    for b0 in range(0, total, _BLOCK):
        m = min(_BLOCK, total - b0)
        blk = flat[b0:b0 + m]
        _exp_nonpos(blk, blk, m, scratch)
    for r in range(rows):
        o = out[r]
        sm = _Z
        for j in range(_U(n)):
            sm += o[j]
        for j in range(_U(n)):
            o[j] = o[j] / sm


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def gelu_fast(x, out, scratch):
    """GELU (exact form): the reference's erfc formula, exp(-z^2) by _exp_nonpos; out may be x.
    scratch: 3 * _BLOCK float32."""
    n = out.shape[0]
    e = scratch[2 * _BLOCK:3 * _BLOCK]
    for b0 in range(0, n, _BLOCK):
        m = min(_BLOCK, n - b0)
        xb = x[b0:b0 + m]
        ob = out[b0:b0 + m]
        for j in range(_U(m)):
            z = abs(xb[j]) * _SQRT1_2
            e[j] = -(z * z)
        _exp_nonpos(e, e, m, scratch)
        for j in range(_U(m)):
            v = xb[j]
            ax = abs(v)
            z = ax * _SQRT1_2
            t = _ONE / (z * _P + _ONE)
            p = t * _A1
            p = (p + _A2) * t
            p = (p + _A3) * t
            p = (p + _A4) * t
            p = (p + _A5) * t
            p = p * e[j]
            ob[j] = max(v, _Z) - p * ax * _HALF


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def unary(x, out, op):
    """out = f(x), out may be x: 0 NEG, 1 RSQRT (1 / sqrt), 2 SQRT, 3 ABS, 4 SQUARE, 5 EXP,
    6 TANH, 7 LOG, 8 FLOOR, 9 CEIL, 10 GELU (exact form, the reference's erfc formula), 11 SIN,
    12 COS. In place the loops get out alone (see jit_elementwise._bin_loop)."""
    if out.ctypes.data == x.ctypes.data:
        _unary_ops(out, out, op)
    else:
        _unary_ops(x, out, op)


@njit(inline="always", boundscheck=False, error_model="numpy")
def _unary_ops(x, out, op):
    n = _U(out.shape[0])
    if op == 0:
        for j in range(n):
            out[j] = -x[j]
    elif op == 1:
        for j in range(n):
            out[j] = _ONE / np.sqrt(x[j])
    elif op == 2:
        for j in range(n):
            out[j] = np.sqrt(x[j])
    elif op == 3:
        for j in range(n):
            out[j] = abs(x[j])
    elif op == 4:
        for j in range(n):
            v = x[j]
            out[j] = v * v
    elif op == 5:
        for j in range(n):
            out[j] = np.exp(x[j])
    elif op == 6:
        for j in range(n):
            out[j] = np.tanh(x[j])
    elif op == 7:
        for j in range(n):
            out[j] = np.log(x[j])
    elif op == 8:
        for j in range(n):
            out[j] = np.floor(x[j])
    elif op == 9:
        for j in range(n):
            out[j] = np.ceil(x[j])
    elif op == 10:
        for j in range(n):
            v = x[j]
            ax = abs(v)
            z = ax * _SQRT1_2
            t = _ONE / (z * _P + _ONE)
            p = t * _A1
            p = (p + _A2) * t
            p = (p + _A3) * t
            p = (p + _A4) * t
            p = (p + _A5) * t
            p = p * np.exp(-(z * z))
            out[j] = max(v, _Z) - p * ax * _HALF
    elif op == 11:
        for j in range(n):
            out[j] = np.sin(x[j])
    else:
        for j in range(n):
            out[j] = np.cos(x[j])


@_jit
def mean_mid(x, outer, r, inner, out, cnt):
    """out[o, i] = sum_j x[o, j, i] / cnt for x of (outer, r, inner), out of (outer, inner)."""
    ni = _U(inner)
    for o in range(outer):
        acc = out[o * inner:(o + 1) * inner]
        if inner == 1:
            base = x[o * r:(o + 1) * r]
            s = _Z
            for j in range(_U(r)):
                s += base[j]
            acc[0] = s / cnt
            continue
        for i in range(ni):
            acc[i] = _Z
        for j in range(r):
            row = x[(o * r + j) * inner:(o * r + j + 1) * inner]
            for i in range(ni):
                acc[i] += row[i]
        for i in range(ni):
            acc[i] = acc[i] / cnt


@_jit
def mean_nd(x, out, shp, so, cnt):
    """out = the mean of x (contiguous, 4-D index space shp) over the dimensions where the
    output strides so are 0 (reduced axes that are not one contiguous range)."""
    for i in range(out.shape[0]):
        out[i] = _Z
    d0, d1, d2, n = shp[0], shp[1], shp[2], shp[3]
    s3 = so[3]
    k = 0
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                b = i0 * so[0] + i1 * so[1] + i2 * so[2]
                row = x[k:k + n]
                if s3 == 0:
                    s = _Z
                    for j in range(_U(n)):
                        s += row[j]
                    out[b] += s
                else:
                    dst = out[b:b + n]
                    for j in range(_U(n)):
                        dst[j] += row[j]
                k += n
    for i in range(out.shape[0]):
        out[i] = out[i] / cnt


@_jit
def transpose4(x, out, shp, st):
    """out (contiguous, 4-D index space shp) = x read with element strides st."""
    d0, d1, d2, n = shp[0], shp[1], shp[2], shp[3]
    s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
    o = 0
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                b = i0 * s0 + i1 * s1 + i2 * s2
                if s3 == 1:
                    src = x[b:b + n]
                    dst = out[o:o + n]
                    for j in range(_U(n)):
                        dst[j] = src[j]
                else:
                    for j in range(n):
                        out[o + j] = x[b + j * s3]
                o += n


@_jit
def bmm(x, y, out, nb, m, k, n, xb, xm, xk, yb, yk, yn):
    """out[b, i, :] = sum_p x[b, i, p] * y[b, p, :] for contiguous out (nb, m, n); x and y read
    with element strides (xb, xm, xk) and (yb, yk, yn)."""
    for b in range(nb):
        for i in range(m):
            o = out[(b * m + i) * n:(b * m + i + 1) * n]
            for j in range(_U(n)):
                o[j] = _Z
            for p in range(k):
                a = x[b * xb + i * xm + p * xk]
                base = b * yb + p * yk
                if yn == 1:
                    row = y[base:base + n]
                    for j in range(_U(n)):
                        o[j] += a * row[j]
                else:
                    for j in range(n):
                        o[j] += a * y[base + j * yn]


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def layer_norm(x, out, rows, c, eps, gamma, beta):
    """The converter's LayerNorm graph per row of c values, its float32 operations in its order:
    m = mean(x), v = mean((x - m)^2), g = rsqrt(v + eps) * gamma, y = x * g + (-m * g + beta).
    out may be x."""
    cnt = np.float32(c)
    for r in range(rows):
        a = x[r * c:(r + 1) * c]
        o = out[r * c:(r + 1) * c]
        s = _Z
        for j in range(_U(c)):
            s += a[j]
        m = s / cnt
        s = _Z
        for j in range(_U(c)):
            d = a[j] - m
            s += d * d
        rs = _ONE / np.sqrt(s / cnt + eps)
        nm = -m
        for j in range(_U(c)):
            g = rs * gamma[j]
            b = nm * g + beta[j]
            o[j] = a[j] * g + b
