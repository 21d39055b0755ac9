"""`acelera benchmark`: wires registry-built delegates into the benchmark_model engine."""
from __future__ import annotations

import sys
from dataclasses import fields

from acelera.benchmarking import BenchmarkParams, run_benchmark
from acelera.cli.options import PATH_FLAGS, check_path_flags
from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.registrar.flags import ParsedFlags
from acelera.registrar.registry import Registry


def run(registry: Registry, parsed: ParsedFlags, log=print) -> int:
    params = BenchmarkParams(**{f.name: parsed.get(f.name) for f in fields(BenchmarkParams) if f.name in parsed.flags})
    if not params.graph:
        raise AceleraError("--graph is required: the path of the .tflite model to benchmark")
    check_path_flags(parsed, PATH_FLAGS["benchmark"])  # before anything is built or opened
    delegates = registry.build(parsed)
    for d in delegates:
        log(f"{d.name} delegate created ({d.backend}).")
    if not delegates:
        log("No delegate enabled: every node runs on acelera's CPU reference kernels.")
    threads = parsed.get("num_threads")

    def make_interpreter() -> Interpreter:
        it = Interpreter(model_path=params.graph, experimental_delegates=delegates,
                         num_threads=threads if threads and threads > 0 else None,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.require_full_delegation = bool(parsed.get("require_full_delegation"))
        return it

    if log is print and sys.stdout.isatty():
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True) as bar:
            task = bar.add_task("initializing", total=None)

            def on_run(regular: bool, n: int) -> None:
                bar.update(task, description=f"{'benchmark' if regular else 'warm-up'} run {n}")

            run_benchmark(params, make_interpreter,
                          lambda line: bar.console.print(line, markup=False, highlight=False), on_run)
    else:
        run_benchmark(params, make_interpreter, log)
    return 0
