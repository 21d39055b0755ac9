"""numba int8 kernels of xnnpack-cpu, bit-exact with the reference kernels.

They take their parameters from the reference kernels' prepared quantization parameters
(`acelera.core.kernels.prepared`), packed once by `int8_conv.py`:

- `conv_gemm`: CONV_2D (one group, any taps, strides, dilations, padding): panels of output
  pixels are gathered (im2col) into a small tile, multiplied with the packed filter by a GEMM
  micro-kernel that requantizes its accumulators in registers (bias, gemmlowp
  MultiplyByQuantizedMultiplier, zero point, activation clamp) and stores int8 straight into
  the output. A 1x1 stride-1 convolution reads its input rows directly;
- `dw_conv`: DEPTHWISE_CONV_2D over a zero-padded int16 copy of the input (zero point
  subtracted): every tap of a run of output pixels is one contiguous span, the taps and the
  requantization one vector loop;
- `fc_gemm`: FULLY_CONNECTED, the same micro-kernel (int32 sums), requantized in double
  precision as the reference FULLY_CONNECTED kernel does;
- `lut1`, `lut2`, `sum_lut`: lookups in tables of reference kernels (int8_tables.py).

GEMM operands: the input enters the micro-kernel as u = x + 128 (uint8; a flipped sign bit), so
sum_k (x - zp) * w = sum_k u * w - (128 + zp) * sum_k w: the second term is folded into the
bias at pack time (`input_correction`; every sum wraps modulo 2**32 like the C++ int32
accumulator, so the folding is exact), and padded taps hold 128 + zp. The K = kh*kw*cin
products of an output channel are taken in groups of KG; `pack_filter` lays out blocks of NR
output channels as [block][K/KG][NR][KG] int8. Per group the micro-kernel broadcasts KG bytes
of each of its MR input rows against NR channels: x86 VNNI vpdpbusd (KG = 4: uint8 x int8,
four products per int32 lane) where the host has AVX512-VNNI, else pmaddwd (KG = 2, widened
to int16) on AVX-512BW or AVX2, else a plain loop (same results). The vector code is LLVM IR
emitted by numba intrinsics into noinline functions (qjit_ir.py: the SIMD choice, the
requantization in vector registers, the micro-kernel tiles), so that it is optimized once.

CONV_2D and DEPTHWISE_CONV_2D also have a parallel version (`prange` over bands, one scratch
slice per band) that splits the work into nt[0] bands, the threads the delegate's num_threads
option allows (threads.py).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from acelera.plugins.xnnpack_cpu.qjit_ir import (
    KG,
    MR,
    MR1,
    NR,
    TABLE_ROWS,
    TAP_VL,
    _dw_run,
    _tile,
    _tile1,
    _tq,
    _tq1,
    _tq1_h,
    _tq_h,
    requant_table,  # noqa: F401 - re-exported for the tests
)

INT32_MIN = -(1 << 31)

_U = np.uintp  # unsigned indices: no negative-index fix-ups
_jit = njit(cache=True, nogil=True, boundscheck=False)
_jit_par = njit(cache=True, nogil=True, boundscheck=False, parallel=True)
_inline = njit(inline="always", nogil=True, boundscheck=False)


def pack_filter(w: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(O, K) filter of int8 values -> (packed int8 [blocks][K/KG][NR][KG] flat, K/KG groups,
    blocks)."""
    o, k = w.shape
    kg = (k + KG - 1) // KG
    nb = (o + NR - 1) // NR
    wp = np.zeros((nb * NR, KG * kg), np.int8)
    wp[:o, :k] = w
    packed = wp.reshape(nb, NR, kg, KG).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(packed).reshape(-1), kg, nb


def input_correction(w: np.ndarray, in_zp: int) -> np.ndarray:
    """(128 + in_zp) * sum_k w[o, k] (int64): what the uint8 input adds to each channel."""
    return (128 + int(in_zp)) * np.asarray(w, np.int64).sum(axis=1)

# --- helpers ----------------------------------------------------------------------------------
# Inner loops index views with the bare loop variable: numba then needs no negative-index
# fix-ups and LLVM vectorizes them.

@_inline
def _requant_fc_row(acc, bias, eff, per, out, n, out_zp, qmin, qmax):
    """FULLY_CONNECTED's double-precision requantization: round(double(acc + bias) * eff),
    INT32_MIN when out of the int32 range, + out_zp (int32 wrap), clamped."""
    half = 0.49999999999999994
    e0 = eff[0]
    for j in range(n):
        a = np.int64(np.int32(np.int64(acc[j]) + bias[j]))
        v = np.float64(a) * (eff[j] if per else e0)
        r = np.trunc(v + half) if v >= 0 else np.trunc(v - half)
        if r >= -2147483648.0 and r <= 2147483647.0:
            q = np.int64(r)
        else:
            q = np.int64(INT32_MIN)
        q = np.int64(np.int32(q + out_zp))
        out[j] = min(max(q, qmin), qmax)


@_inline
def _shifted(src, s, dst, d, n, zp):
    """dst[d + i] = src[s + i] - zp as int16 for i < n."""
    for i in range(n):
        dst[_U(d + i)] = np.int16(src[_U(s + i)]) - zp


@_inline
def _flip(src, s, dst, d, n):
    """dst[d + i] = src[s + i] + 128 as uint8 for i < n."""
    for i in range(n):
        dst[_U(d + i)] = np.uint8(src[_U(s + i)] + 128)


@_inline
def _copy(src, s, dst, d, n):
    for i in range(n):
        dst[_U(d + i)] = src[_U(s + i)]




# --- CONV_2D ------------------------------------------------------------------------------------
# geo: n, h, w, c, kh, kw, sh, sw, dh, dw, oh, ow, pt, pl, in_zp, out_zp, qmin, qmax, o, groups, nb, hp, wp,
# tiles per panel
# A band's scratch: abuf (panel rows of KG*groups uint8) and tmp (MR x NR int8: tiles that are
# not whole). tab: the requantization table (flat, TABLE_ROWS rows).
# Convolutions with more than one tap gather their im2col rows from xp, the input + 128 as
# uint8, padded with 128 + in_zp (hp x wp pixels; its border is set once, never written).

@_inline
def _pad_fill(x, xp, g, r0, r1):
    """Input rows [r0, r1) of every batch into the padded input."""
    n, h, w, c = g[0], g[1], g[2], g[3]
    pt, pl, hp, wp = g[12], g[13], g[21], g[22]
    for b in range(n):
        for y in range(r0, r1):
            src = (b * h + y) * w * c
            dst = ((b * hp + y + pt) * wp + pl) * c
            _flip(x, src, xp, dst, w * c)


@_inline
def _im2col_row(xp, abuf, a0, g, b, oy, ox):
    """The im2col row of output pixel (b, oy, ox) from the padded input."""
    c, kh, kw, sh, sw, dh, dw = g[3], g[4], g[5], g[6], g[7], g[8], g[9]
    hp, wp = g[21], g[22]
    span = kw * c
    for ky in range(kh):
        base = ((b * hp + oy * sh + ky * dh) * wp + ox * sw) * c
        if dw == 1:
            _copy(xp, base, abuf, a0 + ky * span, span)
        else:
            for kx in range(kw):
                _copy(xp, base + kx * dw * c, abuf, a0 + ky * span + kx * c, c)


@_inline
def _conv_tile(a, ar, ka, flip, rows, half, bp, wb, groups, tab, t0, opad, dst, d0, ds, zp, lo, hi):
    """One requantized tile: `rows` MR or MR1, `half`: the first NR/2 channels of the block."""
    if rows == MR:
        if half:
            _tq_h(a, ar, ka, flip, bp, wb, groups, tab, t0, opad, dst, d0, ds, zp, lo, hi)
        else:
            _tq(a, ar, ka, flip, bp, wb, groups, tab, t0, opad, dst, d0, ds, zp, lo, hi)
    elif half:
        _tq1_h(a, ar, ka, flip, bp, wb, groups, tab, t0, opad, dst, d0, ds, zp, lo, hi)
    else:
        _tq1(a, ar, ka, flip, bp, wb, groups, tab, t0, opad, dst, d0, ds, zp, lo, hi)


@_inline
def _conv_tiles(a, a_off, ka, flip, bp, groups, nb, tab, opad, out, m0, rows, o, tmp, zp, lo, hi):
    """Output rows [m0, m0 + rows) from their im2col rows (a at a_off, stride ka; flip != 0:
    rows of the int8 input), requantized into out. Tiles of MR rows, the last rows one at a
    time when few; a block's last channels in half blocks; what does not fill its tile goes
    through tmp."""
    half_nr = NR // 2
    sub = 0
    while sub < rows:
        left = rows - sub
        n_rows = MR if left > 2 else MR1
        valid = min(n_rows, left)
        ar = a_off + sub * ka
        for blk in range(nb):
            c0 = blk * NR
            cols = o - c0
            wb = blk * groups * KG * NR
            half = cols <= half_nr
            width = half_nr if half else NR
            whole = valid == n_rows and cols >= width
            dst = out if whole else tmp
            d0 = (m0 + sub) * o + c0 if whole else 0
            ds = o if whole else NR
            _conv_tile(a, ar, ka, flip, n_rows, half, bp, wb, groups, tab, c0, opad, dst, d0, ds, zp, lo, hi)
            if not whole:
                ncols = min(cols, width)
                for r in range(valid):
                    _copy(tmp, r * NR, out, (m0 + sub + r) * o + c0, ncols)
        sub += valid


@_inline
def _conv_band(x, xp, bp, tab, g, out, abuf, tmp, band, bands):
    """Output pixels of panels [band * panels / bands, (band + 1) * panels / bands): a panel is
    `tiles per panel` tiles of MR pixels, gathered before its tiles are multiplied."""
    n, h, w, c = g[0], g[1], g[2], g[3]
    kh, kw, sh, sw = g[4], g[5], g[6], g[7]
    oh, ow, pt, pl = g[10], g[11], g[12], g[13]
    zp, lo, hi, o, groups, nb = g[15], g[16] - g[15], g[17] - g[15], g[18], g[19], g[20]
    tiles_per_panel = g[23]
    opad = tab.shape[0] // TABLE_ROWS
    m = n * oh * ow
    span = MR * tiles_per_panel
    panels = (m + span - 1) // span
    p0 = band * panels // bands
    p1 = (band + 1) * panels // bands
    ka = KG * groups
    a_base = band * span * ka
    t_base = band * MR * NR
    pointwise = kh == 1 and kw == 1 and pt == 0 and pl == 0
    direct = pointwise and sh == 1 and sw == 1 and oh == h and ow == w and ka == c  # x rows are A rows
    bt = tmp[t_base:t_base + MR * NR]
    xu = x.view(np.uint8)
    for panel in range(p0, p1):
        m0 = panel * span
        rows = min(span, m - m0)
        full = rows // MR * MR if direct else rows
        rest = rows - full
        if not direct:
            b = m0 // (oh * ow)  # the pixel of row m0, then stepped without divisions
            rem = m0 - b * oh * ow
            oy = rem // ow
            ox = rem - oy * ow
            for r in range(rows):
                a0 = a_base + r * ka
                if pointwise:
                    src = ((b * h + oy * sh) * w + ox * sw) * c
                    _flip(x, src, abuf, a0, c)
                else:
                    _im2col_row(xp, abuf, a0, g, b, oy, ox)
                ox += 1
                if ox == ow:
                    ox = 0
                    oy += 1
                    if oy == oh:
                        oy = 0
                        b += 1
        elif rest > 2:  # a longer tail than MR1 tiles suit: tiles read whole rows, copy it
            _flip(x, (m0 + full) * c, abuf, a_base, rest * c)
        for seg in range(2):
            if seg == 0:  # whole tiles (direct) or every row (gathered)
                a, a0, flip, s0, cnt = (xu, m0 * c, 1, m0, full) if direct else (abuf, a_base, 0, m0, rows)
            elif rest > 2:
                a, a0, flip, s0, cnt = abuf, a_base, 0, m0 + full, rest
            else:  # a short tail read directly, one row at a time
                a, a0, flip, s0, cnt = xu, (m0 + full) * c, 1, m0 + full, rest
            if cnt > 0:
                _conv_tiles(a, a0, ka, flip, bp, groups, nb, tab, opad, out, s0, cnt, o, bt, zp, lo, hi)


@_jit
def conv_gemm(x, xp, bp, tab, g, out, abuf, tmp):
    if g[4] * g[5] > 1 or g[12] > 0 or g[13] > 0:
        _pad_fill(x, xp, g, 0, g[1])
    _conv_band(x, xp, bp, tab, g, out, abuf, tmp, 0, 1)


@_jit_par
def conv_gemm_par(x, xp, bp, tab, g, out, abuf, tmp, nt):
    bands = min(nt[0], abuf.shape[0] // (MR * g[23] * KG * g[19]))
    if g[4] * g[5] > 1 or g[12] > 0 or g[13] > 0:
        h = g[1]
        for band in prange(bands):
            _pad_fill(x, xp, g, band * h // bands, (band + 1) * h // bands)
    for band in prange(bands):
        _conv_band(x, xp, bp, tab, g, out, abuf, tmp, band, bands)


# --- DEPTHWISE_CONV_2D ------------------------------------------------------------------------
# geo: n, h, w, c, kh, kw, sh, sw, dh, dw, oh, ow, pt, pl, in_zp, out_zp, qmin, qmax, o, mult, hp, wq, q,
# phases
# The zero-padded input (x - in_zp, int16, each channel repeated `mult` times) is stored as ph
# column phases (1, or sw for strided convolutions with few channels): padded column X is at
# [b][Y][X % ph][X // ph][o], so every tap of a run of q output pixels (1 unless ph == sw)
# reads one contiguous span (`_dw_taps` reads TAP_VL values at a time: xp and wt
# have that much slack). wt: the filter taps, each tiled q times (rows q*o + TAP_VL apart);
# tab: the requantization table tiled q times.

@_inline
def _dw_fill(x, xp, g, r0, r1):
    """Input rows [r0, r1) (all batches) into the phased padded input (sw: the phases); the
    zero border is never written."""
    n, h, w, c = g[0], g[1], g[2], g[3]
    pt, pl, in_zp, o, mult, hp, wq, sw = g[12], g[13], g[14], g[18], g[19], g[20], g[21], g[23]
    zp = np.int16(in_zp)
    for b in range(n):
        for y in range(r0, r1):
            src = (b * h + y) * w * c
            row = ((b * hp + y + pt) * sw) * wq * o
            if sw == 1 and mult == 1:
                _shifted(x, src, xp, row + pl * o, w * c, zp)
                continue
            for ix in range(w):
                xx = ix + pl
                dst = row + ((xx % sw) * wq + xx // sw) * o
                if mult == 1:
                    _shifted(x, src + ix * c, xp, dst, c, zp)
                else:
                    for ci in range(c):
                        v = np.int16(x[_U(src + ix * c + ci)]) - zp
                        for k in range(mult):
                            xp[_U(dst + ci * mult + k)] = v


@_inline
def _dw_rows(xp, wt, tab, g, out, tmp, offs, r0, r1):
    """Output rows [r0, r1) (flattened batch * oh); tmp: TAP_VL int8, offs: 2*kh*kw int64 (the
    taps' offsets for the row, then for the run)."""
    kh, kw, sh, sw, dh, dw = g[4], g[5], g[6], g[7], g[8], g[9]
    oh, ow = g[10], g[11]
    zp, lo, hi, o, hp, wq = g[15], g[16] - g[15], g[17] - g[15], g[18], g[20], g[21]
    q, ph = g[22], g[23]
    t_stride = tab.shape[0] // TABLE_ROWS
    stride = q * o + TAP_VL  # of the tiled filter taps
    plane = wq * o
    taps = kh * kw
    step = o if ph == sw else sw * o  # between neighbouring output pixels
    b = r0 // oh
    oy = r0 - b * oh
    for _ in range(r0, r1):
        for ky in range(kh):
            yb = ((b * hp + oy * sh + ky * dh) * ph) * plane
            for kx in range(kw):
                xx = kx * dw
                offs[taps + ky * kw + kx] = yb + (xx % ph) * plane + (xx // ph) * o
        base = (b * oh + oy) * ow * o
        for ox0 in range(0, ow, q):
            n = min(q, ow - ox0) * o
            for t in range(taps):
                offs[t] = offs[taps + t] + ox0 * step
            full = n // TAP_VL
            _dw_run(xp, offs, taps, wt, stride, tab, t_stride, out, base + ox0 * o, full, zp, lo, hi)
            rest = n - full * TAP_VL
            if rest:  # the last partial vector through tmp
                for t in range(taps):
                    offs[t] += full * TAP_VL
                _dw_run(xp, offs, taps, wt[full * TAP_VL:], stride, tab[full * TAP_VL:], t_stride, tmp, 0, 1, zp,
                        lo, hi)
                _copy(tmp, 0, out, base + ox0 * o + full * TAP_VL, rest)
        oy += 1
        if oy == oh:
            oy = 0
            b += 1


@_jit
def dw_conv(x, xp, wt, tab, g, out, tmp, offs):
    _dw_fill(x, xp, g, 0, g[1])
    _dw_rows(xp, wt, tab, g, out, tmp, offs, 0, g[0] * g[10])


@_jit_par
def dw_conv_par(x, xp, wt, tab, g, out, tmp, offs, nt):
    taps = g[4] * g[5]
    bands = min(nt[0], tmp.shape[0] // TAP_VL)
    h = g[1]
    for band in prange(bands):
        _dw_fill(x, xp, g, band * h // bands, (band + 1) * h // bands)
    rows = g[0] * g[10]
    for band in prange(bands):
        _dw_rows(xp, wt, tab, g, out, tmp[band * TAP_VL:(band + 1) * TAP_VL], offs[band * 2 * taps:(band + 1) * 2 * taps],
                 band * rows // bands, (band + 1) * rows // bands)


# --- FULLY_CONNECTED ----------------------------------------------------------------------------
# geo: batch, k, units, in_zp, out_zp, qmin, qmax, groups, nb, per_channel

@_jit
def fc_gemm(x, bp, bias, eff, g, out, abuf, cbuf):
    batch, k, units = g[0], g[1], g[2]
    out_zp, qmin, qmax, groups, nb, per = g[4], g[5], g[6], g[7], g[8], g[9] != 0
    ka = KG * groups
    cw = nb * NR
    rows = MR if batch > 1 else MR1
    xu = x.view(np.uint8)
    for tile in range((batch + rows - 1) // rows):
        m0 = tile * rows
        valid = min(rows, batch - m0)
        direct = ka == k and valid == rows  # the input rows are the tile
        if not direct:
            for r in range(valid):
                _flip(x, (m0 + r) * k, abuf, r * ka, k)
        src = xu if direct else abuf
        a0 = m0 * k if direct else 0
        for blk in range(nb):
            wb = blk * groups * KG * NR
            if rows == MR:
                _tile(src, a0, ka, 1 if direct else 0, bp, wb, groups, cbuf, 0, 0, cbuf, blk * NR, cw, 0, 0, 0)
            else:
                _tile1(src, a0, ka, 1 if direct else 0, bp, wb, groups, cbuf, 0, 0, cbuf, blk * NR, cw, 0, 0, 0)
        for r in range(valid):
            p = m0 + r
            _requant_fc_row(cbuf[r * cw:r * cw + units], bias, eff, per, out[p * units:(p + 1) * units], units,
                            out_zp, qmin, qmax)


# --- elementwise lookup tables ------------------------------------------------------------------

@_jit
def lut2(a, b, table, out):
    """out[i] = table[256 * (a[i] + 128) + b[i] + 128] for int8 a, b (table: all 65536 pairs)."""
    au, bu = a.view(np.uint8), b.view(np.uint8)
    for i in range(out.shape[0]):
        out[i] = table[(np.int64(au[i] ^ 0x80) << 8) | np.int64(bu[i] ^ 0x80)]


@_jit
def lut1(a, table, out):
    """out[i] = table[a[i] + 128] for int8 a (table: all 256 values)."""
    au = a.view(np.uint8)
    for i in range(out.shape[0]):
        out[i] = table[au[i] ^ 0x80]


@_jit
def sum_lut(x, n, hw, c, table, offset, acc, out):
    """out[b, j] = table[offset + sum over the hw pixels of x[b, :, j]] for int8 x (n, hw, c)."""
    for b in range(n):
        for j in range(c):
            acc[j] = 0
        for p in range(hw):
            row = x[(b * hw + p) * c:(b * hw + p + 1) * c]
            for j in range(c):
                acc[j] += row[j]
        o = out[b * c:(b + 1) * c]
        for j in range(c):
            o[j] = table[offset + acc[j]]
