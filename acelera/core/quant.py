"""TFLite fixed-point helpers, vectorized over numpy arrays.

These mirror tflite/kernels/internal/common.h and quantization_util.cc (the default,
double-rounding build that the ai-edge-litert wheel ships) so quantized kernels can be
bit-exact with LiteRT. The fixed-point functions accept scalars or arrays (the `_inplace` ones
an int64 array they overwrite) and compute in int64.
"""
from __future__ import annotations

import math
from typing import overload

import numpy as np

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def quantize_multiplier(real: float) -> tuple[int, int]:
    """A real multiplier as (int32 quantized multiplier, shift), TFLite's QuantizeMultiplier."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = _round_away(q * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift, q_fixed = 0, 0
    return int(q_fixed), int(shift)


def quantize_multipliers(reals) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel version of quantize_multiplier: arrays of multipliers and shifts."""
    pairs = [quantize_multiplier(float(r)) for r in np.asarray(reals, np.float64).reshape(-1)]
    return (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))


def _round_away(x: float) -> int:
    """std::round: halves away from zero (exact: compares the fraction, never adds 0.5)."""
    a = abs(x)
    f = math.floor(a)
    r = f + (1 if a - f >= 0.5 else 0)
    return r if x >= 0 else -r


_BELOW_HALF = {np.float32: np.nextafter(np.float32(0.5), np.float32(0)),
               np.float64: np.nextafter(np.float64(0.5), np.float64(0))}


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Vectorized std::round (TfLiteRound) on float arrays, in the input's float precision.

    `floor(|x| + 0.5)` is wrong when |x| + 0.5 rounds up (x = 0.49999997f gives 1, std::round
    gives 0). For float32/float64, trunc(x +- the largest float below one half) is exact for
    every input: a true half still reaches the next integer (ties-to-even lands on it), anything
    below a half stays below. Other dtypes compare the fraction |x| - floor(|x|), also exact.
    """
    x = np.asarray(x)
    half = _BELOW_HALF.get(x.dtype.type)
    if half is None:
        a = np.abs(x)
        f = np.floor(a)
        with np.errstate(invalid="ignore"):  # inf - inf for infinite x: the result is still inf
            return np.copysign(f + (a - f >= 0.5), x)
    r = np.copysign(half, x)
    r += x
    return np.trunc(r, out=r) if isinstance(r, np.ndarray) else np.trunc(r)


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray | np.int64:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values held in int64.

    gemmlowp's trunc((a*b + nudge) / 2**31), nudge = 2**30 or 1 - 2**30 by sign, is
    floor((a*b + 2**30) / 2**31) in both cases; its one overflow (a = b = INT32_MIN) is the only
    product that lands above INT32_MAX, so the saturation is a minimum.
    """
    r = np.multiply(a, b, dtype=np.int64)
    if r.__class__ is not np.ndarray:  # scalar operands
        return np.int64(min((int(r) + (1 << 30)) >> 31, INT32_MAX))
    r += 1 << 30
    r >>= 31
    return np.minimum(r, INT32_MAX, out=r)


def _is_scalar(v) -> bool:
    """A Python or numpy integer, or a 0-d array (np.ndim costs microseconds)."""
    return v.__class__ is int or isinstance(v, np.integer) or (isinstance(v, np.ndarray) and v.ndim == 0)


def _one_value(v, acc) -> bool:
    """v is a scalar, or an array of one element that broadcasting against `acc` leaves out."""
    if v.__class__ is np.ndarray:
        return v.size == 1 and v.ndim <= np.ndim(acc)
    return _is_scalar(v)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: divide by 2**exponent (0..62) rounding half away from zero.

    x >> e plus one where the remainder exceeds half (or equals it for x >= 0) is
    floor((x + 2**(e-1) - [x < 0]) / 2**e), and floor((2x + 2**e - [x < 0]) / 2**(e+1)) for
    every e >= 0 (both are exact on int32 values held in int64).
    """
    x = np.asarray(x, np.int64)
    if _is_scalar(exponent):
        e = int(exponent)
        if e <= 0:
            return x + 0 if e == 0 else _rdbpot_steps(x, np.int64(e))
        r = x >> 63
        r += x
        r += 1 << (e - 1)
        r >>= e
        return r
    es = np.asarray(exponent, np.int64)
    if es.size and es.min() < 0:
        return _rdbpot_steps(x, es)
    r = x << 1
    r += np.left_shift(1, es, dtype=np.int64)
    r += x >> 63
    r >>= es + 1
    return r


def _rdbpot_steps(x: np.ndarray, exponent) -> np.ndarray:
    """RoundingDivideByPOT step by step (gemmlowp's mask and threshold), for any exponent."""
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def _multiply_by_quantized_multiplier_steps(x, multiplier, shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplier step by step (SRDHM, then RoundingDivideByPOT)."""
    x = np.asarray(x, np.int64)
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = wrap_int32(x << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier for int32 x (double-rounding variant); x outside
    the int32 range is first wrapped like the C++ int32 argument."""
    out = wrap_int32_inplace(np.array(x, np.int64))  # a copy the in-place version overwrites
    res = multiply_by_quantized_multiplier_inplace(out, multiplier, shift)
    return res if res.ndim else res[()]


def multiply_by_quantized_multiplier_inplace(acc: np.ndarray, multiplier, shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplier computed in place in `acc`, an int64 array the caller
    owns holding int32-range values (not checked: wrap them first if they may overflow, as
    the C++ int32 accumulators do); `multiplier`/`shift` broadcast against it. Returns the array
    (broadcasting may enlarge it only when acc is smaller than the parameters).

    Bit-exact with the two gemmlowp steps (see `_multiply_by_quantized_multiplier_steps`) in a
    few in-place numpy passes: for int32 a, m (not both INT32_MIN)
    SaturatingRoundingDoublingHighMul(a, m) = floor((a*m + 2**30) / 2**31), and
    RoundingDivideByPOT(v, r) = floor((v + 2**(r-1) - [v < 0]) / 2**r) for r > 0.
    """
    if _one_value(multiplier, acc) and _one_value(shift, acc):
        mi, sh = int(multiplier.flat[0]) if multiplier.__class__ is np.ndarray else int(multiplier), \
            int(shift.flat[0]) if shift.__class__ is np.ndarray else int(shift)
        if mi != INT32_MIN and -31 <= sh <= 31 and acc.__class__ is np.ndarray:
            return multiply_by_quantized_multiplier_scalar_inplace(acc, mi, sh)
    m = np.asarray(multiplier, np.int64)
    shift = np.asarray(shift, np.int64)
    if np.count_nonzero(m == INT32_MIN):  # the only case where SRDHM saturates
        res = _multiply_by_quantized_multiplier_steps(acc, m, shift)
        if np.shape(res) == acc.shape:
            acc[...] = res
            return acc
        return np.asarray(res, np.int64)
    full = np.broadcast(acc, m, shift).shape
    if acc.shape != full:
        acc = np.array(np.broadcast_to(acc, full))
    left = np.maximum(shift, 0)
    if np.count_nonzero(left):
        acc <<= left
        wrap_int32_inplace(acc)
    acc *= m
    acc += 1 << 30
    acc >>= 31
    # RoundingDivideByPOT(t, r) = floor((2t + 2**r - [t < 0]) / 2**(r+1)), r = max(-shift, 0)
    right = np.maximum(-shift, 0)
    neg = acc >> 63
    acc <<= 1
    acc += np.left_shift(1, right)
    acc += neg
    acc >>= right + 1
    return acc


def multiply_by_quantized_multiplier_scalar(x, multiplier: int, shift: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier(int32 x, multiplier, shift) for one multiplier >= 0 and
    shift (not per channel) and x already in the int32 range (not wrapped), in fewer numpy
    passes; a new int64 array. With shift <= 0 this is also
    MultiplyByQuantizedMultiplierSmallerThanOneExp."""
    return multiply_by_quantized_multiplier_scalar_inplace(np.array(x, np.int64), multiplier, shift)


def multiply_by_quantized_multiplier_scalar_inplace(r: np.ndarray, multiplier: int, shift: int,
                                                     pre_shift: int = 0,
                                                     tmp: np.ndarray | None = None) -> np.ndarray:
    """multiply_by_quantized_multiplier_scalar(r << pre_shift, multiplier, shift) on an int64
    array the caller owns (overwritten); `tmp`, optional, is a scratch array of r's shape.

    `r << pre_shift` must fit int32. The multiplier is not INT32_MIN (>= 0 from
    quantize_multiplier), so SRDHM never saturates and is
    t = floor((P + 2^30) / 2^31) with P = x*m; RoundingDivideByPOT then gives
    floor((t + 2^(e-1) - [t<0]) / 2^e) = floor((floor((P + 2^30 + 2^(30+e)) / 2^31) - [P<0]) / 2^e)
    (for e >= 1, [P<0] may stand in for [t<0]: they differ only where t = 0, and both give 0 there).
    """
    if shift > 0:
        r <<= shift + pre_shift
        wrap_int32_inplace(r)  # like the C++ int32 shift
        pre_shift = 0
    r *= multiplier << pre_shift
    e = -shift
    if e <= 0:
        r += 1 << 30
        r >>= 31
        return r
    neg = np.right_shift(r, 63, out=tmp)
    r += (1 << 30) + (1 << (30 + e))
    r >>= 31
    r += neg
    r >>= e
    return r


def multiply_by_quantized_multiplier_int64(x, multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier(int64 x, ...) used by int16x8 kernels."""
    out = np.array(x, np.int64)
    res = multiply_by_quantized_multiplier_int64_inplace(out, multiplier, shift)
    return res if res.ndim else res[()]


def multiply_by_quantized_multiplier_int64_inplace(acc: np.ndarray, multiplier, shift) -> np.ndarray:
    """The int64 MultiplyByQuantizedMultiplier in place in `acc` (an int64 array the caller
    owns, |values| < 2**47); returns the array."""
    if _one_value(multiplier, acc) and _one_value(shift, acc) and acc.__class__ is np.ndarray:
        m = int(multiplier.flat[0]) if multiplier.__class__ is np.ndarray else int(multiplier)
        total_shift = 15 - (int(shift.flat[0]) if shift.__class__ is np.ndarray else int(shift))
        if 1 <= total_shift <= 63:
            acc *= (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
            acc += 1 << (total_shift - 1)
            acc >>= total_shift
            return wrap_int32_inplace(acc)
    multiplier = np.asarray(multiplier, np.int64)
    shift = np.asarray(shift, np.int64)
    if not (acc.__class__ is np.ndarray and acc.ndim and multiplier.ndim <= 1 and shift.ndim <= 1
            and multiplier.size in (1, acc.shape[-1]) and shift.size in (1, acc.shape[-1])):
        full = np.broadcast_shapes(np.shape(acc), multiplier.shape, shift.shape)
        if np.shape(acc) != full:
            acc = np.array(np.broadcast_to(acc, full))
    # (m + 2**15) >> 16 reaches 0x7FFF exactly where m >= 0x7FFF0000 first
    reduced = multiplier + (1 << 15)
    reduced >>= 16
    np.minimum(reduced, 0x7FFF, out=reduced)
    total_shift = np.subtract(15, shift)
    acc *= reduced
    total_shift -= 1
    acc += np.left_shift(1, total_shift)
    total_shift += 1
    acc >>= total_shift
    return wrap_int32_inplace(acc)  # the C++ narrows to int32_t without saturating


_I64 = np.dtype(np.int64)


@overload
def wrap_int32(x: int) -> int: ...
@overload
def wrap_int32(x: np.ndarray) -> np.ndarray: ...
def wrap_int32(x: int | np.ndarray) -> int | np.ndarray:
    """Two's-complement wrap of int64 values (or Python ints) to the int32 range, as C++ int32
    arithmetic and the int32 accumulators do."""
    if x.__class__ is np.ndarray and x.dtype == _I64:
        return x.astype(np.int32).astype(np.int64)  # numpy's integer narrowing wraps
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def wrap_int32_inplace(x: np.ndarray) -> np.ndarray:
    """wrap_int32 in place in an int64 array the caller owns; returns it."""
    if x.__class__ is np.ndarray and x.dtype == _I64:
        x[...] = x.astype(np.int32)
        return x
    x += 1 << 31
    x &= 0xFFFFFFFF
    x -= 1 << 31
    return x


_IINFO: dict = {}


def int_limits(dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype, without building np.iinfo on every call."""
    lim = _IINFO.get(dtype)
    if lim is None:
        info = np.iinfo(dtype)
        lim = _IINFO[dtype] = (int(info.min), int(info.max))
    return lim


def quantize(real: np.ndarray, scale: float, zero_point: int, dtype) -> np.ndarray:
    """Affine quantization with TFLite's rounding and saturation."""
    lo, hi = int_limits(dtype)
    q = round_half_away(np.asarray(real, np.float32) / np.float32(scale)) + zero_point
    return np.clip(q, lo, hi).astype(dtype)


def dequantize(q: np.ndarray, scale, zero_point) -> np.ndarray:
    return ((np.asarray(q, np.int32) - np.asarray(zero_point, np.int32)) * np.asarray(scale, np.float32)).astype(np.float32)



_UNSET = np.iinfo(np.int64).min


class MemoTable:
    """A cache of an int64 function of non-negative integer keys (row sums), for kernels whose
    per-row fixed-point step costs dozens of numpy calls but depends only on that key.

    `fill` maps an int64 array of keys to their int64 values. Keys below `bound` (when it is at
    most `slots`) index a table directly; other keys share `slots` direct-mapped entries (the
    key's low bits) that remember which key they hold. A kernel's table belongs to one
    interpreter, which runs on one thread at a time."""

    __slots__ = ("fill", "mask", "direct", "keys", "values")

    def __init__(self, fill, bound: int | None = None, slots: int = 1 << 12) -> None:
        self.fill = fill
        self.direct = bound is not None and bound <= slots
        size = max(bound, 1) if bound is not None and self.direct else slots
        self.mask = size - 1  # slots is a power of two
        self.keys = np.full(size, -1, np.int64)
        self.values = np.zeros(size, np.int64)

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        if self.direct:
            v = self.values.take(keys)
            miss = self.keys.take(keys) < 0
            if not miss.any():
                return v
            slot = keys
        else:
            slot = keys & self.mask
            v = self.values.take(slot)
            miss = self.keys.take(slot) != keys
            if not miss.any():
                return v
        k = keys[miss]
        f = self.fill(k.astype(np.int64))
        v[miss] = f
        s = slot[miss]
        self.values[s] = f
        self.keys[s] = k
        return v
