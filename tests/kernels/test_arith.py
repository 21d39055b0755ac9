"""ADD_N, FLOOR_DIV, FLOOR_MOD, SIGN reference kernels against LiteRT."""
import numpy as np
import pytest
from oracle import assert_exact

from acelera.core.builder import Const, In, Out, single_op_model

RNG = np.random.default_rng(7)


def _vals(dtype, shape, lo=-20, hi=20, nonzero=False):
    if np.dtype(dtype).kind == "f":
        v = RNG.uniform(lo, hi, shape).astype(dtype)
        v[..., :3] = np.array([0.0, -0.0, 3.0], dtype)[: v.shape[-1]]
    else:
        v = RNG.integers(lo, hi, shape).astype(dtype)
    if nonzero:
        v[v == 0] = 1
    return v


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("n", [2, 3])
def test_add_n(dtype, n):
    xs = [_vals(dtype, (2, 3, 4)) for _ in range(n)]
    m = single_op_model("ADD_N", [In(x.shape, dtype) for x in xs], [Out((2, 3, 4), dtype)])
    assert_exact(m, xs)


@pytest.mark.parametrize("op,version", [("FLOOR_DIV", 1), ("FLOOR_DIV", 2), ("FLOOR_DIV", 3), ("FLOOR_MOD", 1),
                                        ("FLOOR_MOD", 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int16, np.int8])
def test_floor_div_mod(op, version, dtype):
    x = _vals(dtype, (2, 3, 5))
    y = _vals(dtype, (3, 1), -6, 6, nonzero=True)
    if np.dtype(dtype).kind == "f":
        y[0, 0], x[0, 0, :2] = 0.5, (1.5, -1.5)
    m = single_op_model(op, [In(x.shape, dtype), In(y.shape, dtype)], [Out((2, 3, 5), dtype)], version=version)
    assert_exact(m, [x, y])


def test_floor_div_is_a_double_quotient():
    # float32 division rounds 62.576534 / 0.6075392 up to 103.0; the double quotient floors to 102
    x, y = np.array([[62.576534, 6.0, 7.0, -7.0]], np.float32), np.array([[0.6075392, 3.0, 7.0, 7.0]], np.float32)
    m = single_op_model("FLOOR_DIV", [In(x.shape), Const(y)], [Out(x.shape)], version=2)
    assert_exact(m, [x])


@pytest.mark.parametrize("dtype,version", [(np.float32, 1), (np.int32, 2)])
def test_sign(dtype, version):
    x = _vals(dtype, (3, 7))
    if dtype == np.float32:
        x[0, :6] = (np.nan, -np.inf, 1e-30, -0.0, -np.nan, -1e-45)
    m = single_op_model("SIGN", [In(x.shape, dtype)], [Out(x.shape, dtype)], version=version)
    assert_exact(m, [x])


def test_constant_zero_divisor_is_unsupported():
    from acelera import Interpreter
    m = single_op_model("FLOOR_MOD", [In((3,), np.int32), Const(np.array([1, 0, 3], np.int32))],
                        [Out((3,), np.int32)])
    with pytest.raises(Exception, match="division by zero"):
        Interpreter(model_content=m).allocate_tensors()


@pytest.mark.parametrize("op,dtype,q", [
    ("DIV", np.int32, None), ("DIV", np.int8, (0.5, 3)), ("DIV", np.int16, (0.5, 0)),
    ("FLOOR_DIV", np.int32, None), ("FLOOR_DIV", np.float32, None), ("FLOOR_MOD", np.int32, None)])
def test_runtime_zero_divisor_fails_the_invoke_like_litert(op, dtype, q):
    """allocate_tensors (whose shape pass feeds zeros) succeeds; an invoke with a divisor equal
    to zero (its zero point, quantized) fails with one AceleraError line, as LiteRT's does."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from acelera import AceleraError, Interpreter

    m = single_op_model(op, [In((4,), dtype, q), In((4,), dtype, q)], [Out((4,), dtype, q)])
    zero = 0 if q is None else q[1]
    x = np.array([5, 6, 7, 8], dtype)
    good, bad = np.array([1, 2, 4, 5], dtype), np.array([1, zero, 4, 5], dtype)
    it = Interpreter(model_content=m)
    it.allocate_tensors()
    lite = LiteRT(model_content=m)
    lite.allocate_tensors()
    for interp in (it, lite):
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.set_tensor(interp.get_input_details()[1]["index"], good)
        interp.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]),
                                  lite.get_tensor(lite.get_output_details()[0]["index"]))
    for interp in (it, lite):
        interp.set_tensor(interp.get_input_details()[1]["index"], bad)
    with pytest.raises(RuntimeError):
        lite.invoke()
    with pytest.raises(AceleraError, match="(?i)division by (zero|0)"):
        it.invoke()
