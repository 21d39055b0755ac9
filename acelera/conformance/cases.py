"""Conformance case generation from a delegate's declared op table.

The table is the contract. For every row (op, versions min..max, dtypes) and every declared
version and dtype, the suite builds single-op models from the op's *generator*: a list of
variants (`OpTemplate`) that vary the op's attributes (fused activations, SAME/VALID,
strides, dilation, depth multipliers, broadcast shapes, per-channel weights, align_corners /
half_pixel_centers, ...). A template is dtype-neutral; `build_graph` materializes it for one
case dtype:

- FLOAT32 / FLOAT16: every float tensor in that type;
- INT8 / UINT8 / INT16: quantized the way TFLite's converter does it. Activations get
  per-tensor scales from their value range (int16 symmetric, zero point 0); weights are int8
  symmetric (per-channel along the output-channel axis for convolutions) for INT8 and INT16
  cases and asymmetric uint8 for UINT8 cases; biases are int32 (int64 with int16
  activations) at scale input_scale * weight_scale. Output scales are calibrated: the float32
  version of the same model runs on the CPU reference with the same data and the observed
  output range sets the scale, except where the op fixes it (LOGISTIC 1/256, TANH 1/128,
  SOFTMAX 1/256, ...) or requires the input's (pooling, concatenation, data movement);
- INT32: integer tensors without quantization.

Which variants a (op, version, dtype) case gets: those whose `min_version` is at most the
version (attributes TFLite only allows from some version on: dilated depthwise v2, grouped
conv v6, keep_num_dims v5, half_pixel_centers v3, rank-5 TRANSPOSE v4, ...), at most
`variants_per_case` of them, rotated by the version index and the seed so that all variants
get exercised across a row's versions. Variants marked `probe` (non-constant weights and
other inputs that commonly violate a delegate's constraints) are added once per (op, dtype)
when the row declares constraints: a probe the table accepts must pass like any op case, one
the table refuses becomes a negative case.

Every case id is stable: `op/CONV_2D/v3/INT8/k3s2_valid_relu`, `neg/ADD/v3/FLOAT32/version`,
`neg/ADD/v1/INT16/dtype`, `model/mobilenet_v2_96_int8`, `behaviour/resize`.

Extending: `@generator("MY_OP")` registers a function `(op) -> list[OpTemplate]`; a plugin
with custom ops can register generators for them before certifying.
"""
from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from acelera.core.builder import ModelBuilder
from acelera.core.errors import AceleraError

__all__ = [
    "T", "OpTemplate", "Built", "Case", "NotCovered", "generator", "GENERATORS", "templates_for",
    "build_graph", "generate_cases", "select_shard", "parse_shard", "classify_model", "case_seed",
    "default_models_dir", "CASE_DTYPES", "QUANT_DTYPES",
]

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
    a = np.asarray(values, NP[dtype])
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
    b = {"role": "bool", "domain": (0, 1)}
    return [OpTemplate(op, (T((2, 3, 4), **b), T((2, 3, 4), **b)), (T((2, 3, 4), dtype="BOOL"),), {}, "same_shape"),
            OpTemplate(op, (T((2, 3, 4), **b), T((1, 1, 4), **b)), (T((2, 3, 4), dtype="BOOL"),), {}, "broadcast")]


@generator("LOGICAL_NOT")
def logical_not(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((3, 5), role="bool", domain=(0, 1)),), (T((3, 5), dtype="BOOL"),), {}, "2d")]


@generator("SELECT", "SELECT_V2")
def select(op: str) -> list[OpTemplate]:
    cond = {"role": "bool", "domain": (0, 1)}
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


# --- materialization -----------------------------------------------------------------------
@dataclass
class Built:
    """A materialized case model with the inputs to feed it."""

    model: bytes
    inputs: list[np.ndarray]
    #: per graph output: quantization step a float output derives from (0 when none)
    quantum: list[float]


@dataclass
class _Tensor:
    spec: T
    shape: tuple[int, ...]
    node: int
    is_input: bool = False
    is_const: bool = False
    value: np.ndarray | None = None  # float (or int parameter) values
    type: str = "FLOAT32"
    quant: tuple | None = None
    index: int = -1


def _random(rng: np.random.Generator, spec: T, shape: tuple[int, ...]) -> np.ndarray:
    lo, hi = spec.domain
    v = rng.uniform(lo, hi, size=shape)
    if spec.nonzero:
        v = v * rng.choice(np.array([-1.0, 1.0]), size=shape)
    return v.astype(np.float64)


def _act_quant(lo: float, hi: float, dtype: str) -> tuple[float, int]:
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < 1e-6:
        hi = lo + 1e-3
    if dtype == "INT16":
        return float(np.float32(max(-lo, hi) / 32767.0)), 0
    qmin, qmax = QRANGE[dtype]
    scale = float(np.float32((hi - lo) / (qmax - qmin)))
    zp = int(np.clip(round(qmin - lo / scale), qmin, qmax))
    return scale, zp


def _quantize(v: np.ndarray, quant: tuple, dtype: str) -> np.ndarray:
    info = np.iinfo(NP[dtype])
    if len(quant) == 3:
        scales, zps, axis = quant
        shape = [1] * v.ndim
        shape[axis] = -1
        s = np.asarray(scales, np.float64).reshape(shape)
        z = np.asarray(zps, np.float64).reshape(shape)
    else:
        s, z = quant
    q = np.round(v / s) + z
    return np.clip(q, info.min, info.max).astype(NP[dtype])


def _weights_quant(w: np.ndarray, case_dtype: str, axis: int | None) -> tuple[str, tuple]:
    if case_dtype == "UINT8":
        s, z = _act_quant(float(w.min()), float(w.max()), "UINT8")
        return "UINT8", (s, z)
    if axis is not None:
        red = tuple(d for d in range(w.ndim) if d != axis)
        amax = np.max(np.abs(w), axis=red)
        scales = (np.maximum(amax, 1e-6) / 127.0).astype(np.float32)
        return "INT8", (scales, np.zeros(len(scales), np.int64), axis)
    s = float(np.float32(max(float(np.abs(w).max()), 1e-6) / 127.0))
    return "INT8", (s, 0)


def _scale_of(q: tuple | None) -> float:
    if q is None:
        return 0.0
    s = q[0]
    return float(np.max(s)) if np.ndim(s) else float(s)


def _resolve_type(spec: T, case_dtype: str) -> str:
    if spec.dtype is None:
        return case_dtype
    if spec.dtype == "QUANT_SAME":
        return case_dtype if case_dtype in QUANT_DTYPES else "INT8"
    if spec.dtype == "INT8_OR_UINT8":
        return "UINT8" if case_dtype in ("INT8", "FLOAT32", "FLOAT16", "INT16") else "INT8"
    return spec.dtype


def build_graph(nodes: Sequence[OpTemplate], dtype: str, version: int | Sequence[int], rng: np.random.Generator, *,
                links: Mapping[tuple[int, int], tuple[int, int]] | None = None,
                dynamic_batch: bool = False, calibrate: bool = True) -> Built:
    """Materialize `nodes` (a single op, or a chain) for a case dtype and op version(s).

    `links[(node, input position)] = (producer node, output position)` wires tensors between
    nodes; by default node k+1's input 0 is node k's output 0 (a chain). Raises NotCovered when
    the model cannot be built or calibrated.
    """
    if dtype not in NP:
        raise NotCovered(f"the suite does not build {dtype} cases")
    if links is None:
        links = {(k, 0): (k - 1, 0) for k in range(1, len(nodes))}
    versions = [version] * len(nodes) if isinstance(version, int) else list(version)
    tensors: list[_Tensor] = []
    node_in: list[list[int]] = []
    node_out: list[list[int]] = []
    for k, tpl in enumerate(nodes):
        ins = []
        for i, spec in enumerate(tpl.inputs):
            if spec is None:
                ins.append(-1)
            elif (k, i) in links:
                pk, po = links[(k, i)]
                ins.append(node_out[pk][po])
            else:
                tensors.append(_Tensor(spec, tuple(spec.shape), k, is_input=not (spec.const or spec.variable),
                                       is_const=spec.const))
                ins.append(len(tensors) - 1)
        node_in.append(ins)
        outs = []
        for spec in tpl.outputs:
            tensors.append(_Tensor(spec, tuple(spec.shape), k))
            outs.append(len(tensors) - 1)
        node_out.append(outs)
    consumed = {t for ins in node_in for t in ins}
    graph_outputs = [t for outs in node_out for t in outs if t not in consumed] or node_out[-1]

    # values
    for t in tensors:
        if not (t.is_input or t.is_const):
            continue
        if t.spec.value is not None:
            t.value = np.asarray(t.spec.value)
        elif t.spec.role in ("int", "bool"):
            lo, hi = t.spec.domain
            t.value = rng.integers(int(lo), int(hi) + 1, size=t.shape).astype(np.int64)
        else:
            t.value = _random(rng, t.spec, t.shape)

    quantized = dtype in QUANT_DTYPES
    float_values: dict[int, np.ndarray] = {}
    if quantized and calibrate:
        needs = any(not (tensors[o].spec.quant or tensors[o].spec.dtype or nodes[tensors[o].node].same_quant)
                    for outs in node_out for o in outs)
        if needs:
            float_values = _calibrate(nodes, tensors, node_in, node_out, graph_outputs)

    # types and quantization, node by node
    for k, tpl in enumerate(nodes):
        data_q = None
        first_data = None
        for i, t_idx in enumerate(node_in[k]):
            if t_idx < 0:
                continue
            t = tensors[t_idx]
            role = t.spec.role
            if t.node != k or (not t.is_input and not t.is_const):  # linked: already typed
                if role == "data" and first_data is None:
                    first_data, data_q = t, t.quant
                continue
            if role in ("int", "bool"):
                t.type = t.spec.dtype or ("BOOL" if role == "bool" else "INT32")
                continue
            if role == "weights":
                if quantized:
                    t.type, t.quant = _weights_quant(t.value, dtype, t.spec.axis if dtype != "UINT8" else None)
                else:
                    t.type = _resolve_type(t.spec, dtype)
                continue
            if role == "bias":
                continue  # after the weights
            # data
            t.type = _resolve_type(t.spec, dtype)
            if t.type in QUANT_DTYPES:
                if tpl.same_quant and data_q is not None:
                    t.quant = data_q
                else:
                    if tpl.same_quant:
                        specs = [tensors[j].spec for j in node_in[k] if j >= 0 and tensors[j].spec.role == "data"]
                        lo = min(s.domain[0] if not s.nonzero else -s.domain[1] for s in specs)
                        hi = max(s.domain[1] for s in specs)
                        if t.is_const and t.value is not None:
                            lo, hi = min(lo, float(t.value.min())), max(hi, float(t.value.max()))
                    elif t.is_const:
                        lo, hi = float(t.value.min()), float(t.value.max())
                    else:
                        lo, hi = (-t.spec.domain[1], t.spec.domain[1]) if t.spec.nonzero else t.spec.domain
                    t.quant = _act_quant(lo, hi, t.type)
            if first_data is None:
                first_data, data_q = t, t.quant
        # biases: scale = input scale * weight scale
        w_t = next((tensors[j] for j in node_in[k] if j >= 0 and tensors[j].spec.role == "weights"), None)
        for t_idx in node_in[k]:
            if t_idx < 0 or tensors[t_idx].spec.role != "bias":
                continue
            t = tensors[t_idx]
            if quantized and first_data is not None and first_data.quant is not None and w_t is not None and w_t.quant:
                in_s = first_data.quant[0]
                if len(w_t.quant) == 3:
                    scales = (np.float64(in_s) * np.asarray(w_t.quant[0], np.float64)).astype(np.float32)
                    t.quant = (scales, np.zeros(len(scales), np.int64), 0)
                else:
                    t.quant = (float(np.float32(in_s * w_t.quant[0])), 0)
                t.type = "INT64" if dtype == "INT16" else "INT32"
            elif dtype == "INT32":
                t.type = "INT32"
            else:
                t.type = "FLOAT16" if dtype == "FLOAT16" else "FLOAT32"
        # outputs
        for t_idx in node_out[k]:
            t = tensors[t_idx]
            t.type = _resolve_type(t.spec, dtype)
            if t.type not in QUANT_DTYPES or t.spec.role in ("int", "bool"):
                continue
            if t.spec.quant is not None:
                src = dtype if dtype in t.spec.quant else t.type
                if src not in t.spec.quant:
                    raise NotCovered(f"{tpl.op}: no output quantization defined for {t.type}")
                s, z = t.spec.quant[src]
                if t.type == "INT16" and dtype != "INT16":
                    z = 0
                t.quant = (float(np.float32(s)), int(z))
            elif tpl.same_quant and data_q is not None:
                t.quant = data_q
            elif t_idx in float_values:
                v = float_values[t_idx]
                t.quant = _act_quant(float(np.min(v)) if v.size else 0.0, float(np.max(v)) if v.size else 1.0, t.type)
            else:
                t.quant = _act_quant(-1.0, 1.0, t.type)

    # concrete arrays
    b = ModelBuilder(description="acelera conformance case")
    inputs: list[np.ndarray] = []
    for i, t in enumerate(tensors):
        if t.is_const:
            data = _materialize(t, dtype)
            t.index = b.add_constant(f"c{i}", data, t.quant)
        elif t.is_input:
            sig = (-1,) + tuple(t.shape[1:]) if dynamic_batch and t.shape else None
            t.index = b.add_input(f"in{i}", t.shape, NP[t.type], t.quant, shape_signature=sig)
            inputs.append(_materialize(t, dtype))
        else:
            t.index = b.add_tensor(f"t{i}", t.shape, NP[t.type], t.quant, is_variable=t.spec.variable)
    for k, tpl in enumerate(nodes):
        ins = [tensors[j].index if j >= 0 else -1 for j in node_in[k]]
        outs = [tensors[j].index for j in node_out[k]]
        b.add_operator(tpl.op, ins, outs, version=versions[k], custom_code=tpl.custom_code,
                       custom_options=tpl.custom_options, **dict(tpl.options))
    b.mark_outputs(*[tensors[t].index for t in graph_outputs])
    quantum = []
    for t_idx in graph_outputs:
        t = tensors[t_idx]
        if t.type in ("FLOAT32", "FLOAT16") and quantized:
            k = t.node
            quantum.append(max([_scale_of(tensors[j].quant) for j in node_in[k]
                                if j >= 0 and tensors[j].spec.role == "data"] or [0.0]))
        else:
            quantum.append(0.0)
    try:
        model = b.build()
    except Exception as e:  # an option the schema does not have, a bad value
        raise NotCovered(f"cannot build the model: {type(e).__name__}: {e}") from None
    return Built(model, inputs, quantum)


def _materialize(t: _Tensor, case_dtype: str) -> np.ndarray:
    v = t.value
    if t.spec.role in ("int", "bool"):
        return np.asarray(v, NP[t.type])
    if t.type in QUANT_DTYPES:
        return _quantize(np.asarray(v, np.float64), t.quant, t.type)
    if t.type in ("INT32", "INT64"):
        if t.quant is not None and t.spec.role == "bias":
            s = np.asarray(t.quant[0], np.float64)
            q = np.round(np.asarray(v, np.float64) / s)
            return np.clip(q, -(2 ** 31), 2 ** 31 - 1).astype(NP[t.type])
        return np.round(np.asarray(v, np.float64) * 10).astype(NP[t.type])
    if t.type == "BOOL":
        return np.asarray(v) > 0
    return np.asarray(v, NP[t.type])


def _calibrate(nodes, tensors: list[_Tensor], node_in, node_out, graph_outputs) -> dict[int, np.ndarray]:
    """Run the float32 version of the graph on the reference; every tensor's float values."""
    from acelera.core.interpreter import Interpreter, OpResolverType

    b = ModelBuilder(description="acelera conformance calibration")
    idx: dict[int, int] = {}
    feeds = []

    def ftype(t: _Tensor) -> Any:
        if t.spec.role in ("int", "bool"):
            return NP[t.spec.dtype or ("BOOL" if t.spec.role == "bool" else "INT32")]
        if t.spec.dtype in ("INT32", "BOOL", "INT64"):
            return NP[t.spec.dtype]
        return np.float32

    for i, t in enumerate(tensors):
        dt = ftype(t)
        if t.is_const:
            idx[i] = b.add_constant(f"c{i}", np.asarray(t.value, dt))
        elif t.is_input:
            idx[i] = b.add_input(f"in{i}", t.shape, dt)
            feeds.append((idx[i], np.asarray(t.value, dt)))
        else:
            idx[i] = b.add_tensor(f"t{i}", t.shape, dt, is_variable=t.spec.variable)
    for k, tpl in enumerate(nodes):
        b.add_operator(tpl.op, [idx[j] if j >= 0 else -1 for j in node_in[k]], [idx[j] for j in node_out[k]],
                       version=1, custom_code=tpl.custom_code, custom_options=tpl.custom_options, **dict(tpl.options))
    b.mark_outputs(*[idx[t] for t in graph_outputs])
    try:
        it = Interpreter(model_content=b.build(), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        for i, v in feeds:
            it.set_tensor(i, v)
        with np.errstate(all="ignore"):
            it.invoke()
        return {i: it.get_tensor(idx[i]) for i, t in enumerate(tensors) if not (t.is_const or t.is_input)}
    except Exception as e:
        if reference_gap(e):
            raise NotCovered(f"cannot calibrate the quantized model: the float32 version does not run on the "
                             f"reference ({e})") from None
        raise ReferenceFailure(f"the CPU reference failed on the float32 calibration model: {e}") from None


# --- cases ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One conformance case: an id, what it checks, and how to build it."""

    id: str
    kind: str  # "op", "negative", "model", "behaviour"
    op: str | None = None
    version: int | None = None
    dtype: str | None = None
    variant: str = ""
    template: OpTemplate | None = None
    #: model cases: a path, or a zero-argument callable returning model bytes
    model: Any = None
    model_type: str | None = None
    #: op and negative cases: "delegated" or "refused", as the declared table says
    expect: str = ""
    #: set when the case cannot run at all (no generator, model type not declared, ...)
    status: str | None = None
    reason: str = ""

    def describe(self) -> str:
        parts = [self.kind]
        if self.op:
            parts.append(f"{self.op} v{self.version} {self.dtype}")
        if self.variant:
            parts.append(self.variant)
        return " ".join(parts)


def case_seed(seed: int, case_id: str) -> int:
    """The per-case random seed: stable across processes, shards and Python versions."""
    h = hashlib.sha256(f"{seed}:{case_id}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def _applies(tpl: OpTemplate, dtype: str) -> bool:
    return tpl.dtypes is None or dtype in tpl.dtypes


def _pick(variants: list[OpTemplate], k: int, offset: int) -> list[OpTemplate]:
    if len(variants) <= k:
        return list(variants)
    return [variants[(offset + j) % len(variants)] for j in range(k)]


def _declared(row: Any, tpl: OpTemplate, version: int, dtype: str) -> tuple[bool | None, str]:
    """Whether the row (with its constraints) accepts the variant: (ok, reason); None if unbuildable."""
    from acelera.core.executor import Executor
    from acelera.core.model import load_model

    try:
        built = build_graph([tpl], dtype, version, np.random.default_rng(0), calibrate=False)
        ctx = Executor(load_model(built.model).main).node_context(0)
    except AceleraError as e:
        return None, str(e)
    s = row.check(ctx)
    return s.ok, s.reason


def op_cases(table: Iterable[Any], *, seed: int = 0, variants_per_case: int = DEFAULT_VARIANTS_PER_CASE) -> list[Case]:
    """Op cases and negative cases for every row of an op table.

    Rows with constraints: each variant is built once (without calibration) and checked
    against the row, so that a combination gets variants its constraints accept; the variants
    they refuse become negative "constraint" cases (one per op, dtype and variant).
    """
    out: list[Case] = []
    for row in table:
        op = row.op
        all_tpls = templates_for(op)
        dtypes = sorted(row.dtypes)
        if all_tpls is None:
            for v in range(row.min_version, row.max_version + 1):
                for dt in dtypes:
                    out.append(Case(f"op/{op}/v{v}/{dt}/-", "op", op, v, dt, "-", status="not-covered",
                                    reason=f"no case generator for {op}"))
            continue
        regular = [t for t in all_tpls if not t.probe]
        probes = [t for t in all_tpls if t.probe]
        constrained = bool(row.constraints)
        refused_seen: set[tuple[str, str]] = set()

        def refused(tpl: OpTemplate, v: int, dt: str, reason: str) -> None:
            if (tpl.label, dt) not in refused_seen:
                refused_seen.add((tpl.label, dt))
                out.append(Case(f"neg/{op}/v{v}/{dt}/constraint:{tpl.label}", "negative", op, v, dt,
                                f"constraint:{tpl.label}", tpl, expect="refused", reason=reason))

        for vi, v in enumerate(range(row.min_version, row.max_version + 1)):
            for di, dt in enumerate(dtypes):
                pool = [t for t in regular if t.min_version <= v and _applies(t, dt)]
                if not pool:
                    out.append(Case(f"op/{op}/v{v}/{dt}/-", "op", op, v, dt, "-", status="not-covered",
                                    reason=f"no {op} variant for version {v} and {dt}"))
                    continue
                rotated = _pick(pool, len(pool), seed + (vi + di) * variants_per_case)
                if not constrained:
                    chosen = rotated[:variants_per_case]
                else:
                    chosen, why = [], []
                    for tpl in rotated:
                        ok, reason = _declared(row, tpl, v, dt)
                        if ok:
                            chosen.append(tpl)
                            if len(chosen) == variants_per_case:
                                break
                        elif ok is False:
                            why.append(reason)
                            refused(tpl, v, dt, reason)
                    if not chosen:
                        out.append(Case(f"op/{op}/v{v}/{dt}/-", "op", op, v, dt, "-", status="not-covered",
                                        reason=f"every {op} variant the suite builds for v{v} {dt} violates a "
                                               f"declared constraint ({'; '.join(dict.fromkeys(why)) or 'none'})"))
                for tpl in chosen:
                    out.append(Case(f"op/{op}/v{v}/{dt}/{tpl.label}", "op", op, v, dt, tpl.label, tpl,
                                    expect="delegated"))
        if constrained:
            for dt in dtypes:
                for tpl in probes:
                    if not _applies(tpl, dt):
                        continue
                    v = max(row.min_version, min(row.max_version, tpl.min_version))
                    ok, reason = _declared(row, tpl, v, dt)
                    if ok:
                        out.append(Case(f"op/{op}/v{v}/{dt}/{tpl.label}", "op", op, v, dt, tpl.label, tpl,
                                        expect="delegated"))
                    elif ok is False:
                        refused(tpl, v, dt, reason)
        # negative: one version above the declared maximum
        first = next(((dt, t) for dt in dtypes for t in regular if _applies(t, dt)), None)
        if first is not None:
            dt, tpl = first
            v = row.max_version + 1
            out.append(Case(f"neg/{op}/v{v}/{dt}/version", "negative", op, v, dt, f"version:{tpl.label}", tpl,
                            expect="refused"))
        # negative: a dtype the row does not declare
        for dt in NEGATIVE_DTYPES:
            if dt in row.dtypes:
                continue
            tpl = next((t for t in regular if _applies(t, dt) and t.min_version <= row.max_version), None)
            if tpl is not None:
                v = max(row.min_version, tpl.min_version)
                out.append(Case(f"neg/{op}/v{v}/{dt}/dtype", "negative", op, v, dt, f"dtype:{tpl.label}", tpl,
                                expect="refused"))
                break
    return _unique(out)


def _unique(cases: list[Case]) -> list[Case]:
    seen: dict[str, int] = {}
    out = []
    for c in cases:
        n = seen.get(c.id, 0)
        seen[c.id] = n + 1
        out.append(c if n == 0 else replace(c, id=f"{c.id}#{n + 1}"))
    return out


# --- model cases ---------------------------------------------------------------------------
def default_models_dir() -> Path | None:
    """`ACELERA_MODELS`, else `../shared/models` next to the repository, else None."""
    env = os.environ.get("ACELERA_MODELS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[2]
    for cand in (here.parent / "shared" / "models", Path.cwd().parent / "shared" / "models"):
        if cand.is_dir():
            return cand
    return None


def classify_model(model: Any) -> str:
    """float32, float16 (fp16 weights through DEQUANTIZE), dynamic-range (int8 weights with float
    activations) or full-integer (quantized activations), from the main subgraph's tensors."""
    sg = model.main
    quant_types = ("INT8", "UINT8", "INT16", "INT4")
    # rows looked up in a quantized constant table are weights too (a dynamic-range Embedding)
    looked_up = {op.outputs[0] for op in sg.operators
                 if op.op in ("GATHER", "EMBEDDING_LOOKUP") and op.outputs
                 and sg.tensors[op.inputs[0 if op.op == "GATHER" else 1]].is_constant}
    for t in sg.tensors:
        if not t.is_constant and t.index not in looked_up and t.type_name in quant_types and t.quantization.is_set:
            return "full-integer"
    has_int_weights = any(t.is_constant and t.type_name in ("INT8", "UINT8", "INT4") and t.quantization.is_set
                          for t in sg.tensors)
    if has_int_weights:
        return "dynamic-range"
    fp16 = {t.index for t in sg.tensors if t.is_constant and t.type_name == "FLOAT16"}
    if any(op.op == "DEQUANTIZE" and op.inputs and op.inputs[0] in fp16 for op in sg.operators):
        return "float16"
    return "float32"


def accepts(model_types: Iterable[str], kind: str) -> bool:
    types = set(model_types)
    return kind in types or (kind == "full-integer" and "qat" in types)


def model_cases(model_types: Iterable[str], models_dir: str | Path | None) -> list[Case]:
    from acelera.core.model import load_model

    out: list[Case] = []
    entries: list[tuple[str, Any]] = []
    if models_dir is not None and Path(models_dir).is_dir():
        for p in sorted(Path(models_dir).glob("*.tflite")):
            entries.append((p.stem, p))
    entries.append(("tiny_cnn_float", _TinyCnn(False)))
    entries.append(("tiny_cnn_int8", _TinyCnn(True)))
    for name, src in entries:
        cid = f"model/{name}"
        try:
            m = load_model(src if isinstance(src, Path) else src())
        except AceleraError as e:
            out.append(Case(cid, "model", variant=name, model=src, status="skip", reason=f"cannot load: {e}"))
            continue
        kind = classify_model(m)
        if not accepts(model_types, kind):
            out.append(Case(cid, "model", variant=name, model=src, model_type=kind, status="skip",
                            reason=f"{kind} model; the delegate declares {', '.join(sorted(model_types))}"))
        else:
            out.append(Case(cid, "model", variant=name, model=src, model_type=kind))
    return out


@dataclass(frozen=True)
class _TinyCnn:
    quantized: bool

    def __call__(self) -> bytes:
        from acelera import samples

        return samples.tiny_cnn(quantized=self.quantized)


BEHAVIOURS = ("repeat", "resize", "prepare-failure", "multi-delegate")


def behaviour_cases() -> list[Case]:
    return [Case(f"behaviour/{b}", "behaviour", variant=b) for b in BEHAVIOURS]


def generate_cases(spec: Any, *, seed: int = 0, models_dir: str | Path | None = None,
                   variants_per_case: int = DEFAULT_VARIANTS_PER_CASE,
                   kinds: Iterable[str] = ("op", "negative", "model", "behaviour")) -> list[Case]:
    """The full, deterministic case list of a DelegateSpec (before sharding)."""
    kinds = set(kinds)
    out: list[Case] = []
    if kinds & {"op", "negative"}:
        out += [c for c in op_cases(spec.op_table, seed=seed, variants_per_case=variants_per_case) if c.kind in kinds]
    if "model" in kinds:
        out += model_cases(spec.model_types, models_dir)
    if "behaviour" in kinds:
        out += behaviour_cases()
    return out


def parse_shard(text: str | tuple[int, int]) -> tuple[int, int]:
    """'i/n' (0 <= i < n) -> (i, n)."""
    if isinstance(text, tuple):
        i, n = text
    else:
        try:
            a, b = str(text).split("/")
            i, n = int(a), int(b)
        except ValueError:
            raise ValueError(f"shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"shard {i}/{n}: need 0 <= i < n")
    return i, n


def select_shard(cases: Sequence[Case], shard: tuple[int, int] = (0, 1)) -> list[Case]:
    """Round-robin split of the full list: case k goes to shard k mod n."""
    i, n = parse_shard(shard)
    return [c for k, c in enumerate(cases) if k % n == i]


from acelera.conformance import generators_more as _generators_more  # noqa: F401  (generators of the newer ops)
