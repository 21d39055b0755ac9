"""Helpers shared by the GPU backends' tests: the GL and OpenCL guards and quantized single-op
models. The guards skip the calling test module, or fail it under CI=true (tests/needs.py)."""
from __future__ import annotations

import numpy as np
from needs import require, require_module

from acelera.core.builder import Const, In, Out, single_op_model

RNG = np.random.default_rng(4321)


def require_gl() -> None:
    """Skip the calling test module unless moderngl makes a usable headless GL context here."""
    __tracebackhide__ = True
    require_module("moderngl", "moderngl is not installed (pip install moderngl)")
    from acelera.plugins.gpu_gl import context as glctx

    avail = glctx.probe()
    require(avail.ok, f"no usable headless GL context: {avail.reason}")


def require_opencl():
    """Skip the calling test module unless gpu-opencl has a device that builds and runs kernels
    here; the pyopencl module."""
    __tracebackhide__ = True
    cl = require_module("pyopencl", "pyopencl is not installed (pip install pyopencl)")
    from acelera.plugins.gpu_opencl import device as gdev

    avail = gdev.probe()
    require(avail.ok, f"no usable OpenCL device: {avail.reason}")
    return cl


def qin(shape, scale=0.05, zp=3, dtype=np.int8):
    """A random quantized runtime input: (values, (scale, zero point))."""
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype), (scale, zp)


def qop(op, ins, out_shape, out_q, dtype=np.int8, version=2, **opt):
    """A quantized single-op model: `ins` are qin() pairs, Const or None; returns (model, inputs)."""
    specs, data = [], []
    for x in ins:
        if isinstance(x, Const) or x is None:
            specs.append(x)
        else:
            arr, q = x
            specs.append(In(arr.shape, arr.dtype, q))
            data.append(arr)
    return single_op_model(op, specs, [Out(out_shape, dtype, out_q)], version=version, **opt), data


def run_pair(inputs, delegate, **model):
    """Run one model (model_content= or model_path=) on the reference and with `delegate` on the
    same inputs: ([(reference output, delegated output), ...], the delegated interpreter)."""
    from acelera import Interpreter

    ref = Interpreter(**model)
    ref.allocate_tensors()
    it = Interpreter(**model, experimental_delegates=[delegate])
    it.allocate_tensors()
    for det, x in zip(ref.get_input_details(), inputs):
        ref.set_tensor(det["index"], x)
        it.set_tensor(det["index"], x)
    ref.invoke()
    it.invoke()
    return [(ref.get_tensor(o["index"]), it.get_tensor(o["index"])) for o in ref.get_output_details()], it
