"""acelera's xnnpack-cpu delegate vs LiteRT's default resolver (XNNPACK), same run.

For every model in ../shared/models and each thread count (default 1 and 2) it times, in
interleaved rounds so machine noise hits all three alike:
  LiteRT   Interpreter(num_threads=n), the default op resolver (XNNPACK applied by default)
  xnnpack  acelera Interpreter(num_threads=n) with the xnnpack-cpu delegate (num_threads=n)
  ref      acelera Interpreter(num_threads=n) on its CPU reference kernels
and prints median latencies, xnnpack/LiteRT (target: geometric mean <= 2.0 at 1 thread over
the float models) and ref/xnnpack (the speed-up over acelera's reference). Then the init
time (Interpreter + allocate_tensors with the delegate) without and with a warm weight cache.

Usage: python benchmarks/xnnpack_vs_litert.py [--threads 1,2] [--min-secs S] [--markdown] [MODEL ...]
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
from _common import MODELS, feed, geomean, litert_interpreter  # noqa: E402

from acelera.core.interpreter import Interpreter, OpResolverType  # noqa: E402
from acelera.registrar.registry import load_delegate  # noqa: E402


def is_float_model(path: Path) -> bool:
    return "int8" not in path.name and "int16" not in path.name


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
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    paths = args.models or sorted(MODELS.glob("*.tflite"))
    threads = [int(t) for t in args.threads.split(",")]
    rows = []
    print(f"{'model':42} {'thr':>3} {'LiteRT us':>10} {'xnnpack us':>11} {'ref us':>10} "
          f"{'xnn/LiteRT':>10} {'ref/xnn':>8} {'delegated':>10}")
    for path in paths:
        for n in threads:
            theirs = litert_interpreter(path, reference=False, threads=n)
            theirs.allocate_tensors()
            feed(theirs, np.random.default_rng(0))
            ours = acelera_interp(path, n, True)
            feed(ours, np.random.default_rng(0))
            ref = acelera_interp(path, n, False)
            feed(ref, np.random.default_rng(0))
            rep = ours.delegation
            share = f"{len(rep.nodes_of('xnnpack-cpu'))}/{len(ours.model.main.operators)}"
            t = interleaved({"litert": theirs.invoke, "xnn": ours.invoke, "ref": ref.invoke}, args.min_secs)
            r = dict(model=path.stem, threads=n, litert=t["litert"], xnn=t["xnn"], ref=t["ref"],
                     ratio=t["xnn"] / t["litert"], speedup=t["ref"] / t["xnn"], share=share,
                     float=is_float_model(path))
            rows.append(r)
            print(f"{r['model']:42} {n:3} {r['litert']:10.1f} {r['xnn']:11.1f} {r['ref']:10.1f} "
                  f"{r['ratio']:10.2f} {r['speedup']:8.2f} {share:>10}", flush=True)
    print()
    for n in threads:
        fl = [r for r in rows if r["threads"] == n and r["float"]]
        al = [r for r in rows if r["threads"] == n]
        print(f"{n} thread(s): geomean xnnpack/LiteRT  float models {geomean([r['ratio'] for r in fl]):.2f} "
              f"(target <= 2.0 at 1 thread), all models {geomean([r['ratio'] for r in al]):.2f}; "
              f"geomean reference/xnnpack {geomean([r['speedup'] for r in al]):.2f}")
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
        print("\n| model | threads | LiteRT (XNNPACK) us | xnnpack-cpu us | ratio | acelera reference us | speed-up vs reference |")  # noqa: E501
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['model']} | {r['threads']} | {r['litert']:.0f} | {r['xnn']:.0f} | {r['ratio']:.2f} | "
                  f"{r['ref']:.0f} | {r['speedup']:.2f} |")
        for n in threads:
            fl = [r["ratio"] for r in rows if r["threads"] == n and r["float"]]
            al = [r["ratio"] for r in rows if r["threads"] == n]
            print(f"| **geomean, float models** | {n} | | | **{geomean(fl):.2f}** | | |")
            print(f"| **geomean, all models** | {n} | | | **{geomean(al):.2f}** | | |")
        if inits:
            print("\n| model | init s, no cache | init s, warm weight cache |")
            print("|---|---:|---:|")
            for name, cold, warm, _ in inits:
                print(f"| {name} | {cold:.3f} | {warm:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
