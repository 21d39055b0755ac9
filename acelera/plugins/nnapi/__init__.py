"""nnapi: Android NNAPI delegate support rules with emulated execution (issue #8)."""
from acelera.plugins.tables import GPU_TYPES, not_built, table, unbuilt_factory
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

G = "NNAPI delegate (emulated)"
FLAGS = (
    Flag("use_nnapi", bool, False, "Enable the NNAPI delegate", "nnapi", G),
    Flag("nnapi_execution_preference", str, "", "fast_single_answer / sustained_speed / low_power / undefined", "nnapi", G),
    Flag("nnapi_execution_priority", str, "", "default / low / medium / high (Android 11+)", "nnapi", G),
    Flag("nnapi_accelerator_name", str, "", "Name of the emulated NNAPI device to target", "nnapi", G),
    Flag("disable_nnapi_cpu", bool, True, "Exclude the nnapi-reference CPU device", "nnapi", G),
    Flag("nnapi_allow_fp16", bool, False, "Let fp32 run as fp16", "nnapi", G),
    Flag("nnapi_allow_dynamic_dimensions", bool, False, "Allow dynamic dimensions without recompiling", "nnapi", G),
    Flag("nnapi_use_burst_mode", bool, False, "Use NNAPI burst executions", "nnapi", G),
    Flag("nnapi_android_sdk", int, 30, "Android API level whose NNAPI rules are emulated", "nnapi", G),
)
OPS = """
ADD,MUL,SUB,DIV 2
AVERAGE_POOL_2D,MAX_POOL_2D,L2_POOL_2D 2
CONV_2D,DEPTHWISE_CONV_2D 3
FULLY_CONNECTED 4
CONCATENATION,RESHAPE,SOFTMAX,LOGISTIC,TANH,RELU,RELU6,RELU_N1_TO_1,PAD,MEAN,TRANSPOSE,STRIDED_SLICE 2
"""
SPEC = DelegateSpec(
    name="nnapi", summary="Android NNAPI delegate (emulated devices)", version="0.1.0", flags=FLAGS,
    enabled_by=("use_nnapi",), op_table=table("nnapi", OPS, GPU_TYPES),
    model_types=frozenset({"float32", "float16", "dynamic-range", "full-integer", "qat"}), backend="emulated",
    probe=not_built(8), factory=unbuilt_factory("nnapi"))


@hookimpl
def register_delegates(register):
    register(SPEC)
