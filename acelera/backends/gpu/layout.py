"""The PHWC4 tensor layout: logical shapes of rank <= 4 as BHWC with channels in slices of 4.

A tensor of logical shape `shape` is viewed as (B, H, W, C) the way TFLite's GPU delegate
does (rank 0: 1x1x1x1, rank 1 (C): 1x1x1xC, rank 2 (N, C): Nx1x1xC, rank 3 (N, W, C):
Nx1xWxC, rank 4 as is) and stored as [B][S][H][W][4] with S = ceil(C / 4), the lanes past C
zero. `index()` gives every logical element's scalar position in that storage, which is how
the layout ops (reshape, concat, pad, slices, transpose) are compiled into copy maps.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

#: which BHWC axis (0 B, 1 H, 2 W, 3 C) each logical axis maps to, per rank
AXES = {0: (), 1: (3,), 2: (0, 3), 3: (0, 2, 3), 4: (0, 1, 2, 3)}


def slices(c: int) -> int:
    return (c + 3) // 4


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]

    @cached_property
    def bhwc(self) -> tuple[int, int, int, int]:
        dims = [1, 1, 1, 1]
        for ax, d in zip(AXES[len(self.shape)], self.shape):
            dims[ax] = int(d)
        return dims[0], dims[1], dims[2], dims[3]

    @property
    def B(self) -> int:
        return self.bhwc[0]

    @property
    def H(self) -> int:
        return self.bhwc[1]

    @property
    def W(self) -> int:
        return self.bhwc[2]

    @property
    def C(self) -> int:
        return self.bhwc[3]

    @property
    def S(self) -> int:
        return slices(self.C)

    @property
    def vectors(self) -> int:
        return self.B * self.S * self.H * self.W

    @property
    def size(self) -> int:
        """Scalars in storage, padding lanes included."""
        return self.vectors * 4

    def strides(self) -> tuple[int, int, int, int]:
        """Storage strides in vectors of (b, s, h, w)."""
        return self.S * self.H * self.W, self.H * self.W, self.W, 1

    def axis_stride(self, bhwc_axis: int) -> int:
        """Vector stride of a B/H/W axis."""
        b, _, h, w = self.strides()
        return {0: b, 1: h, 2: w}[bhwc_axis]

    def pack(self, x: np.ndarray, dtype) -> np.ndarray:
        """Logical array -> flat storage (zero padding lanes), in `dtype`."""
        B, H, W, C = self.bhwc
        S = self.S
        x = np.asarray(x).reshape(B, H, W, C)
        out = np.zeros((B, S, H, W, 4), dtype)
        src = x.astype(dtype, copy=False)
        full = C // 4
        if full:
            out[:, :full] = src[..., :full * 4].reshape(B, H, W, full, 4).transpose(0, 3, 1, 2, 4)
        if C % 4:
            out[:, full, ..., :C % 4] = src[..., full * 4:]
        return out.reshape(-1)

    def unpack(self, flat: np.ndarray, dtype) -> np.ndarray:
        """Flat storage -> logical array of `dtype`."""
        B, H, W, C = self.bhwc
        v = flat[:self.size].reshape(B, self.S, H, W, 4).transpose(0, 2, 3, 1, 4).reshape(B, H, W, self.S * 4)
        return np.ascontiguousarray(v[..., :C]).reshape(self.shape).astype(dtype, copy=False)

    def index(self) -> np.ndarray:
        """Scalar storage position of every logical element (an int64 array of `shape`)."""
        return self.unpack(np.arange(self.size, dtype=np.int64), np.int64)

    def same_storage(self, other: "Layout") -> bool:
        """Whether a row-major reshape between the two leaves storage unchanged."""
        return self.size == other.size and np.array_equal(self.index().reshape(-1), other.index().reshape(-1))


def expand(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(shape)
