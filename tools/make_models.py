#!/usr/bin/env python3
"""Build acelera's converter test-model zoo (tests/models/zoo) with TensorFlow's real converter.

    python tools/make_models.py [--venv DIR] [--out DIR] [--only NAME,...] [--setup-only]

TensorFlow is never a dependency of acelera: this script makes a throwaway virtual environment
(default .zoo-venv at the repository root), pip-installs the pinned TensorFlow / Keras below into
it and re-executes itself there to build the models. Weights are random with fixed seeds and
nothing is downloaded (keras.applications with weights=None), so a rerun with the same pins
reproduces the zoo. Each model is converted to float32, dynamic-range, fp16-weight, full-integer
int8 (int8 I/O) and int16x8 variants; a variant the converter refuses is recorded in
manifest.json with the reason and skipped.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PINS = ["tensorflow-cpu==2.19.0", "keras==3.10.0"]
# tf_keras declares `tensorflow` (the GPU-capable package) as a dependency, which would install a
# second TensorFlow over tensorflow-cpu: it goes in with --no-deps (its deps come with TF).
PINS_NO_DEPS = ["tf_keras==2.19.0"]
INNER = "ACELERA_ZOO_INNER"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--venv", default=str(ROOT / ".zoo-venv"), help="throwaway venv for TensorFlow")
    p.add_argument("--out", default=str(ROOT / "tests" / "models" / "zoo"), help="output folder")
    p.add_argument("--only", default="", help="comma-separated model names to (re)build; the manifest keeps the others")
    p.add_argument("--setup-only", action="store_true", help="only create / update the venv")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)      # one model, in its own process:
    p.add_argument("--variants", default="", help=argparse.SUPPRESS)   # a converter crash (it segfaults
    p.add_argument("--results", default="", help=argparse.SUPPRESS)    # on some graphs) costs one variant
    return p.parse_args(argv)


def bootstrap(args) -> None:
    """Create the venv if needed, install the pins, and exec this script inside it."""
    vdir = Path(args.venv).resolve()
    py = vdir / "bin" / "python"
    stamp = vdir / ".zoo-pins"
    want = "\n".join(PINS + ["--no-deps"] + PINS_NO_DEPS)
    if not py.exists() or not stamp.exists() or stamp.read_text() != want:
        print(f"[zoo] creating venv {vdir}", flush=True)
        venv.create(vdir, with_pip=True, clear=True)
        print(f"[zoo] pip install {' '.join(PINS + PINS_NO_DEPS)} (this takes a few minutes)", flush=True)
        pip = [str(py), "-m", "pip", "install", "--disable-pip-version-check"]
        subprocess.check_call(pip + PINS)
        subprocess.check_call(pip + ["--no-deps"] + PINS_NO_DEPS)
        stamp.write_text(want)
    if args.setup_only:
        return
    env = dict(os.environ, **{INNER: "1", "TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "0",
                              "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0"})
    os.execve(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:]], env)


# --------------------------------------------------------------------------------------------
# Everything below runs inside the zoo venv (TensorFlow importable).
# --------------------------------------------------------------------------------------------

VARIANTS = ["float32", "dynamic", "fp16", "int8", "int16x8"]
CALIBRATION_SAMPLES = 16
MODELS: dict = {}          # name -> (builder, source description)


def model(source: str):
    def deco(fn):
        MODELS[fn.__name__] = (fn, source)
        return fn
    return deco


class Spec:
    """One model input: shape (None = unfixed), dtype, and for integer inputs the value range [lo, hi)."""

    def __init__(self, shape, dtype="float32", lo=None, hi=None, name=None):
        self.shape, self.dtype, self.lo, self.hi, self.name = tuple(shape), dtype, lo, hi, name

    def tf(self):
        import tensorflow as tf
        return tf.TensorSpec(self.shape, getattr(tf, self.dtype), name=self.name)

    def sample(self, rng):
        shape = [1 if d is None else d for d in self.shape]
        if self.dtype.startswith("float"):
            return rng.uniform(-1.0, 1.0, size=shape).astype(self.dtype)
        if self.dtype == "bool":
            return rng.integers(0, 2, size=shape).astype(bool)
        return rng.integers(self.lo, self.hi, size=shape).astype(self.dtype)


def perturb(weights, seed: int):
    """Keras initialises biases / BN betas / moving means to 0 and gammas / variances to 1, which
    hides whole code paths (bias add, BN folding); give them small fixed-seed random values."""
    import numpy as np
    rng = np.random.default_rng(seed + 1000)
    for v in weights:
        name = (getattr(v, "path", None) or v.name).lower()
        val = np.asarray(v.numpy())
        if not np.issubdtype(val.dtype, np.floating):
            continue
        if "moving_variance" in name or "gamma" in name or (val.size and np.all(val == 1.0)):
            v.assign(rng.uniform(0.5, 1.5, size=val.shape).astype(val.dtype))
        elif val.size and np.all(val == 0.0):
            v.assign(rng.normal(0.0, 0.1, size=val.shape).astype(val.dtype))


# ---- keras.applications ---------------------------------------------------------------------

@model("keras.applications.MobileNetV3Small(alpha=0.75, weights=None, include_top=False, pooling='avg') "
       "at 96x96 + Dense(10, softmax), batch unfixed")
def mobilenet_v3_small():
    import keras
    base = keras.applications.MobileNetV3Small(input_shape=(96, 96, 3), alpha=0.75, include_top=False,
                                               weights=None, pooling="avg", include_preprocessing=True)
    out = keras.layers.Dense(10, activation="softmax")(base.output)
    return "keras3", keras.Model(base.input, out), [Spec((None, 96, 96, 3))]


@model("keras.applications.EfficientNetB0(weights=None, include_top=False) at 64x64, cut after block 4 "
       "(block4c_add) + GlobalAveragePooling2D + Dense(5, softmax), batch unfixed (the full B0 backbone is "
       "4M parameters, too big for the zoo's size budget in five variants)")
def efficientnet_b0():
    import keras
    base = keras.applications.EfficientNetB0(input_shape=(64, 64, 3), include_top=False, weights=None)
    x = base.get_layer("block4c_add").output
    x = keras.layers.GlobalAveragePooling2D()(x)
    out = keras.layers.Dense(5, activation="softmax")(x)
    return "keras3", keras.Model(base.input, out), [Spec((None, 64, 64, 3))]


# ---- small hand-made convolutional nets (Keras 3) -------------------------------------------

@model("ResNet-style: conv stem, 3 residual stages (BN, ReLU, strided projection shortcuts), GAP, Dense")
def resnet_mini():
    import keras
    from keras import layers as L
    inp = keras.Input((32, 32, 3))
    x = L.Conv2D(16, 3, padding="same", use_bias=False)(inp)
    x = L.ReLU()(L.BatchNormalization()(x))
    for width, stride in [(16, 1), (24, 2), (32, 2)]:
        sc = x
        y = L.Conv2D(width, 3, strides=stride, padding="same", use_bias=False)(x)
        y = L.ReLU()(L.BatchNormalization()(y))
        y = L.Conv2D(width, 3, padding="same", use_bias=False)(y)
        y = L.BatchNormalization()(y)
        if stride != 1 or sc.shape[-1] != width:
            sc = L.BatchNormalization()(L.Conv2D(width, 1, strides=stride, use_bias=False)(sc))
        x = L.ReLU()(L.Add()([y, sc]))
    x = L.GlobalAveragePooling2D()(x)
    out = L.Dense(10, activation="softmax")(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 32, 32, 3))]


@model("DenseNet-style: 2 dense blocks of BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 with concatenation, "
       "transition (Conv1x1 + AveragePooling2D), GAP, Dense")
def densenet_mini():
    import keras
    from keras import layers as L
    inp = keras.Input((32, 32, 3))
    x = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    for block in range(2):
        for _ in range(3):
            y = L.ReLU()(L.BatchNormalization()(x))
            y = L.Conv2D(16, 1, use_bias=False)(y)
            y = L.ReLU()(L.BatchNormalization()(y))
            y = L.Conv2D(8, 3, padding="same", use_bias=False)(y)
            x = L.Concatenate()([x, y])
        if block == 0:
            x = L.ReLU()(L.BatchNormalization()(x))
            x = L.Conv2D(int(x.shape[-1]) // 2, 1, use_bias=False)(x)
            x = L.AveragePooling2D(2)(x)
    x = L.ReLU()(L.BatchNormalization()(x))
    x = L.GlobalAveragePooling2D()(x)
    out = L.Dense(10, activation="softmax")(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 32, 32, 3))]


@model("UNet-style segmenter: conv/maxpool encoder, Conv2DTranspose and UpSampling2D(bilinear) "
       "decoder, skip concatenations, sigmoid mask")
def unet_mini():
    import keras
    from keras import layers as L
    inp = keras.Input((32, 32, 3))
    e1 = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    e2 = L.Conv2D(16, 3, padding="same", activation="relu")(L.MaxPooling2D()(e1))
    b = L.Conv2D(24, 3, padding="same", activation="relu")(L.MaxPooling2D()(e2))
    d2 = L.Conv2DTranspose(16, 3, strides=2, padding="same", activation="relu")(b)
    d2 = L.Conv2D(16, 3, padding="same", activation="relu")(L.Concatenate()([d2, e2]))
    d1 = L.UpSampling2D(interpolation="bilinear")(d2)
    d1 = L.Conv2D(8, 3, padding="same", activation="relu")(L.Concatenate()([d1, e1]))
    out = L.Conv2D(2, 1, activation="sigmoid")(d1)
    return "keras3", keras.Model(inp, out), [Spec((None, 32, 32, 3))]


@model("Conv1D net: causal and dilated Conv1D, MaxPooling1D, 'same' Conv1D with stride, GAP1D, Dense")
def conv1d_net():
    import keras
    from keras import layers as L
    inp = keras.Input((64, 4))
    x = L.Conv1D(16, 3, padding="causal", activation="relu")(inp)
    x = L.Conv1D(16, 3, padding="causal", dilation_rate=2, activation="relu")(x)
    x = L.MaxPooling1D(2)(x)
    x = L.Conv1D(24, 5, strides=2, padding="same", activation="tanh")(x)
    x = L.Conv1D(24, 3, padding="valid")(x)
    x = L.GlobalAveragePooling1D()(x)
    out = L.Dense(6)(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 64, 4))]


@model("Conv3D net: Conv3D (same/valid, strided), Conv3DTranspose, GlobalAveragePooling3D, Dense "
       "(MaxPooling3D / AveragePooling3D are not TFLite builtins: the converter refuses them)")
def conv3d_net():
    import keras
    from keras import layers as L
    inp = keras.Input((8, 16, 16, 2))
    x = L.Conv3D(8, 3, padding="same", activation="relu")(inp)
    x = L.Conv3D(12, 3, strides=(1, 2, 2), padding="same", activation="relu")(x)
    x = L.Conv3DTranspose(8, (2, 3, 3), strides=(2, 1, 1), padding="same", activation="relu")(x)
    x = L.Conv3D(8, (3, 3, 3), padding="valid")(x)
    x = L.Conv3D(16, (2, 1, 1), strides=2, padding="valid")(x)
    x = L.GlobalAveragePooling3D()(x)
    out = L.Dense(4)(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 8, 16, 16, 2))]


@model("SeparableConv2D (stride 1 and 2, depth multiplier 2) and dilated DepthwiseConv2D (rate 2, 3)")
def sepconv_net():
    import keras
    from keras import layers as L
    inp = keras.Input((32, 32, 3))
    x = L.SeparableConv2D(16, 3, padding="same", depth_multiplier=2, activation="relu")(inp)
    x = L.SeparableConv2D(24, 3, strides=2, padding="same", activation="relu6")(x)
    x = L.DepthwiseConv2D(3, dilation_rate=2, padding="same", activation="relu")(x)
    x = L.DepthwiseConv2D(3, dilation_rate=3, padding="valid", depth_multiplier=2)(x)
    x = L.Conv2D(16, 1, activation="relu")(x)
    x = L.GlobalMaxPooling2D()(x)
    out = L.Dense(8)(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 32, 32, 3))]


@model("GroupNormalization(groups=4) and LayerNormalization (channel axis and over H,W,C) in a small CNN")
def norm_net():
    import keras
    from keras import layers as L
    inp = keras.Input((16, 16, 8))
    x = L.Conv2D(16, 3, padding="same")(inp)
    x = L.GroupNormalization(groups=4)(x)
    x = L.Activation("swish")(x)
    x = L.Conv2D(16, 3, padding="same")(x)
    x = L.LayerNormalization(axis=-1)(x)
    x = L.ReLU()(x)
    x = L.Conv2D(8, 3, strides=2, padding="same")(x)
    x = L.LayerNormalization(axis=[1, 2, 3])(x)
    x = L.GlobalAveragePooling2D()(x)
    out = L.Dense(4)(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 16, 16, 8))]


# ---- recurrent ------------------------------------------------------------------------------

@model("Keras 3 LSTM(16, return_sequences) + LSTM(8) + Dense: converted to WHILE loops (batch fixed at 1: "
       "with an unfixed batch the converter's TensorList lowering fails)")
def lstm_keras3():
    import keras
    from keras import layers as L
    inp = keras.Input((10, 4), batch_size=1)
    x = L.LSTM(16, return_sequences=True)(inp)
    x = L.LSTM(8)(x)
    out = L.Dense(3)(x)
    return "keras3", keras.Model(inp, out), [Spec((1, 10, 4))]


@model("Keras 3 GRU(16, return_sequences) + GRU(8) + Dense: converted to WHILE loops (batch fixed at 1)")
def gru_keras3():
    import keras
    from keras import layers as L
    inp = keras.Input((10, 4), batch_size=1)
    x = L.GRU(16, return_sequences=True)(inp)
    x = L.GRU(8)(x)
    out = L.Dense(3)(x)
    return "keras3", keras.Model(inp, out), [Spec((1, 10, 4))]


@model("tf_keras LSTM(16, return_sequences) + LSTM(8) + Dense: fused UNIDIRECTIONAL_SEQUENCE_LSTM")
def lstm_tfkeras():
    import tf_keras as K
    L = K.layers
    inp = K.Input((10, 4), batch_size=1)
    x = L.LSTM(16, return_sequences=True)(inp)
    x = L.LSTM(8)(x)
    out = L.Dense(3)(x)
    return "tf_keras", K.Model(inp, out), [Spec((1, 10, 4))]


@model("tf_keras GRU(16, return_sequences) + GRU(8) + Dense (no fused GRU in TFLite: WHILE loops)")
def gru_tfkeras():
    import tf_keras as K
    L = K.layers
    inp = K.Input((10, 4), batch_size=1)
    x = L.GRU(16, return_sequences=True)(inp)
    x = L.GRU(8)(x)
    out = L.Dense(3)(x)
    return "tf_keras", K.Model(inp, out), [Spec((1, 10, 4))]


@model("tf_keras Bidirectional(LSTM(12, return_sequences)) + Bidirectional(LSTM(6)) + Dense: "
       "fused UNIDIRECTIONAL_SEQUENCE_LSTM pairs with REVERSE_V2")
def bilstm_tfkeras():
    import tf_keras as K
    L = K.layers
    inp = K.Input((10, 4), batch_size=1)
    x = L.Bidirectional(L.LSTM(12, return_sequences=True))(inp)
    x = L.Bidirectional(L.LSTM(6))(x)
    out = L.Dense(3)(x)
    return "tf_keras", K.Model(inp, out), [Spec((1, 10, 4))]


# ---- text / attention -----------------------------------------------------------------------

@model("Embedding(100, 16) text classifier on int32 tokens (length 20): Conv1D, GlobalMaxPooling1D, Dense")
def text_classifier():
    import keras
    from keras import layers as L
    inp = keras.Input((20,), dtype="int32")
    x = L.Embedding(100, 16)(inp)
    x = L.Conv1D(16, 3, padding="same", activation="relu")(x)
    a = L.GlobalMaxPooling1D()(x)
    b = L.GlobalAveragePooling1D()(x)
    x = L.Concatenate()([a, b])
    out = L.Dense(4, activation="softmax")(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 20), "int32", 0, 100)]


def _encoder_block(x, heads, key_dim, ff):
    from keras import layers as L
    d = int(x.shape[-1])
    a = L.MultiHeadAttention(num_heads=heads, key_dim=key_dim)(x, x)
    x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, a]))
    f = L.Dense(ff, activation="gelu")(x)
    f = L.Dense(d)(f)
    return L.LayerNormalization(epsilon=1e-6)(L.Add()([x, f]))


def _pos_layer():
    import keras

    class AddPosition(keras.layers.Layer):
        def build(self, shape):
            self.pos = self.add_weight(shape=tuple(shape[1:]), initializer="random_normal", name="pos")

        def call(self, x):
            return x + self.pos

    class ClassToken(keras.layers.Layer):
        def build(self, shape):
            self.cls = self.add_weight(shape=(1, 1, shape[-1]), initializer="random_normal", name="cls")

        def call(self, x):
            cls = keras.ops.broadcast_to(self.cls, (keras.ops.shape(x)[0], 1, keras.ops.shape(x)[-1]))
            return keras.ops.concatenate([cls, x], axis=1)

    return AddPosition, ClassToken


@model("transformer encoder: token Embedding + learned positions, 2 blocks of MultiHeadAttention(4 heads), "
       "LayerNorm, Dense(gelu) feed-forward, GAP1D, Dense")
def transformer_encoder():
    import keras
    from keras import layers as L
    AddPosition, _ = _pos_layer()
    inp = keras.Input((16,), dtype="int32")
    x = AddPosition()(L.Embedding(64, 32)(inp))
    for _ in range(2):
        x = _encoder_block(x, 4, 8, 64)
    x = L.GlobalAveragePooling1D()(x)
    out = L.Dense(3)(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 16), "int32", 0, 64)]


@model("small ViT: 4x4 patch Conv2D on 32x32x3, class token, learned positions, 2 encoder blocks, "
       "class-token head")
def vit_mini():
    import keras
    from keras import layers as L
    AddPosition, ClassToken = _pos_layer()
    inp = keras.Input((32, 32, 3))
    x = L.Conv2D(32, 8, strides=8)(inp)
    x = L.Reshape((16, 32))(x)
    x = ClassToken()(x)
    x = AddPosition()(x)
    for _ in range(2):
        x = _encoder_block(x, 4, 8, 64)
    x = L.Lambda(lambda t: t[:, 0])(x)
    out = L.Dense(10)(x)
    return "keras3", keras.Model(inp, out), [Spec((None, 32, 32, 3))]


# ---- graphs of miscellaneous ops (tf.function) -----------------------------------------------

@model("tf.function: cumsum (exclusive, reverse), top_k, tile, reverse, mirror pad (REFLECT, SYMMETRIC), "
       "gather_nd")
def misc_ops_a():
    import numpy as np
    import tensorflow as tf
    specs = [Spec((2, 6, 8), name="x")]
    idx = tf.constant(np.array([[0, 1], [1, 5], [0, 3]], np.int32))

    @tf.function(input_signature=[s.tf() for s in specs])
    def f(x):
        c = tf.math.cumsum(x, axis=2) + tf.math.cumsum(x, axis=1, exclusive=True, reverse=True)
        vals, ind = tf.math.top_k(x * 3.0 + c, k=3)
        t = tf.tile(x[:, :2, :], [1, 2, 3])
        r = tf.reverse(x, axis=[1, 2])
        p1 = tf.pad(x, [[0, 0], [2, 1], [1, 2]], mode="REFLECT")
        p2 = tf.pad(r, [[0, 0], [1, 1], [2, 0]], mode="SYMMETRIC")
        g = tf.gather_nd(c, idx)
        return {"a_vals": vals, "b_ind": ind, "c_tile": t * 2.0, "d_pad": p1 + 1.0, "e_pad": p2 - 1.0,
                "f_gather": g * g}

    return "tf_function", f, specs


@model("tf.function: scatter_nd, where (1-arg) / select (where 3-arg), argmax, argmin, reduce_prod, "
       "segment_sum, unsorted_segment_sum")
def misc_ops_b():
    import numpy as np
    import tensorflow as tf
    specs = [Spec((6, 4), name="x"), Spec((6, 4), name="y")]
    sidx = tf.constant(np.array([[1], [4], [0]], np.int32))
    seg = tf.constant(np.array([0, 0, 1, 2, 2, 2], np.int32))
    useg = tf.constant(np.array([2, 0, 1, 0, 2, 1], np.int32))

    @tf.function(input_signature=[s.tf() for s in specs])
    def f(x, y):
        s = tf.scatter_nd(sidx, x[:3] * y[:3], tf.constant([6, 4]))
        sel = tf.where(x > y, x, y * 0.5)                   # SELECT
        sel2 = tf.where(x[:, :1] > 0.0, y, -y)              # broadcasting: SELECT_V2
        pos = tf.where(x > 0.25)                            # 1-arg: WHERE (data-dependent shape)
        mx = tf.math.argmax(sel + s, axis=1, output_type=tf.int32)
        mn = tf.math.argmin(x - y, axis=0, output_type=tf.int32)
        pr = tf.reduce_prod(x + 1.5, axis=1, keepdims=True)
        ss = tf.math.segment_sum(x * y, seg)
        us = tf.math.unsorted_segment_sum(x + y, useg, 3)
        return {"a_scatter": s, "b_select": sel, "c_argmax": mx, "d_argmin": mn, "e_prod": pr, "f_seg": ss,
                "g_useg": us, "h_select_v2": sel2, "i_where": pos}

    return "tf_function", f, specs


@model("tf.function: elu, leaky_relu, log_softmax, l2_normalize, strided_slice with begin/end/ellipsis/"
       "new-axis/shrink masks and negative strides, broadcasting batch_matmul of two inputs")
def misc_ops_c():
    import tensorflow as tf
    specs = [Spec((2, 1, 4, 5), name="a"), Spec((3, 5, 6), name="b")]

    @tf.function(input_signature=[s.tf() for s in specs])
    def f(a, b):
        m = tf.matmul(a, b)                                # [2,3,4,6]
        e = tf.nn.elu(m)
        lr = tf.nn.leaky_relu(m, alpha=0.15)
        ls = tf.nn.log_softmax(m, axis=-1)
        l2 = tf.math.l2_normalize(m, axis=-1)
        s1 = m[:, ::-1, 1:, tf.newaxis, :4]                # negative stride, begin mask, new axis
        s2 = m[..., 1, ::2]                                # ellipsis + shrink
        s3 = m[1, :, -3:, 1::2]                            # shrink first axis, negative begin
        return {"a_elu": e, "b_lrelu": lr, "c_logsm": ls, "d_l2": l2, "e_s1": s1, "f_s2": s2, "g_s3": s3}

    return "tf_function", f, specs


# ---- conversion -----------------------------------------------------------------------------

def make_converter(kind, obj, specs):
    import tensorflow as tf
    if kind == "keras3":
        # TF 2.19's from_keras_model takes Keras 3 models (it exports a SavedModel first), and
        # then folds variables and batch norms as users' conversions do.
        return tf.lite.TFLiteConverter.from_keras_model(obj)
    if kind == "tf_keras":
        # As TensorFlow's "Keras LSTM fusion" guide does: a concrete function with a fixed batch of 1,
        # which lets the converter fuse the LSTM (with an unfixed batch its TensorList lowering fails).
        fn = tf.function(lambda *xs: obj(xs[0] if len(xs) == 1 else list(xs)))
        return tf.lite.TFLiteConverter.from_concrete_functions(
            [fn.get_concrete_function(*[s.tf() for s in specs])], obj)
    if kind == "tf_function":
        holder = tf.Module()
        holder.f = obj
        return tf.lite.TFLiteConverter.from_concrete_functions([obj.get_concrete_function()], holder)
    raise ValueError(kind)


def convert(kind, obj, specs, variant, seed):
    import numpy as np
    import tensorflow as tf
    conv = make_converter(kind, obj, specs)

    def representative():
        rng = np.random.default_rng(seed)
        for _ in range(CALIBRATION_SAMPLES):
            if all(s.name for s in specs):   # by name: the converted model may order its inputs differently
                yield {s.name: s.sample(rng) for s in specs}
            else:
                yield [s.sample(rng) for s in specs]

    if variant == "dynamic":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif variant == "fp16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif variant == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    elif variant == "int16x8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative
        conv.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        conv.inference_input_type = tf.int16
        conv.inference_output_type = tf.int16
    elif variant != "float32":
        raise ValueError(variant)
    with contextlib.redirect_stdout(io.StringIO()):     # Keras 3's export prints its endpoints
        return conv.convert()


def describe(data: bytes, specs):
    """Inputs / outputs as the converted model declares them (TF's own interpreter reads the file)."""
    import numpy as np
    import tensorflow as tf
    it = tf.lite.Interpreter(model_content=data)

    def tensor(d, spec=None):
        t = {"name": d["name"], "dtype": np.dtype(d["dtype"]).name, "shape": [int(v) for v in d["shape"]],
             "shape_signature": [int(v) for v in d["shape_signature"]]}
        scale, zp = d["quantization"]
        if scale:
            t["quantization"] = {"scale": float(scale), "zero_point": int(zp)}
        if spec is not None and spec.lo is not None and np.issubdtype(np.dtype(d["dtype"]), np.integer) \
                and np.dtype(d["dtype"]).name == spec.dtype:
            t["range"] = [int(spec.lo), int(spec.hi)]
        return t

    ins = it.get_input_details()
    # Inputs come back in the model's order; match specs by name where we can, else by position.
    by_name = {s.name: s for s in specs if s.name}
    inputs = []
    for k, d in enumerate(ins):
        spec = next((s for n, s in by_name.items() if n and n in d["name"]), specs[k] if k < len(specs) else None)
        inputs.append(tensor(d, spec))
    return inputs, [tensor(d) for d in it.get_output_details()], op_names(data)


def op_names(data: bytes) -> list[str]:
    """The builtin (and custom) ops of every subgraph (WHILE bodies included)."""
    from tensorflow.lite.python import schema_py_generated as schema
    m = schema.Model.GetRootAsModel(data, 0)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    codes = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        codes.append(oc.CustomCode().decode() if oc.CustomCode() else names.get(code, str(code)))
    return sorted({codes[m.Subgraphs(g).Operators(k).OpcodeIndex()]
                   for g in range(m.SubgraphsLength()) for k in range(m.Subgraphs(g).OperatorsLength())})


def build_one(name: str, variants: list[str], out: Path, results: Path) -> None:
    """Child process: build one model and convert it to `variants`, appending one JSON line per event
    to `results` (a converter that crashes the process leaves a "start" without its end)."""
    import json

    import keras
    import tf_keras

    seed = list(MODELS).index(name)
    builder, source = MODELS[name]
    keras.utils.set_random_seed(seed)
    tf_keras.utils.set_random_seed(seed)
    kind, obj, specs = builder()
    params = 0
    if kind in ("keras3", "tf_keras"):
        perturb(obj.weights, seed)
        params = int(obj.count_params())
    lib = {"keras3": f"keras {keras.__version__}", "tf_keras": f"tf_keras {tf_keras.__version__}",
           "tf_function": "none (tf.function)"}[kind]

    def log(event: dict):
        with results.open("a") as f:
            f.write(json.dumps(event) + "\n")

    for variant in variants:
        log({"event": "start", "variant": variant})
        fname = f"{name}_{variant}.tflite"
        try:
            data = convert(kind, obj, specs, variant, seed)
            inputs, outputs, ops = describe(data, specs)
        except Exception as e:  # noqa: BLE001 - the converter raises many types; record and move on
            msg = " ".join(str(e).split())
            msg = msg if len(msg) < 600 else msg[:300] + " ... " + msg[-300:]   # converter dumps are long
            log({"event": "fail", "failure": {"name": name, "variant": variant, "error": f"{type(e).__name__}: {msg}"}})
            continue
        (out / fname).write_bytes(data)
        log({"event": "done", "entry": {
            "name": name, "variant": variant, "file": fname, "bytes": len(data), "source": source,
            "keras": lib, "seed": seed, "parameters": params, "inputs": inputs, "outputs": outputs, "ops": ops}})


def build_all(args) -> None:
    import json
    import tempfile
    import time

    import keras
    import numpy as np
    import tensorflow as tf
    import tf_keras

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    only = [n for n in args.only.split(",") if n]
    unknown = set(only) - set(MODELS)
    if unknown:
        raise SystemExit(f"unknown model(s): {sorted(unknown)}; known: {sorted(MODELS)}")
    old = json.loads(manifest_path.read_text()) if (only and manifest_path.exists()) else {}
    entries = [e for e in old.get("models", []) if e["name"] in MODELS and e["name"] not in only]
    failures = [f for f in old.get("failures", []) if f["name"] in MODELS and f["name"] not in only]
    if not only:
        for f in out.glob("*.tflite"):
            f.unlink()
    for name, (_, source) in MODELS.items():
        if only and name not in only:
            continue
        for f in out.glob(f"{name}_*.tflite"):
            f.unlink()
        print(f"[zoo] {name}: {source[:90]}", flush=True)
        t0 = time.time()
        todo = list(VARIANTS)
        while todo:
            with tempfile.TemporaryDirectory() as tmp:
                results, err = Path(tmp) / "results.jsonl", Path(tmp) / "stderr"
                with err.open("w") as ef:
                    rc = subprocess.call([sys.executable, str(Path(__file__).resolve()), "--child", name,
                                          "--variants", ",".join(todo), "--results", str(results),
                                          "--out", str(out)], stderr=ef)
                events = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
                errtail = " ".join(err.read_text().split()[-60:])
            started = None
            for ev in events:
                if ev["event"] == "start":
                    started = ev["variant"]
                    continue
                started = None
                if ev["event"] == "done":
                    e = ev["entry"]
                    entries.append(e)
                    print(f"[zoo]   {e['variant']:8s} {e['bytes']:>9d} B  {len(e['ops'])} op types", flush=True)
                else:
                    f = ev["failure"]
                    failures.append(f)
                    print(f"[zoo]   {f['variant']:8s} FAILED: {f['error'][:160]}", flush=True)
                todo.remove((ev.get("entry") or ev.get("failure"))["variant"])
            if rc != 0:
                if started is None:   # died before converting anything: give up on this model
                    started = todo[0] if todo else None
                    if started is None:
                        break
                why = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
                failures.append({"name": name, "variant": started,
                                 "error": f"converter process crashed ({why}); stderr tail: {errtail[-300:]}"})
                print(f"[zoo]   {started:8s} FAILED: converter process crashed ({why})", flush=True)
                todo.remove(started)
        print(f"[zoo]   ({time.time() - t0:.0f} s)", flush=True)
    order = {n: k for k, n in enumerate(MODELS)}
    entries.sort(key=lambda e: (order[e["name"]], VARIANTS.index(e["variant"])))
    failures.sort(key=lambda f: (order[f["name"]], VARIANTS.index(f["variant"])))
    manifest = {
        "generator": "tools/make_models.py",
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "tf_keras": tf_keras.__version__,
        "numpy": np.__version__,
        "pins": PINS + PINS_NO_DEPS,
        "variants": VARIANTS,
        "calibration_samples": CALIBRATION_SAMPLES,
        "models": entries,
        "failures": failures,
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(e["bytes"] for e in entries)
    print(f"[zoo] wrote {len(entries)} models ({total / 1e6:.1f} MB), {len(failures)} conversion failures "
          f"to {out}", flush=True)


if __name__ == "__main__":
    _args = parse_args()
    if os.environ.get(INNER) != "1":
        bootstrap(_args)
        sys.exit(0)
    if _args.child:
        build_one(_args.child, _args.variants.split(","), Path(_args.out), Path(_args.results))
    else:
        build_all(_args)
