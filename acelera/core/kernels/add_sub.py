"""ADD and SUB with numpy broadcasting (tflite/kernels/{add,sub}.cc and
internal/reference/{add,sub}.h).

float16 ADD (v6) computes in numpy's float16 (each result rounded to half, as LiteRT's `half`)
and clamps to +-65504. Quantized int16 with power-of-two scales (`pot_scale_int16`) takes
LiteRT's LSTM-style path; other quantized inputs are rescaled to a common scale (left shift
20 for 8-bit, 15 for int16). The shared machinery is in binary_common.py.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.binary_common import (
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    QUANT8,
    U8,
    Scratch,
    activation,
    binary_operands,
    blocked,
    blocked_into,
    checked_log2,
    clip_ufunc,
    float_binary,
    float_dtypes,
    gather16,
    input_rescale,
    int_binary,
    is_quantized,
    lut8_kernel,
    operand_qparams,
    rdbpot_inplace,
    scalar_safe,
    smaller_than_one_multiplier,
    table16,
)
from acelera.core.kernels.common import domain, quantized_activation_range
from acelera.core.kernels.registry import Kernel, NodeContext, register
from acelera.core.model import Tensor
from acelera.core.quant import multiply_by_quantized_multiplier_scalar as mbqm
from acelera.core.quant import multiply_by_quantized_multiplier_scalar_inplace as mbqm_inplace


def _add_sub(node: NodeContext, sign: int) -> Kernel:
    """ADD (sign=+1) and SUB (sign=-1)."""
    op = node.op.name
    act = activation(node)
    allowed = {I32, I64, U8, I8, I16} | float_dtypes() | ({F16} if op == "ADD" else set())
    a, b, out = binary_operands(node, allowed)
    dt = a.dtype
    ufunc = np.add if sign > 0 else np.subtract

    if dt in (F32, F64, F16):
        return float_binary(ufunc, act, dt)
    if dt in (I32, I64) or (dt == I16 and op == "ADD" and not is_quantized(out)):
        if dt == I16 and is_quantized(a):
            raise node.unsupported("quantized INT16 inputs with an unquantized INT16 output")
        return int_binary(ufunc, act)

    # Quantized paths.
    s1, z1, s2, z2, so, zo = operand_qparams(node, a, b, out)
    info = np.iinfo(dt)
    for z, what in ((z1, "input 1"), (z2, "input 2"), (zo, "output")):
        if not info.min <= z <= info.max:
            raise node.unsupported(f"{what} zero point {z} is out of range")
    lo, hi = quantized_activation_range(act, so, zo, dt)

    if dt == I16:
        if z1 or z2 or zo:
            raise node.unsupported("INT16 quantization requires zero points of 0")
        opts = node.options
        pot = bool(opts.get("pot_scale_int16", False)) if opts else False
        if pot:
            p1, l1 = checked_log2(s1)
            p2, l2 = checked_log2(s2)
            p3, l3 = checked_log2(so)
            pot = p1 and p2 and p3
        if pot:
            return _pot_int16(node, a, b, sign, l1 - l3, l2 - l3, lo, hi)

    left_shift = 15 if dt == I16 else 20
    twice_max, (m1, sh1), (m2, sh2) = input_rescale(node, s1, s2)
    mo, sho = smaller_than_one_multiplier(node, twice_max / ((1 << left_shift) * so), "output")

    def scaled(v, zp, m, sh):
        return mbqm((v - zp) << left_shift, m, sh)

    def finish(raw):
        r = mbqm(raw, mo, sho)
        r += zo
        return clip_ufunc(r, lo, hi, out=r)

    if dt in QUANT8:
        def f(x, y):
            return finish(scaled(x, z1, m1, sh1) + sign * scaled(y, z2, m2, sh2))
        return lut8_kernel(dt, f)

    # Rescaled inputs tabulated over all 65536 values (|value| < 2^30, so int32 and their sum
    # fit), then the output rescale on int64 blocks in reusable buffers.
    t1 = table16(scaled(domain(I16), z1, m1, sh1))
    t2 = table16(sign * scaled(domain(I16), z2, m2, sh2))
    scratch = Scratch()
    lo_a, hi_a, zo_a = (np.asarray(np.int64(v)) for v in (lo, hi, zo))  # 0-d: no per-call conversion

    def into(x, y, o):
        g1 = gather16(t1, x, scratch, "1")
        g2 = gather16(t2, y, scratch, "2")
        r = scratch.get("r", np.int64, o.shape)
        np.add(g1, g2, out=r)
        mbqm_inplace(r, mo, sho, tmp=scratch.get("t", np.int64, o.shape))
        if zo:
            r += zo_a
        clip_ufunc(r, lo_a, hi_a, out=r)
        np.copyto(o, r, casting="unsafe")
    return scalar_safe(blocked_into(into, I16))


def _pot_int16(node: NodeContext, a: Tensor, b: Tensor, sign: int, shift1: int, shift2: int, lo: int, hi: int) -> Kernel:
    """The LSTM-style int16 path with power-of-two scales (reference Add / Sub16)."""
    if not (shift1 == 0 or shift2 == 0) or shift1 > 0 or shift2 > 0:
        raise node.unsupported("power-of-two INT16 scales need one input at the output scale")
    if node.op.name == "ADD" and a.shape != b.shape:
        # LiteRT's POT int16 Add has no broadcasting path (it reads out of bounds).
        raise node.unsupported("broadcasting with power-of-two INT16 scales")

    ufunc = np.add if sign > 0 else np.subtract

    def run(x, y):
        r = ufunc(rdbpot_inplace(x.astype(np.int64), -shift1), rdbpot_inplace(y.astype(np.int64), -shift2))
        clip_ufunc(r, -32768, 32767, out=r)  # SaturatingAdd / SaturatingSub
        clip_ufunc(r, lo, hi, out=r)
        return r.astype(I16)
    return scalar_safe(blocked(run, I16))


@register("ADD", max_version=6, dtypes=("FLOAT32", "FLOAT16", "INT32", "INT64", "UINT8", "INT8", "INT16"))
def add(node: NodeContext) -> Kernel:
    return _add_sub(node, +1)


@register("SUB", max_version=5, dtypes=("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16"))
def sub(node: NodeContext) -> Kernel:
    return _add_sub(node, -1)
