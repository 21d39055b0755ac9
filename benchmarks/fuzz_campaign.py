"""A long field-level fuzzing campaign: N mutants of real models (acelera.conformance.mutate), each
loaded, allocated and invoked on the reference and on one first-party delegate (in rotation), in
worker subprocesses with an address-space limit.

    python benchmarks/fuzz_campaign.py [--cases 10000] [--workers 2] [--timeout 30] [--memory-mb 4096] [--seed 0]
    python benchmarks/fuzz_campaign.py --replay MODEL:CASE [--seed S] [--engine NAME] [--write FILE]

Every case ends in one category:
  clean   the mutant loaded and ran, or stopped with an AceleraError (the only error acelera may raise)
  other   any other exception (its type, message and innermost acelera frame are recorded)
  crash   the worker died (a signal or an exit) while running the case
  hang    no result within --timeout seconds (the worker is killed)
  memory  a raw MemoryError, or the worker died at its address-space limit
A worker reports each case before it starts, so the parent knows which case a dead or stuck worker
was on; it records the case and starts a new worker at the next one. The counts are printed per
category and per seed model, then every case that is not clean with its reproduction line. The exit
status is 1 when any category but "clean" is non-zero.

Interpreters run with max_memory_bytes = --budget-mb (1024); workers run with
ACELERA_MAX_LOOP_ITERATIONS = --max-loop-iterations (10000), as tests/test_fuzz.py caps loops, so a
mutated WHILE condition ends in a clean error instead of a million iterations, and with one
BLAS/OpenMP thread each.
"""
from __future__ import annotations

import argparse
import builtins
import json
import os
import platform
import re
import resource
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests"))
from _common import MODELS, ZOO

SHARED_SEEDS = ("sine_float", "sine_float_int8", "small_cnn_f32", "small_cnn_int8", "hand_recrop_int8",
                "face_detection_short_range")
ZOO_SEEDS = ("misc_ops_a_float32", "misc_ops_c_int8", "text_classifier_float32", "lstm_tfkeras_float32",
             "gru_keras3_float32", "transformer_encoder_int8")
DELEGATES = ("gpu-opencl", "gpu-gl", "xnnpack-cpu", "nnapi", "hexagon", "coreml")
CATEGORIES = ("clean", "other", "crash", "hang", "memory")
_MEMORY_WORDS = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory", "failed to map",
                 "mmap", "std::length_error")


def seed_models() -> dict[str, bytes]:
    """The seed models by name: the shared models, a handful of the zoo, tests/cf_models.py's."""
    import cf_models

    seeds = {}
    for name in SHARED_SEEDS:
        if (MODELS / f"{name}.tflite").exists():
            seeds[name] = (MODELS / f"{name}.tflite").read_bytes()
    for name in ZOO_SEEDS:
        seeds[name] = (ZOO / f"{name}.tflite").read_bytes()
    for f in cf_models.ALL:
        seeds[f.__name__] = f()
    return seeds


# --- the worker ---------------------------------------------------------------------------
def _fill(shape, dtype, one: bool):
    import numpy as np

    dt = np.dtype(dtype)
    if dt == np.object_:
        return np.full(shape, b"a" if one else b"", dtype=object)
    return (np.ones if one else np.zeros)(shape, dt)


def drive(data: bytes, delegate, budget: int) -> None:
    """Load, allocate and invoke `data` (zeros, then ones), on the reference or through `delegate`."""
    from acelera.core.interpreter import Interpreter

    it = Interpreter(model_content=data, experimental_delegates=[delegate] if delegate is not None else None,
                     max_memory_bytes=budget)
    it.allocate_tensors()
    for one in (False, True):
        for d in it.get_input_details():
            it.set_tensor(d["index"], _fill(d["shape"], d["dtype"], one))
        it.invoke()


def _frame(exc: BaseException) -> str:
    """The innermost frame of `exc` inside acelera (else the innermost), as path:line in function."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if "/acelera/" in f.filename] or frames
    if not mine:
        return ""
    f = mine[-1]
    return f"{os.path.relpath(f.filename, ROOT)}:{f.lineno} in {f.name}"


_RAW = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception)): ")
_NUMPY_ERRORS = {"AxisError", "UFuncTypeError", "LinAlgError", "ComplexWarning"}


def wrapped(message: str) -> str | None:
    """For an AceleraError that carries a raw Python or numpy exception the executor caught
    ("node 3 (CAST): TypeError: ..."): "OP: TypeError", else None."""
    for m in _RAW.finditer(message):
        name = m.group(1)
        if name in _NUMPY_ERRORS or isinstance(getattr(builtins, name, None), type):
            ops = re.findall(r"\(([A-Z][A-Z0-9_]+)\)", message[:m.end()])
            return f"{ops[-1] if ops else '?'}: {name}"
    return None


def run_case(seeds, sites, names, delegates, args, model: str, case: int, started=lambda engine: None) -> dict:
    from acelera import AceleraError
    from acelera.conformance import mutate

    m = mutate.mutant(seeds[model], args.seed, case, sites[model])
    engines = [("reference", None)]
    if delegates and args.delegates == "rotate":
        k = case % len(delegates)
        engines.append((names[k], delegates[k]))
    elif args.delegates == "all":
        engines += list(zip(names, delegates))
    result = {"model": model, "case": case, "mutations": m.describe(), "category": "clean", "ran": 0}
    t0 = time.perf_counter()
    for engine, d in engines:
        started(engine)
        try:
            drive(m.data, d, args.budget_mb << 20)
            result["ran"] += 1
        except AceleraError as e:
            raw = wrapped(str(e))
            if raw and "wrapped" not in result:
                result["wrapped"] = {"engine": engine, "error": str(e).splitlines()[0][:300], "key": raw}
        except MemoryError as e:
            result.update(category="memory", engine=engine, error=f"MemoryError: {str(e)[:300]}", where=_frame(e))
            break
        except RecursionError as e:
            result.update(category="other", engine=engine, error=f"RecursionError: {str(e)[:300]}", where=_frame(e))
            break
        except Exception as e:  # noqa: BLE001  (the point: anything but an AceleraError is a finding)
            msg = str(e).splitlines()[0][:300] if str(e) else ""
            result.update(category="other", engine=engine, error=f"{type(e).__name__}: {msg}", where=_frame(e))
            break
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def worker(args) -> int:
    if args.memory_mb:
        limit = args.memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import warnings

    warnings.simplefilter("ignore")
    from acelera import load_delegate
    from acelera.conformance import mutate
    from acelera.registrar.registry import get_registry

    seeds = seed_models()
    sites = {name: mutate.find_sites(data) for name, data in seeds.items()}
    names, delegates = [], []
    if args.delegates != "none":
        reg = get_registry()
        for n in DELEGATES:
            if n in reg.specs and reg.availability(n).ok:
                names.append(n)
                delegates.append(load_delegate(n))
    order = list(seeds)
    out = sys.stdout
    out.write(json.dumps({"ready": names}) + "\n")
    out.flush()
    for line in sys.stdin:
        case = int(line)

        def started(engine: str, case: int = case) -> None:
            out.write(json.dumps({"start": case, "engine": engine}) + "\n")
            out.flush()

        result = run_case(seeds, sites, names, delegates, args, order[case % len(order)], case, started)
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 0


# --- the parent ---------------------------------------------------------------------------
class Worker:
    def __init__(self, args, index: int):
        self.index = index
        self.err = tempfile.TemporaryFile()  # noqa: SIM115  (closed in close())
        env = dict(os.environ, ACELERA_MAX_LOOP_ITERATIONS=str(args.max_loop_iterations), OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--seed", str(args.seed),
               "--memory-mb", str(args.memory_mb), "--budget-mb", str(args.budget_mb),
               "--delegates", args.delegates]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     env=env, cwd=ROOT)
        self.buf = b""
        self.case: int | None = None  # the case sent and not finished
        self.started = 0.0  # when it reported the case's start (or was sent it)
        self.ready = False
        self.engine = "?"  # the engine it reported last
        self.peak_kb = 0  # largest VmSize seen while it ran the current case
        self.done = 0  # cases it finished

    def send(self, case: int) -> None:
        self.case, self.started, self.peak_kb, self.engine = case, time.monotonic(), 0, "?"
        self.proc.stdin.write(f"{case}\n".encode())
        self.proc.stdin.flush()

    def sample(self) -> None:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmSize:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
        except OSError:
            pass

    def stderr_tail(self) -> str:
        self.err.seek(0, os.SEEK_END)
        n = self.err.tell()
        self.err.seek(max(0, n - 4000))
        return self.err.read().decode(errors="replace")

    def kill(self) -> None:
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.close()

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.err.close()


def campaign(args) -> int:
    seeds = seed_models()
    order = list(seeds)
    t_start = time.monotonic()
    results: list[dict] = []
    next_case = 0
    sel = selectors.DefaultSelector()
    workers: list[Worker] = []

    def spawn(i: int) -> Worker:
        w = Worker(args, i)
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        return w

    def retire(w: Worker, category: str, detail: str) -> Worker:
        case = w.case
        if case is not None and category:
            results.append({"model": order[case % len(order)], "case": case, "category": category,
                            "engine": w.engine, "error": detail, "mutations": _describe(seeds, order, args.seed, case)})
        sel.unregister(w.proc.stdout)
        w.kill()
        return spawn(w.index)

    def feed(w: Worker) -> None:
        nonlocal next_case
        if next_case < args.cases:
            w.send(next_case)
            next_case += 1
        else:
            w.case = None

    workers = [spawn(i) for i in range(args.workers)]
    engines: list[str] = []
    last_print = time.monotonic()
    while True:
        if next_case >= args.cases and all(w.case is None and w.ready for w in workers):
            break
        for key, _ in sel.select(timeout=0.1):
            w: Worker = key.data
            chunk = os.read(w.proc.stdout.fileno(), 65536)
            if not chunk:  # the worker died
                code = w.proc.wait()
                tail = w.stderr_tail()
                how = f"signal {-code}" if code < 0 else f"exit {code}"
                limit_kb = args.memory_mb << 10
                near = args.memory_mb and w.peak_kb >= 0.8 * limit_kb
                if not w.ready:
                    raise SystemExit(f"worker {w.index} failed to start ({how}):\n{tail}")
                if near or any(s in tail for s in _MEMORY_WORDS):
                    cat = "memory"
                else:
                    cat = "crash"
                last = tail.strip().splitlines()[-1][:300] if tail.strip() else ""
                workers[w.index] = retire(w, cat, f"worker died ({how}, VmSize {w.peak_kb >> 10} MiB): {last}")
                continue
            w.buf += chunk
            while b"\n" in w.buf:
                line, w.buf = w.buf.split(b"\n", 1)
                msg = json.loads(line)
                if "ready" in msg:
                    w.ready = True
                    engines = msg["ready"]
                    feed(w)
                elif "start" in msg:  # progress: each engine of a case gets --timeout seconds
                    w.started, w.engine = time.monotonic(), msg["engine"]
                else:
                    results.append(msg)
                    w.done += 1
                    if args.recycle and w.done >= args.recycle and next_case < args.cases:
                        w.case = None
                        workers[w.index] = retire(w, "", "")  # a fresh process: caches do not pile up
                        break
                    feed(w)
        now = time.monotonic()
        for w in list(workers):
            if w.case is not None:
                w.sample()
                if now - w.started > args.timeout:
                    workers[w.index] = retire(w, "hang", f"no result after {args.timeout:g} s")
        if now - last_print > 30:
            last_print = now
            c = Counter(r["category"] for r in results)
            print(f"  {len(results)}/{args.cases} cases, {now - t_start:.0f} s, "
                  + ", ".join(f"{k} {c[k]}" for k in CATEGORIES), file=sys.stderr, flush=True)
    for w in workers:
        sel.unregister(w.proc.stdout)
        w.proc.stdin.close()
        w.proc.wait()
        w.close()
    return report(args, results, order, engines, time.monotonic() - t_start)


def _describe(seeds, order, seed: int, case: int) -> str:
    from acelera.conformance import mutate

    return mutate.mutant(seeds[order[case % len(order)]], seed, case).describe()


def report(args, results: list[dict], order: list[str], engines: list[str], elapsed: float) -> int:
    results.sort(key=lambda r: r["case"])
    counts = Counter(r["category"] for r in results)
    ran = sum(1 for r in results if r.get("ran"))
    print(f"fuzz campaign: {len(results)} field-level mutants of {len(order)} seed models, seed {args.seed}, "
          f"{args.workers} workers, {elapsed:.0f} s ({len(results) / max(elapsed, 1e-9):.1f} cases/s)")
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"engines: reference + {', '.join(engines) if engines else 'no delegate'} "
          f"({args.delegates}); timeout {args.timeout:.0f} s, RLIMIT_AS {args.memory_mb} MiB, "
          f"budget {args.budget_mb} MiB")
    print()
    print("  ".join(f"{k} {counts[k]}" for k in CATEGORIES) + f"   (clean: {ran} ran on at least one engine, "
          f"{counts['clean'] - ran} stopped with an AceleraError everywhere)")
    print()
    per: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        per[r["model"]][r["category"]] += 1
        per[r["model"]]["cases"] += 1
        per[r["model"]]["ran"] += bool(r.get("ran"))
    print(f"{'seed model':30} {'cases':>6} {'ran':>6} " + " ".join(f"{k:>6}" for k in CATEGORIES))
    for name in order:
        c = per[name]
        print(f"{name:30} {c['cases']:6d} {c['ran']:6d} " + " ".join(f"{c[k]:6d}" for k in CATEGORIES))
    timed = sorted((r for r in results if "seconds" in r), key=lambda r: -r["seconds"])
    if timed:
        secs = sorted(r["seconds"] for r in timed)
        print(f"\nseconds per case (all its engines): median {secs[len(secs) // 2]:.3f}, "
              f"99th percentile {secs[int(len(secs) * 0.99)]:.2f}, slowest:")
        for r in timed[:5]:
            print(f"  {r['seconds']:7.2f}  {r['model']}:{r['case']}  {r['mutations']}")
    bad = [r for r in results if r["category"] != "clean"]
    if bad:
        print(f"\n{len(bad)} cases not clean:")
    for r in bad:
        engine = r.get("engine")
        repro = (f"python benchmarks/fuzz_campaign.py --replay {r['model']}:{r['case']} --seed {args.seed}"
                 + (f" --engine {engine}" if engine and engine != "reference" else ""))
        where = f" at {r['where']}" if r.get("where") else ""
        print(f"- {r['category']} [{engine or '?'}] {r.get('error', '')}{where}")
        print(f"    mutations: {r['mutations']}")
        print(f"    {repro}")
    raw: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        if "wrapped" in r:
            raw[r["wrapped"]["key"]].append(r)
    if raw:
        print(f"\nclean, but a raw exception that the executor wrapped in a KernelError ({sum(map(len, raw.values()))} "
              f"cases, {len(raw)} kinds; one example each):")
    for key, rs in sorted(raw.items(), key=lambda kv: -len(kv[1])):
        r = rs[0]
        w = r["wrapped"]
        engine = w["engine"]
        print(f"- {key} x{len(rs)} [{engine}] {w['error']}")
        print(f"    mutations: {r['mutations']}")
        print(f"    python benchmarks/fuzz_campaign.py --replay {r['model']}:{r['case']} --seed {args.seed}"
              + (f" --engine {engine}" if engine != "reference" else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"elapsed_s": elapsed, "counts": counts, "results": bad,
                                                "wrapped": [r for r in results if "wrapped" in r]}, indent=1))
    return 1 if any(counts[k] for k in CATEGORIES[1:]) else 0


def replay(args) -> int:
    """Run one case in this process, with the traceback of whatever escapes."""
    import warnings

    os.environ.setdefault("ACELERA_MAX_LOOP_ITERATIONS", str(args.max_loop_iterations))  # before acelera loads
    from acelera import AceleraError, load_delegate
    from acelera.conformance import mutate

    warnings.simplefilter("ignore")
    model, case = args.replay.rsplit(":", 1)
    seeds = seed_models()
    m = mutate.mutant(seeds[model], args.seed, int(case))
    print(f"{model} case {case} seed {args.seed}: {m.describe()}")
    if args.write:
        Path(args.write).write_bytes(m.data)
        print(f"mutant written to {args.write}")
    d = load_delegate(args.engine) if args.engine and args.engine != "reference" else None
    try:
        drive(m.data, d, args.budget_mb << 20)
        print("ran")
    except AceleraError as e:
        print(f"clean: {type(e).__name__}: {e}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a case may run before it is a hang")
    ap.add_argument("--memory-mb", type=int, default=4096, help="each worker's address-space limit (0: none)")
    ap.add_argument("--budget-mb", type=int, default=1024, help="the interpreters' max_memory_bytes, in MiB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--delegates", choices=("rotate", "all", "none"), default="rotate",
                    help="each case also runs through one available delegate in turn (rotate), all of them, or none")
    ap.add_argument("--max-loop-iterations", type=int, default=10000)
    ap.add_argument("--recycle", type=int, default=1000, help="start a fresh worker after this many cases (0: never)")
    ap.add_argument("--json", help="also write the counts and the cases not clean here")
    ap.add_argument("--replay", metavar="MODEL:CASE", help="run one case here and show what escapes")
    ap.add_argument("--engine", help="with --replay: a delegate name (default: the reference)")
    ap.add_argument("--write", help="with --replay: write the mutant to this file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.replay:
        return replay(args)
    return campaign(args)


if __name__ == "__main__":
    sys.exit(main())
