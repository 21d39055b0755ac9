"""Elementwise binary arithmetic with numpy broadcasting: ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM,
SQUARED_DIFFERENCE, POW.

Semantics follow LiteRT's reference kernels (tflite/kernels/{add,sub,mul,div,maximum_minimum,
squared_difference,pow}.cc and internal/reference/*):

* MAXIMUM/MINIMUM compare float16/bfloat16 values as floats (`a > b ? a : b`) and return the
  chosen operand's bits.
* float outputs go through ActivationFunctionWithMinMax even without a fused activation, so
  +-inf is clamped to +-FLT_MAX (NaN passes through); TANH/SIGN_BIT fused activations are
  ignored by these ops (CalculateActivationRange treats them as "none"). float16 ADD (v6) and
  MUL (v8) compute in numpy's float16 (each result rounded to half, as LiteRT's `half`) and
  clamp to +-65504; COMPLEX64 MUL (v6) rounds each product as libgcc's __mulsc3 does.
* integer (unquantized) arithmetic wraps like the C++ kernels; int32 DIV truncates.
* quantized 8-bit ops are evaluated through a 256x256 lookup table built in prepare with the
  exact fixed-point formula (bit-exact by construction, one gather per element at run time);
  int16 ops use the same fixed-point formulas vectorized over int64.
* while widening (registry.widening) the float32 paths take FLOAT64 and compute in it.
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core.errors import AceleraError, ModelError
from acelera.core.kernels.common import (
    FLT_MAX,
    RELU,
    RELU6,
    RELU_N1_TO_1,
    domain,
    float_activation_bounds,
    quantized_activation_range,
)
from acelera.core.kernels.float_formats import ALIASED_TYPES, to_f32
from acelera.core.kernels.registry import NodeContext, check_divisor, float_type_names, register
from acelera.core.model import Tensor
from acelera.core.quant import multiply_by_quantized_multiplier_scalar as mbqm
from acelera.core.quant import multiply_by_quantized_multiplier_scalar_inplace as mbqm_inplace
from acelera.core.quant import quantize_multiplier, round_half_away, wrap_int32

try:  # the clip ufunc itself: np.clip's Python wrapper costs a few microseconds per call
    from numpy._core.umath import clip as clip_ufunc
except ImportError:  # pragma: no cover - numpy < 2
    clip_ufunc = np.clip

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

F32, I8, U8, I16, I32, I64, U32 = (np.dtype(t) for t in (np.float32, np.int8, np.uint8, np.int16,
                                                           np.int32, np.int64, np.uint32))
F16, C64, F64 = np.dtype(np.float16), np.dtype(np.complex64), np.dtype(np.float64)
QUANT8 = (I8, U8)
FLOATS = (F32, F64)  # the float32 paths, which take float64 while widening


def float_dtypes() -> set[np.dtype]:
    """The dtypes of a float32 path now: float32, plus float64 while widening."""
    return {F64, F32} if len(float_type_names()) > 1 else {F32}


class InvokeError(AceleraError):
    """An input value LiteRT rejects at invoke time (e.g. a negative int32 POW exponent)."""


# --- fixed-point arithmetic (gemmlowp / TFLite double-rounding build), int64 arrays ------------

def srdhm(a, b, saturate: bool = True) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int32 values held in int64.

    gemmlowp computes trunc((a*b + nudge) / 2^31) with nudge = 2^30 or 1 - 2^30 by sign; both
    branches equal floor((a*b + 2^30) / 2^31), i.e. an arithmetic shift.
    """
    a = np.asarray(a, np.int64)
    r = a * b
    r += 1 << 30
    r >>= 31
    if saturate:
        r = np.where((a == INT32_MIN) & (np.asarray(b) == INT32_MIN), INT32_MAX, r)
    return r


def rdbpot_vec(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT with a per-element exponent in [0, 31].

    floor((x + 2^(e-1) - [x<0]) / 2^e) == floor((2x + 2^e - [x<0]) / 2^(e+1)), which also holds
    for e = 0 (it keeps x).
    """
    e = np.asarray(exponent, np.int64)
    r = np.left_shift(x, 1)
    r += np.left_shift(1, e)
    r += x >> 63
    r >>= e + 1
    return r


def rdbpot_inplace(r: np.ndarray, e: int) -> np.ndarray:
    """rdbpot on an owned int64 array: (x + 2^(e-1) - [x < 0]) >> e."""
    if e > 0:
        r += r >> 63
        r += 1 << (e - 1)
        r >>= e
    return r


def bit_select(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.where(c, a, b) for same-dtype a, b, by bit masks (np.where is slow on random masks)."""
    c, a, b = np.asarray(c), np.asarray(a), np.asarray(b)
    u = np.dtype(f"u{a.dtype.itemsize}")
    m = c.view(np.uint8).astype(u)
    np.negative(m, out=m)
    ub = b.view(u)
    r = np.bitwise_and(np.bitwise_xor(a.view(u), ub), m)
    r ^= ub
    return r.view(a.dtype)


def bit_length(x: np.ndarray) -> np.ndarray:
    """Number of significant bits of non-negative int64 values below 2**53."""
    return np.frexp(np.asarray(x, np.float64))[1].astype(np.int64)


def sat_shl(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent > 0> on int32 raw values."""
    threshold = (1 << (31 - exponent)) - 1
    r = wrap_int32(x << exponent)
    r = np.where(x > threshold, INT32_MAX, r)
    return np.where(x < -threshold, INT32_MIN, r)


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp one_over_one_plus_x_for_x_in_0_1 on FixedPoint<int32, 0> raw values."""
    s = a + INT32_MAX  # RoundingHalfSum(a, F0::One())
    half_den = np.where(s >= 0, s + 1, s - 1)
    half_den = np.where(half_den >= 0, half_den >> 1, -((-half_den) >> 1))
    x = wrap_int32(1515870810 + srdhm(half_den, -1010580540))
    for _ in range(3):
        hdx = srdhm(half_den, x)
        one_minus = wrap_int32((1 << 29) - hdx)
        x = wrap_int32(x + sat_shl(srdhm(x, one_minus), 2))
    return sat_shl(x, 1)


# --- activation ranges ---------------------------------------------------------------------

def int_range(act: int, dtype: np.dtype) -> tuple[int, int] | None:
    """CalculateActivationRange<T> for integer T, or None when it cannot change any value."""
    info = np.iinfo(dtype)
    if act == RELU:
        lo, hi = 0, int(info.max)
    elif act == RELU6:
        lo, hi = 0, 6
    elif act == RELU_N1_TO_1:
        lo, hi = -1, 1
    else:
        return None
    cast = np.array([lo, hi]).astype(dtype)  # e.g. -1 wraps for unsigned T, like the C++ cast
    return int(cast[0]), int(cast[1])


def float_clamp(act: int, dtype: np.dtype = F32):
    """In-place clamp of a float32 (or float64) result to the activation range (always at
    least +-FLT_MAX).

    Overflow warnings are not silenced here (np.errstate costs more than the op on small
    tensors); a float overflow only shows numpy's RuntimeWarning.
    """
    lo, hi = (dtype.type(v) for v in float_activation_bounds(act))

    def clamp(r):
        r = np.asarray(r)
        clip_ufunc(r, lo, hi, out=r)
        return r
    return clamp


def half_clamp(act: int):
    """float_clamp for float16 results: CalculateActivationRange<half> clamps to +-65504."""
    lo, hi = float_activation_bounds(act)
    lo, hi = np.float16(max(lo, -65504.0)), np.float16(min(hi, 65504.0))

    def clamp(r):
        r = np.asarray(r)
        clip_ufunc(r, lo, hi, out=r)
        return r
    return clamp


def clamp_int(out: np.ndarray, act: int) -> np.ndarray:
    rng = int_range(act, out.dtype)
    if rng is None:
        return out
    return clip_ufunc(out, out.dtype.type(rng[0]), out.dtype.type(rng[1]), out=out)


# --- prepare-time helpers ------------------------------------------------------------------

def binary_operands(node: NodeContext, allowed, *, out_dtype=None) -> tuple[Tensor, Tensor, Tensor]:
    """The two inputs and the output, checking input types match and are `allowed`."""
    a, b = node.input(0), node.input(1)
    if a is None or b is None or len(node.outputs) != 1:
        raise ModelError(f"{node.op.name}: expects 2 inputs and 1 output")
    out = node.outputs[0]
    if a.type != b.type:
        raise node.unsupported(f"input types {a.type_name} and {b.type_name} differ")
    if a.dtype not in allowed or a.type_name in ALIASED_TYPES:
        raise node.unsupported(f"input type {a.type_name} is not supported")
    want = a.dtype if out_dtype is None else np.dtype(out_dtype)
    if out.dtype != want:
        raise node.unsupported(f"output type {out.type_name} with input type {a.type_name} is not supported")
    broadcast_shape(node, a.shape, b.shape)
    return a, b, out


def broadcast_shape(node: NodeContext, *shapes) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ModelError(f"{node.op.name}: shapes {' and '.join(map(str, shapes))} are not broadcastable") from None


def qparams(node: NodeContext, t: Tensor, what: str) -> tuple[float, int]:
    """(scale, zero_point) of a per-tensor quantized tensor; unsupported otherwise."""
    q = t.quantization
    if not q.is_set:
        raise node.unsupported(f"{what} of type {t.type_name} must be quantized")
    if q.scale.size != 1 or q.zero_point.size > 1:
        raise node.unsupported(f"{what}: per-channel quantization is not supported")
    zp = int(q.zero_point[0]) if q.zero_point.size else 0
    return float(q.scale[0]), zp


def is_quantized(t: Tensor) -> bool:
    return t.quantization.is_set


def activation(node: NodeContext) -> int:
    return int(node.options.get("fused_activation_function", 0) or 0)


def scalar_safe(fn):
    """Numpy ufuncs return scalars for 0-d operands; keep kernel outputs ndarrays."""
    def run(a, b):
        if a.ndim == 0 and b.ndim == 0:
            return np.asarray(fn(a.reshape(1), b.reshape(1))).reshape(())
        return fn(a, b)
    return run


BLOCK = 1 << 17


def blocked(fn, out_dtype):
    """Evaluate elementwise fn(x, y) over blocks of at most ~BLOCK output elements.

    The fixed-point kernels create several int64 temporaries per element; on whole large
    tensors these miss the caches and (for multi-MB arrays) pay page faults on every run.
    Same shapes, a single-element operand and a trailing-dims operand (e.g. per-channel) are
    blocked; other broadcasts run in one piece.
    """
    out_dtype = np.dtype(out_dtype)

    def run(x, y):
        if x.size <= BLOCK and y.size <= BLOCK:
            return fn(x, y)
        shape = np.broadcast_shapes(x.shape, y.shape)
        inner = _block_inner(x.shape, y.shape, shape)
        if inner is None:
            return fn(x, y)
        out = np.empty(shape, out_dtype)
        o2 = out.reshape(-1, inner)
        x2 = x.reshape(-1, inner) if x.size == out.size else x.reshape(1, -1)
        y2 = y.reshape(-1, inner) if y.size == out.size else y.reshape(1, -1)
        step = max(1, BLOCK // inner)
        for r in range(0, o2.shape[0], step):
            xb = x2[r:r + step] if x2.shape[0] > 1 else x2
            yb = y2[r:r + step] if y2.shape[0] > 1 else y2
            o2[r:r + step] = fn(xb, yb)
        return out
    return run


class Scratch:
    """Per-kernel temporaries reused across blocks and runs (fresh big arrays are slow)."""

    def __init__(self):
        self.bufs: dict[str, np.ndarray] = {}

    def get(self, name: str, dtype, shape: tuple) -> np.ndarray:
        n = math.prod(shape)
        buf = self.bufs.get(name)
        if buf is None or buf.size < n:
            buf = self.bufs[name] = np.empty(max(n, min(BLOCK, 1 << 12)), dtype)
        return buf[:n].reshape(shape)


def blocked_into(fn, out_dtype):
    """Like `blocked`, for fn(x, y, out) writing its block of the result into `out`."""
    out_dtype = np.dtype(out_dtype)

    def run(x, y):
        shape = np.broadcast_shapes(x.shape, y.shape)
        out = np.empty(shape, out_dtype)
        if out.size == 0:
            return out
        inner = _block_inner(x.shape, y.shape, shape)
        if inner is None:  # general broadcast: materialize both operands
            x, y = np.broadcast_to(x, shape).reshape(-1), np.broadcast_to(y, shape).reshape(-1)
            inner = 1
        o2 = out.reshape(-1, inner)
        x2 = x.reshape(-1, inner) if x.size == out.size else x.reshape(1, -1)
        y2 = y.reshape(-1, inner) if y.size == out.size else y.reshape(1, -1)
        step = max(1, BLOCK // inner)
        for r in range(0, o2.shape[0], step):
            fn(x2[r:r + step] if x2.shape[0] > 1 else x2, y2[r:r + step] if y2.shape[0] > 1 else y2,
               o2[r:r + step])
        return out
    return run


def _block_inner(xs: tuple, ys: tuple, shape: tuple) -> int | None:
    """Row length for blocking: 1 for equal shapes or a single-element operand, the size of the
    trailing dims a broadcast operand spans, or None when neither pattern applies."""
    if xs == ys:
        return 1 if math.prod(shape) > 0 else None
    for small, big in ((xs, ys), (ys, xs)):
        if big != shape:
            continue
        n = math.prod(small)
        if n == 1:
            return 1
        padded = (1,) * (len(shape) - len(small)) + tuple(small)
        k = next(i for i, d in enumerate(padded) if d != 1)
        if padded[k:] == tuple(shape[k:]):
            return n
    return None


def table16(values: np.ndarray) -> np.ndarray:
    """An int32 lookup table over all int16 values (indexed by the uint16 bit pattern)."""
    t = np.asarray(values, np.int64)
    assert t.shape == (65536,) and np.all(np.abs(t) < 2 ** 31)
    t = t.astype(np.int32)
    t.setflags(write=False)
    return t


def gather16(table: np.ndarray, x: np.ndarray, scratch: Scratch, name: str) -> np.ndarray:
    """table[x] for an int16 array x, into scratch buffers."""
    idx = scratch.get("i" + name, np.intp, x.shape)
    np.copyto(idx, x.view(np.uint16))
    return table.take(idx, out=scratch.get("g" + name, table.dtype, x.shape), mode="clip")


def lut8_kernel(dtype: np.dtype, fn, out_dtype=None):
    """Kernel for an 8-bit binary op: out = fn(a, b) tabulated over all 256x256 pairs."""
    v = domain(dtype)
    table = np.asarray(fn(v[:, None], v[None, :])).astype(out_dtype or dtype)
    table.setflags(write=False)

    flat = table.reshape(-1)

    def run(a, b):
        ia, ib = a.view(np.uint8), b.view(np.uint8)
        if ia.shape == ib.shape:
            idx = ia.astype(np.uint16)
            idx <<= 8
            idx |= ib
        else:
            idx = np.bitwise_or(np.left_shift(ia, 8, dtype=np.uint16), ib)
        return flat.take(idx)
    return scalar_safe(blocked(run, table.dtype))


def checked_log2(x: float) -> tuple[bool, int]:
    """TFLite CheckedLog2 (float arithmetic)."""
    with np.errstate(all="ignore"):
        x_log2 = np.log(np.float32(x)) * (np.float32(1.0) / np.log(np.float32(2.0)))
        rounded = np.float32(round_half_away(x_log2))
        frac = np.float32(x_log2 - rounded)
    if not np.isfinite(rounded):
        return False, 0
    return bool(np.abs(frac) < np.float32(1e-3)), int(rounded)


def smaller_than_one_multiplier(node: NodeContext, real: float, what: str) -> tuple[int, int]:
    """QuantizeMultiplierSmallerThanOneExp, which aborts LiteRT outside (0, 1)."""
    if not (0.0 < real < 1.0):
        raise node.unsupported(f"{what} multiplier {real} is outside (0, 1)")
    m, s = quantize_multiplier(real)
    if s > 0:
        raise node.unsupported(f"{what} multiplier {real} is outside (0, 1)")
    return m, s


# --- ADD / SUB -----------------------------------------------------------------------------

def _add_sub(node: NodeContext, sign: int):
    """ADD (sign=+1) and SUB (sign=-1)."""
    op = node.op.name
    act = activation(node)
    allowed = {I32, I64, U8, I8, I16} | float_dtypes() | ({F16} if op == "ADD" else set())
    a, b, out = binary_operands(node, allowed)
    dt = a.dtype
    ufunc = np.add if sign > 0 else np.subtract

    if dt in (F32, F64, F16):
        clamp = half_clamp(act) if dt == F16 else float_clamp(act, dt)

        def run(x, y):
            return clamp(ufunc(x, y))
        return run
    if dt in (I32, I64) or (dt == I16 and op == "ADD" and not is_quantized(out)):
        if dt == I16 and is_quantized(a):
            raise node.unsupported("quantized INT16 inputs with an unquantized INT16 output")

        def run(x, y):
            return clamp_int(ufunc(x, y), act)
        return scalar_safe(run)

    # Quantized paths.
    s1, z1 = qparams(node, a, "input 1")
    s2, z2 = qparams(node, b, "input 2")
    so, zo = qparams(node, out, "output")
    info = np.iinfo(dt)
    for z, what in ((z1, "input 1"), (z2, "input 2"), (zo, "output")):
        if not info.min <= z <= info.max:
            raise node.unsupported(f"{what} zero point {z} is out of range")
    lo, hi = quantized_activation_range(act, so, zo, dt)

    if dt == I16:
        if z1 or z2 or zo:
            raise node.unsupported("INT16 quantization requires zero points of 0")
        opts = node.options
        pot = bool(opts.get("pot_scale_int16", False)) if opts else False
        if pot:
            p1, l1 = checked_log2(s1)
            p2, l2 = checked_log2(s2)
            p3, l3 = checked_log2(so)
            pot = p1 and p2 and p3
        if pot:
            return _pot_int16(node, sign, l1 - l3, l2 - l3, lo, hi)

    left_shift = 15 if dt == I16 else 20
    twice_max = 2.0 * max(s1, s2)
    if twice_max <= 0:
        raise node.unsupported("input scales must be positive")
    m1, sh1 = smaller_than_one_multiplier(node, s1 / twice_max, "input 1")
    m2, sh2 = smaller_than_one_multiplier(node, s2 / twice_max, "input 2")
    mo, sho = smaller_than_one_multiplier(node, twice_max / ((1 << left_shift) * so), "output")

    def scaled(v, zp, m, sh):
        return mbqm((v - zp) << left_shift, m, sh)

    def finish(raw):
        r = mbqm(raw, mo, sho)
        r += zo
        return clip_ufunc(r, lo, hi, out=r)

    if dt in QUANT8:
        def f(x, y):
            return finish(scaled(x, z1, m1, sh1) + sign * scaled(y, z2, m2, sh2))
        return lut8_kernel(dt, f)

    # Rescaled inputs tabulated over all 65536 values (|value| < 2^30, so int32 and their sum
    # fit), then the output rescale on int64 blocks in reusable buffers.
    t1 = table16(scaled(domain(I16), z1, m1, sh1))
    t2 = table16(sign * scaled(domain(I16), z2, m2, sh2))
    scratch = Scratch()

    def into(x, y, o):
        g1 = gather16(t1, x, scratch, "1")
        g2 = gather16(t2, y, scratch, "2")
        r = scratch.get("r", np.int64, o.shape)
        np.add(g1, g2, out=r)
        mbqm_inplace(r, mo, sho, tmp=scratch.get("t", np.int64, o.shape))
        if zo:
            r += zo
        clip_ufunc(r, lo, hi, out=r)
        np.copyto(o, r, casting="unsafe")
    return scalar_safe(blocked_into(into, I16))


def _pot_int16(node: NodeContext, sign: int, shift1: int, shift2: int, lo: int, hi: int):
    """The LSTM-style int16 path with power-of-two scales (reference Add / Sub16)."""
    if not (shift1 == 0 or shift2 == 0) or shift1 > 0 or shift2 > 0:
        raise node.unsupported("power-of-two INT16 scales need one input at the output scale")
    a, b = node.input(0), node.input(1)
    if node.op.name == "ADD" and a.shape != b.shape:
        # LiteRT's POT int16 Add has no broadcasting path (it reads out of bounds).
        raise node.unsupported("broadcasting with power-of-two INT16 scales")

    ufunc = np.add if sign > 0 else np.subtract

    def run(x, y):
        r = ufunc(rdbpot_inplace(x.astype(np.int64), -shift1), rdbpot_inplace(y.astype(np.int64), -shift2))
        clip_ufunc(r, -32768, 32767, out=r)  # SaturatingAdd / SaturatingSub
        clip_ufunc(r, lo, hi, out=r)
        return r.astype(I16)
    return scalar_safe(blocked(run, I16))


@register("ADD", max_version=6, dtypes=("FLOAT32", "FLOAT16", "INT32", "INT64", "UINT8", "INT8", "INT16"))
def add(node: NodeContext):
    return _add_sub(node, +1)


@register("SUB", max_version=5, dtypes=("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16"))
def sub(node: NodeContext):
    return _add_sub(node, -1)


# --- MUL -----------------------------------------------------------------------------------

@register("MUL", max_version=8, dtypes=("FLOAT32", "FLOAT16", "INT32", "INT64", "INT16", "UINT32", "UINT8", "INT8",
                                       "COMPLEX64"))
def mul(node: NodeContext):
    act = activation(node)
    a, b = node.input(0), node.input(1)
    if a is None or b is None:
        raise ModelError("MUL: expects 2 inputs")
    out = node.outputs[0]
    if a.dtype == I16 and out.dtype in QUANT8:
        return _mul_int16_to_8(node, act)
    a, b, out = binary_operands(node, {F16, I32, I64, I16, U32, U8, I8, C64} | float_dtypes())
    dt = a.dtype
    if dt == C64:
        if act:
            raise node.unsupported("a fused activation is not allowed for COMPLEX64 inputs")
        return _complex_mul

    if dt in (F32, F64, F16):
        clamp = half_clamp(act) if dt == F16 else float_clamp(act, dt)

        def run(x, y):
            return clamp(np.multiply(x, y))
        return run
    if dt in (I32, I64, U32) or (dt == I16 and not is_quantized(out)):
        def run(x, y):
            return clamp_int(np.multiply(x, y), act)
        return scalar_safe(run)

    s1, z1 = qparams(node, a, "input 1")
    s2, z2 = qparams(node, b, "input 2")
    so, zo = qparams(node, out, "output")
    lo, hi = quantized_activation_range(act, so, zo, dt)
    # Prepare computes the product in float: input1_scale * input2_scale / output_scale.
    real = float(np.float32(np.float32(s1) * np.float32(s2)) / np.float32(so))
    m, sh = quantize_multiplier(real)

    def f(x, y):
        r = mbqm(wrap_int32((x - z1) * (y - z2)), m, sh)
        r += zo
        return clip_ufunc(r, lo, hi, out=r)

    if dt in QUANT8:
        return lut8_kernel(dt, f)
    if z1 or z2 or zo:
        raise node.unsupported("quantized INT16 MUL requires zero points of 0")

    def run16(x, y):
        r = np.multiply(x.astype(np.int64), y)
        mbqm_inplace(r, m, sh)
        clip_ufunc(r, lo, hi, out=r)
        return r.astype(I16)
    return scalar_safe(blocked(run16, I16))


def _complex_mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """std::complex<float> products as LiteRT computes them (libgcc's __mulsc3): each float32
    product rounded before the sum (numpy's complex multiply fuses one of them), and a NaN + NaN i
    result involving an infinity recomputed as C99 Annex G says."""
    x, y = np.broadcast_arrays(x, y)
    out = np.empty(x.shape, C64)
    with np.errstate(all="ignore"):
        a, b, c, d = x.real, x.imag, y.real, y.imag
        ac, bd, ad, bc = a * c, b * d, a * d, b * c
        out.real = ac - bd
        out.imag = ad + bc
        redo = np.isnan(out.real) & np.isnan(out.imag)
        if redo.any():
            out[redo] = _annex_g(a[redo], b[redo], c[redo], d[redo],
                                 ac[redo], bd[redo], ad[redo], bc[redo])
    return out


def _annex_g(a, b, c, d, ac, bd, ad, bc) -> np.ndarray:
    def box(v, inf):  # copysign(isinf(v) ? 1 : 0, v) where `inf`
        return np.where(inf, np.copysign(np.isinf(v).astype(np.float32), v), v)

    def zero_nan(v, where):
        return np.where(where & np.isnan(v), np.copysign(np.float32(0), v), v)

    inf_x = np.isinf(a) | np.isinf(b)
    inf_y = np.isinf(c) | np.isinf(d)
    a, b = box(a, inf_x), box(b, inf_x)
    c, d = zero_nan(c, inf_x), zero_nan(d, inf_x)
    c, d = box(c, inf_y), box(d, inf_y)
    a, b = zero_nan(a, inf_y), zero_nan(b, inf_y)
    overflow = ~(inf_x | inf_y) & (np.isinf(ac) | np.isinf(bd) | np.isinf(ad) | np.isinf(bc))
    a, b, c, d = (zero_nan(v, overflow) for v in (a, b, c, d))
    recalc = inf_x | inf_y | overflow
    inf = np.float32(np.inf)
    re = np.where(recalc, inf * (a * c - b * d), np.float32(np.nan))
    im = np.where(recalc, inf * (a * d + b * c), np.float32(np.nan))
    return _pack(re, im)


def _pack(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    out = np.empty(re.shape, C64)
    out.real, out.imag = re, im
    return out


def _mul_int16_to_8(node: NodeContext, act: int):
    """int16 x int16 -> int8/uint8 (LSTM helper path): F0 product, rounded >> 8, offset."""
    a, b, out = node.input(0), node.input(1), node.outputs[0]
    if b.dtype != I16:
        raise node.unsupported(f"input types {a.type_name} and {b.type_name} differ")
    if a.shape != b.shape:
        raise node.unsupported("broadcasting INT16 inputs to a quantized 8-bit output")
    so, zo = qparams(node, out, "output")
    lo, hi = quantized_activation_range(act, so, zo, out.dtype)

    def run(x, y):
        r = x.astype(np.int64)
        r *= y
        r += 1 << 14
        r >>= 15  # gemmlowp int16 SaturatingRoundingDoublingHighMul; only
        np.minimum(r, 32767, out=r)  # (-32768)^2 gives 32768, which saturates
        rdbpot_inplace(r, 8)
        clip_ufunc(r, lo - zo, hi - zo, out=r)
        r += zo
        return r.astype(out.dtype)
    return scalar_safe(blocked(run, out.dtype))


# --- DIV -----------------------------------------------------------------------------------

@register("DIV", max_version=2, dtypes=("FLOAT32", "INT32", "UINT8", "INT8", "INT16"))
def div(node: NodeContext):
    act = activation(node)
    a, b, out = binary_operands(node, {I32, U8, I8, I16} | float_dtypes())
    dt = a.dtype
    if b.data is not None and dt not in FLOATS:
        zero = qparams(node, b, "input 2")[1] if dt != I32 else 0
        if np.any(b.data == zero):
            raise node.unsupported("division by zero (constant divisor holds zero)")

    if dt in FLOATS:
        clamp = float_clamp(act, dt)

        def run(x, y):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return clamp(np.divide(x, y))
        return run
    if dt == I32:
        def run(x, y):
            # C++ integer division truncates toward zero; a zero divisor fails the invoke (the
            # shape pass's all-zero inputs give 0).
            check_divisor(y)
            with np.errstate(divide="ignore", over="ignore"):
                q = np.floor_divide(x, y)
                q += (q * y != x) & ((x < 0) != (y < 0)) & (y != 0)
            return clamp_int(q, act)
        return scalar_safe(blocked(run, I32))

    s1, z1 = qparams(node, a, "input 1")
    s2, z2 = qparams(node, b, "input 2")
    so, zo = qparams(node, out, "output")
    lo, hi = quantized_activation_range(act, so, zo, dt)
    real = float(np.float32(s1) / np.float32(np.float32(s2) * np.float32(so)))
    m, sh = quantize_multiplier(real)

    if dt in QUANT8:
        def f(x, y):
            sgn, inv, rs = divisor_terms(y - z2)
            return div_core((x - z1) * sgn, inv, rs, m, sh, zo, lo, hi)
        table = lut8_kernel(dt, f)

        def run8(x, y):
            check_divisor(y, z2, "division by zero (divisor equal to its zero point)")
            return table(x, y)
        return run8

    # int16: the divisor-dependent terms are tabulated over all 65536 divisor values.
    t_sgn, t_inv, t_rs = divisor_terms(domain(I16) - z2)

    def run16(x, y):
        check_divisor(y, z2, "division by zero (divisor equal to its zero point)")
        idx = y.view(np.uint16).astype(np.intp)
        x1 = np.multiply(x.astype(np.int64), t_sgn.take(idx))
        return div_core(x1, t_inv.take(idx), t_rs.take(idx), m, sh, zo, lo, hi).astype(I16)
    return scalar_safe(blocked(run16, I16))


def divisor_terms(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sign, GetReciprocal(|x2|, 31) multiplier, its shift) of offset divisor values."""
    x2 = np.asarray(x2, np.int64)
    sgn = np.where(x2 < 0, -1, 1)
    x2 = np.abs(x2)
    x2 = np.where(x2 == 0, 1, x2)  # LiteRT rejects divisors equal to the zero point
    clz = 32 - bit_length(x2)
    inv = one_over_one_plus_x_for_x_in_0_1((x2 << clz) - (1 << 31))
    return sgn, inv, 31 - clz


def div_core(x1, inv, recip_shift, m: int, sh: int, zo: int, lo: int, hi: int) -> np.ndarray:
    """reference_ops::DivElementwise after the divisor's sign moved onto x1 (int64 arrays)."""
    x1 = np.asarray(x1, np.int64)
    headroom = bit_length(x1 ^ (x1 >> 63))  # CountLeadingSignBits = 31 - this
    np.subtract(31, headroom, out=headroom)
    r = srdhm(x1 << headroom, inv, saturate=False)  # inv > 0: MBQMGreaterThanOne
    exponent = headroom + recip_shift
    exponent -= sh
    r *= m
    r += 1 << 30
    r >>= 31
    r = rdbpot_x86(r, exponent)
    r += zo
    return clip_ufunc(r, lo, hi, out=r)


def rdbpot_x86(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT as compiled for x86, also for exponents outside [0, 31].

    There the mask (1ll << e) - 1 is truncated to int32 and the int32 shift uses e mod 32 (SAR);
    such elements (e.g. a zero dividend, whose headroom is 31) are patched separately.
    """
    e = np.asarray(exponent, np.int64)
    x, e = np.broadcast_arrays(x, e)
    ec = clip_ufunc(e, 0, 31)
    r = rdbpot_vec(x, ec)
    odd = np.nonzero(ec != e)
    if odd[0].size:
        xo, eo = x[odd], e[odd]
        mask = wrap_int32((np.int64(1) << (eo & 63)) - 1)  # 64-bit SHL masks its count too
        threshold = (mask >> 1) + (xo < 0)
        r[odd] = (xo >> (eo & 31)) + ((xo & mask) > threshold)
    return r


# --- MAXIMUM / MINIMUM ---------------------------------------------------------------------

def _half_operands(node: NodeContext) -> str | None:
    """The type name when both inputs are FLOAT16 or both BFLOAT16 (bfloat16 is held as uint16,
    so dtypes cannot tell it from UINT16), checking the output has it too; else None."""
    a, b = node.input(0), node.input(1)
    if a is None or a.type_name not in ("FLOAT16", "BFLOAT16"):
        return None
    if b is None or len(node.outputs) != 1:
        raise ModelError(f"{node.op.name}: expects 2 inputs and 1 output")
    if b.type != a.type:
        raise node.unsupported(f"input types {a.type_name} and {b.type_name} differ")
    if node.outputs[0].type != a.type:
        raise node.unsupported(f"output type {node.outputs[0].type_name} with input type {a.type_name} "
                               "is not supported")
    broadcast_shape(node, a.shape, b.shape)
    return a.type_name


def _max_min(node: NodeContext, greater: bool):
    half = _half_operands(node)
    if half is not None:
        # `a > b ? a : b` on the values (as float), keeping the chosen operand's bits.
        better = np.greater if greater else np.less

        def run_half(x, y):
            with np.errstate(invalid="ignore"):
                return np.where(better(to_f32(x, half), to_f32(y, half)), x, y)
        return scalar_safe(run_half)
    binary_operands(node, {U8, I8, I16, I32, I64} | float_dtypes())
    # Plain comparison of stored values (quantized operands are not rescaled), and
    # `a > b ? a : b` semantics for NaN.
    a = node.input(0)
    if a.dtype not in FLOATS:
        ufunc = np.maximum if greater else np.minimum
        return scalar_safe(ufunc)
    ufunc = np.fmax if greater else np.fmin

    def run(x, y):
        # `x > y ? x : y`: a NaN x yields y (as fmax does), a NaN y yields NaN.
        r = ufunc(x, y)
        nan_y = np.isnan(y)
        if nan_y.any():
            r = bit_select(nan_y, np.broadcast_to(y, r.shape), r)
        return r
    return scalar_safe(run)


@register("MAXIMUM", max_version=4, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32",
                                           "INT64"))
def maximum(node: NodeContext):
    return _max_min(node, True)


@register("MINIMUM", max_version=4, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32",
                                           "INT64"))
def minimum(node: NodeContext):
    return _max_min(node, False)


# --- SQUARED_DIFFERENCE --------------------------------------------------------------------

@register("SQUARED_DIFFERENCE", max_version=2, dtypes=("FLOAT32", "INT32", "INT8"))
def squared_difference(node: NodeContext):
    a, b, out = binary_operands(node, {I32, I8} | float_dtypes())
    if a.dtype in (F32, F64, I32):
        def run(x, y):
            d = np.asarray(np.subtract(x, y))
            return np.multiply(d, d, out=d)
        return run

    s1, z1 = qparams(node, a, "input 1")
    s2, z2 = qparams(node, b, "input 2")
    so, zo = qparams(node, out, "output")
    left_shift = 7
    twice_max = 2.0 * max(s1, s2)
    if twice_max <= 0:
        raise node.unsupported("input scales must be positive")
    m1, sh1 = smaller_than_one_multiplier(node, s1 / twice_max, "input 1")
    m2, sh2 = smaller_than_one_multiplier(node, s2 / twice_max, "input 2")
    mo, sho = smaller_than_one_multiplier(
        node, twice_max * twice_max / ((1 << (2 * left_shift)) * so), "output")

    def f(x, y):
        d = mbqm((x - z1) << left_shift, m1, sh1) - mbqm((y - z2) << left_shift, m2, sh2)
        r = mbqm(wrap_int32(d * d), mo, sho)
        r += zo
        return clip_ufunc(r, -128, 127, out=r)
    return lut8_kernel(I8, f)


# --- POW -----------------------------------------------------------------------------------

@register("POW", max_version=1, dtypes=("FLOAT32", "INT32"))
def pow_(node: NodeContext):
    a, b, out = binary_operands(node, {I32} | float_dtypes())
    dt = a.dtype
    is_float = dt in FLOATS
    requires_broadcast = a.shape != b.shape

    def integer_exponent(y: np.ndarray) -> int | None:
        """optimized_ops::BroadcastPow4D's fast path: a single near-integer exponent >= 1."""
        if not requires_broadcast or y.size != 1:
            return None
        e = y.reshape(-1)[0]
        if is_float:
            if not np.isfinite(e) or abs(float(e)) >= 2 ** 31:
                return None
            n = int(round_half_away(e))
            if not (abs(np.float32(e) - np.float32(n)) < np.float32(1e-5)):
                return None
        else:
            n = int(e)
        return n if n >= 1 else None

    def repeated_squaring(x: np.ndarray, n: int) -> np.ndarray:
        if n == 1:
            return x.copy()
        r = repeated_squaring(x, n // 2)
        r = np.multiply(r, r, out=r)
        if is_float:
            clip_ufunc(r, -FLT_MAX, FLT_MAX, out=r)
        if n % 2:
            r = np.multiply(x, r, out=r)
            if is_float:
                clip_ufunc(r, -FLT_MAX, FLT_MAX, out=r)
        return r

    def run(x, y):
        if dt == I32 and np.any(y < 0):
            raise InvokeError("POW does not support negative value for int32")
        shape = np.broadcast_shapes(x.shape, y.shape)
        n = integer_exponent(y)
        if n is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                return repeated_squaring(x, n).reshape(shape)
        with np.errstate(all="ignore"):
            if is_float:
                return np.asarray(np.power(x, y), dt).reshape(shape)
            # std::pow(int, int) computes in double; the double -> int32 conversion of an
            # out-of-range value gives INT32_MIN on x86 (cvttsd2si).
            r = np.power(x.astype(np.float64), y.astype(np.float64))
            ok = (r > -2147483649.0) & (r < 2147483648.0)
            r = np.where(ok, np.trunc(np.where(ok, r, 0.0)), INT32_MIN)
            return np.asarray(r.astype(I32)).reshape(shape)
    return run
