"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR reference kernels.

Mirrors tflite/kernels/resize_bilinear.cc and resize_nearest_neighbor.cc with the reference
implementations in tflite/kernels/internal/reference/resize_bilinear.h and
resize_nearest_neighbor.h:

- float32 and uint8 bilinear use the float formula of reference_ops::ResizeBilinear in
  float32; uint8 keeps the C++ operation order (adds 0.5 and truncates) so it is bit-exact,
  float32 interpolates rows then columns (equal up to float32 rounding, half the work);
- int8 and int16 bilinear use reference_ops::ResizeBilinearInteger: 10-bit fixed-point
  coordinates, int64 products and the double-rounding divide by 2^20 of the default build;
- nearest neighbor computes the source index per output row/column with the same float32
  arithmetic and copies pixels, for every 8/16/32-bit type.

Quantization parameters are not used: outputs hold the same raw values as inputs. While
widening (registry.widening) FLOAT64 is taken where FLOAT32 is: bilinear interpolates in
float64, nearest neighbor keeps its float32 index arithmetic.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from acelera.core.dtypes import PACKED_BITS, TYPE_NAMES, numpy_dtype
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.registry import NodeContext, is_float32, register
from acelera.core.model import Tensor

_FLOAT32, _INT32, _UINT8, _INT16, _INT8, _INT4 = 0, 2, 3, 7, 9, 17
# RESIZE_NEAREST_NEIGHBOR moves any 8/16/32-bit element (not int4)
_NEAREST_NAMES = tuple(n for c, n in sorted(TYPE_NAMES.items())
                       if numpy_dtype(c) != np.object_ and numpy_dtype(c).itemsize in (1, 2, 4)
                       and c not in PACKED_BITS)
_F32 = np.float32


def _size_input(node: NodeContext) -> Tensor:
    check_arity(node, 2, 1)  # resize_bilinear.cc / resize_nearest_neighbor.cc Prepare
    x_t, size_t = node.inputs[0], node.inputs[1]
    assert x_t is not None and size_t is not None
    if len(x_t.shape) != 4:
        raise node.unsupported(f"input must have rank 4, got shape {list(x_t.shape)}")
    if len(size_t.shape) != 1 or size_t.shape[0] != 2:
        raise node.unsupported(f"size must have shape [2], got {list(size_t.shape)}")
    if size_t.type != _INT32:
        raise node.unsupported(f"size of type {size_t.type_name} is not supported (int32 only)")
    if node.outputs[0].type != x_t.type:
        raise node.unsupported(f"output type {node.outputs[0].type_name} differs from input type {x_t.type_name}")
    return x_t


# --- bilinear ------------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _float_coords(in_size: int, out_size: int, align_corners: bool, half_pixel: bool, ft=_F32):
    """Per output index: (lower, upper, weight of lower, weight of upper) as in
    ComputeInterpolationValues, all float32 arithmetic (`ft`: float64 while widening)."""
    scale = ft(in_size) / ft(out_size)
    if align_corners and out_size > 1:
        scale = ft(in_size - 1) / ft(out_size - 1)
    v = np.arange(out_size, dtype=ft)
    if half_pixel:
        scaled = (v + ft(0.5)) * scale - ft(0.5)
    else:
        scaled = v * scale
    lower = np.maximum(np.floor(scaled).astype(np.int64), 0)
    upper = np.minimum(np.ceil(scaled).astype(np.int64), in_size - 1)
    frac = scaled - lower.astype(ft)            # (input_y - y0) in float32
    w_lower = ft(1) - frac                     # (1 - (input_y - y0))
    return lower.astype(np.intp), upper.astype(np.intp), w_lower.astype(ft), frac.astype(ft)


@lru_cache(maxsize=256)
def _int_coords(in_size: int, out_size: int, align_corners: bool, half_pixel: bool):
    """ComputeInterpolationValuesInteger: lower/upper index and 10-bit weights."""
    scale_10 = ((1 << 10) * in_size + out_size // 2) // out_size
    if align_corners and out_size > 1:
        scale_10 = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    v = np.arange(out_size, dtype=np.int64)
    if half_pixel:
        scaled = v * scale_10 + scale_10 // 2 - (1 << 9)
    else:
        scaled = v * scale_10

    def cdiv(a, b):  # C++ integer division (truncates toward zero)
        q = np.abs(a) // b
        return np.where(a < 0, -q, q)

    lower = np.maximum(cdiv(scaled, 1 << 10), 0)
    upper = np.minimum(cdiv(scaled + (1 << 10) - 1, 1 << 10), in_size - 1)
    w_upper = scaled - (1 << 10) * lower
    w_lower = (1 << 10) - w_upper
    # NB: with large upscales the rounded 10-bit scale can push `lower` to in_size (one past
    # the last row/column); see _overflow_extend.
    return lower.astype(np.intp), upper.astype(np.intp), w_lower, w_upper


def _overflow_extend(x: np.ndarray) -> np.ndarray:
    """The input as LiteRT's ResizeBilinearInteger addresses it when a lower index is one
    past the end: Offset(b, y, x, c) on the flat buffer, so column w is the next row's first
    pixel and row h the next batch's first row. Reads past the whole buffer (garbage in
    LiteRT) give 0. Shape (n, h + 1, w + 1, c)."""
    n, h, w, c = x.shape
    flat = np.concatenate([x.reshape(-1), np.zeros((w + 2) * c, x.dtype)])
    base = ((np.arange(n)[:, None, None] * h + np.arange(h + 1)[None, :, None]) * w
            + np.arange(w + 1)[None, None, :]) * c
    return flat[base[..., None] + np.arange(c)]


@lru_cache(maxsize=256)
def _col_weights(in_size: int, out_size: int, depth: int, align: bool, half: bool, integer: bool,
                 ft=_F32):
    """Column indices and weights, the weights repeated over depth so the products run on
    contiguous (out_w, depth) rows."""
    if integer:
        x0, x1, w0, w1 = _int_coords(in_size, out_size, align, half)
        dt = np.int64
    else:
        x0, x1, w0, w1 = _float_coords(in_size, out_size, align, half, ft)
        dt = ft
    rep = lambda w: np.ascontiguousarray(np.repeat(w.astype(dt), depth).reshape(out_size, depth))
    return x0, x1, rep(w0), rep(w1)


class _Scratch:
    """Reusable intermediate buffers of one kernel instance (large numpy temporaries are
    otherwise fresh mmap'd pages on every call). Returned arrays are never scratch."""

    def __init__(self):
        self.bufs: dict[str, np.ndarray] = {}

    def get(self, key: str, shape: tuple, dtype) -> np.ndarray:
        b = self.bufs.get(key)
        if b is None or b.shape != shape or b.dtype != dtype:
            b = self.bufs[key] = np.empty(shape, dtype)
        return b


def _bilinear_float(x: np.ndarray, oh: int, ow: int, align: bool, half: bool, integer_out: bool,
                    scratch: _Scratch, ft=_F32):
    """reference_ops::ResizeBilinear<float|uint8_t>:
    in[y0,x0]*(1-dy)*(1-dx) + in[y1,x0]*dy*(1-dx) + in[y0,x1]*(1-dy)*dx + in[y1,x1]*dy*dx
    (+0.5 and truncation for uint8).

    The row products in*(1-dy) and in*dy do not depend on the column, so they are computed
    once per output row at input width. uint8 then keeps the C++ float32 operation order
    (four column products, summed left to right) so the truncated result is bit-exact.
    float32 sums the two row products first and needs two column products: the same value
    up to float32 rounding (about 1e-7 relative), at half the cost. `ft` is the float type
    computed in (float64 for widening's FLOAT64 input)."""
    n, h, w, c = x.shape
    y0, y1, wy0, wy1 = _float_coords(h, oh, align, half, ft)
    x0, x1, wx0, wx1 = _col_weights(w, ow, c, align, half, False, ft)
    xr = x.reshape(n, h, w * c)
    if x.dtype != ft:
        xr = xr.astype(ft)  # uint8 -> float32 is exact, as in the C++ promotion
    top = scratch.get("top", (n, oh, w * c), ft)
    bot = scratch.get("bot", (n, oh, w * c), ft)
    np.take(xr, y0, axis=1, out=top)
    top *= wy0[:, None]
    np.take(xr, y1, axis=1, out=bot)
    bot *= wy1[:, None]
    shape = (n * oh, ow, c)
    t = scratch.get("t", shape, ft)
    if not integer_out:
        top += bot
        rows = top.reshape(n * oh, w, c)
        acc = np.take(rows, x0, axis=1)
        acc *= wx0
        np.take(rows, x1, axis=1, out=t)
        t *= wx1
        acc += t
        return acc.reshape(n, oh, ow, c)
    top = top.reshape(n * oh, w, c)
    bot = bot.reshape(n * oh, w, c)
    acc = scratch.get("acc", shape, _F32)
    np.take(top, x0, axis=1, out=acc)
    acc *= wx0
    np.take(bot, x0, axis=1, out=t)
    t *= wx0
    acc += t
    np.take(top, x1, axis=1, out=t)
    t *= wx1
    acc += t
    np.take(bot, x1, axis=1, out=t)
    t *= wx1
    acc += t
    acc += _F32(0.5)
    # static_cast<uint8_t>(float): truncation toward zero (x86 converts through int32)
    return acc.astype(np.int32).astype(x.dtype).reshape(n, oh, ow, c)


def bilinear_float32(x: np.ndarray, oh: int, ow: int, align_corners: bool = False,
                     half_pixel_centers: bool = False) -> np.ndarray:
    """RESIZE_BILINEAR of a float32 NHWC (or HWC) array, as the kernel computes it: for
    preprocessing (acelera.evaluation) that must match TFLite's resize exactly."""
    x = np.asarray(x, _F32)
    single = x.ndim == 3
    out = _bilinear_float(x[None] if single else x, oh, ow, align_corners, half_pixel_centers, False, _Scratch())
    return out[0] if single else out


def _bilinear_integer(x: np.ndarray, oh: int, ow: int, align: bool, half: bool,
                      scratch: _Scratch):
    """reference_ops::ResizeBilinearInteger for int8/int16 (double-rounding build).

    The sum of the four products v*wy*wx is exact in any order, so rows are interpolated
    first (int32: |v| <= 2^15, |wy0| + |wy1| <= 2^11) and columns second. For int8 the
    total stays below 2^29 and everything runs in int32; int16 needs int64 for columns."""
    n, h, w, c = x.shape
    y0, y1, wy0, wy1 = _int_coords(h, oh, align, half)
    x0, x1, wx0, wx1 = _col_weights(w, ow, c, align, half, True)
    wide = np.int32 if x.dtype.itemsize == 1 else np.int64
    if y0[-1] >= h or x0[-1] >= w:  # indices are non-decreasing: the last is the largest
        x = _overflow_extend(x)
        h, w = h + 1, w + 1
    xr = x.reshape(n, h, w * c).astype(np.int32)
    rows = scratch.get("rows", (n, oh, w * c), np.int32)
    t = scratch.get("trow", (n, oh, w * c), np.int32)
    np.take(xr, y0, axis=1, out=rows)
    rows *= wy0.astype(np.int32)[:, None]
    np.take(xr, y1, axis=1, out=t)
    t *= wy1.astype(np.int32)[:, None]
    rows += t
    rows = rows.reshape(n * oh, w, c)
    if wide is not np.int32:
        rows = rows.astype(wide)
    shape = (n * oh, ow, c)
    out20 = scratch.get("out20", shape, wide)
    t = scratch.get("t", shape, wide)
    np.take(rows, x0, axis=1, out=out20)
    out20 *= wx0.astype(wide)
    np.take(rows, x1, axis=1, out=t)
    t *= wx1.astype(wide)
    out20 += t
    # (out20 + (out20 > 0 ? 2^19 : -2^19)) / 2^20 with C++ truncating division equals
    # floor((out20 + 2^19 - 1 + (out20 > 0)) / 2^20): an arithmetic shift.
    pos = np.greater(out20, 0, out=scratch.get("pos", shape, np.bool_))
    out20 += wide((1 << 19) - 1)
    out20 += pos
    out20 >>= 20
    return out20.astype(x.dtype).reshape(n, oh, ow, c)


def _read_size(size: np.ndarray) -> tuple[int, int]:
    return int(size[0]), int(size[1])


@register("RESIZE_BILINEAR", max_version=4, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
def resize_bilinear(node: NodeContext):
    x_t = _size_input(node)
    if x_t.type not in (_UINT8, _INT8, _INT16) and not is_float32(x_t):
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    align = bool(node.options.get("align_corners", False))
    half = bool(node.options.get("half_pixel_centers", False))
    size_const = node.const(1)
    if size_const is not None:
        if half and align:
            raise node.unsupported("if half_pixel_centers is True, align_corners must be False")
        oh, ow = _read_size(size_const)
        if oh <= 0 or ow <= 0:
            raise node.unsupported(f"output size must be positive, got {[oh, ow]}")
    kind = _FLOAT32 if is_float32(x_t) else x_t.type
    ft = x_t.dtype.type if kind == _FLOAT32 else _F32  # float64 while widening
    scratch = _Scratch()

    def run(x: np.ndarray, size: np.ndarray) -> np.ndarray:
        oh, ow = _read_size(size)
        if oh <= 0 or ow <= 0:
            if size_const is None and oh == 0 and ow == 0:
                # dynamic size fed zeros by the executor's shape pass: an empty output
                return np.zeros((x.shape[0], 0, 0, x.shape[3]), x.dtype)
            raise KernelError(f"output size must be positive, got {[oh, ow]}")
        if kind == _FLOAT32:
            return _bilinear_float(x, oh, ow, align, half, False, scratch, ft)
        if kind == _UINT8:
            return _bilinear_float(x, oh, ow, align, half, True, scratch)
        return _bilinear_integer(x, oh, ow, align, half, scratch)

    return run


# --- nearest neighbor ----------------------------------------------------------------------

@lru_cache(maxsize=256)
def _nearest_index(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """GetNearestNeighbor for every output index, float32 arithmetic."""
    if out_size <= 0:
        return np.zeros(0, np.intp)
    if align_corners and out_size > 1:
        scale = _F32(in_size - 1) / _F32(out_size - 1)
    else:
        scale = _F32(in_size) / _F32(out_size)
    offset = _F32(0.5) if half_pixel else _F32(0.0)
    v = (np.arange(out_size, dtype=_F32) + offset) * scale
    if align_corners:
        idx = np.sign(v) * np.floor(np.abs(v) + _F32(0.5))  # TfLiteRound: half away from zero
    else:
        idx = np.floor(v)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    if half_pixel:
        idx = np.maximum(idx, 0)
    return idx.astype(np.intp)


@register("RESIZE_NEAREST_NEIGHBOR", max_version=4, dtypes=_NEAREST_NAMES)
def resize_nearest_neighbor(node: NodeContext):
    x_t = _size_input(node)
    # LiteRT dispatches on the element size: any 8/16/32-bit type (not int4 or strings)
    if (x_t.dtype == np.object_ or x_t.dtype.itemsize not in (1, 2, 4) or x_t.type in PACKED_BITS) \
            and not is_float32(x_t):
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    align = bool(node.options.get("align_corners", False))
    half = bool(node.options.get("half_pixel_centers", False))

    def run(x: np.ndarray, size: np.ndarray) -> np.ndarray:
        oh, ow = _read_size(size)
        if oh < 0 or ow < 0:
            raise KernelError(f"negative output size {[oh, ow]}")
        n, h, w, c = x.shape
        iy = _nearest_index(h, oh, align, half)
        ix = _nearest_index(w, ow, align, half)
        return np.take(np.take(x, iy, axis=1), ix, axis=2)

    return run
