"""Weight packers of the register-blocked convolution kernels (kernels/conv.py): constant
weights are packed at compile time (ops/conv.py, ops/lstm.py), runtime weights by the host at
every invoke (boundary.py; a Port's `pack` names its packer in PACKERS)."""
from __future__ import annotations

import numpy as np

from acelera.backends.gpu.layout import slices


def pairs(channels: int) -> int:
    """Slice pairs (float8 accumulators) covering `channels`."""
    return -(-slices(channels) // 2)


def pack_blocked(w: np.ndarray, _arg: int = 0) -> np.ndarray:
    """OHWI weights -> [slice pair][ky][kx][in slice][4 input lanes][8 output channels]."""
    o, kh, kw, i = w.shape
    g = pairs(o)
    is_ = slices(i)
    wp = np.zeros((g * 8, kh, kw, is_ * 4), np.float32)
    wp[:o, :, :, :i] = w
    return wp.reshape(g, 8, kh, kw, is_, 4).transpose(0, 2, 3, 4, 5, 1).reshape(-1)


def pack_depthwise(w: np.ndarray, _arg: int = 0) -> np.ndarray:
    """(1, KH, KW, OC) -> [out slice][ky][kx][4]."""
    _, kh, kw, oc = w.shape
    s = slices(oc)
    wp = np.zeros((kh, kw, s * 4), np.float32)
    wp[..., :oc] = w[0]
    return wp.reshape(kh, kw, s, 4).transpose(2, 0, 1, 3).reshape(-1)


def pack_fc(w: np.ndarray, _arg: int = 0) -> np.ndarray:
    """(O, K) -> [slice pair][in slice][4 input lanes][8 output channels]."""
    o, k = w.shape
    g = pairs(o)
    wp = np.zeros((g * 8, slices(k) * 4), np.float32)
    wp[:o, :k] = w
    return wp.reshape(g, 8, slices(k), 4).transpose(0, 2, 3, 1).reshape(-1)


PACKERS = {"blocked": pack_blocked, "depthwise": pack_depthwise, "fc": pack_fc}
