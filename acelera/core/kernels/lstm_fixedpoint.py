"""gemmlowp fixed point for the integer LSTMs: int16 logistic / tanh (as lookup tables over all
int16 raw values), the rounding helpers of the 8x8_16 and basic quantized cells, and the int32
arithmetic of the integer layer norm.

Mirrors gemmlowp's fixedpoint.h (SaturatingRoundingDoublingHighMul, RoundingDivideByPOT,
SaturatingRoundingMultiplyByPOT, exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1,
logistic, tanh) and, from tflite/kernels/internal/reference/portable_tensor_utils.cc and
common.h, ApplyLayerNorm and GetInvSqrtQuantizedMultiplierExp; CheckedLog2 from lstm.cc.
"""
from __future__ import annotations

import numpy as np

from acelera.core.quant import multiply_by_quantized_multiplier, round_half_away

# --- gemmlowp int16 fixed point: the integer LSTM's sigmoid and tanh, as lookup tables --------------
# Raw FixedPoint<int16_t, k> values are held in int64 arrays; C++ int16 arithmetic wraps.

def wrap16(x: np.ndarray) -> np.ndarray:
    return ((x + 32768) & 0xFFFF) - 32768


def _trunc_div(x: np.ndarray, d) -> np.ndarray:
    """C++ integer division (truncates toward zero) of int64 values."""
    q = np.abs(x) // d
    return np.where(x < 0, -q, q)


def srdhm16(a: np.ndarray, b) -> np.ndarray:
    ab = a * b
    r = _trunc_div(ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14)), 1 << 15)
    return np.where((a == -32768) & (b == -32768), 32767, wrap16(r))


def rdbpot(x: np.ndarray, e: int) -> np.ndarray:
    if e == 0:
        return x
    mask = (1 << e) - 1
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0))


def srmpot16(x: np.ndarray, e: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT<e> on int16 raw values."""
    if e <= 0:
        return rdbpot(x, -e)
    threshold = (1 << (15 - e)) - 1
    return np.where(x > threshold, 32767, np.where(x < -threshold, -32768, wrap16(x << e)))


def _c16(value: int) -> int:
    """A gemmlowp constant given as a 32-bit raw value, in 16 bits (RescaleConstantInitializer)."""
    return int(rdbpot(np.array(value, np.int64), 16))


def _exp_on_quarter_interval(a: np.ndarray) -> np.ndarray:
    """exp(x) for F0 x in [-1/4, 0)."""
    const, third = _c16(1895147668), _c16(715827883)
    x = wrap16(a + (1 << 12))
    x2 = srdhm16(x, x)
    x3 = srdhm16(x2, x)
    x4 = srdhm16(x2, x2)
    poly = srmpot16(wrap16(srdhm16(wrap16(srmpot16(x4, -2) + x3), third) + x2), -1)
    return np.clip(const + srdhm16(np.array(const, np.int64), wrap16(x + poly)), -32768, 32767)


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
               (3, 720401), (4, 242))


def _exp_on_negative_values(a: np.ndarray, int_bits: int) -> np.ndarray:
    frac = 15 - int_bits
    quarter = 1 << (frac - 2)
    a_mod = wrap16((a & (quarter - 1)) - quarter)
    result = _exp_on_quarter_interval(srmpot16(a_mod, int_bits))
    remainder = wrap16(a_mod - a)
    for exponent, multiplier in _EXP_BARREL:
        if int_bits > exponent:
            bit = int(wrap16(np.array(1 << (frac + exponent), np.int64)))
            result = np.where((remainder & bit) != 0, srdhm16(result, _c16(multiplier)), result)
    if int_bits > 5:
        result = np.where(a < _c16(-(1 << (36 - int_bits))), 0, result)
    return np.where(a == 0, 32767, result)


def _newton_reciprocal(a: np.ndarray) -> np.ndarray:
    """The F2 Newton-Raphson iterate for 1 / (1 + a) of F0 a in (0, 1)."""
    s = a + 32767
    s = s + np.where(s >= 0, 1, -1)
    half = wrap16(_trunc_div(s, 2))
    x = wrap16(_c16(1515870810) + srdhm16(half, _c16(-1010580540)))
    for _ in range(3):
        one_minus = wrap16((1 << 13) - srdhm16(half, x))
        x = wrap16(x + srmpot16(srdhm16(x, one_minus), 2))
    return x


def _tanh16(a: np.ndarray, int_bits: int) -> np.ndarray:
    neg = a < 0
    n = np.where(neg, a, wrap16(-a))
    t = srmpot16(wrap16(_newton_reciprocal(_exp_on_negative_values(n, int_bits + 1)) - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(neg, wrap16(-t), t))


def _logistic16(a: np.ndarray, int_bits: int) -> np.ndarray:
    pos = a > 0
    absolute = np.where(pos, a, wrap16(-a))
    r = srmpot16(_newton_reciprocal(_exp_on_negative_values(wrap16(-absolute), int_bits)), 1)
    return np.where(a == 0, _c16(1 << 30), np.where(pos, r, wrap16(32767 - r)))


_TABLES: dict[tuple[str, int], np.ndarray] = {}


def table(kind: str, int_bits: int) -> np.ndarray:
    """gemmlowp logistic / tanh of FixedPoint<int16, int_bits> over all int16 raw values."""
    key = (kind, int_bits)
    if key not in _TABLES:
        a = np.arange(-32768, 32768, dtype=np.int64)
        fn = _logistic16 if kind == "logistic" else _tanh16
        _TABLES[key] = fn(a, int_bits).astype(np.int64)
    return _TABLES[key]


def lookup(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A table of all int16 raw values (see `table`) at the raw values x."""
    return values[x + 32768]


# --- int32 fixed point for the integer layer norm ------------------------------------------------

def wrap32(x):
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def srdhm32(a, b):
    ab = a * b
    r = _trunc_div(ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30)), 1 << 31)
    return np.where((a == -(1 << 31)) & (b == -(1 << 31)), (1 << 31) - 1, r)


def _srmpot32(x, e: int):
    if e <= 0:
        return rdbpot(x, -e)
    threshold = (1 << (31 - e)) - 1
    return np.where(x > threshold, (1 << 31) - 1, np.where(x < -threshold, -(1 << 31), wrap32(x << e)))


def _inv_sqrt_multiplier(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetInvSqrtQuantizedMultiplierExp(v, reverse_shift=-1) per element of int64 v."""
    v = np.array(v, np.int64)
    small = v <= 1
    v = np.where(small, 2, v)
    shift = np.full(v.shape, 11, np.int64)
    while np.any(v >= 1 << 29):
        big = v >= 1 << 29
        v = np.where(big, v // 4, v)
        shift += big
    clz = 32 - np.frexp(v.astype(np.float64))[1].astype(np.int64)
    pairs = (clz - 1) // 2 - 1
    shift -= pairs
    v = v << (2 * pairs)
    half_input = rdbpot(v >> 1, 1)
    x = np.full(v.shape, 1 << 28, np.int64)
    for _ in range(5):
        x3 = _srmpot32(srdhm32(srdhm32(x, x), x), 6)
        x = _srmpot32(wrap32(srdhm32((1 << 28) + (1 << 27), x) - srdhm32(half_input, x3)), 3)
    x = srdhm32(x, 1518500250)
    x = np.where(shift < 0, wrap32(x << np.maximum(-shift, 0)), x)
    shift = np.maximum(shift, 0)
    return np.where(small, (1 << 31) - 1, x), np.where(small, 0, -shift)


def layer_norm_int(x: np.ndarray, weights: np.ndarray, bias: np.ndarray, multiplier: int, shift: int,
                   guard: int) -> np.ndarray:
    """PortableApplyLayerNorm on int16 rows [rows, n]."""
    n = x.shape[1]
    mean = _trunc_div(x.sum(axis=1) * 1024, n)
    variance = (x * x).sum(axis=1) * ((1 << 20) // n) - mean * mean
    variance = _trunc_div(variance, 1 << 20)
    inv, inv_shift = _inv_sqrt_multiplier(np.where(variance < 1, guard, variance))
    rescaled = multiply_by_quantized_multiplier(wrap32(1024 * x - mean[:, None]), inv[:, None], inv_shift[:, None])
    v = wrap32(wrap32(rescaled * weights) + bias)
    v = _trunc_div(np.where(v > 0, v + 512, v - 512), 1024)
    return np.clip(multiply_by_quantized_multiplier(v, multiplier, shift + 12), -32768, 32767)


def checked_log2(x: float) -> tuple[bool, int]:
    """CheckedLog2 in float32."""
    with np.errstate(all="ignore"):
        log2 = np.float32(np.log(np.float32(x)) * (np.float32(1) / np.log(np.float32(2))))
        rounded = np.float32(round_half_away(np.array(log2)))
    if not np.isfinite(rounded):
        return False, 0
    return bool(abs(np.float32(log2 - rounded)) < np.float32(1e-3)), int(rounded)

