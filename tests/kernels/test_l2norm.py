import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_matches_litert, random_input

from acelera.core.builder import In, Out, single_op_model
from acelera.core.errors import UnsupportedOpError
from acelera.core.interpreter import Interpreter

QOUT = {np.uint8: (1 / 128, 128), np.int8: (1 / 128, 0)}


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.uint8, np.int8]),
       shape=st.lists(st.integers(1, 9), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1),
       scale=st.floats(0.01, 2.0), zp=st.integers(-20, 20))
def test_l2_normalization(dtype, shape, seed, scale, zp):
    rng = np.random.default_rng(seed)
    if dtype == np.float32:
        m = single_op_model("L2_NORMALIZATION", [In(shape)], [Out(shape)], fused_activation_function="NONE")
    else:
        zp = zp + 128 if dtype == np.uint8 else zp
        m = single_op_model("L2_NORMALIZATION", [In(shape, dtype, (scale, zp))], [Out(shape, dtype, QOUT[dtype])],
                            version=2, fused_activation_function="NONE")
    assert_matches_litert(m, [random_input(shape, dtype, rng)])


def test_large_depth_int8():
    shape = (2, 20000)  # sum of squares above 2**29
    m = single_op_model("L2_NORMALIZATION", [In(shape, np.int8, (0.1, -128))], [Out(shape, np.int8, QOUT[np.int8])],
                        version=2, fused_activation_function="NONE")
    x = np.full(shape, 127, np.int8)
    x[1, ::2] = -128
    assert_matches_litert(m, [x])


def test_bad_output_scale_is_unsupported():
    m = single_op_model("L2_NORMALIZATION", [In((1, 4), np.int8, (0.1, 0))], [Out((1, 4), np.int8, (0.5, 0))],
                        version=2, fused_activation_function="NONE")
    with pytest.raises(UnsupportedOpError, match="scale 1/128"):
        Interpreter(model_content=m).allocate_tensors()


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("rows", [1, 16, 17, 300])
def test_quantized_row_counts(dtype, rows):
    """Few rows take the per-row Python-int inverse square root, more the vectorized one; rows
    of zeros (sum 0) and single small values (sums 1..4) hit GetInvSqrtQuantizedMultiplierExp's
    low end."""
    from acelera.core.kernels.l2norm import SCALAR_ROWS
    assert 1 <= SCALAR_ROWS < 17
    rng = np.random.default_rng(rows)
    zp = 128 if dtype == np.uint8 else 0
    shape = (rows, 5)
    m = single_op_model("L2_NORMALIZATION", [In(shape, dtype, (0.05, zp))], [Out(shape, dtype, QOUT[dtype])],
                        version=2, fused_activation_function="NONE")
    x = random_input(shape, dtype, rng)
    x[0] = zp
    if rows > 2:
        x[1] = zp
        x[1, 2] = zp + 1
        x[2] = zp
        x[2, 0] = zp - 2
    assert_matches_litert(m, [x])
