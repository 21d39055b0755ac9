"""Bounded temporaries: kernels whose scratch grows with their input work in tiles.

A kernel whose intermediate (TRANSPOSE_CONV's tap matrix, a CONV_3D tap's product, an
element-wise op's broadcast operands and fixed-point temporaries) would exceed a tile builds it
one tile at a time instead of whole, so what it allocates beyond its output stays under
core.memory.TILE_BYTES (or, for element-wise functions, a few temporaries of
core.memory.BROADCAST_BLOCK elements; both read at each call). core/memory.py's SCRATCH
estimators count the same bounds, so the budget checked at allocate_tensors() is what these
kernels allocate.

Helpers:
- boxes(shape, elem_bytes): cover `shape` with boxes of at most TILE_BYTES.
- broadcast_tiles(fn, out_dtype) / broadcast_tiles_into(fn, out_dtype): apply an element-wise
  fn(*operands) (or fn(*operands, out)) over any numpy broadcast in blocks of the output,
  never materializing a broadcast operand at the output's size.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from acelera.core import memory

Box = tuple[slice, ...]


def boxes(shape: Sequence[int], elem_bytes: int, tile: int | None = None) -> Iterator[Box]:
    """Slices over every axis of `shape` covering it with boxes of at most `tile` bytes
    (memory.TILE_BYTES by default; one element is `elem_bytes`, e.g. a pixel's channels): whole
    trailing axes, a range of one axis, single indices before it. One box (all of `shape`)
    when it fits, so an untiled computation is the same as before tiling."""
    shape = tuple(int(d) for d in shape)
    limit = memory.TILE_BYTES if tile is None else int(tile)
    if math.prod(shape) == 0:
        return
    k, inner = _split_axis(shape, max(1, limit // max(1, int(elem_bytes))))
    if k < 0:
        yield tuple(slice(0, d) for d in shape)
        return
    step = max(1, limit // max(1, inner * int(elem_bytes)))
    tail = tuple(slice(0, d) for d in shape[k + 1:])
    for outer in np.ndindex(*shape[:k]):
        head = tuple(slice(i, i + 1) for i in outer)
        for s in range(0, shape[k], step):
            yield head + (slice(s, min(s + step, shape[k])),) + tail


def _split_axis(shape: tuple[int, ...], limit: int) -> tuple[int, int]:
    """(k, prod(shape[k+1:])) for the innermost axis k whose block from k on exceeds `limit`
    elements (the block after it fits); (-1, size) when the whole shape fits."""
    inner = 1
    for k in range(len(shape) - 1, -1, -1):
        if inner * shape[k] > limit:
            return k, inner
        inner *= shape[k]
    return -1, inner


def _block_views(arrays: Sequence[np.ndarray], shape: tuple[int, ...], box: Box) -> list[np.ndarray]:
    """Each operand's part of the output block `box` (a view, still broadcastable)."""
    views = []
    for a in arrays:
        a = np.asarray(a)
        pad = len(shape) - a.ndim
        idx = tuple(slice(None) if a.shape[i - pad] == 1 else box[i] for i in range(pad, len(shape)))
        views.append(a[idx])
    return views


def broadcast_tiles(fn: Callable[..., np.ndarray], out_dtype,
                    block: int | None = None) -> Callable[..., np.ndarray]:
    """fn(*operands) over the numpy broadcast of its operands, evaluated a block of at most
    `block` (memory.BROADCAST_BLOCK) output elements at a time when the output is larger:
    each call of fn sees views of the operands restricted to one block, so no broadcast
    operand and no temporary of fn is ever larger than a block. fn must be element-wise."""
    out_dtype = np.dtype(out_dtype)

    def run(*xs: np.ndarray) -> np.ndarray:
        limit = memory.BROADCAST_BLOCK if block is None else block
        shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
        if math.prod(shape) <= limit:
            return fn(*xs)
        out = np.empty(shape, out_dtype)
        for box in boxes(shape, 1, limit):
            out[box] = fn(*_block_views(xs, shape, box))
        return out
    return run


def broadcast_tiles_into(fn: Callable[..., None], out_dtype,
                         block: int | None = None) -> Callable[..., np.ndarray]:
    """Like broadcast_tiles, for fn(*operands, out) writing its block of the result into `out`
    (always called, also for a small output, with the operands as given)."""
    out_dtype = np.dtype(out_dtype)

    def run(*xs: np.ndarray) -> np.ndarray:
        limit = memory.BROADCAST_BLOCK if block is None else block
        shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
        out = np.empty(shape, out_dtype)
        if out.size == 0:
            return out
        if out.size <= limit:
            fn(*xs, out)
            return out
        for box in boxes(shape, 1, limit):
            fn(*_block_views(xs, shape, box), out[box])
        return out
    return run
