"""L2_NORMALIZATION over the last axis: float32, and uint8/int8 with TFLite's fixed-point path.

Quantized outputs have the fixed scale 1/128 (zero point 128 for uint8, 0 for int8); each
row's inverse norm comes from GetInvSqrtQuantizedMultiplierExp, as in LiteRT's reference.
While widening (registry.widening) the float path takes FLOAT64 and computes in it.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.common import NONE, scale_zp
from acelera.core.kernels.registry import NodeContext, is_float32, register
from acelera.core.kernels.unary import _inv_sqrt_multiplier_exp
from acelera.core.quant import multiply_by_quantized_multiplier

EPSILON = np.float32(1e-6)


@register("L2_NORMALIZATION", max_version=2, dtypes=("FLOAT32", "UINT8", "INT8"))
def l2_normalization(node: NodeContext):
    x, y = node.inputs[0], node.outputs[0]
    if x is None:
        raise node.unsupported("input 0 is missing")
    if node.options.get("fused_activation_function", NONE) != NONE:
        raise node.unsupported("fused activations are not supported")
    if x.dtype != y.dtype or (x.dtype not in (np.dtype(np.uint8), np.dtype(np.int8)) and not is_float32(x)):
        raise node.unsupported(f"input type {x.type_name} with output {y.type_name} is not supported")
    if is_float32(x):
        dt = x.dtype
        eps = dt.type(EPSILON)

        def run(a):
            norm = np.sqrt(np.sum(a * a, axis=-1, keepdims=True, dtype=dt))
            return (a / np.maximum(norm, eps)).astype(dt)
        return run
    out_scale, out_zp = scale_zp(y)
    want_zp = 128 if y.dtype == np.uint8 else 0
    if out_scale != 1.0 / 128.0 or out_zp != want_zp:
        raise node.unsupported(f"quantized output must have scale 1/128 and zero point {want_zp}")
    in_zp = scale_zp(x)[1]

    def run_quantized(a):
        d = a.astype(np.int64)
        d -= in_zp
        acc = np.add.reduce(d * d, axis=-1, keepdims=True)
        mult, shift = _inv_sqrt_multiplier_exp(acc)
        if a.dtype == np.uint8:
            out = multiply_by_quantized_multiplier(128 * d, mult, shift)
            out += 128
            return clip_ufunc(out, 0, 255, out=out).astype(np.uint8)
        shift += 7
        out = multiply_by_quantized_multiplier(d, mult, shift)
        return clip_ufunc(out, -128, 127, out=out).astype(np.int8)
    return run_quantized
