"""What the op handlers and the compiler share: the compile error, per-op handler tables, and
helpers reading a node's options and quantization into parameter-block values."""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Callable

import numpy as np

from acelera.backends.gpu import params as S
from acelera.core.kernels.registry import NodeContext
from acelera.core.model import Tensor

if TYPE_CHECKING:
    from acelera.backends.gpu.compiler import Compiler

QUANT_TYPES = {"INT8": (-128, 127), "UINT8": (0, 255)}
#: fused_activation_function -> (unary code, lo, hi)
FUSED = {0: None, 1: (S.U_CLAMP, 0.0, np.inf), 2: (S.U_CLAMP, -1.0, 1.0), 3: (S.U_CLAMP, 0.0, 6.0),
         4: (S.U_TANH, 0.0, 0.0)}


class CompileError(Exception):
    """The partition uses something this backend cannot run (prepare fails, CPU fallback)."""


Handler = Callable[["Compiler", NodeContext], None]


class Handlers(dict):
    """One op family's handlers, op name -> handler, filled by `handles`:

        HANDLERS = Handlers()
        handles = HANDLERS.handles

        @handles("CONV_2D")
        def conv_2d(c: Compiler, ctx: NodeContext) -> None: ...
    """

    def handles(self, *ops: str):
        def deco(fn: Handler) -> Handler:
            for op in ops:
                self[op] = fn
            return fn
        return deco


def f2i(v: float) -> int:
    """A float's float32 bits as an int32 parameter slot."""
    return int(np.array([v], np.float32).view(np.int32)[0])


def quant_params(t: Tensor | None):
    """(scale, zero point, qmin, qmax) of a quantized int8/uint8 activation tensor, else None."""
    if t is None or t.type_name not in QUANT_TYPES or not t.quantization.is_set:
        return None
    qmin, qmax = QUANT_TYPES[t.type_name]
    return float(t.quantization.scale[0]), float(t.quantization.zero_point[0]), float(qmin), float(qmax)


def fused(ctx: NodeContext):
    act = int(ctx.options.get("fused_activation_function", 0) or 0)
    if act not in FUSED:
        raise CompileError(f"fused activation {act} is not supported")
    return FUSED[act]


def custom_ints(ctx: NodeContext, n: int) -> tuple[int, ...]:
    raw = bytes(ctx.op.custom_options)
    if len(raw) < 4 * n:
        raise CompileError(f"{ctx.op.name}: custom options too short")
    return struct.unpack_from(f"<{n}i", raw)
