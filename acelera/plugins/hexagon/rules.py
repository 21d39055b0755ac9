"""The Hexagon delegate's support rules: TFLite's `CheckOpVersion` and `IsNodeSupportedByHexagon`.

Source: tflite/delegates/hexagon/utils.cc and README.md (LiteRT), summarised in facts §6.3.
The rules are the real delegate's, rule for rule, so `acelera analyze --use_hexagon` says what
a phone's DSP would take:

- every input (absent optional inputs skipped) and every output has rank <= 4;
- the op's version is on the allow-list (`CheckOpVersion`: RELU, RSQRT and SQUARED_DIFFERENCE
  only at version 2; HARD_SWISH, NEG and RESHAPE only at version 1);
- `InputsWithCorrectTypes`: the node has exactly as many inputs as the op's type signature and
  each present input has one of the listed types ("q8" = uint8 or int8);
- the op's own constraints (activations, strides, dilation, constant operands, masks ...).

Quantized models only: a node with a float input is refused before anything else, with a
reason that says so. The real rules refuse every such node too (no signature accepts a float
input); the up-front check only makes the reason the same for every op of a float model.

Two rules come from the README rather than the code: RESIZE_BILINEAR's requested size <= 65
(b/143105433; older utils.cc checked it as `< 66`) and QUANTIZE's 8-bit output.
TFLite's blockwise weight quantization has no representation in acelera's model IR, so only the
per-channel half of FULLY_CONNECTED's weight rule can trigger here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from acelera.core.delegate import Constraint, OpSupport, OpTable, Support
from acelera.core.kernels.registry import NodeContext

DELEGATE = "hexagon"
Q8 = frozenset({"UINT8", "INT8"})
INT8 = frozenset({"INT8"})
I32 = frozenset({"INT32"})
I32_I64 = frozenset({"INT32", "INT64"})
FLOATS = frozenset({"FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16"})
OPTIONAL = "absent"  # a signature slot that may also be the absent optional input (-1)

# TFLite schema enums, as NodeContext options carry them (raw ints)
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6 = 0, 1, 2, 3
SAME, VALID = 0, 1
REFLECT, SYMMETRIC = 0, 1
WEIGHTS_DEFAULT = 0
MAX_RANK = 4


# --- constraint builders --------------------------------------------------------------------
def _types(ts: frozenset[str]) -> str:
    if ts == Q8:
        return "uint8|int8"
    return "|".join(sorted(t.lower() for t in ts))


def rank_at_most_4() -> Constraint:
    def check(n: NodeContext) -> bool:
        return all(len(t.shape) <= MAX_RANK for t in (*n.inputs, *n.outputs) if t is not None)
    return Constraint("every input and output has rank <= 4", check)


def signature(*slots: frozenset[str]) -> Constraint:
    """TFLite's InputsWithCorrectTypes: exactly len(slots) inputs, each present one typed as listed.

    A slot containing OPTIONAL also accepts the absent optional input; any other slot skips
    an absent input too (as TFLite does), but the count must match.
    """
    def check(n: NodeContext) -> bool:
        if len(n.inputs) != len(slots):
            return False
        return all(t is None or t.type_name in s for t, s in zip(n.inputs, slots))

    parts = []
    for s in slots:
        real = frozenset(s - {OPTIONAL})
        parts.append(_types(real) + (" or absent" if OPTIONAL in s else ""))
    return Constraint(f"inputs are exactly ({', '.join(parts)})", check)


def all_inputs(types: frozenset[str]) -> Constraint:
    return Constraint(f"every input is {_types(types)}",
                      lambda n: all(t is not None and t.type_name in types for t in n.inputs))


def output_types(types: frozenset[str]) -> Constraint:
    return Constraint(f"every output is {_types(types)} (README: 8-bit inputs and outputs only)",
                      lambda n: all(t.type_name in types for t in n.outputs))


def const_input(i: int, what: str) -> Constraint:
    def check(n: NodeContext) -> bool:
        t = n.input(i)
        return t is not None and t.is_constant
    return Constraint(f"{what} (input {i}) is a constant tensor", check)


def _act(n: NodeContext) -> int:
    return int(n.options.get("fused_activation_function", ACT_NONE) or 0)


def activation_relu_or_none() -> Constraint:
    return Constraint("fused activation is NONE, RELU, RELU_N1_TO_1 or RELU6",
                      lambda n: _act(n) in (ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6))


def no_activation() -> Constraint:
    return Constraint("no fused activation", lambda n: _act(n) == ACT_NONE)


def _opt(n: NodeContext, key: str, default: int = 0) -> int:
    """An option as TFLite's parsed params hold it; defaults are the schema's (0 unless it says)."""
    v = n.options.get(key, default)
    return int(default if v is None else v)


def stride_at_most_3() -> Constraint:
    return Constraint("stride height and width <= 3",
                      lambda n: _opt(n, "stride_h") <= 3 and _opt(n, "stride_w") <= 3)


def _dilated(n: NodeContext) -> bool:
    return _opt(n, "dilation_h_factor", 1) != 1 or _opt(n, "dilation_w_factor", 1) != 1


def no_dilation() -> Constraint:
    return Constraint("dilation height and width factors are 1", lambda n: not _dilated(n))


def dilation_only_with_stride_1() -> Constraint:
    return Constraint("dilation only with stride 1",
                      lambda n: not _dilated(n) or (_opt(n, "stride_h") == 1 and _opt(n, "stride_w") == 1))


def depth_multiplier_rule() -> Constraint:
    def check(n: NodeContext) -> bool:
        if _opt(n, "depth_multiplier") == 1:
            return True
        x = n.input(0)
        return not _dilated(n) and x is not None and len(x.shape) == 4 and x.shape[3] == 1
    return Constraint("depth_multiplier is 1 (or the input has 1 channel, rank 4, and no dilation)", check)


def filter_height_at_least_2() -> Constraint:
    def check(n: NodeContext) -> bool:
        w = n.input(1)
        return w is None or len(w.shape) < 2 or w.shape[1] >= 2
    return Constraint("filter height >= 2", check)


def max_pool_same_filter() -> Constraint:
    return Constraint("with SAME padding, filter height and width <= 12",
                      lambda n: _opt(n, "padding", SAME) != SAME
                      or (_opt(n, "filter_height") < 13 and _opt(n, "filter_width") < 13))


def padding_same_or_valid() -> Constraint:
    return Constraint("padding is SAME or VALID", lambda n: _opt(n, "padding", SAME) in (SAME, VALID))


def per_tensor_weights() -> Constraint:
    def check(n: NodeContext) -> bool:
        w = n.input(1)
        return w is None or not w.quantization.per_channel
    return Constraint("weights are quantized per tensor (no per-channel or blockwise weights)", check)


def bias_const_or_absent() -> Constraint:
    def check(n: NodeContext) -> bool:
        b = n.input(2)
        return b is None or b.is_constant
    return Constraint("bias (input 2) is constant or absent", check)


def keep_num_dims_false() -> Constraint:
    return Constraint("keep_num_dims is false", lambda n: not n.options.get("keep_num_dims", False))


def default_weights_format() -> Constraint:
    return Constraint("weights_format is DEFAULT",
                      lambda n: _opt(n, "weights_format", WEIGHTS_DEFAULT) == WEIGHTS_DEFAULT)


def mirror_mode() -> Constraint:
    return Constraint("mode is REFLECT or SYMMETRIC", lambda n: _opt(n, "mode", REFLECT) in (REFLECT, SYMMETRIC))


def resize_size_two_elements() -> Constraint:
    def check(n: NodeContext) -> bool:
        s = n.const(1)
        return s is not None and s.size == 2
    return Constraint("size (input 1) has exactly 2 elements", check)


def resize_size_at_most_65() -> Constraint:
    def check(n: NodeContext) -> bool:
        s = n.const(1)
        return s is not None and s.size == 2 and int(s.reshape(-1)[0]) <= 65 and int(s.reshape(-1)[1]) <= 65
    return Constraint("requested size <= 65 in both dimensions (README, b/143105433)", check)


def at_most_inputs(k: int) -> Constraint:
    return Constraint(f"at most {k} inputs", lambda n: len(n.inputs) <= k)


def input_types(i: int, types: frozenset[str]) -> Constraint:
    def check(n: NodeContext) -> bool:
        t = n.input(i)
        return t is not None and t.type_name in types
    return Constraint(f"input {i} is {_types(types)}", check)


def no_ellipsis_or_new_axis_mask() -> Constraint:
    return Constraint("ellipsis_mask and new_axis_mask are 0",
                      lambda n: _opt(n, "ellipsis_mask") == 0 and _opt(n, "new_axis_mask") == 0)


def transpose_conv_signature() -> Constraint:
    three = signature(I32, Q8, Q8)
    four = signature(I32, Q8, Q8, I32)
    return Constraint("3 inputs typed (int32, uint8|int8, uint8|int8) or 4 with an int32 bias",
                      lambda n: three.check(n) if len(n.inputs) == 3 else four.check(n))


# --- the table ------------------------------------------------------------------------------
@dataclass(frozen=True)
class HexagonOp(OpSupport):
    """An op row whose data type is read from a fixed input (`data_input`: the axis of SPLIT and the
    output shape of TRANSPOSE_CONV come first), not from the first non-constant input."""

    data_input: int | None = 0


def float_input(node: NodeContext) -> tuple[int, str] | None:
    """(index, type) of the node's first floating-point input, if any."""
    for i, t in enumerate(node.inputs):
        if t is not None and t.type_name in FLOATS:
            return i, t.type_name
    return None


@dataclass(frozen=True)
class HexagonOpTable(OpTable):
    """The op table, with the quantized-models-only refusal ahead of the per-op rules."""

    def check(self, node: NodeContext) -> Support:
        f = float_input(node)
        if f is not None:
            return Support(False, f"{node.op.name}: input type {f[1]} is not supported (input {f[0]}): "
                                  f"the Hexagon delegate runs quantized (uint8/int8) models only", "input type")
        return super().check(node)


def _row(op: str, max_version: int, constraints: Sequence[Constraint] = (), *, min_version: int = 1,
         dtypes: frozenset[str] = Q8, data_input: int = 0) -> HexagonOp:
    return HexagonOp(op, max_version, dtypes, (rank_at_most_4(), *constraints), min_version, data_input)


def _rows() -> Iterable[HexagonOp]:
    relu_or_none = activation_relu_or_none()
    for op in ("ADD", "SUB", "MUL"):
        yield _row(op, 2, [signature(Q8, Q8), relu_or_none])
    for op in ("ARG_MAX", "ARG_MIN"):
        yield _row(op, 2, [signature(Q8, I32)])
    yield _row("AVERAGE_POOL_2D", 2, [signature(Q8), no_activation()])
    yield _row("MAX_POOL_2D", 2, [signature(Q8), max_pool_same_filter(), no_activation()])
    yield _row("CONCATENATION", 2, [all_inputs(Q8)])
    yield _row("CONV_2D", 3, [signature(Q8, Q8, I32), relu_or_none, stride_at_most_3(), no_dilation()])
    yield _row("DEPTHWISE_CONV_2D", 3, [signature(Q8, Q8, I32), dilation_only_with_stride_1(), depth_multiplier_rule(),
                                        filter_height_at_least_2(), relu_or_none, stride_at_most_3()])
    yield _row("TRANSPOSE_CONV", 3, [transpose_conv_signature(), stride_at_most_3(), padding_same_or_valid()],
               data_input=2)
    yield _row("FULLY_CONNECTED", 4, [signature(Q8, Q8, I32 | {OPTIONAL}), per_tensor_weights(),
                                      bias_const_or_absent(), relu_or_none, keep_num_dims_false(),
                                      default_weights_format()])
    for op in ("DEPTH_TO_SPACE", "SPACE_TO_DEPTH"):
        yield _row(op, 2, [signature(Q8)])
    yield _row("HARD_SWISH", 1, [signature(Q8)])
    yield _row("L2_NORMALIZATION", 2, [signature(Q8), no_activation()])
    for op in ("LOGISTIC", "TANH", "RELU6"):
        yield _row(op, 2, [signature(Q8)])
    yield _row("RELU", 2, [signature(Q8)], min_version=2)
    for op in ("MAXIMUM", "MINIMUM"):
        yield _row(op, 2, [signature(Q8, Q8)])
    yield _row("MEAN", 2, [signature(Q8, I32), const_input(1, "axes")])
    yield _row("MIRROR_PAD", 2, [signature(Q8, I32), const_input(1, "paddings"), mirror_mode()])
    yield _row("NEG", 1, [signature(Q8)])
    yield _row("PACK", 2, [all_inputs(Q8)])
    yield _row("PAD", 2, [Constraint("exactly 2 inputs (zero padding only, no constant_values input)",
                                     lambda n: len(n.inputs) == 2),
                          signature(Q8, I32), const_input(1, "paddings")])
    yield _row("QUANTIZE", 2, [signature(Q8), output_types(Q8)])
    yield _row("RESHAPE", 1, [at_most_inputs(2), input_types(0, Q8)])
    yield _row("RESIZE_BILINEAR", 3, [signature(Q8, I32), const_input(1, "size"), resize_size_two_elements(),
                                      resize_size_at_most_65()])
    yield _row("RESIZE_NEAREST_NEIGHBOR", 3, [signature(Q8, I32), const_input(1, "size")])
    yield _row("RSQRT", 2, [signature(INT8)], min_version=2, dtypes=INT8)
    yield _row("SLICE", 2, [const_input(1, "begin"), const_input(2, "size"), signature(Q8, I32_I64, I32_I64)])
    yield _row("SOFTMAX", 2, [signature(Q8)])
    yield _row("SPLIT", 2, [signature(I32, Q8), const_input(0, "axis")], data_input=1)
    yield _row("SQUARED_DIFFERENCE", 2, [signature(INT8, INT8)], min_version=2, dtypes=INT8)
    yield _row("STRIDED_SLICE", 2, [signature(Q8, I32, I32, I32), const_input(1, "begin"), const_input(2, "end"),
                                    const_input(3, "strides"), no_ellipsis_or_new_axis_mask()])
    yield _row("TRANSPOSE", 2, [signature(Q8, I32)])


OP_TABLE = HexagonOpTable({r.op: r for r in _rows()}, DELEGATE)

__all__ = ["OP_TABLE", "HexagonOp", "HexagonOpTable", "float_input"]
