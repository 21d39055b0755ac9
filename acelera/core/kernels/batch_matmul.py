"""BATCH_MATMUL reference kernel, bit-exact with LiteRT 2.3's reference BatchMatMul.

out[..., m, n] = sum_k op(lhs)[..., m, k] * op(rhs)[..., k, n] with op = transpose of the last
two axes when adj_x / adj_y is set, and numpy-style broadcasting of the batch axes (ranks 2-5).

* float32: float32 matmul.
* int8 x int8 -> int8, int16 x int16 -> int16, int16 x int8 -> int16: exact integer
  accumulation (int32 for int8, int64 for int16) with zero points, then the fixed-point
  MultiplyByQuantizedMultiplier (the multiplier derives from the float32 product
  lhs_scale * rhs_scale, as GetQuantizedConvolutionMultipler does). No fused activation.
* int8 x int8 -> int32: the raw int32 product (zero points are not applied, as in LiteRT).
* hybrid float32 x int8 -> float32: rows of op(lhs) are quantized like
  tensor_utils::BatchQuantizeFloats (symmetric, or asymmetric with asymmetric_quantize_inputs)
  and the integer products scaled back in float32; per-tensor or per-channel (along the
  output-column axis) weight scales.
"""
from __future__ import annotations

import numpy as np

from acelera.core import quant
from acelera.core.kernels.binary_common import clip_ufunc
from acelera.core.kernels.fully_connected import acc_bound, quantize_rows
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.quant import wrap_int32


def exact_float_type(k: int, max_product: int):
    """float32 when a depth-k sum of integer products (|p| <= max_product) is exact in any
    order (every partial sum stays within 2**24), else float64 (exact below 2**53)."""
    return np.float32 if k * max_product <= 1 << 24 else np.float64


def _swap(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


@register("BATCH_MATMUL", max_version=4, dtypes=("FLOAT32", "INT8", "INT16"))
def batch_matmul(node: NodeContext):
    opts = node.options
    adj_x = bool(opts.get("adj_x", False))
    adj_y = bool(opts.get("adj_y", False))
    asymmetric = bool(opts.get("asymmetric_quantize_inputs", False))
    if len(node.inputs) != 2 or len(node.outputs) != 1:
        raise node.unsupported("expected 2 inputs and 1 output")
    l_t, r_t = node.input(0), node.input(1)
    out_t = node.outputs[0]
    if l_t is None or r_t is None:
        raise node.unsupported("both inputs are required")
    lt, rt, ot = l_t.type_name, r_t.type_name, out_t.type_name
    for t in (l_t, r_t):
        if not 2 <= len(t.shape) <= 5:
            raise node.unsupported(f"inputs must have rank 2 to 5, got shape {list(t.shape)}")

    def out_shape(ls: tuple, rs: tuple) -> tuple:
        m, kl = (ls[-1], ls[-2]) if adj_x else (ls[-2], ls[-1])
        kr, n = (rs[-1], rs[-2]) if adj_y else (rs[-2], rs[-1])
        if kl != kr:
            raise node.unsupported(f"inner dimensions differ: {list(ls)} x {list(rs)} "
                                   f"(adj_x={adj_x}, adj_y={adj_y})")
        try:
            batch = np.broadcast_shapes(tuple(ls[:-2]), tuple(rs[:-2]))
        except ValueError:
            raise node.unsupported(f"batch dimensions do not broadcast: {list(ls)} x {list(rs)}") from None
        return tuple(batch) + (m, n)

    out_shape(tuple(l_t.shape), tuple(r_t.shape))
    valid: set[tuple] = set()  # shape pairs out_shape accepted

    def check(ls: tuple, rs: tuple) -> None:
        if (ls, rs) not in valid:
            out_shape(ls, rs)
            if len(valid) >= 64:
                valid.clear()
            valid.add((ls, rs))

    def operands(lhs, rhs):
        a = _swap(lhs) if adj_x else lhs
        b = _swap(rhs) if adj_y else rhs
        return a, b

    if lt == "FLOAT32" and rt == "FLOAT32":
        if ot != "FLOAT32":
            raise node.unsupported(f"float32 inputs with output type {ot} are not supported")

        def run_float(lhs, rhs):
            check(lhs.shape, rhs.shape)
            a, b = operands(lhs, rhs)
            return np.matmul(a, b).astype(np.float32, copy=False)
        return run_float

    if lt == "FLOAT32" and rt == "INT8":
        return _prepare_hybrid(node, asymmetric, adj_y, r_t, ot, operands, check)

    combos = {("INT8", "INT8", "INT8"), ("INT8", "INT8", "INT32"), ("INT16", "INT16", "INT16"),
              ("INT16", "INT8", "INT16")}
    if (lt, rt, ot) not in combos:
        raise node.unsupported(f"input types {lt} x {rt} with output {ot} are not supported")

    if ot == "INT32":  # raw int8 product, zero points ignored (LiteRT's EvalInt8Int32)
        def run_int32(lhs, rhs):
            check(lhs.shape, rhs.shape)
            a, b = operands(lhs, rhs)
            k = a.shape[-1]
            ft = exact_float_type(k, 128 * 128)
            acc = np.matmul(a.astype(ft), b.astype(ft)).astype(np.int64)
            if acc_bound(k, 128, 128) >= 1 << 31:
                acc = wrap_int32(acc)
            return acc.astype(np.int32)
        return run_int32

    for t in (l_t, r_t, out_t):
        q = t.quantization
        if not q.is_set:
            raise node.unsupported(f"quantized {t.type_name} tensor '{t.name}' has no quantization parameters")
        if q.scale.size > 1:
            raise node.unsupported(f"per-channel quantization of '{t.name}' is not supported "
                                   "(only hybrid BATCH_MATMUL takes per-channel weights)")
    l_scale, l_zp = float(l_t.quantization.scale[0]), int(l_t.quantization.zero_point[0])
    r_scale, r_zp = float(r_t.quantization.scale[0]), int(r_t.quantization.zero_point[0])
    o_scale, o_zp = float(out_t.quantization.scale[0]), int(out_t.quantization.zero_point[0])
    int16 = lt == "INT16"
    if int16 and (l_zp or r_zp or o_zp):
        raise node.unsupported("int16 BATCH_MATMUL needs zero points of 0")
    real = np.float64(np.float32(l_scale) * np.float32(r_scale)) / np.float64(o_scale)
    mult, shift = quant.quantize_multiplier(float(real))
    info = np.iinfo(out_t.dtype)
    lo, hi = int(info.min), int(info.max)
    out_dtype = out_t.dtype
    l_max = int(np.iinfo(l_t.dtype).max) + 1 + abs(l_zp)
    r_max = int(np.iinfo(r_t.dtype).max) + 1 + abs(r_zp)

    def numerics(k: int):
        """(float type for an exact product, whether the int32 accumulator can wrap)."""
        return exact_float_type(k, l_max * r_max), (not int16) and acc_bound(k, l_max, r_max) >= 1 << 31

    def prep_rhs(rhs):
        b = _swap(rhs) if adj_y else rhs
        ft = exact_float_type(b.shape[-2], l_max * r_max)
        b = b.astype(ft)
        if r_zp:
            b -= ft(r_zp)
        return b

    r_const = node.const(1)
    b_pre = None if r_const is None else prep_rhs(r_const)

    checked: dict[tuple, tuple] = {}  # (lhs shape, rhs shape) -> numerics

    def shape_numerics(ls: tuple, rs: tuple) -> tuple:
        """Validate the shapes once per pair: (float type, int32 accumulator may wrap,
        `+ output_offset` may leave int32)."""
        key = (ls, rs)
        got = checked.get(key)
        if got is None:
            out_shape(ls, rs)
            k = rs[-1] if adj_y else rs[-2]
            ft, may_wrap = numerics(k)
            limit = (1 << 31) if may_wrap else acc_bound(k, l_max, r_max)
            shifted = min(limit << max(shift, 0), 1 << 31)  # the C++ left shift wraps beyond
            bound = shifted * mult / 2.0 ** 31 * 2.0 ** min(shift, 0)
            offset_may_wrap = not int16 and bound + 2 + abs(o_zp) >= 2 ** 31
            got = checked[key] = (ft, may_wrap, offset_may_wrap)
        return got

    # MultiplyByQuantizedMultiplier's one-multiplier form applies (it never saturates)
    scalar_mbqm = mult != quant.INT32_MIN and -31 <= shift <= 31
    matmul, i64 = np.matmul, np.dtype(np.int64)

    def run_quant(lhs, rhs):
        ft, may_wrap, offset_may_wrap = shape_numerics(lhs.shape, rhs.shape)
        b = b_pre if b_pre is not None else prep_rhs(rhs)
        a = (_swap(lhs) if adj_x else lhs).astype(ft)
        if l_zp:
            a -= ft(l_zp)
        acc = matmul(a, b).astype(i64)
        if int16:
            r = quant.multiply_by_quantized_multiplier_int64_inplace(acc, mult, shift)
        else:
            if may_wrap:
                quant.wrap_int32_inplace(acc)
            if scalar_mbqm:
                r = quant.multiply_by_quantized_multiplier_scalar_inplace(acc, mult, shift)
            else:
                r = quant.multiply_by_quantized_multiplier_inplace(acc, mult, shift)
            r += o_zp
            if offset_may_wrap:
                quant.wrap_int32_inplace(r)
        return clip_ufunc(r, lo, hi, out=r).astype(out_dtype)
    return run_quant


def _prepare_hybrid(node, asymmetric, adj_y, r_t, ot, operands, check):
    if ot != "FLOAT32":
        raise node.unsupported(f"hybrid BATCH_MATMUL (float32 x int8) needs a float32 output, got {ot}")
    q = r_t.quantization
    if not q.is_set:
        raise node.unsupported("int8 weights without quantization parameters are not supported")
    rank = len(r_t.shape)
    n = int(r_t.shape[-2] if adj_y else r_t.shape[-1])
    pcs = None
    if q.scale.size > 1:
        axis = rank - 2 if adj_y else rank - 1
        if q.quantized_dimension != axis or q.scale.size != n:
            raise node.unsupported("per-channel weights must be quantized along the output-column "
                                   f"axis ({axis}) with {n} scales")
        pcs = q.scale.astype(np.float32)
    w_scale32 = np.float32(q.scale[0])

    def prep_rhs(rhs):
        b = np.asarray(_swap(rhs) if adj_y else rhs, np.int8)
        row_sums = b.sum(axis=-2, dtype=np.int64)[..., None, :]  # (..., 1, N)
        return b.astype(exact_float_type(b.shape[-2], 128 * 128)), row_sums.astype(np.float32)

    r_const = node.const(1)
    pre = None if r_const is None else prep_rhs(r_const)

    def run_hybrid(lhs, rhs):
        check(lhs.shape, rhs.shape)
        a, _ = operands(np.asarray(lhs, np.float32), rhs)
        b, row_sums = pre if pre is not None else prep_rhs(rhs)
        qa, sf, offset = quantize_rows(a, asymmetric)  # per row of op(lhs): (..., M, K), (..., M)
        acc = np.matmul(qa.astype(b.dtype), b)
        # total -= row_sum * batch_offset runs in float32 and truncates back to int32.
        total = acc.astype(np.float32)
        if asymmetric:
            total = np.trunc(total - row_sums * offset.astype(np.float32)[..., :, None])
        scale = (sf * w_scale32)[..., :, None] if pcs is None else sf[..., :, None] * pcs
        return (scale * total).astype(np.float32, copy=False)
    return run_hybrid
