"""gpu-opencl against acelera's CPU reference (and xnnpack-cpu when available), same run.

Part 1, latency: per shared float model, the median invoke latency of the CPU reference,
xnnpack-cpu (when its plugin is available here), and gpu-opencl with fp32 storage
(--gpu_precision_loss_allowed=false) and fp16 storage (the default), plus gpu-opencl's
inference_diff-style average error against the reference.

Part 2, initialization with the serialization cache (--delegate_serialize_dir/_token): each
measurement runs in a fresh process with a fresh driver kernel cache (PoCL's POCL_CACHE_DIR),
so "cold" really compiles; "warm" is a second process finding the cache entry. Init is
load_delegate + allocate_tensors (partitioning, prepare and the first checking run).
Target: warm <= 10% of cold.

Latencies are the best of --rounds interleaved rounds (robust to load from other processes).

Usage: python benchmarks/gpu_vs_reference.py [--min-secs S] [--rounds N] [--skip-init] [MODEL ...]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import MODELS, feed, time_invoke, timed_cached_init  # noqa: E402

FLOAT_MODELS = ["face_detection_short_range", "face_landmark", "hand_recrop", "selfie_segmentation",
                "mobilenet_v2_96_f32", "small_cnn_f32"]


def interpreter(path: Path, delegate=None):
    from acelera.core.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path), experimental_delegates=[delegate] if delegate else None,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    feed(it, np.random.default_rng(0))
    return it


def avg_error(ref, it) -> float:
    errs = [float(np.mean(np.abs(ref.get_tensor(o["index"]).astype(np.float64)
                                 - it.get_tensor(o["index"]).astype(np.float64))))
            for o in ref.get_output_details()]
    return max(errs)


def latency(paths, min_secs: float, rounds: int) -> None:
    """Configurations are timed in interleaved rounds (each round a median over min_secs /
    rounds); the best round counts, so load from other processes hits every column alike."""
    import warnings

    from acelera import load_delegate
    from acelera.registrar.registry import get_registry

    reg = get_registry()
    xnn = reg.availability("xnnpack-cpu") if "xnnpack-cpu" in reg.specs else None
    dev = reg.availability("gpu-opencl")
    if not dev.ok:
        print(f"gpu-opencl is unavailable: {dev.reason}")
        return
    print(f"gpu-opencl device: {dev.reason}")
    if xnn is None or not xnn.ok:
        print(f"xnnpack-cpu: not measured ({'not installed' if xnn is None else xnn.reason})")
    cols = ["reference", "xnnpack-cpu", "gpu fp32", "gpu fp16"]
    print(f"{'model':30} " + " ".join(f"{c + ' us':>14}" for c in cols)
          + f" {'fp32/ref':>9} {'fp16/ref':>9} {'err fp32':>9} {'err fp16':>9}")
    for path in paths:
        ref = interpreter(path)
        ref.invoke()
        its = {"reference": ref}
        notes = []
        if xnn is not None and xnn.ok:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                it = interpreter(path, load_delegate("xnnpack-cpu"))
            its["xnnpack-cpu"] = it
            if it.delegation.failures or caught:
                notes.append("xnnpack-cpu partly on the CPU reference")
        errs = []
        for half in (False, True):
            it = interpreter(path, load_delegate("gpu-opencl", {"gpu_precision_loss_allowed": half}))
            it.invoke()
            errs.append(avg_error(ref, it))
            its["gpu fp16" if half else "gpu fp32"] = it
        best = {k: float("inf") for k in its}
        for _ in range(rounds):
            for k, it in its.items():
                best[k] = min(best[k], time_invoke(it.invoke, min_runs=3, min_secs=min_secs / rounds, warmup=1))
        row = [best.get(c, float("nan")) for c in cols]
        t_ref = row[0]
        print(f"{path.stem:30} " + " ".join(f"{v:14.1f}" for v in row)
              + f" {row[2] / t_ref:9.2f} {row[3] / t_ref:9.2f} {errs[0]:9.2e} {errs[1]:9.2e}"
              + (f"  ({'; '.join(notes)})" if notes else ""), flush=True)


def child(path: str, cache_dir: str) -> None:
    """One initialization in this (fresh) process; prints JSON."""
    print(json.dumps(timed_cached_init("gpu-opencl", path, cache_dir)[1]))


def init_times(paths) -> None:
    print(f"\n{'model':30} {'cold init ms':>13} {'warm init ms':>13} {'warm/cold':>10}  (fresh process each; "
          "driver kernel cache emptied)")
    for path in paths:
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as pocl1, \
                tempfile.TemporaryDirectory() as pocl2:
            res = []
            for pocl in (pocl1, pocl2):
                env = dict(os.environ, POCL_CACHE_DIR=pocl, PYOPENCL_NO_CACHE="1")
                out = subprocess.run([sys.executable, __file__, "--child", str(path), cache], env=env,
                                     capture_output=True, text=True, check=True)
                res.append(json.loads(out.stdout.strip().splitlines()[-1]))
            cold, warm = res
            assert cold["how"] == "compiled" and warm["how"] == "cache", res
            print(f"{path.stem:30} {cold['init'] * 1e3:13.0f} {warm['init'] * 1e3:13.0f} "
                  f"{warm['init'] / cold['init']:10.1%}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--min-secs", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-init", action="store_true")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    paths = args.models or [MODELS / f"{m}.tflite" for m in FLOAT_MODELS]
    latency(paths, args.min_secs, args.rounds)
    if not args.skip_init:
        init_times(paths)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
