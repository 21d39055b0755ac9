"""gpu-gl against acelera's CPU reference and gpu-opencl, same run.

Per shared float model: the invoke latency of the CPU reference, gpu-opencl (when available)
and gpu-gl with fp32 storage (--gpu_precision_loss_allowed=false) and fp16 storage (the
default), plus gpu-gl's average absolute error against the reference, and gpu-gl's init time
(load_delegate + allocate_tensors: partitioning, compile, shader builds, buffer uploads; the
shaders are built once per process, so the first model pays for them).

Latencies are the best of --rounds interleaved rounds of median latencies.

Usage: python benchmarks/gpu_gl_vs_reference.py [--min-secs S] [--rounds N] [MODEL ...]
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import MODELS, feed, time_invoke  # noqa: E402

FLOAT_MODELS = ["face_detection_short_range", "face_landmark", "hand_recrop", "selfie_segmentation",
                "mobilenet_v2_96_f32", "small_cnn_f32"]


def interpreter(path: Path, delegate=None):
    from acelera import Interpreter

    it = Interpreter(model_path=str(path), experimental_delegates=[delegate] if delegate else None)
    it.allocate_tensors()
    return it


def main() -> None:
    from acelera import load_delegate
    from acelera.registrar.registry import get_registry

    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=FLOAT_MODELS)
    ap.add_argument("--min-secs", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    reg = get_registry()
    avail = reg.availability("gpu-gl")
    if not avail.ok:
        print(f"gpu-gl is unavailable: {avail.reason}")
        return
    with_cl = reg.availability("gpu-opencl").ok
    print("| model | reference us | gpu-opencl fp16 us | gpu-gl fp32 us | gpu-gl fp16 us | gl fp16/ref "
          "| avg err fp32 | avg err fp16 | gl init ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.models:
        path = MODELS / f"{name}.tflite"
        rng = np.random.default_rng(0)
        its = {"ref": interpreter(path)}
        t0 = time.perf_counter()
        its["gl32"] = interpreter(path, load_delegate("gpu-gl", {"gpu_precision_loss_allowed": False}))
        init_ms = (time.perf_counter() - t0) * 1e3
        its["gl16"] = interpreter(path, load_delegate("gpu-gl"))
        if with_cl:
            its["cl16"] = interpreter(path, load_delegate("gpu-opencl"))
        feed(its["ref"], rng)
        for k, it in its.items():
            if k != "ref":
                for d in its["ref"].get_input_details():
                    it.set_tensor(d["index"], its["ref"].get_tensor(d["index"]))
        best = {k: float("inf") for k in its}
        for _ in range(args.rounds):
            for k, it in its.items():
                best[k] = min(best[k], time_invoke(it.invoke, min_secs=args.min_secs))
        outs = {k: [it.get_tensor(o["index"]).astype(np.float64) for o in it.get_output_details()]
                for k, it in its.items()}
        err = {k: float(np.mean([np.mean(np.abs(a - b)) for a, b in zip(outs[k], outs["ref"])]))
               for k in ("gl32", "gl16")}
        cl = f"{best['cl16']:.0f}" if with_cl else "n/a"
        print(f"| {name} | {best['ref']:.0f} | {cl} | {best['gl32']:.0f} | {best['gl16']:.0f} | "
              f"{best['gl16'] / best['ref']:.2f} | {err['gl32']:.1e} | {err['gl16']:.1e} | {init_ms:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
