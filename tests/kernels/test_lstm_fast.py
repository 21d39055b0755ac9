"""The LSTM kernels' sequence loops against LiteRT.

The numba loops (sequence_native through lstm_float.NativeDirection: LSTM and
UNIDIRECTIONAL_SEQUENCE_LSTM without layer norm, peephole, diagonal weights or a NONE activation;
lstm_integer.NativeSequence: the 8x8_16 kernel without layer norm or peephole), and the numpy
loops run without numba (lstm_float._FastLoop, lstm_integer.IntegerSequence: no projection),
over the variants their arithmetic takes: input products through one-hot columns or added per
step, per-step views made at prepare or not; recurrent multipliers that shift right (by 1, or by
20 and more: the int64 matmul), not at all or left, the cell scale inside or below LiteRT's tanh
range (the output then reads the input gate, and i * g wraps in int16), CIFG, cell clip,
projection, the hidden zero point, biases large enough for the input accumulators to wrap.
Several invokes carry the states over; integer outputs are bit-exact, float ones within 1e-4 of
max(1, |ref|).
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acelera.core.builder import ModelBuilder
from acelera.core.interpreter import Interpreter
from acelera.core.kernels import lstm_float, lstm_integer, sequence_native

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FLOAT_ACTS = ["TANH", "TANH", "RELU", "RELU_N1_TO_1", "RELU6", "SIGN_BIT"]


def _litert(model: bytes):
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType
    return LiteRT(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF, num_threads=1)


def _invoke_all(it, feeds, states):
    it.allocate_tensors()
    for i, v in states.items():
        it.set_tensor(i, v)
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    results = []
    for x in feeds:
        it.set_tensor(inp["index"], x)
        it.invoke()
        results.append(it.get_tensor(out["index"]))
    return results


def assert_matches(model: bytes, feeds, states, tol: float = 1e-4) -> None:
    want = _invoke_all(_litert(model), feeds, states)
    got = _invoke_all(Interpreter(model_content=model), feeds, states)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, g.shape, w.dtype, w.shape)
        if np.issubdtype(w.dtype, np.floating):
            err = float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0))
            assert err <= tol * max(1.0, float(np.max(np.abs(w), initial=0.0))), f"invoke {k}: max error {err}"
        else:
            diff = np.count_nonzero(g != w)
            assert diff == 0, f"invoke {k}: {diff} of {w.size} values differ\n{g}\n{w}"


@contextmanager
def recording(cls, method: str):
    """Records (instance, args) of each call of cls.method while it runs as before."""
    calls = []
    orig = getattr(cls, method)

    def wrapper(self, *args, **kw):
        calls.append((self, args))
        return orig(self, *args, **kw)
    with mock.patch.object(cls, method, wrapper):
        yield calls


def lstm_model(op: str, mode: str, *, n_batch, n_time, n_input, n_cell, n_output, cifg=False, proj=False,
               proj_bias=False, act="TANH", cell_clip=0.0, proj_clip=0.0, time_major=False, seed=0,
               w_scale=0.02, r_scale=0.02, bias_range=3000, cell_log2=-11, hidden_zp=0, h_zp=0, x_zp=0):
    """An LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM node (20 inputs), float or integer (8x8_16): the model,
    the input shape and the state tensor indices."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    x_shape = (n_batch, n_input) if op == "LSTM" else (
        (n_time, n_batch, n_input) if time_major else (n_batch, n_time, n_input))
    out_shape = x_shape[:-1] + (n_output,)
    integer = mode == "integer"

    def weights(name, shape, scale):
        if integer:
            return b.add_constant(name, rng.integers(-127, 128, shape).astype(np.int8), (scale, 0))
        return b.add_constant(name, (rng.standard_normal(shape) * 0.5).astype(np.float32))

    def vector(name, n):
        if integer:
            return b.add_constant(name, rng.integers(-bias_range, bias_range + 1, n).astype(np.int32), (1e-5, 0))
        return b.add_constant(name, (rng.standard_normal(n) * 0.3).astype(np.float32))
    gates = "fco" if cifg else "ifco"
    w = {g: weights("w" + g, (n_cell, n_input), w_scale) for g in gates}
    r = {g: weights("r" + g, (n_cell, n_output), r_scale) for g in gates}
    bias = {g: vector("b" + g, n_cell) for g in gates}
    if integer:
        x = b.add_input("x", x_shape, np.int8, (1 / 64, x_zp))
        h = b.add_tensor("h", (n_batch, n_output), np.int8, (1 / 128, h_zp), is_variable=True)
        c = b.add_tensor("c", (n_batch, n_cell), np.int16, (2.0 ** cell_log2, 0), is_variable=True)
        y = b.add_tensor("y", out_shape, np.int8, (1 / 128, h_zp))
        inter = [b.add_tensor(f"inter{k}", (1,), np.int16, (float(rng.uniform(2e-4, 6e-4)), 0)) for k in range(4)]
        inter.append(b.add_tensor("inter4", (1,), np.int8, (float(rng.uniform(0.006, 0.01)), hidden_zp)))
    else:
        x = b.add_input("x", x_shape, np.float32)
        h = b.add_tensor("h", (n_batch, n_output), np.float32, is_variable=True)
        c = b.add_tensor("c", (n_batch, n_cell), np.float32, is_variable=True)
        y = b.add_tensor("y", out_shape, np.float32)
        inter = []
    ins = [x] + [w.get(g, -1) for g in "ifco"] + [r.get(g, -1) for g in "ifco"] + [-1, -1, -1]
    ins += [bias.get(g, -1) for g in "ifco"]
    ins += [weights("pw", (n_output, n_cell), 0.03) if proj else -1]
    ins += [vector("pb", n_output) if proj and proj_bias else -1]
    ins += [h, c]
    opts = dict(fused_activation_function=act, cell_clip=cell_clip, proj_clip=proj_clip)
    if op == "LSTM":
        opts["kernel_type"] = "FULL"
    else:
        opts["time_major"] = time_major
    b.add_operator(op, ins, [y], version=3 if integer else 1, intermediates=inter, **opts)
    b.mark_outputs(y)
    return b.build(), x_shape, (h, c)


def feeds_and_states(case: dict, mode: str, x_shape, states, n_invokes: int = 3):
    rng = np.random.default_rng(case["seed"] + 1)
    h, c = states
    sh, sc = (case["n_batch"], case["n_output"]), (case["n_batch"], case["n_cell"])
    if mode == "integer":
        feeds = [rng.integers(-128, 128, x_shape).astype(np.int8) for _ in range(n_invokes)]
        return feeds, {h: rng.integers(-128, 128, sh).astype(np.int8),
                       c: rng.integers(-4000, 4000, sc).astype(np.int16)}
    feeds = [rng.uniform(-1.5, 1.5, x_shape).astype(np.float32) for _ in range(n_invokes)]
    return feeds, {h: rng.uniform(-1, 1, sh).astype(np.float32), c: rng.uniform(-1, 1, sc).astype(np.float32)}


def check(op: str, mode: str, case: dict, n_invokes: int = 3, native: bool = True) -> list:
    """Runs the case against LiteRT with the numba loops (or, native=False, as without numba);
    returns the loops that ran ((instance, args) pairs)."""
    model, x_shape, states = lstm_model(op, mode, **case)
    feeds, init = feeds_and_states(case, mode, x_shape, states, n_invokes)
    if native:
        cls, method = (lstm_integer.NativeSequence, "__call__") if mode == "integer" else (
            lstm_float.NativeDirection, "__call__")
    else:
        cls, method = (lstm_integer.IntegerSequence, "_run") if mode == "integer" else (lstm_float._FastLoop, "run")
    without_numba = mock.patch.object(sequence_native, "kernels", lambda: None)
    with without_numba if not native else nullcontext(), recording(cls, method) as calls:
        assert_matches(model, feeds, init)
    return calls


# --- float ---------------------------------------------------------------------------------------

@st.composite
def float_case(draw, sequence: bool = True):
    n_cell = draw(st.integers(1, 8))
    proj = draw(st.booleans())
    return dict(n_batch=draw(st.integers(1, 3)), n_time=draw(st.integers(1, 12)) if sequence else 1,
                n_input=draw(st.integers(1, 5)), n_cell=n_cell, n_output=draw(st.integers(1, 6)) if proj else n_cell,
                cifg=draw(st.booleans()), proj=proj, proj_bias=draw(st.booleans()),
                act=draw(st.sampled_from(FLOAT_ACTS)), cell_clip=draw(st.sampled_from([0.0, 0.5, 3.0])),
                proj_clip=draw(st.sampled_from([0.0, 0.3])), time_major=draw(st.booleans()),
                seed=draw(st.integers(0, 2 ** 31 - 1)))


@SETTINGS
@given(case=float_case())
def test_float_sequence(case):
    assert check("UNIDIRECTIONAL_SEQUENCE_LSTM", "float", case)
    assert check("UNIDIRECTIONAL_SEQUENCE_LSTM", "float", case, native=False)


@settings(SETTINGS, max_examples=15)
@given(case=float_case(sequence=False))
def test_float_lstm(case):
    assert check("LSTM", "float", case)
    assert check("LSTM", "float", case, native=False)


@pytest.mark.parametrize("n_time, n_batch, time_major", [(130, 2, False), (90, 3, True), (4100, 1, False)])
def test_float_long_sequences(n_time, n_batch, time_major):
    """Past ONE_HOT_MACS the input products are added per step; past VIEW_STEPS steps the
    per-step views are made at each invoke."""
    case = dict(n_batch=n_batch, n_time=n_time, n_input=3, n_cell=4, n_output=4, cell_clip=3.0,
                time_major=time_major, seed=n_time)
    assert check("UNIDIRECTIONAL_SEQUENCE_LSTM", "float", case, n_invokes=2)
    loops = check("UNIDIRECTIONAL_SEQUENCE_LSTM", "float", case, n_invokes=2, native=False)
    assert loops and not loops[0][0].one_hot
    assert (loops[0][0].views is None) == (n_time > lstm_float.VIEW_STEPS)


@pytest.mark.parametrize("native", [True, False])
def test_float_non_finite_inputs(native):
    """An inf or nan input step spoils that step and the later ones only (the one-hot columns
    would carry 0 * inf into every step: such invokes add the input products per step)."""
    case = dict(n_batch=2, n_time=6, n_input=3, n_cell=4, n_output=4, cell_clip=3.0, seed=7)
    model, x_shape, (h, c) = lstm_model("UNIDIRECTIONAL_SEQUENCE_LSTM", "float", **case)
    x = np.random.default_rng(7).uniform(-1, 1, x_shape).astype(np.float32)
    x[0, 3, 1], x[1, 4, 0] = np.inf, np.nan
    feeds, states = [x, np.zeros(x_shape, np.float32)], {h: np.zeros((2, 4), np.float32),
                                                          c: np.zeros((2, 4), np.float32)}
    want = _invoke_all(_litert(model), feeds, states)
    with mock.patch.object(sequence_native, "kernels", lambda: None) if not native else nullcontext():
        got = _invoke_all(Interpreter(model_content=model), feeds, states)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(np.nan_to_num(g), np.nan_to_num(w), atol=1e-4)
    assert np.isfinite(got[0][1, :4]).all() and np.isnan(got[0][1, 4:]).all()


# --- integer -------------------------------------------------------------------------------------

# Recurrent weight scales (h scale 1/128, gate scale 2^-12): multipliers 0.64 (no shift), 0.16
# (shift right 2), 3.2e-7 (right 21: past float64's exact range, the int64 matmul), 3.2 (left 2).
R_SCALES = {"unshifted": 0.02, "right": 0.005, "far_right": 1e-8, "left": 0.1}


@st.composite
def integer_case(draw, sequence: bool = True):
    n_cell = draw(st.integers(1, 8))
    cifg = draw(st.booleans())
    proj = draw(st.booleans())
    return dict(n_batch=draw(st.integers(1, 3)), n_time=draw(st.integers(1, 10)) if sequence else 1,
                n_input=draw(st.integers(1, 6)), n_cell=n_cell, n_output=draw(st.integers(1, 6)) if proj else n_cell,
                cifg=cifg, proj=proj, proj_bias=draw(st.booleans()), proj_clip=draw(st.sampled_from([0.0, 0.3])),
                cell_clip=draw(st.sampled_from([0.0, 0.004, 0.05])), time_major=draw(st.booleans()),
                w_scale=draw(st.sampled_from([0.002, 0.01, 0.02, 0.06])),
                r_scale=R_SCALES[draw(st.sampled_from(sorted(R_SCALES)))],
                cell_log2=draw(st.sampled_from([-9, -11, -13, -15] + ([] if cifg else [-16, -20]))),
                hidden_zp=draw(st.integers(-3, 3)), h_zp=draw(st.integers(-5, 5)), x_zp=draw(st.integers(-10, 10)),
                seed=draw(st.integers(0, 2 ** 31 - 1)))


@SETTINGS
@given(case=integer_case())
def test_integer_sequence(case):
    assert check("UNIDIRECTIONAL_SEQUENCE_LSTM", "integer", case, n_invokes=4)
    assert bool(check("UNIDIRECTIONAL_SEQUENCE_LSTM", "integer", case, n_invokes=4, native=False)) != case["proj"]


@settings(SETTINGS, max_examples=15)
@given(case=integer_case(sequence=False))
def test_integer_lstm(case):
    assert check("LSTM", "integer", case)
    assert bool(check("LSTM", "integer", case, native=False)) != case["proj"]


@pytest.mark.parametrize("cifg, cell_log2", [(False, -11), (True, -12), (False, -18)])
@pytest.mark.parametrize("r_scale", sorted(R_SCALES))
def test_integer_variants(r_scale, cifg, cell_log2):
    """Each arithmetic variant of the loop runs (and matches): the float64 or int64 recurrent
    matmul, the tanh of the cell state or (below 2^-15) the input gate with i * g wrapping."""
    case = dict(n_batch=2, n_time=6, n_input=5, n_cell=4, n_output=4, cifg=cifg, cell_log2=cell_log2,
                r_scale=R_SCALES[r_scale], hidden_zp=2, h_zp=-3, x_zp=4, seed=len(r_scale))
    assert check("UNIDIRECTIONAL_SEQUENCE_LSTM", "integer", case)
    loops = check("UNIDIRECTIONAL_SEQUENCE_LSTM", "integer", case, native=False)
    seq, (rec, *_) = loops[0]
    assert rec.exact == (r_scale != "far_right")
    assert (seq.tanh is None) == (cell_log2 < -15) == seq.wrap


def test_integer_input_accumulators_that_wrap():
    """Biases near the int32 limit: the input products may wrap, so they take the general
    MultiplyByQuantizedMultiplier (the step loop stays fast)."""
    case = dict(n_batch=2, n_time=5, n_input=4, n_cell=3, n_output=3, bias_range=2 ** 31 - 1, seed=3)
    assert check("UNIDIRECTIONAL_SEQUENCE_LSTM", "integer", case)
    loops = check("UNIDIRECTIONAL_SEQUENCE_LSTM", "integer", case, native=False)
    assert loops and not loops[0][0].built[0].ok


def test_integer_long_sequence():
    case = dict(n_batch=1, n_time=4100, n_input=2, n_cell=3, n_output=3, seed=4)
    assert check("UNIDIRECTIONAL_SEQUENCE_LSTM", "integer", case, n_invokes=2)
    loops = check("UNIDIRECTIONAL_SEQUENCE_LSTM", "integer", case, n_invokes=2, native=False)
    assert loops and loops[0][0]._states(loops[0][1][0].dtype)[4] is None
