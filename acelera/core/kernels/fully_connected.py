"""FULLY_CONNECTED reference kernel, bit-exact with LiteRT 2.3's BUILTIN_REF kernel.

Semantics follow tflite/kernels/fully_connected.cc (Prepare/EvalQuantized with
kReference) and the reference kernels it calls:

* float32: one float32 matmul against the weights transposed at prepare time.
* int8 / uint8 / int16x8 (int16 activations, int8, int4 or int2 weights), per-tensor or
  per-channel: the reference kernels requantize **in double precision**
  (``round(double(acc) * in_scale * filter_scale / out_scale)``), not with the
  fixed-point multiplier the optimized kernels use. The accumulator is int32 (wrapping)
  except for int16 activations, where it is int64 unless ``quantized_bias_type`` is INT32.
* int16x16 (int16 weights): int64 accumulator, fixed-point
  MultiplyByQuantizedMultiplier(int64) requantization.
* hybrid (float32 input, int8/uint8/int4/int2 weights, float32 output; the packed int4 and
  int2 weights are unpacked to int8 as EvalHybridDense does): inputs are quantized
  per batch row (symmetric, or asymmetric with ``asymmetric_quantize_inputs``) exactly as
  tensor_utils::BatchQuantizeFloats does, accumulated exactly, then scaled in float32.
  With constant weights and asymmetric inputs the whole computation runs in one compiled loop
  (hybrid_native.py, numba); otherwise asymmetric rows come from
  hybrid_quant.portable_asymmetric_rows as q - offset, whose product is LiteRT's
  dot(q) - row_sum * offset.

Integer accumulations run as float64 BLAS matmuls of integer-valued arrays, which are exact
for these operand ranges, and are converted to int64 afterwards; small quantized products with
constant weights and bias run as one compiled loop instead (fc_int_native.py, numba).

The quantized path computes its prepared parameters first (`quantized_fc_params`: a frozen
prepared.QuantizedFCParams) and builds run() from that object alone; a delegate reads the same
object through prepared.prepared_params.
"""
from __future__ import annotations

import math

import numpy as np

from acelera.core import quant
from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.common import (
    ACTIVATION_NAMES,
    NONE,
    RELU,
    RELU6,
    RELU_N1_TO_1,
    apply_float_activation,
    float_activation_range,
    quantized_activation_range,
    scale_zp,
)
from acelera.core.kernels.fc_int_native import fc_f32_kernel, fc_int_kernel
from acelera.core.kernels.hybrid_native import fc_hybrid_kernel
from acelera.core.kernels.hybrid_quant import portable_asymmetric_rows
from acelera.core.kernels.prepared import QuantizedFCParams, frozen_array
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.quant import round_half_away, wrap_int32

INT32_MIN = -(1 << 31)
CLIPPING_ACTIVATIONS = (NONE, RELU, RELU_N1_TO_1, RELU6)
# TensorType codes used by FullyConnectedOptions.quantized_bias_type.
_TT_FLOAT32, _TT_INT32, _TT_INT64 = 0, 2, 4

# weight types FULLY_CONNECTED takes with a float32 input (the hybrid path)
HYBRID_WEIGHTS = ("UINT8", "INT8", "INT4", "INT2")


# --- helpers shared with batch_matmul -----------------------------------------------------
def double_to_int32(r: np.ndarray) -> np.ndarray:
    """static_cast<int32_t>(double) on x86: out-of-range and NaN give INT32_MIN. Returns int64."""
    bad = ~((r >= -2147483648.0) & (r <= 2147483647.0))
    if bad.any():
        r = np.where(bad, float(INT32_MIN), r)
    return r.astype(np.int64)


def quantize_rows(x: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tensor_utils::BatchQuantizeFloats over the last axis of a float32 array.

    Returns (q as float32 integer values, scaling_factor float32, offset int64) with one
    scaling factor / offset per row (all leading axes). A row of zeros quantizes to zeros with
    the formulas below as it is (scale 1, offset 0), so it needs no special case.
    """
    x = np.asarray(x, np.float32)
    if x.shape[-1] == 0:
        lead = x.shape[:-1]
        return (np.zeros(x.shape, np.float32), np.ones(lead, np.float32), np.zeros(lead, np.int64))
    mn = np.minimum.reduce(x, axis=-1)
    mx = np.maximum.reduce(x, axis=-1)
    if not asymmetric:
        # PortableSymmetricQuantizeFloats
        rng = np.maximum(np.abs(mn), np.abs(mx)).reshape(-1)
        zero = rng == 0
        if np.count_nonzero(zero):
            rng[zero] = 1
            sf = rng / np.float32(127)
            sf[zero] = 1
        else:
            sf = rng / np.float32(127)
        q = x * (np.float32(127) / rng).reshape(mn.shape + (1,))
        q = round_half_away(q)
        return clip_ufunc(q, -127, 127, out=q), sf.reshape(mn.shape), np.zeros(mn.shape, np.int64)
    # PortableAsymmetricQuantizeFloats: per-row parameters in double, as the C++ computes them
    if mn.size <= _SCALAR_ROWS:
        params = _asymmetric_params(mn.reshape(-1).tolist(), mx.reshape(-1).tolist())
        if params is not None:
            sf = np.array(params[0], np.float32).reshape(mn.shape)  # double -> float, as the C++
            offset = np.array(params[1], np.int64).reshape(mn.shape)
            return _quantize_asymmetric(x, sf, offset), sf, offset
    rmin = np.minimum(np.float32(0), mn).astype(np.float64)
    rmax = np.maximum(np.float32(0), mx).astype(np.float64)
    same = rmin == rmax
    scale = np.where(same, 1.0, (rmax - rmin) / 255.0)
    zp_from_min = -128.0 - rmin / scale
    zp_from_max = 127.0 - rmax / scale
    err_min = 128.0 + np.abs(rmin / scale)
    err_max = 127.0 + np.abs(rmax / scale)
    zpd = np.where(err_min < err_max, zp_from_min, zp_from_max)
    nudged = np.where(zpd <= -128.0, -128.0, np.where(zpd >= 127.0, 127.0, round_half_away(zpd)))
    offset = np.where(same, 0, nudged).astype(np.int64)
    sf = np.where(same, 1.0, scale).astype(np.float32)
    return _quantize_asymmetric(x, sf, offset), sf, offset


_SCALAR_ROWS = 64  # up to this many rows the asymmetric parameters are computed in Python


def _asymmetric_params(mins: list, maxs: list) -> tuple[list, list] | None:
    """PortableAsymmetricQuantizeFloats' (scale as double, zero point) per row from the row
    minima and maxima, in Python doubles (the C++ arithmetic); None when a value is not finite
    (the vectorized path then gives the same NaN/inf propagation as always)."""
    scales, offsets = [], []
    isfinite, floor = math.isfinite, math.floor
    for lo, hi in zip(mins, maxs):
        if not (isfinite(lo) and isfinite(hi)):
            return None
        rmin, rmax = min(0.0, lo), max(0.0, hi)
        if rmin == rmax:
            scales.append(1.0)
            offsets.append(0)
            continue
        scale = (rmax - rmin) / 255.0
        a, b = rmin / scale, rmax / scale  # a <= 0 <= b
        zpd = -128.0 - a if 128.0 - a < 127.0 + b else 127.0 - b
        if zpd <= -128.0:
            offsets.append(-128)
        elif zpd >= 127.0:
            offsets.append(127)
        else:  # std::round: halves away from zero
            m = -zpd if zpd < 0.0 else zpd
            f = floor(m)
            r = f + 1 if m - f >= 0.5 else f
            offsets.append(-r if zpd < 0.0 else r)
        scales.append(scale)
    return scales, offsets


def _quantize_asymmetric(x: np.ndarray, sf: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """round(offset + x * (1 / scaling_factor)) in float32, clamped to [-128, 127]."""
    inv = np.float32(1) / sf
    q = x * inv[..., None]
    q += offset.astype(np.float32)[..., None]
    q = round_half_away(q)
    return clip_ufunc(q, -128, 127, out=q)


def acc_bound(k: int, a_max: int, b_max: int, bias_max: int = 0) -> int:
    """An upper bound of |accumulator|, to decide whether an int32 accumulator can wrap."""
    return k * a_max * b_max + bias_max


_F32_EXACT = 1 << 24  # float32 represents every integer of magnitude <= 2**24


def dense(x2: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x2 (B, K) @ w.T for w (units, K): a gemv for one row (faster than a 1-row gemm)."""
    if x2.shape[0] == 1:
        return np.dot(w, x2[0])[None, :]
    return x2 @ w.T


class ExactIntMatmul:
    """x @ W.T for integer-valued x (B, K) and weights W (units, K), exactly, as float64.

    float32 BLAS is exact when every partial sum stays below 2**24 in magnitude, which holds
    for any summation order once sum_k |x_k * w_k| <= 2**24; the depth is split into such
    chunks (each a float32 product, summed in float64). With more than 4 chunks the product
    runs in float64, exact for depths below 2**53 / max|x * w|.
    """

    def __init__(self, w: np.ndarray, x_max: int):
        w = np.asarray(w, np.float64)
        self.k = k = w.shape[1]
        w_max = int(np.abs(w).max(initial=0))
        chunk = k if w_max * x_max == 0 else _F32_EXACT // (w_max * x_max)
        if chunk >= k:
            self.chunks = [(0, k, np.ascontiguousarray(w, np.float32))]
        elif chunk > 0 and -(-k // chunk) <= 4:
            self.chunks = [(a, min(a + chunk, k), np.ascontiguousarray(w[:, a:a + chunk], np.float32))
                           for a in range(0, k, chunk)]
        else:
            self.chunks = [(0, k, np.ascontiguousarray(w))]
        self.dtype = self.chunks[0][2].dtype

    def float32(self, x: np.ndarray) -> np.ndarray:
        """x @ W.T for integer x (B, K) given as float32, as float32 (each exact integer sum
        rounded to float32 once, as the C++ converts its int32 dot products)."""
        if len(self.chunks) == 1 and self.dtype == np.float32:
            return dense(x, self.chunks[0][2])
        return self(x).astype(np.float32)

    def __call__(self, x: np.ndarray, offset: int = 0) -> np.ndarray:
        """(x - offset) @ W.T for integer x (B, K)."""
        xf = x.astype(self.dtype, copy=bool(offset))
        if offset:
            xf -= self.dtype.type(offset)
        a, b, w = self.chunks[0]
        acc = dense(xf if len(self.chunks) == 1 else xf[:, a:b], w).astype(np.float64, copy=False)
        for a, b, w in self.chunks[1:]:
            acc += dense(xf[:, a:b], w)
        return acc


# --- the kernel ---------------------------------------------------------------------------
def _check_fc(node: NodeContext) -> tuple:
    """FULLY_CONNECTED's checks shared by every path: (activation, keep_num_dims, asymmetric
    inputs, quantized_bias_type, input, weights, bias, output, units, depth, out_shape)."""
    opts = node.options
    act = int(opts.get("fused_activation_function", NONE) or 0)
    keep_num_dims = bool(opts.get("keep_num_dims", False))
    asymmetric = bool(opts.get("asymmetric_quantize_inputs", False))
    qbt = int(opts.get("quantized_bias_type", _TT_FLOAT32) or 0)
    if int(opts.get("weights_format", 0) or 0) != 0:
        raise node.unsupported("the SHUFFLED4x16INT8 weights format is not supported "
                               "(only DEFAULT weights are)")
    if len(node.outputs) != 1:
        raise node.unsupported(f"expected 1 output, got {len(node.outputs)}")
    x_t, w_t = node.input(0), node.input(1)
    b_t = node.input(2)
    out_t = node.outputs[0]
    if x_t is None or w_t is None:
        raise node.unsupported("input and weights are required")
    if len(w_t.shape) != 2:
        raise node.unsupported(f"weights must be 2-D, got shape {list(w_t.shape)}")
    if w_t.sparsity is not None:
        raise node.unsupported("sparse weights are not supported")
    units, k = int(w_t.shape[0]), int(w_t.shape[1])
    if b_t is not None and int(np.prod(b_t.shape)) != units:
        raise node.unsupported(f"bias has {int(np.prod(b_t.shape))} elements, expected {units}")

    def out_shape(xshape: tuple) -> tuple:
        size = math.prod(xshape)
        batch = size // k if k else math.prod(xshape[:-1])
        if keep_num_dims:
            if k and xshape[-1] != k:
                raise node.unsupported(f"keep_num_dims needs the input's last dimension ({xshape[-1]}) "
                                       f"to equal the weights' depth ({k})")
            return tuple(xshape[:-1]) + (units,)
        return (batch, units)

    out_shape(tuple(x_t.shape))  # validate now
    return act, keep_num_dims, asymmetric, qbt, x_t, w_t, b_t, out_t, units, k, out_shape


def _is_quantized_path(x_t, w_t) -> bool:
    return not (x_t.type_name == "FLOAT32" and w_t.type_name in ("FLOAT32",) + HYBRID_WEIGHTS)


@register("FULLY_CONNECTED", max_version=14, dtypes=("FLOAT32", "UINT8", "INT8", "INT16"))
def fully_connected(node: NodeContext):
    act, keep_num_dims, asymmetric, qbt, x_t, w_t, b_t, out_t, units, k, out_shape = _check_fc(node)
    in_type, w_type = x_t.type_name, w_t.type_name
    out_dtype = out_t.dtype

    shapes: dict[tuple, tuple] = {}

    def as_rows(x: np.ndarray) -> tuple[np.ndarray, tuple]:
        shape = shapes.get(x.shape)
        if shape is None:
            shape = shapes[x.shape] = out_shape(x.shape)
        batch = x.size // k
        if x.size != batch * k:  # LiteRT reads batch * k values and ignores the rest
            return x.reshape(-1)[:batch * k].reshape(batch, k), shape
        return x.reshape(batch, k), shape

    if k == 0:  # LiteRT zero-fills the output (bias included) when the depth is 0
        def run_empty(x, w, b=None):
            return np.zeros(out_shape(x.shape), out_dtype)
        return run_empty

    if in_type == "FLOAT32" and w_type == "FLOAT32":
        return _prepare_float(node, act, b_t, out_t, as_rows)
    if in_type == "FLOAT32" and w_type in HYBRID_WEIGHTS:
        return _prepare_hybrid(node, act, asymmetric, w_t, b_t, out_t, units, as_rows)
    return _quantized_run(_fc_params(node, act, qbt, keep_num_dims, x_t, w_t, b_t, out_t, units, k), as_rows)


def quantized_fc_params(node: NodeContext) -> QuantizedFCParams | None:
    """The prepared parameters of a quantized FULLY_CONNECTED node (None for float or hybrid
    input and for a depth of 0, which the reference zero-fills); raises what the reference
    kernel's prepare raises."""
    act, keep_num_dims, _, qbt, x_t, w_t, b_t, out_t, units, k, _ = _check_fc(node)
    if k == 0 or not _is_quantized_path(x_t, w_t):
        return None
    return _fc_params(node, act, qbt, keep_num_dims, x_t, w_t, b_t, out_t, units, k)


def _prepare_float(node, act, b_t, out_t, as_rows):
    if out_t.type_name != "FLOAT32":
        raise node.unsupported(f"float32 input with output type {out_t.type_name} is not supported")
    if b_t is not None and b_t.type_name != "FLOAT32":
        raise node.unsupported(f"float32 input with bias type {b_t.type_name} is not supported")
    if act not in CLIPPING_ACTIVATIONS:
        raise node.unsupported(f"fused activation {ACTIVATION_NAMES.get(act, act)} is not supported "
                               "(only NONE, RELU, RELU_N1_TO_1, RELU6)")
    lo, hi = float_activation_range(act)
    lo, hi = np.asarray(np.float32(lo)), np.asarray(np.float32(hi))  # 0-d: no scalar conversion per call
    w_const = node.const(1)
    w_pre = None if w_const is None else np.ascontiguousarray(w_const, np.float32)
    b_const = node.const(2)
    b_flat = None if b_const is None else np.asarray(b_const, np.float32).reshape(-1)
    k = node.input(1).shape[1]

    def run(x, w, b=None):
        x2, shape = as_rows(x)
        y = dense(x2, w_pre if w_pre is not None else np.asarray(w, np.float32))
        bias = b_flat if b_flat is not None else b
        if bias is not None:
            y += bias.reshape(-1)
        if act != NONE:
            clip_ufunc(y, lo, hi, out=y)
        return y.reshape(shape)

    if w_pre is None or (b_const is None and node.input(2) is not None):
        return run
    shapes: dict[tuple, tuple] = {}
    dot, add, clip = w_pre.dot, np.add, act != NONE

    def run_one_row(x, w, b=None):
        """Constant weights and bias: a single input row is one gemv."""
        if x.size != k:
            return run(x, w, b)
        shape = shapes.get(x.shape)
        if shape is None:
            if len(shapes) >= 64:  # shapes that keep changing: bound the memo
                shapes.clear()
            shape = shapes[x.shape] = as_rows(x)[1]
        y = dot(x.reshape(k))
        if b_flat is not None:
            add(y, b_flat, out=y)
        if clip:
            clip_ufunc(y, lo, hi, out=y)
        return y.reshape(shape)
    return run_one_row


def _weights_scales(node, w_t, units) -> tuple[np.ndarray | None, float, int]:
    """(per-channel scales or None, per-tensor scale, per-tensor zero point) of the weights."""
    q = w_t.quantization
    if not q.is_set:
        raise node.unsupported("quantized weights without quantization parameters are not supported")
    if q.scale.size > 1:
        if q.scale.size != units or q.quantized_dimension != 0:
            raise node.unsupported("per-channel weights must be quantized along dimension 0 "
                                   f"with {units} scales")
        return q.scale.astype(np.float32), float(q.scale[0]), int(q.zero_point[0])
    return None, float(q.scale[0]), int(q.zero_point[0])


def _prepare_hybrid(node, act, asymmetric, w_t, b_t, out_t, units, as_rows):
    if out_t.type_name != "FLOAT32":
        raise node.unsupported(f"hybrid (float32 input, {w_t.type_name} weights) needs a float32 "
                               f"output, got {out_t.type_name}")
    if b_t is not None and b_t.type_name != "FLOAT32":
        raise node.unsupported(f"hybrid fully connected with bias type {b_t.type_name} is not supported")
    if w_t.type_name in ("INT4", "INT2") and np.any(w_t.quantization.zero_point != 0):
        raise node.unsupported(f"{w_t.type_name.lower()} weights need zero points of 0")
    pcs, w_scale, _ = _weights_scales(node, w_t, units)
    w_scale32 = np.float32(w_scale)
    is_uint8 = w_t.type_name == "UINT8"

    def prep_w(w):
        # LiteRT reads the weight bytes as int8 (uint8 weights are reinterpreted, zero point ignored).
        wi = np.asarray(w).view(np.int8) if is_uint8 else np.asarray(w, np.int8)
        # 255 bounds both |q| and the |q - offset| the fast asymmetric quantizer returns.
        return ExactIntMatmul(wi, 255), wi.sum(axis=1, dtype=np.int64).astype(np.float64)

    w_const = node.const(1)
    pre = None if w_const is None else prep_w(w_const)
    b_const = node.const(2)
    b_row = None if b_const is None else np.asarray(b_const).reshape(1, -1).astype(np.float32)
    pcs_row = None if pcs is None else pcs[None, :]
    k = int(w_t.shape[1])
    # the compiled loop: constant weights, asymmetric inputs, int32 dot products that cannot wrap
    native = (fc_hybrid_kernel() if asymmetric and w_const is not None and k * 255 * 128 < 1 << 31
              else None)
    if native is not None:
        wc = np.asarray(w_const)
        w32 = np.ascontiguousarray(wc.view(np.int8) if is_uint8 else wc, np.int32)
        n_scales = pcs if pcs is not None else np.array([w_scale32], np.float32)
        no_bias = np.zeros(0, np.float32)
        b_flat = no_bias if b_row is None else b_row.reshape(-1)

    def run(x, w, b=None):
        x2, shape = as_rows(x if x.dtype == np.float32 else np.asarray(x, np.float32))
        if native is not None and x2.shape[1] == k:
            out = np.empty((x2.shape[0], units), np.float32)
            bias = b_flat if b_row is not None or b is None else b.reshape(-1).astype(np.float32)
            if native(x2, w32, n_scales, pcs is not None, bias, out, np.empty(k, np.int32)):
                return apply_float_activation(out, act).reshape(shape)
        mm, row_sums = pre if pre is not None else prep_w(w)
        fast = portable_asymmetric_rows(x2) if asymmetric and x2.shape[1] else None
        if fast is not None:
            shifted, sf, _ = fast  # q - offset: the product is dot(q) - row_sum * offset
            y = mm.float32(shifted)
        else:
            q, sf, offset = quantize_rows(x2, asymmetric)
            acc = mm(q)
            if asymmetric:
                acc -= row_sums * offset.astype(np.float64)[:, None]
            y = acc.astype(np.float32)
        if pcs_row is None:
            y *= (sf * w_scale32)[:, None]
        else:
            y *= sf[:, None] * pcs_row
        if b_row is not None:
            y += b_row
        elif b is not None:
            y = b.reshape(1, -1).astype(np.float32) + y
        return apply_float_activation(y, act).reshape(shape)
    return run


def _fc_params(node, act, qbt, keep_num_dims, x_t, w_t, b_t, out_t, units, k) -> QuantizedFCParams:
    in_type, w_type, out_type = x_t.type_name, w_t.type_name, out_t.type_name
    quantized_w = w_type in ("UINT8", "INT8", "INT4", "INT2", "INT16")
    if not quantized_w or in_type not in ("UINT8", "INT8", "INT16"):
        raise node.unsupported(f"input type {in_type} with weights type {w_type} is not supported")
    if act not in CLIPPING_ACTIVATIONS:
        raise node.unsupported(f"fused activation {ACTIVATION_NAMES.get(act, act)} is not supported "
                               "(only NONE, RELU, RELU_N1_TO_1, RELU6)")
    if not x_t.quantization.is_set:
        raise node.unsupported(f"{in_type} input without quantization parameters is not supported")
    # The dtype combinations the reference kernel evaluates correctly.
    combos = {("UINT8", "UINT8", "UINT8"), ("UINT8", "UINT8", "INT16"),
              ("INT8", "INT8", "INT8"), ("INT8", "INT4", "INT8"), ("INT8", "INT2", "INT8"),
              ("INT16", "INT8", "INT16"), ("INT16", "INT4", "INT16"), ("INT16", "INT2", "INT16"),
              ("INT16", "INT16", "INT16")}
    if (in_type, w_type, out_type) not in combos:
        raise node.unsupported(f"input {in_type} / weights {w_type} / output {out_type} "
                               "is not a supported combination")
    pcs, w_scale, w_zp = _weights_scales(node, w_t, units)
    if pcs is not None and in_type == "UINT8":
        raise node.unsupported("per-channel weights need int8 or int16 activations")
    if w_type in ("INT4", "INT2") and np.any(w_t.quantization.zero_point != 0):
        raise node.unsupported(f"{w_type.lower()} weights need zero points of 0")
    in_scale, in_zp = scale_zp(x_t)
    out_scale, out_zp = scale_zp(out_t)
    int16_io = in_type == "INT16" and out_type == "INT16"
    if int16_io and (in_zp != 0 or out_zp != 0):
        raise node.unsupported("int16 input and output need zero points of 0")

    bias_kind = None if b_t is None else b_t.type_name
    if bias_kind is not None:
        if int16_io:
            if bias_kind not in ("INT32", "INT64"):
                raise node.unsupported(f"bias type {bias_kind} is not supported with int16 activations")
        elif bias_kind != "INT32":
            raise node.unsupported(f"bias type {bias_kind} is not supported with {in_type} activations "
                                   "(needs INT32)")
    if int16_io and qbt != _TT_FLOAT32:
        if qbt not in (_TT_INT32, _TT_INT64):
            raise node.unsupported("quantized_bias_type must be INT32 or INT64")
        want = "INT32" if qbt == _TT_INT32 else "INT64"
        if bias_kind is not None and bias_kind != want:
            raise node.unsupported(f"bias type {bias_kind} does not match quantized_bias_type {want}")

    if pcs is None and b_t is not None:
        # GetQuantizedConvolutionMultipler's consistency check of the bias scale.
        product = float(np.float64(np.float32(in_scale)) * np.float64(np.float32(w_scale)))
        b_scale = scale_zp(b_t)[0]
        if out_scale == 0 or abs(product - b_scale) / out_scale > 0.02:
            raise node.unsupported(f"bias scale {b_scale} does not match input_scale * weights_scale "
                                   f"{product}")

    lo, hi = quantized_activation_range(act, out_scale, out_zp, out_t.dtype)
    fixed_point = w_type == "INT16"  # int16 x int16: fixed-point int64 requantization
    per_channel = pcs is not None
    w_offset = 0 if per_channel else w_zp  # per-channel weights are taken as symmetric

    eff = mult = shift = None
    if fixed_point:
        if pcs is not None:
            reals = [np.float64(in_scale) * np.float64(s) / np.float64(out_scale) for s in pcs]
            mult, shift = quant.quantize_multipliers(reals)
        else:
            real = np.float64(np.float32(in_scale) * np.float32(w_scale)) / np.float64(out_scale)
            m, s = quant.quantize_multiplier(float(real))
            mult, shift = np.array([m], np.int64), np.array([s], np.int64)
    else:
        eff = (np.float64(np.float32(in_scale)) * pcs.astype(np.float64) / np.float64(np.float32(out_scale))
               if pcs is not None else
               np.array([np.float64(np.float32(in_scale)) * np.float64(np.float32(w_scale))
                         / np.float64(np.float32(out_scale))]))

    # Accumulator width: int32 (wrapping) for 8-bit activations and for int16 activations
    # with quantized_bias_type INT32; int64 otherwise.
    acc32 = (not int16_io) or (qbt == _TT_INT32 and not fixed_point)
    w_const = node.const(1)
    weights = None
    if w_const is not None:
        weights = np.asarray(w_const).astype(np.int32)
        if w_offset:
            weights -= np.int32(w_offset)
    b_const = node.const(2)
    return QuantizedFCParams(
        units=units, depth=k, input_dtype=np.dtype(x_t.dtype), weights_type=w_type,
        output_dtype=np.dtype(out_t.dtype), keep_num_dims=bool(keep_num_dims), input_zero_point=int(in_zp),
        output_zero_point=int(out_zp), weights_offset=int(w_offset), per_channel=per_channel,
        fixed_point=fixed_point, effective_scale=frozen_array(eff, np.float64),
        multiplier=frozen_array(mult, np.int64), shift=frozen_array(shift, np.int64), qmin=int(lo), qmax=int(hi),
        acc32=bool(acc32), weights=frozen_array(weights, np.int32),
        bias=None if b_const is None else frozen_array(np.asarray(b_const).reshape(-1), np.int64),
        bias_from_input=b_t is not None and b_const is None, bias_type=bias_kind)


def _quantized_run(p: QuantizedFCParams, as_rows):
    in_zp, out_zp, lo, hi = p.input_zero_point, p.output_zero_point, p.qmin, p.qmax
    out_dtype, fixed_point, w_offset = p.output_dtype, p.fixed_point, p.weights_offset
    if fixed_point:
        assert p.multiplier is not None and p.shift is not None  # set when fixed_point
        mult, shift = (p.multiplier, p.shift) if p.per_channel else (p.multiplier[0], p.shift[0])
    else:
        assert p.effective_scale is not None  # set unless fixed_point
        eff = p.effective_scale if p.per_channel else p.effective_scale[0]
    in_info = np.iinfo(p.input_dtype)
    x_max = max(abs(int(in_info.min) - in_zp), abs(int(in_info.max) - in_zp))
    w_type = p.weights_type
    w_info = np.iinfo(np.int16 if w_type == "INT16" else np.int8 if w_type in ("INT8", "INT4", "INT2") else np.uint8)
    w_max = max(abs(int(w_info.min) - w_offset), abs(int(w_info.max) - w_offset))

    def prep_w(w):
        wi = np.asarray(w).astype(np.float64)
        if w_offset:
            wi -= w_offset
        return ExactIntMatmul(wi, x_max)

    def prep_b(b):
        return None if b is None else np.asarray(b).reshape(-1).astype(np.float64)

    wt_pre = None if p.weights is None else ExactIntMatmul(p.weights.astype(np.float64), x_max)
    b_pre = prep_b(p.bias)
    if p.bias_type is None:
        bias_max = 0
    elif b_pre is not None:
        bias_max = int(np.abs(b_pre).max(initial=0))
    else:
        bias_max = (1 << 63) if p.bias_type == "INT64" else (1 << 31)
    acc_limit = acc_bound(p.depth, x_max, w_max, bias_max)
    may_wrap = p.acc32 and acc_limit >= 1 << 31
    if may_wrap:
        acc_limit = 1 << 31
    # When |acc * scale| provably stays far inside int32, the out-of-range cast and the
    # int32 wrap of "+ output_offset" cannot happen and their checks are skipped.
    real_max = float(np.max(eff)) if not fixed_point else float(
        np.max(np.asarray(mult).astype(np.float64) * np.exp2(np.asarray(shift).astype(np.float64) - 31)))
    in_range = acc_limit * real_max + abs(out_zp) + 2 < 2.0 ** 31 and acc_limit < 2 ** 52
    lo_f, hi_f = float(lo), float(hi)
    if not fixed_point and p.weights is not None and not p.bias_from_input and not may_wrap and in_range:
        return _constant_run(p, eff, b_pre, as_rows, lo_f, hi_f)

    def run(x, w, b=None):
        x2, shape = as_rows(x)
        mm = wt_pre if wt_pre is not None else prep_w(w)
        acc = mm(x2, in_zp)  # exact integers, float64
        bias = b_pre if b_pre is not None else prep_b(b)
        if bias is not None:
            acc += bias
        if fixed_point:
            r = quant.multiply_by_quantized_multiplier_int64(acc.astype(np.int64), mult, shift)
            r = wrap_int32(r + out_zp) if not in_range else r + out_zp
            np.maximum(r, lo, out=r)
            np.minimum(r, hi, out=r)
            return r.astype(out_dtype).reshape(shape)
        if may_wrap:
            acc = wrap_int32(acc.astype(np.int64)).astype(np.float64)
        acc *= eff
        r = round_half_away(acc)
        if in_range:
            r += out_zp
            clip_ufunc(r, lo_f, hi_f, out=r)
        else:
            r = wrap_int32(double_to_int32(r) + out_zp)  # int32 cast and addition in the C++
            np.maximum(r, lo, out=r)
            np.minimum(r, hi, out=r)
        return r.astype(out_dtype).reshape(shape)
    return run


_BELOW_HALF = np.nextafter(0.5, 0.0)
_NATIVE_MACS = 1 << 16  # up to this many multiply-adds per call the compiled loop beats BLAS


def _constant_run(p: QuantizedFCParams, eff, b_pre: np.ndarray | None, as_rows, lo_f: float, hi_f: float):
    """The double-precision requantization with constant weights and bias and an accumulator
    that can neither wrap nor leave int32 once scaled: x @ W.T on the raw inputs (exact, in
    float32 when the sums allow) plus the bias with the input offset folded in
    (bias - input_zero_point * row_sums(W), exact in float64), then
    round(acc * scale) + output_zero_point clamped, in a few fused passes."""
    assert p.weights is not None
    w64 = p.weights.astype(np.float64)
    lo_in, hi_in = quant.int_limits(p.input_dtype)
    mm = ExactIntMatmul(w64, max(-lo_in, hi_in))
    fold = w64.sum(axis=1) * -float(p.input_zero_point)
    if b_pre is not None:
        fold += b_pre
    w32 = mm.chunks[0][2] if len(mm.chunks) == 1 and mm.dtype == np.float32 else None
    out_dtype, zp = p.output_dtype, float(p.output_zero_point)
    f32, add, copysign, trunc = np.float32, np.add, np.copysign, np.trunc
    units, macs_row = p.units, p.units * p.depth
    # small problems: one compiled loop (fc_int_native.py), in float32 where its sums are exact
    native = None if macs_row > _NATIVE_MACS else fc_int_kernel() if w32 is None else fc_f32_kernel()
    if native is not None:
        w_i = np.ascontiguousarray(p.weights, np.int32)
        fold_i = w_i.sum(axis=1, dtype=np.int64) * -p.input_zero_point
        if p.bias is not None:
            fold_i += p.bias
        eff_u = np.ascontiguousarray(np.broadcast_to(np.asarray(eff, np.float64), (units,)))
        args = (w_i, fold_i, eff_u, zp, lo_f, hi_f) if w32 is None else (w32, fold_i, eff_u, zp, lo_f, hi_f)
        empty = np.empty

    def run(x, w, b=None):
        x2, shape = as_rows(x)
        if native is not None and x2.shape[0] * macs_row <= _NATIVE_MACS:
            out = empty((x2.shape[0], units), out_dtype)
            native(x2, *args, out)
            return out.reshape(shape)
        r = add(dense(x2.astype(f32), w32), fold) if w32 is not None else add(mm(x2), fold)
        r *= eff
        t = copysign(_BELOW_HALF, r)
        t += r
        trunc(t, out=t)  # std::round: halves away from zero (see quant.round_half_away)
        t += zp
        clip_ufunc(t, lo_f, hi_f, out=t)
        return t.astype(out_dtype).reshape(shape)
    return run
