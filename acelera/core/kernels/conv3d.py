"""CONV_3D and CONV_3D_TRANSPOSE reference kernels (float32, NDHWC input, DHWIO / DHWOI filter).

Mirrors tflite/kernels/conv3d.cc, conv3d_transpose.cc, tflite/kernels/padding.h and
tflite/kernels/internal/reference/conv3d.h, conv3d_transpose.h.

Both kernels loop over the kd*kh*kw filter taps; each tap is one float32 matmul of a strided
block of the input with the tap's (in, out) weight matrix, added to the block of the output it
reaches. A tap only touches the output positions whose input position lies inside the volume,
so padding is skipped exactly as LiteRT skips it (nothing is multiplied by a padding zero).
A tap whose block or product would exceed core.memory.TILE_BYTES runs one box of positions
at a time (core/memory.py counts one tile).
Output sizes follow ComputeOutSize, which yields 0 (not an error) for a VALID window larger
than the input; LiteRT refuses an unknown padding. While widening (registry.widening) both
take FLOAT64 tensors and compute in float64.
"""
from __future__ import annotations

import numpy as np

from acelera.core import model as _model
from acelera.core.errors import KernelError, ModelError
from acelera.core.kernels import tiling
from acelera.core.kernels.common import SAME, VALID, float_activation_bounds
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, is_float32, register
from acelera.core.model import Tensor

_INT32 = 2


def _options(node: NodeContext) -> tuple[int, tuple[int, int, int], tuple[int, int, int], int]:
    """(padding, strides, dilations, activation); an absent options table leaves LiteRT's
    zero-initialized parameters (strides and dilations 0, which it refuses)."""
    def get(key: str) -> int:
        return int(node.options.get(key, 0) or 0)

    strides = (get("stride_d"), get("stride_h"), get("stride_w"))
    dilations = (get("dilation_d_factor"), get("dilation_h_factor"), get("dilation_w_factor"))
    return get("padding"), strides, dilations, get("fused_activation_function")


def _out_size(padding: int, size: int, filt: int, stride: int, dilation: int) -> int:
    """ComputeOutSize: 0 for invalid arguments or a negative size."""
    if padding not in (SAME, VALID) or size < 0 or filt <= 0 or stride <= 0 or dilation <= 0:
        return 0
    eff = (filt - 1) * dilation + 1
    num = size + stride - 1 if padding == SAME else size + stride - eff
    value = num // stride if num >= 0 else -((-num) // stride)
    return value if 0 <= value <= 2**31 - 1 else 0


def _pad(size: int, filt: int, stride: int, dilation: int, out: int) -> int:
    """ComputePaddingWithOffset's leading padding (0 for invalid arguments)."""
    if size < 0 or filt <= 0 or out < 0 or stride <= 0 or dilation <= 0:
        return 0
    return max((out - 1) * stride + (filt - 1) * dilation + 1 - size, 0) // 2


def _tap_range(out: int, size: int, stride: int, origin: int) -> tuple[int, int]:
    """[lo, hi) of positions p in [0, out) with 0 <= p * stride + origin < size."""
    lo = max(0, -(origin // stride)) if origin < 0 else 0
    hi = min(out, (size - 1 - origin) // stride + 1) if size - 1 - origin >= 0 else 0
    return lo, max(lo, hi)


def _check_bytes(shape, itemsize: int, what: str) -> None:
    if int(np.prod(shape, dtype=np.float64)) * itemsize > _model.MAX_TENSOR_BYTES:
        raise KernelError(f"{what} of shape {list(shape)} exceeds the tensor size limit "
                          f"({_model.MAX_TENSOR_BYTES} bytes)")


def _check_common(node: NodeContext, x_t: Tensor, w_t: Tensor, bias_t: Tensor | None, bias_size_dim: int,
                  padding: int, strides, dilations) -> None:
    out_t = node.outputs[0]
    if len(x_t.shape) != 5 or len(w_t.shape) != 5:
        raise ModelError(f"input and filter must be 5-D, got {list(x_t.shape)} and {list(w_t.shape)}")
    if not is_float32(x_t):
        raise node.unsupported(f"input type {x_t.type_name} is not supported (FLOAT32 only)")
    if w_t.type != x_t.type:
        raise node.unsupported(f"filter type {w_t.type_name} is not supported (FLOAT32 only)")
    if out_t.type != x_t.type:
        raise node.unsupported(f"output type {out_t.type_name} differs from input type {x_t.type_name}")
    if bias_t is not None:
        if bias_t.type != x_t.type:
            raise node.unsupported(f"bias type {bias_t.type_name} differs from input type {x_t.type_name}")
        n_bias = int(np.prod(bias_t.shape, dtype=np.int64))
        if n_bias != w_t.shape[bias_size_dim]:
            raise ModelError(f"bias has {n_bias} elements for {w_t.shape[bias_size_dim]} output channels")
    if padding not in (SAME, VALID):
        raise ModelError(f"unknown padding {padding}")
    if min(strides) <= 0:
        raise ModelError(f"strides must be positive, got {list(strides)}")
    if min(dilations) <= 0:
        raise ModelError(f"dilations must be positive, got {list(dilations)}")


def _finish(acc: np.ndarray, bias: np.ndarray | None, act: int) -> np.ndarray:
    if bias is not None:
        acc += bias
    lo, hi = float_activation_bounds(act)
    return np.clip(acc, np.float32(lo), np.float32(hi), out=acc)


@register("CONV_3D", max_version=1, dtypes=("FLOAT32",))
def conv_3d(node: NodeContext) -> Kernel:
    if len(node.inputs) not in (2, 3) or len(node.outputs) != 1:
        raise ModelError("CONV_3D takes 2 or 3 inputs and 1 output")
    x_t, w_t, bias_t = node.input(0), node.input(1), node.input(2)
    if x_t is None or w_t is None:
        raise ModelError("input and filter are required")
    padding, strides, dilations, act = _options(node)
    _check_common(node, x_t, w_t, bias_t, 4, padding, strides, dilations)
    if x_t.shape[4] != w_t.shape[3]:
        raise ModelError(f"input has {x_t.shape[4]} channels, filter expects {w_t.shape[3]}")
    if min(x_t.shape[1:]) <= 0 or min(w_t.shape) <= 0:
        raise ModelError(f"input {list(x_t.shape)} and filter {list(w_t.shape)} need positive sizes")
    n = x_t.shape[0]
    spatial, ksize = x_t.shape[1:4], w_t.shape[:3]
    outs = tuple(_out_size(padding, s, k, st, d) for s, k, st, d in zip(spatial, ksize, strides, dilations))
    pads = tuple(_pad(s, k, st, d, o) for s, k, st, d, o in zip(spatial, ksize, strides, dilations, outs))
    co = w_t.shape[4]
    out_shape = (n, *outs, co)
    dt = node.outputs[0].dtype
    _check_bytes(out_shape, dt.itemsize, "output")
    const_w = node.const(1)
    const_b = node.const(2) if bias_t is not None else None
    pixel_bytes = max(int(x_t.shape[4]), int(co)) * dt.itemsize  # a position's input block or product

    # For each tap: (filter index, output ranges, input start per axis).
    taps = []
    for kd in range(ksize[0]):
        for kh in range(ksize[1]):
            for kw in range(ksize[2]):
                ranges = []
                for ax, k in enumerate((kd, kh, kw)):
                    origin = k * dilations[ax] - pads[ax]
                    lo, hi = _tap_range(outs[ax], spatial[ax], strides[ax], origin)
                    ranges.append((lo, hi, lo * strides[ax] + origin))
                if all(hi > lo for lo, hi, _ in ranges):
                    taps.append(((kd, kh, kw), ranges))

    def run(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
        w = const_w if const_w is not None else w
        b = const_b if const_b is not None else b
        acc = np.zeros(out_shape, dt)
        if acc.size:
            for (kd, kh, kw), ranges in taps:
                region = (n,) + tuple(hi - lo for lo, hi, _ in ranges)
                for bn, *box in tiling.boxes(region, pixel_bytes):
                    src = tuple(slice(start + b.start * st, start + (b.stop - 1) * st + 1, st)
                                for (_, _, start), b, st in zip(ranges, box, strides))
                    dst = tuple(slice(lo + b.start, lo + b.stop) for (lo, _, _), b in zip(ranges, box))
                    acc[(bn,) + dst] += np.matmul(x[(bn,) + src], w[kd, kh, kw], dtype=dt)
        return _finish(acc, None if b is None else np.asarray(b, dt).reshape(-1), act)

    return run


@register("CONV_3D_TRANSPOSE", max_version=1, dtypes=("FLOAT32",))
def conv_3d_transpose(node: NodeContext) -> Kernel:
    if len(node.inputs) not in (3, 4) or len(node.outputs) != 1:
        raise ModelError("CONV_3D_TRANSPOSE takes 3 or 4 inputs and 1 output")
    shape_t, w_t, x_t, bias_t = node.input(0), node.input(1), node.input(2), node.input(3)
    if shape_t is None or w_t is None or x_t is None:
        raise ModelError("output_shape, filter and input are required")
    if len(shape_t.shape) != 1 or shape_t.shape[0] != 5:
        raise ModelError(f"output_shape must be a vector of 5 elements, got shape {list(shape_t.shape)}")
    if shape_t.type != _INT32:
        raise node.unsupported(f"output_shape of type {shape_t.type_name} is not supported (INT32 only)")
    padding, strides, dilations, act = _options(node)
    _check_common(node, x_t, w_t, bias_t, 3, padding, strides, dilations)
    if x_t.shape[4] != w_t.shape[4]:
        raise ModelError(f"input has {x_t.shape[4]} channels, filter expects {w_t.shape[4]}")
    n, spatial_in = x_t.shape[0], x_t.shape[1:4]
    ksize, co = w_t.shape[:3], w_t.shape[3]
    const_w = node.const(1)
    const_b = node.const(3) if bias_t is not None else None
    declared = node.outputs[0].shape
    dt = node.outputs[0].dtype
    pixel_bytes = max(int(x_t.shape[4]), int(co)) * dt.itemsize  # a position's input block or product

    def geometry(dims: np.ndarray):
        """Validate output_shape (ResizeOutputAndTemporaryTensors); (shape, leading pads)."""
        shape = tuple(int(v) for v in np.asarray(dims).reshape(-1))
        if min(shape) < 0:
            raise KernelError(f"output_shape {list(shape)} has a negative dimension")
        if shape[0] != n:
            raise KernelError(f"output_shape batch {shape[0]} differs from the input batch {n}")
        if shape[4] != co:
            raise KernelError(f"output_shape has {shape[4]} channels, the filter has {co}")
        sp = shape[1:4]
        fwd = tuple(_out_size(padding, s, k, st, d) for s, k, st, d in zip(sp, ksize, strides, dilations))
        if fwd != tuple(spatial_in):
            raise KernelError(f"output_shape {list(shape)} convolves to spatial size {list(fwd)}, "
                              f"not the input's {list(spatial_in)}")
        _check_bytes(shape, dt.itemsize, "output")
        pads = tuple(_pad(s, k, st, d, o) for s, k, st, d, o in zip(sp, ksize, strides, dilations, spatial_in))
        return shape, pads

    const_shape = node.const(0)
    const_geom = geometry(const_shape) if const_shape is not None else None

    def run(dims: np.ndarray, w: np.ndarray, x: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
        if const_geom is not None:
            shape, pads = const_geom
        else:
            try:
                shape, pads = geometry(dims)
            except KernelError:
                if in_shape_pass():  # placeholder zeros: keep the declared shape until invoke
                    return np.zeros(declared, dt)
                raise
        w = const_w if const_w is not None else w
        b = const_b if const_b is not None else b
        acc = np.zeros(shape, dt)
        sp = shape[1:4]
        if acc.size and x.size:
            wt = np.swapaxes(w, 3, 4)  # (kd, kh, kw, ci, co)
            for kd in range(ksize[0]):
                for kh in range(ksize[1]):
                    for kw in range(ksize[2]):
                        src, dst = [], []
                        for ax, k in enumerate((kd, kh, kw)):
                            origin = k * dilations[ax] - pads[ax]
                            lo, hi = _tap_range(spatial_in[ax], sp[ax], strides[ax], origin)
                            src.append(slice(lo, hi))
                            start = lo * strides[ax] + origin
                            dst.append(slice(start, start + (hi - lo - 1) * strides[ax] + 1, strides[ax]))
                        if any(s.stop <= s.start for s in src):
                            continue
                        region = (x.shape[0],) + tuple(s.stop - s.start for s in src)
                        for bn, *box in tiling.boxes(region, pixel_bytes):
                            s2 = tuple(slice(s.start + b.start, s.start + b.stop) for s, b in zip(src, box))
                            d2 = tuple(slice(d.start + b.start * st, d.start + (b.stop - 1) * st + 1, st)
                                       for d, b, st in zip(dst, box, strides))
                            acc[(bn,) + d2] += np.matmul(x[(bn,) + s2], wt[kd, kh, kw], dtype=dt)
        return _finish(acc, None if b is None else np.asarray(b, dt).reshape(-1), act)

    return run
