"""acelera's CPU reference vs LiteRT's reference kernels (BUILTIN_REF), 1 thread, same run.

Prints, per model in ../shared/models, both latencies and acelera/LiteRT, then the geometric
mean (target <= 1.0), and the interpreter's per-node overhead on a 200-node model (target
<= 20 us). Usage: python benchmarks/reference_vs_litert.py [--min-secs S] [MODEL ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import MODELS, feed, geomean, litert_interpreter, time_invoke  # noqa: E402

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--min-secs", type=float, default=1.0)
    args = ap.parse_args()
    paths = args.models or sorted(MODELS.glob("*.tflite"))
    print(f"{'model':44} {'acelera us':>12} {'LiteRT us':>12} {'ratio':>7}")
    ratios = []
    for path in paths:
        rng = np.random.default_rng(0)
        ours = Interpreter(model_path=path, num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        ours.allocate_tensors()
        feed(ours, rng)
        theirs = litert_interpreter(path, reference=path.name not in DEFAULT_RESOLVER)
        theirs.allocate_tensors()
        feed(theirs, np.random.default_rng(0))
        a = time_invoke(ours.invoke, min_secs=args.min_secs)
        b = time_invoke(theirs.invoke, min_secs=args.min_secs)
        ratios.append(a / b)
        note = " (LiteRT default resolver)" if path.name in DEFAULT_RESOLVER else ""
        print(f"{path.name:44} {a:12.1f} {b:12.1f} {a / b:7.2f}{note}", flush=True)
    print(f"{'geometric mean acelera/LiteRT':44} {'':12} {'':12} {geomean(ratios):7.2f}  (target <= 1.0)")

    n = 200
    it = Interpreter(model_content=chain_model(n), num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    per_node = time_invoke(it.invoke, min_secs=args.min_secs) / n
    print(f"interpreter overhead: {per_node:.2f} us per node on a {n}-node model (target <= 20 us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
