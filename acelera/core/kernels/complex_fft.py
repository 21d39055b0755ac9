"""RFFT2D, REAL, IMAG and COMPLEX_ABS reference kernels.

Mirrors tflite/kernels/rfft2d.cc and tflite/kernels/complex_support.cc.

RFFT2D crops or zero-pads the two innermost dimensions to fft_length and takes the real 2-D
FFT of every slice in double precision (LiteRT runs Ooura's rdft2d in double and reorders it
to tf.signal.rfft2d's layout), then narrows to complex64. fft_length must hold powers of two;
a width of 1 is refused: rdft2d does not compute a transform for it.
REAL/IMAG/COMPLEX_ABS map complex64 -> float32 and complex128 -> float64 elementwise
(std::abs of a complex is libm hypot, which np.hypot calls).
"""
from __future__ import annotations

import numpy as np

from acelera.core import model as _model
from acelera.core.errors import KernelError, ModelError
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register

_FLOAT32, _INT32, _COMPLEX64, _FLOAT64, _COMPLEX128 = 0, 2, 8, 10, 11


def _fft_dims(fft_length: np.ndarray) -> tuple[int, int]:
    """(height, width) from an fft_length value; KernelError unless both are valid."""
    h, w = (int(v) for v in np.asarray(fft_length).reshape(-1)[:2])
    for v in (h, w):
        if v <= 0 or v & (v - 1):
            raise KernelError(f"fft_length {[h, w]} must hold powers of two")
    if w < 2:
        raise KernelError(f"fft_length {[h, w]}: a width of 1 is not supported (rdft2d needs >= 2)")
    return h, w


@register("RFFT2D", max_version=1, dtypes=("FLOAT32",))
def rfft2d(node: NodeContext) -> Kernel:
    if len(node.inputs) != 2 or len(node.outputs) != 1:
        raise ModelError("RFFT2D takes 2 inputs and 1 output")
    x_t, len_t, out_t = node.input(0), node.input(1), node.outputs[0]
    if x_t is None or len_t is None:
        raise ModelError("input and fft_length are required")
    if len(x_t.shape) < 2:
        raise ModelError(f"input must have rank >= 2, got shape {list(x_t.shape)}")
    if x_t.type != _FLOAT32:
        raise node.unsupported(f"input type {x_t.type_name} is not supported (FLOAT32 only)")
    if len(len_t.shape) != 1 or len_t.shape[0] != 2:
        raise ModelError(f"fft_length must be a vector of 2 elements, got shape {list(len_t.shape)}")
    if len_t.type != _INT32:
        raise node.unsupported(f"fft_length of type {len_t.type_name} is not supported (INT32 only)")
    if out_t.type != _COMPLEX64:
        raise node.unsupported(f"output type {out_t.type_name} is not supported (COMPLEX64 only)")
    const_len = node.const(1)
    const_dims = _fft_dims(const_len) if const_len is not None else None
    lead = tuple(x_t.shape[:-2])
    declared = out_t.shape

    def out_shape(h: int, w: int) -> tuple[int, ...]:
        shape = lead + (h, w // 2 + 1)
        # the double working buffer (h, w + 2) dominates the output's size
        size = max(int(np.prod(shape, dtype=np.float64)) * 8, int(np.prod(lead, dtype=np.float64)) * h * (w + 2) * 8)
        if size > _model.MAX_TENSOR_BYTES:
            raise KernelError(f"fft_length {[h, w]} needs {size} bytes, over the tensor size limit "
                              f"({_model.MAX_TENSOR_BYTES} bytes)")
        return shape

    if const_dims is not None:
        out_shape(*const_dims)

    def run(x: np.ndarray, fft_length: np.ndarray) -> np.ndarray:
        if const_dims is not None:
            h, w = const_dims
        else:
            try:
                h, w = _fft_dims(fft_length)
            except KernelError:
                if in_shape_pass():  # placeholder zeros: keep the declared shape until invoke
                    return np.zeros(declared, np.complex64)
                raise
        shape = out_shape(h, w)
        if x.size == 0 or int(np.prod(shape)) == 0:
            return np.zeros(shape, np.complex64)
        y = np.fft.rfft2(x[..., :h, :w].astype(np.float64), s=(h, w), axes=(-2, -1))
        return y.astype(np.complex64)

    return run


def _complex_prepare(node: NodeContext, fn) -> Kernel:
    if len(node.inputs) != 1 or len(node.outputs) != 1:
        raise ModelError(f"{node.op.name} takes 1 input and 1 output")
    x_t, out_t = node.input(0), node.outputs[0]
    if x_t is None:
        raise ModelError("the input is required")
    if x_t.type not in (_COMPLEX64, _COMPLEX128):
        raise node.unsupported(f"input type {x_t.type_name} is not supported (COMPLEX64 or COMPLEX128)")
    want = _FLOAT32 if x_t.type == _COMPLEX64 else _FLOAT64
    if out_t.type != want:
        raise node.unsupported(f"output type {out_t.type_name} does not match input type {x_t.type_name}")
    out_dtype = out_t.dtype

    def run(x: np.ndarray) -> np.ndarray:
        return np.asarray(fn(x), out_dtype)

    return run


@register("REAL", max_version=1, dtypes=("COMPLEX64", "COMPLEX128"))
def real(node: NodeContext) -> Kernel:
    return _complex_prepare(node, lambda x: x.real.copy())


@register("IMAG", max_version=1, dtypes=("COMPLEX64", "COMPLEX128"))
def imag(node: NodeContext) -> Kernel:
    return _complex_prepare(node, lambda x: x.imag.copy())


@register("COMPLEX_ABS", max_version=1, dtypes=("COMPLEX64", "COMPLEX128"))
def complex_abs(node: NodeContext) -> Kernel:
    return _complex_prepare(node, lambda x: np.hypot(x.real, x.imag))
