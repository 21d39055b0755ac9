"""The prepared quantization parameters of the quantized CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED reference kernels (conv.py, fully_connected.py), as a typed contract.

The reference kernels compute these once at prepare (LiteRT's Prepare in
tflite/kernels/conv.cc, depthwise_conv.cc and fully_connected.cc: zero points, per-channel
multipliers and shifts or the double effective scales, activation range) and build their
run() from the very same object, so a delegate that builds its own kernels from
`prepared_params(ctx)` computes what the reference computes.

Arrays in these objects are read-only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from acelera.core.errors import AceleraError

if TYPE_CHECKING:
    from acelera.core.kernels.conv import Geometry
    from acelera.core.kernels.registry import NodeContext


def frozen_array(a: np.ndarray | None, dtype=None) -> np.ndarray | None:
    """A read-only contiguous copy of `a` (None stays None)."""
    if a is None:
        return None
    out = np.array(a, dtype=dtype, copy=True, order="C")
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class QuantizedConvParams:
    """A quantized CONV_2D or DEPTHWISE_CONV_2D (uint8, int8 or int16x8).

    acc[o] = sum over taps of (x - input_zero_point) * weights (padded taps count 0), + bias[o]
    (int32 wrapping accumulator, or int64 when `wide`); then
    clamp(MultiplyByQuantizedMultiplier(acc, multiplier[o], shift[o]) + output_offset, qmin, qmax).
    """

    op: str  #: "CONV_2D" or "DEPTHWISE_CONV_2D"
    geometry: "Geometry"
    groups: int  #: CONV_2D filter groups (1 for DEPTHWISE_CONV_2D)
    depth_multiplier: int  #: output channels per input channel (DEPTHWISE_CONV_2D; 1 otherwise)
    input_dtype: np.dtype
    output_dtype: np.dtype
    output_shape: tuple[int, int, int, int]
    input_zero_point: int
    output_offset: int  #: added after the requantization (0 for int16, which needs zero points of 0)
    filter_zero_point: int  #: subtracted from the filter (uint8 only; int8/int16 filters use 0)
    multiplier: np.ndarray  #: int64 (channels,), gemmlowp quantized multipliers
    shift: np.ndarray  #: int64 (channels,), > 0 left shifts, < 0 rounding right shifts
    qmin: int  #: activation clamp in the output's integer domain
    qmax: int
    wide: bool  #: int16x8 with an int64 accumulator (int64 bias) instead of int32
    #: the constant filter minus filter_zero_point as int32: CONV_2D (o, kh, kw, cin / groups),
    #: DEPTHWISE_CONV_2D (kh, kw, o); None when the filter is not a constant
    weights: np.ndarray | None
    bias: np.ndarray | None  #: the constant bias as int64 (channels,); None if absent or not constant
    bias_from_input: bool  #: the node has a bias tensor that is not a constant (read at run time)

    @property
    def channels(self) -> int:
        return self.output_shape[3]


@dataclass(frozen=True)
class QuantizedFCParams:
    """A quantized FULLY_CONNECTED (uint8, int8, int16x8 or int16x16).

    acc[b, u] = sum_k (x[b, k] - input_zero_point) * weights[u, k] + bias[u], in int32 wrapping
    (`acc32`) or int64; then either round(double(acc) * effective_scale[u]) (the reference's
    double-precision path) or, for int16 weights (`fixed_point`), the int64
    MultiplyByQuantizedMultiplier(acc, multiplier, shift); + output_zero_point, clamped to
    [qmin, qmax].
    """

    units: int
    depth: int
    input_dtype: np.dtype
    weights_type: str  #: TFLite type name of the filter ("INT8", "INT4", "INT2", "UINT8", "INT16")
    output_dtype: np.dtype
    keep_num_dims: bool
    input_zero_point: int
    output_zero_point: int
    weights_offset: int  #: subtracted from the filter (per-tensor zero point; 0 per channel)
    per_channel: bool
    fixed_point: bool
    #: float64 (units,) per channel or (1,): in_scale * filter_scale / out_scale (not fixed_point)
    effective_scale: np.ndarray | None
    multiplier: np.ndarray | None  #: int64 (units,) or (1,) (fixed_point only)
    shift: np.ndarray | None
    qmin: int
    qmax: int
    acc32: bool  #: int32 wrapping accumulator (int64 otherwise)
    weights: np.ndarray | None  #: the constant filter minus weights_offset, int32 (units, depth)
    bias: np.ndarray | None  #: the constant bias as int64 (units,); None if absent or not constant
    bias_from_input: bool
    bias_type: str | None  #: TFLite type name of the bias tensor, None without one


PreparedParams = QuantizedConvParams | QuantizedFCParams
COVERED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def prepared_params(ctx: "NodeContext", why: list[str] | None = None) -> PreparedParams | None:
    """The prepared quantization parameters of a quantized CONV_2D, DEPTHWISE_CONV_2D or
    FULLY_CONNECTED node, with its filter and bias constants: exactly what its reference kernel
    runs. None when this node's variant is not covered (another op, float or hybrid input, a
    filter or bias that is not constant, or a node the reference kernel refuses); the reason is
    then appended to `why` when given."""
    reason = _uncovered(ctx)
    if isinstance(reason, str):
        if why is not None:
            why.append(reason)
        return None
    return reason


def _uncovered(ctx: "NodeContext") -> PreparedParams | str:
    """prepared_params, or why there are none."""
    op = ctx.op.name
    if op not in COVERED_OPS:
        return f"{op} has no prepared quantization parameters"
    p: PreparedParams | None
    try:
        if op == "FULLY_CONNECTED":
            from acelera.core.kernels.fully_connected import quantized_fc_params

            p = quantized_fc_params(ctx)
        else:
            from acelera.core.kernels.conv import quantized_conv_params

            p = quantized_conv_params(ctx)
    except AceleraError as e:
        return f"the reference kernel refuses this node: {e}"
    if p is None:
        x = ctx.inputs[0]
        return f"{op} with {x.type_name if x is not None else 'no'} input is not quantized"
    if p.weights is None:
        return "the filter is not a constant"
    if p.bias_from_input:
        return "the bias is not a constant"
    return p
