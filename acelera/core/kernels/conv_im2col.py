"""Geometry, im2col and output-row bands of the (depthwise) CONV_2D kernels (conv.py).

Mirrors the window arithmetic of LiteRT's tflite/kernels/padding.h and the patch layout of
tflite/kernels/internal/reference/conv.h (one row per output position, kh*kw*cin columns,
taps outer, channels inner); depthwise taps follow reference/depthwiseconv_float.h.

A convolution whose temporaries would exceed core.memory.TILE_BYTES (read at each prepare,
so core/memory.py's estimates and these bands agree) runs a band of output rows at a time.
A band reads the input rows it needs straight from the unpadded input: the taps that fall in
the padding get the band's fill value (0, or the zero point the caller then subtracts), so no
padded, converted or channel-repeated copy of the whole input is made.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from acelera.core import memory
from acelera.core.errors import ModelError
from acelera.core.kernels.common import SAME, out_size, pad_before
from acelera.core.kernels.registry import NodeContext

#: bytes per output element a band of the integer (quantized, hybrid) CONV_2D holds besides its
#: patch rows (the matmul result, the int64 accumulator, the requantization's temporaries), and
#: per output element of a DEPTHWISE_CONV_2D band (accumulator, tap product, int64 copy,
#: requantization); core/memory.py's _conv_scratch counts the same (values not imported there)
CONV_BAND_ACC_BYTES = 32
DW_BAND_BYTES = 32
#: the largest depthwise filter tiled along an output row (dw_taps), beyond the band's bytes
DW_TILED_WEIGHT_BYTES = 16 << 10


def opt(node: NodeContext, name: str, default: int) -> int:
    v = node.options.get(name, default)
    return default if v is None else int(v)


def tile_bytes() -> int:
    """The largest temporary a band may hold (core.memory.TILE_BYTES, read now)."""
    return memory.TILE_BYTES


@dataclass(frozen=True)
class Geometry:
    """Spatial bookkeeping of a (depthwise) convolution: input, taps, output, padding."""

    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    oh: int
    ow: int
    pt: int
    pl: int

    @staticmethod
    def from_options(node: NodeContext, x_shape, kh: int, kw: int) -> "Geometry":
        """The geometry of a (depthwise) CONV_2D node: its strides, dilations and padding."""
        sh, sw = opt(node, "stride_h", 1), opt(node, "stride_w", 1)
        dh, dw = opt(node, "dilation_h_factor", 1), opt(node, "dilation_w_factor", 1)
        if min(sh, sw, dh, dw) <= 0:
            raise ModelError(f"strides ({sh}, {sw}) and dilations ({dh}, {dw}) must be positive")
        return Geometry.make(x_shape, kh, kw, opt(node, "padding", SAME), sh, sw, dh, dw)

    @staticmethod
    def make(x_shape, kh: int, kw: int, padding: int, sh: int, sw: int, dh: int, dw: int) -> "Geometry":
        n, h, w, c = (int(d) for d in x_shape)
        oh = out_size(padding, h, kh, sh, dh)
        ow = out_size(padding, w, kw, sw, dw)
        return Geometry(n, h, w, c, kh, kw, sh, sw, dh, dw, oh, ow,
                        pad_before(h, kh, sh, dh, oh), pad_before(w, kw, sw, dw, ow))

    @property
    def empty(self) -> bool:
        return self.n * self.oh * self.ow == 0

    @property
    def pointwise(self) -> bool:
        """1x1 taps whose windows need no padding: the input (strided) is the im2col matrix."""
        return self.kh == 1 and self.kw == 1 and self.pt == 0 and self.pl == 0

    def pad(self, x: np.ndarray) -> np.ndarray:
        """x padded with zeros just enough for every tap slice to be in range."""
        pb = max((self.oh - 1) * self.sh + (self.kh - 1) * self.dh - self.pt - (self.h - 1), 0)
        pr = max((self.ow - 1) * self.sw + (self.kw - 1) * self.dw - self.pl - (self.w - 1), 0)
        if self.pt == 0 and self.pl == 0 and pb == 0 and pr == 0:
            return x
        xp = np.zeros((x.shape[0], self.h + self.pt + pb, self.w + self.pl + pr, x.shape[3]), x.dtype)
        xp[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w, :] = x
        return xp

    def tap(self, xp: np.ndarray, ky: int, kx: int) -> np.ndarray:
        y0, x0 = ky * self.dh, kx * self.dw
        return xp[:, y0:y0 + (self.oh - 1) * self.sh + 1:self.sh,
                  x0:x0 + (self.ow - 1) * self.sw + 1:self.sw, :]

    def im2col_bytes(self, itemsize: int) -> int:
        return self.n * self.oh * self.ow * self.kh * self.kw * self.c * itemsize

    def im2col(self, x: np.ndarray, groups: int = 1) -> np.ndarray:
        """(rows, kh*kw*c) patches for groups == 1, else (groups, rows, kh*kw*c/groups);
        x is already in the matmul dtype (and zero-point shifted)."""
        m = self.n * self.oh * self.ow
        if self.pointwise:
            xs = x if self.sh == 1 and self.sw == 1 else self.tap(x, 0, 0)
            if groups == 1:
                return xs.reshape(m, self.c)
            return np.ascontiguousarray(
                xs.reshape(m, groups, self.c // groups).transpose(1, 0, 2))
        xp = self.pad(x)
        if groups == 1:
            cols = np.empty((self.n, self.oh, self.ow, self.kh, self.kw, self.c), x.dtype)
            for ky in range(self.kh):
                for kx in range(self.kw):
                    cols[:, :, :, ky, kx, :] = self.tap(xp, ky, kx)
            return cols.reshape(m, self.kh * self.kw * self.c)
        ci = self.c // groups
        cols = np.empty((groups, self.n, self.oh, self.ow, self.kh, self.kw, ci), x.dtype)
        for ky in range(self.kh):
            for kx in range(self.kw):
                t = self.tap(xp, ky, kx).reshape(self.n, self.oh, self.ow, groups, ci)
                cols[:, :, :, :, ky, kx, :] = t.transpose(3, 0, 1, 2, 4)
        return cols.reshape(groups, m, self.kh * self.kw * ci)

    def _valid(self, r0: int, r1: int, ky: int, kx: int) -> tuple[int, int, int, int, int, int] | None:
        """For output rows [r0, r1) and tap (ky, kx): the output rows [a, b) and columns
        [p, q) whose input pixel is inside the input, and that pixel's row and column for a, p."""
        oy0 = ky * self.dh - self.pt  # input row of output row 0
        ox0 = kx * self.dw - self.pl
        a = max(r0, -(oy0 // self.sh) if oy0 < 0 else 0)
        b = min(r1, (self.h - 1 - oy0) // self.sh + 1) if self.h - 1 - oy0 >= 0 else r0
        p = max(0, -(ox0 // self.sw) if ox0 < 0 else 0)
        q = min(self.ow, (self.w - 1 - ox0) // self.sw + 1) if self.w - 1 - ox0 >= 0 else 0
        if a >= b or p >= q:
            return None
        return a, b, p, q, oy0 + a * self.sh, ox0 + p * self.sw

    def im2col_rows(self, x: np.ndarray, r0: int, r1: int, groups: int = 1, fill=0, dtype=None) -> np.ndarray:
        """im2col of output rows [r0, r1) only, read from the unpadded input `x` and converted
        to `dtype` (x's by default): (rows, kh*kw*c), or (groups, rows, kh*kw*c/groups). Taps in
        the padding hold `fill` (a scalar, or one value per batch)."""
        dt = np.dtype(dtype if dtype is not None else x.dtype)
        rows, ci = r1 - r0, self.c // groups
        cols = np.empty((self.n, rows, self.ow, self.kh, self.kw, self.c), dt)
        taps, covered = _tap_plan(self, r0, r1)
        if not covered:
            cols[...] = np.reshape(np.asarray(fill, dt), (-1,) + (1,) * 5)
        for dst_rows, dst_cols, ky, kx, src_rows, src_cols in taps:
            cols[:, dst_rows, dst_cols, ky, kx] = x[:, src_rows, src_cols]
        m = self.n * rows * self.ow
        if groups == 1:
            return cols.reshape(m, self.kh * self.kw * self.c)
        return np.ascontiguousarray(
            cols.reshape(m, self.kh * self.kw, groups, ci).transpose(2, 0, 1, 3)).reshape(groups, m, -1)

    def input_rows(self, x: np.ndarray, r0: int, r1: int, fill=0, dtype=None, repeat: int = 1
                   ) -> tuple["Geometry", np.ndarray]:
        """The geometry of output rows [r0, r1) and the padded input rows they read, converted
        to `dtype`, channels repeated `repeat` times (depthwise multiplier), padding `fill`."""
        dt = np.dtype(dtype if dtype is not None else x.dtype)
        rows = r1 - r0
        hp = (rows - 1) * self.sh + (self.kh - 1) * self.dh + 1
        wp = (self.ow - 1) * self.sw + (self.kw - 1) * self.dw + 1
        top = r0 * self.sh - self.pt  # input row of the band's first padded row
        xb = np.empty((self.n, hp, wp, self.c * repeat), dt)
        xb[...] = np.reshape(np.asarray(fill, dt), (-1, 1, 1, 1))
        y0, y1 = max(top, 0), min(top + hp, self.h)
        x0, x1 = max(-self.pl, 0), min(wp - self.pl, self.w)
        if y0 < y1 and x0 < x1:
            src = x[:, y0:y1, x0:x1, :]
            dst = xb[:, y0 - top:y1 - top, x0 + self.pl:x1 + self.pl, :]
            if repeat == 1:
                dst[...] = src
            else:
                dst.reshape(dst.shape[:3] + (self.c, repeat))[...] = src[..., None]
        return Geometry(self.n, hp, wp, self.c * repeat, self.kh, self.kw, self.sh, self.sw, self.dh, self.dw,
                        rows, self.ow, 0, 0), xb


@functools.lru_cache(maxsize=256)
def _tap_plan(g: Geometry, r0: int, r1: int) -> tuple[tuple[tuple[slice, slice, int, int, slice, slice], ...], bool]:
    """The taps of output rows [r0, r1) that read the input: (output rows, output columns, ky,
    kx, input rows, input columns) slices, and whether they cover every patch entry."""
    taps = []
    covered = True
    for ky in range(g.kh):
        for kx in range(g.kw):
            v = g._valid(r0, r1, ky, kx)
            if v is None:
                covered = False
                continue
            a, b, p, q, iy, ix = v
            covered = covered and (a, b, p, q) == (r0, r1, 0, g.ow)
            taps.append((slice(a - r0, b - r0), slice(p, q), ky, kx,
                         slice(iy, iy + (b - a - 1) * g.sh + 1, g.sh), slice(ix, ix + (q - p - 1) * g.sw + 1, g.sw)))
    return tuple(taps), covered


def weight_matrix(w: np.ndarray, groups: int, dtype) -> np.ndarray:
    """OHWI filter -> (kh*kw*i, o) for groups == 1, else (groups, kh*kw*i, o/groups)."""
    o = w.shape[0]
    k = w.shape[1] * w.shape[2] * w.shape[3]
    wm = np.asarray(w).reshape(o, k).astype(dtype)
    if groups == 1:
        return np.ascontiguousarray(wm.T)
    return np.ascontiguousarray(wm.reshape(groups, o // groups, k).transpose(0, 2, 1))


def grouped_matmul(cols: np.ndarray, wm: np.ndarray, groups: int) -> np.ndarray:
    if groups == 1:
        return cols @ wm
    out = np.matmul(cols, wm)  # (groups, rows, o/groups)
    return out.transpose(1, 0, 2).reshape(out.shape[1], -1)


def conv_band_row_bytes(g: Geometry, k: int, o: int, groups: int = 1, item: int = 8) -> int:
    """Temporaries of one output row of a CONV_2D band of `groups` groups of k patch columns
    (at `item` bytes) and o output channels: the patches (twice when grouped: their transposed
    copy), CONV_BAND_ACC_BYTES per output element (plus the grouped product's transpose) for
    the integer paths (item 8), none for the float one."""
    patches = k * groups * item * (2 if groups > 1 else 1)
    acc = o * (CONV_BAND_ACC_BYTES + (8 if groups > 1 else 0)) if item == 8 else 0
    return g.n * g.ow * (patches + acc)


def dw_band_row_bytes(g: Geometry, o: int) -> int:
    """Temporaries of one output row of a DEPTHWISE_CONV_2D band: DW_BAND_BYTES per output
    element and the input rows it reads (stride rows of padded width, at most 8 bytes each)."""
    wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1
    return g.n * (g.ow * o * DW_BAND_BYTES + g.sh * wp * o * 8)


def row_bands(g: Geometry, row_bytes: int) -> Iterator[tuple[int, int]]:
    """[r0, r1) bands of output rows whose temporaries (row_bytes a row) stay under tile_bytes()."""
    band = max(1, tile_bytes() // max(row_bytes, 1))
    for r0 in range(0, g.oh, band):
        yield r0, min(g.oh, r0 + band)


def banded_matmul(g: Geometry, x: np.ndarray, wm: np.ndarray, groups: int, row_bytes: int, out_shape,
                  out_dtype, finish: Callable[[np.ndarray], np.ndarray], fill=0, dtype=None) -> np.ndarray:
    """finish(im2col @ wm) for every band of output rows (the product is (positions, o), batch
    major), into an array of out_shape (one band, returned as is, when it fits in tile_bytes()). Taps
    in the padding read `fill` (a scalar, or one value per batch), subtracted from every patch
    value before the product: a zero point pads as 0."""
    out = None
    for r0, r1 in row_bands(g, row_bytes):
        cols = g.im2col_rows(x, r0, r1, groups, fill, dtype)
        if np.ndim(fill):
            per_row = np.repeat(np.asarray(fill, cols.dtype), (r1 - r0) * g.ow)
            cols -= per_row[None, :, None] if groups > 1 else per_row[:, None]
        elif fill:
            cols -= cols.dtype.type(fill)
        res = finish(grouped_matmul(cols, wm, groups)).reshape((g.n, r1 - r0) + tuple(out_shape[2:]))
        if r0 == 0 and r1 == g.oh:
            return res
        if out is None:
            out = np.empty(out_shape, out_dtype)
        out[:, r0:r1] = res
    assert out is not None  # g.oh >= 1: the caller returns early on an empty output
    return out


def dw_taps(g: Geometry, xp: np.ndarray, w: np.ndarray, acc_dtype) -> np.ndarray:
    """sum over taps of tap(xp) * w[ky, kx]; w is (kh, kw, channels) in acc_dtype.

    Each tap is read as (n, oh, ow * channels) rows, so the multiply-adds run over whole
    output rows, the weights tiled along them (small filters, else per pixel); a width stride first splits xp's columns into
    their stride phases (float32 and narrower), else the taps are strided (n, oh, ow, c) views."""
    n, hp, wp, c = xp.shape
    sw, ow = g.sw, g.ow
    if sw > 1 and xp.dtype.itemsize > 4:
        return _dw_taps_strided(g, xp, w, acc_dtype)
    if sw > 1:
        wq = -(-wp // sw)
        if wq * sw != wp:
            xw = np.zeros((n, hp, wq * sw, c), xp.dtype)
            xw[:, :, :wp] = xp
            xp = xw
        rows = np.ascontiguousarray(xp.reshape(n, hp, wq, sw, c).transpose(0, 1, 3, 2, 4)).reshape(n, hp, sw, wq * c)
    else:
        rows = xp.reshape(n, hp, 1, wp * c)
    tiled = g.kh * g.kw * ow * c * np.dtype(acc_dtype).itemsize <= DW_TILED_WEIGHT_BYTES
    if tiled:
        wt = np.empty((g.kh, g.kw, ow, c), acc_dtype)
        wt[...] = w[:, :, None, :]
        wt = wt.reshape(g.kh, g.kw, ow * c)
    else:
        wt = w
    tap_shape = (n, g.oh, ow * c) if tiled else (n, g.oh, ow, c)
    span = (g.oh - 1) * g.sh + 1
    acc = tmp = None
    for ky in range(g.kh):
        y0 = ky * g.dh
        for kx in range(g.kw):
            p, q = divmod(kx * g.dw, sw)[::-1]
            t = rows[:, y0:y0 + span:g.sh, p, q * c:(q + ow) * c].reshape(tap_shape)
            if acc is None:
                acc = np.multiply(t, wt[ky, kx], dtype=acc_dtype)
                tmp = np.empty_like(acc)
            else:
                np.multiply(t, wt[ky, kx], out=tmp, dtype=acc_dtype)
                acc += tmp
    assert acc is not None  # kh, kw >= 1 (conv.py checks the filter)
    return acc.reshape(n, g.oh, ow, c)


def _dw_taps_strided(g: Geometry, xp: np.ndarray, w: np.ndarray, acc_dtype) -> np.ndarray:
    acc = None
    tmp = None
    for ky in range(g.kh):
        for kx in range(g.kw):
            t = g.tap(xp, ky, kx)
            if acc is None:
                acc = np.multiply(t, w[ky, kx], dtype=acc_dtype)
                tmp = np.empty_like(acc)
            else:
                np.multiply(t, w[ky, kx], out=tmp, dtype=acc_dtype)
                acc += tmp
    assert acc is not None  # kh, kw >= 1 (conv.py checks the filter)
    return acc


def dw_run(g: Geometry, x: np.ndarray, w: np.ndarray, mult: int, acc_dtype, out_shape: tuple[int, int, int, int],
           out_dtype, finish: Callable[[np.ndarray], np.ndarray], fill=0) -> np.ndarray:
    """finish(sum of the taps) a band of output rows at a time (one band when it fits in
    tile_bytes()); each band reads its padded input rows, in acc_dtype with the channels
    repeated `mult` times, from the unpadded input `x` (padding: `fill`, subtracted after)."""
    row_bytes = dw_band_row_bytes(g, out_shape[3])
    out = None
    for r0, r1 in row_bands(g, row_bytes):
        gb, xb = g.input_rows(x, r0, r1, fill, acc_dtype, mult)
        if np.any(fill):
            xb -= np.reshape(np.asarray(fill, acc_dtype), (-1, 1, 1, 1))
        if r0 == 0 and r1 == g.oh:
            return finish(dw_taps(gb, xb, w, acc_dtype))
        if out is None:
            out = np.empty(out_shape, out_dtype)
        out[:, r0:r1] = finish(dw_taps(gb, xb, w, acc_dtype))
    assert out is not None  # g.oh >= 1: the caller returns early on an empty output
    return out


def zero_kernel(out_shape, dtype):
    """run() of a convolution with an empty output."""
    def run(*_):
        return np.zeros(out_shape, dtype)
    return run
