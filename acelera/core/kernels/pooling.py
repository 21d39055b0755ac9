"""AVERAGE_POOL_2D and MAX_POOL_2D reference kernels, bit-exact with LiteRT 2.3's reference.

NHWC input. Windows are clamped to the input (padding never contributes): the average
divides by the number of valid taps, and the quantized average rounds half away from zero
(``(acc +- count/2) / count`` with C truncating division; uint8 only sees acc >= 0).
Float max pooling starts from the lowest float and uses std::max, so NaNs are skipped.
Fused activations: RELU, RELU_N1_TO_1 and RELU6 clamp; others are no-ops, as in LiteRT.

Both pools are separable: a 1-D pass along the height then one along the width, each a loop
over the filter taps of whole-array numpy operations (or one reduction over a reshaped axis
when large windows tile the input without overlap, as in global pooling). While widening
(registry.widening) the float path takes FLOAT64 and computes in it.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from acelera.core.kernels.common import (
    NONE,
    SAME,
    VALID,
    check_same_type,
    float_activation_range,
    quantized_activation_range,
    scale_zp,
)
from acelera.core.kernels.registry import NodeContext, float_type_names, is_float32, register

_TYPES = ("FLOAT32", "UINT8", "INT8", "INT16")


def _axis_geometry(padding: int, size: int, filt: int, stride: int):
    """(out, pad_before, pad_after, valid-tap count per output) along one spatial axis."""
    if padding == SAME:
        out = (size + stride - 1) // stride
    else:
        v = size + stride - filt
        out = v // stride if v >= 0 else -((-v) // stride)  # C++ truncating division
    if out < 0:
        return None
    total = max((out - 1) * stride + filt - size, 0)
    before = total // 2
    after = max(0, (out - 1) * stride + filt - size - before)
    origin = np.arange(out) * stride - before
    count = np.minimum(filt, size - origin) - np.maximum(0, -origin)
    return out, before, after, count


def _pool_axis(x: np.ndarray, axis: int, filt: int, stride: int, out: int, before: int,
               after: int, pad_value, op, acc_dtype) -> np.ndarray:
    """Reduce windows of `filt` taps (stride `stride`) along `axis` with ufunc `op`.

    Always returns a new array of `acc_dtype`.
    """
    lead = (slice(None),) * axis
    if before or after:
        size = x.shape[axis]
        xp = np.empty(x.shape[:axis] + (before + size + after,) + x.shape[axis + 1:], x.dtype)
        xp[lead + (slice(0, before),)] = pad_value
        xp[lead + (slice(before + size, None),)] = pad_value
        xp[lead + (slice(before, before + size),)] = x
        x = xp
    if stride == filt and filt > 1:
        # Non-overlapping windows: split the axis into (out, filt).
        v = x[lead + (slice(0, out * filt),)].reshape(x.shape[:axis] + (out, filt) + x.shape[axis + 1:])
        if filt > 4:
            return op.reduce(v, axis=axis + 1, dtype=acc_dtype)
        taps = [v[lead + (slice(None), t)] for t in range(filt)]
    else:
        span = (out - 1) * stride + 1
        taps = [x[lead + (slice(t, t + span, stride),)] for t in range(filt)]
    if len(taps) == 1:
        return taps[0].astype(acc_dtype, copy=True)
    acc = op(taps[0], taps[1], dtype=acc_dtype)
    for t in taps[2:]:
        op(acc, t, out=acc)
    return acc


def _prepare_pool(node: NodeContext, kind: str):
    opts = node.options
    padding = int(opts.get("padding", SAME) or 0)
    sh, sw = int(opts.get("stride_h", 0) or 0), int(opts.get("stride_w", 0) or 0)
    fh, fw = int(opts.get("filter_height", 0) or 0), int(opts.get("filter_width", 0) or 0)
    act = int(opts.get("fused_activation_function", NONE) or 0)
    if len(node.inputs) != 1 or len(node.outputs) != 1:
        raise node.unsupported("expected 1 input and 1 output")
    x_t, out_t = node.input(0), node.outputs[0]
    if x_t is None:
        raise node.unsupported("the input is required")
    if x_t.type_name not in _TYPES + float_type_names():
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    check_same_type(node, x_t, out_t)
    if len(x_t.shape) != 4:
        raise node.unsupported(f"input must be 4-D (NHWC), got shape {list(x_t.shape)}")
    if padding not in (SAME, VALID):
        raise node.unsupported(f"padding {padding} is not supported")
    if sh <= 0 or sw <= 0 or fh <= 0 or fw <= 0:
        raise node.unsupported(f"strides ({sh}, {sw}) and filter ({fh}, {fw}) must be positive")

    dtype = x_t.dtype
    is_float = is_float32(x_t)
    if is_float:
        lo, hi = float_activation_range(act)
        clamp = np.isfinite(lo) or np.isfinite(hi)
    else:
        scale, zp = scale_zp(out_t)
        lo, hi = quantized_activation_range(act, scale, zp, dtype) if act != NONE else (
            int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
        info = np.iinfo(dtype)
        clamp = lo > info.min or hi < info.max

    cache: dict[tuple, tuple] = {}

    def geometry(shape):
        g = cache.get(shape)
        if g is None:
            gh = _axis_geometry(padding, shape[1], fh, sh)
            gw = _axis_geometry(padding, shape[2], fw, sw)
            if gh is None or gw is None:
                raise node.unsupported(f"filter ({fh}, {fw}) does not fit input {list(shape)} with VALID padding")
            g = cache[shape] = (gh, gw)
        return g

    geometry(tuple(x_t.shape))

    op: np.ufunc
    acc_dtype: DTypeLike
    if kind == "max":
        if is_float:
            pad_value = dtype.type(np.finfo(np.float32).min)  # float32's lowest, also in float64
            op, acc_dtype = np.fmax, dtype
        else:
            pad_value = np.iinfo(dtype).min
            op, acc_dtype = np.maximum, dtype

        def run_max(x):
            (oh, ph0, ph1, _), (ow, pw0, pw1, _) = geometry(x.shape)
            if oh == 0 or ow == 0 or x.size == 0:
                return np.zeros((x.shape[0], oh, ow, x.shape[3]), dtype)
            y = _pool_axis(x, 1, fh, sh, oh, ph0, ph1, pad_value, op, acc_dtype)
            y = _pool_axis(y, 2, fw, sw, ow, pw0, pw1, pad_value, op, acc_dtype)
            if is_float:
                # std::max from the lowest float: fmax skipped NaNs, an all-NaN window and
                # -inf give the lowest float.
                np.fmax(y, pad_value, out=y)
            if clamp:
                np.maximum(y, lo, out=y)
                np.minimum(y, hi, out=y)
            return y
        return run_max

    acc_dtype = dtype if is_float else np.int32
    counts: dict[tuple, np.ndarray] = {}

    def run_avg(x):
        (oh, ph0, ph1, ch), (ow, pw0, pw1, cw) = geometry(x.shape)
        if oh == 0 or ow == 0 or x.size == 0:
            return np.zeros((x.shape[0], oh, ow, x.shape[3]), dtype)
        y = _pool_axis(x, 1, fh, sh, oh, ph0, ph1, 0, np.add, acc_dtype)
        y = _pool_axis(y, 2, fw, sw, ow, pw0, pw1, 0, np.add, acc_dtype)
        count = counts.get(x.shape)
        if count is None:
            count = counts[x.shape] = (ch[:, None] * cw[None, :])[None, :, :, None].astype(acc_dtype)
        if is_float:
            y /= count
            if clamp:
                np.maximum(y, lo, out=y)
                np.minimum(y, hi, out=y)
            return y
        half = count // 2
        y = np.where(y > 0, (y + half) // count, -((half - y) // count))
        if clamp:
            np.maximum(y, lo, out=y)
            np.minimum(y, hi, out=y)
        return y.astype(dtype)
    return run_avg


@register("AVERAGE_POOL_2D", max_version=3, dtypes=_TYPES)
def average_pool_2d(node: NodeContext):
    return _prepare_pool(node, "avg")


@register("MAX_POOL_2D", max_version=3, dtypes=_TYPES)
def max_pool_2d(node: NodeContext):
    return _prepare_pool(node, "max")
