"""Fast input quantizers of the hybrid (float32 input, int8 weights) kernels.

Mirrors tflite/kernels/internal/reference/portable_tensor_utils.cc
(PortableAsymmetricQuantizeFloats, as fully_connected.py's quantize_rows reproduces it) and
the NEON_2_SSE build of internal/optimized/neon_tensor_utils.cc (NeonAsymmetricQuantizeFloats,
as conv_quantization.asymmetric_quantize reproduces it for the hybrid convolutions).

Both return the quantized values minus their row's offset (``q - offset``, integers in
[-255, 255] held as float32), which the kernels multiply by the weights directly: the exact
dot product of ``q - offset`` is LiteRT's ``dot(q) - row_sum * offset``. Rows whose range is
not finite return None so that the callers keep their general path.
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.hybrid_native import neon_quantize_kernel

F32 = np.float32
_BELOW_HALF = np.nextafter(F32(0.5), F32(0))
_BELOW_HALF64 = np.nextafter(0.5, 0.0)
_HALF = F32(0.5)
_INF = math.inf
_SCALAR_ROWS = 24  # up to this many rows the per-row parameters are computed in Python


def _round_inplace(t: np.ndarray, below_half=_BELOW_HALF) -> np.ndarray:
    """std::round of a float array in place: trunc(t +- the largest float below one half, of
    t's precision)."""
    h = np.copysign(below_half, t)
    t += h
    return np.trunc(t, out=t)


def _nudged_offset(zpd: float) -> int:
    """The nudged zero point: clamp to [-128, 127], else std::round (halves away from zero)."""
    if zpd <= -128.0:
        return -128
    if zpd >= 127.0:
        return 127
    m = -zpd if zpd < 0.0 else zpd
    f = math.floor(m)
    r = int(f) + 1 if m - f >= 0.5 else int(f)
    return -r if zpd < 0.0 else r


def _zero_point(rmin: float, rmax: float, scale: float) -> int:
    """The zero point both quantizers derive from (rmin, rmax, scale) in double."""
    a, b = rmin / scale, rmax / scale  # a <= 0 <= b
    return _nudged_offset(-128.0 - a if 128.0 - a < 127.0 + b else 127.0 - b)


def portable_asymmetric_rows(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """PortableAsymmetricQuantizeFloats of each row of a float32 (B, K) array, K >= 1:
    (q - offset as float32, float32 scaling factors, float64 offsets), or None when a row's
    minimum or maximum is not finite."""
    mn = np.minimum.reduce(x2, axis=1)
    mx = np.maximum.reduce(x2, axis=1)
    rows = mn.shape[0]
    if rows <= _SCALAR_ROWS:
        floor = math.floor
        sfs: list[float] = []
        offs: list[float] = []
        for lo, hi in zip(mn.tolist(), mx.tolist()):
            if not -_INF < lo <= hi < _INF:  # inf or NaN
                return None
            rmin = lo if lo < 0.0 else 0.0
            rmax = hi if hi > 0.0 else 0.0
            if rmin == rmax:
                sfs.append(1.0)
                offs.append(0.0)
                continue
            scale = (rmax - rmin) / 255.0
            sfs.append(scale)
            a, b = rmin / scale, rmax / scale  # _zero_point, inlined
            zpd = -128.0 - a if 128.0 - a < 127.0 + b else 127.0 - b
            if zpd <= -128.0:
                offs.append(-128.0)
            elif zpd >= 127.0:
                offs.append(127.0)
            else:
                m = -zpd if zpd < 0.0 else zpd
                f = floor(m)
                r = f + 1.0 if m - f >= 0.5 else f
                offs.append(-r if zpd < 0.0 else r)
        sf = np.array(sfs, F32)
        off = np.array(offs, np.float64)
    else:
        rmin = np.minimum(mn, 0.0, dtype=np.float64)
        rmax = np.maximum(mx, 0.0, dtype=np.float64)
        d = rmax - rmin
        if not d.sum() < _INF:
            return None
        same = None
        if not d.min() > 0.0:
            same = d == 0.0
            d[same] = 255.0
        scale = d / 255.0
        a = rmin / scale
        b = rmax / scale
        zpd = np.where(128.0 - a < 127.0 + b, -128.0 - a, 127.0 - b)
        off = clip_ufunc(_round_inplace(zpd, _BELOW_HALF64), -128.0, 127.0, out=zpd)
        sf = scale.astype(F32)
        if same is not None:
            off[same] = 0.0
            sf[same] = 1.0
    if rows == 1:  # scalars: no broadcasting
        inv1, off1 = F32(1) / sf[0], F32(off[0])
        t = x2 * inv1
        t += off1
        _round_inplace(t)
        clip_ufunc(t, -128.0, 127.0, out=t)
        t -= off1
        return t, sf, off
    inv = F32(1) / sf
    off32 = off.astype(F32)[:, None]
    t = x2 * inv[:, None]
    t += off32
    _round_inplace(t)
    clip_ufunc(t, -128.0, 127.0, out=t)
    t -= off32
    return t, sf, off


def neon_asymmetric_shifted(flat: np.ndarray) -> tuple[np.ndarray, np.float32, int] | None:
    """NeonAsymmetricQuantizeFloats (LiteRT's x86 build) of one flat float32 batch:
    (q - offset as float32, scaling factor, offset), or None when the range is not finite.
    Whole 8-value blocks round as trunc(v +- 0.5f), the tail with std::round."""
    lo, hi = float(flat.min()), float(flat.max())
    if not -_INF < lo <= hi < _INF:  # inf or NaN
        return None
    rmin, rmax = min(0.0, lo), max(0.0, hi)
    if rmin == rmax:
        return np.zeros(flat.shape, F32), F32(1.0), 0
    scale = float(F32(rmax) - F32(rmin)) / 255.0
    offset = _zero_point(rmin, rmax, scale)
    sf = F32(scale)
    inv = F32(1.0 / float(sf)) if sf != 0 else F32(0)
    t = flat * inv
    n8 = t.size & ~7
    if n8 == t.size:
        t += np.copysign(_HALF, t)
        np.trunc(t, out=t)
    else:
        head = t[:n8]
        head += np.copysign(_HALF, head)
        np.trunc(head, out=head)
        _round_inplace(t[n8:])
    return clip_ufunc(t, float(-128 - offset), float(127 - offset), out=t), sf, offset


def neon_asymmetric_batches(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """neon_asymmetric_shifted of each batch x[i] of a float32 array (compiled in
    hybrid_native.py when numba is there): (q - offset as float32, shaped like x; float32
    scaling factors), or None when a batch's range is not finite."""
    n = x.shape[0]
    native = neon_quantize_kernel()
    if native is not None and x.size:
        out = np.empty(x.shape, F32)
        factors = np.empty(n, F32)
        for i in range(n):
            done, factors[i], _ = native(x[i].reshape(-1), out[i].reshape(-1))
            if not done:
                return None
        return out, factors
    if n == 1:
        r = neon_asymmetric_shifted(x.reshape(-1))
        if r is None:
            return None
        return r[0].reshape(x.shape), np.array([r[1]], F32)
    out = np.empty(x.shape, F32)
    factors = np.empty(n, F32)
    for i in range(n):
        r = neon_asymmetric_shifted(x[i].reshape(-1))
        if r is None:
            return None
        out[i] = r[0].reshape(x.shape[1:])
        factors[i] = r[1]
    return out, factors
