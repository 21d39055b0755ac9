"""The custom ops of LiteRT's BuiltinOpResolver (AudioSpectrogram, Mfcc, NumericVerify,
aeq.hadamard_rotation) against LiteRT.

LiteRT's BUILTIN_REF resolver (ai-edge-litert 2.3) has no aeq.hadamard_rotation, so that op is
compared with the builtin resolver (`reference="builtin"`), which holds LiteRT's only kernel for it.
"""
from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import assert_exact, assert_matches_litert, run_acelera, run_litert

from acelera.core.builder import In, Out, single_op_model
from acelera.core.errors import AceleraError
from acelera.core.executor import KernelError
from acelera.core.interpreter import Interpreter

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def custom(code: str, inputs, outputs, **options) -> bytes:
    return single_op_model("CUSTOM", inputs, outputs, custom_code=code, custom_options=flexbuffers.Dumps(options))


def allocate_error(model: bytes) -> AceleraError:
    it = Interpreter(model_content=model)
    with pytest.raises(AceleraError) as e:
        it.allocate_tensors()
    return e.value


def litert_fails(model: bytes, inputs, reference=True) -> bool:
    try:
        run_litert(model, inputs, reference)
    except Exception:
        return True
    return False


# --- AudioSpectrogram --------------------------------------------------------------------

def spectrogram_model(samples: int, channels: int, window: int, stride: int, squared: bool) -> bytes:
    return custom("AudioSpectrogram", [In((samples, channels), np.float32)], [Out((1, 1, 1), np.float32)],
                  window_size=window, stride=stride, magnitude_squared=squared)


@SETTINGS
@given(samples=st.integers(1, 300), channels=st.integers(1, 3), window=st.integers(2, 70),
       stride=st.integers(1, 40), squared=st.booleans(), seed=st.integers(0, 2**31))
def test_audio_spectrogram_matches_litert(samples, channels, window, stride, squared, seed):
    x = np.random.default_rng(seed).uniform(-1, 1, (samples, channels)).astype(np.float32)
    got = assert_matches_litert(spectrogram_model(samples, channels, window, stride, squared), [x])[0]
    frames = 0 if samples < window else 1 + (samples - window) // stride
    assert got.shape == (channels, frames, (1 << (window - 1).bit_length()) // 2 + 1)


def test_audio_spectrogram_of_a_tone_peaks_at_its_bin():
    t = np.arange(1024, dtype=np.float64)
    x = np.sin(2 * np.pi * 32 * t / 256).astype(np.float32)[:, None]  # bin 32 of a 256-point FFT
    got = assert_matches_litert(spectrogram_model(1024, 1, 256, 128, False), [x])[0]
    assert got.shape == (1, 7, 129) and (np.argmax(got[0], axis=1) == 32).all()


@pytest.mark.parametrize("shape,opts,match", [
    ((100,), {"window_size": 8, "stride": 4}, "samples, channels"),
    ((100, 1), {"window_size": 1, "stride": 4}, "window_size 1"),
    ((100, 1), {"stride": 4}, "window_size 0"),
    ((100, 1), {"window_size": 8, "stride": 0}, "stride 0"),
])
def test_audio_spectrogram_bad_models_are_refused(shape, opts, match):
    m = custom("AudioSpectrogram", [In(shape, np.float32)], [Out((1, 1, 1), np.float32)], **opts)
    err = allocate_error(m)
    assert "node 0 (AudioSpectrogram)" in str(err) and match in str(err)
    assert litert_fails(m, [np.zeros(shape, np.float32)])


# --- Mfcc --------------------------------------------------------------------------------

def mfcc_model(shape, upper=4000, lower=20, channels=40, dct=13) -> bytes:
    return custom("Mfcc", [In(shape, np.float32), In((1,), np.int32)], [Out((1, 1, 1), np.float32)],
                  upper_frequency_limit=upper, lower_frequency_limit=lower, filterbank_channel_count=channels,
                  dct_coefficient_count=dct)


@SETTINGS
@given(frames=st.integers(1, 4), bins=st.integers(2, 300), rate=st.sampled_from([8000, 16000, 22050, 44100]),
       lower=st.integers(0, 300), upper=st.integers(1000, 9000), channels=st.integers(1, 40), data=st.data(),
       seed=st.integers(0, 2**31))
def test_mfcc_matches_litert(frames, bins, rate, lower, upper, channels, data, seed):
    dct = data.draw(st.integers(1, channels))
    x = np.random.default_rng(seed).uniform(0, 10, (2, frames, bins)).astype(np.float32)
    got = assert_matches_litert(mfcc_model((2, frames, bins), upper, lower, channels, dct),
                                [x, np.array([rate], np.int32)])[0]
    assert got.shape == (2, frames, dct)


def test_mfcc_on_a_spectrogram_is_close_to_litert():
    """The usual pipeline: AudioSpectrogram (squared) then Mfcc with the defaults of TF's op."""
    rng = np.random.default_rng(7)
    audio = rng.uniform(-1, 1, (4000, 1)).astype(np.float32)
    spec = run_litert(spectrogram_model(4000, 1, 480, 160, True), [audio])[0]
    got = assert_matches_litert(mfcc_model(spec.shape), [spec, np.array([16000], np.int32)])[0]
    assert got.shape == (1, spec.shape[1], 13) and np.isfinite(got).all()


def test_mfcc_of_a_spectrogram_too_short_for_the_upper_limit_is_zero():
    """LiteRT's filterbank returns nothing when the spectrogram ends below the upper frequency
    limit, and its DCT of nothing is zeros."""
    x = np.ones((1, 2, 20), np.float32)
    got = assert_exact(mfcc_model((1, 2, 20), upper=4000), [x, np.array([1000], np.int32)])[0]
    np.testing.assert_array_equal(got, np.zeros((1, 2, 13), np.float32))


def test_mfcc_without_coefficients_is_empty():
    got = assert_exact(mfcc_model((1, 3, 10), dct=0), [np.ones((1, 3, 10), np.float32), np.array([8000], np.int32)])
    assert got[0].shape == (1, 3, 0)


@pytest.mark.parametrize("rate", [0, -16000])
def test_mfcc_bad_sample_rate_fails_the_invoke(rate):
    m = mfcc_model((1, 2, 257))
    inputs = [np.ones((1, 2, 257), np.float32), np.array([rate], np.int32)]
    assert litert_fails(m, inputs)
    it = Interpreter(model_content=m)
    it.allocate_tensors()
    for d, v in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], v)
    with pytest.raises(KernelError, match="sample rate"):
        it.invoke()


@pytest.mark.parametrize("kw,match", [
    ({"upper": 20, "lower": 20}, "upper_frequency_limit"),
    ({"lower": -5}, "negative"),
    ({"channels": 0}, "filterbank_channel_count 0"),
    ({"channels": 10, "dct": 11}, "exceeds"),
    ({"dct": -1}, "negative"),
])
def test_mfcc_bad_options_are_refused(kw, match):
    m = mfcc_model((1, 2, 257), **kw)
    err = allocate_error(m)
    assert "node 0 (Mfcc)" in str(err) and match in str(err)
    if kw.get("dct", 13) >= 0:
        assert litert_fails(m, [np.ones((1, 2, 257), np.float32), np.array([16000], np.int32)])


def test_mfcc_missing_options_read_as_zero():
    """LiteRT reads a missing key as 0, so an Mfcc without limits is refused like upper <= lower."""
    m = custom("Mfcc", [In((1, 2, 257), np.float32), In((1,), np.int32)], [Out((1, 2, 13), np.float32)],
               dct_coefficient_count=13, filterbank_channel_count=40)
    assert "upper_frequency_limit 0" in str(allocate_error(m))


# --- NumericVerify -----------------------------------------------------------------------

QUANTIZED = [(np.int8, (0.1, 3)), (np.uint8, (0.05, 128)), (np.int16, (0.01, 5)), (np.float16, None),
             (np.int8, ([0.1, 0.2, 0.3], [1, 2, 3], 1)), (np.uint8, ([0.1, 0.02], [100, 120], 0))]


def verify_model(shape, dt, quant, tolerance=0.0, log_if_failed=False) -> bytes:
    return custom("NumericVerify", [In(shape, dt, quant), In(shape, np.float32)], [Out(shape, np.float32)],
                  tolerance=tolerance, log_if_failed=log_if_failed)


@pytest.mark.parametrize("dt,quant", QUANTIZED)
@pytest.mark.parametrize("tolerance,log_if_failed", [(0.0, False), (0.05, True), (5.0, False)])
def test_numeric_verify_outputs_the_differences(dt, quant, tolerance, log_if_failed):
    rng = np.random.default_rng(11)
    shape = (2, 3) if quant is None or np.ndim(quant[0]) == 0 or len(quant[0]) == 3 else (2, 4)
    x = (rng.standard_normal(shape) * 20).astype(dt)
    ref = rng.standard_normal(shape).astype(np.float32)
    assert_exact(verify_model(shape, dt, quant, tolerance, log_if_failed), [x, ref])


@pytest.mark.parametrize("dt,quant", QUANTIZED)
def test_numeric_verify_fails_the_invoke_past_the_tolerance(dt, quant):
    """log_if_failed with a tolerance >= 0.1: |dequantized - reference| > tolerance * scale fails."""
    shape = (2, 3) if quant is None or np.ndim(quant[0]) == 0 or len(quant[0]) == 3 else (2, 4)
    m = verify_model(shape, dt, quant, tolerance=2.0, log_if_failed=True)
    x = np.zeros(shape, dt)
    close = np.zeros(shape, np.float32)  # the dequantized zeros themselves: within any tolerance
    if quant is not None:
        scale, zp = np.asarray(quant[0], np.float32), np.asarray(quant[1], np.float32)
        if scale.ndim:
            view = [1] * len(shape)
            view[quant[2]] = scale.size
            scale, zp = scale.reshape(view), zp.reshape(view)
        close = close + (-zp * scale).astype(np.float32)
    assert_exact(m, [x, close])
    far = close + np.float32(1.0)
    assert litert_fails(m, [x, far])
    with pytest.raises(KernelError, match="mismatch at element 0"):
        run_acelera(m, [x, far])


@pytest.mark.parametrize("x_dt,ref_dt,out_dt,quant,match", [
    (np.float32, np.float32, np.float32, None, "input type FLOAT32"),
    (np.int8, np.int32, np.float32, (0.1, 0), "reference must be FLOAT32"),
    (np.int8, np.float32, np.int8, (0.1, 0), "output type INT8"),
    (np.int16, np.float32, np.float32, ([0.1, 0.2], [0, 0], 1), "per-channel INT16"),
])
def test_numeric_verify_bad_types_are_refused(x_dt, ref_dt, out_dt, quant, match):
    m = custom("NumericVerify", [In((3, 2), x_dt, quant), In((3, 2), ref_dt)], [Out((3, 2), out_dt)], tolerance=0.0)
    err = allocate_error(m)
    assert "node 0 (NumericVerify)" in str(err) and match in str(err)


# --- aeq.hadamard_rotation ---------------------------------------------------------------

def hadamard_model(shape, dt, size, out_dt=None) -> bytes:
    return custom("aeq.hadamard_rotation", [In(shape, dt)], [Out(shape, out_dt or dt)], hadamard_size=size,
                  random_binary_vector=[1, -1, 1, 1])


@SETTINGS
@given(log_size=st.integers(0, 8), batch=st.sampled_from([None, 1, 2]), features=st.integers(1, 3),
       per_row=st.integers(1, 3), extra=st.integers(0, 3), dt=st.sampled_from([np.float32, np.int32]),
       seed=st.integers(0, 2**31))
def test_hadamard_rotation_matches_litert(log_size, batch, features, per_row, extra, dt, seed):
    size = 1 << log_size
    shape = (features, size * per_row + extra)
    if batch is not None:
        shape = (batch,) + shape
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    # INT32 input is read as float32 bits; finite float patterns keep NaN payloads out of the test
    x = x.view(np.int32) if dt == np.int32 else x
    assert_exact(hadamard_model(shape, dt, size), [x], reference="builtin")


def test_hadamard_rotation_is_orthonormal():
    x = np.random.default_rng(2).standard_normal((3, 256)).astype(np.float32)
    got = assert_exact(hadamard_model((3, 256), np.float32, 256), [x], reference="builtin")[0]
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), np.linalg.norm(x, axis=1), rtol=1e-5)


@pytest.mark.parametrize("size", [6, 12, -4])
def test_hadamard_rotation_of_other_sizes_copies(size):
    """A size that is not a power of two leaves every chunk unchanged, as in LiteRT."""
    x = np.random.default_rng(3).standard_normal((2, 12)).astype(np.float32)
    got = assert_exact(hadamard_model((2, 12), np.float32, size), [x], reference="builtin")[0]
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("shape,dt,size,out_dt,match", [
    ((8,), np.float32, 8, None, "rank 2 or 3"),
    ((2, 8), np.float32, 0, None, "hadamard_size must not be 0"),
    ((2, 8), np.int8, 8, None, "input type INT8"),
    ((2, 8), np.float32, 8, np.int16, "output type INT16"),
])
def test_hadamard_rotation_bad_models_are_refused(shape, dt, size, out_dt, match):
    err = allocate_error(hadamard_model(shape, dt, size, out_dt))
    assert "node 0 (aeq.hadamard_rotation)" in str(err) and match in str(err)
