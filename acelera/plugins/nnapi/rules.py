"""TFLite's NNAPI support rules (`NNAPIDelegateKernel::Validate`), op by op.

Each `OpRule` holds what Validate checks for one builtin op: the highest op version, the
lowest API level, the input types by level (TFLite checks the type of one input, usually
input 0), and the remaining checks, each with the level that lifts it where there is one.
Checks are evaluated against a `Target`: the level TFLite validates with (see sdk.py) and
whether an accelerator other than nnapi-reference is targeted (MUL v3 and large quantized
AVERAGE_POOL_2D windows depend on it). The messages paraphrase TFLite's validation failures.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from acelera.core.kernels.registry import NodeContext
from acelera.plugins.nnapi.sdk import FL6, FL7, level_name

F32, F16, I32, I64, U8, I8, I16, BOOL = "FLOAT32", "FLOAT16", "INT32", "INT64", "UINT8", "INT8", "INT16", "BOOL"
Q8 = frozenset({U8, I8})
FQ8 = frozenset({F32, U8, I8})
ANY = None  # no type check at that level


@dataclass(frozen=True)
class Target:
    """What Validate is given: the level ops are checked against, and the accelerator flag."""

    sdk: int  # the emulated Android API level (--nnapi_android_sdk)
    level: int  # TFLite's target feature level
    accelerator_specified: bool = False
    note: str = ""  # why `level` is not simply the API level

    def requires(self, level: int) -> str:
        extra = f"; {self.note}" if self.note else ""
        return f"requires {level_name(level)} (emulating {self.sdk}{extra})"


@dataclass(frozen=True)
class Check:
    """One Validate condition. `text` may contain {need}: 'requires Android SDK N (emulating M)'."""

    text: str
    ok: Callable[[NodeContext, Target], bool]
    when: Callable[[Target], bool] = lambda t: True
    needs: Optional[int] = None

    def describe(self, target: Target) -> str:
        return self.text.replace("{need}", target.requires(self.needs)) if self.needs else self.text


@dataclass(frozen=True)
class OpRule:
    op: str
    #: highest op version (an int, a function of the target, or None: Validate checks none)
    max_version: int | Callable[[Target], Optional[int]] | None = 1
    min_level: int = 27
    #: ((from_level, types or ANY), ...): the types the checked input may have from each level on
    types: Optional[tuple] = None
    type_input: int = 0
    checks: tuple[Check, ...] = ()
    #: Validate accepts the node before any other check (non-constant fp16 DEQUANTIZE on 30+)
    accept_early: Optional[Callable[[NodeContext, Target], bool]] = None
    #: the checked-input types `accept_early` is about (no version limit applies to them)
    early_types: frozenset = frozenset()

    def version_limit(self, target: Target) -> Optional[int]:
        return self.max_version(target) if callable(self.max_version) else self.max_version

    def allowed_types(self, level: int) -> Optional[frozenset]:
        """Types accepted at `level`; None means any type (no check); empty if the op has none yet."""
        if self.types is None:
            return None
        out: set = set()
        for lvl, types in self.types:
            if lvl <= level:
                if types is ANY:
                    return None
                out |= types
        return frozenset(out)

    def type_level(self, type_name: str) -> Optional[int]:
        """The lowest level from which `type_name` is accepted, or None if never."""
        for lvl, types in sorted(self.types or (), key=lambda e: e[0]):
            if types is ANY or type_name in types:
                return lvl
        return None

    def checked_type(self, node: NodeContext) -> Optional[str]:
        return typ(node, self.type_input)


# --- node helpers ------------------------------------------------------------------------------
def typ(n: NodeContext, i: int) -> Optional[str]:
    t = n.input(i)
    return None if t is None else t.type_name


def otyp(n: NodeContext, i: int = 0) -> str:
    return n.outputs[i].type_name


def rank(n: NodeContext, i: int) -> int:
    t = n.input(i)
    return 0 if t is None else len(t.shape)


def orank(n: NodeContext, i: int = 0) -> int:
    return len(n.outputs[i].shape)


def const(n: NodeContext, i: int) -> bool:
    t = n.input(i)
    return t is not None and t.is_constant


def n_inputs(n: NodeContext) -> int:
    """TFLite's node->inputs->size: optional (-1) inputs count too."""
    return len(n.op.inputs)


def no_act(n: NodeContext, _t=None) -> bool:
    return int(n.options.get("fused_activation_function", 0) or 0) == 0


def _scale(t) -> float:
    return float(t.quantization.scale[0]) if t is not None and t.quantization.is_set else 0.0


def _zp(t) -> int:
    return int(t.quantization.zero_point[0]) if t is not None and t.quantization.is_set else 0


def hybrid(n: NodeContext, weights: int) -> bool:
    """Float activations with quantized (uint8/int8) weights at input `weights`."""
    return typ(n, 0) == F32 and typ(n, weights) in Q8


def below(level: int):
    return lambda t: t.level < level


def at_least(level: int):
    return lambda t: t.level >= level


def ranks_le4(n, _t=None) -> bool:
    return rank(n, 0) <= 4 and rank(n, 1) <= 4


def _int32_fits(v) -> bool:
    import numpy as np

    a = np.asarray(v)
    return a.size == 0 or (a.min() >= -(1 << 31) and a.max() < (1 << 31))


def restricted_scales(n, _t=None) -> bool:
    return _scale(n.input(0)) * _scale(n.input(1)) < _scale(n.outputs[0])


def _split_v_sizes_ok(n, _t=None) -> bool:
    sizes = [int(s) for s in n.const(1).reshape(-1)]
    if any(s == 0 for s in sizes):
        return False
    if -1 in sizes:
        axis = int(n.const(2).reshape(-1)[0])
        axis = axis + rank(n, 0) if axis < 0 else axis
        return n.input(0).shape[axis] - sum(s for s in sizes if s != -1) != 0
    return True


def _crops_zero(n, _t=None) -> bool:
    c = n.const(2)
    return c is not None and typ(n, 2) == I32 and c.size == 4 and not c.any()


def _pad_nonempty(n, _t=None) -> bool:
    return 0 not in n.input(0).shape


def _not_broadcast_batch(n, _t=None) -> bool:
    a, b = n.input(0).shape, n.input(1).shape
    return len(a) == len(b) and a[:-2] == b[:-2]


def _reshape_rank(n, _t=None) -> bool:
    shape = tuple(n.options.get("new_shape", ()) or ())
    dims = 0 if shape == (0,) else len(shape)
    return dims > 0


def _axis_ok(n, _t=None) -> bool:
    ax = n.input(1)
    if ax is not None and ax.type_name == I64:
        return ax.is_constant and _int32_fits(ax.data)
    return ax is not None and ax.type_name == I32


def _scalar_operands_const(n, _t=None) -> bool:
    return all(rank(n, i) != 0 or const(n, i) for i in (0, 1))


def _same_quant_inputs(n, _t=None) -> bool:
    first = n.input(0)
    return all(_scale(t) == _scale(first) and _zp(t) == _zp(first) for t in n.inputs if t is not None)


def _fill_dims_ok(n, _t=None) -> bool:
    d = n.input(0)
    return d.shape[:1] != (0,) and (d.type_name != I64 or _int32_fits(d.data))


def _fill_value_ok(n, _t=None) -> bool:
    v = n.input(1)
    return v.type_name in (F32, I32, I64) and (v.type_name != I64 or not v.is_constant or _int32_fits(v.data))


def _lstm_full(n) -> bool:
    return n_inputs(n) in (20, 24)


def _lstm_basic(n) -> bool:
    return n_inputs(n) == 5


def _lstm_basic_ok(n, _t=None) -> bool:
    if not _lstm_basic(n):
        return True
    i0, o0, o1 = n.input(0), n.outputs[0], n.outputs[1]
    return (typ(n, 2) == U8 and _scale(i0) == 1 / 128 and _zp(i0) == 128 and _scale(o0) == 1 / 128
            and _zp(o0) == 128 and (_scale(o1) == 16 / 32768 or _zp(o1) == 0) and const(n, 2) and const(n, 3))


def _output_types(types_by_level):
    def ok(n, t):
        allowed = set()
        for lvl, ts in types_by_level:
            if lvl <= t.level:
                allowed |= ts
        return otyp(n) in allowed
    return ok


def C(text, ok, when=lambda t: True, needs=None) -> Check:
    return Check(text, ok, when, needs)


def _rule(op, max_version=1, min_level=27, types=None, type_input=0, checks=(), accept_early=None,
          early_types=frozenset()) -> OpRule:
    return OpRule(op, max_version, min_level, types, type_input, tuple(checks), accept_early, early_types)


def _fq8(level=27):
    return ((level, FQ8),)


RANK4 = C("input ranks must be <= 4", ranks_le4)
NO_ACT = C("no fused activation is supported", no_act)
INT32_NO_ACT = C("INT32 inputs take no fused activation", lambda n, t: typ(n, 0) != I32 or no_act(n))
HYBRID_BEFORE_29 = C("hybrid (float input, quantized weights) {need}", lambda n, t: not hybrid(n, 1), below(29), 29)
RESTRICTED = C("UINT8 needs input_scale * filter_scale < output_scale before Android SDK 29 (restricted scales)",
               lambda n, t: typ(n, 0) != U8 or restricted_scales(n), below(29))
NOT_HYBRID_SEQ = C("the hybrid version (float input, quantized weights) is not supported by NNAPI",
                   lambda n, t: not hybrid(n, 2))
SCALAR_OUT = C("NNAPI does not generate a scalar output", lambda n, t: orank(n) != 0)
SIZE_CONST = C("the size input must be constant", lambda n, t: n_inputs(n) < 2 or const(n, 1))
TWO_INPUTS = C("expects at least 2 inputs", lambda n, t: n_inputs(n) >= 2)
NO_ALIGN = C("align_corners and half_pixel_centers {need}",
             lambda n, t: not n.options.get("align_corners") and not n.options.get("half_pixel_centers"),
             lambda t: t.level <= 29, 30)


def _mul_max(t: Target) -> int:
    return 3 if t.accelerator_specified else 2


def _dequant_fp16(n, t) -> bool:
    return t.level >= 30 and typ(n, 0) == F16 and not const(n, 0)


_RULES = [
    _rule("ADD", 2, types=((27, FQ8), (30, frozenset({I32}))), checks=(INT32_NO_ACT, RANK4)),
    _rule("MUL", _mul_max, types=((27, FQ8), (30, frozenset({I32}))), checks=(INT32_NO_ACT, RANK4)),
    _rule("SUB", 3, 28, ((28, frozenset({F32})), (29, Q8), (30, frozenset({I32}))), checks=(INT32_NO_ACT, RANK4)),
    _rule("DIV", 1, 28, ((28, frozenset({F32})),), checks=(RANK4,)),
    _rule("AVERAGE_POOL_2D", 2, types=_fq8(), checks=(
        C("quantized filter windows over 256 elements need an accelerator "
          "(they overflow on the reference CPU path)",
          lambda n, t: t.accelerator_specified or typ(n, 0) not in Q8
          or int(n.options.get("filter_width", 1)) * int(n.options.get("filter_height", 1)) <= 256),)),
    _rule("MAX_POOL_2D", 2, types=_fq8()),
    _rule("L2_POOL_2D", 1, types=((27, frozenset({F32})),), checks=(
        C("a fused activation {need}", no_act, below(29), 29),)),
    _rule("CONV_2D", 5, types=((27, frozenset({F32, U8})), (29, ANY)), checks=(
        HYBRID_BEFORE_29,
        C("per-channel quantized filters {need}", lambda n, t: not n.input(1).quantization.per_channel, below(29), 29),
        RESTRICTED,
        C("the bias input is required (Conv2D with omitted bias not supported)", lambda n, t: n_inputs(n) == 3),
        C("dilation {need}", lambda n, t: int(n.options.get("dilation_w_factor", 1)) == 1
          and int(n.options.get("dilation_h_factor", 1)) == 1, below(29), 29),
        C("grouped convolution {need}", lambda n, t: n.input(0).shape[3] == n.input(1).shape[3], below(29), 29))),
    _rule("DEPTHWISE_CONV_2D", 3, types=((27, frozenset({F32, U8})), (29, ANY)), checks=(
        RESTRICTED,
        C("dilation {need}", lambda n, t: int(n.options.get("dilation_w_factor", 1)) == 1
          and int(n.options.get("dilation_h_factor", 1)) == 1, below(29), 29))),
    _rule("FULLY_CONNECTED", 5, types=((27, frozenset({F32, U8})), (29, ANY)), checks=(
        C("INT16 output is not supported", lambda n, t: otyp(n) != I16),
        HYBRID_BEFORE_29, RESTRICTED,
        C("keep_num_dims {need}", lambda n, t: not n.options.get("keep_num_dims"), below(30), 30))),
    _rule("HARD_SWISH", None, types=_fq8()),
    _rule("SOFTMAX", 2, types=_fq8(), checks=(
        C("output type must be FLOAT32, UINT8 or INT8", lambda n, t: otyp(n) in FQ8),
        C("input rank must be <= 4", lambda n, t: rank(n, 0) <= 4),
        C("input rank must be 2 or 4 before Android SDK 29", lambda n, t: rank(n, 0) in (2, 4), below(29)))),
    _rule("RESHAPE", 1, types=((27, FQ8), (FL6, frozenset({I32}))), checks=(
        C("input and output ranks must be <= 4", lambda n, t: rank(n, 0) <= 4 and orank(n) <= 4),
        C("the shape input must be constant", lambda n, t: n_inputs(n) < 2 or const(n, 1)),
        C("a scalar target shape is not supported", lambda n, t: n_inputs(n) != 1 or _reshape_rank(n)))),
    _rule("RESIZE_BILINEAR", 3, types=((27, frozenset({F32})), (29, Q8)), checks=(
        C("input rank must be 4", lambda n, t: rank(n, 0) == 4), TWO_INPUTS, SIZE_CONST,
        C("output height must equal width before Android SDK 29",
          lambda n, t: n.outputs[0].shape[1] == n.outputs[0].shape[2], below(29)),
        NO_ALIGN)),
    _rule("RESIZE_NEAREST_NEIGHBOR", 3, 29, _fq8(29), checks=(TWO_INPUTS, SIZE_CONST, NO_ALIGN)),
    _rule("SQUEEZE", 1, 28, checks=(
        C("squeeze_dims must be given on Android SDK 28", lambda n, t: bool(n.options.get("squeeze_dims")),
          lambda t: t.level == 28),)),
    _rule("UNIDIRECTIONAL_SEQUENCE_LSTM", 2, 29, checks=(
        NOT_HYBRID_SEQ, C("only the 20- and 24-input forms are supported", lambda n, t: _lstm_full(n)))),
    _rule("UNIDIRECTIONAL_SEQUENCE_RNN", 1, 29, checks=(
        C("the hybrid version (float input, quantized weights) is not supported by NNAPI",
          lambda n, t: not hybrid(n, 1)),)),
    _rule("BIDIRECTIONAL_SEQUENCE_LSTM", 1, 29, checks=(NOT_HYBRID_SEQ,)),
    _rule("L2_NORMALIZATION", 2, checks=(
        C("input must be FLOAT32 of rank 4 before Android SDK 29",
          lambda n, t: typ(n, 0) == F32 and rank(n, 0) == 4, below(29)), NO_ACT)),
    _rule("LOCAL_RESPONSE_NORMALIZATION", 1),
    _rule("LSH_PROJECTION", 1, checks=(
        C("sparse projection {need}", lambda n, t: int(n.options.get("type", 0)) != 1, below(29), 29),
        C("sparse projection takes no weights (2 inputs)",
          lambda n, t: int(n.options.get("type", 0)) != 1 or n_inputs(n) == 2))),
    _rule("CONCATENATION", 2, types=((27, frozenset({F16, F32, U8, I8})),), checks=(
        NO_ACT, C("input rank must be <= 4", lambda n, t: rank(n, 0) <= 4),
        C("UINT8 inputs need one scale and zero point before Android SDK 29",
          lambda n, t: typ(n, 0) != U8 or _same_quant_inputs(n), below(29)))),
    # a constant fp16 input is TFLite's FP16 weights path (folded on the CPU here); a non-constant
    # one is accepted from 30 before any other check
    _rule("DEQUANTIZE", 2, types=((27, frozenset({U8})), (29, frozenset({I8})), (30, frozenset({F16}))),
          accept_early=_dequant_fp16, early_types=frozenset({F16}), checks=(
        C("INT8 input must be symmetric (zero point 0) on Android SDK 29",
          lambda n, t: typ(n, 0) != I8 or _zp(n.input(0)) == 0, lambda t: t.level == 29),
        C("a FLOAT16 input must not be constant", lambda n, t: typ(n, 0) != F16 or not const(n, 0)))),
    _rule("DENSIFY", None, 30, checks=(C("only a constant input is densified", lambda n, t: const(n, 0)),)),
    _rule("FLOOR", 1),
    *[_rule(op, 2, types=_fq8()) for op in ("RELU", "RELU_N1_TO_1", "RELU6", "LOGISTIC")],
    _rule("TANH", 2, types=((27, frozenset({F32})), (29, Q8))),
    *[_rule(op, 2, 28, ((28, frozenset({F32})), (29, Q8)), checks=(
        C("input tensors with no elements are not supported", _pad_nonempty),
        TWO_INPUTS,
        C("an explicit padding value (3 inputs) {need}", lambda n, t: n_inputs(n) != 3, below(29), 29)))
      for op in ("PAD", "PADV2")],
    _rule("MIRROR_PAD", 2, FL7, ((FL7, FQ8 | {I32}),), checks=(
        C("padding mode must be REFLECT or SYMMETRIC", lambda n, t: int(n.options.get("mode", 0)) in (0, 1)),
        C("input tensors with no elements are not supported", _pad_nonempty),
        C("expects 2 inputs", lambda n, t: n_inputs(n) == 2))),
    _rule("SPACE_TO_BATCH_ND", 2, 28),
    _rule("BATCH_TO_SPACE_ND", 2, 28, checks=(C("all crops must be constant 0", _crops_zero),)),
    _rule("STRIDED_SLICE", 2, 28, _fq8(28)),
    _rule("TRANSPOSE", 2, 28, checks=(
        C("the permutation must be constant (dynamically-sized tensors not supported)",
          lambda n, t: n_inputs(n) > 1 and const(n, 1)),)),
    *[_rule(op, 1, 29, ((29, frozenset({F32})),)) for op in ("ABS", "EXP", "LOG", "POW", "SQRT", "SIN", "COS")],
    _rule("RSQRT", 2, 29, ((29, frozenset({F32})), (FL7, Q8))),
    _rule("SLICE", 2, 29, ((29, frozenset({F32, I32, U8, I8})),), checks=(
        C("begin and size must be INT32", lambda n, t: typ(n, 1) == I32 and typ(n, 2) == I32),)),
    _rule("TRANSPOSE_CONV", 4, 29, checks=(
        C("output shape and filter must be constant (dynamically-sized tensors not supported)",
          lambda n, t: n_inputs(n) > 1 and const(n, 0) and const(n, 1)),)),
    _rule("RNN", 1, checks=(C("expects 5 inputs", lambda n, t: n_inputs(n) == 5),
                            C("weights must be FLOAT32", lambda n, t: typ(n, 1) == F32))),
    _rule("SPACE_TO_DEPTH", 2, types=_fq8()),
    _rule("DEPTH_TO_SPACE", None, types=_fq8()),
    _rule("SVDF", 1, 28, checks=(C("expects 5 inputs", lambda n, t: n_inputs(n) == 5),
                                 C("weights must be FLOAT32", lambda n, t: typ(n, 1) == F32))),
    _rule("LSTM", 3, 28, checks=(
        C("hybrid (float input, quantized weights) {need}",
          lambda n, t: not (_lstm_full(n) and hybrid(n, 2)), below(29), 29),
        C("the basic (5-input) kernel needs UINT8 weights, input/output quantized at 1/128 + 128, "
          "a 16/32768 cell state and constant weights and biases", _lstm_basic_ok),
        C("the 24-input form {need}", lambda n, t: n_inputs(n) != 24, below(29), 29),
        C("weights must be FLOAT32 or UINT8 (INT8 {need})",
          lambda n, t: _lstm_basic(n) or typ(n, 4) in (F32, U8), below(30), 30),
        C("weights must be FLOAT32, UINT8 or INT8",
          lambda n, t: _lstm_basic(n) or typ(n, 4) in FQ8, at_least(30)))),
    _rule("MEAN", 2, 28, ((28, frozenset({F32})), (29, Q8)), checks=(
        SCALAR_OUT, C("input rank must be <= 4", lambda n, t: rank(n, 0) <= 4))),
    _rule("EMBEDDING_LOOKUP", 1, types=((27, frozenset({F32})),), type_input=1),
    _rule("HASHTABLE_LOOKUP", 1, checks=(C("output must be FLOAT32", lambda n, t: otyp(n) == F32),)),
    *[_rule(op, 3, 29, ((29, FQ8 | {I32}),), checks=(
        C("a scalar operand must be constant", _scalar_operands_const),)) for op in ("MAXIMUM", "MINIMUM")],
    _rule("CAST", 1, 29, ((29, frozenset({F32, I32, U8})), (30, frozenset({I8}))), checks=(
        C("output type must be FLOAT32, INT32 or UINT8 (INT8 {need})",
          _output_types(((29, {F32, I32, U8}),)), below(30), 30),
        C("output type must be FLOAT32, INT32, UINT8 or INT8",
          _output_types(((29, {F32, I32, U8, I8}),)), at_least(30)))),
    *[_rule(op, 1, 29, ((29, FQ8),)) for op in ("LEAKY_RELU", "PRELU")],
    _rule("TILE", 1, 29, ((29, FQ8 | {I32}),), checks=(C("multipliers must be INT32", lambda n, t: typ(n, 1) == I32),)),
    *[_rule(op, 1, 29, ((29, frozenset({BOOL})),)) for op in ("LOGICAL_OR", "LOGICAL_AND", "LOGICAL_NOT")],
    *[_rule(op, 2, 29, ((29, FQ8 | {BOOL, I32}),))
      for op in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")],
    _rule("NEG", 2, 29, ((29, frozenset({F32, I32})),)),
    _rule("TOPK_V2", 2, 29, ((29, FQ8 | {I32}),), checks=(
        C("k must be a constant INT32", lambda n, t: typ(n, 1) == I32 and const(n, 1)),)),
    _rule("SELECT", 2, 29, ((29, FQ8 | {I32}),), type_input=1, checks=(
        C("condition and inputs must have the same shape", lambda n, t: n.input(0).shape == n.input(1).shape),)),
    _rule("GATHER", 2, 29, ((29, FQ8 | {F16, I32}),), checks=(
        C("positions must be INT32", lambda n, t: typ(n, 1) == I32),
        C("0-dimension positions are not supported", lambda n, t: rank(n, 1) != 0))),
    _rule("EXPAND_DIMS", 1, 29, ((29, FQ8 | {F16, I32}),), checks=(
        C("the axis must be a constant INT32", lambda n, t: typ(n, 1) == I32 and const(n, 1)),)),
    _rule("SPLIT", 3, 29, ((29, frozenset({F32, U8, I32})), (30, frozenset({I8}))), type_input=1, checks=(
        C("the axis must be a constant INT32", lambda n, t: typ(n, 0) == I32 and const(n, 0)),)),
    _rule("SPLIT_V", 2, 30, ((30, FQ8 | {I32}),), checks=(
        C("size_splits must be a constant INT32 vector",
          lambda n, t: typ(n, 1) == I32 and rank(n, 1) == 1 and const(n, 1)),
        C("the axis must be a constant INT32", lambda n, t: typ(n, 2) == I32 and const(n, 2)),
        C("split sizes must be non-zero", _split_v_sizes_ok))),
    _rule("LOG_SOFTMAX", 1, 29, ((29, frozenset({F32})),)),
    _rule("QUANTIZE", 2, 29, ((29, FQ8),), checks=(
        C("quantized input needs scale > 0", lambda n, t: typ(n, 0) not in Q8 or _scale(n.input(0)) > 0),
        C("output must be UINT8 (INT8 {need})", lambda n, t: otyp(n) == U8, below(30), 30),
        C("output must be UINT8 or INT8", lambda n, t: otyp(n) in Q8, at_least(30)),
        C("output scale must be > 0", lambda n, t: _scale(n.outputs[0]) > 0))),
    _rule("REDUCE_ANY", 2, 29, checks=(SCALAR_OUT,)),
    *[_rule(op, 2, 29, ((29, FQ8),), checks=(
        C("a scalar input is not supported", lambda n, t: rank(n, 0) != 0),)) for op in ("REDUCE_MIN", "REDUCE_MAX")],
    *[_rule(op, 1, 29, ((29, frozenset({F32})),), checks=(SCALAR_OUT,)) for op in ("REDUCE_PROD", "SUM")],
    _rule("ELU", 1, 30, ((30, frozenset({F32})),)),
    _rule("FILL", 1, 30, ((30, frozenset({I32, I64})),), checks=(
        C("dims must be constant", lambda n, t: const(n, 0)),
        C("dims must be non-empty and fit INT32", _fill_dims_ok),
        C("value must be FLOAT32, INT32 or INT64 (fitting INT32)", _fill_value_ok))),
    _rule("PACK", 2, 30, ((30, frozenset({F32, I8})), (FL6, frozenset({I32, U8}))), checks=(
        C("packing along the last axis {need}", lambda n, t: int(n.options.get("axis", 0)) not in (-1, rank(n, 0)),
          below(FL6), FL6),)),
    _rule("UNPACK", 2, 30, ((30, FQ8),), checks=(
        C("input rank must be 2..4", lambda n, t: 1 < rank(n, 0) <= 4),
        C("unpacking along the last axis is not supported",
          lambda n, t: int(n.options.get("axis", 0)) not in (-1, rank(n, 0) - 1)))),
    _rule("SQUARED_DIFFERENCE", 2, 28, ((28, frozenset({F32})), (29, frozenset({U8})), (30, frozenset({I8, I32}))),
          checks=(RANK4,)),
    _rule("BATCH_MATMUL", 2, FL6, ((FL6, frozenset({F32, I32, I8})),), checks=(
        C("hybrid batch matmul (different input types) is not supported", lambda n, t: typ(n, 0) == typ(n, 1)),
        C("input rank must be 2..4", lambda n, t: 2 <= rank(n, 0) <= 4),
        C("broadcast batch matmul is not supported", _not_broadcast_batch))),
    _rule("REVERSE_V2", 3, FL7, ((FL7, FQ8 | {I32}),), checks=(C("expects 2 inputs", lambda n, t: n_inputs(n) == 2),)),
    *[_rule(op, 2, 29, ((29, FQ8 | {F16, I32}),), checks=(
        C("the axis must be INT32 (or a constant INT64 that fits)", _axis_ok),
        C("output type must be INT32", lambda n, t: int(n.options.get("output_type", 2)) == 2)))
      for op in ("ARG_MAX", "ARG_MIN")],
]

RULES: dict[str, OpRule] = {r.op: r for r in _RULES}
