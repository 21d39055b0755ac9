"""CONV_2D and DEPTHWISE_CONV_2D reference kernels (LiteRT's tflite/kernels/conv.cc,
depthwise_conv.cc and their reference_ops / reference_integer_ops): the prepare checks, the
registrations and the quantized kernels' prepared parameters.

The kernel bodies are in conv_float.py (float) and conv_integer.py (quantized and hybrid);
geometry, im2col and the bands of output rows they run in are conv_im2col.py's, the
quantization helpers (requantization, multipliers, hybrid input quantization) are
conv_quantization.py's. The names other modules import from here (transpose_conv.py, the
prepared parameters, the xnnpack plugin) are re-exported below.

The quantized kernels first compute their prepared parameters (`quantized_conv_params`: a
frozen prepared.QuantizedConvParams of zero points, per-channel multipliers and shifts, clamp
range, the filter minus its zero point, the bias) and build run() from that object alone; a
delegate reads the same object through prepared.prepared_params. INT4 weights are unpacked to
int8 by the model loader and run the int8 code.

While widening (registry.widening, conformance/float64.py) the float paths take FLOAT64 and
compute in it; the hybrid paths stay float32 and refuse a FLOAT64 input.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import ModelError
from acelera.core.kernels.common import check_same_type, out_size, pad_before  # noqa: F401 (re-exported)
from acelera.core.kernels.conv_float import conv_float as _conv_float
from acelera.core.kernels.conv_float import dw_float as _dw_float
from acelera.core.kernels.conv_im2col import (  # noqa: F401 (re-exported)
    CONV_BAND_ACC_BYTES,
    DW_BAND_BYTES,
    Geometry,
    conv_band_row_bytes,
    grouped_matmul,
    opt,
    row_bands,
    weight_matrix,
)
from acelera.core.kernels.conv_integer import conv_hybrid as _conv_hybrid
from acelera.core.kernels.conv_integer import conv_quant as _conv_quant
from acelera.core.kernels.conv_integer import dw_hybrid as _dw_hybrid
from acelera.core.kernels.conv_integer import dw_quant as _dw_quant
from acelera.core.kernels.conv_quantization import (  # noqa: F401 (re-exported)
    F32_EXACT,
    F64_EXACT,
    QUANT_FILTER_TYPES,
    T_FLOAT32,
    T_INT4,
    T_INT8,
    T_INT16,
    T_INT32,
    T_INT64,
    T_UINT8,
    Requantizer,
    asymmetric_quantize,
    asymmetric_quantize_batches,
    bias_vector,
    check_rank4,
    conv_multipliers,
    conv_quantization,
    conv_requantizer,
    dtype_range,
    exact_dtype,
    f32_scale,
    filter_scales,
    finish_float,
    int16_wide,
    max_abs_shifted,
    params_requantizer,
    quantized_filter_scales,
    symmetric_quantize,
    zero_point,
)
from acelera.core.kernels.prepared import QuantizedConvParams, frozen_array
from acelera.core.kernels.registry import Kernel, NodeContext, is_float32, register
from acelera.core.model import Tensor


def _check_filter_type(node: NodeContext, x_t: Tensor, w_t: Tensor, allowed: tuple[int, ...]) -> None:
    if w_t.type not in allowed:
        raise node.unsupported(f"filter type {w_t.type_name} with {x_t.type_name} input is not supported")


def _conv_tensors(node: NodeContext) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """(input, filter, bias or None, output) of a (depthwise) CONV_2D, input and filter rank 4."""
    x_t, w_t, b_t = node.input(0), node.input(1), node.input(2)
    if x_t is None or w_t is None:
        raise ModelError(f"{node.op.name} needs input and filter tensors")
    check_rank4(node, x_t, w_t)
    return x_t, w_t, b_t, node.outputs[0]



# --- CONV_2D ---------------------------------------------------------------------------------

def _check_conv_2d(node: NodeContext) -> tuple:
    """CONV_2D's checks shared by its float and quantized paths: (input, filter, bias, output,
    geometry, groups, activation, output shape)."""
    x_t, w_t, b_t, y_t = _conv_tensors(node)
    o, kh, kw, ci = (int(d) for d in w_t.shape)
    c = int(x_t.shape[3])
    if min(o, kh, kw, ci) <= 0 or min(x_t.shape[1:]) <= 0:
        raise ModelError(f"CONV_2D has empty input {list(x_t.shape)} or filter {list(w_t.shape)}")
    if c % ci:
        raise ModelError(f"input channels {c} are not a multiple of filter channels {ci}")
    groups = c // ci
    if o % groups:
        raise ModelError(f"{o} filters cannot be split into {groups} groups")
    g = Geometry.from_options(node, x_t.shape, kh, kw)
    act = opt(node, "fused_activation_function", 0)
    out_shape = (g.n, g.oh, g.ow, o)
    check_same_type(node, x_t, y_t)
    return x_t, w_t, b_t, y_t, g, groups, act, out_shape


@register("CONV_2D", max_version=8, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
def conv_2d(node: NodeContext) -> Kernel:
    x_t, w_t, b_t, y_t, g, groups, act, out_shape = _check_conv_2d(node)
    if is_float32(x_t):
        xt, wt = x_t.type, w_t.type
        _check_filter_type(node, x_t, w_t, (xt, T_INT8, T_INT4))
        _hybrid_is_float32(node, x_t, w_t)
        bias_vector(node, b_t, out_shape[3], (xt,))
        if wt == xt:
            return _conv_float(node, g, groups, act, out_shape)
        return _conv_hybrid(node, g, groups, act, out_shape)
    return _conv_quant(node, _conv_2d_params(node, x_t, w_t, b_t, y_t, g, groups, act, out_shape))


def quantized_conv_params(node: NodeContext) -> QuantizedConvParams | None:
    """The prepared parameters of a quantized (DEPTHWISE_)CONV_2D node (None for float or
    hybrid input); raises what the reference kernel's prepare raises."""
    if node.op.name == "DEPTHWISE_CONV_2D":
        x_t, w_t, b_t, y_t, g, mult, act, out_shape = _check_depthwise(node)
        return None if is_float32(x_t) else _dw_params(node, x_t, w_t, b_t, y_t, g, mult, act, out_shape)
    x_t, w_t, b_t, y_t, g, groups, act, out_shape = _check_conv_2d(node)
    return None if is_float32(x_t) else _conv_2d_params(node, x_t, w_t, b_t, y_t, g, groups, act, out_shape)


def _conv_2d_params(node: NodeContext, x_t: Tensor, w_t: Tensor, b_t: Tensor | None, y_t: Tensor,
                    g: Geometry, groups: int, act: int, out_shape) -> QuantizedConvParams:
    xt = x_t.type
    o = out_shape[3]
    if xt not in QUANT_FILTER_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    _check_filter_type(node, x_t, w_t, QUANT_FILTER_TYPES[xt])
    if xt == T_INT16:
        wide = int16_wide(node, b_t, o)
    else:
        bias_vector(node, b_t, o, (T_INT32,))
        wide = False
    legacy = xt == T_UINT8
    if not legacy and np.any(w_t.quantization.zero_point != 0):
        raise node.unsupported("INT8 filter zero points must be 0")
    mult, shift, in_zp, _, offset, qmin, qmax = conv_quantization(node, x_t, w_t, b_t, y_t, act, o)
    w_zp = zero_point(w_t) if legacy else 0
    w_const = node.const(1)
    weights = None if w_const is None else np.asarray(w_const, np.int32) - np.int32(w_zp)
    max_w = (float(np.max(np.abs(weights), initial=0)) if weights is not None
             else float(max_abs_shifted(w_t.dtype, w_zp)))
    exact_dtype(g.kh * g.kw * (g.c // groups), max_abs_shifted(x_t.dtype, in_zp), max_w)  # refuses > 2**53
    return _conv_params(node, "CONV_2D", g, groups, 1, x_t, y_t, out_shape, in_zp, offset, w_zp, mult,
                        shift, qmin, qmax, wide, weights)


def _conv_params(node: NodeContext, op: str, g: Geometry, groups: int, mult: int, x_t: Tensor, y_t: Tensor,
                 out_shape, in_zp: int, offset: int, w_zp: int, multiplier: np.ndarray, shift: np.ndarray,
                 qmin: int, qmax: int, wide: bool, weights: np.ndarray | None) -> QuantizedConvParams:
    b_const = node.const(2)
    frozen_mult, frozen_shift = frozen_array(multiplier, np.int64), frozen_array(shift, np.int64)
    assert frozen_mult is not None and frozen_shift is not None  # frozen_array keeps arrays arrays
    n, h, w, c = (int(d) for d in out_shape)
    return QuantizedConvParams(
        op=op, geometry=g, groups=groups, depth_multiplier=mult, input_dtype=np.dtype(x_t.dtype),
        output_dtype=np.dtype(y_t.dtype), output_shape=(n, h, w, c),
        input_zero_point=int(in_zp), output_offset=int(offset), filter_zero_point=int(w_zp),
        multiplier=frozen_mult, shift=frozen_shift,
        qmin=int(qmin), qmax=int(qmax), wide=bool(wide), weights=frozen_array(weights, np.int32),
        bias=None if b_const is None else frozen_array(np.asarray(b_const).reshape(-1), np.int64),
        bias_from_input=node.input(2) is not None and b_const is None)



def _hybrid_is_float32(node: NodeContext, x_t: Tensor, w_t: Tensor) -> None:
    """The hybrid (integer filter) kernels compute in float32: refuse a widened input."""
    if w_t.type != x_t.type and x_t.type != T_FLOAT32:
        raise node.unsupported(f"{w_t.type_name} filter with {x_t.type_name} input is not supported")



# --- DEPTHWISE_CONV_2D -----------------------------------------------------------------------

@register("DEPTHWISE_CONV_2D", max_version=7, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
def depthwise_conv_2d(node: NodeContext) -> Kernel:
    x_t, w_t, b_t, y_t, g, mult, act, out_shape = _check_depthwise(node)
    if is_float32(x_t):
        xt, wt = x_t.type, w_t.type
        bias_vector(node, b_t, out_shape[3], (xt,))
        _check_filter_type(node, x_t, w_t, (xt, T_INT8))
        _hybrid_is_float32(node, x_t, w_t)
        if wt == xt:
            return _dw_float(node, g, mult, act, out_shape)
        return _dw_hybrid(node, g, mult, act, out_shape)
    return _dw_quant(node, _dw_params(node, x_t, w_t, b_t, y_t, g, mult, act, out_shape))


def _check_depthwise(node: NodeContext) -> tuple:
    """DEPTHWISE_CONV_2D's checks shared by its float and quantized paths: (input, filter,
    bias, output, geometry, depth multiplier, activation, output shape)."""
    x_t, w_t, b_t, y_t = _conv_tensors(node)
    one, kh, kw, o = (int(d) for d in w_t.shape)
    c = int(x_t.shape[3])
    if one != 1:
        raise ModelError(f"depthwise filter must have shape [1, kh, kw, c], has {list(w_t.shape)}")
    if min(kh, kw, o) <= 0 or min(x_t.shape[1:]) <= 0:
        raise ModelError(f"DEPTHWISE_CONV_2D has empty input {list(x_t.shape)} or filter {list(w_t.shape)}")
    if o % c:
        raise ModelError(f"filter channels {o} are not a multiple of input channels {c}")
    mult = o // c
    g = Geometry.from_options(node, x_t.shape, kh, kw)
    act = opt(node, "fused_activation_function", 0)
    out_shape = (g.n, g.oh, g.ow, o)
    check_same_type(node, x_t, y_t)
    xt, wt = x_t.type, w_t.type
    if xt in (T_INT16,) or (xt == T_FLOAT32 and wt == T_INT8):
        # These LiteRT kernels index channels with the depth_multiplier *option*.
        dm = opt(node, "depth_multiplier", 1)
        if dm != mult:
            raise node.unsupported(f"depth_multiplier option {dm} does not match the filter "
                                   f"({o} channels for {c} input channels)")
    return x_t, w_t, b_t, y_t, g, mult, act, out_shape


def _dw_params(node: NodeContext, x_t: Tensor, w_t: Tensor, b_t: Tensor | None, y_t: Tensor, g: Geometry,
               mult: int, act: int, out_shape) -> QuantizedConvParams:
    xt = x_t.type
    o = out_shape[3]
    if xt not in QUANT_FILTER_TYPES:
        raise node.unsupported(f"input type {x_t.type_name} is not supported")
    _check_filter_type(node, x_t, w_t, QUANT_FILTER_TYPES[xt])
    bias_vector(node, b_t, o, (T_INT64,) if xt == T_INT16 else (T_INT32,))
    multiplier, shift, in_zp, _, offset, qmin, qmax = conv_quantization(node, x_t, w_t, b_t, y_t, act, o)
    w_zp = zero_point(w_t) if xt == T_UINT8 else 0  # int8/int16: LiteRT uses weights_offset = 0
    w_const = node.const(1)
    weights = None if w_const is None else np.asarray(w_const[0], np.int32) - np.int32(w_zp)
    return _conv_params(node, "DEPTHWISE_CONV_2D", g, 1, mult, x_t, y_t, out_shape, in_zp, offset, w_zp,
                        multiplier, shift, qmin, qmax, xt == T_INT16, weights)
