"""Op templates of the conformance suite: per op, the attribute variants its cases are built from.

A template (`OpTemplate`) is dtype-neutral: its tensors (`T`) say shapes, value ranges and
roles, and graph_builder.build_graph materializes it for one case dtype. `@generator("MY_OP")`
registers a function `(op) -> list[OpTemplate]`; a plugin with custom ops can register
generators for them before certifying (generators_more.py holds those of the newer ops).
How cases are picked from these variants is described in cases.py.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from acelera.core.errors import AceleraError

CASE_DTYPES = ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT32")
QUANT_DTYPES = ("INT8", "UINT8", "INT16")
FLOAT_DTYPES = ("FLOAT32", "FLOAT16")
#: dtypes tried, in order, for the "undeclared dtype" negative case
NEGATIVE_DTYPES = ("FLOAT32", "INT8", "UINT8", "INT16")
NP = {"FLOAT32": np.float32, "FLOAT16": np.float16, "INT8": np.int8, "UINT8": np.uint8,
      "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "BOOL": np.bool_,
      "COMPLEX64": np.complex64, "UINT64": np.uint64}
QRANGE = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767)}
DEFAULT_VARIANTS_PER_CASE = 2


class NotCovered(AceleraError):
    """The suite cannot build or reference-run a case (reported as "not covered")."""


class ReferenceFailure(AceleraError):
    """The CPU reference failed on a case it claims to support (a bug, reported as a failure)."""


def reference_gap(e: BaseException) -> bool:
    """Whether an error of the CPU reference means it *declines* the node (no kernel for the op,
    version or dtype), as opposed to failing (a kernel that raises, a kernel module that does not
    import): only the first makes a case "not covered"."""
    from acelera.core.errors import UnsupportedOpError

    return isinstance(e, UnsupportedOpError) and "failed to import" not in str(e)


# --- templates -----------------------------------------------------------------------------
@dataclass(frozen=True)
class T:
    """One tensor of a template.

    role: "data" (activations; quantized like the case dtype), "weights", "bias", "int"
    (int32 parameters: shapes, axes, paddings; never quantized) or "bool".
    """

    shape: tuple[int, ...]
    role: str = "data"
    const: bool = False
    value: Any = None  # fixed contents (parameters); random from `domain` when None
    domain: tuple[float, float] = (-1.0, 1.0)
    axis: int | None = None  # per-channel quantization axis of int8 weights
    dtype: str | None = None  # a fixed tensor type, whatever the case dtype
    quant: Mapping[str, tuple[float, int]] | None = None  # fixed output quantization per case dtype
    nonzero: bool = False  # random values are +-uniform(domain), domain positive (divisors)
    variable: bool = False  # a variable (state) tensor: no buffer, not a graph input (RNN / LSTM states)


@dataclass(frozen=True)
class OpTemplate:
    """One variant of an op: tensors, options and the smallest op version that allows it."""

    op: str
    inputs: tuple[T | None, ...]
    outputs: tuple[T, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    label: str = "default"
    min_version: int = 1
    #: quantized cases: all data inputs and the outputs share input 0's quantization
    same_quant: bool = False
    custom_code: str | None = None
    custom_options: bytes = b""
    #: a constraint probe: only generated for rows that declare constraints
    probe: bool = False
    #: the case dtypes this variant applies to (None: all)
    dtypes: frozenset[str] | None = None


GENERATORS: dict[str, Callable[[str], list[OpTemplate]]] = {}


def generator(*ops: str):
    """Register `fn(op) -> list[OpTemplate]` as the case generator of `ops`."""
    def deco(fn):
        for op in ops:
            GENERATORS[op] = fn
        return fn
    return deco


def templates_for(op: str) -> list[OpTemplate] | None:
    fn = GENERATORS.get(op)
    return None if fn is None else fn(op)


ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def _int(values, dtype: str = "INT32") -> T:
    a: np.ndarray = np.asarray(values, NP[dtype])
    return T(tuple(a.shape), role="int", const=True, value=a, dtype=dtype)


# fixed output quantization (scale, zero point) of ops whose kernels require it
Q_LOGISTIC = {"INT8": (1 / 256, -128), "UINT8": (1 / 256, 0), "INT16": (1 / 32768, 0)}
Q_TANH = {"INT8": (1 / 128, 0), "UINT8": (1 / 128, 128), "INT16": (1 / 32768, 0)}
Q_SOFTMAX = Q_LOGISTIC
Q_LOG_SOFTMAX = {"INT8": (16 / 256, 127), "UINT8": (16 / 256, 255), "INT16": (16 / 32768, 0)}
Q_L2NORM = {"INT8": (1 / 128, 0), "UINT8": (1 / 128, 128), "INT16": (1 / 32768, 0)}

# --- elementwise unary ---------------------------------------------------------------------
UNARY_DOMAIN: dict[str, tuple[float, float]] = {
    "ABS": (-4, 4), "CEIL": (-4, 4), "FLOOR": (-4, 4), "ROUND": (-4, 4), "SIGN": (-4, 4),
    "NEG": (-4, 4), "COS": (-3, 3), "SIN": (-3, 3), "ELU": (-3, 3), "EXP": (-3, 2),
    "GELU": (-3, 3), "HARD_SWISH": (-4, 4), "LOG": (0.05, 4), "LOGISTIC": (-6, 6),
    "TANH": (-3, 3), "RELU": (-4, 4), "RELU6": (-2, 8), "RELU_N1_TO_1": (-2, 2),
    "RELU_0_TO_1": (-1, 2), "RSQRT": (0.1, 4), "SQRT": (0.0, 4), "SQUARE": (-3, 3),
    "LEAKY_RELU": (-4, 4), "L2_NORMALIZATION": (-1, 1), "SOFTMAX": (-4, 4), "LOG_SOFTMAX": (-4, 4),
    "ZEROS_LIKE": (-2, 2), "LOGICAL_NOT": (0, 1),
}
UNARY_QUANT = {"LOGISTIC": Q_LOGISTIC, "TANH": Q_TANH, "SOFTMAX": Q_SOFTMAX,
               "LOG_SOFTMAX": Q_LOG_SOFTMAX, "L2_NORMALIZATION": Q_L2NORM}
UNARY_SHAPES = (((1, 6, 6, 3), "4d"), ((4, 9), "2d"), ((2, 3, 5), "3d"))


@generator(*[op for op in UNARY_DOMAIN if op not in ("SOFTMAX", "LEAKY_RELU", "GELU", "L2_NORMALIZATION", "LOGICAL_NOT")])
def unary(op: str) -> list[OpTemplate]:
    dom = UNARY_DOMAIN[op]
    q = UNARY_QUANT.get(op)
    return [OpTemplate(op, (T(s, domain=dom),), (T(s, quant=q),), label=lbl) for s, lbl in UNARY_SHAPES]


@generator("LEAKY_RELU")
def leaky_relu(op: str) -> list[OpTemplate]:
    dom = UNARY_DOMAIN[op]
    return [OpTemplate(op, (T(s, domain=dom),), (T(s),), {"alpha": a}, f"{lbl}_alpha{a:g}")
            for (s, lbl), a in zip(UNARY_SHAPES, (0.2, 0.01, 0.5))]


@generator("GELU")
def gelu(op: str) -> list[OpTemplate]:
    dom = UNARY_DOMAIN[op]
    return [OpTemplate(op, (T(s, domain=dom),), (T(s),), {"approximate": a},
                       f"{lbl}{'_approximate' if a else ''}")
            for (s, lbl), a in zip(UNARY_SHAPES, (False, True, False))]


@generator("SOFTMAX")
def softmax(op: str) -> list[OpTemplate]:
    dom = UNARY_DOMAIN[op]
    return [OpTemplate(op, (T(s, domain=dom),), (T(s, quant=Q_SOFTMAX),), {"beta": b}, f"{lbl}_beta{b:g}")
            for (s, lbl), b in zip(UNARY_SHAPES, (1.0, 1.0, 0.5))]


@generator("L2_NORMALIZATION")
def l2_normalization(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T(s, domain=(-2, 2)),), (T(s, quant=Q_L2NORM),),
                       {"fused_activation_function": "NONE"}, lbl) for s, lbl in UNARY_SHAPES[:2]]


# --- elementwise binary --------------------------------------------------------------------
FUSED_ACT_BINARY = {"ADD", "SUB", "MUL", "DIV"}
BINARY_DOMAINS: dict[str, tuple[dict, dict]] = {
    "DIV": ({"domain": (-3, 3)}, {"domain": (0.5, 2.0), "nonzero": True}),
    "FLOOR_DIV": ({"domain": (-4, 4)}, {"domain": (0.5, 3.0), "nonzero": True}),
    "FLOOR_MOD": ({"domain": (-4, 4)}, {"domain": (0.5, 3.0), "nonzero": True}),
    "POW": ({"domain": (0.5, 2.0)}, {"domain": (-2.0, 2.0)}),
}
SAME_QUANT_BINARY = {"MAXIMUM", "MINIMUM", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER",
                     "GREATER_EQUAL"}
COMPARISONS = {"EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"}


@generator("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW",
           "FLOOR_DIV", "FLOOR_MOD", *sorted(COMPARISONS))
def binary(op: str) -> list[OpTemplate]:
    da, db = BINARY_DOMAINS.get(op, ({"domain": (-2, 2)}, {"domain": (-2, 2)}))
    same = op in SAME_QUANT_BINARY
    if same:
        da = db = {"domain": (-2, 2)}
    out_kw = {"dtype": "BOOL"} if op in COMPARISONS else {}
    acts = ACTS if op in FUSED_ACT_BINARY else ("NONE",) * 4

    def tpl(sa, sb, so, act, label, const_b=False, min_version=1):
        opts = {"fused_activation_function": act} if op in FUSED_ACT_BINARY else {}
        if op in ("ADD", "SUB"):
            opts["pot_scale_int16"] = False  # the general int16 kernel (TFLite: ADD v3, SUB v5)
        if act != "NONE":
            label = f"{label}_{act.lower()}"
        return OpTemplate(op, (T(sa, **da), T(sb, const=const_b, **db)), (T(so, **out_kw),), opts, label,
                          min_version=min_version, same_quant=same)

    return [
        tpl((1, 5, 5, 3), (1, 5, 5, 3), (1, 5, 5, 3), acts[0], "same_shape"),
        tpl((1, 4, 4, 3), (1, 1, 1, 3), (1, 4, 4, 3), acts[1], "bcast_channel"),
        tpl((2, 6), (2, 6), (2, 6), acts[2], "const_2d", const_b=True),
        tpl((1, 3, 1, 4), (1, 1, 5, 1), (1, 3, 5, 4), acts[3], "bcast_both"),
        tpl((3, 4), (1,), (3, 4), "NONE", "scalar_const", const_b=True),
    ]


@generator("ADD_N")
def add_n(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 4, 3)), T((1, 4, 4, 3))), (T((1, 4, 4, 3)),), label="two_inputs"),
            OpTemplate(op, (T((2, 5)), T((2, 5)), T((2, 5))), (T((2, 5)),), label="three_inputs")]


# --- convolutions --------------------------------------------------------------------------
def _conv_opts(padding: str, sh: int, sw: int, act: str = "NONE", dh: int = 1, dw: int = 1) -> dict:
    return {"padding": padding, "stride_h": sh, "stride_w": sw, "fused_activation_function": act,
            "dilation_h_factor": dh, "dilation_w_factor": dw}


def _out_size(size: int, k: int, s: int, padding: str, d: int = 1) -> int:
    eff = (k - 1) * d + 1
    return -(-size // s) if padding == "SAME" else (size - eff) // s + 1


@generator("CONV_2D")
def conv_2d(op: str) -> list[OpTemplate]:
    def tpl(label, hw, cin, cout, k, s, padding, act="NONE", d=1, bias=True, groups=1, min_version=1,
            probe=False, const_w=True):
        (h, w), (kh, kw), (sh, sw) = hw, k, s
        oh, ow = _out_size(h, kh, sh, padding, d), _out_size(w, kw, sw, padding, d)
        ins = (T((1, h, w, cin), domain=(-2, 2)),
               T((cout, kh, kw, cin // groups), role="weights", const=const_w, axis=0),
               T((cout,), role="bias", const=True, domain=(-0.5, 0.5)) if bias else None)
        return OpTemplate(op, ins, (T((1, oh, ow, cout)),), _conv_opts(padding, sh, sw, act, d, d), label,
                          min_version=min_version, probe=probe)

    return [
        tpl("k3s1_same", (8, 8), 3, 4, (3, 3), (1, 1), "SAME"),
        tpl("k3s2_valid_relu", (9, 9), 4, 6, (3, 3), (2, 2), "VALID", "RELU"),
        tpl("k1_relu6", (5, 5), 8, 8, (1, 1), (1, 1), "VALID", "RELU6"),
        tpl("k3_dilation2_relu_n1", (10, 10), 3, 4, (3, 3), (1, 1), "SAME", "RELU_N1_TO_1", d=2),
        tpl("k5x3_s2x1_same_nobias", (9, 7), 2, 3, (5, 3), (2, 1), "SAME", bias=False),
        tpl("grouped2_k3_same", (6, 6), 4, 6, (3, 3), (1, 1), "SAME", groups=2, min_version=6),
        tpl("runtime_weights", (6, 6), 3, 4, (3, 3), (1, 1), "SAME", probe=True, const_w=False),
    ]


@generator("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(op: str) -> list[OpTemplate]:
    def tpl(label, hw, cin, dm, k, s, padding, act="NONE", d=1, bias=True, min_version=1, probe=False,
            const_w=True):
        (h, w), (kh, kw), (sh, sw) = hw, k, s
        cout = cin * dm
        oh, ow = _out_size(h, kh, sh, padding, d), _out_size(w, kw, sw, padding, d)
        ins = (T((1, h, w, cin), domain=(-2, 2)),
               T((1, kh, kw, cout), role="weights", const=const_w, axis=3),
               T((cout,), role="bias", const=True, domain=(-0.5, 0.5)) if bias else None)
        opts = _conv_opts(padding, sh, sw, act, d, d) | {"depth_multiplier": dm}
        return OpTemplate(op, ins, (T((1, oh, ow, cout)),), opts, label, min_version=min_version, probe=probe)

    return [
        tpl("k3s1_same", (8, 8), 4, 1, (3, 3), (1, 1), "SAME"),
        tpl("k3s2_valid_relu6", (9, 9), 3, 1, (3, 3), (2, 2), "VALID", "RELU6"),
        tpl("dm2_k3_same_relu", (6, 6), 3, 2, (3, 3), (1, 1), "SAME", "RELU"),
        tpl("k5x3_s1x2_same_nobias", (7, 9), 2, 1, (5, 3), (1, 2), "SAME", bias=False),
        tpl("k3_dilation2_same", (9, 9), 4, 1, (3, 3), (1, 1), "SAME", d=2, min_version=2),
        tpl("runtime_weights", (6, 6), 3, 1, (3, 3), (1, 1), "SAME", probe=True, const_w=False),
    ]


@generator("TRANSPOSE_CONV")
def transpose_conv(op: str) -> list[OpTemplate]:
    def tpl(label, hw, cin, cout, k, s, padding, bias=False, act=None, min_version=1, probe=False, const_w=True):
        (h, w), (kh, kw), (sh, sw) = hw, k, s
        if padding == "SAME":
            oh, ow = h * sh, w * sw
        else:
            oh, ow = (h - 1) * sh + kh, (w - 1) * sw + kw
        ins = (_int([1, oh, ow, cout]),
               T((cout, kh, kw, cin), role="weights", const=const_w, axis=0),
               T((1, h, w, cin), domain=(-2, 2)))
        if bias:
            ins += (T((cout,), role="bias", const=True, domain=(-0.5, 0.5)),)
        opts = {"padding": padding, "stride_h": sh, "stride_w": sw}
        if act is not None:
            opts["fused_activation_function"] = act
        return OpTemplate(op, ins, (T((1, oh, ow, cout)),), opts, label, min_version=min_version, probe=probe)

    return [
        tpl("k3s2_same", (4, 4), 3, 4, (3, 3), (2, 2), "SAME"),
        tpl("k2s2_valid", (3, 5), 4, 2, (2, 2), (2, 2), "VALID"),
        tpl("k3s1_same_bias", (5, 5), 2, 3, (3, 3), (1, 1), "SAME", bias=True, min_version=3),
        tpl("k3s2_same_bias_relu", (4, 4), 3, 4, (3, 3), (2, 2), "SAME", bias=True, act="RELU", min_version=4),
        tpl("runtime_weights", (4, 4), 3, 4, (3, 3), (2, 2), "SAME", probe=True, const_w=False),
    ]


@generator("Convolution2DTransposeBias")
def convolution_2d_transpose_bias(op: str) -> list[OpTemplate]:
    def tpl(label, hw, cin, cout, k, s, padding):
        (h, w), (kh, kw), (sh, sw) = hw, k, s
        pad_h = max(0, kh - (h - 1) % sh - 1) if padding == "SAME" else 0
        pad_w = max(0, kw - (w - 1) % sw - 1) if padding == "SAME" else 0
        oh, ow = sh * (h - 1) + kh - pad_h, sw * (w - 1) + kw - pad_w
        ins = (T((1, h, w, cin), domain=(-2, 2)), T((cout, kh, kw, cin), role="weights", const=True, axis=0),
               T((cout,), role="bias", const=True, domain=(-0.5, 0.5)))
        raw = struct.pack("<iii", 1 if padding == "SAME" else 2, sw, sh)
        return OpTemplate("CUSTOM", ins, (T((1, oh, ow, cout)),), {}, label, custom_code=op, custom_options=raw,
                          dtypes=frozenset({"FLOAT32", "FLOAT16"}))

    return [tpl("k4s2_same", (4, 4), 3, 2, (4, 4), (2, 2), "SAME"),
            tpl("k3s2_valid", (3, 4), 2, 3, (3, 3), (2, 2), "VALID")]


@generator("FULLY_CONNECTED")
def fully_connected(op: str) -> list[OpTemplate]:
    def tpl(label, in_shape, units, act="NONE", bias=True, keep=False, min_version=1, probe=False, const_w=True):
        k = in_shape[-1]
        out_shape = tuple(in_shape[:-1]) + (units,) if keep else (int(np.prod(in_shape)) // k, units)
        ins = (T(tuple(in_shape), domain=(-2, 2)), T((units, k), role="weights", const=const_w),
               T((units,), role="bias", const=True, domain=(-0.5, 0.5)) if bias else None)
        opts = {"fused_activation_function": act, "keep_num_dims": keep}
        return OpTemplate(op, ins, (T(out_shape),), opts, label, min_version=min_version, probe=probe)

    return [
        tpl("batch1_bias", (1, 16), 8),
        tpl("batch3_relu", (3, 10), 5, "RELU"),
        tpl("4d_flatten_relu6", (1, 2, 2, 6), 4, "RELU6"),
        tpl("3d_keep_num_dims", (2, 3, 8), 6, keep=True, min_version=5),
        tpl("no_bias", (1, 12), 7, bias=False, min_version=6),
        tpl("runtime_weights", (2, 8), 4, probe=True, const_w=False),
    ]


# --- pooling -------------------------------------------------------------------------------
@generator("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D")
def pool_2d(op: str) -> list[OpTemplate]:
    def tpl(label, hw, c, f, s, padding, act="NONE"):
        (h, w), (fh, fw), (sh, sw) = hw, f, s
        oh, ow = _out_size(h, fh, sh, padding), _out_size(w, fw, sw, padding)
        opts = {"padding": padding, "stride_h": sh, "stride_w": sw, "filter_height": fh, "filter_width": fw,
                "fused_activation_function": act}
        return OpTemplate(op, (T((1, h, w, c), domain=(-2, 2)),), (T((1, oh, ow, c)),), opts, label,
                          same_quant=op != "L2_POOL_2D")

    return [
        tpl("f2s2_valid", (8, 8), 3, (2, 2), (2, 2), "VALID"),
        tpl("f3s1_same", (6, 6), 4, (3, 3), (1, 1), "SAME"),
        tpl("f3s2_same_relu6", (7, 7), 2, (3, 3), (2, 2), "SAME", "RELU6"),
        tpl("f2x3_s1x2_valid_relu", (6, 8), 3, (2, 3), (1, 2), "VALID", "RELU"),
    ]


# --- data movement -------------------------------------------------------------------------
@generator("CONCATENATION")
def concatenation(op: str) -> list[OpTemplate]:
    return [
        OpTemplate(op, (T((1, 4, 4, 3)), T((1, 4, 4, 5))), (T((1, 4, 4, 8)),),
                   {"axis": 3, "fused_activation_function": "NONE"}, "axis_last", same_quant=True),
        OpTemplate(op, (T((2, 3)), T((1, 3)), T((4, 3))), (T((7, 3)),),
                   {"axis": 0, "fused_activation_function": "NONE"}, "three_inputs_axis0", same_quant=True),
        OpTemplate(op, (T((1, 2, 5, 3)), T((1, 4, 5, 3))), (T((1, 6, 5, 3)),),
                   {"axis": -3, "fused_activation_function": "NONE"}, "negative_axis", same_quant=True),
    ]


@generator("PAD", "PADV2")
def pad(op: str) -> list[OpTemplate]:
    def tpl(label, shape, pads, min_version=1):
        out = tuple(d + a + b for d, (a, b) in zip(shape, pads))
        ins: tuple = (T(shape), _int(pads))
        if op == "PADV2":
            ins += (T((1,), const=True, domain=(-0.5, 0.5)),)
        return OpTemplate(op, ins, (T(out),), {}, label, min_version=min_version, same_quant=True)

    return [tpl("4d_hw", (1, 4, 5, 3), [[0, 0], [1, 2], [2, 1], [0, 0]]),
            tpl("3d", (2, 3, 4), [[0, 0], [1, 1], [0, 2]]),
            tpl("4d_all_dims", (1, 3, 3, 2), [[1, 0], [0, 1], [1, 1], [1, 0]])]


@generator("MIRROR_PAD")
def mirror_pad(op: str) -> list[OpTemplate]:
    def tpl(label, shape, pads, mode):
        out = tuple(d + a + b for d, (a, b) in zip(shape, pads))
        return OpTemplate(op, (T(shape), _int(pads)), (T(out),), {"mode": mode}, label, same_quant=True)

    return [tpl("reflect_4d", (1, 4, 5, 3), [[0, 0], [1, 2], [2, 1], [0, 0]], "REFLECT"),
            tpl("symmetric_4d", (1, 4, 4, 2), [[0, 0], [2, 1], [1, 2], [0, 0]], "SYMMETRIC"),
            tpl("reflect_3d", (2, 4, 3), [[0, 0], [1, 1], [1, 1]], "REFLECT")]


@generator("RESHAPE")
def reshape(op: str) -> list[OpTemplate]:
    return [
        OpTemplate(op, (T((1, 4, 4, 3)), _int([1, 48])), (T((1, 48)),), {}, "flatten", same_quant=True),
        OpTemplate(op, (T((2, 12)), _int([2, -1, 4])), (T((2, 3, 4)),), {}, "infer_dim", same_quant=True),
        OpTemplate(op, (T((1, 6, 4)),), (T((1, 2, 3, 4)),), {"new_shape": [1, 2, 3, 4]}, "options_only",
                   same_quant=True),
    ]


@generator("SQUEEZE")
def squeeze(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 1, 3)),), (T((4, 3)),), {"squeeze_dims": [0, 2]}, "dims", same_quant=True)]


@generator("EXPAND_DIMS")
def expand_dims(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((4, 3)), _int([1])), (T((4, 1, 3)),), {}, "axis1", same_quant=True)]


@generator("TRANSPOSE")
def transpose(op: str) -> list[OpTemplate]:
    def tpl(label, shape, perm, min_version=1):
        out = tuple(shape[p] for p in perm)
        return OpTemplate(op, (T(shape), _int(perm)), (T(out),), {}, label, min_version=min_version, same_quant=True)

    return [tpl("nhwc_to_nchw", (1, 3, 4, 5), [0, 3, 1, 2]), tpl("2d", (3, 5), [1, 0]),
            tpl("3d", (2, 3, 4), [2, 0, 1]), tpl("5d", (1, 2, 3, 2, 2), [0, 4, 2, 1, 3], min_version=4)]


@generator("SLICE")
def slice_(op: str) -> list[OpTemplate]:
    def tpl(label, shape, begin, size, min_version=1):
        out = tuple(d - b if s == -1 else s for d, b, s in zip(shape, begin, size))
        return OpTemplate(op, (T(shape), _int(begin), _int(size)), (T(out),), {}, label,
                          min_version=min_version, same_quant=True)

    return [tpl("4d", (1, 5, 6, 3), [0, 1, 2, 0], [1, 3, 3, 2]), tpl("3d_to_end", (3, 4, 5), [1, 0, 2], [2, -1, -1]),
            tpl("2d", (6, 7), [2, 1], [3, 5]), tpl("5d", (1, 2, 3, 4, 2), [0, 1, 0, 1, 0], [1, 1, 2, 2, 2], min_version=5)]


@generator("STRIDED_SLICE")
def strided_slice(op: str) -> list[OpTemplate]:
    def tpl(label, shape, begin, end, strides, out, min_version=1, **masks):
        opts = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
                "shrink_axis_mask": 0} | masks
        return OpTemplate(op, (T(shape), _int(begin), _int(end), _int(strides)), (T(out),), opts, label,
                          min_version=min_version, same_quant=True)

    return [
        tpl("4d_unit_strides", (1, 6, 6, 3), [0, 1, 2, 0], [1, 5, 6, 2], [1, 1, 1, 1], (1, 4, 4, 2)),
        tpl("4d_stride2_masks", (1, 8, 7, 4), [0, 1, 0, 0], [0, 8, 7, 0], [1, 2, 3, 1], (1, 4, 3, 4),
            begin_mask=0b1001, end_mask=0b1001),
        tpl("3d_negative_stride", (4, 5, 3), [3, 0, 0], [0, 5, 3], [-1, 2, 1], (3, 3, 3)),
        tpl("shrink_axis", (3, 4, 5), [1, 0, 0], [2, 4, 5], [1, 1, 1], (4, 5), shrink_axis_mask=1),
        tpl("5d", (1, 2, 4, 3, 2), [0, 0, 1, 0, 0], [1, 2, 4, 3, 2], [1, 1, 2, 1, 1], (1, 2, 2, 3, 2), min_version=4),
    ]


@generator("SPLIT")
def split(op: str) -> list[OpTemplate]:
    return [
        OpTemplate(op, (_int(3), T((1, 4, 4, 6))), (T((1, 4, 4, 3)), T((1, 4, 4, 3))), {"num_splits": 2},
                   "axis_last_2", same_quant=True),
        OpTemplate(op, (_int(0), T((6, 5))), (T((2, 5)), T((2, 5)), T((2, 5))), {"num_splits": 3},
                   "axis0_3", same_quant=True),
    ]


@generator("SPLIT_V")
def split_v(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 7)), _int([2, 5]), _int(2)), (T((1, 4, 2)), T((1, 4, 5))),
                       {"num_splits": 2}, "axis_last", same_quant=True)]


@generator("PACK")
def pack(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((3, 4)), T((3, 4))), (T((2, 3, 4)),), {"values_count": 2, "axis": 0}, "axis0",
                       same_quant=True),
            OpTemplate(op, (T((2, 3)), T((2, 3)), T((2, 3))), (T((2, 3, 3)),), {"values_count": 3, "axis": 2},
                       "axis_last_3", same_quant=True)]


@generator("UNPACK")
def unpack(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((2, 3, 4)),), (T((3, 4)), T((3, 4))), {"num": 2, "axis": 0}, "axis0", same_quant=True)]


@generator("DEPTH_TO_SPACE")
def depth_to_space(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 3, 4, 8)),), (T((1, 6, 8, 2)),), {"block_size": 2}, "block2", same_quant=True),
            OpTemplate(op, (T((1, 2, 2, 9)),), (T((1, 6, 6, 1)),), {"block_size": 3}, "block3", same_quant=True)]


@generator("SPACE_TO_DEPTH")
def space_to_depth(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 6, 8, 2)),), (T((1, 3, 4, 8)),), {"block_size": 2}, "block2", same_quant=True),
            OpTemplate(op, (T((1, 6, 6, 1)),), (T((1, 2, 2, 9)),), {"block_size": 3}, "block3", same_quant=True)]


@generator("SPACE_TO_BATCH_ND")
def space_to_batch_nd(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 6, 2)), _int([2, 2]), _int([[0, 0], [0, 0]])), (T((4, 2, 3, 2)),), {},
                       "block2x2", same_quant=True),
            OpTemplate(op, (T((1, 4, 5, 3)), _int([2, 3]), _int([[1, 1], [0, 1]])), (T((6, 3, 2, 3)),), {},
                       "block2x3_padded", same_quant=True),
            OpTemplate(op, (T((2, 6, 3)), _int([3]), _int([[0, 0]])), (T((6, 2, 3)),), {}, "3d_block3",
                       min_version=3, same_quant=True)]


@generator("BATCH_TO_SPACE_ND")
def batch_to_space_nd(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((4, 2, 3, 2)), _int([2, 2]), _int([[0, 0], [0, 0]])), (T((1, 4, 6, 2)),), {},
                       "block2x2", same_quant=True),
            OpTemplate(op, (T((6, 3, 2, 3)), _int([2, 3]), _int([[1, 1], [0, 1]])), (T((1, 4, 5, 3)),), {},
                       "block2x3_cropped", same_quant=True),
            OpTemplate(op, (T((6, 2, 3)), _int([3]), _int([[0, 0]])), (T((2, 6, 3)),), {}, "3d_block3",
                       min_version=3, same_quant=True)]


@generator("LOGICAL_AND", "LOGICAL_OR")
def logical_binary(op: str) -> list[OpTemplate]:
    b: dict[str, Any] = {"role": "bool", "domain": (0, 1)}
    return [OpTemplate(op, (T((2, 3, 4), **b), T((2, 3, 4), **b)), (T((2, 3, 4), dtype="BOOL"),), {}, "same_shape"),
            OpTemplate(op, (T((2, 3, 4), **b), T((1, 1, 4), **b)), (T((2, 3, 4), dtype="BOOL"),), {}, "broadcast")]


@generator("LOGICAL_NOT")
def logical_not(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((3, 5), role="bool", domain=(0, 1)),), (T((3, 5), dtype="BOOL"),), {}, "2d")]


@generator("SELECT", "SELECT_V2")
def select(op: str) -> list[OpTemplate]:
    cond: dict[str, Any] = {"role": "bool", "domain": (0, 1)}
    out = [OpTemplate(op, (T((2, 3, 4), **cond), T((2, 3, 4)), T((2, 3, 4))), (T((2, 3, 4)),), {}, "same_shape",
                      same_quant=True)]
    if op == "SELECT_V2":
        out.append(OpTemplate(op, (T((1, 3, 1), **cond), T((2, 3, 4)), T((1, 1, 4))), (T((2, 3, 4)),), {},
                              "broadcast", same_quant=True))
    return out


@generator("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def resize(op: str) -> list[OpTemplate]:
    corner_version = 1 if op == "RESIZE_BILINEAR" else 3

    def tpl(label, hw, size, align=False, half=False, min_version=1):
        opts = {"align_corners": align, "half_pixel_centers": half}
        return OpTemplate(op, (T((1, hw[0], hw[1], 3)), _int(size)), (T((1, size[0], size[1], 3)),), opts, label,
                          min_version=min_version, same_quant=True)

    return [
        tpl("upscale2x", (4, 4), [8, 8]),
        tpl("downscale", (9, 7), [5, 4]),
        tpl("align_corners", (4, 5), [7, 9], align=True, min_version=corner_version),
        tpl("half_pixel_centers", (5, 4), [8, 6], half=True, min_version=3),
    ]


# --- reductions and friends ------------------------------------------------------------------
@generator("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD")
def reduce(op: str) -> list[OpTemplate]:
    same = op in ("REDUCE_MAX", "REDUCE_MIN")
    dom = (0.5, 1.5) if op == "REDUCE_PROD" else (-2, 2)
    return [
        OpTemplate(op, (T((1, 4, 5, 3), domain=dom), _int([1, 2])), (T((1, 1, 1, 3)),), {"keep_dims": True},
                   "hw_keep_dims", same_quant=same),
        OpTemplate(op, (T((1, 4, 5, 3), domain=dom), _int([1, 2])), (T((1, 3)),), {"keep_dims": False},
                   "hw", same_quant=same),
        OpTemplate(op, (T((3, 4, 2), domain=dom), _int([-1])), (T((3, 4)),), {"keep_dims": False},
                   "last_axis", same_quant=same),
    ]


@generator("ARG_MAX", "ARG_MIN")
def arg_max_min(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 5, 6)), _int([3])), (T((1, 4, 5), dtype="INT32"),), {"output_type": "INT32"},
                       "last_axis"),
            OpTemplate(op, (T((5, 7)), _int([0])), (T((7,), dtype="INT32"),), {"output_type": "INT32"}, "axis0")]


@generator("PRELU")
def prelu(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 4, 3), domain=(-2, 2)), T((1, 1, 3), role="weights", const=True, domain=(0.05, 0.5))),
                       (T((1, 4, 4, 3)),), {}, "alpha_per_channel"),
            OpTemplate(op, (T((1, 3, 3, 2), domain=(-2, 2)), T((1, 3, 3, 2), role="weights", const=True, domain=(0.05, 0.5))),
                       (T((1, 3, 3, 2)),), {}, "alpha_full")]


@generator("QUANTIZE")
def quantize(op: str) -> list[OpTemplate]:
    """Float32 cases quantize to int8 / uint8; quantized cases requantize to another scale."""
    q8 = {"FLOAT32": (0.02, 3), "FLOAT16": (0.02, 3), "INT8": (0.03, -5), "UINT8": (0.03, 120),
          "INT16": (0.0002, 0)}
    qu8 = {"FLOAT32": (0.015, 128), "FLOAT16": (0.015, 128), "INT8": (0.025, 130), "UINT8": (0.025, 2)}
    return [OpTemplate(op, (T((1, 4, 4, 3), domain=(-2, 2)),), (T((1, 4, 4, 3), dtype="QUANT_SAME", quant=q8),),
                       {}, "same_type"),
            OpTemplate(op, (T((2, 7), domain=(-1.5, 1.5)),), (T((2, 7), dtype="INT8_OR_UINT8", quant=qu8),),
                       {}, "to_other_8bit", dtypes=frozenset({"FLOAT32", "INT8", "UINT8", "FLOAT16"}))]


@generator("DEQUANTIZE")
def dequantize(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 4, 3), domain=(-2, 2)),), (T((1, 4, 4, 3), dtype="FLOAT32"),), {}, "4d"),
            OpTemplate(op, (T((3, 5), domain=(-0.5, 1.5)),), (T((3, 5), dtype="FLOAT32"),), {}, "2d_asymmetric")]


@generator("CAST")
def cast(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((2, 5), domain=(-4, 4)),), (T((2, 5), dtype="INT32"),), {}, "to_int32"),
            OpTemplate(op, (T((2, 5), domain=(-4, 4)),), (T((2, 5), dtype="FLOAT32"),), {}, "to_float32")]


@generator("TILE")
def tile(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 2, 3)), _int([2, 1, 2])), (T((2, 2, 6)),), {}, "3d", same_quant=True)]


@generator("GATHER")
def gather(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((5, 4)), _int([4, 0, 2])), (T((3, 4)),), {"axis": 0, "batch_dims": 0}, "axis0",
                       same_quant=True),
            OpTemplate(op, (T((2, 6, 3)), _int([5, 1])), (T((2, 2, 3)),), {"axis": 1, "batch_dims": 0}, "axis1",
                       same_quant=True)]


@generator("BATCH_MATMUL")
def batch_matmul(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((2, 3, 4)), T((2, 4, 5))), (T((2, 3, 5)),), {"adj_x": False, "adj_y": False}, "3d"),
            OpTemplate(op, (T((1, 3, 4)), T((1, 5, 4), const=True)), (T((1, 3, 5)),), {"adj_x": False, "adj_y": True},
                       "adj_y_const")]


@generator("LSTM")
def lstm(op: str) -> list[OpTemplate]:
    """The basic kernel (kernel_type BASIC: input, previous activation, weights, biases, previous
    state -> activation, state, concat and gate temporaries), float32 only; the full kernel's
    20/24-input forms have no variant yet. A depth that is not a multiple of 4 is a probe
    (TFLite's GPU delegate refuses it)."""
    def tpl(label: str, nb: int, n_in: int, depth: int, probe: bool = False) -> OpTemplate:
        weights = T((4 * depth, n_in + depth), role="weights", const=True, domain=(-0.5, 0.5))
        ins = (T((nb, n_in)), T((nb, depth)), weights, T((4 * depth,), role="bias", const=True), T((nb, depth)))
        outs = (T((nb, depth)), T((nb, depth)), T((nb, n_in + depth)), T((nb, 4 * depth)))
        opts = {"kernel_type": "BASIC", "fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0}
        return OpTemplate(op, ins, outs, opts, label, probe=probe, dtypes=frozenset({"FLOAT32"}))
    return [tpl("basic_b1_in5_d8", 1, 5, 8), tpl("basic_b2_in3_d4", 2, 3, 4), tpl("basic_depth6", 1, 3, 6, probe=True)]
