"""gpu-gl against acelera's CPU reference and gpu-opencl, same run.

Per shared float model: the invoke latency of the CPU reference, gpu-opencl (when available)
and gpu-gl with fp32 storage (--gpu_precision_loss_allowed=false) and fp16 storage (the
default), plus gpu-gl's average absolute error against the reference, and gpu-gl's init time
(load_delegate + allocate_tensors: partitioning, compile, shader builds, buffer uploads; the
shaders are built once per process, so the first model pays for them).

Latencies are the best of --rounds interleaved rounds of median latencies.

Part 2 (--init, or --init-only), initialization with the serialization cache
(--delegate_serialize_dir/_token): every measurement is a fresh process; init is
Interpreter + allocate_tensors (partitioning, prepare, the first checking run; load_delegate,
which makes the GL context, is left out). Mesa's own on-disk shader cache (MESA_SHADER_CACHE_DIR,
and __GL_SHADER_DISK_CACHE_PATH for NVIDIA's driver) is pointed at fresh directories, so:

- cold: nothing cached anywhere (a first run on this machine);
- warm: our cache entry, with the driver cache the cold run left (a second run);
- warm, driver cache emptied: our entry alone. On llvmpipe a program binary is Mesa's serialized
  NIR: the LLVM machine code is made at the first dispatch and cached only by Mesa's shader
  cache, so this column shows what the program binaries alone save;
- driver cache only: no entry of ours (a fresh serialization directory), the driver cache warm.

Target: warm <= 10% of cold.

Usage: python benchmarks/gpu_gl_vs_reference.py [--min-secs S] [--rounds N] [--init | --init-only] [MODEL ...]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
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
    return it


def child(path: str, cache_dir: str) -> None:
    """One initialization in this (fresh) process; prints JSON."""
    logging.disable(logging.WARNING)
    d, res = timed_cached_init("gpu-gl", path, cache_dir)
    print(json.dumps({**res, "device": d.dev.label, "binary_formats": len(d.dev.binary_formats)}))


def init_times(names) -> None:
    print("\n| model | cold init ms | warm init ms | warm/cold | warm, driver cache emptied ms | ratio "
          "| driver cache only ms |  (fresh process each)")
    print("|---|---:|---:|---:|---:|---:|---:|")
    label = ""
    for name in names:
        path = str(MODELS / f"{name}.tflite")
        with tempfile.TemporaryDirectory() as tmp:
            ours, other, drv1, drv2 = (os.path.join(tmp, d) for d in ("ours", "other", "drv1", "drv2"))

            def run(cache: str, drv: str) -> dict:
                env = dict(os.environ, MESA_SHADER_CACHE_DIR=drv, __GL_SHADER_DISK_CACHE_PATH=drv)
                os.makedirs(drv, exist_ok=True)
                out = subprocess.run([sys.executable, __file__, "--child", path, cache], env=env,  # noqa: B023  (run at once)
                                     capture_output=True, text=True, check=True)
                return json.loads(out.stdout.strip().splitlines()[-1])

            cold, warm, bare, driver = run(ours, drv1), run(ours, drv1), run(ours, drv2), run(other, drv1)
        hows = (cold["how"], warm["how"], bare["how"], driver["how"])
        assert hows[0] == hows[3] == "compiled" and hows[1].startswith("cache") and hows[2].startswith("cache"), hows
        label = f"{cold['device']}; program binary formats: {cold['binary_formats']}; warm entries: {warm['how']}"
        ms = lambda r: r["init"] * 1e3  # noqa: E731
        print(f"| {name} | {ms(cold):.0f} | {ms(warm):.0f} | {ms(warm) / ms(cold):.1%} | {ms(bare):.0f} | "
              f"{ms(bare) / ms(cold):.1%} | {ms(driver):.0f} |", flush=True)
    print(f"device: {label}")


def main() -> None:
    from acelera import load_delegate
    from acelera.registrar.registry import get_registry

    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=FLOAT_MODELS)
    ap.add_argument("--min-secs", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--init", action="store_true", help="also measure cold/warm initialization (fresh processes)")
    ap.add_argument("--init-only", action="store_true", help="only measure cold/warm initialization")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    logging.disable(logging.WARNING)
    reg = get_registry()
    avail = reg.availability("gpu-gl")
    if not avail.ok:
        print(f"gpu-gl is unavailable: {avail.reason}")
        return
    if args.init_only:
        init_times(args.models)
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
    if args.init:
        init_times(args.models)


if __name__ == "__main__":
    main()
