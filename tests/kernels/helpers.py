"""Test setup shared by the kernel test modules."""
from __future__ import annotations

import numpy as np
import pytest

from acelera.core.errors import UnsupportedOpError
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
