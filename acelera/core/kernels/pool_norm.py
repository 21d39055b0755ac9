"""L2_POOL_2D and LOCAL_RESPONSE_NORMALIZATION reference kernels (float32, NHWC).

Mirrors tflite/kernels/pooling.cc (L2 pool), local_response_norm.cc, tflite/kernels/padding.h
and reference_ops::L2Pool / LocalResponseNormalization
(tflite/kernels/internal/reference/pooling.h, reference_ops.h).

L2 pool: sqrt(sum of squares / taps) over each window clamped to the input, then the fused
activation clamp (NONE clamps to +-FLT_MAX). The window sum is separable: one pass of filter
taps along the height, one along the width.

LRN follows the reference kernel, whose window over channels is [c - radius, c + radius)
(the optimized kernel LiteRT uses by default includes c + radius; BUILTIN_REF does not).
While widening (registry.widening) both take FLOAT64 and compute in it.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import ModelError
from acelera.core.kernels.common import SAME, VALID, float_activation_bounds
from acelera.core.kernels.registry import Kernel, NodeContext, is_float32, register


def _out_size(padding: int, size: int, filt: int, stride: int) -> int | None:
    """ComputeOutSizeChecked with dilation 1: None where LiteRT reports an error."""
    if padding not in (SAME, VALID) or size < 0 or filt <= 0 or stride <= 0:
        return None
    num = size + stride - 1 if padding == SAME else size + stride - filt
    value = num // stride if num >= 0 else -((-num) // stride)
    return value if value >= 0 else None


def _window_sum(x: np.ndarray, axis: int, filt: int, stride: int, out: int, before: int) -> np.ndarray:
    """Sum of `filt` taps with stride `stride` along `axis`, zeros outside the input."""
    size = x.shape[axis]
    after = max(0, (out - 1) * stride + filt - size - before)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (before, after)
    xp = np.pad(x, widths) if before or after else x
    lead = (slice(None),) * axis
    span = (out - 1) * stride + 1
    acc = np.zeros(x.shape[:axis] + (out,) + x.shape[axis + 1:], x.dtype)
    for t in range(filt):
        acc += xp[lead + (slice(t, t + span, stride),)]
    return acc


def _one_4d_input(node: NodeContext, op: str):
    """(input, output) of a node with exactly one 4-D input and one output."""
    if len(node.inputs) != 1 or len(node.outputs) != 1:
        raise ModelError(f"{op} takes 1 input and 1 output")
    x_t, out_t = node.input(0), node.outputs[0]
    if x_t is None:
        raise ModelError("the input is required")
    if len(x_t.shape) != 4:
        raise ModelError(f"input must be 4-D, got shape {list(x_t.shape)}")
    return x_t, out_t


@register("L2_POOL_2D", max_version=1, dtypes=("FLOAT32",))
def l2_pool_2d(node: NodeContext) -> Kernel:
    x_t, out_t = _one_4d_input(node, "L2_POOL_2D")
    if x_t.type != out_t.type:
        raise node.unsupported(f"output type {out_t.type_name} differs from input type {x_t.type_name}")
    if not is_float32(x_t):
        raise node.unsupported(f"input type {x_t.type_name} is not supported (FLOAT32 only)")
    dt = x_t.dtype

    def get(key: str) -> int:
        return int(node.options.get(key, 0) or 0)

    padding, sh, sw = get("padding"), get("stride_h"), get("stride_w")
    fh, fw, act = get("filter_height"), get("filter_width"), get("fused_activation_function")
    if sh <= 0 or sw <= 0:
        raise ModelError(f"strides must be positive, got ({sh}, {sw})")
    n, h, w, c = x_t.shape
    # ComputePaddingHeightWidth stops at the first invalid axis (width first), leaving 0s.
    ow = _out_size(padding, w, fw, sw)
    oh = _out_size(padding, h, fh, sh) if ow is not None else None
    ow, oh = ow or 0, oh or 0
    pad_h = max((oh - 1) * sh + fh - h, 0) // 2 if oh else 0
    pad_w = max((ow - 1) * sw + fw - w, 0) // 2 if ow else 0
    count = None
    if oh and ow:
        def taps(out, stride, pad, filt, size):
            origin = np.arange(out) * stride - pad
            return np.minimum(filt, size - origin) - np.maximum(0, -origin)
        count = np.multiply.outer(taps(oh, sh, pad_h, fh, h), taps(ow, sw, pad_w, fw, w)).astype(dt)
        count = count[None, :, :, None]
    lo, hi = (np.float32(v) for v in float_activation_bounds(act))

    def run(x: np.ndarray) -> np.ndarray:
        if count is None or x.size == 0:
            return np.zeros((n, oh, ow, c), dt)
        sq = np.square(x, dtype=dt)
        s = _window_sum(_window_sum(sq, 1, fh, sh, oh, pad_h), 2, fw, sw, ow, pad_w)
        s /= count
        np.sqrt(s, out=s)
        return np.clip(s, lo, hi, out=s)

    return run


@register("LOCAL_RESPONSE_NORMALIZATION", max_version=1, dtypes=("FLOAT32",))
def local_response_normalization(node: NodeContext) -> Kernel:
    x_t, out_t = _one_4d_input(node, "LOCAL_RESPONSE_NORMALIZATION")
    if not is_float32(out_t):
        raise node.unsupported(f"output type {out_t.type_name} is not supported (FLOAT32 only)")
    if x_t.type != out_t.type:
        raise node.unsupported(f"input type {x_t.type_name} differs from output type {out_t.type_name}")
    o = node.options
    radius = int(o.get("radius", 0) or 0)
    bias, alpha, beta = (np.float32(o.get(k, 0.0) or 0.0) for k in ("bias", "alpha", "beta"))
    depth = x_t.shape[3]
    dt = out_t.dtype
    r = max(0, min(radius, depth))
    ch = np.arange(depth)
    begin = np.maximum(0, ch - r)
    end = np.maximum(begin, np.minimum(depth, ch + r))

    def window_sums(sq: np.ndarray) -> np.ndarray:
        if r == 0:
            return np.zeros_like(sq)
        if dt == np.float32 and np.isfinite(sq).all():  # prefix sums in float64: exact enough, one pass
            cs = np.zeros(sq.shape[:3] + (depth + 1,), np.float64)
            np.cumsum(sq, axis=3, dtype=np.float64, out=cs[..., 1:])
            return (cs[..., end] - cs[..., begin]).astype(np.float32)
        padded = np.pad(sq, [(0, 0)] * 3 + [(r, r)])  # window [c - r, c + r) is padded[c:c + 2r]
        acc = np.zeros_like(sq)
        for t in range(2 * r):
            acc += padded[..., t:t + depth]
        return acc

    def run(x: np.ndarray) -> np.ndarray:
        accum = window_sums(np.square(x, dtype=dt))
        with np.errstate(all="ignore"):
            mult = np.power(bias + alpha * accum, -beta, dtype=dt)
        return np.multiply(x, mult, dtype=dt)

    return run
