"""Test setup shared by the kernel test modules."""
from __future__ import annotations

import numpy as np
import pytest

from acelera.core.errors import AceleraError, UnsupportedOpError
from acelera.core.executor import KernelError
from acelera.core.interpreter import Interpreter


def rng_of(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def expect_unsupported(model: bytes, match: str | None = None) -> None:
    """allocate_tensors() refuses the model with an UnsupportedOpError (matching `match`)."""
    it = Interpreter(model_content=model)
    with pytest.raises(UnsupportedOpError, match=match):
        it.allocate_tensors()


def quant_of(t):
    """A loaded tensor's quantization as the builder's quant argument (None when unquantized)."""
    q = t.quantization
    if not q.is_set:
        return None
    if q.scale.size > 1:
        return (q.scale, q.zero_point, q.quantized_dimension)
    return (float(q.scale[0]), int(q.zero_point[0]))


def litert_fails(model: bytes, inputs, reference: bool | str = True, run=None) -> bool:
    """Whether LiteRT refuses or fails the model on `inputs` (`run`: a run_litert-like function)."""
    from oracle import run_litert

    try:
        (run or run_litert)(model, inputs, reference)
    except (RuntimeError, ValueError):
        return True
    return False


def allocate_error(model: bytes, kind: type = AceleraError) -> Exception:
    """allocate_tensors() refuses the model with an error of `kind` naming node 0."""
    it = Interpreter(model_content=model)
    with pytest.raises(kind) as e:
        it.allocate_tensors()
    assert "node 0" in str(e.value)
    return e.value


def invoke_error(model: bytes, inputs) -> Exception:
    """The model allocates, and invoke() on `inputs` fails with a KernelError naming node 0."""
    it = Interpreter(model_content=model)
    details = it.get_input_details()
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != tuple(np.shape(x)):
            it.resize_tensor_input(d["index"], list(np.shape(x)))
    it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], np.asarray(x, dtype=d["dtype"]))
    with pytest.raises(KernelError) as e:
        it.invoke()
    assert "node 0" in str(e.value)
    return e.value
