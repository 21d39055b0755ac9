"""Whole shared models agree with LiteRT: float within 1e-4 x max|ref|, int8/int16 bit-exact."""
import numpy as np
import pytest
from oracle import assert_matches_litert, random_input

from acelera.core.model import load_model

FAST = ["sine_float", "sine_float_int8", "small_cnn_f32", "small_cnn_int8"]
SLOW = ["hand_recrop", "hand_recrop_int8", "face_detection_short_range", "face_detection_short_range_int8",
        "face_detection_short_range_int16x8", "face_landmark", "face_landmark_int8",
        "mobilenet_v2_96_f32", "mobilenet_v2_96_int8", "selfie_segmentation"]
# LiteRT's BUILTIN_REF resolver lacks MediaPipe's custom op: compare with its default resolver.
DEFAULT_RESOLVER = {"selfie_segmentation"}


def inputs_for(data: bytes, seed: int):
    rng = np.random.default_rng(seed)
    sg = load_model(data).main
    return [random_input(sg.tensors[i].shape, sg.tensors[i].dtype, rng) for i in sg.inputs]


def check(models_dir, name: str, seed: int = 0):
    data = (models_dir / f"{name}.tflite").read_bytes()
    assert_matches_litert(data, inputs_for(data, seed), reference=name not in DEFAULT_RESOLVER)


@pytest.mark.parametrize("name", FAST)
def test_fast_models(models_dir, name):
    check(models_dir, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_slow_models(models_dir, name):
    check(models_dir, name)
    check(models_dir, name, seed=7)
