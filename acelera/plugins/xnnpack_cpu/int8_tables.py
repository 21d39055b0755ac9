"""int8 elementwise steps of xnnpack-cpu as lookup tables of their reference kernels.

An elementwise int8 op is a function of each value (unary: LOGISTIC, TANH, ELU, LEAKY_RELU,
HARD_SWISH, the RELUs, ABS, NEG, QUANTIZE requantizing int8) or of each pair of values of two
same-shaped operands (ADD, SUB, MUL, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE): its reference
kernel is run once, at build time, on all 256 values or all 65536 pairs, and the step looks
every output up in that table (qjit.lut1, qjit.lut2), so it computes exactly what the
reference computes.

MEAN over the pixels of an int8 image is, in its reference kernel (QuantizedMeanOrSum), a
function of each channel's integer sum: it is tabulated over every possible sum the same way
(one synthetic image whose channels have all those sums) and qjit.sum_lut looks the sums up.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import AceleraError
from acelera.core.kernels.registry import NodeContext, lookup
from acelera.plugins.xnnpack_cpu import jit, qjit
from acelera.plugins.xnnpack_cpu.int8_conv import QuantSpec

BINARY = ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")
UNARY = ("LOGISTIC", "TANH", "ELU", "LEAKY_RELU", "HARD_SWISH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1",
         "ABS", "NEG", "QUANTIZE")


def pairs() -> tuple[np.ndarray, np.ndarray]:
    """All int8 pairs (a, b), a major: pair 256 * (a + 128) + b + 128."""
    v = np.arange(-128, 128, dtype=np.int8)
    return np.repeat(v, 256), np.tile(v, 256)


def table_spec(label: str, nodes, ctx: NodeContext, consts: dict[int, np.ndarray]) -> QuantSpec | str:
    """The table step of an int8 elementwise node (or MEAN), or why there is none."""
    op = ctx.op.name
    if op == "MEAN" and jit.AVAILABLE:
        return _mean_spec(label, nodes, ctx, consts)
    if op not in BINARY and op not in UNARY:
        return f"no int8 fast path for {op}"
    if not jit.AVAILABLE:
        return f"numba kernels are off ({jit.REASON})"
    arity = 2 if op in BINARY else 1
    ins, outs = ctx.inputs, ctx.outputs
    if len(ins) != arity or len(outs) != 1 or any(t is None or t.type_name != "INT8" for t in (*ins, *outs)):
        return f"{op} without {arity} int8 input(s) and an int8 output"
    shape = tuple(outs[0].shape)
    if any(t is not None and tuple(t.shape) != shape for t in ins):
        return f"{op} with broadcasting operands"
    args = pairs() if arity == 2 else (np.arange(-128, 128, dtype=np.int8),)
    try:
        table = np.asarray(lookup(ctx.op).prepare(ctx)(*args))
    except (AceleraError, ValueError, TypeError, IndexError) as e:  # it could not run on a flat table
        return f"the reference kernel does not tabulate: {type(e).__name__}: {e}"
    if table.shape != args[0].shape or table.dtype != np.int8:
        return f"{op} does not tabulate to {args[0].size} int8 values"
    tids = tuple(ctx.op.inputs)
    out_tid = ctx.op.outputs[0]
    table = np.ascontiguousarray(table)

    def build(a, _s, _p, _k):
        xs = [(consts[t] if t in consts else a[t]).reshape(-1) for t in tids]
        out = a[out_tid].reshape(-1)
        if arity == 2:
            return jit.bind(qjit.lut2, xs[0], xs[1], table, out)
        return jit.bind(qjit.lut1, xs[0], table, out)
    reads = tuple(dict.fromkeys(t for t in tids if t not in consts))
    return QuantSpec(label, nodes, reads, (out_tid,), build, float_io=False, op=op)


#: the most pixels a tabulated MEAN averages (its table has 255 * pixels + 1 entries, made from an
#: image of 255 * pixels**2 values)
MEAN_PIXELS = 256


def _mean_spec(label: str, nodes, ctx: NodeContext, consts: dict[int, np.ndarray]) -> QuantSpec | str:
    x_t, y_t = ctx.inputs[0], ctx.outputs[0]
    a_tid = ctx.op.inputs[1] if len(ctx.op.inputs) > 1 else -1
    axes = consts.get(a_tid) if a_tid >= 0 else None
    if x_t is None or x_t.type_name != "INT8" or y_t.type_name != "INT8" or len(x_t.shape) != 4:
        return "MEAN without a 4-D int8 input and an int8 output"
    if axes is None or sorted({int(a) % 4 for a in np.asarray(axes).reshape(-1)}) != [1, 2]:
        return "MEAN over other axes than the pixels"
    n, h, w, c = (int(d) for d in x_t.shape)
    pixels = h * w
    if not 0 < pixels <= MEAN_PIXELS or int(np.prod(y_t.shape)) != n * c:
        return f"MEAN over {pixels} pixels"
    sums = np.arange(-128 * pixels, 127 * pixels + 1)
    base = np.floor_divide(sums, pixels)
    extra = sums - base * pixels  # that many pixels hold base + 1
    image = (base[None, :] + (np.arange(pixels)[:, None] < extra[None, :])).astype(np.int8)
    try:
        table = np.asarray(lookup(ctx.op).prepare(ctx)(image.reshape(1, h, w, sums.size), np.asarray(axes)))
    except (AceleraError, ValueError, TypeError, IndexError) as e:
        return f"the reference kernel does not tabulate: {type(e).__name__}: {e}"
    if table.size != sums.size or table.dtype != np.int8:
        return "MEAN does not tabulate"
    table = np.ascontiguousarray(table.reshape(-1))
    x_tid, out_tid = ctx.op.inputs[0], ctx.op.outputs[0]

    def build(a, s, _p, _k):
        x = (consts[x_tid] if x_tid in consts else a[x_tid]).reshape(-1)
        return jit.bind(qjit.sum_lut, x, n, pixels, c, table, 128 * pixels, s[0], a[out_tid].reshape(-1))
    return QuantSpec(label, nodes, () if x_tid in consts else (x_tid,), (out_tid,), build,
                     scratch=(((c,), np.int64),), float_io=False, op="MEAN")
