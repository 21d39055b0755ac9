"""XNNPACK's op support table (fact sheet 6.5): float32 (also run in float16 when forced) and
the signed 8-bit quantized subset, with each rule as a readable Constraint.

"static" means a constant tensor; float16 weights behind a DEQUANTIZE count (the delegate is
fp16-weights aware: the partitioner shows it those constants), as in XNNPACK.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from acelera.core.delegate import Constraint, OpSupport, OpTable, data_type
from acelera.core.kernels.registry import NodeContext
from acelera.core.model import Tensor

FLOAT = frozenset({"FLOAT32"})
QS8 = frozenset({"INT8"})
BOTH = FLOAT | QS8
ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


# --- static tensors ---------------------------------------------------------------------------
# acelera shows an fp16-aware delegate the constant float16 tensor behind each folded
# DEQUANTIZE (partition._ask), so fp16 weights are static here like any constant.

def is_static(node: NodeContext, i: int) -> bool:
    t = node.input(i)
    return t is not None and t.is_constant


def static_value(node: NodeContext, i: int) -> np.ndarray | None:
    t = node.input(i)
    return None if t is None else t.data


def opt(node: NodeContext, name: str, default: Any = 0) -> Any:
    v = node.options.get(name, default)
    return default if v is None else v


# --- constraint factories -----------------------------------------------------------------------

Check = Callable[[NodeContext], bool]


def C(description: str, check: Check) -> Constraint:
    return Constraint(description, check)


FUSED_ACT = C("fused activation must be NONE, RELU, RELU_N1_TO_1 or RELU6 (TANH and SIGN_BIT are not supported)",
              lambda n: int(opt(n, "fused_activation_function", 0)) in (0, 1, 2, 3))


def static_input(i: int, what: str, optional: bool = False) -> Constraint:
    if optional:
        return C(f"{what} must be static (constant) when present",
                 lambda n: n.input(i) is None or is_static(n, i))
    return C(f"{what} must be static (constant)", lambda n: is_static(n, i))


def present(i: int, what: str) -> Constraint:
    return C(f"{what} is mandatory", lambda n: n.input(i) is not None)


def n_inputs(lo: int, hi: int, what: str = "inputs") -> Constraint:
    text = f"exactly {lo} {what}" if lo == hi else f"{lo} to {hi} {what}"
    return C(f"needs {text}", lambda n: lo <= len([t for t in n.inputs if t is not None]) <= hi)


def _float_io(n: NodeContext) -> bool:
    if data_type(n) == "FLOAT32":
        return all(t.type_name == "FLOAT32" for t in n.outputs)
    return True


FLOAT_OUT = C("float32 inputs need float32 outputs", _float_io)


def _is_q8(n: NodeContext) -> bool:
    return data_type(n) == "INT8"


def _per_tensor(t: Tensor) -> bool:
    return t.quantization.is_set and t.quantization.scale.size == 1


def _q8_activations(n: NodeContext) -> bool:
    """Every non-constant input and every output INT8 with one scale and zero point."""
    if not _is_q8(n):
        return True
    ts = [t for t in n.inputs if t is not None and not t.is_constant] + list(n.outputs)
    return all(t.type_name == "INT8" and _per_tensor(t) for t in ts)


Q8_ACTS = C("INT8: every activation tensor must be INT8 with per-tensor quantization", _q8_activations)


def _filter_matches(x: Tensor | None, w: Tensor | None) -> bool:
    if x is None or w is None:
        return False
    if x.type_name == "FLOAT32":
        return w.type_name == "FLOAT32" or (w.type_name == "FLOAT16" and w.is_constant)
    return w.type_name == "INT8"


def _same_filter_type(n: NodeContext) -> bool:
    return _filter_matches(n.input(0), n.input(1))


def _same_filter_type_tc(n: NodeContext) -> bool:
    return _filter_matches(n.input(2), n.input(1))


NO_HYBRID_TC = C("filter type must match the input (no dynamic-range quantization)", _same_filter_type_tc)
NO_HYBRID = C("filter type must match the input (FLOAT32 or static FLOAT16 filter for FLOAT32 input, INT8 "
              "for INT8: dynamic-range quantization is not supported)", _same_filter_type)


def _q8_filter(axis: int) -> Check:
    def check(n: NodeContext) -> bool:
        if not _is_q8(n):
            return True
        w, b = n.input(1), n.input(2)
        if w is None:
            return False
        q = w.quantization
        if not q.is_set or np.any(np.asarray(q.zero_point) != 0):
            return False
        if q.scale.size > 1:
            ax = axis if axis >= 0 else len(w.shape) + axis
            if q.quantized_dimension != ax or q.scale.size != w.shape[ax]:
                return False
        return b is None or b.type_name == "INT32"
    return check


def q8_filter(axis: int, axis_name: str) -> Constraint:
    return C(f"INT8: filter zero points must be 0, scales per-tensor or per-channel along the "
             f"{axis_name} dimension, bias INT32", _q8_filter(axis))


def _reduce_axes(n: NodeContext) -> bool:
    """XNNPACK's VisitReduceNode: INT32 axes, at least one, each within the input's rank, and
    not the ill-defined reduction of a scalar."""
    x, a = n.input(0), n.input(1)
    if x is None or a is None or a.data is None or a.type_name != "INT32":
        return False
    axes = np.asarray(a.data).reshape(-1)
    rank = len(x.shape)
    return 0 < axes.size <= 6 and rank > 0 and bool(np.all((axes >= -rank) & (axes < rank)))


def _fc_not_sparse(n: NodeContext) -> bool:
    return n.version != 8


def _fc_filter_2d(n: NodeContext) -> bool:
    w = n.input(1)
    return w is not None and len(w.shape) == 2


def _bmm_operands(n: NodeContext) -> bool:
    a, b = n.input(0), n.input(1)
    return (a is not None and b is not None and len(a.shape) >= 2 and len(b.shape) >= 2
            and a.type_name == b.type_name == "FLOAT32")


def _expand_axis(n: NodeContext) -> bool:
    x, a = n.input(0), n.input(1)
    if x is None or a is None or a.data is None or a.type_name not in ("INT32", "INT64"):
        return False
    axis = np.asarray(a.data).reshape(-1)
    return axis.size == 1 and -len(x.shape) - 1 <= int(axis[0]) <= len(x.shape)


def _pad_ok(n: NodeContext) -> bool:
    p = static_value(n, 1)
    return p is not None and bool(np.all(np.asarray(p) >= 0))


def _prelu_slope(n: NodeContext) -> bool:
    x, s = n.input(0), n.input(1)
    if s is None or x is None:
        return False
    shape = tuple(s.shape)
    if len(shape) <= 1:
        return len(shape) == 0 or shape[0] in (1, x.shape[-1])
    return all(d == 1 for d in shape[:-1]) and shape[-1] in (1, x.shape[-1])


def _pool_1x1(n: NodeContext) -> bool:
    fh, fw = int(opt(n, "filter_height", 1)), int(opt(n, "filter_width", 1))
    sh, sw = int(opt(n, "stride_h", 1)), int(opt(n, "stride_w", 1))
    return not (fh == 1 and fw == 1 and (sh != 1 or sw != 1))


def _strided_slice(n: NodeContext) -> bool:
    s = static_value(n, 3)
    masks = ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    return s is not None and bool(np.all(np.asarray(s) == 1)) and all(int(opt(n, m, 0)) == 0 for m in masks)


def _reshape_static(n: NodeContext) -> bool:
    if len(n.inputs) > 1 and n.input(1) is not None:
        return is_static(n, 1)
    return bool(opt(n, "new_shape", ()))


def _resize_ok(n: NodeContext) -> bool:
    x = n.input(0)
    return x is not None and len(x.shape) == 4 and is_static(n, 1)


def _leaky_q8(n: NodeContext) -> bool:
    if not _is_q8(n):
        return True
    x, y = n.input(0), n.outputs[0]
    if x is None:
        return False
    ratio = float(x.quantization.scale[0]) / float(y.quantization.scale[0])
    slope = float(opt(n, "alpha", 0.2)) * ratio
    return (1 / 256 <= ratio <= 128 and
            (-127.99609375 <= slope <= -1 / 256 or 1 / 256 <= slope <= 128))


def _quantize_rules(n: NodeContext) -> bool:
    x, y = n.input(0), n.outputs[0]
    if x is None or y.type_name != "INT8" or not _per_tensor(y):
        return False
    if x.type_name == "FLOAT32":
        return True
    if x.type_name != "INT8" or not _per_tensor(x):
        return False
    ratio = float(x.quantization.scale[0]) / float(y.quantization.scale[0])
    return 2.0 ** -8 <= ratio <= 2.0 ** 7


def _dequantize_rules(n: NodeContext) -> bool:
    x, y = n.input(0), n.outputs[0]
    return x is not None and x.type_name == "INT8" and _per_tensor(x) and y.type_name == "FLOAT32"


def _block_size(n: NodeContext) -> bool:
    return int(opt(n, "block_size", 0)) > 1


def _softmax_beta(n: NodeContext) -> bool:
    return float(np.float32(opt(n, "beta", 1.0))) == 1.0


def _softmax_q8_output(n: NodeContext) -> bool:
    """INT8 SOFTMAX: LiteRT's kernel wants the output scale 1/256 and zero point -128."""
    if not _is_q8(n):
        return True
    q = n.outputs[0].quantization
    return (abs(float(q.scale[0]) - 1 / 256) <= 0.001 * 1 / 256
            and int(np.asarray(q.zero_point).reshape(-1)[0]) == -128)


def _split_outputs(n: NodeContext) -> bool:
    return 2 <= len(n.outputs) <= 4


# --- the table --------------------------------------------------------------------------------

CONV_RULES = (NO_HYBRID, present(2, "bias"), static_input(1, "filter"), static_input(2, "bias"), FUSED_ACT)

ROWS: list[tuple[str, int, frozenset[str], tuple[Constraint, ...]]] = [
    # (op, max version, data types, constraints). Versions past the first mostly add data types
    # (int16, int4, ...) that the dtype column already refuses.
    *[(op, 1, FLOAT, ()) for op in ("CEIL", "FLOOR", "HARD_SWISH", "NEG", "RELU", "RELU6",
                                    "RELU_N1_TO_1", "ROUND", "SQRT", "SQUARE")],
    ("ABS", 5, FLOAT, ()),
    *[(op, 2, FLOAT, ()) for op in ("EXP", "LOG", "SIN", "COS")],
    ("RSQRT", 3, FLOAT, ()),
    ("GELU", 3, FLOAT, ()),
    ("ELU", 1, BOTH, ()),
    ("LEAKY_RELU", 2, BOTH, (C("INT8: input/output scale ratio must be in [1/256, 128] and slope x ratio in "
                               "[-127.99609375, -1/256] or [1/256, 128]", _leaky_q8),)),
    ("LOGISTIC", 2, BOTH, ()),
    ("TANH", 2, BOTH, ()),
    ("MAXIMUM", 4, FLOAT, ()),
    ("MINIMUM", 4, FLOAT, ()),
    ("SQUARED_DIFFERENCE", 2, FLOAT, ()),
    ("ADD", 5, BOTH, (n_inputs(2, 2), FUSED_ACT)),
    ("SUB", 5, BOTH, (FUSED_ACT,)),
    ("MUL", 7, BOTH, (FUSED_ACT,)),
    ("DIV", 2, FLOAT, (FUSED_ACT,)),
    # INT8 AVERAGE_POOL_2D and SOFTMAX: LiteRT's XNNPACK takes them in float only; xnnpack-cpu runs
    # the int8 ones on the reference kernels inside the partition (bit-exact, no graph split)
    ("AVERAGE_POOL_2D", 2, BOTH, (C("1x1 pooling with a stride other than 1 is not supported", _pool_1x1),
                                  FUSED_ACT)),
    ("MAX_POOL_2D", 2, BOTH, (C("1x1 pooling with a stride other than 1 is not supported", _pool_1x1), FUSED_ACT)),
    ("CONCATENATION", 2, BOTH, (n_inputs(2, 4), FUSED_ACT)),
    ("CONV_2D", 3, BOTH, CONV_RULES + (q8_filter(0, "output-channel"),)),
    ("DEPTHWISE_CONV_2D", 3, BOTH, CONV_RULES + (q8_filter(3, "channel (last)"),)),
    ("DEPTH_TO_SPACE", 2, BOTH, (C("block size must be greater than 1", _block_size),)),
    ("SPACE_TO_DEPTH", 2, BOTH, (C("block size must be greater than 1", _block_size),)),
    ("FULLY_CONNECTED", 14, BOTH, (C("version 8 (sparse weights) is not supported", _fc_not_sparse),
                                   C("filter must be 2-D", _fc_filter_2d), NO_HYBRID,
                                   static_input(1, "filter"), static_input(2, "bias", optional=True),
                                   FUSED_ACT, q8_filter(0, "output-channel"))),
    ("BATCH_MATMUL", 4, FLOAT, (C("both operands must be FLOAT32 and at least 2-D (no dynamic-range "
                                  "quantization)", _bmm_operands),)),
    *[(op, v, BOTH, (static_input(1, "axes"),
                     C("axes must be INT32, 1 to 6 of them, each within the input's rank (no empty or "
                       "scalar reduction)", _reduce_axes)))
      for op, v in (("MEAN", 3), ("SUM", 2), ("REDUCE_MAX", 3), ("REDUCE_MIN", 3))],
    ("EXPAND_DIMS", 1, BOTH, (static_input(1, "axis"),
                              C("axis must be one INT32/INT64 value in [-rank-1, rank]", _expand_axis))),
    ("PAD", 2, BOTH, (static_input(1, "paddings"), C("paddings must be non-negative", _pad_ok))),
    ("PRELU", 1, FLOAT, (static_input(1, "slope"),
                         C("slope must be 1-D or have only its channel (last) dimension different from 1",
                           _prelu_slope))),
    ("RESHAPE", 1, BOTH, (C("the new shape must be static or given in the options", _reshape_static),)),
    ("RESIZE_BILINEAR", 3, BOTH, (C("input must be 4D and the output size static", _resize_ok),)),
    ("SLICE", 2, BOTH, (static_input(1, "begin"), static_input(2, "size"))),
    ("SOFTMAX", 2, BOTH, (C("beta must be 1.0", _softmax_beta),
                          C("INT8: output scale must be 1/256 and zero point -128", _softmax_q8_output))),
    ("SPLIT", 2, BOTH, (static_input(0, "axis"), C("needs 2 to 4 outputs", _split_outputs))),
    ("STRIDED_SLICE", 8, BOTH, (static_input(1, "begin"), static_input(2, "end"), static_input(3, "strides"),
                                C("strides must all be 1 and the ellipsis, new-axis and shrink-axis masks 0",
                                  _strided_slice))),
    ("TRANSPOSE", 2, BOTH, (static_input(1, "permutation"),)),
    ("TRANSPOSE_CONV", 4, BOTH, (static_input(0, "output size"), NO_HYBRID_TC, static_input(1, "filter"),
                                 static_input(3, "bias", optional=True), FUSED_ACT)),
    ("DEQUANTIZE", 2, QS8, (C("input must be INT8 with per-tensor quantization and the output FLOAT32",
                              _dequantize_rules),)),
    ("QUANTIZE", 2, BOTH, (C("output must be INT8 per-tensor; INT8 to INT8 needs an input/output scale ratio "
                             "in [2^-8, 2^7]", _quantize_rules),)),
]

CONVERSIONS = ("QUANTIZE", "DEQUANTIZE")  # change the type on purpose: no common type rules


def common(op: str, dtypes: frozenset[str]) -> tuple[Constraint, ...]:
    if op in CONVERSIONS:
        return ()
    return (FLOAT_OUT,) + ((Q8_ACTS,) if "INT8" in dtypes else ())


#: ops whose data type is not their first non-constant input's (TRANSPOSE_CONV: input 0 is the
#: INT32 output shape, the activations are input 2)
DATA_INPUT = {"TRANSPOSE_CONV": 2}


def op_table() -> OpTable:
    return OpTable.of([OpSupport(op, v, dt, tuple(cs) + common(op, dt), data_input=DATA_INPUT.get(op))
                       for op, v, dt, cs in ROWS], "xnnpack-cpu")


TABLE = op_table()
