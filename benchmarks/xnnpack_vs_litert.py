"""acelera's xnnpack-cpu delegate vs LiteRT's XNNPACK and LiteRT's builtin kernels, same run.

For every model (default: the float and quantized models in ../shared/models and the float
models of the converter zoo, tests/models/zoo/*_float32.tflite) and each thread count (default
1 and 2) it times, in interleaved rounds so machine noise hits all four alike:
  LiteRT   Interpreter(num_threads=n), the default op resolver (XNNPACK applied by default)
  builtin  LiteRT Interpreter(num_threads=n), BUILTIN_WITHOUT_DEFAULT_DELEGATES: LiteRT's
           optimized builtin kernels, no XNNPACK
  xnnpack  acelera Interpreter(num_threads=n) with the xnnpack-cpu delegate (num_threads=n)
  ref      acelera Interpreter(num_threads=n) on its CPU reference kernels
and prints median latencies, xnnpack/LiteRT (target: geometric mean <= 1.25 at 1 thread over
the float models), xnnpack/builtin, ref/xnnpack (the speed-up over acelera's reference) and,
with two thread counts, xnnpack's own speed-up from the first to the second. Then the init
time (Interpreter + allocate_tensors with the delegate) without and with a warm weight cache.

Usage: python benchmarks/xnnpack_vs_litert.py [--threads 1,2] [--min-secs S] [--markdown] [--float-only]
       [--no-init] [MODEL ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import MODELS, ZOO, feed, geomean  # noqa: E402

from acelera.core.interpreter import Interpreter, OpResolverType  # noqa: E402
from acelera.registrar.registry import load_delegate  # noqa: E402

#: models of MobileNet size and larger (the 2-thread scaling target applies to these)
LARGE_US = 1000.0  # LiteRT XNNPACK latency at 1 thread from which a model counts as large


def is_float_model(path: Path) -> bool:
    return "int8" not in path.name and "int16" not in path.name


def float_models() -> list[Path]:
    """The shared float models and the zoo's float32 models."""
    return ([p for p in sorted(MODELS.glob("*.tflite")) if is_float_model(p)]
            + sorted(ZOO.glob("*_float32.tflite")))


def all_models() -> list[Path]:
    return sorted(MODELS.glob("*.tflite")) + sorted(ZOO.glob("*_float32.tflite"))


def litert_interp(path: Path, threads: int, xnnpack: bool = True):
    """LiteRT with XNNPACK (AUTO) or with its optimized builtin kernels only."""
    from ai_edge_litert.interpreter import Interpreter as LInterpreter
    from ai_edge_litert.interpreter import OpResolverType as LResolver

    kind = LResolver.AUTO if xnnpack else LResolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = LInterpreter(model_path=str(path), num_threads=threads, experimental_op_resolver_type=kind)
    it.allocate_tensors()
    return it


def acelera_interp(path: Path, threads: int, delegate: bool, cache: str = "") -> Interpreter:
    ds = []
    if delegate:
        ds = [load_delegate("xnnpack-cpu", {"num_threads": threads, "xnnpack_weight_cache_file_path": cache})]
    it = Interpreter(model_path=path, experimental_delegates=ds, num_threads=threads,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def interleaved(fns: dict, min_secs: float, rounds: int = 7) -> dict[str, float]:
    """Median latency (us) of each zero-argument callable, measured in alternating rounds."""
    for f in fns.values():
        f()
        f()
    samples = {k: [] for k in fns}
    per_round = min_secs / rounds
    for _ in range(rounds):
        for k, f in fns.items():
            start = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                f()
                t1 = time.perf_counter()
                samples[k].append((t1 - t0) * 1e6)
                if t1 - start >= per_round / len(fns) and len(samples[k]) >= 3:
                    break
    return {k: float(np.median(v)) for k, v in samples.items()}


def init_seconds(path: Path, threads: int, cache: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        acelera_interp(path, threads, True, cache)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-secs", type=float, default=2.0, help="measuring time per model and thread count")
    ap.add_argument("--markdown", action="store_true", help="also print the tables as Markdown")
    ap.add_argument("--no-init", action="store_true", help="skip the init-time table")
    ap.add_argument("--float-only", action="store_true", help="only the float models (shared and zoo)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    paths = args.models or (float_models() if args.float_only else all_models())
    threads = [int(t) for t in args.threads.split(",")]
    rows = []
    print(f"{'model':36} {'thr':>3} {'LiteRT us':>10} {'builtin us':>10} {'xnnpack us':>11} {'ref us':>10} "
          f"{'xnn/LiteRT':>10} {'xnn/builtin':>11} {'ref/xnn':>8} {'delegated':>10}")
    for path in paths:
        for n in threads:
            theirs = litert_interp(path, n, xnnpack=True)
            try:
                builtin = litert_interp(path, n, xnnpack=False)
            except Exception:  # a custom op only LiteRT's default resolver registers (MediaPipe's)
                builtin = None
            ours = acelera_interp(path, n, True)
            ref = acelera_interp(path, n, False)
            runs = {"litert": theirs, "builtin": builtin, "xnn": ours, "ref": ref}
            runs = {k: v for k, v in runs.items() if v is not None}
            for it in runs.values():
                feed(it, np.random.default_rng(0))
            rep = ours.delegation
            share = f"{len(rep.nodes_of('xnnpack-cpu'))}/{len(ours.model.main.operators)}"
            t = interleaved({k: it.invoke for k, it in runs.items()}, args.min_secs)
            bt = t.get("builtin", float("nan"))
            r = dict(model=path.stem, threads=n, litert=t["litert"], builtin=bt, xnn=t["xnn"],
                     ref=t["ref"], ratio=t["xnn"] / t["litert"], vs_builtin=t["xnn"] / bt,
                     speedup=t["ref"] / t["xnn"], share=share, float=is_float_model(path))
            rows.append(r)
            print(f"{r['model']:36} {n:3} {r['litert']:10.1f} {r['builtin']:10.1f} {r['xnn']:11.1f} "
                  f"{r['ref']:10.1f} {r['ratio']:10.2f} {r['vs_builtin']:11.2f} {r['speedup']:8.2f} {share:>10}",
                  flush=True)
    print()
    for n in threads:
        fl = [r for r in rows if r["threads"] == n and r["float"]]
        al = [r for r in rows if r["threads"] == n]
        shared = [r for r in fl if not r["model"].endswith("_float32")]
        zoo = [r for r in fl if r["model"].endswith("_float32")]
        print(f"{n} thread(s): geomean xnnpack/LiteRT: float models {geomean([r['ratio'] for r in fl]):.2f} "
              f"(target <= 1.25 at 1 thread; shared {geomean([r['ratio'] for r in shared]):.2f}, "
              f"zoo {geomean([r['ratio'] for r in zoo]):.2f}), all models {geomean([r['ratio'] for r in al]):.2f}; "
              f"xnnpack/builtin (float) {geomean([r['vs_builtin'] for r in fl]):.2f}; "
              f"reference/xnnpack {geomean([r['speedup'] for r in al]):.2f}")
    scaling = []
    if len(threads) > 1:
        a, b = threads[0], threads[1]
        by = {(r["model"], r["threads"]): r for r in rows}
        for r in rows:
            if r["threads"] == a and (r["model"], b) in by and r["litert"] >= LARGE_US:
                scaling.append((r["model"], r["xnn"] / by[(r["model"], b)]["xnn"],
                                r["litert"] / by[(r["model"], b)]["litert"]))
        if scaling:
            print(f"\nxnnpack-cpu {a} -> {b} threads on models with LiteRT >= {LARGE_US:.0f} us at {a} thread "
                  f"(target >= 1.6x):")
            for name, sp, lsp in scaling:
                print(f"  {name:36} {sp:5.2f}x   (LiteRT {lsp:.2f}x)")
    inits = []
    if not args.no_init:
        print(f"\n{'model':42} {'init s, no cache':>16} {'init s, warm cache':>18} {'cache MB':>9}")
        with tempfile.TemporaryDirectory() as d:
            for path in paths:
                cache = os.path.join(d, path.stem + ".xnncache")
                cold = init_seconds(path, threads[0], "")
                acelera_interp(path, threads[0], True, cache)  # writes the cache
                warm = init_seconds(path, threads[0], cache)
                size = os.path.getsize(cache) / 1e6 if os.path.exists(cache) else 0.0
                inits.append((path.stem, cold, warm, size))
                print(f"{path.stem:42} {cold:16.3f} {warm:18.3f} {size:9.2f}", flush=True)
    if args.markdown:
        print("\n| model | threads | LiteRT (XNNPACK) us | LiteRT builtin us | xnnpack-cpu us | ratio | "
              "vs builtin | acelera reference us | speed-up vs reference |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['model']} | {r['threads']} | {r['litert']:.0f} | {r['builtin']:.0f} | {r['xnn']:.0f} | "
                  f"{r['ratio']:.2f} | {r['vs_builtin']:.2f} | {r['ref']:.0f} | {r['speedup']:.2f} |")
        for n in threads:
            fl = [r for r in rows if r["threads"] == n and r["float"]]
            al = [r["ratio"] for r in rows if r["threads"] == n]
            print(f"| **geomean, float models** | {n} | | | | **{geomean([r['ratio'] for r in fl]):.2f}** | "
                  f"{geomean([r['vs_builtin'] for r in fl]):.2f} | | |")
            print(f"| **geomean, all models** | {n} | | | | **{geomean(al):.2f}** | | | |")
        if scaling:
            print(f"\n| model | xnnpack-cpu {threads[0]} -> {threads[1]} threads | LiteRT |")
            print("|---|---:|---:|")
            for name, sp, lsp in scaling:
                print(f"| {name} | {sp:.2f}x | {lsp:.2f}x |")
        if inits:
            print("\n| model | init s, no cache | init s, warm weight cache |")
            print("|---|---:|---:|")
            for name, cold, warm, _ in inits:
                print(f"| {name} | {cold:.3f} | {warm:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
