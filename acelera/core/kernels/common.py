"""Helpers shared by kernel families: fused activations, padding, quantization parameters."""
from __future__ import annotations

import numpy as np

from acelera.core.model import Tensor
from acelera.core.quant import round_half_away

NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = range(6)
SAME, VALID = 0, 1
ACTIVATION_NAMES = {NONE: "NONE", RELU: "RELU", RELU_N1_TO_1: "RELU_N1_TO_1", RELU6: "RELU6",
                    TANH: "TANH", SIGN_BIT: "SIGN_BIT"}


def float_activation_range(act: int) -> tuple[float, float]:
    """(min, max) of a fused activation in float, TFLite's CalculateActivationRange."""
    return {NONE: (-np.inf, np.inf), RELU: (0.0, np.inf), RELU_N1_TO_1: (-1.0, 1.0),
            RELU6: (0.0, 6.0)}.get(act, (-np.inf, np.inf))


def apply_float_activation(x: np.ndarray, act: int) -> np.ndarray:
    """Apply a fused activation to a float32 array (in place when possible)."""
    if act == NONE:
        return x
    if act == RELU:
        return np.maximum(x, 0, out=x)
    if act == RELU6:
        return np.clip(x, 0, 6, out=x)
    if act == RELU_N1_TO_1:
        return np.clip(x, -1, 1, out=x)
    if act == TANH:
        return np.tanh(x, out=x)
    if act == SIGN_BIT:
        return np.signbit(x).astype(x.dtype)
    raise ValueError(f"unknown fused activation {act}")


def quantized_activation_range(act: int, scale: float, zero_point: int, dtype) -> tuple[int, int]:
    """(min, max) in the quantized domain, TFLite's CalculateActivationRangeQuantized."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)
    scale = np.float32(scale)

    def q(f: float) -> int:
        return int(zero_point) + int(round_half_away(np.float32(f) / scale))

    if act == RELU:
        return max(qmin, q(0.0)), qmax
    if act == RELU6:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if act == RELU_N1_TO_1:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    return qmin, qmax


def out_size(padding: int, size: int, filt: int, stride: int, dilation: int = 1) -> int:
    """Output spatial size, TFLite's ComputeOutSize."""
    eff = (filt - 1) * dilation + 1
    if padding == SAME:
        return (size + stride - 1) // stride
    return (size + stride - eff) // stride


def padding_before_after(padding: int, size: int, filt: int, stride: int, dilation: int = 1) -> tuple[int, int, int]:
    """(out, pad_before, pad_after), TFLite's ComputePaddingHeightWidth for one dimension."""
    out = out_size(padding, size, filt, stride, dilation)
    eff = (filt - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return out, total // 2, total - total // 2


def scale_zp(t: Tensor) -> tuple[float, int]:
    """Per-tensor (scale, zero_point) of a quantized tensor as Python scalars."""
    q = t.quantization
    if not q.is_set:
        return 0.0, 0
    return float(q.scale[0]), int(q.zero_point[0])
