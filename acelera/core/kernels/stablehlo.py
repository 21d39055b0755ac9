"""StableHLO element-wise ops and padding: STABLEHLO_ADD, _MULTIPLY, _MAXIMUM, _MINIMUM, _AND,
_SHIFT_LEFT, _PAD (tflite/kernels/stablehlo_elementwise.*, stablehlo_shift_left.cc,
stablehlo_pad.cc).

The element-wise ops take two tensors of one type and one shape (no broadcasting) and wrap
around on integer overflow as the C++ loops do.
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels.registry import NodeContext, register

_NUMERIC = ("FLOAT16", "FLOAT32", "FLOAT64", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16",
            "UINT32", "UINT64", "BOOL")
_FLOATS = {"FLOAT16", "FLOAT32", "FLOAT64"}


def _same_operands(node: NodeContext, allowed) -> None:
    a, b = node.input(0), node.input(1)
    if len(node.inputs) != 2 or a is None or b is None:
        raise node.unsupported("takes two inputs")
    if a.type_name not in allowed:
        raise node.unsupported(f"input type {a.type_name} is not supported")
    if a.type != b.type or a.shape != b.shape:
        raise node.unsupported(f"operands must have one type and shape, got {a.type_name}{list(a.shape)} "
                               f"and {b.type_name}{list(b.shape)}")


def _elementwise(op: str, fn, allowed=_NUMERIC):
    @register(op, max_version=1, dtypes=allowed)
    def prepare(node: NodeContext):
        _same_operands(node, allowed)
        dtype = node.outputs[0].dtype

        def run(x, y):
            return np.asarray(fn(x, y), dtype)

        return run

    return prepare


_elementwise("STABLEHLO_ADD", np.add)
_elementwise("STABLEHLO_MULTIPLY", lambda x, y: np.logical_and(x, y) if x.dtype == np.bool_ else np.multiply(x, y))
_elementwise("STABLEHLO_MAXIMUM", np.maximum)
_elementwise("STABLEHLO_MINIMUM", np.minimum)
_elementwise("STABLEHLO_AND", lambda x, y: np.logical_and(x, y) if x.dtype == np.bool_ else np.bitwise_and(x, y),
             tuple(t for t in _NUMERIC if t not in _FLOATS))


@register("STABLEHLO_SHIFT_LEFT", max_version=1, dtypes=("INT8", "INT16", "INT32"))
def shift_left(node: NodeContext):
    _same_operands(node, ("INT8", "INT16", "INT32"))
    dtype = node.outputs[0].dtype
    bits = dtype.itemsize * 8

    def run(x, y):
        # C++ shifts by >= the width (or negative) are undefined; take the low bits as x86 does.
        shift = (y.astype(np.int64) % bits).astype(np.uint64)
        return (x.astype(np.int64).view(np.uint64) << shift).astype(dtype)

    return run


_PAD_TYPES = _NUMERIC + ("BFLOAT16", "COMPLEX64", "COMPLEX128", "FLOAT8_E4M3FN", "FLOAT8_E5M2")  # only moved


@register("STABLEHLO_PAD", max_version=1, dtypes=_PAD_TYPES)
def stablehlo_pad(node: NodeContext):
    x_t, v_t = node.input(0), node.input(1)
    assert x_t is not None, "missing operand"
    rank = len(x_t.shape)
    lo = tuple(int(v) for v in node.options.get("edge_padding_low", ()))
    hi = tuple(int(v) for v in node.options.get("edge_padding_high", ()))
    interior = tuple(int(v) for v in node.options.get("interior_padding", ()))
    if not 1 <= rank <= 6 or not (len(lo) == len(hi) == len(interior) == rank):
        raise node.unsupported(f"needs edge_padding_low/high and interior_padding of length {rank}")
    if any(p < 0 for p in interior):
        raise node.unsupported("interior padding must be non-negative")
    if v_t is None or v_t.type != x_t.type or v_t.shape not in ((), (1,)):
        raise node.unsupported("the padding value must be a scalar of the operand's type")
    from acelera.core.model import MAX_TENSOR_BYTES

    out_shape = []
    for d, (n, a, b, p) in enumerate(zip(x_t.shape, lo, hi, interior)):
        size = a + b + n + max(n - 1, 0) * p
        if size < 0:
            raise node.unsupported(f"padding makes dimension {d} negative ({size})")
        out_shape.append(size)
    if int(np.prod(out_shape, dtype=np.float64)) * x_t.dtype.itemsize > MAX_TENSOR_BYTES:
        raise node.unsupported(f"output shape {out_shape} is too large")
    dtype = node.outputs[0].dtype

    def run(x, value):
        # Place x with interior gaps into a grid that ignores negative edges, then crop them.
        full = [n + max(n - 1, 0) * p + max(a, 0) + max(b, 0) for n, a, b, p in zip(x.shape, lo, hi, interior)]
        out = np.full(full, value.reshape(-1)[0], dtype)
        where = tuple(slice(max(a, 0), max(a, 0) + n + max(n - 1, 0) * p, p + 1)
                      for n, a, p in zip(x.shape, lo, interior))
        out[where] = x
        crop = tuple(slice(max(-a, 0), f - max(-b, 0)) for f, a, b in zip(full, lo, hi))
        return np.ascontiguousarray(out[crop])

    return run
