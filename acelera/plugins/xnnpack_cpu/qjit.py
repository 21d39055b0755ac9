"""Fused int8 epilogues in numba (optional), bit-exact with the reference kernels.

The reference int8 kernels are prepared as usual (their multipliers, shifts, packed weights and
scales are reused as they are); these helpers only replace their slow numpy tails:

- `FastRequantizer` stands in for a conv/depthwise kernel's `Requantizer`: one numba pass of
  gemmlowp's MultiplyByQuantizedMultiplier + zero point + clamp, written straight into the
  planned output buffer;
- `fc_int8` runs an int8 FULLY_CONNECTED (int32 accumulator, double-precision requantization,
  as the reference kernel) into the planned output buffer in one call.

`speed_up(fn, dst)` returns a faster equivalent of a prepared reference kernel writing into
`dst`, or None where none applies (the caller keeps the reference kernel).
"""
from __future__ import annotations

import numpy as np

from acelera.plugins.xnnpack_cpu import jit

INT32_MIN = -(1 << 31)

if jit.AVAILABLE:
    from numba import njit

    _qjit = njit(cache=True, nogil=True, boundscheck=False)

    @njit(inline="always", boundscheck=False)
    def _mbqm(a, m, shift):
        """gemmlowp MultiplyByQuantizedMultiplier for int32-range a (int64 arithmetic)."""
        if shift > 0:
            a = a << shift
            a = ((a + 2147483648) & 0xFFFFFFFF) - 2147483648
            right = 0
        else:
            right = -shift
        if a == INT32_MIN and m == INT32_MIN:
            x = 2147483647
        else:
            ab = a * m
            nudge = 1073741824 if ab >= 0 else 1 - 1073741824
            s = ab + nudge
            # C++ division truncates toward zero
            if s >= 0:
                x = s >> 31
            else:
                x = -((-s) >> 31)
        if right > 0:
            mask = (1 << right) - 1
            rem = x & mask
            thr = (mask >> 1) + (1 if x < 0 else 0)
            x = (x >> right) + (1 if rem > thr else 0)
        return x

    @_qjit
    def requant_into(acc, mult, shift, out_zp, qmin, qmax, out):
        """acc (rows, C) int64 -> out (rows * C,) int8/uint8; mult/shift of length C or 1."""
        rows, c = acc.shape
        per = mult.shape[0] > 1
        for i in range(rows):
            for j in range(c):
                k = j if per else 0
                v = _mbqm(acc[i, j], mult[k], shift[k]) + out_zp
                if v < qmin:
                    v = qmin
                elif v > qmax:
                    v = qmax
                out[i * c + j] = v

    @_qjit
    def fc_int8(x, in_zp, w, bias, eff, out_zp, lo, hi, out):
        """x (B, K) int8 and w (U, K) int64 integer weights (offset applied): int32 (wrapping)
        accumulation + bias, then round(double(acc) * eff[u]) + out_zp clamped (eff of length
        U or 1). Matches fully_connected's reference double-precision path."""
        b, k = x.shape
        u = w.shape[0]
        per = eff.shape[0] > 1
        xs = np.empty(k, np.int64)
        half = 0.49999999999999994
        for i in range(b):
            for t in range(k):
                xs[t] = np.int64(x[i, t]) - in_zp
            for j in range(u):
                acc = np.int64(0)
                for t in range(k):
                    acc += xs[t] * w[j, t]
                acc += bias[j]
                acc = ((acc + 2147483648) & 0xFFFFFFFF) - 2147483648
                v = np.float64(acc) * eff[j if per else 0]
                r = np.trunc(v + half) if v >= 0 else np.trunc(v - half)
                r += out_zp
                if r < lo:
                    r = lo
                elif r > hi:
                    r = hi
                out[i * u + j] = np.int64(r)


if jit.AVAILABLE:
    @_qjit
    def dw_int8(x, in_zp, w, bias, mult, sh, sw, dh, dw, pt, pl, oh, ow, rm, rs, out_zp, qmin, qmax, out):
        """Depthwise int8 conv (zero padding of the shifted input, int32 wrapping accumulator
        + bias) fused with the fixed-point requantization; out is flat (N*oh*ow*OC)."""
        n, h, wd, c = x.shape
        kh, kw, oc = w.shape
        per = rm.shape[0] > 1
        acc = np.empty(oc, np.int32)
        for b in range(n):
            for oy in range(oh):
                for ox in range(ow):
                    for j in range(oc):
                        acc[j] = 0
                    for ky in range(kh):
                        iy = oy * sh + ky * dh - pt
                        if iy < 0 or iy >= h:
                            continue
                        for kx in range(kw):
                            ix = ox * sw + kx * dw - pl
                            if ix < 0 or ix >= wd:
                                continue
                            xr = x[b, iy, ix]
                            wr = w[ky, kx]
                            if mult == 1:
                                for j in range(oc):
                                    acc[j] += (np.int32(xr[j]) - in_zp) * wr[j]
                            else:
                                for j in range(oc):
                                    acc[j] += (np.int32(xr[j // mult]) - in_zp) * wr[j]
                    base = ((b * oh + oy) * ow + ox) * oc
                    for j in range(oc):
                        a = np.int64(acc[j]) + bias[j]
                        a = ((a + 2147483648) & 0xFFFFFFFF) - 2147483648
                        k = j if per else 0
                        v = _mbqm(a, rm[k], rs[k]) + out_zp
                        if v < qmin:
                            v = qmin
                        elif v > qmax:
                            v = qmax
                        out[base + j] = v


def _dw(cl: dict, req, dst: np.ndarray):
    need = ("g", "mult", "wc", "b_const", "in_zp", "wide")
    if any(n not in cl for n in need):
        return None
    v = {n: cl[n].cell_contents for n in need}
    g, wc = v["g"], v["wc"]
    if v["wide"] or wc is None or v["b_const"] is None or wc.dtype != np.int32 or wc.ndim != 3:
        return None
    oc = wc.shape[2]
    bias = np.ascontiguousarray(np.asarray(v["b_const"]).reshape(-1).astype(np.int32).astype(np.int64))
    if bias.size != oc or dst.size != g.n * g.oh * g.ow * oc:
        return None
    flat = dst.reshape(-1)
    rest = (np.int32(v["in_zp"]), np.ascontiguousarray(wc), bias, int(v["mult"]), g.sh, g.sw,
            g.dh, g.dw, g.pt, g.pl, g.oh, g.ow, np.ascontiguousarray(req.mult, np.int64),
            np.ascontiguousarray(req.shift, np.int64), req.out_zp, req.qmin, req.qmax, flat)
    kern = dw_int8
    shape = (g.n, g.h, g.w, g.c)

    def run(x, *_):
        if x.dtype != np.int8 or x.shape != shape:
            raise RuntimeError("unexpected input")
        kern(x, *rest)
    return run


def _closure(fn) -> dict:
    code = getattr(fn, "__code__", None)
    if code is None or fn.__closure__ is None:
        return {}
    return {n: c for n, c in zip(code.co_freevars, fn.__closure__)}


class FastRequantizer:
    """Replaces a conv kernel's Requantizer: writes into `dst` and returns a view of it."""

    def __init__(self, req, dst: np.ndarray):
        self.mult = np.ascontiguousarray(req.mult, np.int64)
        self.shift = np.ascontiguousarray(req.shift, np.int64)
        self.out_zp, self.qmin, self.qmax = req.out_zp, req.qmin, req.qmax
        self.flat = dst.reshape(-1)
        self.dst = dst
        self.wrote = False

    def __call__(self, acc: np.ndarray) -> np.ndarray:
        a2 = acc.reshape(-1, acc.shape[-1])
        if a2.dtype != np.int64 or not a2.flags.c_contiguous or a2.size != self.flat.size:
            raise RuntimeError("unexpected accumulator")
        requant_into(a2, self.mult, self.shift, self.out_zp, self.qmin, self.qmax, self.flat)
        self.wrote = True
        return self.flat.reshape(acc.shape)


def speed_up(op: str, fn, dst: np.ndarray):
    """A faster callable equivalent to `fn(*args)` copied into dst, or None."""
    if not jit.AVAILABLE or dst.dtype not in (np.int8, np.uint8) or not dst.flags.c_contiguous:
        return None
    cl = _closure(fn)
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        cell = cl.get("req")
        if cell is None:
            return None
        req = cell.cell_contents
        if type(req).__name__ != "Requantizer" or req.wide or np.dtype(req.dtype) != dst.dtype:
            return None
        if np.any(np.asarray(req.mult) == INT32_MIN):
            return None
        if op == "DEPTHWISE_CONV_2D" and dst.dtype == np.int8:
            fused = _dw(cl, req, dst)
            if fused is not None:
                return fused
        fast = FastRequantizer(req, dst)
        cell.cell_contents = fast  # this prepared kernel instance is ours alone
        copy = np.copyto

        def run(*args):
            fast.wrote = False
            r = fn(*args)
            if not fast.wrote:
                copy(dst, r, casting="unsafe")
        return run
    if op == "FULLY_CONNECTED":
        return _fc(cl, dst)
    return None


def _fc(cl: dict, dst: np.ndarray):
    need = ("wt_pre", "b_pre", "eff", "in_zp", "out_zp", "lo_f", "hi_f", "in_range", "fixed_point",
            "as_rows")
    if any(n not in cl for n in need):
        return None
    v = {n: cl[n].cell_contents for n in need}
    if v["fixed_point"] or not v["in_range"] or v["wt_pre"] is None:
        return None
    mm = v["wt_pre"]
    w = np.concatenate([c[2] for c in mm.chunks], axis=1).astype(np.float64)
    wi = w.astype(np.int64)
    if not np.array_equal(wi, w) or wi.shape[1] != mm.k:
        return None
    units = wi.shape[0]
    bias = (np.zeros(units, np.int64) if v["b_pre"] is None
            else np.asarray(v["b_pre"], np.float64).astype(np.int64))
    eff = np.ascontiguousarray(np.asarray(v["eff"], np.float64).reshape(-1))
    if eff.size not in (1, units) or bias.size != units:
        return None
    as_rows = v["as_rows"]
    flat = dst.reshape(-1)
    args = (int(v["in_zp"]), np.ascontiguousarray(wi), bias, eff, int(v["out_zp"]), float(v["lo_f"]),
            float(v["hi_f"]), flat)
    kern = fc_int8

    def run(x, *_):
        x2, _shape = as_rows(x)
        if x2.dtype != np.int8 or x2.shape[0] * units != flat.size:
            raise RuntimeError("unexpected input")
        kern(x2, *args)
    return run
