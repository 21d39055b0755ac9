"""Flags and op table shared by the GPU delegate's two backends (OpenCL and OpenGL)."""
from acelera.plugins.tables import GPU_TYPES, table
from acelera.registrar.flags import Flag

GROUP = "GPU delegate"
GPU_FLAGS = (
    Flag("use_gpu", bool, False, "Enable the GPU delegate", "gpu", GROUP),
    Flag("gpu_precision_loss_allowed", bool, True, "Allow FP16 compute (half storage and arithmetic)", "gpu", GROUP),
    Flag("gpu_experimental_enable_quant", bool, True, "Allow running quantized models", "gpu", GROUP),
    Flag("gpu_inference_for_sustained_speed", bool, False, "Prefer sustained throughput over first-answer latency", "gpu", GROUP),
    Flag("gpu_backend", str, "", "'cl' = OpenCL only, 'gl' = OpenGL only, empty = OpenCL first, falling back to OpenGL",
         "gpu", GROUP, ("", "cl", "gl")),
)

GPU_OPS = """
ABS,COS,ELU,EXP,FLOOR,GELU,LOG,LOGISTIC,NEG,RSQRT,SIGN,SIN,SQRT,SQUARE,TANH 2
ADD,ADD_N,SUB,DIV,POW,SQUARED_DIFFERENCE,MAXIMUM,MINIMUM,FLOOR_DIV,FLOOR_MOD 2
MUL 3
AVERAGE_POOL_2D,MAX_POOL_2D 2
CONV_2D,DEPTHWISE_CONV_2D 6
TRANSPOSE_CONV 3
FULLY_CONNECTED 9
CONCATENATION 2
DEQUANTIZE 3
QUANTIZE 2
PAD,PADV2,MIRROR_PAD 2
PRELU 1
RELU,RELU6,RELU_N1_TO_1,LEAKY_RELU 2
RESHAPE 1
RESIZE_BILINEAR,RESIZE_NEAREST_NEIGHBOR 3
SLICE 2
STRIDED_SLICE 4
SOFTMAX 2
TRANSPOSE 4
DEPTH_TO_SPACE,SPACE_TO_DEPTH 2
HARD_SWISH,MEAN 1
Convolution2DTransposeBias 1
"""


def gpu_table(name: str):
    return table(name, GPU_OPS, GPU_TYPES)


def wants_backend(backend: str):
    return lambda options: options.get("gpu_backend", "") in ("", backend)
