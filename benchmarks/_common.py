"""Shared timing helpers for the benchmark scripts."""
from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np

MODELS = Path(os.environ.get("ACELERA_MODELS", Path(__file__).resolve().parents[1].parent / "shared" / "models"))
ZOO = Path(__file__).resolve().parents[1] / "tests" / "models" / "zoo"  # converter-made models (tools/make_models.py)


def time_invoke(invoke, min_runs: int = 5, min_secs: float = 1.0, warmup: int = 2) -> float:
    """Median latency of `invoke()` in microseconds."""
    for _ in range(warmup):
        invoke()
    samples = []
    start = time.perf_counter()
    while len(samples) < min_runs or time.perf_counter() - start < min_secs:
        t0 = time.perf_counter()
        invoke()
        samples.append((time.perf_counter() - t0) * 1e6)
        if len(samples) >= 1000:
            break
    return float(np.median(samples))


def feed(interp, rng: np.random.Generator) -> None:
    for d in interp.get_input_details():
        dt = np.dtype(d["dtype"])
        if np.issubdtype(dt, np.floating):
            x = rng.uniform(-1, 1, d["shape"]).astype(dt)
        elif dt in (np.int32, np.int64):  # token ids and indices: small and non-negative
            x = rng.integers(0, 16, d["shape"]).astype(dt)
        else:
            info = np.iinfo(dt)
            x = rng.integers(info.min, int(info.max) + 1, d["shape"]).astype(dt)
        interp.set_tensor(d["index"], x)


def geomean(values) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def litert_interpreter(model: Path | bytes, reference: bool, threads: int = 1):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    kw = {"model_content": model} if isinstance(model, bytes) else {"model_path": str(model)}
    return Interpreter(**kw, num_threads=threads, experimental_op_resolver_type=kind)


def timed_cached_init(delegate: str, path: str, cache_dir: str) -> tuple[object, dict]:
    """Load `delegate` with the serialization cache in `cache_dir` (token: the model's stem) and
    time Interpreter + allocate_tensors ("init") and the first invoke; for fresh-process init
    benchmarks. Returns the delegate and the timings (with its last_prepare as "how")."""
    from acelera import load_delegate
    from acelera.core.interpreter import Interpreter
    from acelera.core.interpreter import OpResolverType as Resolver

    t0 = time.perf_counter()
    d = load_delegate(delegate, {"delegate_serialize_dir": cache_dir, "delegate_serialize_token": Path(path).stem})
    t1 = time.perf_counter()
    it = Interpreter(model_path=path, experimental_delegates=[d], experimental_op_resolver_type=Resolver.BUILTIN_REF)
    it.allocate_tensors()
    t2 = time.perf_counter()
    it.invoke()
    t3 = time.perf_counter()
    return d, {"device": t1 - t0, "init": t2 - t1, "first": t3 - t2, "how": d.last_prepare}
