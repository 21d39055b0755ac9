"""The emulated NNAPI devices: what each one computes, in which arithmetic, and how fast.

A real NNAPI driver reports its name, type, feature level, the operations it supports
(`getSupportedOperations`) and per-operand-type performance (`PerformanceInfo`: exec time and
power usage relative to the CPU). These three devices report the same things:

==============  ====  ==============  ======================================================
device          type  feature level   computes
==============  ====  ==============  ======================================================
nnapi-reference cpu   the runtime's   every op NNAPI defines, every type, in float32
                                      (float16 when --nnapi_allow_fp16: relaxed computation)
emu-gpu-fp16    gpu   7 (1000007)     a mobile-GPU-like driver: float ops in float16 (every
                                      float32 value is rounded to half on the way in and out
                                      of each op), INT32 for index/shape ops; no quantized
                                      tensors; ranks <= 4; no recurrent, lookup, logical,
                                      comparison or QUANTIZE ops
emu-dsp-int8    acc.  30 (NNAPI 1.3)  a DSP/NPU-like driver: int8/uint8 quantized tensors
                                      only (constants may be anything: int32 biases, shape
                                      and axis operands), int32 accumulation and TFLite's
                                      fixed-point requantization; ranks <= 4; convolutions,
                                      pooling, elementwise, activations and data movement
==============  ====  ==============  ======================================================

Placement, as the NNAPI runtime does it: each operation goes to the device, among those it
may use, that supports it and has the best performance for the operation's operand type:
the lowest exec time, or the lowest power usage under `low_power`; ties go to the device
listed first. Execution uses the `acelera.plugins.emulation` runners: Fp16Runner (GPU, and
nnapi-reference with relaxed fp16), IntegerRunner (DSP), Fp32Runner (nnapi-reference).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from acelera.backends.emulation import DeviceRunner, Fp16Runner, Fp32Runner, IntegerRunner
from acelera.core.delegate import data_type
from acelera.core.kernels.registry import NodeContext
from acelera.plugins.nnapi.rules import RULES
from acelera.plugins.nnapi.sdk import FL7, NNAPI_1_3
from acelera.plugins.nnapi.table import ALL_TYPES, DeviceConstraint

F32, F16, I32, U8, I8 = "FLOAT32", "FLOAT16", "INT32", "UINT8", "INT8"

_GPU_OPS = """ADD SUB MUL DIV AVERAGE_POOL_2D MAX_POOL_2D L2_POOL_2D CONV_2D DEPTHWISE_CONV_2D TRANSPOSE_CONV
FULLY_CONNECTED CONCATENATION RESHAPE SQUEEZE EXPAND_DIMS SOFTMAX LOG_SOFTMAX LOGISTIC TANH RELU RELU6
RELU_N1_TO_1 ELU HARD_SWISH LEAKY_RELU PRELU PAD PADV2 MIRROR_PAD MEAN SUM REDUCE_MAX REDUCE_MIN
RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR STRIDED_SLICE SLICE SPLIT SPLIT_V TRANSPOSE SPACE_TO_DEPTH
DEPTH_TO_SPACE SPACE_TO_BATCH_ND BATCH_TO_SPACE_ND ABS EXP LOG SQRT RSQRT SIN COS POW NEG FLOOR MAXIMUM
MINIMUM SQUARED_DIFFERENCE L2_NORMALIZATION GATHER TILE PACK UNPACK BATCH_MATMUL DEQUANTIZE CAST ARG_MAX
ARG_MIN"""
_GPU_F16_OPS = "CONCATENATION GATHER EXPAND_DIMS DEQUANTIZE"
_GPU_I32_OPS = """ADD SUB MUL MAXIMUM MINIMUM NEG RESHAPE SQUEEZE EXPAND_DIMS GATHER SLICE SPLIT SPLIT_V TRANSPOSE
PACK TILE CAST BATCH_MATMUL MIRROR_PAD SQUARED_DIFFERENCE"""
_DSP_OPS = """ADD SUB MUL AVERAGE_POOL_2D MAX_POOL_2D CONV_2D DEPTHWISE_CONV_2D TRANSPOSE_CONV FULLY_CONNECTED
CONCATENATION RESHAPE SQUEEZE EXPAND_DIMS SOFTMAX LOGISTIC TANH RELU RELU6 RELU_N1_TO_1 HARD_SWISH LEAKY_RELU
PRELU PAD PADV2 MEAN REDUCE_MAX REDUCE_MIN RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR STRIDED_SLICE SLICE SPLIT
SPLIT_V TRANSPOSE SPACE_TO_DEPTH DEPTH_TO_SPACE SPACE_TO_BATCH_ND BATCH_TO_SPACE_ND MAXIMUM MINIMUM QUANTIZE
L2_NORMALIZATION GATHER PACK UNPACK"""


def operand_type(node: NodeContext) -> Optional[str]:
    """The type a device computes a node in: the input TFLite's rule checks, else the first
    non-constant input (TRANSPOSE_CONV's input 0 is its constant output shape)."""
    rule = RULES.get(node.op.name)
    if rule is not None and rule.types is not None:
        return rule.checked_type(node)
    return data_type(node)


def _ops(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True)
class Device:
    name: str
    type: str  # ANEURALNETWORKS_DEVICE_*: "cpu", "gpu", "accelerator"
    feature_level: Optional[int]  # None: the runtime's own feature level
    summary: str
    arithmetic: str  # "float32", "float16" or "int8"
    ops: Optional[frozenset[str]] = None  # None: every op
    #: types of the checked input, for every op / per op in addition; None: any
    types: Optional[frozenset[str]] = None
    extra_types: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: types every non-constant input and every output may have; None: any
    tensor_types: Optional[frozenset[str]] = None
    max_rank: Optional[int] = None
    #: operand class ("float32", "relaxed", "quant8", "int32") -> (exec time, power usage), CPU = 1
    perf: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def level(self, runtime_level: int) -> int:
        return runtime_level if self.feature_level is None else self.feature_level

    def dtypes(self, op: str) -> frozenset[str]:
        if self.ops is not None and op not in self.ops:
            return frozenset()
        if self.types is None:
            return ALL_TYPES
        return self.types | self.extra_types.get(op, frozenset())

    def why_not(self, node: NodeContext) -> Optional[str]:
        """None when this device takes the node, else the reason."""
        op = node.op.name
        if self.ops is not None and op not in self.ops:
            return f"{self.name} has no {op}"
        ty = operand_type(node)
        if self.types is not None and ty not in self.dtypes(op):
            return f"{self.name} does not compute {op} on {ty} ({'/'.join(sorted(self.dtypes(op)))} only)"
        if self.tensor_types is not None:
            for t in (*[t for t in node.inputs if t is not None and not t.is_constant], *node.outputs):
                if t.type_name not in self.tensor_types:
                    return f"{self.name} holds no {t.type_name} tensors ({'/'.join(sorted(self.tensor_types))} only)"
        if self.max_rank is not None:
            for t in (*[t for t in node.inputs if t is not None], *node.outputs):
                if len(t.shape) > self.max_rank:
                    return f"{self.name} takes tensors of rank <= {self.max_rank}"
        return None

    def cost(self, node: NodeContext, relaxed: bool, low_power: bool) -> float:
        ty = operand_type(node)
        cls = ("relaxed" if relaxed else "float32") if ty in (F32, F16) else "quant8" if ty in (U8, I8) else "int32"
        exec_time, power = self.perf.get(cls, (1.0, 1.0))
        return power if low_power else exec_time

    def runner(self, allow_fp16: bool) -> DeviceRunner:
        if self.arithmetic == "float16" or (allow_fp16 and self.arithmetic == "float32"):
            r: DeviceRunner = Fp16Runner()
        elif self.arithmetic == "int8":
            r = IntegerRunner()
        else:
            r = Fp32Runner()
        r.device = self.name
        return r

    def precision(self, allow_fp16: bool) -> dict[str, str]:
        """What the conformance suite may expect of results computed here."""
        if self.arithmetic == "int8":
            return {"float": "float32", "integer": "integer"}
        fp16 = self.arithmetic == "float16" or allow_fp16
        return {"float": "float16" if fp16 else "float32", "integer": "exact"}


REFERENCE = Device(
    "nnapi-reference", "cpu", None,
    "NNAPI's CPU reference driver: every op and type NNAPI defines, float32 arithmetic "
    "(float16 with --nnapi_allow_fp16)", "float32",
    perf={})
GPU = Device(
    "emu-gpu-fp16", "gpu", FL7,
    "mobile-GPU-like: float ops computed in float16, INT32 index/shape ops, no quantized tensors, ranks <= 4",
    "float16", ops=_ops(_GPU_OPS), types=frozenset({F32}),
    extra_types={**{op: frozenset({F16}) for op in _ops(_GPU_F16_OPS)},
                 **{op: frozenset({I32}) for op in _ops(_GPU_I32_OPS)}},
    tensor_types=frozenset({F32, F16, I32}), max_rank=4,
    perf={"float32": (0.3, 0.5), "relaxed": (0.2, 0.4), "int32": (0.5, 0.6)})
DSP = Device(
    "emu-dsp-int8", "accelerator", NNAPI_1_3,
    "DSP/NPU-like: int8/uint8 quantized tensors only, int32 accumulation with TFLite's requantization, ranks <= 4",
    "int8", ops=_ops(_DSP_OPS), types=frozenset({U8, I8}), tensor_types=frozenset({U8, I8}), max_rank=4,
    perf={"quant8": (0.1, 0.05)})

#: the devices ANeuralNetworks_getDevice enumerates, in order
CATALOGUE: dict[str, Device] = {d.name: d for d in (REFERENCE, GPU, DSP)}


def describe_catalogue(runtime_level: int = NNAPI_1_3) -> list[str]:
    return [f"{d.name} ({d.type}, feature level {d.level(runtime_level)}): {d.summary}" for d in CATALOGUE.values()]


@dataclass(frozen=True)
class DeviceSet:
    """Target devices that filter nodes (TFLite's GetNodesSupportedByAccelerator)."""

    devices: tuple[Device, ...]

    @property
    def names(self) -> str:
        return ", ".join(d.name for d in self.devices)

    def dtypes(self, op: str) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for d in self.devices:
            out |= d.dtypes(op)
        return out

    def explain(self, node: NodeContext) -> Optional[str]:
        reasons = [d.why_not(node) for d in self.devices]
        if any(r is None for r in reasons):
            return None
        return "not supported by the target NNAPI device(s): " + "; ".join(r for r in reasons if r is not None)

    def constraint(self, op: str) -> DeviceConstraint:
        return DeviceConstraint(f"supported by a target device ({self.names})",
                                lambda node: self.explain(node) is None, self.explain)
