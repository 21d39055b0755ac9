"""POW with numpy broadcasting (tflite/kernels/pow.cc, optimized_ops::BroadcastPow4D).

A broadcast single near-integer exponent >= 1 takes BroadcastPow4D's repeated-squaring path
(float products clamped to +-FLT_MAX); otherwise float32 is pow in float32 and int32 is pow in
double converted to int32 (an out-of-range value gives INT32_MIN, as on x86). A negative int32
exponent fails the invoke.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import AceleraError
from acelera.core.kernels.binary_common import FLOATS, I32, binary_operands, clip_ufunc, float_dtypes
from acelera.core.kernels.common import FLT_MAX
from acelera.core.kernels.registry import Kernel, NodeContext, register
from acelera.core.quant import INT32_MIN, round_half_away


class InvokeError(AceleraError):
    """An input value LiteRT rejects at invoke time (e.g. a negative int32 POW exponent)."""


@register("POW", max_version=1, dtypes=("FLOAT32", "INT32"))
def pow_(node: NodeContext) -> Kernel:
    a, b, out = binary_operands(node, {I32} | float_dtypes())
    dt = a.dtype
    is_float = dt in FLOATS
    requires_broadcast = a.shape != b.shape

    def integer_exponent(y: np.ndarray) -> int | None:
        """optimized_ops::BroadcastPow4D's fast path: a single near-integer exponent >= 1."""
        if not requires_broadcast or y.size != 1:
            return None
        e = y.reshape(-1)[0]
        if is_float:
            if not np.isfinite(e) or abs(float(e)) >= 2 ** 31:
                return None
            n = int(round_half_away(e))
            if not (abs(np.float32(e) - np.float32(n)) < np.float32(1e-5)):
                return None
        else:
            n = int(e)
        return n if n >= 1 else None

    def repeated_squaring(x: np.ndarray, n: int) -> np.ndarray:
        if n == 1:
            return x.copy()
        r = repeated_squaring(x, n // 2)
        r = np.multiply(r, r, out=r)
        if is_float:
            clip_ufunc(r, -FLT_MAX, FLT_MAX, out=r)
        if n % 2:
            r = np.multiply(x, r, out=r)
            if is_float:
                clip_ufunc(r, -FLT_MAX, FLT_MAX, out=r)
        return r

    def run(x, y):
        if dt == I32 and np.any(y < 0):
            raise InvokeError("POW does not support negative value for int32")
        shape = np.broadcast_shapes(x.shape, y.shape)
        n = integer_exponent(y)
        if n is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                return repeated_squaring(x, n).reshape(shape)
        with np.errstate(all="ignore"):
            if is_float:
                return np.asarray(np.power(x, y), dt).reshape(shape)
            # std::pow(int, int) computes in double; the double -> int32 conversion of an
            # out-of-range value gives INT32_MIN on x86 (cvttsd2si).
            r = np.power(x.astype(np.float64), y.astype(np.float64))
            ok = (r > -2147483649.0) & (r < 2147483648.0)
            r = np.where(ok, np.trunc(np.where(ok, r, 0.0)), INT32_MIN)
            return np.asarray(r.astype(I32)).reshape(shape)
    return run
