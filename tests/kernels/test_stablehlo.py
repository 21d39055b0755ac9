"""StableHLO element-wise ops, STABLEHLO_PAD and STABLEHLO_COMPOSITE against LiteRT.

LiteRT's BUILTIN_REF resolver does not register the StableHLO ops, so these compare with its
default builtin kernels (`reference="builtin"`), which are the only ones it has for them."""
from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers
from oracle import assert_exact

from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.errors import UnsupportedOpError
from acelera.core.interpreter import Interpreter

ELEMENTWISE = ["STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM"]


@pytest.mark.parametrize("op", ELEMENTWISE)
@pytest.mark.parametrize("dt", [np.float32, np.int32, np.int8, np.int64])
def test_elementwise(op, dt):
    rng = np.random.default_rng(hash(op) % 1000)
    m = single_op_model(op, [In((2, 3), dt), In((2, 3), dt)], [Out((2, 3), dt)])
    a, b = ((rng.standard_normal((2, 3)) * 50).astype(dt) for _ in range(2))
    assert_exact(m, [a, b], reference="builtin")


@pytest.mark.parametrize("op,fn", [("STABLEHLO_AND", None), ("STABLEHLO_SHIFT_LEFT", None)])
def test_integer_ops(op, fn):
    m = single_op_model(op, [In((5,), np.int32), In((5,), np.int32)], [Out((5,), np.int32)])
    assert_exact(m, [np.array([1, 2, 3, -1, 7], np.int32), np.array([3, 30, 1, 7, 0], np.int32)],
                 reference="builtin")


def test_and_on_bool():
    m = single_op_model("STABLEHLO_AND", [In((4,), np.bool_), In((4,), np.bool_)], [Out((4,), np.bool_)])
    assert_exact(m, [np.array([1, 0, 1, 0], bool), np.array([1, 1, 0, 0], bool)], reference="builtin")


@pytest.mark.parametrize("lo,hi,interior,out", [((1, 2), (0, 1), (0, 0), (3, 6)),
                                                ((-1, 1), (2, -1), (1, 2), (6, 6)),
                                                ((0, 0), (0, 0), (1, 1), (3, 5))])
def test_pad(lo, hi, interior, out):
    m = single_op_model("STABLEHLO_PAD", [In((2, 3), np.float32), Const(np.array(9.5, np.float32))],
                        [Out(out, np.float32)], edge_padding_low=lo, edge_padding_high=hi,
                        interior_padding=interior)
    assert_exact(m, [np.arange(6, dtype=np.float32).reshape(2, 3)], reference="builtin")


def test_mismatched_operands_refused():
    m = single_op_model("STABLEHLO_ADD", [In((2, 3)), In((3,))], [Out((2, 3))])
    with pytest.raises(UnsupportedOpError, match="one type and shape"):
        Interpreter(model_content=m).allocate_tensors()


def test_composite_runs_its_decomposition():
    b = ModelBuilder()
    x = b.add_input("x", (3,), np.float32)
    y = b.add_input("y", (3,), np.float32)
    z = b.add_tensor("z", (3,), np.float32)
    dec = b.add_subgraph("decomposition")
    b.add_operator("STABLEHLO_COMPOSITE", [x, y], [z], name="my.fma", decomposition_subgraph_index=dec.index,
                   composite_attributes=flexbuffers.Dumps({}))
    b.mark_outputs(z)
    dx, dy = dec.add_input("x", (3,), np.float32), dec.add_input("y", (3,), np.float32)
    s = dec.add_tensor("s", (3,), np.float32)
    dec.add_operator("MUL", [dx, dy], [s])
    o = dec.add_tensor("o", (3,), np.float32)
    dec.add_operator("ADD", [s, dx], [o])
    dec.mark_outputs(o)
    got = assert_exact(b.build(), [np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)],
                       reference="builtin")
    np.testing.assert_array_equal(got[0], [5, 12, 21])


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_pad_complex(dt):
    """Padding only moves values: complex operands pad like the others (LiteRT's kernel copies
    bytes by element size)."""
    x = (np.arange(6) + 1j * np.arange(6)).astype(dt).reshape(2, 3)
    m = single_op_model("STABLEHLO_PAD", [In((2, 3), dt), Const(np.array(2 - 1j, dt))], [Out((4, 4), dt)],
                        edge_padding_low=(1, 0), edge_padding_high=(1, 1), interior_padding=(0, 0))
    got = Interpreter(model_content=m)
    got.allocate_tensors()
    got.set_tensor(0, x)
    got.invoke()
    want = np.full((4, 4), 2 - 1j, dt)
    want[1:3, 0:3] = x
    np.testing.assert_array_equal(got.get_tensor(got.get_output_details()[0]["index"]), want)
