"""The compiled table gather of the quantized 8-bit binary ops (acelera/core/kernels/lut8_native.py)
against binary_common.lut8_kernel's numpy path, bit for bit, and against LiteRT: ADD, SUB, MUL and
a comparison over int8 and uint8, with same shapes, single-element operands, trailing-vector and
per-row broadcasts, and a broadcast that does not collapse to a grid (the numpy path)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_matches_litert, random_input

from acelera.core.builder import In, Out, single_op_model
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.kernels import binary_common, lut8_native

SHAPES = [((4, 5), (4, 5)), ((1, 6, 8), (8,)), ((1, 6, 8), (1, 6, 1)), ((7,), (1,)), ((1,), (3, 7)),
          ((2, 1), (1, 3)), ((2, 3, 4), (2, 1, 4)), ((3, 1, 5), (3, 4, 5))]
OPS = [("ADD", "NONE"), ("SUB", "RELU"), ("MUL", "RELU6"), ("LESS", None)]


def _model(op: str, act: str | None, dt, sa: tuple, sb: tuple, rng: np.random.Generator) -> bytes:
    zp = (lambda: int(rng.integers(-10, 10)) + (128 if dt == np.uint8 else 0))
    ins = [In(sa, dt, (float(rng.uniform(0.01, 0.1)), zp())), In(sb, dt, (float(rng.uniform(0.01, 0.1)), zp()))]
    shape = tuple(np.broadcast_shapes(sa, sb))
    if act is None:
        return single_op_model(op, ins, [Out(shape, np.bool_)])
    return single_op_model(op, ins, [Out(shape, dt, (float(rng.uniform(0.02, 0.2)), zp()))],
                           fused_activation_function=act)


def _invoke(m: bytes, xs: list) -> np.ndarray:
    it = Interpreter(model_content=m, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("op,act", OPS)
def test_native_gather_matches_numpy_path_and_litert(op, act, dt, monkeypatch):
    assert lut8_native.lut8_gather_kernel() is not None  # numba is a dependency
    rng = np.random.default_rng(len(op) + (dt == np.uint8))
    for sa, sb in SHAPES:
        m = _model(op, act, dt, sa, sb, rng)
        xs = [random_input(sa, dt, rng), random_input(sb, dt, rng)]
        native = _invoke(m, xs)
        monkeypatch.setattr(binary_common, "lut8_gather_kernel", lambda: None)
        numpy_path = _invoke(m, xs)
        monkeypatch.undo()
        assert native.dtype == numpy_path.dtype and native.shape == numpy_path.shape
        np.testing.assert_array_equal(native, numpy_path)
        assert_matches_litert(m, xs)


def test_broadcast_plan():
    plan = lut8_native.broadcast_plan
    assert plan((4, 5), (4, 5)) == ((4, 5), 1, 20, 20, 1, 20, 1)
    assert plan((1, 6, 8), (8,)) == ((1, 6, 8), 6, 8, 8, 1, 0, 1)
    assert plan((1, 6, 8), (1, 6, 1)) == ((1, 6, 8), 6, 8, 8, 1, 1, 0)
    assert plan((2, 1), (1, 3)) == ((2, 3), 2, 3, 1, 0, 0, 1)
    assert plan((2, 3, 4), (2, 1, 4)) is None
    assert plan((2, 3), (4, 3, 2)) is None
