"""The engine of `acelera inference-diff`: TFLite's inference_diff evaluation tool.

`diff(model, test_delegates)` follows inference_diff's InferenceProfilerStage: it builds a *test*
interpreter (the given delegates and thread count) and a *reference* interpreter (1 thread, no
delegate), then for each run draws fresh random inputs with TFLite's truncated-Gaussian scheme,
invokes the test interpreter then the reference one `invocations_per_run` times each (every
invoke timed in microseconds), and accumulates per output the mean absolute difference.

`format_lines` prints the tool's summary the way run_eval.cc does (C++ ostream number
formatting), followed by acelera's delegation summary; `to_json` mirrors the
EvaluationStageMetrics proto's field names; `run(registry, parsed)` is the command itself.

Deliberate differences from TFLite, all supersets or documented fixes:
- `--output_file_path` gets JSON (EvaluationStageMetrics field names plus `outputs` and
  `delegation` sections) instead of a binary proto.
- `--delegate` also accepts any installed delegate's own name; an explicit `--xnnpack_force_fp16`
  is honoured but `--delegate=xnnpack` does not force fp16 as LiteRT's evaluation tools do.
- Random numbers come from numpy's PCG64 (seeded, default seed fixed), not C++'s
  `std::default_random_engine`: the same distribution, a different sequence.
- Errors are computed in float64 (TFLite: float32); outputs of any numeric type are compared
  (LiteRT: f32/i8/u8/i32/bool); an output with no elements has error 0 (TFLite: NaN).
- `num_runs` < 1 is refused (TFLite prints NaN latencies).
- Integer inputs that index a table (GATHER, EMBEDDING_LOOKUP, GATHER_ND, directly or through
  shape-only ops) are drawn from the indexed dimension's range [0, n) instead of the whole int32
  range, which fails such models in LiteRT too; the summary says which inputs and why
  (input_bounds.py).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from acelera.conformance.input_bounds import index_bounds
from acelera.core.delegate import Delegate
from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.partition import DelegationReport

__all__ = [
    "INFERENCE_DIFF_FLAGS", "TFLITE_DELEGATES", "DEFAULT_SEED", "InferenceDiffError", "RunningStat",
    "LatencyStats", "OutputDiff", "DiffResult", "cpp_float", "input_range", "random_inputs",
    "truncated_gaussian", "resolve_delegate", "diff", "format_lines", "delegation_lines", "to_json",
    "run",
]

DEFAULT_SEED = 0
INVOCATIONS_PER_RUN = 3
MAX_REASON_LINES = 8

#: (name, type, default, help): the task's own flags; every registrar flag is accepted too.
INFERENCE_DIFF_FLAGS: list[tuple[str, type, Any, str]] = [
    ("model_file", str, "", "Path to the .tflite model (required)"),
    ("output_file_path", str, "",
     "If set, the final metrics (EvaluationStageMetrics field names) are written there as JSON"),
    ("num_runs", int, 50, "Number of runs of test and reference inference, each on fresh random inputs "
                          f"({INVOCATIONS_PER_RUN} invocations per interpreter per run)"),
    ("num_interpreter_threads", int, 1,
     "Threads for the test interpreter (overrides --num_threads); the reference uses 1"),
    ("delegate", str, "", "Delegate for the test interpreter: one of TFLite's nnapi, gpu, hexagon, xnnpack, "
                          "coreml, or any installed delegate's name"),
]

#: TFLite's `--delegate` names (evaluation_delegate_provider.cc) and the plugin each maps to.
TFLITE_DELEGATES: dict[str, str] = {
    "nnapi": "nnapi",
    "gpu": "gpu-opencl",
    "hexagon": "hexagon",
    "xnnpack": "xnnpack-cpu",
    "coreml": "coreml",
}

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: input dtype -> [min, max] of TFLite's truncated-Gaussian inputs (inference_profiler_stage.cc)
INPUT_RANGES: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float32): (-1.0, 1.0),
    np.dtype(np.float16): (-1.0, 1.0),
    np.dtype(np.uint8): (0.0, 255.0),
    np.dtype(np.int8): (-128.0, 127.0),
    np.dtype(np.int32): (float(INT32_MIN), float(INT32_MAX)),
    np.dtype(np.int64): (float(INT64_MIN), float(INT64_MAX)),
    np.dtype(np.bool_): (0.0, 1.0),
}


class InferenceDiffError(AceleraError):
    """inference_diff cannot run: a missing or invalid flag, an unsupported tensor type."""


# --- number formatting ---------------------------------------------------------------------
def cpp_float(x: float) -> str:
    """`x` as a default-configured C++ ostream prints a double: `%g`, 6 significant digits."""
    x = float(x)
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    return "%g" % x


# --- statistics ----------------------------------------------------------------------------
@dataclass
class RunningStat:
    """tsl's Stat<T>: count, sum, sum of squares, min, max, first, newest."""

    count: int = 0
    sum: float = 0.0
    squared_sum: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    first: float = 0.0
    newest: float = 0.0

    def update(self, v: float) -> None:
        if self.count == 0:
            self.first = v
        self.newest = v
        self.min = v if v < self.min else self.min
        self.max = v if v > self.max else self.max
        self.count += 1
        self.sum += v
        self.squared_sum += float(v) * float(v)

    @property
    def all_same(self) -> bool:
        return self.count == 0 or self.min == self.max

    @property
    def avg(self) -> float:
        return self.sum / self.count if self.count else math.nan

    @property
    def std_deviation(self) -> float:
        """Population standard deviation; 0 when every sample is the same."""
        if self.all_same:
            return 0.0
        avg = self.avg
        return math.sqrt(max(self.squared_sum / self.count - avg * avg, 0.0))


@dataclass(frozen=True)
class LatencyStats:
    """LatencyMetrics: per-invoke wall times in whole microseconds."""

    last_us: int
    max_us: int
    min_us: int
    sum_us: int
    avg_us: float
    std_deviation_us: int

    @classmethod
    def of(cls, s: RunningStat) -> "LatencyStats":
        if s.count == 0:
            return cls(0, 0, 0, 0, math.nan, 0)
        return cls(int(s.newest), int(s.max), int(s.min), int(s.sum), s.avg, int(s.std_deviation))


@dataclass(frozen=True)
class OutputDiff:
    """One model output: AccuracyMetrics over the per-run mean |test - ref|, plus extremes."""

    index: int  # position among the model's outputs
    tensor: int  # tensor index
    name: str
    dtype: str
    avg_value: float
    std_deviation: float
    min_value: float
    max_value: float
    #: the largest |test - ref| of any element in any run
    max_abs_error: float
    #: the largest |ref| of any element in any run (scale for relative tolerances)
    max_abs_reference: float

    @classmethod
    def of(cls, index: int, tensor: int, name: str, dtype: str, s: RunningStat,
           max_abs_error: float, max_abs_reference: float) -> "OutputDiff":
        avg = s.avg
        return cls(index, tensor, name, dtype, avg, s.std_deviation, s.min if s.count else math.nan,
                   (s.max if avg != 0 else 0.0) if s.count else math.nan, max_abs_error, max_abs_reference)


@dataclass
class DiffResult:
    """What inference_diff measured, and where the test interpreter ran each node."""

    num_runs: int
    reference_latency: LatencyStats
    test_latency: LatencyStats
    output_errors: list[OutputDiff]
    delegation: DelegationReport
    #: (name, backend) of each test delegate, in the order applied
    delegates: list[tuple[str, str]] = field(default_factory=list)
    #: (node index, op name) of every node of the main subgraph
    nodes: list[tuple[int, str]] = field(default_factory=list)
    num_threads: int = 1
    invocations_per_run: int = INVOCATIONS_PER_RUN
    seed: int = DEFAULT_SEED
    #: one line per input drawn from a narrower range than TFLite's (an index input)
    input_notes: list[str] = field(default_factory=list)


# --- random inputs ---------------------------------------------------------------------------
def truncated_gaussian(rng: np.random.Generator, n: int) -> np.ndarray:
    """n draws of N(0.5, 1/3), each redrawn until it lies in [0, 1) (float64)."""
    u = rng.normal(0.5, 1.0 / 3.0, n)
    bad = np.flatnonzero((u < 0) | (u >= 1))
    while bad.size:
        u[bad] = rng.normal(0.5, 1.0 / 3.0, bad.size)
        bad = bad[(u[bad] < 0) | (u[bad] >= 1)]
    return u


def input_range(dtype: Any) -> tuple[float, float]:
    """TFLite's [min, max] for random inputs of `dtype`; InferenceDiffError if unsupported."""
    dt = np.dtype(dtype)
    if dt not in INPUT_RANGES:
        raise InferenceDiffError(f"inference_diff only supports float16, float32, int8, uint8, int32, int64 "
                                 f"and bool input types, got {dt}")
    return INPUT_RANGES[dt]


def random_input(rng: np.random.Generator, shape: Sequence[int], dtype: Any,
                 bounds: tuple[float, float] | None = None) -> np.ndarray:
    """One input tensor: `min + (max - min) * u`, truncated toward zero for integer types.

    `bounds` replaces TFLite's [min, max] for the type (an index input's [0, n))."""
    dt = np.dtype(dtype)
    lo, hi = input_range(dt) if bounds is None else bounds
    n = int(np.prod(shape, dtype=np.int64))
    u = truncated_gaussian(rng, n)
    if dt == np.bool_:  # [0, 1) cast to uint8 is always 0
        return np.zeros(shape, np.bool_)
    if dt.itemsize <= 4 and dt != np.int32:
        # float32 arithmetic as the C++ does; for 8-bit types the result stays within range
        v = np.float32(lo) + np.float32(hi - lo) * u.astype(np.float32)
        return v.astype(dt).reshape(shape) if dt.kind == "f" else np.trunc(v).astype(dt).reshape(shape)
    # 32/64-bit integers: float64 and a clip keep the cast defined at the range ends
    v = np.trunc(lo + (hi - lo) * u)
    top = float(np.nextafter(float(INT64_MAX) + 1.0, 0.0)) if dt == np.int64 else hi
    return np.clip(v, lo, top).astype(dt).reshape(shape)


def random_inputs(rng: np.random.Generator, details: Sequence[Mapping[str, Any]],
                  bounds: Mapping[int, tuple[int, int, str]] | None = None) -> list[np.ndarray]:
    """Fresh inputs for every tensor in `details` (get_input_details order); `bounds`: input
    position -> (low, high exclusive, why), as input_bounds.index_bounds gives."""
    bounds = bounds or {}
    return [random_input(rng, tuple(int(d) for d in det["shape"]), det["dtype"],
                         bounds[k][:2] if k in bounds else None) for k, det in enumerate(details)]


def bounded_inputs(it: Interpreter) -> tuple[dict[int, tuple[int, int, str]], list[str]]:
    """The index inputs of `it`'s model and one note line per input."""
    bounds = index_bounds(it.model)
    details = it.get_input_details()
    notes = [f"Input {k} ('{details[k]['name']}'): drawn from [{lo}, {hi}) because {why}"
             for k, (lo, hi, why) in sorted(bounds.items())]
    return bounds, notes


# --- the engine ----------------------------------------------------------------------------
def _interpreter(model: Any, delegates: Sequence[Delegate], num_threads: int) -> Interpreter:
    if isinstance(model, (bytes, bytearray, memoryview)):
        it = Interpreter(model_content=bytes(model), experimental_delegates=list(delegates),
                         num_threads=num_threads if num_threads > 0 else None,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    else:
        it = Interpreter(model_path=model, experimental_delegates=list(delegates),
                         num_threads=num_threads if num_threads > 0 else None,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def _invoke_timed(it: Interpreter, stat: RunningStat, times: int) -> None:
    for _ in range(times):
        t0 = time.perf_counter_ns()
        it.invoke()
        stat.update((time.perf_counter_ns() - t0) // 1000)


def _as_float(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.bool_:
        a = a.view(np.int8)
    return a.astype(np.float64)


def diff(model: Any, test_delegates: Sequence[Delegate] = (), *, num_runs: int = 50, num_threads: int = 1,
         invocations_per_run: int = INVOCATIONS_PER_RUN, seed: int | None = None) -> DiffResult:
    """Compare the model on `test_delegates` (with `num_threads`) against the CPU reference.

    `model` is a path or the model's bytes. Deterministic for a given `seed` (default
    DEFAULT_SEED): the same inputs are drawn in the same order.
    """
    if num_runs < 1:
        raise InferenceDiffError(f"--num_runs must be at least 1, got {num_runs}")
    if invocations_per_run < 1:
        raise InferenceDiffError(f"invocations_per_run must be at least 1, got {invocations_per_run}")
    seed = DEFAULT_SEED if seed is None else seed
    test = _interpreter(model, test_delegates, num_threads)
    ref = _interpreter(model, (), 1)
    in_details = test.get_input_details()
    for i, det in enumerate(in_details):
        if np.dtype(det["dtype"]) not in INPUT_RANGES:
            raise InferenceDiffError(
                f"inference_diff only supports float16, float32, int8, uint8, int32, int64 and bool input "
                f"types; input {i} ('{det['name']}') is {np.dtype(det['dtype'])}")
    out_details = test.get_output_details()
    for i, det in enumerate(out_details):
        dt = np.dtype(det["dtype"])
        if dt.kind not in "biuf":
            raise InferenceDiffError(f"inference_diff compares numeric outputs only; output {i} "
                                     f"('{det['name']}') is {dt}")
    ref_in = [d["index"] for d in ref.get_input_details()]
    rng = np.random.default_rng(seed)
    bounds, notes = bounded_inputs(test)
    test_lat, ref_lat = RunningStat(), RunningStat()
    errors = [RunningStat() for _ in out_details]
    max_err = [0.0] * len(out_details)
    max_ref = [0.0] * len(out_details)
    for _ in range(num_runs):
        inputs = random_inputs(rng, in_details, bounds)
        for det, v in zip(in_details, inputs):
            test.set_tensor(det["index"], v)
        _invoke_timed(test, test_lat, invocations_per_run)
        for idx, v in zip(ref_in, inputs):
            ref.set_tensor(idx, v)
        _invoke_timed(ref, ref_lat, invocations_per_run)
        for k, det in enumerate(out_details):
            t = test.get_tensor(det["index"])
            r = ref.get_tensor(det["index"])
            if t.shape != r.shape:
                raise InferenceDiffError(f"output {k} ('{det['name']}'): test shape {list(t.shape)} differs "
                                         f"from reference shape {list(r.shape)}")
            tf, rf = _as_float(t), _as_float(r)
            absdiff = np.abs(tf - rf)
            errors[k].update(float(absdiff.mean()) if absdiff.size else 0.0)
            if absdiff.size:
                max_err[k] = float(np.max([max_err[k], absdiff.max()]))
                max_ref[k] = float(np.max([max_ref[k], np.abs(rf).max()]))
    outputs = [OutputDiff.of(k, int(det["index"]), det["name"], np.dtype(det["dtype"]).name, errors[k],
                             max_err[k], max_ref[k]) for k, det in enumerate(out_details)]
    ops = test.model.main.operators
    return DiffResult(
        num_runs=test_lat.count // invocations_per_run,
        reference_latency=LatencyStats.of(ref_lat),
        test_latency=LatencyStats.of(test_lat),
        output_errors=outputs,
        delegation=test.delegation,
        delegates=[(d.name, getattr(d, "backend", "hardware")) for d in test_delegates],
        nodes=[(i, op.name) for i, op in enumerate(ops)],
        num_threads=num_threads,
        invocations_per_run=invocations_per_run,
        seed=seed,
        input_notes=notes,
    )


# --- reporting -----------------------------------------------------------------------------
def _node_reason(result: DiffResult, node: int) -> str:
    rep = result.delegation
    parts = []
    for name, nodes, msg in rep.failures:
        if node in nodes:
            parts.append(f"{name} failed to prepare its partition: {msg}")
    op = dict(result.nodes).get(node, "")
    for name, reason in rep.rejections.get(node, []):
        if op and reason.startswith(f"{op}: "):  # the node line names the op already
            reason = reason[len(op) + 2:]
        parts.append(f"{name}: {reason}")
    if not parts:
        parts.append("not in a partition the delegates kept (max_delegated_partitions / min_nodes_per_partition)")
    return "; ".join(parts)


def _cpu_nodes(result: DiffResult) -> tuple[list[int], list[int]]:
    """(nodes run by CPU kernels, constant-folded nodes no delegate took)."""
    rep = result.delegation
    folded = set(rep.folded)
    cpu = [i for i, _ in result.nodes if i not in rep.node_delegate and i not in folded]
    fold = [i for i in sorted(folded) if i not in rep.node_delegate]
    return cpu, fold


def delegation_lines(result: DiffResult) -> list[str]:
    """Which delegate ran which nodes, and which fell back to the CPU and why."""
    rep = result.delegation
    n = len(result.nodes)
    ops = dict(result.nodes)
    cpu, folded = _cpu_nodes(result)
    if not result.delegates:
        lines = [f"No delegate applied: all {len(cpu)} node(s) run on the CPU",
                 "Note: with no delegate the test interpreter is the CPU reference itself, so every error is 0 "
                 "by construction; give --delegate NAME (or a --use_* flag) to compare a delegate"]
    else:
        lines = []
        for name, backend in result.delegates:
            k = len(rep.nodes_of(name))
            p = len(rep.partitions_of(name))
            lines.append(f"Delegate {name} ({backend}): {k} of {n} nodes in {p} partition(s)")
        lines.append(f"CPU fallback: {len(cpu)} node(s)")
        for i in cpu[:MAX_REASON_LINES]:
            lines.append(f"  node {i} ({ops.get(i, '?')}): {_node_reason(result, i)}")
        if len(cpu) > MAX_REASON_LINES:
            lines.append(f"  ... and {len(cpu) - MAX_REASON_LINES} more")
    if folded:
        lines.append(f"Constant-folded at preparation: {len(folded)} node(s)")
    return lines


def format_lines(result: DiffResult) -> list[str]:
    """run_eval.cc's summary lines (without the `INFO: ` prefix), then the delegation summary."""
    ref, test = result.reference_latency, result.test_latency
    lines = [
        f"Num evaluation runs: {result.num_runs}",
        f"Reference run latency: avg={cpp_float(ref.avg_us)}(us), std_dev={ref.std_deviation_us}(us)",
        f"Test run latency: avg={cpp_float(test.avg_us)}(us), std_dev={test.std_deviation_us}(us)",
    ]
    for o in result.output_errors:
        lines.append(f"OutputDiff[{o.index}]: avg_error={cpp_float(o.avg_value)}, std_dev={cpp_float(o.std_deviation)}")
    return lines + result.input_notes + delegation_lines(result)


def to_json(result: DiffResult) -> dict[str, Any]:
    """EvaluationStageMetrics field names, plus per-output extremes and the delegation."""
    rep = result.delegation
    ops = dict(result.nodes)
    cpu, folded = _cpu_nodes(result)
    return {
        "num_runs": result.num_runs,
        "process_metrics": {
            "inference_profiler_metrics": {
                "reference_latency": dataclasses.asdict(result.reference_latency),
                "test_latency": dataclasses.asdict(result.test_latency),
                "output_errors": [
                    {"max_value": o.max_value, "min_value": o.min_value, "avg_value": o.avg_value,
                     "std_deviation": o.std_deviation}
                    for o in result.output_errors
                ],
            }
        },
        "outputs": [
            {"index": o.index, "tensor": o.tensor, "name": o.name, "dtype": o.dtype,
             "max_abs_error": o.max_abs_error, "max_abs_reference": o.max_abs_reference}
            for o in result.output_errors
        ],
        "delegation": {
            "num_nodes": len(result.nodes),
            "delegates": [
                {"name": name, "backend": backend, "nodes": rep.nodes_of(name),
                 "partitions": [list(p.nodes) for p in rep.partitions_of(name)]}
                for name, backend in result.delegates
            ],
            "cpu_nodes": [{"node": i, "op": ops.get(i, "?"),
                           "reason": _node_reason(result, i) if result.delegates else "no delegate"} for i in cpu],
            "folded_nodes": folded,
            "failures": [{"delegate": name, "nodes": list(nodes), "reason": msg} for name, nodes, msg in rep.failures],
        },
        "config": {"num_threads": result.num_threads, "invocations_per_run": result.invocations_per_run,
                   "seed": result.seed, "input_notes": result.input_notes},
    }


# --- the command ---------------------------------------------------------------------------
def resolve_delegate(registry: Any, name: str) -> str:
    """The plugin delegate `--delegate NAME` means: an installed name, or TFLite's names mapped."""
    if name in registry.specs:
        return name
    if name not in TFLITE_DELEGATES:
        raise InferenceDiffError(f"Unsupported TFLite delegate: {name}")
    target = TFLITE_DELEGATES[name]
    if name == "gpu" and "gpu-gl" in registry.specs:
        cl_ok = target in registry.specs and registry.availability(target).ok
        if not cl_ok and registry.availability("gpu-gl").ok:
            return "gpu-gl"
    return target


def _get(parsed: Any, name: str) -> Any:
    default = next(f[2] for f in INFERENCE_DIFF_FLAGS if f[0] == name)
    return parsed.get(name) if name in parsed.flags else default


def _delegate_options(registry: Any, parsed: Any, name: str, num_threads: int) -> dict[str, Any]:
    """The explicitly set flags that belong to delegate `name`, with the test thread count."""
    from acelera.registrar.spec import COMMON_FLAGS

    own = {f.name for f in registry.spec(name).flags} | {f.name for f in COMMON_FLAGS}
    opts = {k: parsed.get(k) for k in own if k in parsed.flags and parsed.is_set(k)}
    if "num_threads" in own:
        opts["num_threads"] = num_threads
    return opts


def build_delegates(registry: Any, parsed: Any, num_threads: int) -> list[Delegate]:
    """`--delegate` first (registry.create), then whatever registrar flags enable, without repeats."""
    delegates: list[Delegate] = []
    name = _get(parsed, "delegate")
    if name:
        target = resolve_delegate(registry, name)
        delegates.append(registry.create(target, _delegate_options(registry, parsed, target, num_threads)))
    # the evaluation tools pass the proto's thread count to every registrar-built delegate
    if "num_threads" in parsed.flags:
        parsed = dataclasses.replace(parsed, values={**parsed.values, "num_threads": num_threads})

    def family(n: str) -> str:  # gpu-gl stands in for gpu-opencl: one GPU delegate at most
        spec = registry.specs.get(n)
        return (spec.fallback_for or n) if spec is not None else n

    taken = {family(d.name) for d in delegates}
    for d in registry.build(parsed):
        if family(d.name) not in taken:
            delegates.append(d)
            taken.add(family(d.name))
    return delegates


def run(registry: Any, parsed: Any, log: Callable[[str], Any] = print, *, seed: int | None = None) -> int:
    """inference_diff: read the flags, build the delegates, diff, log, write the JSON; returns 0."""
    model_file = _get(parsed, "model_file")
    if not model_file:
        raise InferenceDiffError("--model_file is required: the path of the .tflite model to evaluate")
    if not os.path.isfile(model_file):
        raise InferenceDiffError(f"--model_file: no such file: {model_file}")
    num_runs = int(_get(parsed, "num_runs"))
    if num_runs < 1:
        raise InferenceDiffError(f"--num_runs must be at least 1, got {num_runs}")
    threads = int(_get(parsed, "num_interpreter_threads"))
    if threads < -1:
        raise InferenceDiffError(f"--num_interpreter_threads must be >= -1, got {threads}")
    delegates = build_delegates(registry, parsed, threads)
    from rich.console import Console

    with Console(stderr=True).status(f"inference-diff: {num_runs} runs of test and reference"):
        result = diff(model_file, delegates, num_runs=num_runs, num_threads=threads, seed=seed)
    for line in format_lines(result):
        log(line)
    out = _get(parsed, "output_file_path")
    if out:
        try:
            with open(out, "w") as f:
                json.dump(to_json(result), f, indent=2)
                f.write("\n")
        except OSError as e:
            raise InferenceDiffError(f"--output_file_path: cannot write {out}: {e.strerror or e}") from None
    return 0
