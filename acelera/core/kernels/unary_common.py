"""What the one-input elementwise kernels share (relu.py, hard_swish.py, gelu.py,
logistic_tanh.py, unary.py, softmax.py, arith.py): the checks of one-input ops, TFLite's
LUTPopulate for 8-bit and interpolated 16-bit tables (tflite/kernels/internal/common.h),
glibc's float math (LiteRT calls expf/tanhf/...; a one-ulp difference can move a table entry)
and the "legacy" per-tensor quantization parameters that TFLite kernels read (`tensor->params`).

8-bit and 16-bit quantized one-input ops are elementwise functions of one integer, so their
prepare evaluates LiteRT's integer algorithm (or its LUTPopulate table) once over the whole
input domain (256 or 65536 values) and run() is a single table lookup (lut_kernel). While
widening (registry.widening) unary_io also takes FLOAT64 where FLOAT32 is allowed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Callable

import numpy as np

from acelera.core.fpstate import fp_errors_ignored
from acelera.core.kernels.common import domain
from acelera.core.kernels.float_formats import ALIASED_TYPES
from acelera.core.kernels.registry import Kernel, NodeContext, float_type_names
from acelera.core.model import Tensor
from acelera.core.quant import INT32_MAX, INT32_MIN, round_half_away

F32 = np.float32


def legacy_qparams(t: Tensor) -> tuple[float, int]:
    """TFLite's `tensor->params`: (scale, zero_point) of per-tensor quantization, else (0, 0).

    Per-channel quantized tensors get (0, 0) (tflite/core/subgraph.cc GetLegacyQuantization),
    which is what kernels reading `params.scale` (PRELU's alpha, for one) really see.
    """
    q = t.quantization
    if q.scale.size != 1 or q.zero_point.size < 1:
        return 0.0, 0
    return float(F32(q.scale[0])), int(q.zero_point[0])


def require_per_tensor(node: NodeContext, *tensors: Tensor | None) -> None:
    for t in tensors:
        if t is not None and not t.quantization.is_set:
            raise node.unsupported(
                f"quantized {t.type_name} tensor '{t.name}' has no quantization parameters")


def check_same_type(node: NodeContext, a: Tensor, b: Tensor) -> None:
    if a.type != b.type:
        raise node.unsupported(f"input type {a.type_name} and output type {b.type_name} differ")


def unary_io(node: NodeContext, allowed: tuple) -> tuple[Tensor, Tensor]:
    """(input, output) of a one-input elementwise op: same type, one of the `allowed` dtypes
    (float64 too where float32 is allowed, while widening: see registry.widening)."""
    x, y = node.inputs[0], node.outputs[0]
    if x is None:
        raise node.unsupported("missing input")
    check_same_type(node, x, y)
    dts = [np.dtype(d) for d in allowed]
    if np.dtype(F32) in dts and len(float_type_names()) > 1:
        dts.append(np.dtype(np.float64))
    if x.dtype not in dts or x.type_name in ALIASED_TYPES:
        raise node.unsupported(f"input type {x.type_name} is not supported")
    return x, y


def wrap16(x):
    return ((np.asarray(x, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def clz32(x) -> np.ndarray:
    """CountLeadingZeros of uint32 values (given as int64 holding the bit pattern)."""
    u = np.asarray(x, np.int64) & 0xFFFFFFFF
    _, e = np.frexp(u.astype(np.float64))  # exact: u < 2**53; frexp(0) gives exponent 0
    return (32 - e).astype(np.int64)


def cvt_f2i32(x) -> np.ndarray:
    """static_cast<int32_t>(float) as LiteRT's build computes it: truncation toward zero,
    saturating out-of-range values (the compiler clamps in float before converting; an
    infinite EXP table entry becomes the type's maximum, as LiteRT gives), NaN as INT32_MIN."""
    x = np.asarray(x, np.float64)
    nan = np.isnan(x)
    clipped = np.clip(np.where(nan, 0.0, x), INT32_MIN, INT32_MAX)
    return np.where(nan, INT32_MIN, np.trunc(clipped)).astype(np.int64)


def to_table(values, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(values, info.min, info.max).astype(dtype)


def quantized_io(node: NodeContext, x: Tensor, y: Tensor) -> tuple[float, int, float, int]:
    """(scale, zero point) of a quantized one-input op's input and output (legacy_qparams),
    both required to be quantized."""
    require_per_tensor(node, x, y)
    return (*legacy_qparams(x), *legacy_qparams(y))


def lut_kernel(table: np.ndarray) -> Kernel:
    """The kernel of an 8/16-bit elementwise op tabulated over domain(dtype)."""
    take, u8, u16 = table.take, np.dtype(np.uint8), np.dtype(np.uint16)

    def run(a: np.ndarray) -> np.ndarray:
        return take(a.view(u8 if a.dtype.itemsize == 1 else u16))  # lut_apply without np.take's wrapper
    return run


def ndarray_kernel(prepare):
    """Wrap a prepare function so its kernel always returns an ndarray (numpy ufuncs and
    fancy indexing return scalars for 0-d inputs)."""
    @functools.wraps(prepare)
    def wrapped(node: NodeContext):
        fn = prepare(node)
        if getattr(fn, "returns_ndarray", False):
            return fn

        def run(*args):
            r = fn(*args)
            return r if type(r) is np.ndarray else np.asarray(r)
        return run
    return wrapped


def float_kernel(fn):
    """A float32 kernel written with in-place numpy ops: give it >= 1-D arrays (ufuncs on
    0-d arrays return scalars, which `out=` rejects) and silence IEEE warnings (inf/NaN
    results are LiteRT's too)."""
    def run(a: np.ndarray) -> np.ndarray:
        if a.ndim and fp_errors_ignored():  # inside an invoke: the executor silenced them
            return fn(a)
        with np.errstate(all="ignore"):
            if a.ndim == 0:
                return fn(a.reshape(1)).reshape(())
            return fn(a)
    run.returns_ndarray = True  # type: ignore[attr-defined]
    return run


# --- glibc math, called like LiteRT's C++ does -----------------------------------------

def _load_libm():
    for name in (ctypes.util.find_library("m"), "libm.so.6"):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                pass
    return None


_LIBM = _load_libm()


def _erfc64(x: np.ndarray) -> np.ndarray:
    """erfc in float64 (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7)."""
    x = np.asarray(x, np.float64)
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277)))))))))
    r = t * np.exp(poly)
    return np.where(x >= 0, r, 2.0 - r)


_NUMPY_MATH = {"exp": np.exp, "expm1": np.expm1, "tanh": np.tanh, "log": np.log,
               "sqrt": np.sqrt, "erfc": _erfc64}


def libm(name: str, single: bool = True) -> Callable[[np.ndarray], np.ndarray]:
    """Elementwise libm function: `libm('exp')` is expf (float32), `libm('exp', False)` exp.

    Used only at prepare time to build lookup tables (a Python loop over at most 1,539
    values); falls back to numpy where no C math library can be loaded.
    """
    ctype, dt = (ctypes.c_float, np.float32) if single else (ctypes.c_double, np.float64)
    fn = None
    if _LIBM is not None:
        try:
            fn = getattr(_LIBM, name + ("f" if single else ""))
            fn.restype = ctype
            fn.argtypes = [ctype]
        except AttributeError:
            fn = None

    def call(x):
        x = np.asarray(x, dt)
        if fn is None:
            with np.errstate(all="ignore"):
                return np.asarray(_NUMPY_MATH[name](x), dt)
        return np.array([fn(v) for v in x.ravel().tolist()], dt).reshape(x.shape)
    return call


def half_table(fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """`fn` (float32 in, float32 out) over every float16 value, rounded to float16: an
    elementwise float16 op is a function of 16 bits, so the table (used with lut_apply)
    holds exactly what computing each value in float and storing it as half gives."""
    v = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(F32)
    with np.errstate(all="ignore"):
        return np.asarray(fn(v), F32).astype(np.float16)


# --- LUTPopulate (tflite/kernels/internal/common.h) --------------------------------------

def lut8(in_scale: float, in_zp: int, out_scale: float, out_zp: int, dtype,
         transform: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """LUTPopulateInt8: a 256-entry table over domain(dtype); `transform` works in float32."""
    info = np.iinfo(dtype)
    vals = domain(dtype)
    with np.errstate(all="ignore"):
        deq = F32(in_scale) * (vals - in_zp).astype(F32)
        t = np.asarray(transform(deq), F32)
        inverse_scale = F32(1) / F32(out_scale)
        rescaled = round_half_away(t * inverse_scale)
        q = cvt_f2i32(rescaled + F32(out_zp))
    return np.clip(q, info.min, info.max).astype(dtype)


def _lut16_int(v, ft) -> np.ndarray:
    """static_cast<int16_t>(std::min(std::max(v, -32768), 32767)) with NaN giving 0."""
    v = np.asarray(v, np.float64)
    nan = np.isnan(v)
    c = np.clip(np.where(nan, 0.0, v), -32768.0, 32767.0)
    return np.where(nan, 0, np.trunc(c)).astype(np.int64)


def lut16(in_scale: float, in_zp: int, out_scale: float, out_zp: int,
          transform: Callable[[np.ndarray], np.ndarray], ftype=np.float32) -> np.ndarray:
    """LUTPopulateInt16<FloatT>: the 513-entry interpolation table (FloatT = ftype)."""
    ft = np.dtype(ftype).type
    with np.errstate(all="ignore"):
        in_scale, out_scale = ft(in_scale), ft(out_scale)
        input_min = in_scale * ft(-32768 - in_zp)
        input_max = in_scale * ft(32767 - in_zp)
        output_min = out_scale * ft(-32768 - out_zp)
        output_max = out_scale * ft(32767 - out_zp)
        step = (input_max - input_min) / ft(512)
        half_step = step / ft(2)
        inv = ft(65536) / (output_max - output_min)
        i = np.arange(512).astype(ft)
        xs = (input_min + i * step).astype(ft)
        val = np.asarray(transform(xs), ft)
        val_mid = np.asarray(transform((xs + half_step).astype(ft)), ft)
        val_next = np.asarray(transform((input_min + (i + ft(1)) * step).astype(ft)), ft)
        sample = round_half_away(val * inv)
        mid_interp = round_half_away((val_next * inv + round_half_away(val * inv)) / ft(2))
        mid_val = round_half_away(val_mid * inv)
        bias = round_half_away((mid_interp - mid_val) / ft(2))
        lut = np.empty(513, np.int64)
        lut[:512] = _lut16_int((sample - bias).astype(ft), ft)
        last = round_half_away(np.asarray(transform(np.array([input_max], ft)), ft) * inv)
        lut[512] = _lut16_int(last, ft)[0]
    return lut


def lut16_expand(lut: np.ndarray) -> np.ndarray:
    """LUTLookup(int16, lut) for every int16 value, as a table over domain(int16)."""
    v = domain(np.int16)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = lut[index]
    slope = wrap16(lut[index + 1] - lut[index])
    delta = (slope * offset + 64) >> 7
    return wrap16(base + delta).astype(np.int16)
