"""Float kernels computing in float64 while widening (acelera/conformance/float64.py).

Each case is a single-op float32 model evaluated by Float64Reference: every node must run its
float64 path (`narrow` empty), its outputs are float64, equal a float64 numpy computation of
the op on the float64 inputs (and the model's constants, which are float32 values) and keep
more than float32 precision (so float64 was really used), and the float32 kernels agree within
1e-5. Outside widening a FLOAT64 model of these ops is refused wherever LiteRT refuses it, and
hybrid (int8 filter) convolutions stay float32.
"""
from __future__ import annotations

import math
import struct
import zlib

import numpy as np
import pytest
from helpers import litert_fails, rng_of
from oracle import run_acelera

from acelera.conformance.float64 import Float64Reference, widen
from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.errors import UnsupportedOpError
from acelera.core.interpreter import Interpreter
from acelera.core.kernels.registry import NodeContext, float_type_names, is_float32, lookup, widening
from acelera.core.model import load_model

F32, F64 = np.float32, np.float64
CASES: dict = {}


def case(name: str, exact32: bool = False):
    """Register a case: fn(rng) -> (build(dtype) -> model bytes, float64 inputs, wanted outputs).
    `exact32`: the op's float64 answer is float32-representable (SIGN, FLOOR_DIV, FLOAT16)."""
    def deco(fn):
        CASES[name] = (fn, exact32)
        return fn
    return deco


def f32(a) -> np.ndarray:
    """float32 values as float64: what a FLOAT32 constant holds after widening."""
    return np.asarray(a, np.float64).astype(F32).astype(F64)


def pads_same(size: int, filt: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """(output size, leading padding) of SAME padding."""
    out = -(-size // stride)
    eff = (filt - 1) * dilation + 1
    return out, max((out - 1) * stride + eff - size, 0) // 2


# --- float64 numpy references -----------------------------------------------------------------

def conv2d_ref(x, w, b, stride, dilation, padding, depth_mult=0):
    """NHWC x, OHWI w (depthwise: 1HWC with `depth_mult`), zero padding, float64 loops."""
    n, h, wd, _ = x.shape
    kh, kw = w.shape[1:3]
    if padding == "SAME":
        (oh, pt), (ow, pl) = pads_same(h, kh, stride[0], dilation[0]), pads_same(wd, kw, stride[1], dilation[1])
    else:
        oh = (h - (kh - 1) * dilation[0] - 1) // stride[0] + 1
        ow = (wd - (kw - 1) * dilation[1] - 1) // stride[1] + 1
        pt = pl = 0
    co = w.shape[3] if depth_mult else w.shape[0]
    out = np.zeros((n, oh, ow, co))
    for i in range(oh):
        for j in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    y, xx = i * stride[0] + ky * dilation[0] - pt, j * stride[1] + kx * dilation[1] - pl
                    if 0 <= y < h and 0 <= xx < wd:
                        if depth_mult:
                            out[:, i, j, :] += np.repeat(x[:, y, xx, :], depth_mult, axis=-1) * w[0, ky, kx, :]
                        else:
                            out[:, i, j, :] += x[:, y, xx, :] @ w[:, ky, kx, :].T
    return out if b is None else out + b


def transpose_conv_ref(x, w, b, stride, out_hw, pad_tl):
    """x NHWC scattered through OHWI w, cropped at pad_tl to out_hw."""
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    full = np.zeros((n, (h - 1) * stride + kh + out_hw[0], (wd - 1) * stride + kw + out_hw[1], o))
    for i in range(h):
        for j in range(wd):
            for ky in range(kh):
                for kx in range(kw):
                    full[:, i * stride + ky, j * stride + kx, :] += x[:, i, j, :] @ w[:, ky, kx, :].T
    out = full[:, pad_tl[0]:pad_tl[0] + out_hw[0], pad_tl[1]:pad_tl[1] + out_hw[1], :]
    return out if b is None else out + b


def pool_ref(x, k, stride, padding, reduce):
    n, h, w, c = x.shape
    if padding == "SAME":
        (oh, pt), (ow, pl) = pads_same(h, k, stride), pads_same(w, k, stride)
    else:
        oh, ow, pt, pl = (h - k) // stride + 1, (w - k) // stride + 1, 0, 0
    out = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * stride - pt, j * stride - pl
            win = x[:, max(y0, 0):y0 + k, max(x0, 0):x0 + k, :]
            out[:, i, j, :] = reduce(win.reshape(n, -1, c))
    return out


def bilinear_ref(x, oh, ow):
    """half_pixel_centers bilinear resize in float64."""
    n, h, w, c = x.shape

    def coords(size, out):
        v = (np.arange(out) + 0.5) * (size / out) - 0.5
        lo = np.maximum(np.floor(v), 0).astype(int)
        hi = np.minimum(np.ceil(v), size - 1).astype(int)
        return lo, hi, v - lo

    y0, y1, dy = coords(h, oh)
    x0, x1, dx = coords(w, ow)
    dy, dx = dy[None, :, None, None], dx[None, None, :, None]
    a, b = x[:, y0][:, :, x0], x[:, y0][:, :, x1]
    cc, d = x[:, y1][:, :, x0], x[:, y1][:, :, x1]
    return a * (1 - dy) * (1 - dx) + cc * dy * (1 - dx) + b * (1 - dy) * dx + d * dy * dx


# --- cases ----------------------------------------------------------------------------------------

@case("CONV_2D")
def _conv2d(rng):
    x = rng.uniform(-2, 2, (2, 5, 6, 3))
    w, b = f32(rng.uniform(-1, 1, (4, 3, 3, 3))), f32(rng.uniform(-1, 1, 4))

    def build(dt):
        return single_op_model("CONV_2D", [In(x.shape, dt), Const(w.astype(dt)), Const(b.astype(dt))],
                               [Out((2, 3, 3, 4), dt)], padding="SAME", stride_h=2, stride_w=2,
                               fused_activation_function="RELU6")
    return build, [x], [np.clip(conv2d_ref(x, w, b, (2, 2), (1, 1), "SAME"), 0, 6)]


@case("CONV_2D_dilated")
def _conv2d_dilated(rng):
    x = rng.uniform(-2, 2, (1, 7, 7, 2))
    w = f32(rng.uniform(-1, 1, (3, 2, 3, 2)))

    def build(dt):
        return single_op_model("CONV_2D", [In(x.shape, dt), Const(w.astype(dt)), None], [Out((1, 5, 3, 3), dt)],
                               padding="VALID", stride_h=1, stride_w=1, dilation_h_factor=2,
                               dilation_w_factor=2)
    return build, [x], [conv2d_ref(x, w, None, (1, 1), (2, 2), "VALID")]


@case("DEPTHWISE_CONV_2D")
def _depthwise(rng):
    x = rng.uniform(-2, 2, (1, 5, 5, 3))
    w, b = f32(rng.uniform(-1, 1, (1, 3, 3, 6))), f32(rng.uniform(-1, 1, 6))

    def build(dt):
        return single_op_model("DEPTHWISE_CONV_2D", [In(x.shape, dt), Const(w.astype(dt)), Const(b.astype(dt))],
                               [Out((1, 5, 5, 6), dt)], version=2, padding="SAME", stride_h=1, stride_w=1,
                               depth_multiplier=2, fused_activation_function="RELU")
    return build, [x], [np.maximum(conv2d_ref(x, w, b, (1, 1), (1, 1), "SAME", depth_mult=2), 0)]


@case("TRANSPOSE_CONV")
def _transpose_conv(rng):
    x = rng.uniform(-2, 2, (1, 3, 3, 3))
    w, b = f32(rng.uniform(-1, 1, (2, 3, 3, 3))), f32(rng.uniform(-1, 1, 2))

    def build(dt):
        return single_op_model("TRANSPOSE_CONV", [Const(np.array([1, 6, 6, 2], np.int32)), Const(w.astype(dt)),
                                                  In(x.shape, dt), Const(b.astype(dt))],
                               [Out((1, 6, 6, 2), dt)], version=3, padding="SAME", stride_h=2, stride_w=2)
    return build, [x], [transpose_conv_ref(x, w, b, 2, (6, 6), (0, 0))]


@case("Convolution2DTransposeBias")
def _transpose_conv_bias(rng):
    x = rng.uniform(-2, 2, (1, 3, 3, 2))
    w, b = f32(rng.uniform(-1, 1, (3, 2, 2, 2))), f32(rng.uniform(-1, 1, 3))

    def build(dt):
        return single_op_model("CUSTOM", [In(x.shape, dt), Const(w.astype(dt)), Const(b.astype(dt))],
                               [Out((1, 6, 6, 3), dt)], custom_code="Convolution2DTransposeBias",
                               custom_options=struct.pack("<iii", 2, 2, 2))
    return build, [x], [transpose_conv_ref(x, w, b, 2, (6, 6), (0, 0))]


def _conv3d_opts() -> dict:
    return {"padding": "VALID", "stride_d": 1, "stride_h": 1, "stride_w": 1, "dilation_d_factor": 1,
            "dilation_h_factor": 1, "dilation_w_factor": 1}


@case("CONV_3D")
def _conv3d(rng):
    x = rng.uniform(-2, 2, (1, 4, 4, 4, 2))
    w, b = f32(rng.uniform(-1, 1, (2, 2, 2, 2, 3))), f32(rng.uniform(-1, 1, 3))
    want = np.zeros((1, 3, 3, 3, 3))
    for d, i, j in np.ndindex(2, 2, 2):
        want += np.einsum("nabcx,xo->nabco", x[:, d:d + 3, i:i + 3, j:j + 3], w[d, i, j])

    def build(dt):
        return single_op_model("CONV_3D", [In(x.shape, dt), Const(w.astype(dt)), Const(b.astype(dt))],
                               [Out((1, 3, 3, 3, 3), dt)], **_conv3d_opts())
    return build, [x], [want + b]


@case("CONV_3D_TRANSPOSE")
def _conv3d_transpose(rng):
    x = rng.uniform(-2, 2, (1, 4, 4, 4, 3))
    w, b = f32(rng.uniform(-1, 1, (2, 2, 2, 2, 3))), f32(rng.uniform(-1, 1, 2))  # (kd, kh, kw, co, ci)
    want = np.zeros((1, 5, 5, 5, 2))
    for d, i, j in np.ndindex(2, 2, 2):
        want[:, d:d + 4, i:i + 4, j:j + 4] += np.einsum("nabcx,ox->nabco", x, w[d, i, j])

    def build(dt):
        return single_op_model("CONV_3D_TRANSPOSE", [Const(np.array([1, 5, 5, 5, 2], np.int32)),
                                                     Const(w.astype(dt)), In(x.shape, dt), Const(b.astype(dt))],
                               [Out((1, 5, 5, 5, 2), dt)], **_conv3d_opts())
    return build, [x], [want + b]


def _binary(op: str, fn, lo=-3.0, hi=3.0, ylo=None, yhi=None, y_shape=(4,), exact32=False, **options):
    def make(rng):
        x = rng.uniform(lo, hi, (2, 3, 4))
        y = rng.uniform(lo if ylo is None else ylo, hi if yhi is None else yhi, y_shape)

        def build(dt):
            return single_op_model(op, [In(x.shape, dt), In(y.shape, dt)], [Out(x.shape, dt)], **options)
        return build, [x, y], [fn(x, y)]
    case(op, exact32)(make)


_binary("ADD", lambda x, y: np.maximum(x + y, 0), fused_activation_function="RELU")
_binary("SUB", lambda x, y: np.clip(x - y, -1, 1), fused_activation_function="RELU_N1_TO_1")
_binary("MUL", lambda x, y: x * y)
_binary("DIV", lambda x, y: x / y, ylo=0.5, yhi=2.0)
_binary("MAXIMUM", np.maximum)
_binary("MINIMUM", np.minimum)
_binary("SQUARED_DIFFERENCE", lambda x, y: (x - y) ** 2)
_binary("POW", np.power, lo=0.5, hi=2.0, y_shape=(2, 3, 4))


def _unary(op: str, fn, lo=-4.0, hi=4.0, exact32=False, **options):
    def make(rng):
        x = rng.uniform(lo, hi, (2, 3, 5))

        def build(dt):
            return single_op_model(op, [In(x.shape, dt)], [Out(x.shape, dt)], **options)
        return build, [x], [fn(x)]
    case(options.pop("name", op), exact32)(make)


_unary("RELU", lambda x: np.maximum(x, 0))
_unary("RELU6", lambda x: np.clip(x, 0, 6), lo=-8, hi=8)
_unary("RELU_N1_TO_1", lambda x: np.clip(x, -1, 1))
_unary("RELU_0_TO_1", lambda x: np.clip(x, 0, 1))
_unary("LEAKY_RELU", lambda x: np.where(x > 0, x, x * f32(0.2)), alpha=0.2)
_unary("ELU", lambda x: np.where(x < 0, np.expm1(x), x))
_unary("HARD_SWISH", lambda x: x * np.clip(x + 3, 0, 6) / 6, lo=-5, hi=5)
_unary("GELU", lambda x: 0.5 * x * np.array([math.erfc(-v / math.sqrt(2)) for v in x.ravel()]).reshape(x.shape))
_unary("GELU", lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
       approximate=True, name="GELU_approximate")
_unary("LOGISTIC", lambda x: 1 / (1 + np.exp(-x)), lo=-10, hi=10)
_unary("TANH", np.tanh)
_unary("L2_NORMALIZATION", lambda x: x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True)))


@case("PRELU")
def _prelu(rng):
    x = rng.uniform(-3, 3, (2, 3, 4))
    alpha = f32(rng.uniform(-0.5, 1.5, 4))

    def build(dt):
        return single_op_model("PRELU", [In(x.shape, dt), Const(alpha.astype(dt))], [Out(x.shape, dt)])
    return build, [x], [np.where(x >= 0, x, x * alpha)]


@case("AVERAGE_POOL_2D")
def _avg_pool(rng):
    x = rng.uniform(-3, 3, (1, 5, 6, 2))

    def build(dt):
        return single_op_model("AVERAGE_POOL_2D", [In(x.shape, dt)], [Out((1, 3, 3, 2), dt)], padding="SAME",
                               stride_h=2, stride_w=2, filter_height=3, filter_width=3)
    return build, [x], [pool_ref(x, 3, 2, "SAME", lambda v: v.mean(axis=1))]


@case("MAX_POOL_2D")
def _max_pool(rng):
    x = rng.uniform(-3, 3, (1, 6, 6, 2))

    def build(dt):
        return single_op_model("MAX_POOL_2D", [In(x.shape, dt)], [Out((1, 3, 3, 2), dt)], padding="VALID",
                               stride_h=2, stride_w=2, filter_height=2, filter_width=2,
                               fused_activation_function="RELU")
    return build, [x], [np.maximum(pool_ref(x, 2, 2, "VALID", lambda v: v.max(axis=1)), 0)]


@case("L2_POOL_2D")
def _l2_pool(rng):
    x = rng.uniform(-3, 3, (1, 5, 5, 2))

    def build(dt):
        return single_op_model("L2_POOL_2D", [In(x.shape, dt)], [Out((1, 3, 3, 2), dt)], padding="SAME",
                               stride_h=2, stride_w=2, filter_height=2, filter_width=2)
    return build, [x], [np.sqrt(pool_ref(x * x, 2, 2, "SAME", lambda v: v.mean(axis=1)))]


@case("LOCAL_RESPONSE_NORMALIZATION")
def _lrn(rng):
    x = rng.uniform(-3, 3, (1, 2, 3, 7))
    r, bias, alpha, beta = 2, 1.0, f32(0.3), 0.75
    sq = x * x
    acc = np.stack([sq[..., max(c - r, 0):c + r].sum(axis=-1) for c in range(7)], axis=-1)

    def build(dt):
        return single_op_model("LOCAL_RESPONSE_NORMALIZATION", [In(x.shape, dt)], [Out(x.shape, dt)],
                               radius=r, bias=bias, alpha=0.3, beta=beta)
    return build, [x], [x * (bias + alpha * acc) ** -beta]


@case("RESIZE_BILINEAR")
def _resize_bilinear(rng):
    x = rng.uniform(-3, 3, (1, 4, 3, 2))

    def build(dt):
        return single_op_model("RESIZE_BILINEAR", [In(x.shape, dt), Const(np.array([7, 5], np.int32))],
                               [Out((1, 7, 5, 2), dt)], version=3, half_pixel_centers=True)
    return build, [x], [bilinear_ref(x, 7, 5)]


@case("RESIZE_NEAREST_NEIGHBOR")
def _resize_nearest(rng):
    x = rng.uniform(-3, 3, (1, 4, 3, 2))
    iy, ix = np.floor(np.arange(6) * (4 / 6)).astype(int), np.floor(np.arange(5) * (3 / 5)).astype(int)

    def build(dt):
        return single_op_model("RESIZE_NEAREST_NEIGHBOR", [In(x.shape, dt), Const(np.array([6, 5], np.int32))],
                               [Out((1, 6, 5, 2), dt)])
    return build, [x], [x[:, iy][:, :, ix]]


@case("PAD")
def _pad(rng):
    x = rng.uniform(-3, 3, (2, 3, 2))
    p = np.array([[0, 1], [2, 0], [1, 1]], np.int32)

    def build(dt):
        return single_op_model("PAD", [In(x.shape, dt), Const(p)], [Out((3, 5, 4), dt)])
    return build, [x], [np.pad(x, p)]


@case("PADV2")
def _padv2(rng):
    x = rng.uniform(-3, 3, (2, 3))
    p, v = np.array([[1, 1], [0, 2]], np.int32), f32(0.7)

    def build(dt):
        return single_op_model("PADV2", [In(x.shape, dt), Const(p), Const(np.array([v], dt))], [Out((4, 5), dt)])
    return build, [x], [np.pad(x, p, constant_values=v)]


@case("MIRROR_PAD")
def _mirror_pad(rng):
    x = rng.uniform(-3, 3, (3, 4))
    p = np.array([[1, 2], [2, 1]], np.int32)

    def build(dt):
        return single_op_model("MIRROR_PAD", [In(x.shape, dt), Const(p)], [Out((6, 7), dt)], mode="REFLECT")
    return build, [x], [np.pad(x, p, mode="reflect")]


@case("CONCATENATION")
def _concat(rng):
    x, y = rng.uniform(-3, 3, (2, 3, 2)), rng.uniform(-3, 3, (2, 1, 2))

    def build(dt):
        return single_op_model("CONCATENATION", [In(x.shape, dt), In(y.shape, dt)], [Out((2, 4, 2), dt)],
                               axis=1, fused_activation_function="RELU6")
    return build, [x, y], [np.clip(np.concatenate([x, y], axis=1), 0, 6)]


@case("SPLIT")
def _split(rng):
    x = rng.uniform(-3, 3, (2, 4))

    def build(dt):
        return single_op_model("SPLIT", [Const(np.array(1, np.int32)), In(x.shape, dt)],
                               [Out((2, 2), dt), Out((2, 2), dt)], num_splits=2)
    return build, [x], [x[:, :2], x[:, 2:]]


@case("SPLIT_V")
def _split_v(rng):
    x = rng.uniform(-3, 3, (4, 3))

    def build(dt):
        return single_op_model("SPLIT_V", [In(x.shape, dt), Const(np.array([1, 3], np.int32)),
                                           Const(np.array(0, np.int32))],
                               [Out((1, 3), dt), Out((3, 3), dt)], num_splits=2)
    return build, [x], [x[:1], x[1:]]


@case("PACK")
def _pack(rng):
    x, y = rng.uniform(-3, 3, (2, 3)), rng.uniform(-3, 3, (2, 3))

    def build(dt):
        return single_op_model("PACK", [In(x.shape, dt), In(y.shape, dt)], [Out((2, 2, 3), dt)],
                               values_count=2, axis=1)
    return build, [x, y], [np.stack([x, y], axis=1)]


@case("UNPACK")
def _unpack(rng):
    x = rng.uniform(-3, 3, (3, 2))

    def build(dt):
        return single_op_model("UNPACK", [In(x.shape, dt)], [Out((2,), dt)] * 3, num=3, axis=0)
    return build, [x], list(x)


@case("RESHAPE")
def _reshape(rng):
    x = rng.uniform(-3, 3, (2, 6))

    def build(dt):
        return single_op_model("RESHAPE", [In(x.shape, dt), Const(np.array([3, -1], np.int32))], [Out((3, 4), dt)])
    return build, [x], [x.reshape(3, 4)]


@case("SQUEEZE")
def _squeeze(rng):
    x = rng.uniform(-3, 3, (2, 1, 3))

    def build(dt):
        return single_op_model("SQUEEZE", [In(x.shape, dt)], [Out((2, 3), dt)], squeeze_dims=[1])
    return build, [x], [x[:, 0]]


@case("EXPAND_DIMS")
def _expand_dims(rng):
    x = rng.uniform(-3, 3, (2, 3))

    def build(dt):
        return single_op_model("EXPAND_DIMS", [In(x.shape, dt), Const(np.array([1], np.int32))], [Out((2, 1, 3), dt)])
    return build, [x], [x[:, None]]


@case("TRANSPOSE")
def _transpose(rng):
    x = rng.uniform(-3, 3, (2, 3, 4))

    def build(dt):
        return single_op_model("TRANSPOSE", [In(x.shape, dt), Const(np.array([2, 0, 1], np.int32))],
                               [Out((4, 2, 3), dt)])
    return build, [x], [x.transpose(2, 0, 1)]


@case("DEPTH_TO_SPACE")
def _depth_to_space(rng):
    x = rng.uniform(-3, 3, (1, 2, 3, 8))
    want = x.reshape(1, 2, 3, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(1, 4, 6, 2)

    def build(dt):
        return single_op_model("DEPTH_TO_SPACE", [In(x.shape, dt)], [Out((1, 4, 6, 2), dt)], block_size=2)
    return build, [x], [want]


@case("SPACE_TO_DEPTH")
def _space_to_depth(rng):
    x = rng.uniform(-3, 3, (1, 4, 6, 2))
    want = x.reshape(1, 2, 2, 3, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(1, 2, 3, 8)

    def build(dt):
        return single_op_model("SPACE_TO_DEPTH", [In(x.shape, dt)], [Out((1, 2, 3, 8), dt)], block_size=2)
    return build, [x], [want]


@case("SPACE_TO_BATCH_ND")
def _space_to_batch(rng):
    x = rng.uniform(-3, 3, (1, 3, 2, 2))
    p = np.array([[1, 0], [0, 2]], np.int32)
    want = np.pad(x, [(0, 0), (1, 0), (0, 2), (0, 0)]).reshape(1, 2, 2, 2, 2, 2)
    want = want.transpose(2, 4, 0, 1, 3, 5).reshape(4, 2, 2, 2)

    def build(dt):
        return single_op_model("SPACE_TO_BATCH_ND", [In(x.shape, dt), Const(np.array([2, 2], np.int32)), Const(p)],
                               [Out((4, 2, 2, 2), dt)])
    return build, [x], [want]


@case("BATCH_TO_SPACE_ND")
def _batch_to_space(rng):
    x = rng.uniform(-3, 3, (4, 2, 2, 2))
    want = x.reshape(2, 2, 1, 2, 2, 2).transpose(2, 3, 0, 4, 1, 5).reshape(1, 4, 4, 2)[:, 1:, :3]

    def build(dt):
        return single_op_model("BATCH_TO_SPACE_ND", [In(x.shape, dt), Const(np.array([2, 2], np.int32)),
                                                     Const(np.array([[1, 0], [0, 1]], np.int32))],
                               [Out((1, 3, 3, 2), dt)])
    return build, [x], [want]


@case("CUMSUM")
def _cumsum(rng):
    x = rng.uniform(-3, 3, (3, 4))

    def build(dt):
        return single_op_model("CUMSUM", [In(x.shape, dt), Const(np.array(1, np.int32))], [Out(x.shape, dt)],
                               reverse=True)
    return build, [x], [np.flip(np.cumsum(np.flip(x, 1), axis=1), 1)]


@case("ADD_N")
def _add_n(rng):
    xs = [rng.uniform(-3, 3, (2, 3)) for _ in range(3)]

    def build(dt):
        return single_op_model("ADD_N", [In((2, 3), dt)] * 3, [Out((2, 3), dt)])
    return build, xs, [xs[0] + xs[1] + xs[2]]


_binary("FLOOR_DIV", lambda x, y: np.floor(x / y), lo=-9, hi=9, ylo=0.5, yhi=3.0, exact32=True)
_binary("FLOOR_MOD", lambda x, y: x - np.floor(x / y) * y, lo=-9, hi=9, ylo=0.5, yhi=3.0)
_unary("SIGN", np.sign, exact32=True)


# DEQUANTIZE of a constant is folded when the executor prepares (from the float32 kernel's
# result in Float64Reference's shape pass), so these cases feed the quantized values as inputs;
# test_dequantize_constants checks the widened kernel on constants.
def _dequantize(name: str, q: np.ndarray, quant, version: int, want, exact32: bool = False) -> None:
    def make(rng):
        def build(dt):
            return single_op_model("DEQUANTIZE", [In(q.shape, q.dtype, quant)], [Out(q.shape, dt)], version=version)
        return build, [q], [want]
    case(name, exact32)(make)


_Q = rng_of(5).integers(-128, 128, (3, 4)).astype(np.int8)
_SCALES = np.array([0.013, 0.2, 0.07], F32)
_H = rng_of(6).uniform(-3, 3, (2, 3)).astype(np.float16)
_dequantize("DEQUANTIZE_INT8", _Q, (0.1, 3), 2, float(F32(0.1)) * (_Q.astype(F64) - 3))
_dequantize("DEQUANTIZE_INT8_PER_CHANNEL", _Q, (_SCALES, np.zeros(3, np.int64), 0), 4,
            _SCALES.astype(F64)[:, None] * _Q)
_dequantize("DEQUANTIZE_FLOAT16", _H, None, 3, _H.astype(F64), exact32=True)


# --- tests -------------------------------------------------------------------------------------

def _case(name: str):
    fn, exact32 = CASES[name]
    build, inputs, want = fn(rng_of(zlib.crc32(name.encode())))
    return build, inputs, want, exact32


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_in_float64(name):
    build, inputs, want, exact32 = _case(name)
    model = build(F32)
    ref = Float64Reference(load_model(model))
    got = ref.run(inputs)
    assert ref.narrow == {}, ref.narrow
    assert ref.widened_nodes == 1
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == F64
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        if not exact32:  # more than float32 precision: the float64 path ran
            assert not np.array_equal(g, f32(g))
    # The float32 kernels on the inputs rounded to float32 agree.
    small = [x.astype(F32) if _is_float(x) else x for x in inputs]
    for a, g in zip(run_acelera(model, small), got):
        assert a.dtype == F32
        bound = 1e-5 * max(1.0, float(np.max(np.abs(g), initial=0)))
        assert float(np.max(np.abs(a - g), initial=0)) <= bound


# LiteRT takes FLOAT64 in these (ops that move elements by size, and SIGN); acelera does too.
LITERT_TAKES_FLOAT64 = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "MIRROR_PAD", "SPACE_TO_BATCH_ND",
                        "BATCH_TO_SPACE_ND", "SIGN"}
# LiteRT's DEQUANTIZE rewrites its output type to FLOAT32 whatever the model declares; acelera
# refuses a model declaring FLOAT64 (as it always has).
LITERT_RETYPES = {"DEQUANTIZE_INT8", "DEQUANTIZE_INT8_PER_CHANNEL", "DEQUANTIZE_FLOAT16"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_model_outside_widening(name):
    build, inputs, _, _ = _case(name)
    model = build(F64)
    assert float_type_names() == ("FLOAT32",)
    refused = False
    try:
        Interpreter(model_content=model).allocate_tensors()
    except UnsupportedOpError:
        refused = True
    assert refused == (name not in LITERT_TAKES_FLOAT64)
    if name == "Convolution2DTransposeBias":
        return  # a MediaPipe custom op: not in LiteRT
    assert litert_fails(model, inputs) == (refused and name not in LITERT_RETYPES)


def test_widening_is_scoped():
    t64 = load_model(_case("ADD")[0](F64)).main.tensors[0]
    assert not is_float32(t64)
    with widening():
        assert is_float32(t64) and float_type_names() == ("FLOAT32", "FLOAT64")
    assert not is_float32(t64) and float_type_names() == ("FLOAT32",)


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"])
def test_hybrid_convolutions_stay_float32(op):
    rng = rng_of(7)
    x = rng.uniform(-2, 2, (1, 4, 4, 3)).astype(F32)
    o = 3
    if op == "DEPTHWISE_CONV_2D":
        w = rng.integers(-127, 128, (1, 3, 3, o)).astype(np.int8)
        wq = (np.full(o, 0.02, F32), np.zeros(o, np.int64), 3)
        ins, opts, ver = [In(x.shape), Const(w, wq), Const(np.zeros(o, F32))], {"depth_multiplier": 1}, 4
    else:
        w = rng.integers(-127, 128, (o, 3, 3, 3)).astype(np.int8)
        wq = (0.02, 0)
        ins, opts, ver = [In(x.shape), Const(w, wq), Const(np.zeros(o, F32))], {}, 2
    if op == "TRANSPOSE_CONV":
        ins = [Const(np.array([1, 4, 4, o], np.int32)), Const(w, wq), In(x.shape)]
        opts, ver = {"stride_h": 1, "stride_w": 1}, 3
    else:
        opts.update(stride_h=1, stride_w=1)
    model = single_op_model(op, ins, [Out((1, 4, 4, o))], version=ver, padding="SAME", **opts)
    ref = Float64Reference(load_model(model))
    got = ref.run([x])[0]
    assert list(ref.narrow) == [0] and "float64" in ref.narrow[0]
    np.testing.assert_array_equal(got, run_acelera(model, [x])[0].astype(F64))


@pytest.mark.parametrize("data, quant, version, want", [
    (_Q, (0.1, 3), 2, float(F32(0.1)) * (_Q.astype(F64) - 3)),
    (_Q, (_SCALES, np.zeros(3, np.int64), 0), 4, _SCALES.astype(F64)[:, None] * _Q),
    (_H, None, 3, _H.astype(F64)),
], ids=["int8", "int8_per_channel", "float16"])
def test_dequantize_constants(data, quant, version, want):
    """The widened DEQUANTIZE kernel on a constant input gives the exact float64 values."""
    sg = widen(load_model(single_op_model("DEQUANTIZE", [Const(data, quant)], [Out(data.shape)],
                                          version=version)).main)
    op = sg.operators[0]
    node = NodeContext(0, op, tuple(sg.tensors[k] for k in op.inputs), tuple(sg.tensors[k] for k in op.outputs))
    with widening():
        run = lookup(op).prepare(node)
    got = run(node.const(0))
    assert got.dtype == F64
    np.testing.assert_array_equal(got, want)
    with pytest.raises(UnsupportedOpError):  # outside widening the FLOAT64 output is refused
        lookup(op).prepare(node)
