"""Conformance case generators of the custom ops: TFLite_Detection_PostProcess, AudioSpectrogram,
Mfcc, NumericVerify, aeq.hadamard_rotation.

Generators as described in generators_kit.py (the contract, `DTYPES`, the tensor helpers);
generators_more.py imports this module to register them.
"""
from __future__ import annotations

import numpy as np
from flatbuffers import flexbuffers

from acelera.conformance.generators_kit import FLOAT, _gen, _ivec, _out_int, _per_dtype
from acelera.conformance.templates import QUANT_DTYPES, OpTemplate, T, _int

_DETECTION = "TFLite_Detection_PostProcess"


@_gen(_DETECTION, dtypes=("FLOAT32", "UINT8"))
def detection_postprocess(op: str) -> list[OpTemplate]:
    """Box encodings and class scores as inputs, anchors constant; a score threshold of 0 and
    more boxes than detections, so that every output row is written (LiteRT leaves rows past
    the detection count uninitialized)."""
    def tpl(label, n_boxes, n_classes, max_det, per_det, fast, iou):
        opts = {"max_detections": max_det, "max_classes_per_detection": per_det, "num_classes": n_classes,
                "nms_score_threshold": 0.0, "nms_iou_threshold": iou, "y_scale": 10.0, "x_scale": 10.0,
                "h_scale": 5.0, "w_scale": 5.0, "use_regular_nms": not fast}
        d = max_det * per_det
        ins = (T((1, n_boxes, 4), domain=(-1, 1)), T((1, n_boxes, n_classes + 1), domain=(0.05, 1)),
               T((n_boxes, 4), const=True, domain=(0.2, 0.8)))
        outs = (T((1, d, 4), dtype="FLOAT32"), T((1, d), dtype="FLOAT32"), T((1, d), dtype="FLOAT32"),
                T((1,), dtype="FLOAT32"))
        return _custom(op, ins, outs, opts, label)
    return [tpl("fast_nms", 12, 3, 3, 1, True, 0.9), tpl("regular_nms", 10, 2, 4, 1, False, 0.9)]


def _custom(code: str, ins: tuple, outs: tuple, opts: dict, label: str, **kw) -> OpTemplate:
    return OpTemplate("CUSTOM", ins, outs, {}, label, custom_code=code, custom_options=bytes(flexbuffers.Dumps(opts)),
                      **kw)


@_gen("AudioSpectrogram", dtypes=FLOAT)
def audio_spectrogram(op: str) -> list[OpTemplate]:
    def tpl(label, samples, channels, window, stride, squared):
        fft = 1 << (window - 1).bit_length()
        frames = 1 + (samples - window) // stride
        return _custom(op, (T((samples, channels)),), (T((channels, frames, fft // 2 + 1)),),
                       {"window_size": window, "stride": stride, "magnitude_squared": squared}, label)
    return [tpl("window16_stride8", 64, 1, 16, 8, False), tpl("stereo_window20_squared", 50, 2, 20, 10, True)]


@_gen("Mfcc", dtypes=FLOAT)
def mfcc(op: str) -> list[OpTemplate]:
    def tpl(label, shape, rate, lower, upper, channels, n_dct):
        opts = {"upper_frequency_limit": upper, "lower_frequency_limit": lower,
                "filterbank_channel_count": channels, "dct_coefficient_count": n_dct}
        return _custom(op, (T(shape, domain=(0.0, 2.0)), _int(rate)), (T(shape[:2] + (n_dct,)),), opts, label)
    return [tpl("rate8k_13", (1, 3, 33), 8000, 20, 4000, 20, 13),
            tpl("rate16k_2ch", (2, 2, 65), 16000, 100, 7000, 12, 8)]


@_gen("NumericVerify", dtypes=("INT8", "UINT8", "INT16", "FLOAT16"))
def numeric_verify(op: str) -> list[OpTemplate]:
    def tpl(label, shape, opts, **kw):
        ins = (T(shape, domain=(-2, 2)), T(shape, dtype="FLOAT32", domain=(-2, 2)))
        return _custom(op, ins, (T(shape, dtype="FLOAT32"),), opts, label, **kw)
    return [tpl("differences", (2, 3, 4), {"tolerance": 0.0, "log_if_failed": False}),
            tpl("checked_within_tolerance", (1, 4, 4, 2), {"tolerance": 1e6, "log_if_failed": True},
                dtypes=frozenset(QUANT_DTYPES))]


@_gen("aeq.hadamard_rotation", dtypes=("FLOAT32", "INT32"))
def hadamard_rotation(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        def tpl(label, shape, size, out_type="FLOAT32"):
            if dt == "FLOAT32":
                x = T(shape)
            else:  # LiteRT reads INT32 data as float32 bits: give it float bits
                n = int(np.prod(shape))
                x = _ivec(np.linspace(-2, 2, n, dtype=np.float32).view(np.int32).reshape(shape))
            y = T(shape, dtype="FLOAT32") if out_type == "FLOAT32" else _out_int(shape)
            return _custom(op, (x,), (y,), {"hadamard_size": size}, label)
        return [tpl("2d_size8", (2, 16), 8), tpl("3d_size4", (1, 3, 12), 4, dt)]
    return _per_dtype(("FLOAT32", "INT32"), make)
