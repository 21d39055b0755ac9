"""xnnpack-cpu's wider op table (issue #15): the ops, versions and options LiteRT's current XNNPACK
delegate takes (tflite/delegates/xnnpack/xnnpack_delegate.cc) beyond the older fact sheet, plus
int8 AVERAGE_POOL_2D and SOFTMAX, each compared with acelera's reference kernels through the
delegate (float32 within 1e-5 of max(1, |ref|), int8 bit-exact) with every node delegated.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xnnpack_testing import run
from xnnpack_wide_cases import FLOAT_CASES, INT8_CASES, QX, QY, fc, reduce

from acelera import Interpreter, load_delegate
from acelera.core.builder import In, Out, single_op_model
from acelera.core.interpreter import OpResolverType
from acelera.plugins.xnnpack_cpu import jit

F32, I8 = np.float32, np.int8
ZOO = Path(__file__).parent / "models" / "zoo"


@pytest.fixture(autouse=True)
def numba_kernels(monkeypatch):
    monkeypatch.setattr(jit, "AVAILABLE", True)


def check(model: bytes, lo: float = -2.0, hi: float = 2.0, rel: float = 1e-5) -> None:
    want, got, it, _ = run(model, lo=lo, hi=hi)
    n = len(it.model.main.operators)
    assert it.delegation.nodes_of("xnnpack-cpu") == list(range(n)), it.delegation.rejections
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.issubdtype(w.dtype, np.floating):
            finite = np.abs(w[np.isfinite(w)])
            bound = rel * max(1.0, float(np.max(finite, initial=0)))
            np.testing.assert_allclose(g, w, rtol=0, atol=bound)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("case", sorted(FLOAT_CASES))
def test_float_ops_match_the_reference_and_are_delegated(case):
    model, rng = FLOAT_CASES[case]
    check(model, *(rng or (-2.0, 2.0)))


@pytest.mark.parametrize("case", ["MEAN_group_norm_5d", "MEAN_outer_and_mid", "MEAN_duplicate_axes"])
def test_mean_over_axes_apart_is_native(case):
    """MEAN over axes that are not one contiguous range (norm_net's group norm) runs on
    jit.mean_nd inside the native run, not on numpy."""
    want, got, it, d = run(FLOAT_CASES[case][0])
    assert [len(k.steps) for k in d.kernels] == [1]
    assert getattr(d.kernels[0].steps[0], "__qualname__", "") == "bind.<locals>.<lambda>"
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-5 * max(1.0, float(np.max(np.abs(want[0])))))


@pytest.mark.parametrize("case", sorted(INT8_CASES))
def test_int8_ops_are_bit_exact_and_delegated(case):
    check(INT8_CASES[case])


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_float_reduce_max_min_skip_nan_like_the_reference(op):
    """LiteRT keeps the running value when a comparison with NaN fails (np.fmax / np.fmin from the
    lowest / highest finite float), so a NaN only shows where a row has nothing else."""
    model = reduce(op, (3, 4), [1], (3,))
    x = np.array([[np.nan, 1, 2, -1], [np.nan] * 4, [np.inf, -np.inf, 0, np.nan]], F32)
    outs = []
    for delegates in ([], [load_delegate("xnnpack-cpu")]):
        it = Interpreter(model_content=model, experimental_delegates=delegates,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    assert it.delegation.nodes_of("xnnpack-cpu") == [0]
    np.testing.assert_array_equal(outs[1], outs[0])


def verdict(model: bytes):
    it = Interpreter(model_content=model)
    return load_delegate("xnnpack-cpu").is_node_supported(it._rt.ex.node_context(0))


@pytest.mark.parametrize("model, reason", [
    (fc((3, 40), (3, 9), 8, False), "version 8 (sparse weights) is not supported"),
    (single_op_model("FULLY_CONNECTED", [In((3, 40)), In((9, 40)), None], [Out((3, 9))], version=5),
     "filter must be static"),
    (reduce("MEAN", (2, 3), [], (2, 3)), "1 to 6 of them"),
    (single_op_model("MEAN", [In((2, 3, 4)), In((1,), np.int32)], [Out((2, 4))]), "axes must be static"),
    (single_op_model("BATCH_MATMUL", [In((5,)), In((5, 3))], [Out((3,))]), "at least 2-D"),
    (single_op_model("SOFTMAX", [In((3, 17), I8, QX)], [Out((3, 17), I8, QY)], version=2, beta=1.0),
     "output scale must be 1/256"),
])
def test_rules_reject_with_readable_reasons(model, reason):
    s = verdict(model)
    assert not s.ok and reason in s.reason, s.reason


@pytest.mark.parametrize("name, most", [("transformer_encoder_float32", 99), ("vit_mini_float32", 101),
                                        ("norm_net_float32", 42)])
def test_zoo_transformers_are_mostly_delegated_and_agree(name, most):
    """Their FULLY_CONNECTED v5, BATCH_MATMUL, MEAN over the channels, RSQRT and GELU nodes used to
    split them into 11 to 24 partitions on the CPU kernels."""
    want, got, it, _ = run((ZOO / f"{name}.tflite").read_bytes())
    assert len(it.delegation.nodes_of("xnnpack-cpu")) >= most, it.delegation.rejections
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-4 * max(1.0, float(np.max(np.abs(w)))))
