"""hexagon: Qualcomm Hexagon DSP delegate support rules with emulated execution (issue #8)."""
from acelera.plugins.tables import Q8, not_built, table, unbuilt_factory
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

G = "Hexagon delegate (emulated)"
FLAGS = (
    Flag("use_hexagon", bool, False, "Enable the Hexagon DSP delegate", "hexagon", G),
    Flag("hexagon_lib_path", str, "/data/local/tmp", "Accepted for compatibility; unused by the emulator", "hexagon", G),
    Flag("hexagon_profiling", bool, False, "Print a per-op cycle-style profile from the emulator", "hexagon", G),
)
OPS = """
ADD,SUB,MUL,ARG_MAX,ARG_MIN,AVERAGE_POOL_2D,MAX_POOL_2D,CONCATENATION,DEPTH_TO_SPACE,SPACE_TO_DEPTH 2
CONV_2D,DEPTHWISE_CONV_2D,TRANSPOSE_CONV,RESIZE_BILINEAR,RESIZE_NEAREST_NEIGHBOR 3
FULLY_CONNECTED 4
HARD_SWISH,NEG,RESHAPE 1
L2_NORMALIZATION,LOGISTIC,TANH,RELU6,MAXIMUM,MINIMUM,MEAN,MIRROR_PAD,PACK,PAD,QUANTIZE,SLICE,SOFTMAX,SPLIT,STRIDED_SLICE,TRANSPOSE 2
"""
SPEC = DelegateSpec(
    name="hexagon", summary="Hexagon DSP delegate (emulated, quantized models only)", version="0.1.0",
    flags=FLAGS, enabled_by=("use_hexagon",), op_table=table("hexagon", OPS, Q8),
    model_types=frozenset({"full-integer", "qat"}), backend="emulated",
    default_max_partitions=4, default_min_nodes=2, probe=not_built(8), factory=unbuilt_factory("hexagon"))


@hookimpl
def register_delegates(register):
    register(SPEC)
