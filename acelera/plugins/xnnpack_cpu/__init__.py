"""xnnpack-cpu: the fast CPU delegate (issue #5)."""
from acelera.plugins.tables import F32, not_built, table, unbuilt_factory
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

G = "XNNPACK delegate"
FLAGS = (
    Flag("use_xnnpack", bool, False, "Explicitly apply the XNNPACK delegate", "xnnpack-cpu", G),
    Flag("xnnpack_force_fp16", bool, False, "Compute in float16 even where the model does not ask for it", "xnnpack-cpu", G),
    Flag("xnnpack_weight_cache_file_path", str, "", "File-backed packed-weight cache", "xnnpack-cpu", G),
)
OPS = """
ABS,CEIL,ELU,FLOOR,HARD_SWISH,LEAKY_RELU,LOGISTIC,MAXIMUM,MINIMUM,NEG,RELU,RELU6,RELU_N1_TO_1,ROUND,SQRT,SQUARE,SQUARED_DIFFERENCE,TANH 1
ADD,MUL,SUB,DIV 2
AVERAGE_POOL_2D,MAX_POOL_2D 2
CONCATENATION 2
CONV_2D 3
DEPTHWISE_CONV_2D 3
DEPTH_TO_SPACE,SPACE_TO_DEPTH 2
FULLY_CONNECTED 4
MEAN,PAD,PRELU,RESHAPE,RESIZE_BILINEAR,SLICE,SOFTMAX,SPLIT,STRIDED_SLICE,TRANSPOSE,TRANSPOSE_CONV 1
"""
SPEC = DelegateSpec(
    name="xnnpack-cpu", summary="Fast CPU delegate with packed weights and fused kernels", version="0.1.0",
    flags=FLAGS, enabled_by=("use_xnnpack",), op_table=table("xnnpack-cpu", OPS, F32 | {"INT8", "FLOAT16"}),
    model_types=frozenset({"float32", "float16", "full-integer", "qat"}), backend="cpu",
    probe=not_built(5), factory=unbuilt_factory("xnnpack-cpu"))


@hookimpl
def register_delegates(register):
    register(SPEC)
