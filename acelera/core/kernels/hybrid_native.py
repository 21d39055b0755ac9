"""numba loops of the hybrid kernels. The asymmetric hybrid FULLY_CONNECTED (float32 input, int8 weights): per row,
PortableAsymmetricQuantizeFloats (tensor_utils::BatchQuantizeFloats with asymmetric inputs,
reference/portable_tensor_utils.cc), the int32 dot products of MatrixBatchVectorMultiplyAccumulate
minus row_sum * offset, and result = bias + float(dot) * scale, as fully_connected.py's numpy
path computes them (hybrid_quant.portable_asymmetric_rows, then a float32 product). And the
x86 NeonAsymmetricQuantizeFloats of the hybrid convolutions (hybrid_quant.neon_asymmetric_shifted)
and the depthwise taps of the hybrid DEPTHWISE_CONV_2D (conv_integer.dw_hybrid).

Every jitted function lives in this module and calls none of another module (numba's cache
watches only the defining file). numba is imported, and the loop compiled (or loaded from numba's
on-disk cache), on first use: `fc_hybrid_kernel()`, `neon_quantize_kernel()` and
`dw_taps_kernel()` return them, or
None when numba cannot be imported (the callers then run their numpy paths).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def _nudged_offset(a, c):  # pragma: no cover - compiled
    """The int8 zero point of an asymmetric quantization whose range maps to [a, c] in scale
    units: LiteRT's nudged zero point, rounded half away from zero and clamped to int8."""
    zpd = -128.0 - a if 128.0 - a < 127.0 + c else 127.0 - c
    if zpd <= -128.0:
        return -128
    if zpd >= 127.0:
        return 127
    m = -zpd if zpd < 0.0 else zpd
    fl = math.floor(m)
    r = fl + 1.0 if m - fl >= 0.5 else fl
    return int(-r if zpd < 0.0 else r)


def _fc_hybrid_asym(x, w, scales, per_channel, bias, out, q):  # pragma: no cover - compiled
    """x (B, K) float32, w (U, K) int32 weights, scales float32 (U per channel, else the one
    weights scale), bias float32 (U, or empty), out (B, U) float32, q (K,) int32 scratch.
    Returns False, leaving out partly written, when a row holds a value that is not finite or
    its scaling factor is too small to invert (the numpy path reproduces those)."""
    n_rows, k_depth = x.shape
    units = w.shape[0]
    f0 = np.float32(0.0)
    one = np.float32(1.0)
    half = np.float32(0.5)
    has_bias = bias.shape[0] > 0
    for b in range(n_rows):
        mn = x[b, 0]
        mx = x[b, 0]
        finite = True
        for k in range(k_depth):
            v = x[b, k]
            if not (v - v == f0):  # inf or NaN
                finite = False
            if v < mn:
                mn = v
            if v > mx:
                mx = v
        if not finite:
            return False
        rmin = np.float64(min(f0, mn))
        rmax = np.float64(max(f0, mx))
        if rmin == rmax:
            for k in range(k_depth):
                q[k] = 0
            sf = one
        else:
            scale = (rmax - rmin) / 255.0
            a = rmin / scale
            c = rmax / scale
            off = _nudged_offset(a, c)
            sf = np.float32(scale)
            inv = one / sf
            if not (inv - inv == f0):  # a scaling factor of 0 or tiny: the numpy path
                return False
            offf = np.float32(off)
            for k in range(k_depth):
                t = x[b, k] * inv + offf
                at = -t if t < f0 else t
                fa = np.float32(math.floor(at))
                rr = fa + one if at - fa >= half else fa
                if t < f0:
                    rr = -rr
                if rr < np.float32(-128.0):
                    rr = np.float32(-128.0)
                elif rr > np.float32(127.0):
                    rr = np.float32(127.0)
                q[k] = np.int32(rr) - off
        for u in range(units):
            acc = np.int32(0)
            for k in range(k_depth):
                acc += q[k] * w[u, k]
            s = sf * (scales[u] if per_channel else scales[0])
            y = np.float32(acc) * s
            if has_bias:
                y = bias[u] + y
            out[b, u] = y
    return True


def _neon_asym_shifted(flat, out):  # pragma: no cover - compiled
    """NeonAsymmetricQuantizeFloats of one flat float32 batch into out (float32, q - offset):
    (done, scaling factor, offset); not done when a value is not finite or the scaling factor
    is too small to invert (the numpy path reproduces those)."""
    n = flat.shape[0]
    f0 = np.float32(0.0)
    half = np.float32(0.5)
    mn = flat[0]
    mx = flat[0]
    for i in range(n):
        v = flat[i]
        if not (v - v == f0):  # inf or NaN
            return False, np.float32(1.0), 0
        if v < mn:
            mn = v
        if v > mx:
            mx = v
    rmin = min(f0, mn)
    rmax = max(f0, mx)
    if rmin == rmax:
        for i in range(n):
            out[i] = f0
        return True, np.float32(1.0), 0
    scale = np.float64(rmax - rmin) / 255.0  # the range is a float32 difference here
    a = np.float64(rmin) / scale
    c = np.float64(rmax) / scale
    off = _nudged_offset(a, c)
    sf = np.float32(scale)
    if sf == f0:
        return False, np.float32(1.0), 0
    inv = np.float32(1.0 / np.float64(sf))
    if not (inv - inv == f0):  # a tiny scaling factor: the numpy path
        return False, np.float32(1.0), 0
    lo = np.float32(-128 - off)
    hi = np.float32(127 - off)
    n8 = n - n % 8
    for i in range(n):
        v = flat[i] * inv
        if i < n8:  # RoundToNearest: trunc(v +- 0.5f)
            w = v + (-half if v < f0 else half)
            rr = np.float32(int(w))
        else:  # std::round
            av = -v if v < f0 else v
            fa = np.float32(math.floor(av))
            rr = fa + np.float32(1.0) if av - fa >= half else fa
            if v < f0:
                rr = -rr
        if rr < lo:
            rr = lo
        elif rr > hi:
            rr = hi
        out[i] = rr
    return True, sf, off


def _dw_taps(q, w, geo, mult, out):  # pragma: no cover - compiled
    """Depthwise taps of integer-valued float32 q - offset (N, H, W, C) with w (KH, KW, C*mult)
    into the zeroed out (N, OH, OW, C*mult); geo = (stride h, w, dilation h, w, pad top, left).
    Taps in the padding read 0 and are skipped; every partial sum is an exact float32 integer
    (the caller checks KH*KW*255*128 <= 2**24)."""
    n, h, wd, c = q.shape
    kh, kw, _ = w.shape
    _, oh, ow, _ = out.shape
    sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ky in range(kh):
                    iy = oy * sh - pt + ky * dh
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx * dw
                        if ix < 0 or ix >= wd:
                            continue
                        if mult == 1:
                            for ch in range(c):
                                out[b, oy, ox, ch] += q[b, iy, ix, ch] * w[ky, kx, ch]
                        else:
                            for ch in range(c):
                                v = q[b, iy, ix, ch]
                                for m in range(mult):
                                    out[b, oy, ox, ch * mult + m] += v * w[ky, kx, ch * mult + m]


_KERNELS: dict[str, Any] | None = None
_FAILED = False


def _kernels() -> dict[str, Any] | None:
    global _KERNELS, _FAILED, _nudged_offset
    if _KERNELS is None and not _FAILED:
        try:
            import numba
        except Exception:  # pragma: no cover - numba is a dependency
            _FAILED = True
            return None
        _nudged_offset = numba.njit(cache=True, nogil=True, error_model="numpy")(_nudged_offset)
        _KERNELS = {name: numba.njit(cache=True, nogil=True, error_model="numpy")(fn)
                    for name, fn in (("fc", _fc_hybrid_asym), ("neon", _neon_asym_shifted), ("dw", _dw_taps))}
    return _KERNELS


def fc_hybrid_kernel() -> Any:
    """The compiled hybrid FULLY_CONNECTED loop (None without numba)."""
    k = _kernels()
    return None if k is None else k["fc"]


def neon_quantize_kernel() -> Any:
    """The compiled NeonAsymmetricQuantizeFloats of one batch (None without numba)."""
    k = _kernels()
    return None if k is None else k["neon"]


def dw_taps_kernel() -> Any:
    """The compiled depthwise taps of the hybrid DEPTHWISE_CONV_2D (None without numba)."""
    k = _kernels()
    return None if k is None else k["dw"]
