"""int8 / uint8 AVERAGE_POOL_2D of xnnpack-cpu: the reference kernel's arithmetic
(acelera/core/kernels/pooling.py, after LiteRT's reference_integer_ops::AveragePool): an int32
sum of the raw values of the valid taps, divided by their count rounding half away from zero,
then clamped to the fused activation's range, in one numba pass (bit-exact with the reference)."""
from __future__ import annotations

import numpy as np
from numba import njit

from acelera.core.errors import AceleraError
from acelera.core.kernels.common import quantized_activation_range, scale_zp
from acelera.core.kernels.registry import NodeContext
from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.int8_conv import QuantSpec


@njit(cache=True, nogil=True, boundscheck=False)
def avg_pool_q(x, out, fh, fw, sh, sw, ph, pw, lo, hi, acc):
    """x (N, H, W, C) and out (N, OH, OW, C) of int8 or uint8; acc: C int32 of scratch."""
    nb, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for b in range(nb):
        for oy in range(oh):
            y0 = oy * sh - ph
            ys, ye = max(0, y0), min(h, y0 + fh)
            for ox in range(ow):
                x0 = ox * sw - pw
                xs, xe = max(0, x0), min(w, x0 + fw)
                for ch in range(c):
                    acc[ch] = 0
                for yy in range(ys, ye):
                    for xx in range(xs, xe):
                        row = x[b, yy, xx]
                        for ch in range(c):
                            acc[ch] += np.int32(row[ch])
                cnt = np.int32((ye - ys) * (xe - xs))
                half = cnt // 2
                o = out[b, oy, ox]
                for ch in range(c):
                    v = acc[ch]
                    q = (v + half) // cnt if v > 0 else -((half - v) // cnt)
                    o[ch] = min(max(q, lo), hi)


def avg_pool_spec(label: str, nodes, ctx: NodeContext) -> QuantSpec | str:
    """The native step of a quantized AVERAGE_POOL_2D, or why there is none."""
    if not jit.AVAILABLE:
        return f"numba kernels are off ({jit.REASON})"
    x_t, y_t = ctx.input(0), ctx.outputs[0]
    if (x_t is None or x_t.type_name not in ("INT8", "UINT8") or y_t.type_name != x_t.type_name
            or len(x_t.shape) != 4 or len(y_t.shape) != 4):
        return "AVERAGE_POOL_2D without a 4-D int8/uint8 input and output of that type"
    o = ctx.options
    fh, fw = int(o.get("filter_height", 0) or 0), int(o.get("filter_width", 0) or 0)
    sh, sw = int(o.get("stride_h", 0) or 0), int(o.get("stride_w", 0) or 0)
    padding = int(o.get("padding", 0) or 0)
    act = int(o.get("fused_activation_function", 0) or 0)
    if min(fh, fw, sh, sw) <= 0 or padding not in (0, 1):
        return "AVERAGE_POOL_2D with an unusual geometry"
    n, h, w, c = (int(d) for d in x_t.shape)
    pads = []
    for size, filt, stride, out in ((h, fh, sh, int(y_t.shape[1])), (w, fw, sw, int(y_t.shape[2]))):
        want = (size + stride - 1) // stride if padding == 0 else (size + stride - filt) // stride
        if out != want or out <= 0:
            return "AVERAGE_POOL_2D whose output shape is not the padding's"
        before = max((out - 1) * stride + filt - size, 0) // 2
        origin = np.arange(out) * stride - before
        if np.any(np.minimum(origin + filt, size) - np.maximum(origin, 0) <= 0):
            return "AVERAGE_POOL_2D with an empty window"
        pads.append(before)
    dtype = x_t.dtype
    info = np.iinfo(dtype)
    try:
        lo, hi = (quantized_activation_range(act, *scale_zp(y_t), dtype) if act != 0
                  else (int(info.min), int(info.max)))
    except AceleraError as e:
        return f"activation range: {e}"
    x_tid, out_tid = ctx.op.inputs[0], ctx.op.outputs[0]
    args = (fh, fw, sh, sw, pads[0], pads[1], np.int32(lo), np.int32(hi))

    def build(a, s, _p, _k):
        return jit.bind(avg_pool_q, a[x_tid].reshape(n, h, w, c), a[out_tid].reshape(y_t.shape), *args, s[0])
    return QuantSpec(label, nodes, (x_tid,), (out_tid,), build, scratch=(((c,), np.int32),), float_io=False,
                     op="AVERAGE_POOL_2D")
