"""CAST, ARG_MAX and ARG_MIN reference kernels (tflite/kernels/cast.cc, arg_min_max.cc).

CAST follows LiteRT's CastValue rules: floating -> integer conversions saturate (NaN becomes
the integer maximum) after truncation toward zero, integer -> integer conversions wrap,
anything -> bool is `!= 0`, complex64 sources use their real part, float16/bfloat16
destinations are reached through float32 (round to nearest even). The packed types INT4, INT2
and UINT4 (held unpacked) only convert to float32 or FLOAT8 and from float32 or FLOAT8: clamped
to the type's range ([-8, 7], [-2, 1], [0, 15]) then truncated, NaN -> the maximum (LiteRT's
castFloatToInt4/Int2/Uint4: min(max, x) keeps max for NaN). FLOAT8_E4M3FN and
FLOAT8_E5M2 (LiteRT's TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS build) go through float32 both
ways: a FLOAT8 source is widened exactly, a FLOAT8 destination is reached by static_cast<float>
and ml_dtypes' rounding (see float_formats); the same FLOAT8 type is copied bit for bit.
Quantization parameters are ignored, as LiteRT does.

ARG_MAX / ARG_MIN return the first index of the extreme value. NaN handling matches the
x86 build of LiteRT: the reference comparator ignores NaN (all-NaN -> 0), and when the
reduced axis is innermost LiteRT's NEON-via-SSE float path is emulated (only taken when the
data contains NaN; otherwise every path agrees with the plain first-extreme rule).
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core.errors import KernelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.float_formats import bf16_to_f32, f8_to_f32, f32_to_bf16, f32_to_f8, f32_to_f16
from acelera.core.kernels.registry import NodeContext, register

_FLOAT32, _FLOAT16, _INT32, _UINT8, _INT64, _BOOL, _INT16 = 0, 1, 2, 3, 4, 6, 7
_COMPLEX64, _INT8, _FLOAT64, _UINT32, _UINT16, _INT4, _BFLOAT16 = 8, 9, 10, 15, 16, 17, 18
_INT2, _UINT4, _F8E4M3FN, _F8E5M2 = 19, 20, 21, 22
_FLOAT8 = {_F8E4M3FN: "FLOAT8_E4M3FN", _F8E5M2: "FLOAT8_E5M2"}

# the packed types: the numpy dtype their values are held in and their range
_PACKED = {_INT4: (np.int8, -8, 7), _INT2: (np.int8, -2, 1), _UINT4: (np.uint8, 0, 15)}
_CAST_IN = {_INT64, _INT32, _UINT32, _UINT16, _INT16, _UINT8, _INT8, _FLOAT16, _BFLOAT16,
            _FLOAT32, _FLOAT64, _BOOL, _COMPLEX64, *_PACKED, *_FLOAT8}
_CAST_OUT = {_INT64, _INT32, _UINT32, _INT16, _UINT16, _UINT8, _INT8, _FLOAT16, _BFLOAT16,
             _FLOAT32, _FLOAT64, _BOOL, _COMPLEX64, *_PACKED, *_FLOAT8}
_INT_TYPES = {_INT64, _INT32, _UINT32, _INT16, _UINT16, _UINT8, _INT8}
_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL",
          7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 15: "UINT32", 16: "UINT16",
          17: "INT4", 18: "BFLOAT16", 19: "INT2", 20: "UINT4", **_FLOAT8}
_NP = {_INT64: np.int64, _INT32: np.int32, _UINT32: np.uint32, _INT16: np.int16,
       _UINT16: np.uint16, _UINT8: np.uint8, _INT8: np.int8}


def _saturate_float(x: np.ndarray, dtype) -> np.ndarray:
    """SafeCast<Int>(float): NaN -> max, below min -> min, >= 2^bits -> max, else truncate
    toward zero (which is what numpy's float -> int conversion does in range)."""
    info = np.iinfo(dtype)
    lo, hi_excl = float(info.min), float(info.max // 2 + 1) * 2.0
    if x.size == 0:
        return x.astype(dtype)
    mn, mx = float(x.min()), float(x.max())  # NaN anywhere makes both NaN
    if lo <= mn and mx < hi_excl:
        return x.astype(dtype)
    xd = np.asarray(x, np.float64)
    if info.bits <= 32:  # the bounds are exact float64 values
        with np.errstate(invalid="ignore"):
            xd = np.where(np.isnan(xd), float(info.max), np.clip(xd, lo, float(info.max)))
        return xd.astype(dtype)
    nan = np.isnan(xd)
    big = (xd >= hi_excl) | nan
    small = xd < lo
    res = np.where(big | small, 0.0, xd).astype(dtype)
    res[big] = info.max
    res[small] = info.min
    return res


def cast_values(x: np.ndarray, src: int, dst: int) -> np.ndarray:
    """Convert array `x` holding TFLite type `src` into TFLite type `dst` (acelera's numpy
    representation: bfloat16 as uint16 bits, int4/int2 as unpacked int8, uint4 as uint8)."""
    if src == dst:
        return x.copy()
    # Bring every source to a value array numpy can convert: bf16 and float8 -> float32,
    # complex -> its real part, int4/int2/uint4 -> their values (already unpacked).
    if src == _BFLOAT16:
        x = bf16_to_f32(x)
    elif src in _FLOAT8:
        x = f8_to_f32(x, _FLOAT8[src])
    elif src == _COMPLEX64:
        x = np.real(x).astype(np.float32)
    floating = x.dtype.kind == "f"
    if dst == _BOOL:
        return x != 0
    if dst in _INT_TYPES:
        if floating:
            return _saturate_float(x, _NP[dst])
        return x.astype(_NP[dst])  # integer/bool: C++ conversion wraps
    if dst == _FLOAT32:
        return x.astype(np.float32)
    if dst == _FLOAT64:
        return x.astype(np.float64)
    if dst == _FLOAT16:
        return f32_to_f16(x.astype(np.float32))  # static_cast<float> first
    if dst == _BFLOAT16:
        return f32_to_bf16(x.astype(np.float32))
    if dst in _FLOAT8:
        return f32_to_f8(x.astype(np.float32), _FLOAT8[dst])
    if dst == _COMPLEX64:
        return x.astype(np.float32).astype(np.complex64)
    if dst in _PACKED:  # castFloatToInt4/Int2/Uint4: min(hi, x) then max(lo, .), NaN -> hi
        dtype, lo, hi = _PACKED[dst]
        y = np.where(np.isnan(x), np.float32(hi), np.clip(x, lo, hi))
        return np.trunc(y).astype(dtype)
    raise ValueError(f"cast to {_NAMES.get(dst, dst)}")


@register("CAST", max_version=9, dtypes=tuple(sorted(_NAMES[t] for t in _CAST_IN)))
def cast(node: NodeContext):
    x_t, out_t = node.input(0), node.outputs[0]
    if x_t is None:
        raise node.unsupported("input 0 is missing")
    src, dst = x_t.type, out_t.type
    if src not in _CAST_IN:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    if dst not in _CAST_OUT:
        raise node.unsupported(f"output type {out_t.type_name} is not supported")
    if src in _PACKED and dst != _FLOAT32 and dst not in _FLOAT8:
        raise node.unsupported(f"{x_t.type_name} can only be cast to FLOAT32 or FLOAT8, not {out_t.type_name}")
    if dst in _PACKED and src != _FLOAT32 and src not in _FLOAT8:
        raise node.unsupported(f"only FLOAT32 or FLOAT8 can be cast to {out_t.type_name}, not {x_t.type_name}")
    out_dtype = out_t.dtype

    def run(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            y = cast_values(x, src, dst)
        return np.asarray(y, out_dtype)  # 0-d results of numpy ops can be scalars

    return run


# --- ARG_MAX / ARG_MIN ----------------------------------------------------------------------

def _nan_aware_extreme(x: np.ndarray, is_max: bool) -> np.ndarray:
    """reference_ops::ArgMinMax with the NaN-aware float comparator, reducing axis 1 of a
    (outer, axis, inner) array: first index of the extreme non-NaN value, 0 if all NaN."""
    red = np.fmax.reduce if is_max else np.fmin.reduce
    best = red(x, axis=1, keepdims=True)  # ignores NaN; NaN only if the whole slice is NaN
    return np.argmax(x == best, axis=1)


def _sse_last_axis(x: np.ndarray, is_max: bool) -> np.ndarray:
    """optimized_ops::ArgMinMaxLastAxis for float32 on x86 (NEON_2_SSE), rows of a 2-D array
    with at least 4 columns: 4 lanes with a NaN-aware update, a vpmax/vpmin_f32 pairwise
    reduction (a NaN in the first operand of a pair wins), then a NaN-aware leftover loop."""
    rows, size = x.shape
    better = np.greater if is_max else np.less
    val = x[:, :4].copy()
    idx = np.broadcast_to(np.arange(4), (rows, 4)).copy()
    i = 4
    while i <= size - 4:
        v = x[:, i:i + 4]
        m = ~np.isnan(v) & (np.isnan(val) | better(v, val))
        val = np.where(m, v, val)
        idx = np.where(m, np.arange(i, i + 4), idx)
        i += 4

    def pair(a, b):  # NEON_2_SSE vpmax_f32: a < b ? b : a;  vpmin_f32: a > b ? b : a
        with np.errstate(invalid="ignore"):
            return np.where(better(b, a), b, a)

    p0, p1 = pair(val[:, 0], val[:, 1]), pair(val[:, 2], val[:, 3])
    best = pair(p0, p1)
    lane_ok = val == best[:, None]
    best_idx = np.where(lane_ok, idx, np.iinfo(np.int32).max).min(axis=1)
    for j in range(i, size):  # leftover (< 4 columns)
        v = x[:, j]
        m = ~np.isnan(v) & (np.isnan(best) | better(v, best))
        best = np.where(m, v, best)
        best_idx = np.where(m, j, best_idx)
    return np.where(np.isnan(best), 0, best_idx)


_ARG_TYPES = ("FLOAT32", "UINT8", "INT8", "INT32", "BOOL")
_any_true = np.logical_or.reduce


def _arg_min_max(node: NodeContext, is_max: bool):
    check_arity(node, 2, 1)
    x_t, axis_t = node.input(0), node.input(1)
    assert x_t is not None and axis_t is not None  # check_arity refused missing inputs
    out_t = node.outputs[0]
    if x_t.type_name not in _ARG_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    if axis_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"axis of type {axis_t.type_name} is not supported")
    if int(np.prod(axis_t.shape, dtype=np.int64)) != 1:
        raise node.unsupported(f"axis must have one element, got shape {list(axis_t.shape)}")
    out_type = node.options.get("output_type", out_t.type)
    if out_type not in (_INT32, _INT64):
        raise node.unsupported(f"output_type {_NAMES.get(out_type, out_type)} is not supported")
    if out_type != out_t.type:
        raise node.unsupported(f"output_type {_NAMES[out_type]} differs from the output tensor's "
                               f"type {out_t.type_name}")
    rank = len(x_t.shape)
    if rank < 1:
        raise node.unsupported("input must have rank >= 1")
    out_dtype = out_t.dtype
    is_float = x_t.type == _FLOAT32

    layouts: dict[tuple, tuple] = {}

    def layout(shape: tuple, axis_arr: np.ndarray) -> tuple:
        """(axis, output shape, the input as (outer, axis, inner), whether it is empty)."""
        axis = int(axis_arr.reshape(-1)[0])
        if axis < 0:
            axis += len(shape)
        if not 0 <= axis < len(shape):
            raise KernelError(f"axis {int(axis_arr.reshape(-1)[0])} is out of range for rank {len(shape)}")
        if shape[axis] == 0:
            raise KernelError("Cannot compute ArgMin/ArgMax over an empty axis.")
        outer = math.prod(shape[:axis])
        inner = math.prod(shape[axis + 1:])
        if len(layouts) >= 16:
            layouts.clear()
        lay = layouts[(shape, axis_arr.tobytes())] = (axis, shape[:axis] + shape[axis + 1:],
                                                      (outer, shape[axis], inner), outer * inner == 0)
        return lay

    def run(x: np.ndarray, axis_arr: np.ndarray) -> np.ndarray:
        lay = layouts.get((x.shape, axis_arr.tobytes()))
        axis, out_shape, shape3, empty = lay if lay is not None else layout(x.shape, axis_arr)
        if empty:
            return np.zeros(out_shape, out_dtype)
        x3 = x.reshape(shape3)
        if is_float and _any_true(np.isnan(x), axis=None):
            if shape3[2] == 1 and shape3[1] >= 4:
                res = _sse_last_axis(x3[:, :, 0], is_max)
            else:
                res = _nan_aware_extreme(x3, is_max)
        else:
            res = x3.argmax(axis=1) if is_max else x3.argmin(axis=1)
        return res.astype(out_dtype).reshape(out_shape)

    return run


@register("ARG_MAX", max_version=3, dtypes=_ARG_TYPES)
def arg_max(node: NodeContext):
    return _arg_min_max(node, True)


@register("ARG_MIN", max_version=3, dtypes=_ARG_TYPES)
def arg_min(node: NodeContext):
    return _arg_min_max(node, False)
