"""coreml: Apple Core ML delegate support rules with emulated execution (issue #8)."""
from acelera.plugins.tables import F32, not_built, table, unbuilt_factory
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

G = "Core ML delegate (emulated)"
FLAGS = (
    Flag("use_coreml", bool, False, "Enable the Core ML delegate", "coreml", G),
    Flag("coreml_version", int, 0, "Target Core ML version (2 or 3; 0 = newest)", "coreml", G),
    Flag("coreml_devices", str, "all", "Devices to use: 'all' or 'neural_engine'", "coreml", G, ("all", "neural_engine")),
)
OPS = """
ADD,MUL,AVERAGE_POOL_2D,MAX_POOL_2D,CONCATENATION,CONV_2D,TRANSPOSE_CONV,HARD_SWISH,LOGISTIC,RELU,RELU_N1_TO_1,RELU6,TANH,MEAN,PAD,PADV2,MIRROR_PAD,RESHAPE,RESIZE_BILINEAR,SOFTMAX 1
DEPTHWISE_CONV_2D 2
FULLY_CONNECTED 6
"""
SPEC = DelegateSpec(
    name="coreml", summary="Core ML delegate (emulated, float models only)", version="0.1.0", flags=FLAGS,
    enabled_by=("use_coreml",), op_table=table("coreml", OPS, F32),
    model_types=frozenset({"float32", "float16"}), backend="emulated",
    default_min_nodes=2, probe=not_built(8), factory=unbuilt_factory("coreml"))


@hookimpl
def register_delegates(register):
    register(SPEC)
