"""Float formats acelera holds as bit patterns: BFLOAT16 (uint16) and FLOAT8_E4M3FN /
FLOAT8_E5M2 (uint8), with the conversions LiteRT's kernels make (tflite/kernels/cast.cc,
dequantize.h; Eigen::bfloat16 and the ml_dtypes float8 types LiteRT builds on):

* widening to float32 is exact; a FLOAT8 NaN becomes the quiet NaN 0x7FC00000 with its sign;
* float32 -> float16 rounds to nearest even, NaN -> 0x7E00 with the sign;
* float32 -> bfloat16 is Eigen's float_to_bfloat16_rtne<false> (NaN -> 0x7FC0 with the sign);
* float32 -> FLOAT8 is float8_internal::ConvertFrom without saturation: round to nearest even,
  then E4M3FN (no infinity) overflows to NaN and E5M2 to infinity; a NaN becomes 0x7F (E4M3FN)
  or 0x7E (E5M2) with the sign.

An elementwise float16/bfloat16 op is a function of 16 bits: `table16` evaluates it in float32
over every bit pattern once, so the kernel is a single lookup (common.lut_apply).
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

FLOAT8 = ("FLOAT8_E4M3FN", "FLOAT8_E5M2")
# Types held in another type's numpy dtype (bfloat16 as uint16, FLOAT8 as uint8, INT4 and INT2
# unpacked as int8, UINT4 as uint8): a kernel that accepts inputs by numpy dtype must refuse
# these by name.
ALIASED_TYPES = frozenset({"BFLOAT16", *FLOAT8, "INT4", "INT2", "UINT4"})

# (mantissa bits, exponent bias, largest finite value, NaN pattern, overflow pattern)
_F8 = {
    "FLOAT8_E4M3FN": (3, 7, 448.0, 0x7F, 0x7F),
    "FLOAT8_E5M2": (2, 15, 57344.0, 0x7E, 0x7C),
}


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) as float32 values."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_f16(x: np.ndarray) -> np.ndarray:
    """float32 values as float16, rounding to nearest even like Eigen::half's and the FP16
    library's conversions, which turn every NaN into 0x7E00 with its sign (numpy keeps the
    payload)."""
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16)
    nan = np.isnan(x)
    if nan.any():
        h.view(np.uint16)[nan] = np.where(np.signbit(x[nan]), 0xFE00, 0x7E00).astype(np.uint16)
    return h


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values as bfloat16 bit patterns: round to nearest even, NaN -> quiet NaN."""
    x = np.ascontiguousarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded[nan] = np.where(np.signbit(x[nan]), 0xFFC0, 0x7FC0).astype(np.uint16)
    return rounded


@functools.cache
def _f8_values(name: str) -> np.ndarray:
    """The float32 value of each of the 256 FLOAT8 bit patterns."""
    mant, bias, _, _, _ = _F8[name]
    code = np.arange(256, dtype=np.int64)
    sign = np.where(code & 0x80, -1.0, 1.0)
    e = (code >> mant) & ((0x80 >> mant) - 1)
    m = code & ((1 << mant) - 1)
    top = (1 << (7 - mant)) - 1
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - mant), (1.0 + m / (1 << mant)) * 2.0 ** (e - bias))
    if name == "FLOAT8_E4M3FN":
        nan = (e == top) & (m == (1 << mant) - 1)
        inf = np.zeros(256, bool)
    else:
        nan = (e == top) & (m != 0)
        inf = (e == top) & (m == 0)
    out = (np.where(inf, np.inf, mag) * sign).astype(np.float32)
    out.view(np.uint32)[nan] = np.where(sign[nan] < 0, 0xFFC00000, 0x7FC00000).astype(np.uint32)
    out.setflags(write=False)
    return out


def f8_to_f32(bits: np.ndarray, name: str) -> np.ndarray:
    """FLOAT8 bit patterns (uint8) of type `name` as float32 values."""
    return np.take(_f8_values(name), np.asarray(bits, np.uint8))


def f32_to_f8(x: np.ndarray, name: str) -> np.ndarray:
    """float32 values as FLOAT8 bit patterns of type `name` (round to nearest even, no saturation)."""
    mant, bias, largest, nan_bits, over_bits = _F8[name]
    x = np.asarray(x, np.float32)
    sign = np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    min_exp = 1 - bias
    with np.errstate(invalid="ignore"):
        a = np.abs(x.astype(np.float64))
        a = np.where(np.isfinite(a), a, 0.0)
        e = np.maximum(np.frexp(a)[1] - 1, min_exp)
        quantum = np.ldexp(1.0, e - mant)
        q = np.rint(a / quantum) * quantum  # exact: a is a float32 value, quantum a power of two
        e2 = np.frexp(q)[1] - 1
        normal = q >= 2.0 ** min_exp
        field = np.where(normal, e2 + bias, 0)
        m = np.where(normal, np.ldexp(q, -e2) - 1.0, np.ldexp(q, -min_exp)) * (1 << mant)
        code = ((field << mant) + m.astype(np.int64)) & 0xFF
    code = np.where(q > largest, over_bits, code)
    code = np.where(np.isinf(x), over_bits, code)
    code = np.where(np.isnan(x), nan_bits, code)
    return code.astype(np.uint8) | sign


def to_f32(x: np.ndarray, type_name: str) -> np.ndarray:
    """Values of a FLOAT16/BFLOAT16/FLOAT8 tensor as float32 (other types: astype)."""
    if type_name == "BFLOAT16":
        return bf16_to_f32(x)
    if type_name in _F8:
        return f8_to_f32(x, type_name)
    return np.asarray(x).astype(np.float32)


def from_f32(x: np.ndarray, type_name: str) -> np.ndarray:
    """float32 values stored as FLOAT16, BFLOAT16 or FLOAT8 (see the f32_to_* conversions)."""
    if type_name == "BFLOAT16":
        return f32_to_bf16(x)
    if type_name in _F8:
        return f32_to_f8(x, type_name)
    if type_name == "FLOAT16":
        return f32_to_f16(x)
    return np.asarray(x, np.float32)


def table16(fn: Callable[[np.ndarray], np.ndarray], type_name: str) -> np.ndarray:
    """`fn` (float32 in, float32 out) over every FLOAT16 or BFLOAT16 bit pattern, stored back
    in that type: index it with common.lut_apply."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    v = bits.view(np.float16).astype(np.float32) if type_name == "FLOAT16" else bf16_to_f32(bits)
    with np.errstate(all="ignore"):
        out = from_f32(np.asarray(fn(v), np.float32), type_name)
    out.setflags(write=False)
    return out
