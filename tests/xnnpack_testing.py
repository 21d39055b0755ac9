"""Runs a model on acelera's reference kernels and through the xnnpack-cpu delegate with the same
random inputs; shared by the xnnpack-cpu test modules. The reference interpreter is BUILTIN_REF:
the default resolver would apply xnnpack-cpu itself (LiteRT's default delegate) and compare the
delegate with itself."""
from __future__ import annotations

import warnings

import numpy as np

from acelera import Interpreter, load_delegate
from acelera.core.interpreter import OpResolverType


def run(model: bytes, seed: int = 0, lo: float = -2.0, hi: float = 2.0, **options):
    """(reference outputs, delegate outputs, delegate interpreter, delegate), same random inputs:
    floats uniform in [lo, hi), 32/64-bit integers (token ids, indices) in [0, 16), 8/16-bit
    integers over their whole range. A prepare failure (a fallback warning) raises."""
    rng = np.random.default_rng(seed)
    ref = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    d = load_delegate("xnnpack-cpu", options)
    it = Interpreter(model_content=model, experimental_delegates=[d])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        it.allocate_tensors()
    for det in ref.get_input_details():
        dt = np.dtype(det["dtype"])
        if np.issubdtype(dt, np.floating):
            x = rng.uniform(lo, hi, det["shape"]).astype(dt)
        elif dt.itemsize >= 4:
            x = rng.integers(0, 16, det["shape"]).astype(dt)
        else:
            x = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, det["shape"]).astype(dt)
        ref.set_tensor(det["index"], x)
        it.set_tensor(det["index"], x)
    ref.invoke()
    it.invoke()
    outs = [o["index"] for o in ref.get_output_details()]
    return [ref.get_tensor(i) for i in outs], [it.get_tensor(i) for i in outs], it, d
