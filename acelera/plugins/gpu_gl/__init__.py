"""gpu-gl: TFLite's GPU delegate on OpenGL ES 3.1 compute shaders (issue #7).

Headless GL through moderngl on EGL (Mesa llvmpipe on a machine without a GPU). Partitions
are compiled by the backend-neutral partition compiler (acelera.backends.gpu: PHWC4 buffers,
copy maps, quantization simulators, fp16 storage rules) and run as GLSL ES 3.1 compute shaders
(acelera.backends.gpu.kernels.glsl) on SSBOs that stay on the device. The op table lists only what this backend's
tests cover.
"""
from __future__ import annotations

from acelera.backends.gpu.optable import EXTRA as PLAN_EXTRA
from acelera.backends.gpu.optable import OPS as PLAN_OPS
from acelera.backends.gpu.optable import REPLACE as PLAN_REPLACE
from acelera.backends.gpu.rules import GPU_FLAGS, gpu_table, wants_backend
from acelera.registrar import hookimpl
from acelera.registrar.spec import DelegateSpec

VERSION = "0.2.0"

#: the ops this backend declares: those of the shared compiler's table (backends.gpu.optable.OPS)
#: that its shaders run and the conformance suite passed on GL (fp32 and fp16 storage), listed
#: explicitly so ops added to OPS for the OpenCL backend are not declared here untested
GL_OPS = (
    # face_detection_short_range
    "CONV_2D", "DEPTHWISE_CONV_2D", "PAD", "MAX_POOL_2D", "RELU", "ADD", "RESHAPE", "CONCATENATION", "DEQUANTIZE",
    # hand_recrop
    "PRELU", "STRIDED_SLICE",
    # selfie_segmentation
    "HARD_SWISH", "AVERAGE_POOL_2D", "LOGISTIC", "MUL", "RESIZE_BILINEAR", "Convolution2DTransposeBias",
    # heads
    "FULLY_CONNECTED", "SOFTMAX", "MEAN",
    # quantized models (float view): the boundaries
    "QUANTIZE",
    # the rest of the shared table
    "ABS", "COS", "ELU", "EXP", "FLOOR", "LOG", "NEG", "RSQRT", "SIN", "SQRT", "SQUARE", "TANH",
    "RELU6", "RELU_N1_TO_1", "LEAKY_RELU",
    "SUB", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW",
    "TRANSPOSE_CONV", "RESIZE_NEAREST_NEIGHBOR",
    "PADV2", "MIRROR_PAD", "SLICE", "TRANSPOSE", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH",
    # TFLite's seed list and the ops around LOGICAL_AND (bools as 0/1 floats, converted at the boundary)
    "GELU", "SIGN", "ADD_N", "FLOOR_DIV", "FLOOR_MOD", "LSTM",
    "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "CAST", "SELECT", "SELECT_V2",
)
#: the same rows (versions and data types, int8/uint8 included) as the shared table
OPS = {op: PLAN_OPS[op] for op in GL_OPS}
OP_TABLE = gpu_table("gpu-gl", OPS, {k: v for k, v in PLAN_EXTRA.items() if k in OPS},
                     {k: v for k, v in PLAN_REPLACE.items() if k in OPS})

def probe():
    from acelera.plugins.gpu_gl.context import probe as _probe

    return _probe()


def create(options):
    from acelera.plugins.gpu_gl.context import GLError, open_device
    from acelera.plugins.gpu_gl.delegate import GpuGLDelegate
    from acelera.registrar.registry import RegistryError

    try:
        dev = open_device()
    except GLError as e:
        raise RegistryError(f"gpu-gl: {e}") from None
    return GpuGLDelegate(options, dev, OP_TABLE, VERSION)


SPEC = DelegateSpec(
    name="gpu-gl", summary="GPU delegate, OpenGL compute-shader backend (Mesa llvmpipe without a GPU)",
    version=VERSION, flags=GPU_FLAGS, enabled_by=("use_gpu",), op_table=OP_TABLE,
    # as gpu-opencl: quantized models run in TFLite's float view (quantization simulators), each
    # op within one step of the integer kernels, whole models against the float-view answer on its floor
    model_types=frozenset({"float32", "float16", "dynamic-range", "full-integer"}), backend="hardware",
    default_max_partitions=1, probe=probe, factory=create, wants=wants_backend("gl"), fallback_for="gpu-opencl",
    precision="float16", fp16_weights_aware=True,
    notes="GLSL ES 3.1 compute shaders on SSBOs; fp16 storage (packHalf2x16/unpackHalf2x16) with float32 "
          "arithmetic when precision loss is allowed; every GL call runs on one dedicated thread; "
          "with --delegate_serialize_dir/_token the compiled plans and linked program binaries "
          "(glGetProgramBinary through ctypes) are cached, only the plans where the driver offers no "
          "binary format; on Mesa llvmpipe the machine code is Mesa's own shader cache's")


@hookimpl
def register_delegates(register):
    register(SPEC)
