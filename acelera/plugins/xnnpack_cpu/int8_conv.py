"""int8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED steps of xnnpack-cpu.

They are built from the reference kernels' prepared quantization parameters
(`acelera.core.kernels.prepared.prepared_params`): the filter is packed for the numba
micro-kernel (qjit.py), bias and requantization constants become per-channel arrays, and the
step writes straight into the planned output buffer. A quantized node without a fast path
runs on its reference kernel; its step (a `QuantSpec`) says why in `fallback`, and
`fallbacks(kernel)` lists them for a compiled partition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from acelera.core.kernels.prepared import QuantizedConvParams, QuantizedFCParams, prepared_params
from acelera.core.kernels.registry import NodeContext
from acelera.plugins.xnnpack_cpu import jit, qjit, qjit_ir, qjit_par, threads
from acelera.plugins.xnnpack_cpu.spec import Spec

I8, I16, I32, I64, U8 = np.int8, np.int16, np.int32, np.int64, np.uint8
FAST_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
#: a CONV_2D or FULLY_CONNECTED step of at least this many multiply-adds (10-30 us on one
#: thread) runs its parallel kernel when threads allow: 1.3-1.9x faster on two threads
PARALLEL_MACS = 1 << 20
#: the same for DEPTHWISE_CONV_2D, whose multiply-adds cost about 3 times as much (48x48x32
#: 3x3: about 50 us on one thread, 1.4x faster on two)
DW_PARALLEL_MACS = 1 << 19
#: channels x pixels a depthwise inner loop covers (longer loops vectorize better)
DW_SPAN = 512
#: strided depthwise convolutions with fewer channels split their input into column phases
DW_PHASED = 64
#: bytes of the im2col panel a CONV_2D gathers before multiplying it
PANEL_BYTES = 4096


@dataclass
class QuantSpec(Spec):
    """The step of a quantized node: `fallback` is why it runs on its reference kernel ("" when
    it runs on a fast path)."""

    op: str = ""
    fallback: str = ""


class Fallback(NamedTuple):
    label: str
    op: str
    reason: str


def fallbacks(kernel) -> list[Fallback]:
    """The quantized nodes of a compiled partition (xnnpack-cpu's delegate kernel) that run on
    their reference kernel, and why."""
    return [Fallback(s.label, s.op, s.fallback) for s in kernel.specs
            if isinstance(s, QuantSpec) and s.fallback]


def fast_spec(label: str, nodes, ctx: NodeContext, consts: dict[int, np.ndarray]) -> QuantSpec | str:
    """The fast int8 step of a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED node, or why there
    is none."""
    why: list[str] = []
    p = prepared_params(ctx, why)
    if p is None:
        return why[0]
    if not jit.AVAILABLE:
        return f"numba kernels are off ({jit.REASON})"
    if p.input_dtype != I8 or p.output_dtype != I8:
        return f"{p.input_dtype.name} input / {p.output_dtype.name} output (only int8 has a fast path)"
    x_tid, out_tid = ctx.op.inputs[0], ctx.op.outputs[0]
    if len(ctx.op.outputs) != 1:
        return "more than one output"
    x_t = ctx.inputs[0]
    if x_t is None:
        return "no input"
    if isinstance(p, QuantizedFCParams):
        return _fc_spec(label, nodes, p, x_tid, out_tid, consts, int(np.prod(x_t.shape)), int(np.prod(ctx.outputs[0].shape)))
    if p.wide:
        return "int64 accumulator"
    if p.geometry.empty:
        return "empty output"
    if int(np.max(p.shift, initial=0)) > 31:
        return "a requantization left shift over 31"
    if p.op == "DEPTHWISE_CONV_2D":
        return _dw_spec(label, nodes, p, x_tid, out_tid, consts)
    if p.groups != 1:
        return f"grouped convolution ({p.groups} groups)"
    return _conv_spec(label, nodes, p, x_tid, out_tid, consts)


def _requant(p: QuantizedConvParams, reps: int, correction: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The requantization table (qjit_ir.requant_table, flat) tiled `reps` times; `correction` is
    subtracted from the bias (qjit.input_correction), modulo 2**32."""
    bias = np.zeros(p.channels, I64) if p.bias is None else p.bias.astype(I64)
    if correction is not None:
        bias = bias - correction
    return {"tab": qjit_ir.requant_table(_wrap32(bias), p.multiplier, p.shift, reps).reshape(-1)}


def _wrap32(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, I64).astype(I32).astype(I64)


def _weights(p: QuantizedConvParams | QuantizedFCParams) -> np.ndarray:
    assert p.weights is not None  # prepared_params covers constant filters only
    return p.weights


def _fits_int8(w: np.ndarray) -> bool:
    return bool(w.size == 0 or (int(w.min()) >= -128 and int(w.max()) <= 127))


def _entries(kernel, kernel_par, args, parallel: bool):
    """A zero-argument step calling the compiled kernel; when `parallel`, its parallel twin
    whenever the invoke allows more than one thread (compiled on first use)."""
    serial = jit.bind(kernel, *args)
    if not parallel:
        return serial
    nt = np.ones(1, I64)
    par: list = []
    now = threads.numba_threads

    def run():
        n = now()
        if n > 1:
            if not par:
                par.append(jit.bind(kernel_par, *args, nt))
            nt[0] = n
            par[0]()
        else:
            serial()
    return run


def _bands(parallel: bool) -> int:
    return max(1, threads.NUMBA_MAX) if parallel else 1


def _layout() -> np.ndarray:
    return np.array([qjit.KG, qjit.NR, qjit.MR], I64)


def _packing(pack):
    """`pack` with the micro-kernel layout recorded, and a reader of the packed arrays that packs
    again when they come from a weight cache written for another layout (another CPU)."""
    def tagged() -> dict[str, np.ndarray]:
        return {**pack(), "layout": _layout()}

    def read(packed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if "layout" in packed and np.array_equal(packed["layout"], _layout()):
            return packed
        return tagged()
    return tagged, read


def _source(a, consts, tid):
    return consts[tid] if tid in consts else a[tid]


def _conv_spec(label, nodes, p: QuantizedConvParams, x_tid, out_tid, consts) -> QuantSpec | str:
    g, o = p.geometry, p.channels
    k = g.kh * g.kw * g.c
    w = _weights(p).reshape(o, k)
    if not _fits_int8(w):
        return "filter values outside int8"
    m = g.n * g.oh * g.ow
    macs = m * o * k
    parallel = macs >= PARALLEL_MACS and threads.NUMBA_MAX > 1
    bands = _bands(parallel)
    groups = (k + qjit.KG - 1) // qjit.KG
    ka = qjit.KG * groups
    nb = (o + qjit.NR - 1) // qjit.NR
    hp, wp = _padded(p)
    padded = g.kh * g.kw > 1 or g.pt > 0 or g.pl > 0
    tpp = max(1, min(8, PANEL_BYTES // (qjit.MR * ka), -(-m // qjit.MR)))  # tiles per panel
    geo = np.array([g.n, g.h, g.w, g.c, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.oh, g.ow, g.pt, g.pl,
                    p.input_zero_point, p.output_offset, p.qmin, p.qmax, o, groups, nb, hp, wp, tpp], I64)

    def pack():
        bp, _, _ = qjit.pack_filter(w)
        return {"w": bp, **_requant(p, 1, qjit.input_correction(w, p.input_zero_point))}

    pack, read = _packing(pack)

    def build(a, s, priv, kp_):
        kp_ = read(kp_)
        x = _source(a, consts, x_tid).reshape(-1)
        out = a[out_tid].reshape(-1)
        xp = priv[0]
        xp.fill(128 + p.input_zero_point)  # padded taps: x - zp = 0
        return _entries(qjit.conv_gemm, qjit.conv_gemm_par, (x, xp, kp_["w"], kp_["tab"], geo, out, s[0], s[1]),
                        parallel)
    scratch = (((bands * qjit.MR * tpp * ka,), U8), ((bands * qjit.MR * qjit.NR,), I8))
    private = (((g.n * hp * wp * g.c if padded else 1,), U8),)
    return QuantSpec(label, nodes, _reads(x_tid, consts), (out_tid,), build, pack=pack, scratch=scratch,
                     private=private, float_io=False, gemm_mnk=macs if parallel else 0, op="CONV_2D")


def _padded(p: QuantizedConvParams) -> tuple[int, int]:
    """Height and width of the input padded so that every tap of every output is inside."""
    g = p.geometry
    pb = max((g.oh - 1) * g.sh + (g.kh - 1) * g.dh - g.pt - (g.h - 1), 0)
    pr = max((g.ow - 1) * g.sw + (g.kw - 1) * g.dw - g.pl - (g.w - 1), 0)
    return g.h + g.pt + pb, g.w + g.pl + pr


def _dw_spec(label, nodes, p: QuantizedConvParams, x_tid, out_tid, consts) -> QuantSpec | str:
    g, o = p.geometry, p.channels
    taps = g.kh * g.kw
    w = _weights(p).reshape(taps, o)
    if not _fits_int8(w):
        return "filter values outside int8"  # (x - zp) * w must fit the int16 products of qjit.dw_conv
    hp, wp = _padded(p)
    phases = g.sw if g.sw > 1 and o < DW_PHASED else 1
    wq = -(-wp // phases)
    q = min(g.ow, max(1, -(-DW_SPAN // o))) if phases == g.sw else 1  # output pixels per inner loop
    macs = g.n * g.oh * g.ow * o * taps
    parallel = macs >= min(DW_PARALLEL_MACS, PARALLEL_MACS) and threads.NUMBA_MAX > 1
    bands = _bands(parallel)
    geo = np.array([g.n, g.h, g.w, g.c, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.oh, g.ow, g.pt, g.pl,
                    p.input_zero_point, p.output_offset, p.qmin, p.qmax, o, p.depth_multiplier, hp, wq,
                    q, phases], I64)

    def pack():
        wt = np.zeros((taps, q * o + qjit.TAP_VL), I16)
        wt[:, :q * o] = np.tile(w, (1, q))
        return {"w": wt.reshape(-1), **_requant(p, q)}

    pack, read = _packing(pack)

    def build(a, s, priv, kp_):
        kp_ = read(kp_)
        x = _source(a, consts, x_tid).reshape(-1)
        out = a[out_tid].reshape(-1)
        return _entries(qjit.dw_conv, qjit.dw_conv_par, (x, priv[0], kp_["w"], kp_["tab"], geo, out, s[0], s[1]),
                        parallel)
    scratch = (((bands * qjit.TAP_VL,), I8), ((bands * 2 * taps,), I64))
    return QuantSpec(label, nodes, _reads(x_tid, consts), (out_tid,), build, pack=pack,
                     scratch=scratch, private=(((g.n * hp * phases * wq * o + qjit.TAP_VL,), I16),),
                     float_io=False, gemm_mnk=macs if parallel else 0, op="DEPTHWISE_CONV_2D")


def _fc_spec(label, nodes, p: QuantizedFCParams, x_tid, out_tid, consts, in_size: int,
             out_size: int) -> QuantSpec | str:
    if p.fixed_point or not p.acc32:
        return "int16 path (fixed-point or int64 accumulator)"
    w = _weights(p)
    if not _fits_int8(w):
        return "filter values outside int8 (a filter zero point)"
    units, k = p.units, p.depth
    batch = in_size // k
    if out_size != batch * units:
        return f"output of {out_size} values for {batch} rows of {units}"
    groups = (k + qjit.KG - 1) // qjit.KG
    nb = (units + qjit.NR - 1) // qjit.NR
    macs = batch * k * units
    parallel = macs >= PARALLEL_MACS and threads.NUMBA_MAX > 1 and nb > 1
    bands = _bands(parallel)
    geo = np.array([batch, k, units, p.input_zero_point, p.output_zero_point, p.qmin, p.qmax, groups, nb,
                    int(p.per_channel)], I64)

    def pack():
        bp, _, _ = qjit.pack_filter(w)
        bias = np.zeros(units, I64) if p.bias is None else p.bias.astype(I64)
        bias = _wrap32(bias - qjit.input_correction(w, p.input_zero_point))
        return {"w": bp, "bias": bias, "eff": np.ascontiguousarray(p.effective_scale, np.float64)}

    pack, read = _packing(pack)

    def build(a, s, _p, kp_):
        kp_ = read(kp_)
        x = _source(a, consts, x_tid).reshape(-1)
        out = a[out_tid].reshape(-1)
        return _entries(qjit.fc_gemm, qjit_par.fc_gemm_par, (x, kp_["w"], kp_["bias"], kp_["eff"], geo, out, s[0], s[1]),
                        parallel)
    scratch = (((bands * qjit.MR * qjit.KG * groups,), U8), ((qjit.MR * nb * qjit.NR,), I32))
    return QuantSpec(label, nodes, _reads(x_tid, consts), (out_tid,), build, pack=pack, scratch=scratch,
                     float_io=False, gemm_mnk=macs if parallel else 0, op="FULLY_CONNECTED")


def _reads(x_tid: int, consts) -> tuple[int, ...]:
    return () if x_tid in consts else (x_tid,)
