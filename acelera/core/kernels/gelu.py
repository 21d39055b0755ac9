"""GELU (tflite/kernels/activations.cc, internal/reference/gelu.h), exact (erfc) and approximate (tanh).

float32 computes in float32 (float64 while widening, math.erfc for the exact form); float16
(v3) rounds to half after every operation, as Eigen::half arithmetic does, tabulated over all
65536 half values; quantized inputs use LUTPopulate tables (the int16 one interpolated).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.registry import Kernel, NodeContext, is_float32, register
from acelera.core.kernels.unary_common import (
    F32,
    float_kernel,
    half_table,
    libm,
    lut8,
    lut16,
    lut16_expand,
    lut_kernel,
    ndarray_kernel,
    quantized_io,
    unary_io,
)

_SQRT_2_OVER_PI = F32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5))  # M_2_SQRTPI * M_SQRT1_2
_NEG_SQRT1_2 = F32(-math.sqrt(0.5))


_T_SCALE = F32(math.sqrt(0.5) * 0.3275911)
_POLY = tuple(F32(-0.5 * c) for c in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))
_ONE, _ZERO, _MINUS_HALF = F32(1), F32(0), F32(-0.5)


def _gelu_exact_f32(a: np.ndarray) -> np.ndarray:
    """0.5 x erfc(-x / sqrt 2) in float32 as max(x, 0) - 0.5 |x| erfc(|x| / sqrt 2), erfc by
    Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7): error < 1e-7 * max(1, |x|). The
    -0.5 is folded into the polynomial, exp(-z^2) is exp(-x^2 / 2)."""
    ax = np.abs(a)
    t = np.multiply(ax, _T_SCALE)
    t += _ONE
    np.reciprocal(t, out=t)
    p = np.multiply(t, _POLY[0])
    for c in _POLY[1:]:
        p += c
        p *= t
    e = np.square(a)
    e *= _MINUS_HALF
    np.exp(e, out=e)
    p *= e
    p *= ax
    p += np.maximum(a, _ZERO, out=ax)
    return p


def _gelu_exact_f64(a: np.ndarray) -> np.ndarray:
    """0.5 x erfc(-x / sqrt 2) in float64 (math.erfc per element: the float64 answer of the
    float graph, conformance/float64.py, not a hot path)."""
    e = np.frompyfunc(math.erfc, 1, 1)(a * -math.sqrt(0.5))
    return (0.5 * a) * np.asarray(e, np.float64)


def _gelu_approx_f64(a: np.ndarray) -> np.ndarray:
    return 0.5 * a * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a)))


def _gelu_transform(v):
    v = np.asarray(v, F32)
    return (F32(0.5) * v) * libm("erfc")(v * _NEG_SQRT1_2)


def _gelu_approx_transform(v):
    v = np.asarray(v, F32)
    inner = _SQRT_2_OVER_PI * (v + F32(0.044715) * v * v * v)
    return (F32(0.5) * v) * (F32(1) + libm("tanh")(inner))


def _gelu_half(v: np.ndarray, approximate: bool) -> np.ndarray:
    """reference_ops::Gelu<Eigen::half>: every Eigen operation rounds its result to half."""
    def h(a):
        return np.asarray(a, F32).astype(np.float16).astype(F32)

    if approximate:
        cube = h(h(v * v) * v)
        inner = h(h(_SQRT_2_OVER_PI) * h(v + h(h(F32(0.044715)) * cube)))
        return h(h(F32(0.5) * v) * h(F32(1) + h(libm("tanh")(inner))))
    return h(h(F32(0.5) * v) * h(libm("erfc")(h(v * h(_NEG_SQRT1_2)))))


@functools.cache
def _gelu_half_table(approximate: bool) -> np.ndarray:
    return half_table(lambda v: _gelu_half(v, approximate))


@register("GELU", max_version=3, dtypes=("FLOAT32", "FLOAT16", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def gelu(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    x, y = unary_io(node, (np.float32, np.float16, np.uint8, np.int8, np.int16))
    approximate = bool(node.options.get("approximate", False))
    if x.dtype == np.float16:
        table = _gelu_half_table(approximate)
        return lut_kernel(table)
    if x.dtype == np.float64 and is_float32(x):
        return float_kernel(_gelu_approx_f64 if approximate else _gelu_exact_f64)
    if x.dtype == np.float32:
        if approximate:
            def run_a(a):
                return F32(0.5) * a * (F32(1) + np.tanh(_SQRT_2_OVER_PI * (a + F32(0.044715) * a * a * a)))
            return float_kernel(run_a)

        return float_kernel(_gelu_exact_f32)
    qio = quantized_io(node, x, y)
    transform = _gelu_approx_transform if approximate else _gelu_transform
    if x.dtype == np.int16:
        table = lut16_expand(lut16(*qio, transform))
    else:
        table = lut8(*qio, x.dtype, transform)
    return lut_kernel(table)
