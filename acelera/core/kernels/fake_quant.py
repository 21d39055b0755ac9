"""FAKE_QUANT reference kernel (float32).

Mirrors tflite/kernels/fake_quant.cc, reference_ops::FakeQuant (internal/reference/
reference_ops.h) and NudgeQuantizationRange / FakeQuantizeArray
(internal/quantization_util.cc), all in float32 as LiteRT computes them:

    scale = (max - min) / (2**num_bits - 1)
    zero_point = clamp(round(0 - min / scale), 0, 2**num_bits - 1)   (held in a uint16)
    nudged_min = (0 - zero_point) * scale, nudged_max = (qmax - zero_point) * scale
    out = round((clamp(x, nudged_min, nudged_max) - nudged_min) * (1 / scale)) * scale + nudged_min

round is std::round (halves away from zero); a NaN input clamps to nudged_min as std::max /
std::min order their comparisons. LiteRT refuses narrow_range at prepare, and so does this
kernel. num_bits must be in 1..30 (LiteRT computes 1 << num_bits without a check).
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import ModelError
from acelera.core.kernels.registry import Kernel, NodeContext, register
from acelera.core.quant import round_half_away

_FLOAT32 = 0


def nudge(rmin: float, rmax: float, num_bits: int) -> tuple[np.float32, np.float32, np.float32]:
    """NudgeQuantizationRange for quant_min 0: (nudged_min, nudged_max, nudged_scale)."""
    f32 = np.float32
    qmin, qmax = f32(0), f32((1 << num_bits) - 1)
    with np.errstate(all="ignore"):
        scale = (f32(rmax) - f32(rmin)) / (qmax - qmin)
        zp_from_min = qmin - f32(rmin) / scale
        if zp_from_min < qmin:
            zp = 0
        elif zp_from_min > qmax:
            zp = ((1 << num_bits) - 1) & 0xFFFF
        else:
            r = round_half_away(np.asarray(zp_from_min, np.float32))
            zp = int(r) & 0xFFFF if np.isfinite(r) else 0
        zp_f = f32(zp)
        return (qmin - zp_f) * scale, (qmax - zp_f) * scale, scale


@register("FAKE_QUANT", max_version=2, dtypes=("FLOAT32",))
def fake_quant(node: NodeContext) -> Kernel:
    if len(node.inputs) != 1 or len(node.outputs) != 1:
        raise ModelError("FAKE_QUANT takes 1 input and 1 output")
    x_t, out_t = node.input(0), node.outputs[0]
    if x_t is None:
        raise ModelError("the input is required")
    if x_t.type != _FLOAT32:
        raise node.unsupported(f"input type {x_t.type_name} is not supported (FLOAT32 only)")
    if out_t.type != x_t.type:
        raise node.unsupported(f"output type {out_t.type_name} differs from input type {x_t.type_name}")
    o = node.options
    if o.get("narrow_range"):
        raise node.unsupported("narrow_range FakeQuant is not supported at runtime (as in LiteRT)")
    num_bits = int(o.get("num_bits", 0) or 0)
    if not 1 <= num_bits <= 30:
        raise node.unsupported(f"num_bits {num_bits} is not supported (1..30)")
    nmin, nmax, scale = nudge(float(o.get("min", 0.0) or 0.0), float(o.get("max", 0.0) or 0.0), num_bits)
    with np.errstate(all="ignore"):
        inv = np.float32(1.0) / scale

    def run(x: np.ndarray) -> np.ndarray:
        clamped = np.where(x > nmin, x, nmin)  # std::max(nmin, x): NaN -> nmin
        clamped = np.asarray(np.where(clamped < nmax, clamped, nmax), np.float32)
        clamped -= nmin
        clamped *= inv
        q = np.asarray(round_half_away(clamped), np.float32)
        q *= scale
        q += nmin
        return q

    return run
