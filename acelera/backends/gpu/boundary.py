"""Host-side partition boundary shared by the GPU backends' kernels (no device API here).

Runtime inputs are (de)quantized to float, then packed into the device layout (PHWC4, or a
conv weight packer for runtime weights/biases) in the storage dtype; outputs are unpacked
from PHWC4 and quantized back to the port's dtype. A backend kernel calls `_init_boundary`
with its Plan, then `_to_device` per runtime input and `_from_device` per output.

Bool and int32 tensors are floats on the device (bools 0/1); a port marked `float_storage`
travels as float32 whatever the plan's storage (bool/int32 tensors of a half plan, and float32
copies of inputs read exactly). A bool output is `value != 0`; an int32 output (a CAST result,
already truncated on the device) saturates to the int32 range with NaN as the maximum, as
LiteRT's float -> int cast does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from acelera.backends.gpu.layout import Layout
from acelera.backends.gpu.packing import PACKERS
from acelera.core.quant import round_half_away

INT32_MAX = 2 ** 31 - 1

if TYPE_CHECKING:
    from acelera.backends.gpu.plan import Plan, Port


class BoundaryMixin:
    """`sdtype` (storage dtype), `in_ports` [(input index, port, layout)] of the runtime inputs
    with a device buffer, `out_ports` [(port, layout)], and the conversions at both ends."""

    sdtype: type
    in_ports: list
    out_ports: list

    def _init_boundary(self, plan: Plan) -> None:
        self.sdtype = np.float16 if plan.half else np.float32
        self.in_ports = [(p.index, p, Layout(p.shape)) for p in plan.inputs if p.buffer is not None]
        self.out_ports = [(p, Layout(p.shape)) for p in plan.outputs]

    def _to_device(self, port: Port, lay: Layout, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if port.channel_quant:
            scales, zps, axis = port.channel_quant
            shape = [1] * x.ndim
            shape[axis] = -1
            x = ((x.astype(np.float64) - np.reshape(zps, shape)) * np.reshape(scales, shape)).astype(np.float32)
        elif port.scale:
            x = (x.astype(np.float32) - np.float32(port.zero_point)) * np.float32(port.scale)
        dtype = np.float32 if port.float_storage else self.sdtype
        if port.pack:
            return PACKERS[port.pack](x.astype(np.float32), port.pack_arg).astype(dtype)
        return lay.pack(x, dtype)

    def _from_device(self, port: Port, lay: Layout, flat: np.ndarray) -> np.ndarray:
        v = lay.unpack(flat, np.float32)
        if port.dtype == "BOOL":
            return v != 0
        if port.dtype == "INT32":
            with np.errstate(invalid="ignore"):
                w = np.where(np.isnan(v), INT32_MAX, np.clip(v.astype(np.float64), -INT32_MAX - 1, INT32_MAX))
            return w.astype(np.int32)
        dtype: np.dtype = np.dtype({"FLOAT32": np.float32, "FLOAT16": np.float16, "INT8": np.int8,
                                    "UINT8": np.uint8}[port.dtype])
        if port.scale:
            info = np.iinfo(dtype)
            q = round_half_away(v / np.float32(port.scale)) + port.zero_point
            return np.clip(q, info.min, info.max).astype(dtype)
        return v.astype(dtype, copy=False)
