"""The ops the shared GPU partition compiler (gpu_plan) implements: op -> (max version, data
types), extra constraints beyond TFLite's GPU rules, and rules that replace TFLite's. Each
backend declares these rows, or the subset its own tests cover."""
from __future__ import annotations

from acelera.core.delegate import Constraint
from acelera.plugins.gpu_common import CONV_GEOMETRY, CONV_IO_ANY, DEPTHWISE, FULLY_CONNECTED_ANY, STRIDES

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
