"""numba element-wise kernels of the float steps: activations over a flat array (act_flat),
binary ops with a broadcast vector (binary), runs of copies
(copy_runs: CONCATENATION, PAD) and LOGISTIC/swish on vector arithmetic only (sigmoid). Their
numpy twins are in ops.py and spec.py. Imported only when numba is available (jit.AVAILABLE)."""
from __future__ import annotations

import numpy as np
from numba import njit

from acelera.plugins.xnnpack_cpu.jit_helpers import _U, _act_row, _jit


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


# Element-wise binary ops: 0 ADD, 1 SUB, 2 MUL, 3 DIV, 4 MAXIMUM, 5 MINIMUM (LiteRT's
# a > b ? a : b and a < b ? a : b: NaN in b passes), 6 SQUARED_DIFFERENCE; then a clamp.

@njit(inline="always", boundscheck=False, error_model="numpy")
def _bin_loop(a, b, o, op, lo, hi):
    """o = clamp(a op b) over equal-length 1-D arrays; o may be a or b itself. In place, the
    loop is given o for that operand: LLVM's overlap test fails on two arrays at one address
    and takes its scalar loop (4x slower) where one array read and written vectorizes."""
    if o.ctypes.data == a.ctypes.data:
        _bin_ops(o, b, o, op, lo, hi)
    elif o.ctypes.data == b.ctypes.data:
        _bin_ops(a, o, o, op, lo, hi)
    else:
        _bin_ops(a, b, o, op, lo, hi)


@njit(inline="always", boundscheck=False, error_model="numpy")
def _bin_ops(a, b, o, op, lo, hi):
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
    if c == 1:  # a scalar: one fill loop (a slice per period made small tensors 2x slower)
        s = v[0]
        for j in range(_U(lb)):
            tile[j] = s
    else:
        for r in range(lb // c):
            t = tile[r * c:(r + 1) * c]
            for j in range(_U(c)):
                t[j] = v[j]
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


# LOGISTIC with vector arithmetic only (numba's exp is a scalar libm call): exp(-x) =
# p(r) * 2^n, n = round(-x / ln 2), r = -x - n ln 2 (two-constant split), p the degree-5
# Taylor polynomial; 2^n is built as float bits (int32 (n + 127) << 23) in a scratch read
# back as float32. Within a few units in the last place of 1 / (1 + exp(-x)) except far
# below 1e-37; NaN stays NaN, +-inf give 1 and 0 (and x * sigmoid(x) at -inf gives NaN,
# as MUL(x, LOGISTIC(x)) does).
_SIG_FAST = {"contract", "nsz", "arcp"}  # no reassoc: the rounding trick must not fold
_SIG_BLOCK = 512


# error_model="numpy": no zero-division test per element, which kept the loops scalar (7x slower)
@njit(cache=True, fastmath=_SIG_FAST, nogil=True, boundscheck=False, error_model="numpy")
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
        # results go to fb first, then to out: a loop writing out while reading x cannot be
        # vectorized when out is x (LLVM's overlap test fails and it takes the scalar loop)
        if swish:
            for j in range(_U(m)):
                v = xs[j]
                e = pb[j] * fb[j]
                e = np.float32(np.inf) if v < np.float32(-88.0) else e
                sg = v * (np.float32(1) / (np.float32(1) + e))
                fb[j] = sg if v == v else v
        else:
            for j in range(_U(m)):
                v = xs[j]
                e = pb[j] * fb[j]
                e = np.float32(np.inf) if v < np.float32(-88.0) else e
                sg = np.float32(1) / (np.float32(1) + e)
                fb[j] = sg if v == v else v
        for j in range(_U(m)):
            os_[j] = fb[j]
