"""Helpers shared by kernel families: fused activations, convolution output sizes and padding,
type checks, quantization parameters, lookup tables over 8/16-bit domains."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from acelera.core.errors import ModelError
from acelera.core.kernels.registry import NodeContext
from acelera.core.model import Tensor
from acelera.core.quant import round_half_away

FLT_MAX = float(np.finfo(np.float32).max)

NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = range(6)
SAME, VALID = 0, 1
ACTIVATION_NAMES = {NONE: "NONE", RELU: "RELU", RELU_N1_TO_1: "RELU_N1_TO_1", RELU6: "RELU6",
                    TANH: "TANH", SIGN_BIT: "SIGN_BIT"}


def float_activation_range(act: int) -> tuple[float, float]:
    """(min, max) of a fused activation in float, TFLite's CalculateActivationRange."""
    return {NONE: (-np.inf, np.inf), RELU: (0.0, np.inf), RELU_N1_TO_1: (-1.0, 1.0),
            RELU6: (0.0, 6.0)}.get(act, (-np.inf, np.inf))


def float_activation_bounds(act: int) -> tuple[float, float]:
    """TFLite's CalculateActivationRange as kernels that always clamp use it: NONE (and TANH,
    SIGN_BIT) clamp to +-FLT_MAX, so +-inf becomes +-FLT_MAX (NaN passes through)."""
    if act == RELU:
        return 0.0, FLT_MAX
    if act == RELU6:
        return 0.0, 6.0
    if act == RELU_N1_TO_1:
        return -1.0, 1.0
    return -FLT_MAX, FLT_MAX


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
    """(min, max) in the quantized domain, TFLite's CalculateActivationRangeQuantized, with
    std::round done exactly. A ModelError where the output scale puts an activation bound
    outside int32 (LiteRT's float -> int32 conversion would be undefined there)."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)
    s = np.float32(scale)

    def q(f: float) -> int:
        with np.errstate(all="ignore"):
            v = round_half_away(np.asarray(np.float32(f) / s))
        if not np.isfinite(v) or not (-2.0 ** 31 <= float(v) <= 2.0 ** 31 - 1):
            raise ModelError(f"output scale {scale} cannot represent the fused activation range")
        return int(zero_point) + int(v)

    if act == RELU:
        return max(qmin, q(0.0)), qmax
    if act == RELU6:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if act == RELU_N1_TO_1:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    return qmin, qmax


def domain(dtype) -> np.ndarray:
    """Every value of an 8/16-bit integer dtype, ordered by its unsigned bit pattern, as int64.

    A table computed over `domain(dtype)` is indexed by `x.view(uint8/uint16)` (see lut_apply).
    """
    dtype = np.dtype(dtype)
    u = np.arange(1 << (8 * dtype.itemsize), dtype=np.uint8 if dtype.itemsize == 1 else np.uint16)
    return u.view(dtype).astype(np.int64)


def lut_apply(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """table[x] for an 8/16-bit integer array x, with `table` built over domain(x.dtype)."""
    return np.take(table, x.view(np.uint8 if x.dtype.itemsize == 1 else np.uint16))


def out_size(padding: int, size: int, filt: int, stride: int, dilation: int = 1) -> int:
    """Output spatial size, TFLite's ComputeOutSizeChecked (C++ division truncates toward
    zero); a ModelError for an unknown padding or a negative size."""
    eff = (filt - 1) * dilation + 1
    if padding == SAME:
        num = size + stride - 1
    elif padding == VALID:
        num = size + stride - eff
    else:
        raise ModelError(f"unknown padding {padding}")
    value = num // stride if num >= 0 else -((-num) // stride)
    if value < 0:
        raise ModelError(f"negative output size for input {size}, filter {filt}, stride {stride}")
    return value


def pad_before(size: int, filt: int, stride: int, dilation: int, out: int) -> int:
    """TFLite's ComputePaddingWithOffset: total padding // 2 (the offset goes after)."""
    eff = (filt - 1) * dilation + 1
    return max((out - 1) * stride + eff - size, 0) // 2


def check_type(node: NodeContext, t: Tensor, allowed: Iterable[str], what: str = "input") -> None:
    """UnsupportedOpError unless tensor `t` has one of the `allowed` TFLite types."""
    if t.type_name not in allowed:
        raise node.unsupported(f"{what} type {t.type_name} is not supported")


def check_same_type(node: NodeContext, a: Tensor, b: Tensor) -> None:
    """UnsupportedOpError unless output `b` has input `a`'s type."""
    if a.type != b.type:
        raise node.unsupported(f"output type {b.type_name} differs from input type {a.type_name}")


def scale_zp(t: Tensor) -> tuple[float, int]:
    """Per-tensor (scale, zero_point) of a quantized tensor as Python scalars."""
    q = t.quantization
    if not q.is_set:
        return 0.0, 0
    return float(q.scale[0]), int(q.zero_point[0])
