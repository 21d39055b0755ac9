"""DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND and SPACE_TO_BATCH_ND reference kernels.

Pure data movement (reshape + transpose), mirroring tflite/kernels/depth_to_space.cc,
space_to_depth.cc, batch_to_space_nd.cc and space_to_batch_nd.cc. Quantized tensors keep
their raw values; SPACE_TO_BATCH_ND pads 8/16-bit tensors with the output zero point
(LiteRT memsets each padded pixel with that byte) and everything else with zeros. While
widening (registry.widening) DEPTH_TO_SPACE and SPACE_TO_DEPTH also take FLOAT64.
"""
from __future__ import annotations

import numpy as np

from acelera.core.dtypes import PACKED_BITS, TYPE_NAMES, numpy_dtype
from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import check_same_type, scale_zp
from acelera.core.kernels.registry import NodeContext, is_float32, register

_FLOAT32, _INT32, _UINT8, _INT64, _INT16, _INT8, _INT4 = 0, 2, 3, 4, 7, 9, 17

# depth_to_space.cc / space_to_depth.cc Prepare: the accepted tensor types.
_DEPTH_TYPES = {_FLOAT32, _UINT8, _INT8, _INT32, _INT64}
_DEPTH_NAMES = tuple(TYPE_NAMES[t] for t in sorted(_DEPTH_TYPES))
# SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND: every 8/16/32/64-bit type but int4
_BATCH_NAMES = tuple(n for c, n in sorted(TYPE_NAMES.items())
                     if numpy_dtype(c) != np.object_ and numpy_dtype(c).itemsize in (1, 2, 4, 8)
                     and c not in PACKED_BITS)


def _depth_op_block_size(node: NodeContext) -> int:
    """Shared Prepare checks of DEPTH_TO_SPACE / SPACE_TO_DEPTH; returns the block size."""
    check_arity(node, 1, 1)
    x_t, out_t = node.input(0), node.outputs[0]
    assert x_t is not None  # check_arity refused missing inputs
    if out_t.type not in _DEPTH_TYPES and not is_float32(out_t):
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    check_same_type(node, x_t, out_t)
    if len(x_t.shape) != 4:
        raise node.unsupported(f"input must have rank 4, got shape {list(x_t.shape)}")
    bs = int(node.options.get("block_size", 0))
    if bs <= 0:
        raise node.unsupported(f"block_size must be positive, got {bs}")
    return bs


@register("DEPTH_TO_SPACE", max_version=2, dtypes=_DEPTH_NAMES)
def depth_to_space(node: NodeContext):
    bs = _depth_op_block_size(node)

    def run(x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        if c % (bs * bs):
            raise KernelError(f"depth {c} is not a multiple of block_size^2 = {bs * bs}")
        oc = c // (bs * bs)
        y = x.reshape(n, h, w, bs, bs, oc).transpose(0, 1, 3, 2, 4, 5)
        return y.reshape(n, h * bs, w * bs, oc)

    return run


@register("SPACE_TO_DEPTH", max_version=2, dtypes=_DEPTH_NAMES)
def space_to_depth(node: NodeContext):
    bs = _depth_op_block_size(node)

    def run(x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        if h % bs or w % bs:
            raise KernelError(f"spatial size {h}x{w} is not a multiple of block_size {bs}")
        y = x.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
        return y.reshape(n, h // bs, w // bs, bs * bs * c)

    return run


def _check_batch_space_op(node: NodeContext, what: str) -> None:
    """Shared Prepare checks of SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND."""
    check_arity(node, 3, 1)
    x_t, blk_t, pad_t = node.input(0), node.input(1), node.input(2)
    assert x_t is not None and blk_t is not None and pad_t is not None  # check_arity refused missing inputs
    out_t = node.outputs[0]
    # LiteRT dispatches on the element size: any 8/16/32/64-bit type (not int4 or strings)
    if x_t.dtype == np.object_ or x_t.dtype.itemsize not in (1, 2, 4, 8) or x_t.type in PACKED_BITS:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    check_same_type(node, x_t, out_t)
    if not 3 <= len(x_t.shape) <= 4:
        raise node.unsupported(f"input must have rank 3 or 4, got shape {list(x_t.shape)}")
    for t, name in ((blk_t, "block_shape"), (pad_t, what)):
        if t.type != _INT32:
            raise node.unsupported(f"{name} of type {t.type_name} is not supported (int32 only)")
    if x_t.type in (_UINT8, _INT8, _INT16) and x_t.quantized:
        if scale_zp(x_t) != scale_zp(out_t):
            raise node.unsupported("input and output quantization parameters must be equal")
        if x_t.type == _INT16 and scale_zp(x_t)[1] != 0:
            raise node.unsupported("int16 zero point must be 0")
    spatial = len(x_t.shape) - 2
    if tuple(blk_t.shape) != (spatial,) or tuple(pad_t.shape) != (spatial, 2):
        raise node.unsupported(f"block_shape {list(blk_t.shape)} / {what} {list(pad_t.shape)} do not match "
                               f"{spatial} spatial dimensions")


def _as4d(x: np.ndarray) -> np.ndarray:
    """Rank-3 (batch, spatial, depth) inputs are handled as (batch, spatial, 1, depth)."""
    return x if x.ndim == 4 else x.reshape(x.shape[0], x.shape[1], 1, x.shape[2])


def _valid_range(offset: int, step: int, size: int, count: int) -> tuple[int, int]:
    """[i0, i1): the i in [0, count) with 0 <= i * step + offset < size."""
    i0 = max(0, -(offset // step)) if offset < 0 else 0
    i1 = min(count, -((offset - size) // step))
    return i0, max(i0, i1)


def _const_blocks(node: NodeContext, x_shape) -> tuple[int, int, int, int, int, int] | None:
    """(bh, bw, top, bottom, left, right) of constant, positive block_shape and paddings/crops
    (None otherwise: run() then checks the values)."""
    block, pads = np.asarray(node.const(1)), np.asarray(node.const(2))
    rank4 = len(x_shape) == 4
    if block.shape != ((2,) if rank4 else (1,)) or pads.shape != ((2, 2) if rank4 else (1, 2)):
        return None
    bh, bw = int(block[0]), int(block[1]) if rank4 else 1
    pt, pb = int(pads[0, 0]), int(pads[0, 1])
    pl, pr = (int(pads[1, 0]), int(pads[1, 1])) if rank4 else (0, 0)
    if bh <= 0 or bw <= 0:
        return None
    return bh, bw, pt, pb, pl, pr


def _dynamic_placeholder(x: np.ndarray, block: np.ndarray, pads: np.ndarray):
    """Non-constant block_shape/paddings that are all zero (the executor's shape pass feeds
    zeros to graph inputs): an empty output of the right rank instead of an error."""
    if not block.any() and not pads.any():
        return np.zeros((0,) * (x.ndim - 1) + (x.shape[-1],), x.dtype)
    return None


@register("SPACE_TO_BATCH_ND", max_version=4, dtypes=_BATCH_NAMES)
def space_to_batch_nd(node: NodeContext):
    _check_batch_space_op(node, "paddings")
    x_t, out_t = node.input(0), node.outputs[0]
    assert x_t is not None  # _check_batch_space_op refused missing inputs
    pad_value = 0
    if x_t.dtype.itemsize in (1, 2) and out_t.quantized:
        # memset(out, zero_point, bytes): every byte is the zero point's low byte (int16 zero
        # points are checked to be 0, so this only matters for 8-bit types in practice)
        zp = scale_zp(out_t)[1]
        pad_value = np.full(x_t.dtype.itemsize, zp & 0xFF, np.uint8).view(x_t.dtype)[0]
    dynamic = node.const(1) is None or node.const(2) is None
    fixed = None if dynamic else _const_blocks(node, x_t.shape)

    def run(x: np.ndarray, block: np.ndarray, pads: np.ndarray) -> np.ndarray:
        if fixed is not None and min(fixed[2:]) >= 0:
            bh, bw, pt, pb, pl, pr = fixed
            x4 = _as4d(x)
            n, h, w, c = x4.shape
            hp, wp = h + pt + pb, w + pl + pr
            if hp >= 0 and wp >= 0 and hp % bh == 0 and wp % bw == 0:
                if pt or pb or pl or pr:
                    xp = np.full((n, hp, wp, c), pad_value, x.dtype)
                    xp[:, pt:pt + h, pl:pl + w] = x4
                    x4 = xp
                out = np.empty((bh, bw, n, hp // bh, wp // bw, c), x.dtype)
                out[...] = x4.reshape(n, hp // bh, bh, wp // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)
                return out.reshape((bh * bw * n,) + out.shape[3:5 if x.ndim == 4 else 4] + (c,))
        if dynamic:
            ph = _dynamic_placeholder(x, block, pads)
            if ph is not None:
                return ph
        x4 = _as4d(x)
        n, h, w, c = x4.shape
        bh = int(block[0])
        bw = int(block[1]) if x.ndim == 4 else 1
        pt, pb = int(pads[0, 0]), int(pads[0, 1])
        pl, pr = (int(pads[1, 0]), int(pads[1, 1])) if x.ndim == 4 else (0, 0)
        if bh <= 0 or bw <= 0:
            raise KernelError(f"block_shape must be positive, got {block.tolist()}")
        hp, wp = h + pt + pb, w + pl + pr
        if hp < 0 or wp < 0 or hp % bh or wp % bw:
            raise KernelError(f"padded spatial size {hp}x{wp} is not a multiple of "
                              f"block_shape {block.tolist()}")
        oh, ow = hp // bh, wp // bw
        # out[(sy * bw + sx) * n + b, i, j] = padded[b, i * bh + sy, j * bw + sx]: one strided
        # copy per block offset (sy, sx), padding only where a block reaches the border.
        out = np.empty((bh, bw, n, oh, ow, c), x.dtype)
        for sy in range(bh):
            i0, i1 = _valid_range(sy - pt, bh, h, oh)
            for sx in range(bw):
                j0, j1 = _valid_range(sx - pl, bw, w, ow)
                blk = out[sy, sx]
                if i0 > 0 or i1 < oh or j0 > 0 or j1 < ow:
                    blk[...] = pad_value
                if i1 > i0 and j1 > j0:
                    r, q = i0 * bh + sy - pt, j0 * bw + sx - pl
                    blk[:, i0:i1, j0:j1] = x4[:, r:r + (i1 - i0 - 1) * bh + 1:bh, q:q + (j1 - j0 - 1) * bw + 1:bw]
        y = out.reshape(bh * bw * n, oh, ow, c)
        return y if x.ndim == 4 else y.reshape(bh * bw * n, oh, c)

    return run


@register("BATCH_TO_SPACE_ND", max_version=4, dtypes=_BATCH_NAMES)
def batch_to_space_nd(node: NodeContext):
    _check_batch_space_op(node, "crops")
    dynamic = node.const(1) is None or node.const(2) is None
    x_t = node.input(0)
    assert x_t is not None  # _check_batch_space_op refused missing inputs
    fixed = None if dynamic else _const_blocks(node, x_t.shape)

    def run(x: np.ndarray, block: np.ndarray, crops: np.ndarray) -> np.ndarray:
        if fixed is not None and min(fixed[2:]) >= 0:
            bh, bw, ct, cb, cl, cr = fixed
            x4 = _as4d(x)
            nb, h, w, c = x4.shape
            n = nb // (bh * bw)
            oh, ow = h * bh - ct - cb, w * bw - cl - cr
            if nb % (bh * bw) == 0 and oh >= 0 and ow >= 0:
                full = np.empty((n, h, bh, w, bw, c), x.dtype)
                full[...] = x4.reshape(bh, bw, n, h, w, c).transpose(2, 3, 0, 4, 1, 5)
                y = full.reshape(n, h * bh, w * bw, c)
                if ct or cb or cl or cr:
                    y = np.ascontiguousarray(y[:, ct:ct + oh, cl:cl + ow])
                return y if x.ndim == 4 else y.reshape(n, oh, c)
        if dynamic:
            ph = _dynamic_placeholder(x, block, crops)
            if ph is not None:
                return ph
        if (crops < 0).any():
            raise KernelError(f"crops must be non-negative, got {crops.tolist()}")
        x4 = _as4d(x)
        nb, h, w, c = x4.shape
        bh = int(block[0])
        bw = int(block[1]) if x.ndim == 4 else 1
        ct, cb = int(crops[0, 0]), int(crops[0, 1])
        cl, cr = (int(crops[1, 0]), int(crops[1, 1])) if x.ndim == 4 else (0, 0)
        if bh <= 0 or bw <= 0 or nb % bh or (nb // bh) % bw:
            raise KernelError(f"batch {nb} is not divisible by block_shape {block.tolist()}")
        n = nb // (bh * bw)
        oh, ow = h * bh - ct - cb, w * bw - cl - cr
        if oh < 0 or ow < 0:
            raise KernelError(f"crops {crops.tolist()} exceed the output size")
        # out[b, i * bh + sy - ct, j * bw + sx - cl] = x[(sy * bw + sx) * n + b, i, j]: one
        # strided copy per block offset; crops >= 0 so every output pixel is written once.
        x6 = x4.reshape(bh, bw, n, h, w, c)
        y = np.empty((n, oh, ow, c), x.dtype)
        for sy in range(bh):
            i0, i1 = _valid_range(sy - ct, bh, oh, h)
            for sx in range(bw):
                j0, j1 = _valid_range(sx - cl, bw, ow, w)
                if i1 > i0 and j1 > j0:
                    r, q = i0 * bh + sy - ct, j0 * bw + sx - cl
                    y[:, r:r + (i1 - i0 - 1) * bh + 1:bh, q:q + (j1 - j0 - 1) * bw + 1:bw] = x6[sy, sx, :, i0:i1, j0:j1]
        return y if x.ndim == 4 else y.reshape(n, oh, c)

    return run
