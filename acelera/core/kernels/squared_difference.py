"""SQUARED_DIFFERENCE with numpy broadcasting (tflite/kernels/squared_difference.cc).

float32 and int32 compute (x - y)^2 (int32 wraps); int8 rescales both inputs to a common
scale (left shift 7), squares the difference in int32 and rescales to the output, tabulated
over all 256x256 input pairs.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.binary_common import (
    F32,
    F64,
    I8,
    I32,
    binary_operands,
    clip_ufunc,
    float_dtypes,
    input_rescale,
    lut8_kernel,
    operand_qparams,
    smaller_than_one_multiplier,
)
from acelera.core.kernels.registry import Kernel, NodeContext, register
from acelera.core.quant import multiply_by_quantized_multiplier_scalar as mbqm
from acelera.core.quant import wrap_int32


@register("SQUARED_DIFFERENCE", max_version=2, dtypes=("FLOAT32", "INT32", "INT8"))
def squared_difference(node: NodeContext) -> Kernel:
    a, b, out = binary_operands(node, {I32, I8} | float_dtypes())
    if a.dtype in (F32, F64, I32):
        def run(x, y):
            d = np.asarray(np.subtract(x, y))
            return np.multiply(d, d, out=d)
        return run

    s1, z1, s2, z2, so, zo = operand_qparams(node, a, b, out)
    left_shift = 7
    twice_max, (m1, sh1), (m2, sh2) = input_rescale(node, s1, s2)
    mo, sho = smaller_than_one_multiplier(
        node, twice_max * twice_max / ((1 << (2 * left_shift)) * so), "output")

    def f(x, y):
        d = mbqm((x - z1) << left_shift, m1, sh1) - mbqm((y - z2) << left_shift, m2, sh2)
        r = mbqm(wrap_int32(d * d), mo, sho)
        r += zo
        return clip_ufunc(r, -128, 127, out=r)
    return lut8_kernel(I8, f)
