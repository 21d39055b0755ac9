"""Models acelera builds itself (with ModelBuilder) for demos, benchmarks and conformance."""
from __future__ import annotations

import numpy as np

from acelera.core.builder import ModelBuilder


def tiny_cnn(seed: int = 0, size: int = 32, quantized: bool = False) -> bytes:
    """A small image classifier: conv -> depthwise -> residual add -> pool -> dense -> softmax.

    With `quantized=True` every activation is int8 and weights are per-channel int8, the
    layout of a full-integer TFLite model.
    """
    rng = np.random.default_rng(seed)
    b = ModelBuilder(description="acelera tiny_cnn")
    f32, i8 = np.float32, np.int8

    def act(scale: float, zp: int = 0):
        return (scale, zp) if quantized else None

    def weights(name: str, w: np.ndarray, axis: int):
        if not quantized:
            return b.add_constant(name, w.astype(f32))
        amax = np.max(np.abs(w), axis=tuple(d for d in range(w.ndim) if d != axis))
        scales = np.maximum(amax, 1e-6) / 127.0
        shape = [1] * w.ndim
        shape[axis] = -1
        q = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(i8)
        return b.add_constant(name, q, (scales.astype(f32), np.zeros(len(scales), np.int64), axis))

    def bias(name: str, v: np.ndarray, in_scale: float, w_scales: np.ndarray):
        if not quantized:
            return b.add_constant(name, v.astype(f32))
        s = (in_scale * w_scales).astype(f32)
        return b.add_constant(name, np.round(v / s).astype(np.int32), (s, np.zeros(len(s), np.int64), 0))

    dt = i8 if quantized else f32
    x = b.add_input("image", (1, size, size, 3), dt, act(1 / 127.5, 0))
    # conv 3x3, 3 -> 8, stride 2, RELU6
    w1 = rng.normal(0, 0.4, (8, 3, 3, 3))
    wq1 = weights("conv1/weights", w1, 0)
    s1 = np.maximum(np.max(np.abs(w1), axis=(1, 2, 3)), 1e-6) / 127.0
    b1 = bias("conv1/bias", rng.normal(0, 0.1, 8), 1 / 127.5, s1)
    h1 = b.add_tensor("conv1", (1, size // 2, size // 2, 8), dt, act(6 / 255, -128))
    b.add_operator("CONV_2D", [x, wq1, b1], [h1], version=3 if quantized else 1, padding="SAME",
                   stride_h=2, stride_w=2, fused_activation_function="RELU6",
                   dilation_h_factor=1, dilation_w_factor=1)
    # depthwise 3x3, RELU
    w2 = rng.normal(0, 0.5, (1, 3, 3, 8))
    wq2 = weights("dw/weights", w2, 3)
    s2 = np.maximum(np.max(np.abs(w2), axis=(0, 1, 2)), 1e-6) / 127.0
    b2 = bias("dw/bias", rng.normal(0, 0.1, 8), 6 / 255, s2)
    h2 = b.add_tensor("dw", (1, size // 2, size // 2, 8), dt, act(8 / 255, -128))
    b.add_operator("DEPTHWISE_CONV_2D", [h1, wq2, b2], [h2], version=3 if quantized else 1,
                   padding="SAME", stride_h=1, stride_w=1, depth_multiplier=1,
                   fused_activation_function="RELU", dilation_h_factor=1, dilation_w_factor=1)
    # residual add
    h3 = b.add_tensor("add", (1, size // 2, size // 2, 8), dt, act(12 / 255, -128))
    b.add_operator("ADD", [h1, h2], [h3], version=2 if quantized else 1, fused_activation_function="NONE")
    # average pool to 4x4
    k = size // 8
    h4 = b.add_tensor("pool", (1, 4, 4, 8), dt, act(12 / 255, -128))
    b.add_operator("AVERAGE_POOL_2D", [h3], [h4], version=2 if quantized else 1, padding="VALID",
                   stride_h=k, stride_w=k, filter_height=k, filter_width=k, fused_activation_function="NONE")
    shape = b.add_constant("flat/shape", np.array([1, 128], np.int32))
    h5 = b.add_tensor("flat", (1, 128), dt, act(12 / 255, -128))
    b.add_operator("RESHAPE", [h4, shape], [h5], new_shape=[1, 128])
    # dense 128 -> 10
    w6 = rng.normal(0, 0.1, (10, 128))
    wq6 = weights("fc/weights", w6, 0) if not quantized else b.add_constant(
        "fc/weights", np.clip(np.round(w6 / (np.abs(w6).max() / 127)), -127, 127).astype(i8),
        (np.float32(np.abs(w6).max() / 127), 0))
    fc_scale = np.array([np.abs(w6).max() / 127])
    b6 = bias("fc/bias", rng.normal(0, 0.1, 10), 12 / 255, fc_scale)
    h6 = b.add_tensor("logits", (1, 10), dt, act(0.1, 0))
    b.add_operator("FULLY_CONNECTED", [h5, wq6, b6], [h6], version=4 if quantized else 1,
                   fused_activation_function="NONE")
    out = b.add_tensor("probabilities", (1, 10), dt, act(1 / 256, -128))
    b.add_operator("SOFTMAX", [h6], [out], version=2 if quantized else 1, beta=1.0)
    b.mark_outputs(out)
    b.add_signature("serving_default", {"image": x}, {"probabilities": out})
    return b.build()
