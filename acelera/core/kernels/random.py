"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL reference kernels.

Mirrors tflite/kernels/random_ops.cc (which also holds MULTINOMIAL) and the generator it uses,
TSL's Philox4x32-10 (xla/tsl/lib/random/philox_random.h) with its conversions Uint32ToFloat,
Uint64ToDouble and BoxMullerFloat (random_distributions_utils.h).

The generator is seeded at prepare from the `seed`/`seed2` options, which LiteRT narrows to C
ints: the 64-bit key is the sign-extended seed, the upper half of the 128-bit counter the
sign-extended seed2. When both are 0 LiteRT seeds from a random device; so does this kernel.
Each call of the generator encrypts the counter into four uint32 values and increments it;
here a whole invoke's counters are generated at once in vectorized uint32/uint64 arithmetic.

* RANDOM_UNIFORM: one call per four outputs (the unused values of the last call are dropped).
* RANDOM_STANDARD_NORMAL: Box-Muller on pairs of values, one call per four outputs.
* MULTINOMIAL: samples come from a copy of the generator; the generator itself then skips
  batch * round_up(num_samples, 4) * 2 * 256 calls. Each sample takes two uint32 values (a
  52-bit uniform double) and searches the row's double-precision CDF of exp(logit - max).

The state advances only at invoke, never in allocate_tensors' shape pass. Box-Muller needs
libm's logf and sincosf, which are not correctly rounded (glibc: at most 0.82 and 0.56 ulp),
while numpy has no vectorized call into libm: each value is computed in float64 and rounded,
and only where that value lies close enough to a float32 rounding midpoint for libm to round
the other way is libm itself called, element by element (through ctypes). Results then agree
with LiteRT bit for bit; without a loadable libm they may differ by a few ulps.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np

from acelera.core import model as _model
from acelera.core.errors import KernelError, ModelError
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register

_FLOAT32, _INT32, _INT64 = 0, 2, 4
_M32, _M64 = (1 << 32) - 1, (1 << 64) - 1
_W32A, _W32B = 0x9E3779B9, 0xBB67AE85
_M4x32A, _M4x32B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_CHUNK = 1 << 18  # generator calls computed per vectorized block (bounds the temporaries)


class Philox:
    """PhiloxRandom's state: a 64-bit key and a 128-bit counter (Python ints)."""

    def __init__(self, seed_lo: int, seed_hi: int):
        self.key = seed_lo & _M64
        self.counter = (seed_hi & _M64) << 64

    @classmethod
    def from_options(cls, node: NodeContext) -> Philox:
        seed = _c_int(node.options.get("seed", 0) or 0)
        seed2 = _c_int(node.options.get("seed2", 0) or 0)
        if seed == 0 and seed2 == 0:
            seed = int.from_bytes(os.urandom(8), "little")
            seed2 = int.from_bytes(os.urandom(8), "little")
        return cls(seed, seed2)

    def copy(self) -> Philox:
        other = Philox(0, 0)
        other.key, other.counter = self.key, self.counter
        return other

    def generate(self, calls: int) -> np.ndarray:
        """`calls` results of operator(), as a flat uint32 array of 4 * calls values."""
        out = np.empty((max(calls, 0), 4), np.uint32)
        for start in range(0, calls, _CHUNK):
            out[start:start + _CHUNK] = self._block(min(_CHUNK, calls - start))
        return out.reshape(-1)

    def _block(self, calls: int) -> np.ndarray:
        """The next `calls` results as a (calls, 4) array; the counter advances past them."""
        base_lo, base_hi = self.counter & _M64, self.counter >> 64
        lo = np.arange(calls, dtype=np.uint64) + np.uint64(base_lo)  # wraps mod 2**64
        hi = np.uint64(base_hi) + (lo < np.uint64(base_lo)).astype(np.uint64)
        self.counter = (self.counter + calls) & ((1 << 128) - 1)
        m32, s32 = np.uint64(_M32), np.uint64(32)
        c0, c1, c2, c3 = lo & m32, lo >> s32, hi & m32, hi >> s32
        k0, k1 = self.key & _M32, self.key >> 32
        for _ in range(10):
            p0 = _M4x32A * c0
            p1 = _M4x32B * c2
            c0, c1, c2, c3 = ((p1 >> s32) ^ c1 ^ np.uint64(k0), p1 & m32, (p0 >> s32) ^ c3 ^ np.uint64(k1), p0 & m32)
            k0, k1 = (k0 + _W32A) & _M32, (k1 + _W32B) & _M32
        return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)

    def skip(self, count: int) -> None:
        """PhiloxRandom::Skip, including its carry rule (a carry out of count's high word is lost
        when that word is all ones)."""
        count &= _M64
        c = [(self.counter >> (32 * i)) & _M32 for i in range(4)]
        lo, hi = count & _M32, count >> 32
        c[0] = (c[0] + lo) & _M32
        if c[0] < lo:
            hi = (hi + 1) & _M32
        c[1] = (c[1] + hi) & _M32
        if c[1] < hi:
            c[2] = (c[2] + 1) & _M32
            if c[2] == 0:
                c[3] = (c[3] + 1) & _M32
        self.counter = c[0] | c[1] << 32 | c[2] << 64 | c[3] << 96


def _c_int(v: int) -> int:
    """An int64 option narrowed to a C int (two's complement), then widened back."""
    v = int(v) & _M32
    return v - (1 << 32) if v >= 1 << 31 else v


def uint32_to_float(x: np.ndarray) -> np.ndarray:
    """Uint32ToFloat: 23 random mantissa bits as a float in [0, 1)."""
    bits = (x.astype(np.uint32) & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)
    return bits.view(np.float32) - np.float32(1.0)


def uint64_to_double(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Uint64ToDouble: 52 random mantissa bits (20 from x0, 32 from x1) as a double in [0, 1)."""
    man = ((x0.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | x1.astype(np.uint64)
    return (man | np.uint64(1023 << 52)).view(np.float64) - 1.0


_LIBM: dict[str, object] | None = None


def _libm(name: str):
    """libm's float function `name` through ctypes, or None where libm cannot be loaded."""
    global _LIBM
    if _LIBM is None:
        _LIBM = {}
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
            for fn in ("logf", "sinf", "cosf"):
                f = getattr(lib, fn)
                f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
                _LIBM[fn] = f
        except (OSError, AttributeError):
            pass
    return _LIBM.get(name)


def libm_float(name: str, x: np.ndarray, exact: np.ndarray, max_ulp: float) -> np.ndarray:
    """float32 results of libm's `name` (error at most `max_ulp`) at float32 points `x`, given
    their float64 values `exact`: the rounded float64 value unless it lies within
    max_ulp - 0.5 ulp of a rounding midpoint, where libm is asked."""
    r = exact.astype(np.float32)
    fn = _libm(name)
    if fn is None or r.size == 0:
        return r
    ulp = np.spacing(np.nextafter(np.abs(r), np.float32(0)))  # the smaller gap around r
    off = np.abs(exact - r.astype(np.float64)) / ulp.astype(np.float64)
    hard = np.flatnonzero(~(off < 1.0 - max_ulp - 0.02))
    xs = x.reshape(-1)
    flat = r.reshape(-1)
    for i in hard.tolist():
        flat[i] = fn(float(xs[i]))
    return r


def box_muller(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BoxMullerFloat on arrays of uint32 pairs: two standard normal float32 arrays."""
    u1 = np.maximum(uint32_to_float(x0), np.float32(1.0e-7))
    v1 = (2.0 * np.pi * uint32_to_float(x1).astype(np.float64)).astype(np.float32)
    log_u1 = libm_float("logf", u1, np.log(u1.astype(np.float64)), 0.82)
    u2 = np.sqrt(np.float32(-2.0) * log_u1)
    v = v1.astype(np.float64)
    f0 = libm_float("sinf", v1, np.sin(v), 0.5607) * u2
    f1 = libm_float("cosf", v1, np.cos(v), 0.5607) * u2
    return f0, f1


def _check_size(shape, itemsize: int) -> None:
    if int(np.prod(shape, dtype=np.float64)) * itemsize > _model.MAX_TENSOR_BYTES:
        raise KernelError(f"output shape {list(shape)} exceeds the tensor size limit "
                          f"({_model.MAX_TENSOR_BYTES} bytes)")


def _shape_of(value: np.ndarray) -> tuple[int, ...]:
    """GetOutputShapeFromInput: the output shape a 1-D int32 shape tensor holds."""
    shape = tuple(int(v) for v in np.asarray(value).reshape(-1))
    if any(d < 0 for d in shape):
        raise KernelError(f"output shape {list(shape)} has a negative dimension")
    _check_size(shape, 4)
    return shape


def _prepare_random(node: NodeContext, fill) -> Kernel:
    if len(node.inputs) != 1 or len(node.outputs) != 1:
        raise ModelError(f"{node.op.name} takes 1 input and 1 output")
    shape_t, out_t = node.input(0), node.outputs[0]
    if shape_t is None:
        raise ModelError("the shape input is required")
    if shape_t.type != _INT32:
        raise node.unsupported(f"shape of type {shape_t.type_name} is not supported (INT32 only)")
    if len(shape_t.shape) != 1:
        raise ModelError(f"shape must be a 1-D tensor, got shape {list(shape_t.shape)}")
    if out_t.type != _FLOAT32:
        raise node.unsupported(f"output type {out_t.type_name} is not supported (FLOAT32 only)")
    shape_c = node.const(0)
    const_shape = _shape_of(shape_c) if shape_c is not None else None
    declared = out_t.shape
    rng = Philox.from_options(node)

    def run(shape_value: np.ndarray) -> np.ndarray:
        if const_shape is not None:
            shape = const_shape
        elif in_shape_pass():  # placeholder zeros: keep the declared shape until invoke, as LiteRT
            shape = declared   # leaves a dynamic output (consumers are prepared on it)
        else:
            shape = _shape_of(shape_value)
        n = int(np.prod(shape, dtype=np.int64))
        if in_shape_pass() or n == 0:
            return np.zeros(shape, np.float32)
        return fill(rng, n).reshape(shape)

    return run


def _uniform(rng: Philox, n: int) -> np.ndarray:
    return uint32_to_float(rng.generate((n + 3) // 4)[:n])


def _normal(rng: Philox, n: int) -> np.ndarray:
    bits = rng.generate((n + 3) // 4)
    f0, f1 = box_muller(bits[0::2], bits[1::2])
    return np.stack([f0, f1], axis=1).reshape(-1)[:n]


@register("RANDOM_UNIFORM", max_version=1, dtypes=("INT32",))
def random_uniform(node: NodeContext) -> Kernel:
    return _prepare_random(node, _uniform)


@register("RANDOM_STANDARD_NORMAL", max_version=1, dtypes=("INT32",))
def random_standard_normal(node: NodeContext) -> Kernel:
    return _prepare_random(node, _normal)


@register("MULTINOMIAL", max_version=1, dtypes=("FLOAT32",))
def multinomial(node: NodeContext) -> Kernel:
    if len(node.inputs) != 2 or len(node.outputs) != 1:
        raise ModelError("MULTINOMIAL takes 2 inputs and 1 output")
    logits_t, ns_t, out_t = node.input(0), node.input(1), node.outputs[0]
    if logits_t is None or ns_t is None:
        raise ModelError("logits and num_samples are required")
    if logits_t.type != _FLOAT32:
        raise node.unsupported(f"logits type {logits_t.type_name} is not supported (FLOAT32 only)")
    if ns_t.type != _INT32:
        raise node.unsupported(f"num_samples of type {ns_t.type_name} is not supported (INT32 only)")
    if out_t.type not in (_INT32, _INT64):
        raise node.unsupported(f"output type {out_t.type_name} is not supported (INT32 or INT64)")
    if len(logits_t.shape) != 2:
        raise ModelError(f"logits must be 2-D, got shape {list(logits_t.shape)}")
    if logits_t.shape[1] <= 0:
        raise ModelError(f"logits need at least one class, got shape {list(logits_t.shape)}")
    if len(ns_t.shape) != 0:
        raise ModelError(f"num_samples must be a scalar, got shape {list(ns_t.shape)}")
    out_dtype = out_t.dtype
    const_ns = node.const(1)
    if const_ns is not None:
        ns = int(const_ns.reshape(-1)[0])
        if ns < 0:
            raise ModelError(f"num_samples must be non-negative, got {ns}")
        _check_size((logits_t.shape[0], ns), out_dtype.itemsize)
    rng = Philox.from_options(node)
    declared = out_t.shape

    def run(logits: np.ndarray, num_samples: np.ndarray) -> np.ndarray:
        batch = logits.shape[0]
        if in_shape_pass():
            # placeholder zeros for a runtime num_samples: keep the declared size until invoke
            ns = int(const_ns.reshape(-1)[0]) if const_ns is not None else (
                declared[1] if len(declared) == 2 and declared[0] == batch else 0)
            return np.zeros((batch, max(ns, 0)), out_dtype)
        ns = int(np.asarray(num_samples).reshape(-1)[0]) if np.size(num_samples) else 0
        if ns < 0:
            raise KernelError(f"num_samples must be non-negative, got {ns}")
        _check_size((batch, ns), out_dtype.itemsize)
        sampler = rng.copy()
        rng.skip(batch * ((ns + 3) // 4 * 4) * 2 * 256)
        total = batch * ns
        if total == 0:
            return np.zeros((batch, ns), out_dtype)
        bits = sampler.generate((total + 1) // 2)[:2 * total]
        u = uint64_to_double(bits[0::2], bits[1::2]).reshape(batch, ns)
        finite = np.isfinite(logits)
        row_max = np.max(np.where(finite, logits, np.float32(np.finfo(np.float32).min)), axis=1)
        weights = np.where(finite, np.exp(logits.astype(np.float64) - row_max.astype(np.float64)[:, None]), 0.0)
        cdf = np.cumsum(weights, axis=1)
        out = np.empty((batch, ns), out_dtype)
        for b in range(batch):
            out[b] = np.searchsorted(cdf[b], u[b] * cdf[b, -1], side="right")
        return out

    return run
