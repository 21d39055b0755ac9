"""The compiled quantized FULLY_CONNECTED loops (acelera/core/kernels/fc_int_native.py) against the
numpy path it replaces (fully_connected._constant_run without them), bit for bit,
and both against LiteRT: int8, uint8 and int16x8, per-tensor and per-channel, with and without
bias, power-of-two scales (exact ties in the requantization), input zero points and clamping
activations."""
from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_matches_litert, random_input

from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.kernels import fc_int_native, fully_connected

ACTS = ["NONE", "RELU", "RELU_N1_TO_1", "RELU6"]
# (input, weights, output dtype, version)
COMBOS = [(np.int8, np.int8, np.int8, 4), (np.uint8, np.uint8, np.uint8, 1), (np.int16, np.int8, np.int16, 7)]


def _model(rng: np.random.Generator, combo, trial: int):
    x_dt, w_dt, o_dt, version = combo
    rows, k, units = int(rng.integers(1, 5)), int(rng.integers(1, 40)), int(rng.integers(1, 24))
    pot = trial % 2 == 0  # power-of-two scales: the scaled accumulators hit exact halves
    in_scale = 2.0 ** -int(rng.integers(3, 8)) if pot else float(rng.uniform(0.005, 0.1))
    in_zp = 0 if x_dt == np.int16 else int(rng.integers(-20, 20)) + (128 if x_dt == np.uint8 else 0)
    per_channel = x_dt != np.uint8 and trial % 3 == 0
    if per_channel:
        w_scales = (2.0 ** -rng.integers(5, 9, units) if pot else rng.uniform(0.002, 0.02, units)).astype(np.float32)
        wq = (w_scales, np.zeros(units, np.int64), 0)
    else:
        w_scales = np.float32(2.0 ** -6 if pot else rng.uniform(0.002, 0.02))
        wq = (float(w_scales), 0 if w_dt == np.int8 else int(rng.integers(100, 156)))
    o_zp = 0 if o_dt == np.int16 else int(rng.integers(-10, 10)) + (128 if o_dt == np.uint8 else 0)
    target = 8000.0 if o_dt == np.int16 else 40.0
    spread = 19000.0 if x_dt == np.int16 else 74.0
    out_scale = float(in_scale * np.median(w_scales) * np.sqrt(k) * spread * 74.0 / target)
    if pot:
        out_scale = 2.0 ** round(np.log2(out_scale))
    w = random_input((units, k), w_dt, rng)
    bias = None
    if trial % 4 != 1:
        b_scale = (np.float32(in_scale) * np.asarray(w_scales, np.float32)).astype(np.float32)
        lim = int(4 * np.sqrt(k) * 74 * 74) + 1  # an int16 input needs an int64 bias (BUILTIN_REF reads it so)
        bias = Const(rng.integers(-lim, lim, units).astype(np.int64 if x_dt == np.int16 else np.int32), (b_scale, np.zeros(np.size(b_scale), np.int64)))
    m = single_op_model("FULLY_CONNECTED", [In((rows, k), x_dt, (in_scale, in_zp)), Const(w, wq), bias],
                        [Out((rows, units), o_dt, (out_scale, o_zp))], version=version,
                        fused_activation_function=ACTS[trial % 4])
    return m, [random_input((rows, k), x_dt, rng) for _ in range(3)]


def _invoke(m: bytes, xs: list) -> list:
    it = Interpreter(model_content=m, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    outs = []
    for x in xs:
        it.set_tensor(i, x)
        it.invoke()
        outs.append(it.get_tensor(o).copy())
    return outs


def _no_native(monkeypatch) -> None:
    monkeypatch.setattr(fully_connected, "fc_int_kernel", lambda: None)
    monkeypatch.setattr(fully_connected, "fc_f32_kernel", lambda: None)


@pytest.mark.parametrize("combo", COMBOS, ids=["int8", "uint8", "int16x8"])
def test_native_loop_matches_numpy_path_and_litert(combo, monkeypatch):
    assert fc_int_native.fc_int_kernel() is not None  # numba is a dependency
    assert fc_int_native.fc_f32_kernel() is not None
    rng = np.random.default_rng(11 + combo[3])
    for trial in range(16):
        m, xs = _model(rng, combo, trial)
        native = _invoke(m, xs)
        _no_native(monkeypatch)
        numpy_path = _invoke(m, xs)
        monkeypatch.undo()
        for a, b in zip(native, numpy_path):
            assert a.dtype == b.dtype == combo[2]
            np.testing.assert_array_equal(a, b)
        if trial % 4 == 0:
            assert_matches_litert(m, xs[:1])


def test_numpy_path_matches_litert(monkeypatch):
    """The numpy fallback alone (numba unavailable) against LiteRT."""
    _no_native(monkeypatch)
    rng = np.random.default_rng(5)
    for combo in COMBOS:
        for trial in range(4):
            m, xs = _model(rng, combo, trial)
            assert_matches_litert(m, xs[:1])


def test_both_loops_are_used():
    """8-bit inputs accumulate in float32 (their sums are exact there), int16 inputs in int64."""
    rng = np.random.default_rng(3)
    for combo in COMBOS:
        m, xs = _model(rng, combo, 1)
        _invoke(m, xs)
    assert fc_int_native.fc_f32_kernel().signatures and fc_int_native.fc_int_kernel().signatures
