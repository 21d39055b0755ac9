"""The custom ops LiteRT's BuiltinOpResolver registers: AudioSpectrogram, Mfcc, NumericVerify and
aeq.hadamard_rotation (tflite/kernels/audio_spectrogram.cc, internal/spectrogram.cc, mfcc.cc,
internal/mfcc.cc, internal/mfcc_mel_filterbank.cc, internal/mfcc_dct.cc, numeric_verify.cc,
dequantize.h, hadamard_rotation.cc).

Their options are FlexBuffer maps read the way LiteRT's accessors read them: a missing key is 0
(Mfcc has no defaults: every limit must be given), a float read as an integer truncates, a
string is parsed as a number.

- AudioSpectrogram: input [samples, channels] float32 -> [channels, frames, fft_length / 2 + 1]
  with frames = 1 + (samples - window_size) // stride (0 when too short). Each frame is weighted
  by a periodic Hann window and zero-padded to the next power of two; the squared magnitude of
  its real FFT is computed in double and stored as float32 (square-rooted in float32 unless
  magnitude_squared). LiteRT uses Ooura's rdft, this kernel numpy's FFT: both in double, so
  outputs differ by float32 rounding at most.
- Mfcc: spectrogram [channels, frames, bins] float32 and a sample rate (int32) -> [channels,
  frames, dct_coefficient_count]: sqrt of each bin, triangular mel filterbank (HTK style, bins
  outside [lower, upper] dropped), log with a 1e-12 floor, DCT-II with sqrt(2/N) scaling, all in
  double in LiteRT's order. A spectrogram too short for the upper frequency limit gives zeros,
  as in LiteRT.
- NumericVerify: float32 output = dequantize(input) - reference; with log_if_failed and a
  tolerance >= 0.1 the invoke fails where |difference| > tolerance * scale.
- aeq.hadamard_rotation: the normalized fast Walsh-Hadamard transform over consecutive chunks
  of hadamard_size float32 values, in LiteRT's butterfly order. LiteRT reads INT32 input bits as
  float32 and so does this kernel; a size that is not a power of two leaves the data unchanged.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from acelera.core import model as _model
from acelera.core.errors import KernelError
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register

F32 = np.float32


# --- FlexBuffer options ------------------------------------------------------------------

def _options(node: NodeContext) -> dict[str, Any]:
    from flatbuffers import flexbuffers

    data = bytes(node.op.custom_options or b"")
    if not data:
        return {}
    try:
        root = flexbuffers.Loads(data)
    except Exception as e:  # malformed buffers raise anything from IndexError to struct.error
        raise node.unsupported(f"custom options are not a valid FlexBuffer: {type(e).__name__}: {e}") from None
    if not isinstance(root, dict):
        raise node.unsupported(f"custom options must be a FlexBuffer map, got {type(root).__name__}")
    return root


def _as_int64(v: Any) -> int:
    """flexbuffers::Reference::AsInt64: a missing key is 0, floats truncate, strings parse."""
    if v is None:
        return 0
    if isinstance(v, (bool, int)):
        return int(v)
    if isinstance(v, float):
        return int(v) if math.isfinite(v) else 0
    if isinstance(v, (str, bytes)):
        s = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        m = re.match(r"\s*([+-]?\d+)", s)
        return int(m.group(1)) if m else 0
    if isinstance(v, (list, tuple, dict)):
        return len(v)
    return 0


def _as_int32(v: Any) -> int:
    """AsInt64 narrowed to a C int (wrapping)."""
    u = _as_int64(v) & 0xFFFFFFFF
    return u - (1 << 32) if u >= 1 << 31 else u


def _as_float(v: Any) -> float:
    """flexbuffers::Reference::AsFloat."""
    if isinstance(v, float):
        return float(F32(v))
    if isinstance(v, (str, bytes)):
        s = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        m = re.match(r"\s*([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)", s)
        return float(F32(float(m.group(1)))) if m else 0.0
    return float(F32(_as_int64(v)))


def _as_bool(v: Any) -> bool:
    if isinstance(v, float):
        return v != 0.0
    return _as_int64(v) != 0


def _check_bytes(node: NodeContext, n_bytes: float, what: str) -> None:
    if n_bytes > _model.MAX_TENSOR_BYTES:
        raise node.unsupported(f"{what} needs {int(n_bytes)} bytes (limit {_model.MAX_TENSOR_BYTES})")


def _io(node: NodeContext, n_in: int, n_out: int) -> None:
    if len(node.inputs) != n_in or len(node.outputs) != n_out or any(t is None for t in node.inputs):
        raise node.unsupported(f"takes {n_in} inputs and {n_out} outputs, got {len(node.inputs)} and "
                               f"{len(node.outputs)}")


# --- AudioSpectrogram --------------------------------------------------------------------

def _next_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length()


@register("AudioSpectrogram", max_version=1, dtypes=("FLOAT32",))
def audio_spectrogram(node: NodeContext) -> Kernel:
    _io(node, 1, 1)
    opts = _options(node)
    window = _as_int32(opts.get("window_size"))
    stride = _as_int32(opts.get("stride"))
    squared = _as_bool(opts.get("magnitude_squared"))
    x_t, out_t = node.inputs[0], node.outputs[0]
    assert x_t is not None  # _io refused missing inputs
    if len(x_t.shape) != 2:
        raise node.unsupported(f"input must be [samples, channels], got shape {list(x_t.shape)}")
    if out_t.type_name != "FLOAT32" or x_t.type_name != "FLOAT32":
        raise node.unsupported(f"input and output must be FLOAT32, got {x_t.type_name} and {out_t.type_name}")
    if window < 2:
        raise node.unsupported(f"window_size {window} is too short (at least 2)")
    if stride < 1:
        raise node.unsupported(f"stride {stride} must be positive")
    samples, channels = x_t.shape
    fft_len = _next_power_of_two(window)
    bins = fft_len // 2 + 1
    frames = 0 if samples < window else 1 + (samples - window) // stride
    _check_bytes(node, 4.0 * channels * frames * bins, "the output")
    _check_bytes(node, 16.0 * channels * frames * fft_len, "the FFT of every frame")
    # a window longer than the input makes no frame (and no Hann window to allocate)
    hann = 0.5 - 0.5 * np.cos((2.0 * math.pi * np.arange(window)) / window) if frames else None

    def run(x: np.ndarray) -> np.ndarray:
        if frames == 0 or channels == 0:
            return np.zeros((channels, frames, bins), F32)
        assert hann is not None  # made whenever there are frames
        starts = np.arange(frames) * stride
        seg = x.T.astype(np.float64)[:, starts[:, None] + np.arange(window)[None, :]]
        spec = np.fft.rfft(seg * hann, n=fft_len, axis=-1)
        power = (spec.real * spec.real + spec.imag * spec.imag).astype(F32)
        return power if squared else np.sqrt(power)

    return run


# --- Mfcc --------------------------------------------------------------------------------

_FILTERBANK_FLOOR = 1e-12


def _freq_to_mel(freq):
    return 1127.0 * np.log1p(np.asarray(freq, np.float64) / 700.0)


class _MelFilterbank:
    """MfccMelFilterbank::Initialize for one sample rate."""

    def __init__(self, input_length: int, rate: float, channels: int, lower: float, upper: float):
        self.channels = channels
        mel_low, mel_hi = float(_freq_to_mel(lower)), float(_freq_to_mel(upper))
        spacing = (mel_hi - mel_low) / float(channels + 1)
        centers = mel_low + spacing * (np.arange(channels + 1) + 1)
        hz_per_sbin = 0.5 * rate / float(input_length - 1)
        self.start = int(1.5 + lower / hz_per_sbin)
        self.end = int(upper / hz_per_sbin)
        band = np.full(input_length, -2, np.int64)
        weights = np.zeros(input_length)
        ch = 0
        for i in range(input_length):
            melf = float(_freq_to_mel(i * hz_per_sbin))
            if i < self.start or i > self.end:
                continue
            while ch < channels and centers[ch] < melf:
                ch += 1
            band[i] = ch - 1
            if ch - 1 >= 0:
                weights[i] = (centers[ch] - melf) / (centers[ch] - centers[ch - 1])
            else:
                weights[i] = (centers[0] - melf) / (centers[0] - mel_low)
        self.band, self.weights = band, weights

    def compute(self, frames: np.ndarray) -> np.ndarray:
        """Mel energies of (n, input_length) squared-magnitude frames (double), in LiteRT's order."""
        out = np.zeros((frames.shape[0], self.channels))
        for i in range(self.start, self.end + 1):
            spec = np.sqrt(frames[:, i])
            weighted = spec * self.weights[i]
            ch = int(self.band[i])
            if ch >= 0:
                out[:, ch] += weighted
            if ch + 1 < self.channels:
                out[:, ch + 1] += spec - weighted
        return out


@register("Mfcc", max_version=1, dtypes=("FLOAT32",))
def mfcc(node: NodeContext) -> Kernel:
    _io(node, 2, 1)
    opts = _options(node)
    # LiteRT stores the limits (read as integers) in floats
    upper = float(F32(_as_int64(opts.get("upper_frequency_limit"))))
    lower = float(F32(_as_int64(opts.get("lower_frequency_limit"))))
    channels = _as_int32(opts.get("filterbank_channel_count"))
    n_dct = _as_int32(opts.get("dct_coefficient_count"))
    wav_t, rate_t = node.inputs
    assert wav_t is not None and rate_t is not None  # _io refused missing inputs
    out_t = node.outputs[0]
    if len(wav_t.shape) != 3:
        raise node.unsupported(f"the spectrogram must have rank 3, got shape {list(wav_t.shape)}")
    if int(np.prod(rate_t.shape, dtype=np.int64)) != 1 or rate_t.type_name != "INT32":
        raise node.unsupported(f"the sample rate must be one INT32 value, got {rate_t.type_name}"
                               f"{list(rate_t.shape)}")
    if wav_t.type_name != "FLOAT32" or out_t.type_name != "FLOAT32":
        raise node.unsupported(f"spectrogram and output must be FLOAT32, got {wav_t.type_name} and "
                               f"{out_t.type_name}")
    if n_dct < 0:
        raise node.unsupported(f"dct_coefficient_count {n_dct} is negative")
    audio, samples, length = wav_t.shape
    out_shape = (audio, samples, n_dct)
    _check_bytes(node, 8.0 * audio * samples * max(n_dct, channels, 1), "the output")
    if n_dct > 0:
        # Mfcc::Initialize fails on these, and the invoke with it
        if channels < 1:
            raise node.unsupported(f"filterbank_channel_count {channels} must be positive")
        if length < 2:
            raise node.unsupported(f"the spectrogram needs at least 2 bins, got {length}")
        if lower < 0:
            raise node.unsupported(f"lower_frequency_limit {lower:g} is negative")
        if upper <= lower:
            raise node.unsupported(f"upper_frequency_limit {upper:g} is not above lower_frequency_limit {lower:g}")
        if n_dct > channels:
            raise node.unsupported(f"dct_coefficient_count {n_dct} exceeds filterbank_channel_count {channels}")
        _check_bytes(node, 8.0 * n_dct * channels, "the DCT table")
        i = np.arange(n_dct, dtype=np.float64)[:, None]
        j = np.arange(channels, dtype=np.float64)[None, :]
        cosines = math.sqrt(2.0 / channels) * np.cos(i * (math.pi / channels) * (j + 0.5))
    banks: dict[int, _MelFilterbank] = {}

    def run(wav: np.ndarray, rate: np.ndarray) -> np.ndarray:
        if n_dct == 0 or wav.size == 0:
            return np.zeros(out_shape, F32)
        sample_rate = int(np.asarray(rate).reshape(-1)[0])
        if sample_rate <= 0:
            if in_shape_pass():
                return np.zeros(out_shape, F32)
            raise KernelError(f"sample rate {sample_rate} must be positive")
        bank = banks.get(sample_rate)
        if bank is None:
            bank = banks[sample_rate] = _MelFilterbank(length, float(sample_rate), channels, lower, upper)
        frames = wav.reshape(-1, length).astype(np.float64)
        if length <= bank.end:
            return np.zeros(out_shape, F32)  # LiteRT's filterbank gives nothing, its DCT zeros
        mel = bank.compute(frames)
        working = np.log(np.where(mel < _FILTERBANK_FLOOR, _FILTERBANK_FLOOR, mel))
        out = np.zeros((frames.shape[0], n_dct))
        for k in range(channels):
            out += cosines[:, k][None, :] * working[:, k:k + 1]
        return out.astype(F32).reshape(out_shape)

    return run


# --- NumericVerify -----------------------------------------------------------------------

@register("NumericVerify", max_version=1, dtypes=("UINT8", "INT8", "INT16", "FLOAT16"))
def numeric_verify(node: NodeContext) -> Kernel:
    _io(node, 2, 1)
    opts = _options(node)
    tolerance = F32(_as_float(opts.get("tolerance")))
    log_if_failed = _as_bool(opts.get("log_if_failed"))
    x_t, ref_t = node.inputs
    assert x_t is not None and ref_t is not None  # _io refused missing inputs
    out_t = node.outputs[0]
    if x_t.type_name not in ("UINT8", "INT8", "INT16", "FLOAT16"):
        raise node.unsupported(f"input type {x_t.type_name} is not supported (UINT8, INT8, INT16, FLOAT16)")
    if ref_t.type_name != "FLOAT32":
        raise node.unsupported(f"the reference must be FLOAT32, got {ref_t.type_name}")
    if out_t.type_name != "FLOAT32":
        raise node.unsupported(f"output type {out_t.type_name} is not supported (LiteRT makes it FLOAT32)")
    n = int(np.prod(x_t.shape, dtype=np.int64))
    if int(np.prod(ref_t.shape, dtype=np.int64)) < n:
        raise node.unsupported(f"the reference {list(ref_t.shape)} has fewer elements than the input "
                               f"{list(x_t.shape)}")
    q = x_t.quantization
    per_channel = q.is_set and q.scale.size > 1
    scale = F32(q.scale[0]) if q.is_set and q.scale.size else F32(0.0)
    zp = int(q.zero_point[0]) if q.is_set and q.zero_point.size else 0
    if per_channel:
        if x_t.type_name not in ("UINT8", "INT8"):
            raise node.unsupported(f"per-channel {x_t.type_name} input is not supported")
        axis = int(q.quantized_dimension)
        if not 0 <= axis < len(x_t.shape) or x_t.shape[axis] != q.scale.size:
            raise node.unsupported("per-channel quantization does not match the input shape")
        view = [1] * len(x_t.shape)
        view[axis] = q.scale.size
        scales = np.asarray(q.scale, F32).reshape(view)
        zps = np.asarray(q.zero_point if q.zero_point.size == q.scale.size else
                         np.full(q.scale.size, q.zero_point[0]), np.int64).reshape(view)
    check = bool(log_if_failed and float(tolerance) >= 0.1)
    # LiteRT's per-tensor params hold no scale for a per-channel tensor: its bound is then 0
    max_diff = F32(tolerance * (F32(0.0) if per_channel else scale))
    out_shape = tuple(x_t.shape)

    def dequantize(x: np.ndarray) -> np.ndarray:
        if x.dtype == np.float16:
            return x.astype(F32)
        if per_channel:
            return (x.astype(np.int64) - zps).astype(F32) * scales
        return (np.float64(scale) * (x.astype(np.int64) - zp)).astype(F32)

    def run(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
        diff = dequantize(x).reshape(-1) - np.asarray(ref, F32).reshape(-1)[:x.size]
        if check and not in_shape_pass():
            bad = np.nonzero(np.abs(diff) > max_diff)[0]
            if bad.size:
                i = int(bad[0])
                raise KernelError(f"mismatch at element {i}: |{float(diff[i]):g}| > {float(max_diff):g} "
                                  f"(tolerance {float(tolerance):g} x scale {float(scale):g})")
        return diff.astype(F32).reshape(out_shape)

    return run


# --- aeq.hadamard_rotation ---------------------------------------------------------------

def fwht(chunks: np.ndarray) -> np.ndarray:
    """Normalized fast Walsh-Hadamard transform of each row (float32, rows of power-of-two size)."""
    n = chunks.shape[1]
    data = chunks.astype(F32, copy=True)
    h = 1
    while h < n:
        v = data.reshape(data.shape[0], n // (2 * h), 2, h)
        x, y = v[:, :, 0, :].copy(), v[:, :, 1, :].copy()
        v[:, :, 0, :] = x + y
        v[:, :, 1, :] = x - y
        h *= 2
    data *= F32(1.0 / math.sqrt(n))
    return data


@register("aeq.hadamard_rotation", max_version=1, dtypes=("FLOAT32", "INT32"))
def hadamard_rotation(node: NodeContext) -> Kernel:
    _io(node, 1, 1)
    opts = _options(node)
    size = _as_int32(opts.get("hadamard_size"))
    x_t, out_t = node.inputs[0], node.outputs[0]
    assert x_t is not None  # _io refused missing inputs
    if x_t.type_name not in ("FLOAT32", "INT32"):
        raise node.unsupported(f"input type {x_t.type_name} is not supported (FLOAT32, INT32)")
    if out_t.type_name not in ("FLOAT32", "INT32"):
        raise node.unsupported(f"output type {out_t.type_name} is not supported (FLOAT32, INT32)")
    shape = tuple(x_t.shape)
    if len(shape) < 2:
        raise node.unsupported(f"input must have rank 2 or 3, got shape {list(shape)}")
    if size == 0:
        raise node.unsupported("hadamard_size must not be 0")
    n = int(np.prod(shape, dtype=np.int64))
    if int(np.prod(out_t.shape, dtype=np.int64)) != n:
        raise node.unsupported(f"output shape {list(out_t.shape)} does not hold the input's {n} values")
    batch, features, width = (shape[0], shape[1], shape[2]) if len(shape) == 3 else (1, shape[0], shape[1])
    per_row = width // size if size > 0 else -(width // -size)  # C++ division truncates toward zero
    transforms = batch * features * per_row
    power_of_two = size > 0 and size & (size - 1) == 0
    out_shape, out_dtype = tuple(out_t.shape), out_t.dtype

    def run(x: np.ndarray) -> np.ndarray:
        data = np.ascontiguousarray(x).view(F32).reshape(-1).copy()
        if transforms > 0 and power_of_two:
            m = transforms * size
            data[:m] = fwht(data[:m].reshape(transforms, size)).reshape(-1)
        return data.view(out_dtype).reshape(out_shape)

    return run
