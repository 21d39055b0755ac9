"""gpu-gl: TFLite's GPU delegate on OpenGL ES 3.1 compute shaders (issue #7).

Headless GL through moderngl on EGL (Mesa llvmpipe on a machine without a GPU). Partitions
are compiled by the backend-neutral partition compiler (gpu_plan: PHWC4 buffers, copy maps,
quantization simulators, fp16 storage rules) and run as GLSL ES 3.1 compute shaders
(shaders.py) on SSBOs that stay on the device. The op table lists only what this backend's
tests cover.
"""
from __future__ import annotations

from acelera.plugins.gpu_common import GPU_FLAGS, gpu_table, wants_backend
from acelera.plugins.gpu_plan.optable import EXTRA as PLAN_EXTRA, OPS as PLAN_OPS, REPLACE as PLAN_REPLACE
from acelera.registrar import hookimpl
from acelera.registrar.spec import DelegateSpec

VERSION = "0.1.0"

#: the ops this backend implements and tests (float32 models, fp16 weights)
GL_OPS = (
    # face_detection_short_range
    "CONV_2D", "DEPTHWISE_CONV_2D", "PAD", "MAX_POOL_2D", "RELU", "ADD", "RESHAPE", "CONCATENATION", "DEQUANTIZE",
    # hand_recrop
    "PRELU", "STRIDED_SLICE",
    # selfie_segmentation
    "HARD_SWISH", "AVERAGE_POOL_2D", "LOGISTIC", "MUL", "RESIZE_BILINEAR", "Convolution2DTransposeBias",
    # heads
    "FULLY_CONNECTED", "SOFTMAX", "MEAN",
)
F = ("FLOAT32",)
OPS = {op: (PLAN_OPS[op][0], ("FLOAT16",) if op == "DEQUANTIZE" else F) for op in GL_OPS}
OP_TABLE = gpu_table("gpu-gl", OPS, {k: v for k, v in PLAN_EXTRA.items() if k in OPS},
                     {k: v for k, v in PLAN_REPLACE.items() if k in OPS})

#: whether the conformance suite passes on this backend (it did on Mesa llvmpipe, fp16 and fp32
#: storage: 166 pass, 8 skip (quantized models, not declared)); while False the plugin reports
#: itself unavailable unless ACELERA_GPU_GL_UNCERTIFIED=1
CERTIFIED = True
UNCERTIFIED_ENV = "ACELERA_GPU_GL_UNCERTIFIED"


def probe():
    import os

    from acelera.plugins.gpu_gl.context import probe as _probe

    s = _probe()
    if s.ok and not CERTIFIED and os.environ.get(UNCERTIFIED_ENV) != "1":
        from acelera.core.delegate import Support

        return Support(False, "gpu-gl works here but has not passed the conformance suite yet "
                       f"(set {UNCERTIFIED_ENV}=1 to use it anyway)")
    return s


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
    model_types=frozenset({"float32", "float16"}), backend="hardware",
    default_max_partitions=1, probe=probe, factory=create, wants=wants_backend("gl"), fallback_for="gpu-opencl",
    precision="float16", fp16_weights_aware=True,
    notes="GLSL ES 3.1 compute shaders on SSBOs; fp16 storage (packHalf2x16/unpackHalf2x16) with float32 "
          "arithmetic when precision loss is allowed; every GL call runs on one dedicated thread; "
          "no program-binary serialization yet")


@hookimpl
def register_delegates(register):
    register(SPEC)
