"""The Core ML delegate's support rules, as TFLite's `IsNodeSupportedByDelegate` has them.

Sources (facts 6.4): tflite/delegates/coreml/coreml_delegate.mm and the validators in
builders/{util,convolution_op,fully_connected_op,concatenation_op,pad_op,pooling_layer,
reshape_op,resize_bilinear_op}_builder.cc. In the order the real delegate checks:

1. version: v1 only, except DEPTHWISE_CONV_2D <= 2 and FULLY_CONNECTED <= 6;
2. float models only: input #0 (input #2 for TRANSPOSE_CONV) must be FLOAT32;
3. the op's own validator (the constraints below).

Constant float16 tensors are what the real delegate sees for weights behind a constant
DEQUANTIZE (it partitions with FP16GraphPartitionHelper), so "constant" rules accept them.

Where the real validator would read past a missing optional tensor it fails open (TFLite's
`TF_LITE_ENSURE_OK` returns a non-zero status from a bool function); the rules below accept
those cases too: a CONV_2D or FULLY_CONNECTED without bias, a RESHAPE without a shape tensor.

Known differences of the real device that the emulator does not reproduce (it computes what
TFLite computes): MEAN is lowered to *global* average pooling, so a MEAN over H alone or W
alone is accepted but averages over both on a device.
"""
from __future__ import annotations

from dataclasses import dataclass

from acelera.backends.tables import F32
from acelera.core.delegate import SUPPORTED, Constraint, OpSupport, OpTable, Support
from acelera.core.kernels.registry import NodeContext

# TFLite schema enums (options carry raw ints)
ACT_NONE, ACT_SIGN_BIT = 0, 5
MIRROR_REFLECT = 0
FC_DEFAULT_WEIGHTS = 0
MAX_KERNEL = 16384
FLOATS = ("FLOAT32", "FLOAT16")
NEWEST_VERSION = 3


@dataclass(frozen=True)
class CoreMLOp(OpSupport):
    """An op-table row that checks the real delegate's float-model rule on one fixed input."""

    #: the input whose type decides "float model" (TFLite: 0, or 2 for TRANSPOSE_CONV)
    data_input: int = 0

    def float_model_rule(self, node: NodeContext) -> str:
        """Why the node fails the float-model rule, or "" when it passes."""
        t = node.input(self.data_input)
        if t is not None and t.type_name in self.dtypes:
            return ""
        got = "absent" if t is None else t.type_name
        return (f"input #{self.data_input} is {got}: the Core ML delegate takes float models only "
                f"({'/'.join(sorted(self.dtypes))} data)")

    def check(self, node: NodeContext) -> Support:
        name, v = node.op.name, node.version
        if not self.min_version <= v <= self.max_version:
            bound = f"max version supported is {self.max_version}" if v > self.max_version else \
                f"min version supported is {self.min_version}"
            also = self.float_model_rule(node)  # quantized ops carry higher versions: say both
            return Support(False, f"{name} v{v}: {bound}" + (f"; also {also}" if also else ""), "version")
        why = self.float_model_rule(node)
        if why:
            return Support(False, f"{name}: {why}", "input type")
        for c in self.constraints:
            try:
                ok = c.check(node)
            except Exception as e:  # a rule that cannot be evaluated refuses the node
                return Support(False, f"{name}: {c.description} (could not check: {type(e).__name__})", "constraint")
            if not ok:
                return Support(False, f"{name}: {c.description}", "constraint")
        return SUPPORTED


# --- helpers ---------------------------------------------------------------------------------
def _const(t) -> bool:
    return t is not None and t.is_constant


def _act(node: NodeContext) -> int:
    return int(node.options.get("fused_activation_function", ACT_NONE))


def _shape4(t) -> tuple[int, ...]:
    """TFLite's Get4DShape: the shape left-padded with 1s to rank 4 (B, H, W, C)."""
    s = tuple(int(d) for d in t.shape)
    return (1,) * (4 - len(s)) + s


def _n(t) -> int:
    n = 1
    for d in t.shape:
        n *= int(d)
    return n


def _int_values(t) -> list[int]:
    return [int(v) for v in t.data.reshape(-1)]


# --- constraints -----------------------------------------------------------------------------
def binary_rules() -> tuple[Constraint, ...]:
    """ADD, MUL: util.cc IsBinaryOpSupported / IsBroadcastable (Core ML's broadcasting)."""
    def types(n):
        return all(t is not None and (t.type_name == "FLOAT32" or (t.type_name == "FLOAT16" and t.is_constant))
                   for t in (n.input(0), n.input(1)))

    def b_ok(n):
        a, b = n.input(0), n.input(1)
        if _shape4(a)[0] == _shape4(b)[0]:
            return True
        return (_const(a) and _n(a) == 1) or (_const(b) and _n(b) == 1)

    def hw_ok(n):
        a, b = _shape4(n.input(0)), _shape4(n.input(1))
        return a[1:3] == b[1:3] or a[1:3] == (1, 1) or b[1:3] == (1, 1)

    def c_ok(n):
        a, b = _shape4(n.input(0))[3], _shape4(n.input(1))[3]
        return a == b or a == 1 or b == 1

    return (
        Constraint("both inputs must be FLOAT32 or constant FLOAT16", types),
        Constraint("inputs must have rank <= 4",
                   lambda n: all(t is not None and len(t.shape) <= 4 for t in (n.input(0), n.input(1)))),
        Constraint("Core ML broadcasting: batch sizes must be equal unless one input is a 1-element constant", b_ok),
        Constraint("Core ML broadcasting: (H, W) must be equal or one input's (H, W) must be (1, 1)", hw_ok),
        Constraint("Core ML broadcasting: channels must be equal or one input must have 1 channel", c_ok),
    )


NO_ACTIVATION = Constraint("fused activation must be NONE", lambda n: _act(n) == ACT_NONE)
NOT_SIGN_BIT = Constraint("fused activation SIGN_BIT is not supported", lambda n: _act(n) != ACT_SIGN_BIT)


def concat_rules() -> tuple[Constraint, ...]:
    """concatenation_op_builder.cc IsConcatenationOpSupported."""
    def channel_axis(n):
        rank, axis = len(n.input(0).shape), int(n.options.get("axis", 0))
        if rank == 3:
            return axis in (2, -1)
        if rank == 4:
            return axis in (3, -1)
        return False

    return (
        NO_ACTIVATION,
        Constraint("needs at least 2 inputs", lambda n: len(n.inputs) >= 2),
        Constraint("concatenation along the channel axis only (rank 3: axis 2 or -1; rank 4: axis 3 or -1)",
                   channel_axis),
    )


def conv_rules(op: str) -> tuple[Constraint, ...]:
    """convolution_op_builder.cc IsConvolutionOpSupported (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV)."""
    def kernel_ok(n):
        w = n.input(1)
        return len(w.shape) == 4 and w.shape[1] <= MAX_KERNEL and w.shape[2] <= MAX_KERNEL

    rules = [
        Constraint("weights (input #1) must be constant", lambda n: _const(n.input(1))),
        Constraint(f"kernel height and width must be <= {MAX_KERNEL}", kernel_ok),
    ]
    if op == "TRANSPOSE_CONV":
        rules.append(Constraint("output shape (input #0) must be constant", lambda n: _const(n.input(0))))
    else:
        rules.insert(0, NOT_SIGN_BIT)
        rules.append(Constraint("bias (input #2) must be constant",
                                lambda n: (b := n.input(2)) is None or b.is_constant))
    return tuple(rules)


def fully_connected_rules() -> tuple[Constraint, ...]:
    """fully_connected_op_builder.cc IsFullyConnectedOpSupported."""
    def single_batch(n):
        x = n.input(0)
        return len(x.shape) > 0 and int(x.shape[-1]) == _n(x)

    def bias_ok(n):
        b = n.input(2)
        return b is None or (b.type_name in FLOATS and b.is_constant)

    return (
        Constraint("weights format must be DEFAULT",
                   lambda n: int(n.options.get("weights_format", FC_DEFAULT_WEIGHTS)) == FC_DEFAULT_WEIGHTS),
        Constraint("weights (input #1) must be a constant FLOAT32 or FLOAT16 tensor",
                   lambda n: (w := n.input(1)) is not None and w.is_constant and w.type_name in FLOATS),
        Constraint("single batch only (Core ML 2): every input dimension but the last must be 1", single_batch),
        Constraint("bias (input #2) must be a constant FLOAT32 or FLOAT16 tensor", bias_ok),
        NOT_SIGN_BIT,
    )


def mean_rules() -> tuple[Constraint, ...]:
    """pooling_layer_builder.cc IsMeanOpSupported (lowered to global average pooling)."""
    def hw_axes(n):
        axis = n.input(1)
        if not _const(axis):
            return False
        return all((a + 4) % 4 in (1, 2) for a in _int_values(axis))

    return (
        Constraint("keep_dims must be true", lambda n: bool(n.options.get("keep_dims", False))),
        Constraint("input must be 4D", lambda n: (x := n.input(0)) is not None and len(x.shape) == 4),
        Constraint("must reduce over the H and W axes only (constant axes 1, 2, -3, -2)", hw_axes),
    )


def pad_rules() -> tuple[Constraint, ...]:
    """pad_op_builder.cc IsPadOpSupported (PAD, PADV2, and MIRROR_PAD after its mode check)."""
    def shape_ok(n):
        p = n.input(1)
        return tuple(p.shape) == (4, 2)

    return (
        Constraint("paddings (input #1) must be constant", lambda n: _const(n.input(1))),
        Constraint("paddings must be a 4x2 tensor (4D input only)", shape_ok),
        Constraint("no padding on the batch dimension", lambda n: _int_values(n.input(1))[0:2] == [0, 0]),
        Constraint("no padding on the channel dimension", lambda n: _int_values(n.input(1))[6:8] == [0, 0]),
    )


def mirror_pad_rules() -> tuple[Constraint, ...]:
    return (Constraint("mode must be REFLECT (SYMMETRIC is not supported)",
                       lambda n: int(n.options.get("mode", MIRROR_REFLECT)) == MIRROR_REFLECT),) + pad_rules()


def reshape_rules(coreml_version: int) -> tuple[Constraint, ...]:
    """reshape_op_builder.cc IsReshapeOpSupported: only for a Core ML 2 target."""
    def shape_given(n):
        s = n.input(1)
        return s is None or s.is_constant

    def rank_ok(n):
        s = n.input(1)
        if s is None:
            return len(n.options.get("new_shape", ()) or ()) in (3, 4)
        return s.type_name == "INT32" and len(s.shape) == 1 and int(s.shape[0]) in (3, 4)

    return (
        Constraint(f"only delegated for a Core ML 2 target (--coreml_version=2); this one targets Core ML "
                   f"{coreml_version}", lambda n: coreml_version < 3),
        Constraint("target shape (input #1) must be constant", shape_given),
        Constraint("target shape must have rank 3 or 4 (new_shape option, or a 1-D INT32 shape tensor)", rank_ok),
    )


# --- the table -------------------------------------------------------------------------------
ACTIVATIONS = ("HARD_SWISH", "LOGISTIC", "RELU", "RELU_N1_TO_1", "RELU6", "TANH")


def op_table(coreml_version: int = NEWEST_VERSION) -> OpTable:
    """The support table for a Core ML target version (2 or 3)."""
    rows: list[OpSupport] = []

    def row(op, *constraints, max_version=1, data_input=0):
        rows.append(CoreMLOp(op, max_version, F32, tuple(constraints), data_input=data_input))

    for op in ("ADD", "MUL"):
        row(op, *binary_rules())
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        row(op, NO_ACTIVATION)
    row("CONCATENATION", *concat_rules())
    row("CONV_2D", *conv_rules("CONV_2D"))
    row("DEPTHWISE_CONV_2D", *conv_rules("DEPTHWISE_CONV_2D"), max_version=2)
    row("TRANSPOSE_CONV", *conv_rules("TRANSPOSE_CONV"), data_input=2)
    row("FULLY_CONNECTED", *fully_connected_rules(), max_version=6)
    for op in ACTIVATIONS:
        row(op)
    row("MEAN", *mean_rules())
    row("PAD", *pad_rules())
    row("PADV2", *pad_rules())
    row("MIRROR_PAD", *mirror_pad_rules())
    row("RESHAPE", *reshape_rules(coreml_version))
    row("RESIZE_BILINEAR", Constraint("output size (input #1) must be constant", lambda n: _const(n.input(1))))
    row("SOFTMAX", Constraint("beta must be 1.0", lambda n: float(n.options.get("beta", 1.0)) == 1.0))
    return OpTable.of(rows, "coreml")
