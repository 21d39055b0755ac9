"""acelera's CPU reference vs LiteRT's reference kernels (BUILTIN_REF), 1 thread, same run.

Prints, per model in ../shared/models and in the converter zoo (tests/models/zoo), both
latencies and acelera/LiteRT, then the geometric mean of each set and of both (target <= 1.0),
and the interpreter's per-node overhead on a 200-node model (target <= 20 us). Models whose
ops LiteRT's reference resolver lacks are timed against its default builtin kernels and say so.
Usage: python benchmarks/reference_vs_litert.py [--min-secs S] [--no-zoo] [MODEL ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import MODELS, ZOO, feed, geomean, litert_interpreter, time_invoke  # noqa: E402

from acelera.core.builder import ModelBuilder  # noqa: E402
from acelera.core.interpreter import Interpreter, OpResolverType  # noqa: E402

# MediaPipe's custom op exists only in LiteRT's default resolver.
DEFAULT_RESOLVER = {"selfie_segmentation.tflite"}


def chain_model(n: int) -> bytes:
    b = ModelBuilder()
    t = b.add_input("x", (1, 4), np.float32)
    one = b.add_constant("one", np.ones((1, 4), np.float32))
    for i in range(n):
        nxt = b.add_tensor(f"t{i}", (1, 4), np.float32)
        b.add_operator("ADD", [t, one], [nxt], fused_activation_function="NONE")
        t = nxt
    b.mark_outputs(t)
    return b.build()


def _measure(path: Path, min_secs: float) -> tuple[float, float, str]:
    """(acelera us, LiteRT us, note) for one model, 1 thread, same inputs."""
    ours = Interpreter(model_path=path, num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ours.allocate_tensors()
    feed(ours, np.random.default_rng(0))
    note = " (LiteRT default resolver)" if path.name in DEFAULT_RESOLVER else ""
    try:
        theirs = litert_interpreter(path, reference=not note)
    except (ValueError, RuntimeError):  # an op BUILTIN_REF does not register
        theirs, note = litert_interpreter(path, reference=False), " (LiteRT default resolver)"
    theirs.allocate_tensors()
    feed(theirs, np.random.default_rng(0))
    return time_invoke(ours.invoke, min_secs=min_secs), time_invoke(theirs.invoke, min_secs=min_secs), note


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--min-secs", type=float, default=1.0)
    ap.add_argument("--no-zoo", action="store_true", help="only the shared models")
    args = ap.parse_args()
    sets = {"given": args.models} if args.models else {"shared": sorted(MODELS.glob("*.tflite"))}
    if not args.models and not args.no_zoo:
        sets["zoo"] = sorted(ZOO.glob("*.tflite"))
    print(f"{'model':44} {'acelera us':>12} {'LiteRT us':>12} {'ratio':>7}")
    all_ratios = []
    for label, paths in sets.items():
        ratios = []
        for path in paths:
            a, b, note = _measure(path, args.min_secs)
            ratios.append(a / b)
            print(f"{path.name:44} {a:12.1f} {b:12.1f} {a / b:7.2f}{note}", flush=True)
        print(f"{'geometric mean acelera/LiteRT (' + label + ')':44} {'':12} {'':12} {geomean(ratios):7.2f}")
        all_ratios += ratios
    print(f"{'geometric mean acelera/LiteRT (all)':44} {'':12} {'':12} {geomean(all_ratios):7.2f}  (target <= 1.0)")

    n = 200
    it = Interpreter(model_content=chain_model(n), num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    per_node = time_invoke(it.invoke, min_secs=args.min_secs) / n
    print(f"interpreter overhead: {per_node:.2f} us per node on a {n}-node model (target <= 20 us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
