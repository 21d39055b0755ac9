"""The GPU backends' whole-model accuracy against its floors (benchmarks/gpu_precision.py).

fp16 (half storage): inference_diff's avg_error within 30% of the half-storage floor, the
error half storage costs by itself (gpu_plan.half_floor): the kernels add almost nothing.
fp32: avg_error at most 1e-5, or 1.5x the gap between LiteRT's optimized kernels and the
reference where two float32 implementations land further apart than that.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from needs import require

from acelera import load_delegate
from acelera.backends.gpu.half_floor import HalfStorageDelegate
from acelera.conformance.inference_diff import diff
from acelera.registrar.registry import get_registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from gpu_precision import litert_gap  # noqa: E402

RUNS = 20
pytestmark = pytest.mark.slow


def _err(path: Path, d) -> float:
    return max(o.avg_value for o in diff(str(path), [d], num_runs=RUNS).output_errors)


@pytest.fixture(scope="module")
def floors(models_dir):
    return {}


@pytest.mark.parametrize("backend", ["gpu-opencl", "gpu-gl"])
@pytest.mark.parametrize("model", ["face_detection_short_range", "hand_recrop"])
def test_fp16_error_is_the_half_storage_floor(backend, model, models_dir, floors):
    avail = get_registry().availability(backend)
    require(avail.ok, f"{backend} is unavailable here: {avail.reason}")
    path = models_dir / f"{model}.tflite"
    if model not in floors:
        floors[model] = _err(path, HalfStorageDelegate())
    e16 = _err(path, load_delegate(backend, {"gpu_precision_loss_allowed": True}))
    assert e16 <= 1.3 * floors[model], f"fp16 avg_error {e16:.3g} vs half-storage floor {floors[model]:.3g}"


@pytest.mark.parametrize("backend", ["gpu-opencl", "gpu-gl"])
@pytest.mark.parametrize("model", ["face_detection_short_range", "hand_recrop"])
def test_fp32_error_is_float32_noise(backend, model, models_dir):
    avail = get_registry().availability(backend)
    require(avail.ok, f"{backend} is unavailable here: {avail.reason}")
    path = models_dir / f"{model}.tflite"
    e32 = _err(path, load_delegate(backend, {"gpu_precision_loss_allowed": False}))
    bound = max(1e-5, 1.5 * litert_gap(path, RUNS))
    assert e32 <= bound, f"fp32 avg_error {e32:.3g} > {bound:.3g}"
