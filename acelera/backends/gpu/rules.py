"""What TFLite's GPU delegate shares between its backends (OpenCL and OpenGL): flags, the op
table with its versions and constraints (facts 6.1), the general tensor rules, the precision
rule and the log lines printed after partitioning.

A backend declares the subset of the table it implements (`gpu_table(name, ops=...)`) and may
add constraints of its own; the rules here are the GPU delegate's, identical for both.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from acelera.backends.tables import GPU_TYPES, table
from acelera.core.delegate import Constraint, OpSupport, OpTable, Support
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

#: TFLite's GPU op table: op names and the max version model_builder accepts (facts 6.1).
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

# --- the general rules (every op) ----------------------------------------------------------

ARENA_FLOAT = frozenset({"FLOAT32", "FLOAT16"})
ARENA_QUANT = frozenset({"INT8", "UINT8"})
#: fused activations the GPU delegate accepts: NONE, RELU, RELU_N1_TO_1, RELU6, TANH (not SIGN_BIT)
FUSED_ACTIVATIONS = frozenset({0, 1, 2, 3, 4})
ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
#: TFLite's extra allowed types (facts 6.1): bool outputs of the comparison and logical ops,
#: bool LOGICAL_AND inputs, CAST between bool / float / int32, a bool SELECT condition, int32
#: ONE_HOT and GATHER indices. The op's own row narrows them to the positions TFLite allows.
EXTRA_TYPES = {
    **{op: frozenset({"BOOL"}) for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
                                          "LOGICAL_AND", "SELECT", "SELECT_V2")},
    "CAST": frozenset({"BOOL", "INT32"}), "ONE_HOT": frozenset({"INT32"}), "GATHER": frozenset({"INT32"}),
}
#: ops whose non-data inputs (shapes, axes, paddings, indices) are integer tensors
_INDEX_INPUTS = {"RESHAPE": (1,), "PAD": (1,), "PADV2": (1,), "MIRROR_PAD": (1,), "SLICE": (1, 2),
                 "STRIDED_SLICE": (1, 2, 3), "TRANSPOSE": (1,), "MEAN": (1,), "SUM": (1,),
                 "REDUCE_MAX": (1,), "REDUCE_MIN": (1,), "REDUCE_PROD": (1,), "RESIZE_BILINEAR": (1,),
                 "RESIZE_NEAREST_NEIGHBOR": (1,), "TRANSPOSE_CONV": (0,)}


def general_support(node, enable_quant: bool) -> Support:
    """TFLite's checks that apply to every op: tensor ranks, arena types, fused activation."""
    name = node.op.name
    index_inputs = _INDEX_INPUTS.get(name, ())
    arena = ARENA_FLOAT | (ARENA_QUANT if enable_quant else frozenset()) | EXTRA_TYPES.get(name, frozenset())
    for i, t in enumerate(node.inputs):
        if t is None:
            continue
        if len(t.shape) > 4:
            return Support(False, f"{name}: tensor '{t.name}' has rank {len(t.shape)} (at most 4 supported)", "constraint")
        if i in index_inputs or t.is_constant and t.type_name not in ARENA_FLOAT | ARENA_QUANT:
            continue
        if t.type_name not in arena:
            why = " (quantized models need --gpu_experimental_enable_quant)" if t.type_name in ARENA_QUANT else ""
            return Support(False, f"{name}: input type {t.type_name} is not supported{why}", "input type")
    for t in node.outputs:
        if len(t.shape) > 4:
            return Support(False, f"{name}: tensor '{t.name}' has rank {len(t.shape)} (at most 4 supported)", "constraint")
        if t.type_name not in arena:
            why = " (quantized models need --gpu_experimental_enable_quant)" if t.type_name in ARENA_QUANT else ""
            return Support(False, f"{name}: output type {t.type_name} is not supported{why}", "input type")
    act = node.options.get("fused_activation_function")
    if act is not None and int(act) not in FUSED_ACTIVATIONS:
        return Support(False, f"{name}: fused activation {ACTIVATION_NAMES.get(int(act), act)} is not supported",
                       "constraint")
    if name in ("DEQUANTIZE", "QUANTIZE") and not enable_quant:
        return Support(False, f"{name}: needs --gpu_experimental_enable_quant", "constraint")
    return Support(True)


# --- per-op constraints (facts 6.1) --------------------------------------------------------

def _runtime(node) -> list:
    return [t for t in node.inputs if t is not None and not t.is_constant]


def _c(description: str, check) -> Constraint:
    return Constraint(description, check)


def _positive(*names: str):
    return lambda n: all(int(n.options.get(k, 1) or 0) > 0 for k in names)


ONE_RUNTIME_INPUT = _c("needs exactly 1 runtime input and 1 output",
                       lambda n: len(_runtime(n)) == 1 and len(n.outputs) == 1)
TWO_INPUTS = _c("needs exactly 2 inputs", lambda n: len([t for t in n.inputs if t is not None]) == 2)
BINARY_INPUTS = _c("needs 2 runtime inputs or 1 runtime and 1 constant input, and 1 output",
                   lambda n: len([t for t in n.inputs if t is not None]) == 2 and len(_runtime(n)) >= 1
                   and len(n.outputs) == 1)
CONV_IO = _c("needs 1 or 2 runtime inputs and 1 output",
             lambda n: 1 <= len(_runtime(n)) <= 2 and len(n.outputs) == 1)
#: CONV_IO where weights and bias may also be runtime tensors (fp16 weights dequantized at
#: prepare are runtime tensors in acelera's IR, where TFLite's FP16GraphPartitionHelper
#: shows the delegate the fp16 constants)
CONV_IO_ANY = _c("needs a runtime data input and 1 output (weights and bias constant or runtime)",
                 lambda n: _data_input(n) is not None and not _data_input(n).is_constant and len(n.outputs) == 1)


def _data_input(n):
    return n.input(2 if n.op.name == "TRANSPOSE_CONV" else 0)
POOL_GEOMETRY = _c("kernel and strides must be positive",
                   _positive("filter_height", "filter_width", "stride_h", "stride_w"))
CONV_GEOMETRY = _c("strides and dilations must be positive",
                   _positive("stride_h", "stride_w", "dilation_h_factor", "dilation_w_factor"))
STRIDES = _c("strides must be positive", _positive("stride_h", "stride_w"))


def _broadcast_ok(n) -> bool:
    """Default-mode broadcast when both ranks > 1 and differ: 3D->4D (batch 1), [1,1]->4D
    (batch 1), [b,c]->[b,x,y,c]."""
    ins = [t for t in n.inputs if t is not None]
    if len(ins) != 2:
        return False
    a, b = (tuple(t.shape) for t in ins)
    if len(a) <= 1 or len(b) <= 1 or len(a) == len(b):
        return True
    lo, hi = (a, b) if len(a) < len(b) else (b, a)
    if len(hi) != 4:
        return False
    if len(lo) == 3:
        return hi[0] == 1
    if len(lo) == 2:
        return (lo == (1, 1) and hi[0] == 1) or (lo[0] == hi[0] and lo[1] == hi[3])
    return False


BROADCAST = _c("broadcast between ranks must be 3D->4D or [1,1]->4D with batch 1, or [b,c]->[b,x,y,c]",
               _broadcast_ok)


def _depthwise_ok(n) -> bool:
    x, w, b, y = n.input(0), n.input(1), n.input(2), n.outputs[0]
    if len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4:
        return False
    m = int(n.options.get("depth_multiplier", 1) or 1)
    return (x.shape[0] == y.shape[0] and w.shape[3] == y.shape[3] and y.shape[3] == x.shape[3] * m
            and (b is None or (len(b.shape) == 1 and b.shape[0] == y.shape[3])))


DEPTHWISE = _c("all tensors 4D, batch in == out, filter dim 3 == out channels == in channels x "
               "depth_multiplier, bias size == out channels", _depthwise_ok)


def _fc_ok(n) -> bool:
    if int(n.options.get("weights_format", 0) or 0) != 0:
        return False
    x = n.input(0)
    if x is None or x.is_constant or len(_runtime(n)) > 2:
        return False
    if n.options.get("keep_num_dims") and len(x.shape) != len(n.outputs[0].shape):
        return False
    return True


FULLY_CONNECTED = _c("default weights format, input 0 not constant, at most 2 runtime inputs; with "
                     "keep_num_dims input rank == output rank", _fc_ok)
FULLY_CONNECTED_ANY = _c("default weights format, input 0 not constant (weights and bias constant or "
                         "runtime); with keep_num_dims input rank == output rank",
                         lambda n: _fc_ok(n) or (len(_runtime(n)) == 3 and _fc_ok_any(n)))


def _fc_ok_any(n) -> bool:
    x = n.input(0)
    return (int(n.options.get("weights_format", 0) or 0) == 0 and x is not None and not x.is_constant
            and not (n.options.get("keep_num_dims") and len(x.shape) != len(n.outputs[0].shape)))


def _pad_ok(n) -> bool:
    p = n.input(1)
    if p is None or tuple(p.shape) not in ((4, 2), (3, 2)):
        return False
    if n.op.name == "MIRROR_PAD" and int(n.options.get("mode", 0) or 0) != 0:
        return False
    return len(_runtime(n)) == 1


PAD = _c("paddings of shape 4x2 or 3x2, 1 runtime input; MIRROR_PAD in REFLECT mode only", _pad_ok)
RESIZE_BILINEAR = _c("1 runtime input; not both align_corners and half_pixel_centers",
                     lambda n: len(_runtime(n)) == 1 and not (n.options.get("align_corners")
                                                              and n.options.get("half_pixel_centers")))
RESIZE_NEAREST = _c("1 runtime input", lambda n: len(_runtime(n)) == 1)
SLICE_RANK = _c("at least 3 inputs and an input of rank 3 or 4",
                lambda n: len(n.inputs) >= 3 and len(n.input(0).shape) in (3, 4))


def _strided_ok(n) -> bool:
    o = n.options
    if any(int(o.get(k, 0) or 0) for k in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        return False
    return len(n.inputs) >= 4 and len(n.input(0).shape) in (3, 4)


STRIDED_SLICE = _c("no ellipsis/new_axis/shrink masks, at least 4 inputs, input rank 3 or 4", _strided_ok)
SOFTMAX = _c("beta must be 1", lambda n: float(n.options.get("beta", 1.0)) == 1.0)
AXES_CONST = _c("1 runtime input and constant int32 axes",
                lambda n: len(_runtime(n)) == 1 and n.input(1) is not None and n.input(1).is_constant
                and n.input(1).type_name == "INT32")
BLOCK_SIZE = _c("block_size must be > 1", lambda n: int(n.options.get("block_size", 0) or 0) > 1)
DEQUANT = _c("1 input, 1 output; INT16 input is not supported",
             lambda n: len(n.inputs) == 1 and len(n.outputs) == 1 and n.input(0).type_name != "INT16")
ONE_IN_OUT = _c("1 input and 1 output", lambda n: len(n.inputs) == 1 and len(n.outputs) == 1)
TCONV_BIAS = _c("weights input present; strides > 0",
                lambda n: n.input(1) is not None and _tconv_bias_strides(n))


def _tconv_bias_strides(n) -> bool:
    import struct

    raw = bytes(n.op.custom_options)
    return len(raw) >= 12 and min(struct.unpack_from("<iii", raw)[1:]) > 0


UNARY_OPS = ("ABS", "COS", "ELU", "EXP", "FLOOR", "GELU", "LOG", "LOGISTIC", "NEG", "RSQRT", "SIGN", "SIN",
             "SQRT", "SQUARE", "TANH")
BINARY_OPS = ("SUB", "DIV", "POW", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "FLOOR_DIV", "FLOOR_MOD")

CONSTRAINTS: dict[str, tuple[Constraint, ...]] = {
    **{op: (ONE_RUNTIME_INPUT,) for op in UNARY_OPS},
    "ADD": (TWO_INPUTS, BROADCAST), "ADD_N": (TWO_INPUTS,),
    **{op: (BINARY_INPUTS,) for op in BINARY_OPS},
    "MUL": (TWO_INPUTS, BROADCAST),
    "AVERAGE_POOL_2D": (ONE_RUNTIME_INPUT, POOL_GEOMETRY), "MAX_POOL_2D": (ONE_RUNTIME_INPUT, POOL_GEOMETRY),
    "CONV_2D": (CONV_IO, CONV_GEOMETRY), "DEPTHWISE_CONV_2D": (CONV_IO, CONV_GEOMETRY, DEPTHWISE),
    "TRANSPOSE_CONV": (CONV_IO, STRIDES), "FULLY_CONNECTED": (FULLY_CONNECTED,),
    "DEQUANTIZE": (DEQUANT,), "QUANTIZE": (ONE_IN_OUT,),
    "PAD": (PAD,), "PADV2": (PAD,), "MIRROR_PAD": (PAD,),
    "RESHAPE": (ONE_RUNTIME_INPUT,),
    "RESIZE_BILINEAR": (RESIZE_BILINEAR,), "RESIZE_NEAREST_NEIGHBOR": (RESIZE_NEAREST,),
    "SLICE": (SLICE_RANK,), "STRIDED_SLICE": (STRIDED_SLICE,), "SOFTMAX": (SOFTMAX,),
    "TRANSPOSE": (ONE_RUNTIME_INPUT,), "DEPTH_TO_SPACE": (BLOCK_SIZE,), "SPACE_TO_DEPTH": (BLOCK_SIZE,),
    "MEAN": (AXES_CONST,), "SUM": (AXES_CONST,), "REDUCE_MAX": (AXES_CONST,), "REDUCE_MIN": (AXES_CONST,),
    "REDUCE_PROD": (AXES_CONST,),
    "HARD_SWISH": (ONE_IN_OUT,), "Convolution2DTransposeBias": (TCONV_BIAS,),
}


#: the input whose type a row checks where it is not the first runtime input: SELECT's first
#: input is its (bool) condition, its data are the if/else tensors
DATA_INPUT = {"SELECT": 1, "SELECT_V2": 1}


def gpu_table(name: str, ops: Mapping[str, tuple[int, Iterable[str]]] | None = None,
              extra: Mapping[str, tuple[Constraint, ...]] | None = None,
              replace: Mapping[str, tuple[Constraint, ...]] | None = None) -> OpTable:
    """The GPU op table for backend `name`.

    Without `ops`, every op of TFLite's GPU table with its max version and GPU_TYPES. With
    `ops` (op -> (max version, dtypes)), only those rows: a backend declares what it
    implements. Each row gets TFLite's constraints for the op (or the backend's `replace`ment
    where it accepts more), then the backend's `extra` ones.
    """
    if ops is None:
        return table(name, GPU_OPS, GPU_TYPES, CONSTRAINTS)
    rows = []
    for op, (version, dtypes) in ops.items():
        base = (replace or {}).get(op, CONSTRAINTS.get(op, ()))
        cons = tuple(base) + tuple((extra or {}).get(op, ()))
        rows.append(OpSupport(op, version, frozenset(dtypes), cons, data_input=DATA_INPUT.get(op)))
    return OpTable.of(rows, name)


def wants_backend(backend: str):
    return lambda options: options.get("gpu_backend", "") in ("", backend)


# --- precision and partitioning ------------------------------------------------------------

def gpu_precision(options: Mapping) -> dict[str, str]:
    """What the conformance suite judges: float16 when precision loss is allowed (half
    storage), float32 otherwise; quantized models run in float with quantization simulators
    (float-view: each op within a step, whole models against the float-view answer on its floor)."""
    loss = bool(options.get("gpu_precision_loss_allowed", True))
    return {"float": "float16" if loss else "float32", "integer": "float-view"}


def unsupported_message(rejections: Iterable[str], n_gpu: int, n_total: int) -> str | None:
    """TFLite's GPU delegate log after partitioning, or None when every node runs on the GPU."""
    errors = sorted(set(rejections))
    if not errors or n_total <= n_gpu:
        return None
    lines = ["Following operations are not supported by GPU delegate:", *errors]
    if n_gpu:
        lines.append(f"{n_gpu} operations will run on the GPU, and the remaining {n_total - n_gpu} "
                     f"operations will run on the CPU.")
    else:
        lines.append(f"No operations will run on the GPU, and all {n_total} operations will run on the CPU.")
    return "\n".join(lines)
