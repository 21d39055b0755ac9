"""GPU backends' accuracy against the targets of issues #6/#7, with the floors that bound them.

Per shared float model, inference_diff's avg_error (the largest over the model's outputs) of:

- `litert opt`: LiteRT's optimized CPU kernels (its XNNPACK delegate for selfie_segmentation,
  whose custom op resolves nowhere else) against acelera's reference: how far two correct
  float32 implementations of the model land apart (the noise floor of the fp32 target, 1e-5);
- `fp32`: the GPU backend with --gpu_precision_loss_allowed=false;
- `fp16`: the GPU backend with precision loss allowed (half storage);
- `half floor`: the reference arithmetic with every weight and intermediate rounded to half
  (acelera.backends.gpu.half_floor): what half storage costs by itself (the floor of the fp16 target, 5e-3).

Usage: python benchmarks/gpu_precision.py [--backend gpu-opencl|gpu-gl] [--runs N] [MODEL ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import MODELS  # noqa: E402

FLOAT_MODELS = ["face_detection_short_range", "face_landmark", "hand_recrop", "selfie_segmentation",
                "mobilenet_v2_96_f32", "small_cnn_f32"]


def litert_gap(path: Path, runs: int) -> float:
    """avg |LiteRT optimized kernels - acelera reference| with inference_diff's inputs."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    from acelera.conformance.inference_diff import DEFAULT_SEED, random_inputs
    from acelera.core.interpreter import Interpreter
    from acelera.core.interpreter import OpResolverType as Resolver

    ref = Interpreter(model_path=str(path), experimental_op_resolver_type=Resolver.BUILTIN_REF)
    ref.allocate_tensors()
    try:
        lite = LiteRT(model_path=str(path), num_threads=1,
                      experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        lite.allocate_tensors()
    except RuntimeError:  # MediaPipe's custom op resolves only in LiteRT's XNNPACK delegate
        lite = LiteRT(model_path=str(path), num_threads=1)
        lite.allocate_tensors()
    rng = np.random.default_rng(DEFAULT_SEED)
    outs = ref.get_output_details()
    sums = np.zeros(len(outs))
    for _ in range(runs):
        xs = random_inputs(rng, ref.get_input_details())
        for it in (ref, lite):
            for d, x in zip(it.get_input_details(), xs):
                it.set_tensor(d["index"], x)
            it.invoke()
        for k, (a, b) in enumerate(zip(outs, lite.get_output_details())):
            sums[k] += np.mean(np.abs(ref.get_tensor(a["index"]).astype(np.float64) - lite.get_tensor(b["index"])))
    return float(np.max(sums / runs))


def main() -> int:
    from acelera import load_delegate
    from acelera.backends.gpu.half_floor import HalfStorageDelegate
    from acelera.conformance.inference_diff import diff
    from acelera.registrar.registry import get_registry

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--backend", default="gpu-opencl", choices=("gpu-opencl", "gpu-gl"))
    ap.add_argument("--runs", type=int, default=50, help="inference_diff runs per model (TFLite's default 50)")
    args = ap.parse_args()
    avail = get_registry().availability(args.backend)
    if not avail.ok:
        print(f"{args.backend} is unavailable: {avail.reason}")
        return 0
    paths = args.models or [MODELS / f"{m}.tflite" for m in FLOAT_MODELS]
    print(f"{load_delegate(args.backend).describe()}; inference_diff avg_error, {args.runs} runs; "
          "targets: fp32 <= 1e-5, fp16 <= 5e-3")
    print(f"{'model':30} {'litert opt':>11} {'fp32':>11} {'fp16':>11} {'half floor':>11}  fp16/floor")

    def err(path, d) -> float:
        r = diff(str(path), [d], num_runs=args.runs)
        return max(o.avg_value for o in r.output_errors)

    for path in paths:
        gap = litert_gap(path, args.runs)
        e32 = err(path, load_delegate(args.backend, {"gpu_precision_loss_allowed": False}))
        e16 = err(path, load_delegate(args.backend, {"gpu_precision_loss_allowed": True}))
        floor = err(path, HalfStorageDelegate())
        print(f"{path.stem:30} {gap:11.2e} {e32:11.2e} {e16:11.2e} {floor:11.2e}  {e16 / floor if floor else float('nan'):9.2f}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
