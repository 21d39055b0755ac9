"""LOGISTIC and TANH (tflite/kernels/activations.cc, internal/reference/{logistic,tanh}.h and
their integer variants).

float32 computes in float32 (float64 while widening); float16 and bfloat16 compute each value
in float32 (tanhf; LOGISTIC's reference formula with its cut-offs and expf) and round it once
to the 16-bit type, tabulated over every bit pattern. 8-bit inputs use LUTPopulate tables;
int16 inputs interpolate LiteRT's sigmoid table in fixed point, evaluated over all 65536
inputs in prepare.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from acelera.core.fpstate import fp_errors_ignored
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.common import domain
from acelera.core.kernels.float_formats import table16
from acelera.core.kernels.registry import Kernel, NodeContext, is_float32, register
from acelera.core.kernels.unary_common import (
    F32,
    check_same_type,
    float_kernel,
    legacy_qparams,
    libm,
    lut8,
    lut_kernel,
    ndarray_kernel,
    quantized_io,
    unary_io,
    wrap16,
)
from acelera.core.model import Tensor
from acelera.core.quant import round_half_away, wrap_int32

# sigmoid(i / 24) in 0.16 fixed point (tflite/kernels/internal/common.h sigmoid_table_uint16):
# the int16 LOGISTIC and TANH kernels interpolate in this table; its entries are not a
# closed-form rounding of sigmoid, so they are data here.
_SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535], np.int64)


def _checked_log2(x: float) -> tuple[bool, int]:
    """CheckedLog2 in float32 (logf)."""
    logf = libm("log")
    with np.errstate(all="ignore"):
        x_log2 = F32(logf(np.array([x], F32))[0] * (F32(1.0) / F32(math.log(2.0))))
        rounded = F32(round_half_away(np.array([x_log2], F32))[0])
        frac = F32(x_log2 - rounded)
    if not np.isfinite(rounded):
        return False, 0
    return bool(abs(frac) < F32(1e-3)), int(rounded)


def _int16_input_rescale(node: NodeContext, x: Tensor, y: Tensor, pot_shifts: tuple[int, ...]) -> tuple[int, int]:
    """TanhPrepare/SigmoidPrepare int16: (input_multiplier, input_left_shift)."""
    in_s, in_zp = legacy_qparams(x)
    out_s, out_zp = legacy_qparams(y)
    if in_zp != 0 or out_zp != 0:
        raise node.unsupported("int16 input and output need zero points of 0")
    pot, log2 = _checked_log2(in_s)
    left_shift = 12 + log2
    multiplier = 0
    if not (pot and left_shift in pot_shifts):
        m = float(F32(in_s)) * 4096.0 * 3.0
        left_shift = 0
        while m <= 32767.0 / 2.0 and left_shift <= 30:
            left_shift += 1
            m *= 2.0
        multiplier = wrap_int32(int(m))
    ok, out_log2 = _checked_log2(out_s)
    if not ok or out_log2 != -15:
        raise node.unsupported("int16 output scale must be 2**-15")
    if multiplier == 0:  # power-of-two case
        multiplier, left_shift = 3 << left_shift, 0
    return multiplier, left_shift


def _int16_scaled_input(multiplier: int, left_shift: int) -> np.ndarray:
    rnd = (1 << (left_shift - 1)) if left_shift > 0 else 0
    return wrap_int32(domain(np.int16) * multiplier + rnd) >> left_shift


def _logistic_int16_table(multiplier: int, left_shift: int) -> np.ndarray:
    d = _int16_scaled_input(multiplier, left_shift)
    a = np.abs(d)
    uh = a >> 9
    sat = uh >= 255
    uhc = np.minimum(uh, 254)
    ua, ub = _SIGMOID_TABLE[uhc], _SIGMOID_TABLE[uhc + 1]
    res = np.where(sat, 0x7FFF << 10, (ua << 9) + (a & 0x1FF) * (ub - ua))
    res = np.where(d >= 0, res + (1 << 9), (1 << 25) - res + (1 << 9) - 1) & 0xFFFFFFFF
    return wrap16(res >> 10).astype(np.int16)


def _tanh_int16_table(multiplier: int, left_shift: int) -> np.ndarray:
    d = _int16_scaled_input(multiplier, left_shift)
    a = np.abs(d)
    uh = a >> 8
    sat = uh >= 255
    uhc = np.minimum(uh, 254)
    ua, ub = _SIGMOID_TABLE[uhc], _SIGMOID_TABLE[uhc + 1]
    res = wrap_int32(np.where(sat, 0xFFFF << 8, (ua << 8) + (a & 0xFF) * (ub - ua)))
    res = np.where(d >= 0, res - (1 << 23) + (1 << 7), -res + (1 << 23) + (1 << 7) - 1)
    return wrap16(wrap_int32(res) >> 8).astype(np.int16)


def _sigmoid_transform(v):
    v = np.asarray(v, F32)
    with np.errstate(all="ignore"):
        return F32(1) / (F32(1) + libm("exp")(-v))


def _logistic_reference(v: np.ndarray) -> np.ndarray:
    """reference_ops::Logistic in float32: 1 above 16.619..., expf(x) below -9, else
    1 / (1 + expf(-x))."""
    v = np.asarray(v, F32)
    with np.errstate(all="ignore"):
        mid = F32(1) / (F32(1) + libm("exp")(-v))
        return np.where(v > F32(16.619047164916992188), F32(1), np.where(v < F32(-9), libm("exp")(v), mid))


@functools.cache
def _half_table(op: str, type_name: str) -> np.ndarray:
    """float16/bfloat16 LOGISTIC or TANH over every bit pattern."""
    return table16(_logistic_reference if op == "LOGISTIC" else libm("tanh"), type_name)


def _half_kernel(node: NodeContext, op: str) -> Kernel | None:
    """The float16/bfloat16 kernel of LOGISTIC or TANH, or None for other input types."""
    x, y = node.inputs[0], node.outputs[0]
    if x is None or x.type_name not in ("FLOAT16", "BFLOAT16"):
        return None
    check_same_type(node, x, y)
    return lut_kernel(_half_table(op, x.type_name))


@register("LOGISTIC", max_version=3, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def logistic(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    half = _half_kernel(node, "LOGISTIC")
    if half is not None:
        return half
    x, y = unary_io(node, (np.float32, np.uint8, np.int8, np.int16))
    if is_float32(x):
        one = np.asarray(x.dtype.type(1))  # a 0-d array: ufuncs convert scalar operands each call
        negative, exp, add, reciprocal = np.negative, np.exp, np.add, np.reciprocal

        def sigmoid(a):
            # 1 / (1 + exp(-x)) everywhere: LiteRT's cut-offs (1 above 16.62, exp(x) below -9)
            # differ from it by less than 6.1e-8, far inside float tolerance.
            t = negative(a)
            exp(t, t)  # positional outputs: a ufunc parses them faster than out=
            add(t, one, t)
            return reciprocal(t, t)
        general = float_kernel(sigmoid)

        def run(a):
            if a.ndim and fp_errors_ignored():  # float_kernel's fast path, one call less
                return sigmoid(a)
            return general(a)
        run.returns_ndarray = True  # type: ignore[attr-defined]
        return run
    qio = quantized_io(node, x, y)
    out_s = qio[2]
    if x.dtype == np.int16:
        if out_s != 1.0 / 32768:
            raise node.unsupported("int16 LOGISTIC needs an output scale of 1/32768")
        table = _logistic_int16_table(*_int16_input_rescale(node, x, y, (0,)))
    else:
        if out_s != 1.0 / 256:
            raise node.unsupported("8-bit LOGISTIC needs an output scale of 1/256")
        table = lut8(*qio, x.dtype, _sigmoid_transform)
    return lut_kernel(table)


@register("TANH", max_version=3, dtypes=("FLOAT32", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16"))
@ndarray_kernel
def tanh(node: NodeContext) -> Kernel:
    check_arity(node, 1, 1)
    half = _half_kernel(node, "TANH")
    if half is not None:
        return half
    x, y = unary_io(node, (np.float32, np.uint8, np.int8, np.int16))
    if is_float32(x):
        tanh_, asarray = np.tanh, np.asarray

        def run(a):
            r = tanh_(a)
            return r if a.ndim else asarray(r)  # a ufunc returns a scalar for a 0-d input
        run.returns_ndarray = True  # type: ignore[attr-defined]
        return run
    qio = quantized_io(node, x, y)
    if x.dtype == np.int16:
        table = _tanh_int16_table(*_int16_input_rescale(node, x, y, (0, 1)))
    else:
        table = lut8(*qio, x.dtype, libm("tanh"))
    return lut_kernel(table)
