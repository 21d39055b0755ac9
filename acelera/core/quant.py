"""TFLite fixed-point helpers, vectorized over numpy arrays.

These mirror tflite/kernels/internal/common.h and quantization_util.cc (the default,
double-rounding build that the ai-edge-litert wheel ships) so quantized kernels can be
bit-exact with LiteRT. All functions accept scalars or arrays and compute in int64.
"""
from __future__ import annotations

import math

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
    """std::round: halves away from zero."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Vectorized std::round (TfLiteRound) on float arrays."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values held in int64."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    s = ab + nudge
    res = np.where(s >= 0, s >> 31, -((-s) >> 31))  # C++ division truncates toward zero
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, INT32_MAX, res)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: divide by 2**exponent rounding half away from zero."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier for int32 x (double-rounding variant)."""
    x = np.asarray(x, np.int64)
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = _wrap_int32(x << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def multiply_by_quantized_multiplier_int64(x, multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier(int64 x, ...) used by int16x8 kernels."""
    x = np.asarray(x, np.int64)
    multiplier = np.asarray(multiplier, np.int64)
    shift = np.asarray(shift, np.int64)
    reduced = np.where(multiplier < 0x7FFF0000, (multiplier + (1 << 15)) >> 16, 0x7FFF)
    total_shift = 15 - shift
    rnd = np.int64(1) << (total_shift - 1)
    result = (x * reduced + rnd) >> total_shift
    return _wrap_int32(result)  # the C++ narrows to int32_t without saturating


def _wrap_int32(x: np.ndarray) -> np.ndarray:
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def quantize(real: np.ndarray, scale: float, zero_point: int, dtype) -> np.ndarray:
    """Affine quantization with TFLite's rounding and saturation."""
    info = np.iinfo(dtype)
    q = round_half_away(np.asarray(real, np.float32) / np.float32(scale)) + zero_point
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q: np.ndarray, scale, zero_point) -> np.ndarray:
    return ((np.asarray(q, np.int32) - np.asarray(zero_point, np.int32)) * np.asarray(scale, np.float32)).astype(np.float32)
