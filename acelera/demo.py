"""The default job: build acelera's own sample models, run them, print outputs and timings."""
from __future__ import annotations

import time

import numpy as np

from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.samples import tiny_cnn


def _time(fn, runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return float(np.mean(samples)), float(np.min(samples))


def _litert(model: bytes):
    try:
        from ai_edge_litert.interpreter import Interpreter as LiteRT
        from ai_edge_litert.interpreter import OpResolverType
    except ImportError:
        return None
    return LiteRT(model_content=model, num_threads=1,
                  experimental_op_resolver_type=OpResolverType.BUILTIN_REF)


def run_sample(quantized: bool, runs: int = 50) -> None:
    model = tiny_cnn(quantized=quantized)
    kind = "int8" if quantized else "float32"
    t0 = time.perf_counter()
    it = Interpreter(model_content=model, num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    init_us = (time.perf_counter() - t0) * 1e6
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    x = np.random.default_rng(1).uniform(-1, 1, inp["shape"]).astype(np.float32)
    if quantized:
        scale, zp = inp["quantization"]
        x = np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)
    it.set_tensor(inp["index"], x)
    avg, best = _time(it.invoke, runs)
    y = it.get_tensor(out["index"])
    ops = [f"{it.model.main.operators[n].name}" for s in it.execution_plan for n in s.nodes]
    print(f"tiny_cnn ({kind}, built by ModelBuilder, {len(model)} bytes): "
          f"{len(ops)} nodes, all on the CPU reference kernels")
    print(f"  nodes: {', '.join(ops)}")
    print(f"  output '{out['name']}' {list(y.shape)} {y.dtype}: {np.array2string(y.ravel(), precision=4)}")
    print(f"  timings (us): init={init_us:.0f} inference avg={avg:.1f} min={best:.1f} over {runs} runs")
    lite = _litert(model)
    if lite is not None:
        lite.allocate_tensors()
        lite.set_tensor(lite.get_input_details()[0]["index"], x)
        l_avg, _ = _time(lite.invoke, runs)
        ref = lite.get_tensor(lite.get_output_details()[0]["index"])
        diff = np.abs(ref.astype(np.float64) - y.astype(np.float64)).max()
        print(f"  LiteRT BUILTIN_REF: max |diff| = {diff:g}, avg={l_avg:.1f} us, "
              f"acelera/LiteRT latency = {avg / l_avg:.2f}")


def run_delegates(registry, quantized: bool, runs: int = 50) -> None:
    model = tiny_cnn(quantized=quantized)
    ref = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    inp = ref.get_input_details()[0]
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, inp["shape"]).astype(np.float32)
    if quantized:
        x = np.clip(np.round(x * 127.5), -128, 127).astype(np.int8)
    ref.set_tensor(inp["index"], x)
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"]).astype(np.float64)
    from rich.console import Console

    status = Console(stderr=True).status
    for spec in registry.specs.values():
        avail = registry.availability(spec.name)
        if not avail.ok:
            print(f"  {spec.name} ({spec.backend}): unavailable here: {avail.reason}")
            continue
        with status(f"preparing {spec.name} (first use compiles kernels)"):
            it = Interpreter(model_content=model, experimental_delegates=[registry.create(spec.name)],
                             experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
            it.allocate_tensors()
        it.set_tensor(inp["index"], x)
        avg, _ = _time(it.invoke, runs)
        got = it.get_tensor(it.get_output_details()[0]["index"]).astype(np.float64)
        taken = it.delegation.nodes_of(spec.name)
        print(f"  {spec.name} ({spec.backend}): took {len(taken)} of {len(it.model.main.operators)} nodes, "
              f"max |diff| vs reference {np.abs(got - want).max():g}, avg {avg:.1f} us over {runs} runs")


def main(registry=None) -> int:
    if registry is None:
        from acelera.registrar.registry import get_registry

        registry = get_registry()
    for q in (False, True):
        run_sample(q)
        print("  delegates:")
        run_delegates(registry, q)
    for name, reason in registry.broken.items():
        print(f"broken plugin {name}: {reason}")
    certify_available(registry)
    return 0


def certify_available(registry) -> None:
    """Certify every available delegate on generated op cases and acelera's own sample models."""
    from acelera.conformance.report import summary_lines
    from acelera.conformance.suite import certify_with_progress

    print("\ncertification (op, negative, behaviour and sample-model cases; "
          "`acelera conformance --all` adds ../shared/models):")
    for spec in registry.specs.values():
        if not registry.availability(spec.name).ok:
            continue
        t0 = time.perf_counter()
        cert = certify_with_progress(registry, spec.name, models_dir=None, variants_per_case=1)
        for line in summary_lines(cert):
            print(f"  {line}")
        print(f"  ({time.perf_counter() - t0:.1f} s)")
