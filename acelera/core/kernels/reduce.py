"""Reductions: MEAN, SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_ANY, REDUCE_ALL
(tflite/kernels/reduce.cc).

Semantics follow LiteRT's reference kernels (BUILTIN_REF):
- the axis tensor must be int32; negative axes wrap, duplicates are ignored, and a rank-0
  input reduces to a scalar whatever the axes;
- quantized MEAN/SUM (int8, uint8, int16) use reference_ops::QuantizedMeanOrSum: an int32
  sum, minus zero_point * count, rescaled by QuantizeMultiplier(in_scale / out_scale) whose
  multiplier is divided by the element count (with TFLite's shift clamping) for MEAN;
- quantized REDUCE_MAX/MIN need equal input and output quantization (raw values compare);
- quantized REDUCE_PROD (int8, int16) rescales each partial product by
  input_scale / output_scale ** (1 / n), in the order the reference kernel visits elements;
- float REDUCE_MAX/MIN start from the lowest/highest finite float (so -inf/+inf and NaN
  inputs give LiteRT's answers), integer MEAN truncates toward zero.
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.common import scale_zp
from acelera.core.kernels.float_formats import ALIASED_TYPES
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.quant import multiply_by_quantized_multiplier_scalar_inplace as mbqm_inplace
from acelera.core.quant import quantize_multiplier, wrap_int32, wrap_int32_inplace

# LiteRT's reference SUM kernel (QuantizedMeanOrSum<T, kReference> in reduce.cc) reads the
# input and writes the output through uint8_t pointers whatever the tensor type. For int8 this
# is deterministic: the int8 bit patterns are summed as uint8 values (zero points unchanged) and
# the result is clamped to [0, 255] and stored as a byte. BUILTIN_REF bit-exactness requires
# reproducing it. (For int16 the reference reads half the input bytes and leaves half the
# output bytes uninitialized, which cannot be reproduced; int16 SUM uses the correct integer
# path, which the optimized kernels match to within rounding.)
# acelera computes the correct sum instead (a reference that copies a bug is not a reference);
# tests compare int8/int16 SUM with LiteRT's optimized kernel, which is correct.
EMULATE_REF_INT8_SUM = False

_QUANT_TYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))
# Input types of LiteRT's reduce.cc: MEAN's type switch; EvalGeneric (SUM, REDUCE_PROD/MAX/MIN) adds BOOL.
_MEAN_TYPES = ("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16")
_REDUCE_TYPES = _MEAN_TYPES + ("BOOL",)


def _reduced_multiplier(multiplier: int, shift: int) -> tuple[int, int]:
    """The int64 MultiplyByQuantizedMultiplier's 16-bit multiplier and total right shift."""
    return ((multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF), 15 - shift


def _mbqm64(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier(int64 x, ...) for a scalar multiplier, narrowed to int32
    without saturation (as quant.multiply_by_quantized_multiplier_int64)."""
    reduced, total = _reduced_multiplier(multiplier, shift)
    return wrap_int32((x * reduced + (1 << (total - 1))) >> total)


class _Axes:
    """Resolves the axis tensor against an input shape (cached per shape and axis values)."""

    def __init__(self, node: NodeContext):
        self.node = node
        self.keep_dims = bool(node.options.get("keep_dims", False))
        self._key: tuple[tuple[int, ...], bytes] | None = None
        self._val: tuple[tuple[int, ...], tuple[int, ...], int] | None = None

    def resolve(self, shape: tuple[int, ...], axis: np.ndarray):
        axis = np.asarray(axis)
        key = (shape, axis.tobytes())
        if key == self._key:
            return self._val
        ndim = len(shape)
        resolved: list[int] = []
        if ndim:
            for a in axis.reshape(-1).tolist():
                a = int(a)
                cur = a + ndim if a < 0 else a
                if not 0 <= cur < ndim:
                    raise self.node.unsupported(f"axis {a} is out of range for an input of rank {ndim}")
                if cur not in resolved:
                    resolved.append(cur)
        if self.keep_dims:
            out_shape = tuple(1 if i in resolved else d for i, d in enumerate(shape))
        else:
            out_shape = tuple(d for i, d in enumerate(shape) if i not in resolved)
        count = 1
        for i in resolved:
            count *= shape[i]
        self._key = key
        self._val = (tuple(resolved), out_shape, count)
        return self._val


def _common(node: NodeContext) -> tuple[np.dtype, _Axes]:
    x, axis = node.input(0), node.input(1)
    if x is None or axis is None:
        raise node.unsupported("expects an input and an axis tensor")
    if axis.dtype != np.int32:
        raise node.unsupported(f"axis type {axis.type_name} is not supported (LiteRT requires INT32)")
    out = node.outputs[0]
    if out.type != x.type:
        raise node.unsupported(f"output type {out.type_name} differs from input type {x.type_name}")
    if x.type_name in ALIASED_TYPES:
        raise node.unsupported(f"input type {x.type_name} is not supported")
    axes = _Axes(node)
    if axis.data is not None:  # constant: validate the axes at prepare time
        axes.resolve(tuple(x.shape), axis.data)
    return x.dtype, axes


def _qparams(node: NodeContext):
    x, out = node.input(0), node.outputs[0]
    assert x is not None  # the caller's _common refused a missing input
    if not (x.quantized and out.quantized):
        raise node.unsupported(f"{x.type_name} input needs quantization parameters on input and output")
    if x.quantization.per_channel or out.quantization.per_channel:
        raise node.unsupported("per-channel quantization is not supported")
    s_in, zp_in = float(x.quantization.scale[0]), int(x.quantization.zero_point[0])
    s_out, zp_out = float(out.quantization.scale[0]), int(out.quantization.zero_point[0])
    if x.dtype == np.int16 and (zp_in != 0 or zp_out != 0):
        raise node.unsupported("int16 input and output need zero_point 0")
    return s_in, zp_in, s_out, zp_out


# --- MEAN / SUM ---------------------------------------------------------------------------
def _quantized_mean_or_sum(node: NodeContext, compute_sum: bool):
    dtype, axes = _common(node)
    s_in, zp_in, s_out, zp_out = _qparams(node)
    if s_out == 0.0:
        raise node.unsupported("output scale is 0")
    base_mult, base_shift = quantize_multiplier(s_in / s_out)
    cache: dict[int, tuple[int, int]] = {}
    # See EMULATE_REF_INT8_SUM: int8 SUM reinterprets the data as uint8 like LiteRT's reference.
    as_uint8 = compute_sum and dtype == np.int8 and EMULATE_REF_INT8_SUM
    info = np.iinfo(np.uint8 if as_uint8 else dtype)
    qmin, qmax = int(info.min), int(info.max)

    def multiplier(n: int) -> tuple[int, int]:
        if compute_sum:
            return base_mult, base_shift
        if n not in cache:
            shift = n.bit_length() - 1  # 63 - CountLeadingZeros(n)
            shift = min(shift, 32, 31 + base_shift)
            cache[n] = (int((base_mult << shift) // n), base_shift - shift)
        return cache[n]

    def finish(s: np.ndarray, n: int) -> np.ndarray:
        if n * (65536 + abs(zp_in)) >= 1 << 31:  # the int32 sums can wrap
            s = wrap_int32(wrap_int32(s) - np.int64(zp_in) * n)
        elif zp_in:
            s -= zp_in * n
        m, sh = multiplier(n)
        q = mbqm_inplace(s, m, sh)
        q += zp_out
        clip_ufunc(q, qmin, qmax, out=q)
        return q.astype(np.uint8).view(np.int8) if as_uint8 else q.astype(dtype)

    # 8-bit data over at most 256 elements: every possible sum's result, tabulated per count.
    tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    tabulate = np.dtype(dtype).itemsize == 1

    def table(n: int) -> tuple[np.ndarray, np.ndarray]:
        t = tables.get(n)
        if t is None:
            if len(tables) >= 16:
                tables.clear()
            t = tables[n] = (np.asarray(np.intp(n * qmin)), finish(np.arange(n * qmin, n * qmax + 1, dtype=np.int64), n))
        return t

    def run(x, axis):
        red, out_shape, n = axes.resolve(x.shape, axis)
        if x.size == 0:
            return np.zeros(out_shape, dtype)
        if as_uint8:
            x = x.view(np.uint8)
        if tabulate and n <= 256:
            low, values = table(n)
            s = np.add.reduce(x, axis=red, dtype=np.intp)
            s -= low
            return np.asarray(values.take(s)).reshape(out_shape)
        return finish(np.asarray(np.add.reduce(x, axis=red, dtype=np.int64)).reshape(out_shape), n)

    return run


@register("MEAN", max_version=3, dtypes=_MEAN_TYPES)
def mean(node: NodeContext):
    x = node.input(0)
    if x is not None and x.dtype in _QUANT_TYPES:
        return _quantized_mean_or_sum(node, compute_sum=False)
    dtype, axes = _common(node)
    assert x is not None  # _common refused a missing input
    if dtype == np.float32:
        counts: dict[int, np.ndarray] = {}
        ndarray = np.ndarray

        def run(x, axis):
            red, out_shape, n = axes.resolve(x.shape, axis)
            if x.size == 0:
                return np.full(out_shape, np.nan, np.float32)
            s = np.add.reduce(x, axis=red, dtype=np.float32)  # np.sum without its wrapper
            if s.__class__ is not ndarray or s.dtype != np.float32:
                return np.asarray(np.asarray(s) / np.float32(n), np.float32).reshape(out_shape)
            d = counts.get(n)
            if d is None:
                if len(counts) >= 16:
                    counts.clear()
                d = counts[n] = np.asarray(np.float32(n))
            return np.divide(s, d, out=s).reshape(out_shape)
        return run
    if dtype in (np.int32, np.int64):
        def run(x, axis):
            red, out_shape, n = axes.resolve(x.shape, axis)
            if x.size == 0:
                return np.zeros(out_shape, dtype)
            s = np.asarray(np.add.reduce(x, axis=red, dtype=np.int64))  # int64 sum wraps
            q = np.abs(s) // n  # C++ division truncates toward zero
            return np.asarray(np.where(s < 0, -q, q), dtype).reshape(out_shape)
        return run
    raise node.unsupported(f"input type {x.type_name} is not supported")


@register("SUM", max_version=2, dtypes=_REDUCE_TYPES)
def reduce_sum(node: NodeContext):
    x = node.input(0)
    if x is not None and x.dtype in _QUANT_TYPES:
        return _quantized_mean_or_sum(node, compute_sum=True)
    dtype, axes = _common(node)
    assert x is not None  # _common refused a missing input
    if dtype == np.bool_:
        return _generic(axes, lambda x, red: np.logical_or.reduce(x, axis=red))
    if dtype in (np.float32, np.int32, np.int64):
        return _generic(axes, lambda x, red: np.add.reduce(x, axis=red, dtype=dtype))
    raise node.unsupported(f"input type {x.type_name} is not supported")


def _generic(axes: _Axes, fn):
    def run(x, axis):
        red, out_shape, _ = axes.resolve(x.shape, axis)
        return np.asarray(fn(x, red), x.dtype).reshape(out_shape)
    return run


# --- REDUCE_MAX / REDUCE_MIN --------------------------------------------------------------
def _max_min(node: NodeContext, is_max: bool):
    dtype, axes = _common(node)
    x = node.input(0)
    assert x is not None  # _common refused a missing input
    if dtype == np.bool_:
        return _generic(axes, (lambda x, red: np.logical_or.reduce(x, axis=red)) if is_max
                        else (lambda x, red: np.logical_and.reduce(x, axis=red)))
    if dtype in _QUANT_TYPES:
        out = node.outputs[0]
        (s_in, z_in), (s_out, z_out) = scale_zp(x), scale_zp(out)
        if np.float32(s_in) != np.float32(s_out) or z_in != z_out:
            raise node.unsupported("input and output quantization must be equal")
        if dtype == np.int16 and z_in != 0:
            raise node.unsupported("int16 input needs zero_point 0")
    elif dtype not in (np.float32, np.int32, np.int64):
        raise node.unsupported(f"input type {x.type_name} is not supported")

    if dtype == np.float32:
        init = np.float32(np.finfo(np.float32).min if is_max else np.finfo(np.float32).max)
        uf = np.fmax if is_max else np.fmin

        def run(x, axis):
            red, out_shape, _ = axes.resolve(x.shape, axis)
            if len(red) == x.ndim and x.size:
                # ReduceAllDims starts from the first element, not the init value.
                flat = x.reshape(-1)
                if np.isnan(flat[0]):
                    return np.full(out_shape, np.nan, np.float32)
                return np.asarray(uf.reduce(flat), np.float32).reshape(out_shape)
            r = uf.reduce(x, axis=red, initial=init) if red else uf(x, init)
            return np.asarray(r, np.float32).reshape(out_shape)
        return run

    info = np.iinfo(dtype)
    int_init = info.min if is_max else info.max
    red_fn = np.maximum.reduce if is_max else np.minimum.reduce
    return _generic(axes, lambda x, red: red_fn(x, axis=red, initial=int_init))


@register("REDUCE_MAX", max_version=3, dtypes=_REDUCE_TYPES)
def reduce_max(node: NodeContext):
    return _max_min(node, True)


@register("REDUCE_MIN", max_version=3, dtypes=_REDUCE_TYPES)
def reduce_min(node: NodeContext):
    return _max_min(node, False)


# --- REDUCE_PROD --------------------------------------------------------------------------
@register("REDUCE_PROD", max_version=2, dtypes=_REDUCE_TYPES)
def reduce_prod(node: NodeContext):
    dtype, axes = _common(node)
    x = node.input(0)
    assert x is not None  # _common refused a missing input
    if x.quantized:
        if dtype not in (np.int8, np.int16):
            raise node.unsupported(f"quantized {x.type_name} input is not supported")
        return _quantized_prod(node, dtype, axes)
    if dtype == np.bool_:
        return _generic(axes, lambda x, red: np.logical_and.reduce(x, axis=red))
    if dtype in (np.float32, np.int32, np.int64, np.int8, np.int16, np.uint8):
        # Integer products wrap like the reference kernel's modular multiplication.
        return _generic(axes, lambda x, red: np.multiply.reduce(x, axis=red, dtype=dtype))
    raise node.unsupported(f"input type {x.type_name} is not supported")


def _quantized_prod(node: NodeContext, dtype, axes: _Axes):
    s_in, zp_in, s_out, zp_out = _qparams(node)
    info = np.iinfo(dtype)
    cache: dict[int, tuple[int, int]] = {}

    def scaling(n: int) -> tuple[int, int]:
        if n not in cache:
            cache[n] = quantize_multiplier(s_in / math.pow(s_out, 1.0 / n))
        return cache[n]

    lo, hi = int(info.min), int(info.max)

    # (v - zp_in) * reduced multiplier by input value v (a negative v indexes from the end)
    steps: dict[int, list[int]] = {}
    bits = 8 * np.dtype(dtype).itemsize

    def prod_small(rows: list, m: int, sh: int) -> list:
        """The run below in Python ints, row by row (tiny inputs: fewer numpy calls)."""
        reduced, total = _reduced_multiplier(m, sh)
        half = 1 << (total - 1)
        step = steps.get(reduced)
        if step is None:
            if len(steps) >= 16:
                steps.clear()
            values = (*range(1 << (bits - 1)), *range(-(1 << (bits - 1)), 0))
            step = steps[reduced] = [(v - zp_in) * reduced for v in values]
        res = []
        for row in rows:
            acc = row[0] - zp_in
            for v in row[1:]:
                acc = ((((acc * step[v] + half) >> total) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            q = ((((acc * reduced + half) >> total) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31) + zp_out
            res.append(lo if q < lo else hi if q > hi else q)
        return res

    def run(x, axis):
        red, out_shape, _ = axes.resolve(x.shape, axis)
        if x.size == 0:
            return np.zeros(out_shape, dtype)
        in_size, out_size = x.size, math.prod(out_shape)
        m, sh = scaling(in_size // out_size)
        kept = [i for i in range(x.ndim) if i not in red]
        # Visit reduced elements in row-major order of the input, as the reference does.
        red_sorted = sorted(red)
        order = kept + red_sorted
        xt = x if order == list(range(x.ndim)) else np.transpose(x, order)
        if bits == 8 and in_size <= 512 and 15 - sh >= 1:
            rows = xt.reshape(out_size, -1).tolist()
            return np.array(prod_small(rows, m, sh), dtype).reshape(out_shape)
        xt = xt.reshape(out_size, -1).astype(np.int64)
        xt -= zp_in
        acc = xt[:, 0].copy()
        if xt.shape[1] > 1:
            # _mbqm64(acc * v) in place, with v * reduced multiplier for every step at once
            # (|acc * v * reduced| < 2**62: int32 x 16-bit x 15-bit).
            reduced, total = _reduced_multiplier(m, sh)
            steps = xt[:, 1:] * reduced
            for j in range(steps.shape[1]):
                acc *= steps[:, j]
                acc += 1 << (total - 1)
                acc >>= total
                wrap_int32_inplace(acc)
        q = _mbqm64(acc, m, sh) + zp_out
        return clip_ufunc(q, info.min, info.max, out=q).astype(dtype).reshape(out_shape)

    return run


# --- REDUCE_ANY / REDUCE_ALL --------------------------------------------------------------
def _any_all(node: NodeContext, is_any: bool):
    x = node.input(0)
    if x is not None and x.type_name != "BOOL":
        raise node.unsupported(f"input type {x.type_name} is not supported (LiteRT requires BOOL)")
    _, axes = _common(node)
    return _generic(axes, (lambda x, red: np.logical_or.reduce(x, axis=red)) if is_any
                    else (lambda x, red: np.logical_and.reduce(x, axis=red)))


@register("REDUCE_ANY", max_version=1, dtypes=("BOOL",))
def reduce_any(node: NodeContext):
    return _any_all(node, True)


@register("REDUCE_ALL", max_version=1, dtypes=("BOOL",))
def reduce_all(node: NodeContext):
    return _any_all(node, False)
