"""Where xnnpack-cpu spends its time, next to LiteRT's total (issue #15).

For each model: LiteRT with XNNPACK (the default resolver) and with its optimized builtin
kernels only (BUILTIN_WITHOUT_DEFAULT_DELEGATES), then acelera with xnnpack-cpu split three
ways: the delegated partitions' steps (timed inside the compiled program, `set_profiling`),
the nodes left on acelera's CPU kernels, and the rest of invoke() (interpreter overhead).
Partition and CPU-node times are wall times of the plan's steps (Interpreter.invoke_profiled);
"their steps" sums the compiled program's own step times (in thread CPU time with
--cpu-clock, which a loaded machine inflates less). Steps are grouped by the op that leads
them (CONV_2D+ADD+RELU -> CONV_2D). ai_edge_litert has no op profiler in Python: LiteRT gets a
total, and with --steps each step's nodes are cut out into a model of their own and timed on
LiteRT's XNNPACK, next to the step.

Usage: python benchmarks/xnnpack_profile.py [--threads N] [--min-secs S] [--top K] [--steps] [MODEL ...]
(default: the shared float models and the converter zoo's float models; prints Markdown)
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import feed  # noqa: E402
from xnnpack_vs_litert import acelera_interp, float_models, interleaved, litert_interp  # noqa: E402


def step_model(interp, nodes) -> bytes | None:
    """The nodes of one compiled step as a model of their own (constants, folded float16
    weights included, as constants; the last node's outputs are the outputs), for timing
    LiteRT on the same work."""
    from acelera.core.builder import ModelBuilder

    sg, ex = interp.model.main, interp._rt.ex
    b = ModelBuilder(description="step")
    made: dict[int, int] = {}
    inside = {t for n in nodes for t in sg.operators[n].outputs}

    def tensor(t: int) -> int:
        if t < 0:
            return -1
        if t not in made:
            tt = sg.tensors[t]
            if t in inside:
                made[t] = b.add_tensor(f"t{t}", tt.shape, tt.dtype)
            elif tt.is_constant or t in ex.folded:
                made[t] = b.add_constant(f"t{t}", np.asarray(ex.values[t]))
            else:
                made[t] = b.add_input(f"t{t}", tt.shape, tt.dtype)
        return made[t]
    try:
        for n in nodes:
            op = sg.operators[n]
            if op.custom_code is not None:
                return None
            ins = [tensor(t) for t in op.inputs]
            b.add_operator(op.name, ins, [tensor(t) for t in op.outputs], version=op.version, **dict(op.options))
        b.mark_outputs(*[made[t] for t in sg.operators[nodes[-1]].outputs])
        return b.build()
    except Exception:  # an op the builder cannot write back: no LiteRT figure for the step
        return None


def litert_step_us(model: bytes, min_secs: float) -> float | None:
    from ai_edge_litert.interpreter import Interpreter as LInterpreter

    try:
        it = LInterpreter(model_content=model, num_threads=1)
        it.allocate_tensors()
    except Exception:
        return None
    feed(it, np.random.default_rng(0))
    return interleaved({"s": it.invoke}, min_secs, rounds=3)["s"]


def profile_model(path: Path, threads: int, min_secs: float, cpu_clock: bool = False, per_op: bool = False) -> dict:
    litert = litert_interp(path, threads, xnnpack=True)
    try:
        builtin = litert_interp(path, threads, xnnpack=False)
    except Exception:  # a custom op only LiteRT's default resolver has (MediaPipe's)
        builtin = None
    ours = acelera_interp(path, threads, True)
    runs = {k: v for k, v in (("litert", litert), ("builtin", builtin), ("xnn", ours)) if v is not None}
    for it in runs.values():
        feed(it, np.random.default_rng(0))
    t = interleaved({k: it.invoke for k, it in runs.items()}, min_secs)
    t.setdefault("builtin", float("nan"))
    kernels = [k for d in ours.delegates for k in getattr(d, "kernels", [])]
    for k in kernels:
        k.set_profiling(True, time.thread_time if cpu_clock else time.perf_counter)
    plan = ours._rt.ex.plan
    n_runs, totals = 0, np.zeros(len(plan))
    end = time.perf_counter() + min_secs
    while n_runs < 5 or time.perf_counter() < end:
        totals += np.asarray(ours.invoke_profiled())
        n_runs += 1
    plan_us = totals / n_runs * 1e6
    deleg_us = sum(u for s, u in zip(plan, plan_us) if s.delegate is not None)
    cpu = collections.Counter()
    for s, u in zip(plan, plan_us):
        if s.delegate is None:
            cpu[ours.model.main.operators[s.nodes[0]].name] += u
    steps = []
    for k in kernels:
        steps += [(lab, sec * 1e6, nodes) for (lab, sec), nodes in zip(k.profile(), k.step_nodes)]
        k.set_profiling(False)
    groups = collections.Counter()
    counts = collections.Counter()
    for lab, us, _ in steps:
        op = lab.split(" ")[0].split("+")[0]
        groups[op] += us
        counts[op] += 1
    inside = sum(us for _, us, _ in steps)
    if per_op:
        steps = [(lab, us, nodes, litert_step_us(step_model(ours, nodes), min_secs / 20) if nodes else None)
                 for lab, us, nodes in steps]
    return dict(model=path.stem, litert=t["litert"], builtin=t["builtin"], xnn=t["xnn"], delegated=deleg_us,
                inside=inside, cpu=cpu, groups=groups, counts=counts, steps=steps,
                other=max(t["xnn"] - deleg_us - sum(cpu.values()), 0.0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-secs", type=float, default=1.0)
    ap.add_argument("--top", type=int, default=4, help="step groups shown per model")
    ap.add_argument("--steps", action="store_true",
                    help="also list every step of each model, next to LiteRT XNNPACK running the step's nodes alone")
    ap.add_argument("--cpu-clock", action="store_true",
                    help="time the steps in thread CPU time (steadier on a loaded machine, 1 thread only)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    paths = args.models or float_models()
    print("| model | LiteRT XNNPACK us | LiteRT builtin us | xnnpack-cpu us | ratio | partitions us "
          "(their steps) | CPU nodes us | other us | biggest step groups (op x count: us) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for path in paths:
        r = profile_model(path, args.threads, args.min_secs, args.cpu_clock, args.steps)
        top = ", ".join(f"{op} x{r['counts'][op]}: {us:.0f}" for op, us in r["groups"].most_common(args.top))
        cpu = ", ".join(f"{op}: {us:.0f}" for op, us in r["cpu"].most_common(3))
        print(f"| {r['model']} | {r['litert']:.1f} | {r['builtin']:.1f} | {r['xnn']:.1f} | "
              f"{r['xnn'] / r['litert']:.2f} | {r['delegated']:.0f} ({r['inside']:.0f}) | "
              f"{sum(r['cpu'].values()):.0f}{' (' + cpu + ')' if cpu else ''} | {r['other']:.0f} | {top} |", flush=True)
        if args.steps:
            for lab, us, _, lit in r["steps"]:
                lit_s = f"{lit:.1f}" if lit is not None else "-"
                ratio = f"{us / lit:.2f}" if lit else ""
                print(f"|   | {lit_s} | | {us:.1f} | {ratio} | | | | {lab} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
