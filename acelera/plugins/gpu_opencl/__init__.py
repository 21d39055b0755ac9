"""gpu-opencl: TFLite's GPU delegate on OpenCL (issue #6).

Real OpenCL kernels through pyopencl on any OpenCL platform (PoCL on a machine without a
GPU). The op table below lists only what this backend implements and its tests cover; the
rows carry TFLite's GPU constraints (gpu_common) plus this backend's own.
"""
from __future__ import annotations

from acelera.core.delegate import Constraint
from acelera.plugins.gpu_common import (CONV_GEOMETRY, CONV_IO_ANY, DEPTHWISE, FULLY_CONNECTED_ANY, GPU_FLAGS,
                                        GROUP, STRIDES, gpu_table, wants_backend)
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

VERSION = "0.2.0"

DEVICE_FLAG = Flag("gpu_opencl_device", str, "",
                   "OpenCL device for gpu-opencl: 'P:D' platform:device indices or a name substring; "
                   "empty = prefer a GPU", "gpu-opencl", GROUP)

F = ("FLOAT32",)
Q = ("FLOAT32", "INT8", "UINT8")
#: op -> (max version, data types): what the OpenCL backend implements
OPS = {
    # elementwise unary
    "ABS": (2, F), "COS": (1, F), "ELU": (1, F), "EXP": (2, F), "FLOOR": (1, F), "LOG": (2, F),
    "LOGISTIC": (2, Q), "NEG": (1, F), "RSQRT": (2, F), "SIN": (1, F), "SQRT": (2, F), "SQUARE": (1, F),
    "TANH": (2, Q), "HARD_SWISH": (1, Q),
    "RELU": (2, Q), "RELU6": (2, Q), "RELU_N1_TO_1": (1, F), "LEAKY_RELU": (2, F),
    # elementwise binary
    "ADD": (2, Q), "SUB": (2, Q), "MUL": (3, Q), "DIV": (2, F), "MAXIMUM": (2, Q), "MINIMUM": (2, Q),
    "SQUARED_DIFFERENCE": (2, F), "POW": (1, F), "PRELU": (1, Q),
    # convolutions
    "CONV_2D": (6, Q), "DEPTHWISE_CONV_2D": (6, Q), "FULLY_CONNECTED": (9, Q), "TRANSPOSE_CONV": (3, F),
    "Convolution2DTransposeBias": (1, F),
    # pooling, resize, softmax, reductions
    "AVERAGE_POOL_2D": (2, Q), "MAX_POOL_2D": (2, Q), "RESIZE_BILINEAR": (3, Q),
    "RESIZE_NEAREST_NEIGHBOR": (3, Q), "SOFTMAX": (2, Q), "MEAN": (2, Q),
    # layout
    "RESHAPE": (1, Q), "CONCATENATION": (2, Q), "PAD": (2, Q), "PADV2": (2, F), "MIRROR_PAD": (2, F),
    "SLICE": (2, Q), "STRIDED_SLICE": (4, Q), "TRANSPOSE": (4, Q), "DEPTH_TO_SPACE": (2, Q),
    "SPACE_TO_DEPTH": (2, Q),
    # quantization boundaries (float view)
    "QUANTIZE": (2, Q), "DEQUANTIZE": (3, ("INT8", "UINT8", "FLOAT16")),
}


def _const(*indices: int):
    def check(n) -> bool:
        return all(n.input(i) is None or n.input(i).is_constant for i in indices)
    return check


def _small(n) -> bool:
    from acelera.plugins.gpu_plan.layout import Layout

    return sum(Layout(tuple(t.shape)).size for t in n.inputs if t is not None) < (1 << 24) - 1


INDEX_MAP = Constraint("inputs below 2**24 stored elements (moved through an index map)", _small)
EXTRA = {
    "CONV_2D": (Constraint("input channels == filter input channels (no grouped convolution)",
                           lambda n: n.input(0).shape[-1] == n.input(1).shape[-1]),),
    "SLICE": (Constraint("begin and size constant", _const(1, 2)), INDEX_MAP),
    "STRIDED_SLICE": (Constraint("begin, end and strides constant", _const(1, 2, 3)), INDEX_MAP),
    "PAD": (Constraint("paddings constant", _const(1)), INDEX_MAP),
    "PADV2": (Constraint("paddings and pad value constant", _const(1, 2)), INDEX_MAP),
    "MIRROR_PAD": (Constraint("paddings constant", _const(1)), INDEX_MAP),
    "TRANSPOSE": (Constraint("permutation constant", _const(1)), INDEX_MAP),
    "RESHAPE": (INDEX_MAP,), "CONCATENATION": (INDEX_MAP,), "DEPTH_TO_SPACE": (INDEX_MAP,),
    "SPACE_TO_DEPTH": (INDEX_MAP,),
}
#: runtime weights and biases are packed on the host at invoke (and fp16 weights dequantized at
#: prepare look like runtime tensors to is_node_supported), so the conv family takes them
REPLACE = {"CONV_2D": (CONV_IO_ANY, CONV_GEOMETRY), "DEPTHWISE_CONV_2D": (CONV_IO_ANY, CONV_GEOMETRY, DEPTHWISE),
           "TRANSPOSE_CONV": (CONV_IO_ANY, STRIDES), "FULLY_CONNECTED": (FULLY_CONNECTED_ANY,)}
OP_TABLE = gpu_table("gpu-opencl", OPS, EXTRA, REPLACE)


def probe():
    from acelera.plugins.gpu_opencl.device import probe as _probe

    return _probe()


def create(options):
    from acelera.plugins.gpu_opencl.delegate import GpuOpenCLDelegate
    from acelera.plugins.gpu_opencl.device import DeviceError, open_device
    from acelera.registrar.registry import RegistryError

    try:
        dev = open_device(options.get("gpu_opencl_device", ""))
    except DeviceError as e:
        raise RegistryError(f"gpu-opencl: {e}") from None
    return GpuOpenCLDelegate(options, dev, OP_TABLE, VERSION)


SPEC = DelegateSpec(
    name="gpu-opencl", summary="GPU delegate, OpenCL backend (PoCL on CPU-only machines)", version=VERSION,
    flags=GPU_FLAGS + (DEVICE_FLAG,), enabled_by=("use_gpu",), op_table=OP_TABLE,
    # Quantized ops are declared (each within one step of the integer reference), but whole
    # full-integer models are not: the float view TFLite's GPU delegate uses drifts further
    # than the integer model tolerance over many layers (see the plugin notes).
    model_types=frozenset({"float32", "float16", "dynamic-range"}), backend="hardware",
    default_max_partitions=1, probe=probe, factory=create, wants=wants_backend("cl"),
    precision="float16", fp16_weights_aware=True,
    notes="fp16 storage (vload_half/vstore_half) with float32 arithmetic when precision loss is allowed; "
          "quantized models run in float with quantization simulators (TFLite's float view): each op within "
          "one step of the integer kernels, whole int8 models drift by a few steps (not declared); "
          "--gpu_inference_for_sustained_speed is accepted and has no effect")


@hookimpl
def register_delegates(register):
    register(SPEC)
