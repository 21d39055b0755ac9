"""The ops the shared GPU partition compiler (compiler.py, ops/) implements: op -> (max
version, data types), extra constraints beyond TFLite's GPU rules, and rules that replace
TFLite's. Each backend declares these rows, or the subset its own tests cover.

The data type a row checks is its first runtime input's (BOOL for LOGICAL_AND, the source
type for CAST); SELECT's is its if tensor's (rules.DATA_INPUT). Versions follow TFLite's
GPU table (facts 6.1), capped where LiteRT (and so the CPU reference) has no higher version:
ADD_N and LOGICAL_AND v1; CAST v1 (the version of every bool/float32/int32 cast; TFLite's GPU
table sets no maximum). TFLite's GPU constraints for the ops the rules' table leaves open (comparisons,
LOGICAL_AND, CAST, SELECT/SELECT_V2, LSTM) are rows of EXTRA here; the consumer rule of the
comparison/logical ops is relaxed (see ops/logical.py).
"""
from __future__ import annotations

from acelera.backends.gpu.rules import (
    BINARY_INPUTS,
    CONV_GEOMETRY,
    CONV_IO_ANY,
    DEPTHWISE,
    FULLY_CONNECTED_ANY,
    STRIDES,
)
from acelera.core.delegate import Constraint
from acelera.core.kernels.registry import NodeContext

F = ("FLOAT32",)
Q = ("FLOAT32", "INT8", "UINT8")
B = ("BOOL",)
COMPARISONS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")
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
    # more elementwise ops of TFLite's GPU seed list
    "GELU": (2, F), "SIGN": (2, F), "ADD_N": (1, F), "FLOOR_DIV": (2, F), "FLOOR_MOD": (2, F),
    # bool tensors: comparisons, LOGICAL_AND, CAST, SELECT (ops/logical.py)
    **{op: (2, F) for op in COMPARISONS}, "LOGICAL_AND": (1, B),
    "CAST": (1, ("BOOL", "FLOAT32", "INT32")), "SELECT": (1, F), "SELECT_V2": (1, F),
    # recurrent (basic kernel only)
    "LSTM": (4, F),
}


def _const(*indices: int):
    def check(n) -> bool:
        return all(n.input(i) is None or n.input(i).is_constant for i in indices)
    return check


def _small(n) -> bool:
    from acelera.backends.gpu.layout import Layout

    return sum(Layout(tuple(t.shape)).size for t in n.inputs if t is not None) < (1 << 24) - 1


INDEX_MAP = Constraint("inputs below 2**24 stored elements (moved through an index map)", _small)

FLOAT_TYPES = ("FLOAT32", "FLOAT16")


def _runtime(n) -> list:
    return [t for t in n.inputs if t is not None and not t.is_constant]


def _cast_ok(n) -> bool:
    """TFLite's GPU CAST cases: bool -> float, float -> bool, float32/int32 -> float32/int32."""
    src, dst = n.input(0).type_name, n.outputs[0].type_name
    return ((src == "BOOL" and dst in FLOAT_TYPES) or (src in FLOAT_TYPES and dst == "BOOL")
            or (src in ("FLOAT32", "INT32") and dst in ("FLOAT32", "INT32")))


CAST = (Constraint("needs exactly 1 runtime input and 1 output",
                   lambda n: len(_runtime(n)) == 1 and len(n.inputs) == 1 and len(n.outputs) == 1),
        Constraint("bool -> float16/float32, float16/float32 -> bool, or float32/int32 -> float32/int32", _cast_ok))


def _broadcastable(shape, out) -> bool:
    """numpy-style broadcast of `shape` to `out` (TFLite's CheckIsBroadcastable, one way)."""
    if len(shape) > len(out):
        return False
    return all(a == b or a == 1 for a, b in zip(reversed(shape), reversed(out)))


def _select_cond(n) -> bool:
    cond, x, out = n.input(0), n.input(1), n.outputs[0]
    c, o = tuple(cond.shape), tuple(out.shape)
    first_dim = n.op.name == "SELECT" and len(c) == 1 and x is not None and len(x.shape) >= 1 and c[0] == x.shape[0]
    return cond.type_name in ("BOOL",) + FLOAT_TYPES and (_broadcastable(c, o) or first_dim)


def _select_branch(n, i: int) -> bool:
    """TFLite's CheckSelectV2: a float if/else tensor of the output's shape or a scalar, and not
    a constant of rank 2 (TFLite rejects those, though its message says the opposite)."""
    t, o = n.input(i), tuple(n.outputs[0].shape)
    d = tuple(t.shape)
    shape_ok = d == () or d == o or (len(d) == 1 and d[0] <= 1)
    return t.type_name in FLOAT_TYPES and shape_ok and not (t.is_constant and len(d) == 2)


SELECT = (Constraint("needs 3 inputs and 1 output", lambda n: len(n.inputs) == 3 and len(n.outputs) == 1),
          Constraint("condition bool, float16 or float32 and broadcastable to the output", _select_cond),
          Constraint("if and else float16/float32, each the output's shape or a scalar; a constant "
                     "2-D if/else is not supported", lambda n: _select_branch(n, 1) and _select_branch(n, 2)))
TANH = 4


def _lstm_basic(n) -> bool:
    consts = [t for t in n.inputs if t is not None and t.is_constant]
    return (int(n.options.get("kernel_type", 0) or 0) == 1 and len(n.inputs) == 5 and len(_runtime(n)) == 3
            and len(consts) == 2 and len(n.outputs) == 4)


def _lstm_depth(n) -> bool:
    s = n.outputs[1].shape
    return len(s) == 2 and s[-1] % 4 == 0


def _lstm_state_not_variable(n: NodeContext) -> bool:
    prev_a, prev_s = n.input(1), n.input(4)
    assert prev_a is not None and prev_s is not None  # checked after _lstm_basic: all 5 inputs present
    return not (prev_a.is_variable or prev_s.is_variable)


def _ungrouped(n: NodeContext) -> bool:
    x, w = n.input(0), n.input(1)
    return x is not None and w is not None and x.shape[-1] == w.shape[-1]


LSTM = (Constraint("basic kernel only (kernel_type BASIC): 3 runtime and 2 constant inputs, 4 outputs", _lstm_basic),
        Constraint("state depth (last output dimension) a multiple of 4", _lstm_depth),
        Constraint("TANH activation, no cell_clip or proj_clip",
                   lambda n: int(n.options.get("fused_activation_function", 0) or 0) == TANH
                   and not float(n.options.get("cell_clip", 0.0) or 0.0)
                   and not float(n.options.get("proj_clip", 0.0) or 0.0)),
        Constraint("previous activation and state not variable tensors (the delegate does not write state "
                   "back)", _lstm_state_not_variable))
EXTRA = {
    "CONV_2D": (Constraint("input channels == filter input channels (no grouped convolution)", _ungrouped),),
    "SLICE": (Constraint("begin and size constant", _const(1, 2)), INDEX_MAP),
    "STRIDED_SLICE": (Constraint("begin, end and strides constant", _const(1, 2, 3)), INDEX_MAP),
    "PAD": (Constraint("paddings constant", _const(1)), INDEX_MAP),
    "PADV2": (Constraint("paddings and pad value constant", _const(1, 2)), INDEX_MAP),
    "MIRROR_PAD": (Constraint("paddings constant", _const(1)), INDEX_MAP),
    "TRANSPOSE": (Constraint("permutation constant", _const(1)), INDEX_MAP),
    "RESHAPE": (INDEX_MAP,), "CONCATENATION": (INDEX_MAP,), "DEPTH_TO_SPACE": (INDEX_MAP,),
    "SPACE_TO_DEPTH": (INDEX_MAP,),
    **{op: (BINARY_INPUTS,) for op in COMPARISONS}, "LOGICAL_AND": (BINARY_INPUTS,),
    "CAST": CAST, "SELECT": SELECT, "SELECT_V2": SELECT, "LSTM": LSTM,
}
#: runtime weights and biases are packed on the host at invoke (and fp16 weights dequantized at
#: prepare look like runtime tensors to is_node_supported), so the conv family takes them
REPLACE = {"CONV_2D": (CONV_IO_ANY, CONV_GEOMETRY), "DEPTHWISE_CONV_2D": (CONV_IO_ANY, CONV_GEOMETRY, DEPTHWISE),
           "TRANSPOSE_CONV": (CONV_IO_ANY, STRIDES), "FULLY_CONNECTED": (FULLY_CONNECTED_ANY,)}
