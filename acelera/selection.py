"""Which delegate configuration should a model use on this machine? (`acelera select`)

LiteRT's acceleration service (the mini-benchmark) answers this on Android; `select()` answers
it wherever acelera runs. It tries every configuration of the available delegates that could
apply to the model, in this order (so that a time budget cuts the least likely first):

0. the CPU reference kernels, no delegate (the baseline);
1. each non-emulated delegate alone with its defaults;
2. variants: CPU delegates at num_threads 1, 2 and the machine's core count; delegates that
   declare `gpu_precision_loss_allowed` with it false (their default is true);
3. stacks: each accelerator (a non-CPU delegate) with `xnnpack-cpu` taking the nodes it leaves
   (skipped, with the reason, when the accelerator takes every node or fails alone);
4. the same three steps for emulated delegates (nnapi, hexagon, coreml here), which may win only
   with `allow_emulated=True`: their latency is this machine's emulation, not the device's.

A configuration is a set of flag values, the very ones `--config` reads: its delegates are
built with `Registry.build` from those flags, so what `to_toml()` writes reproduces what was
measured. Each one is
- checked for accuracy against the CPU reference with the inference_diff engine (`diff()`, a
  few runs of random inputs, fixed seed) and judged with the conformance suite's *model-case*
  tolerance of the loosest precision among the delegates that took nodes (tolerances.py):
  float outputs need max|err| <= tol.allowed(max|ref|), quantized outputs are counted in steps
  (and on their average, where the tolerance bounds it); no float64 floor is measured here;
- timed: init (building the delegates, the Interpreter and allocate_tensors(), in this process
  after the accuracy check has built it once, so one-time imports and JIT compilation are not
  counted), and warm latency (latency.measure_latency: the median of N invokes after W);
- for delegates that write a serialization cache (`delegate_serialize_dir` + `_token`, in a
  temporary directory), init again from a filled cache;
- described: which delegate took how many nodes in how many partitions, what stayed on the CPU.

Passing configurations are ranked by median latency (then init time).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from acelera.conformance.cases import accepts, classify_model
from acelera.conformance.latency import measure_latency
from acelera.conformance.tolerances import UNFLOORED_FLOAT_VIEW, Tolerance, Tolerances, resolve_precision
from acelera.core.errors import AceleraError

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "LEFTOVER_DELEGATE",
    "Configuration",
    "Selection",
    "SelectionError",
    "Trial",
    "accuracy_text",
    "judge",
    "model_token",
    "plan",
    "select",
    "thread_counts",
]

#: the delegate stacked under an accelerator to take the nodes it leaves
LEFTOVER_DELEGATE = "xnnpack-cpu"
#: the precision flag whose two values are tried (the GPU delegates')
PRECISION_FLAG = "gpu_precision_loss_allowed"
DEFAULT_TIME_BUDGET = 60.0
DEFAULT_ACCURACY_RUNS = 3
#: loosest last: a stack is judged by the loosest precision among the delegates that took nodes
LOOSENESS = ("exact", "float32", "integer", "float16", "float-view", "optimized")
MAX_WARNINGS = 5

PASS, FAIL, ERROR, SKIPPED, NOT_TRIED = "pass", "fail", "error", "skipped", "not tried"


class SelectionError(AceleraError):
    """select() cannot run: an unknown delegate, a bad budget or count."""


@dataclass
class Configuration:
    """One way to run the model: delegates in order and the flag values that build them."""

    label: str
    delegates: tuple[str, ...]
    #: flag name -> value, as `--config` reads them
    flags: dict[str, Any]
    phase: int = 1
    emulated: bool = False
    #: label of the configuration this stack extends (it runs only when that one left nodes)
    extends: str | None = None
    #: flags that only pick the delegate among those sharing its enabling flag (gpu_backend)
    selectors: tuple[str, ...] = ()


@dataclass
class Trial:
    """A configuration's row of the table."""

    config: Configuration
    status: str = NOT_TRIED
    reason: str = ""
    backends: tuple[str, ...] = ()
    precision: str | None = None
    tolerance: dict[str, Any] | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    latency: dict[str, Any] | None = None
    init_ms: float | None = None
    #: init from a filled serialization cache (None: not tried or not used by the delegates)
    init_ms_serialized: float | None = None
    serialization: str = ""
    #: total nodes; per delegate (name, nodes taken, partitions); nodes left on the CPU
    nodes: int = 0
    placement: list[tuple[str, int, int]] = field(default_factory=list)
    cpu_nodes: int = 0
    #: constant nodes evaluated once at allocate_tensors() (fp16 weight DEQUANTIZE) no delegate took
    folded: int = 0
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rank: int | None = None

    @property
    def median_us(self) -> float:
        return float(self.latency["median_us"]) if self.latency else math.inf

    def where(self) -> str:
        """'gpu-opencl 7/7 nodes', 'coreml 6/7 nodes in 2 partitions; CPU 1/7'."""
        if self.status in (SKIPPED, NOT_TRIED) or not self.nodes:
            return ""
        parts = [f"{n} {k}/{self.nodes} nodes" + (f" in {p} partitions" if p > 1 else "")
                 for n, k, p in self.placement]
        if self.cpu_nodes or not parts:
            parts.append(f"CPU {self.cpu_nodes}/{self.nodes}")
        if self.folded:
            parts.append(f"{self.folded} constant-folded")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        c = self.config
        return {
            "rank": self.rank, "label": c.label, "delegates": list(c.delegates), "flags": dict(c.flags),
            "status": self.status, "reason": self.reason, "emulated": c.emulated, "backends": list(self.backends),
            "precision": self.precision, "tolerance": self.tolerance, "outputs": self.outputs,
            "latency_us": self.latency, "init_ms": self.init_ms, "init_ms_serialized": self.init_ms_serialized,
            "serialization": self.serialization,
            "delegation": {"nodes": self.nodes, "cpu_nodes": self.cpu_nodes, "folded_nodes": self.folded,
                           "delegates": [{"name": n, "nodes": k, "partitions": p} for n, k, p in self.placement]},
            "where": self.where(), "warnings": self.warnings, "seconds": round(self.seconds, 3),
        }


@dataclass
class Selection:
    """The whole table, ranked, and the winner."""

    model: str
    model_type: str
    numeric: str
    trials: list[Trial]
    time_budget_s: float
    elapsed_s: float
    cores: int
    runs: int
    warmup: int
    accuracy_runs: int
    allow_emulated: bool
    tolerances_source: str = "defaults"
    registry: Any = field(default=None, repr=False, compare=False)

    @property
    def ranked(self) -> list[Trial]:
        return sorted((t for t in self.trials if t.rank is not None), key=lambda t: cast(int, t.rank))

    @property
    def winner(self) -> Trial | None:
        best = self.ranked[:1]
        return best[0] if best and self._eligible(best[0]) else None

    def _eligible(self, t: Trial) -> bool:
        return t.status == PASS and (self.allow_emulated or not t.config.emulated)

    @property
    def not_tried(self) -> list[str]:
        return [t.config.label for t in self.trials if t.status == NOT_TRIED]

    @property
    def budget_spent(self) -> bool:
        return bool(self.not_tried)

    # --- output ----------------------------------------------------------------------------
    def to_toml(self) -> str:
        """The winner as a `--config` file (flags under [tool.acelera], so it can also be pasted
        into pyproject.toml); a SelectionError when nothing passed."""
        w = self._need_winner()
        c = w.config
        name = Path(self.model).name
        lines = [f"# acelera select: the fastest configuration that passed accuracy for {name} on this machine",
                 (f"# {c.label}: {_us(w.median_us)} median latency, init {_ms(w.init_ms)}; "
                  f"ran: {w.where() or 'no nodes'}"),
                 f"# use: acelera benchmark --config THIS_FILE --graph {name} (every tool's --config), or paste",
                 "# the table into ./pyproject.toml"]
        if not c.delegates:
            lines.append("# no delegate: the CPU reference kernels were the fastest")
        if w.init_ms_serialized is not None:
            lines += [f"# {w.serialization}; to keep compiled data between runs add:",
                      '# delegate_serialize_dir = "/path/to/cache/dir"',
                      f'# delegate_serialize_token = "{model_token(self.model)}"']
        exact, order = self._toml_order(c)
        if not exact:
            lines.append(f"# the delegates apply in the order of their flags on the command line, which TOML cannot "
                         f"express: run with {' '.join(order)}")
        lines.append("[tool.acelera]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in c.flags.items()]
        return "\n".join(lines) + "\n"

    def _toml_order(self, c: Configuration) -> tuple[bool, list[str]]:
        from acelera.registrar.registry import get_registry

        registry = self.registry or get_registry()
        names = [s.name for s in registry.enabled(_parsed(registry, c.flags, ordered=False))]
        return names == list(c.delegates), [f"--{k}={_toml_value(v)}" for k, v in c.flags.items()]

    def to_python(self, model_path: str | None = None) -> str:
        """The winner as LiteRT-style Python: Interpreter(..., experimental_delegates=[load_delegate(...)])."""
        w = self._need_winner()
        c = w.config
        from acelera.registrar.registry import get_registry

        registry = self.registry or get_registry()
        calls = []
        for name in c.delegates:
            spec = registry.spec(name)
            own = {f.name for f in spec.flags} | {"num_threads"}
            opts = {k: v for k, v in c.flags.items()
                    if k in own and k not in spec.enabled_by and k not in c.selectors}
            opt_text = "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in opts.items()) + "}"
            calls.append(f"load_delegate({_py(name)}, {opt_text})" if opts else f"load_delegate({_py(name)})")
        threads = c.flags.get("num_threads")
        args = [f"model_path={_py(model_path or self.model)}",
                f"experimental_delegates=[{', '.join(calls)}]"]
        if isinstance(threads, int) and threads > 0:
            args.append(f"num_threads={threads}")
        # what was measured: nodes no delegate takes run on the reference kernels (AUTO would add xnnpack-cpu)
        args.append("experimental_op_resolver_type=OpResolverType.BUILTIN_REF")
        pad = " " * len("it = Interpreter(")
        return ("from acelera import Interpreter, OpResolverType, load_delegate\n"
                "it = Interpreter(" + (",\n" + pad).join(args) + ")\n")

    def _need_winner(self) -> Trial:
        w = self.winner
        if w is None:
            raise SelectionError(f"no configuration passed for {self.model}" + (
                " within the time budget" if self.budget_spent else ""))
        return w

    def to_json(self) -> dict[str, Any]:
        w = self.winner
        return {
            "model": self.model, "model_type": self.model_type, "numeric": self.numeric, "cores": self.cores,
            "time_budget_s": self.time_budget_s, "elapsed_s": round(self.elapsed_s, 3),
            "latency_method": f"median of {self.runs} invoke(s) after {self.warmup} warm-up invoke(s)",
            "accuracy_method": f"inference_diff, {self.accuracy_runs} run(s) of random inputs, model-case "
                               f"tolerances ({self.tolerances_source})",
            "allow_emulated": self.allow_emulated,
            "winner": w.config.label if w else None,
            "configurations": [t.to_dict() for t in self.ranked + [t for t in self.trials if t.rank is None]],
            "not_tried": self.not_tried,
            "toml": self.to_toml() if w else None,
            "python": self.to_python() if w else None,
        }


# --- planning -------------------------------------------------------------------------------
def thread_counts(cores: int | None = None) -> list[int]:
    """1, 2 and the machine's core count when larger."""
    cores = cores or os.cpu_count() or 1
    return sorted({1, 2, cores})


def _parsed(registry: Any, flags: Mapping[str, Any], ordered: bool = True) -> Any:
    """ParsedFlags holding `flags`; `ordered`: argv positions in the mapping's order (delegate rank)."""
    from acelera.registrar.flags import ParsedFlags

    parsed = ParsedFlags(registry.flagset.flags)
    for i, (k, v) in enumerate(flags.items()):
        parsed.values[k] = v
        parsed.sources[k] = "select"
        parsed.positions[k] = i + 1 if ordered else 0
    return parsed


def _selecting_flags(registry: Any, spec: Any) -> tuple[dict[str, Any], tuple[str, ...]] | str:
    """The flags that enable `spec` alone (its bool enabling flag, plus a choice flag where
    delegates share it: gpu_backend), or why none do."""
    flag = next((f for f in spec.enabled_by if registry.flagset.flags[f].type is bool), None)
    if flag is None:
        needs = ", ".join(f"--{f}" for f in spec.enabled_by) or "a flag"
        return f"needs {needs} (e.g. a native delegate library); not tried"
    base = {flag: True}
    if [s.name for s in registry.enabled(_parsed(registry, base))] == [spec.name]:
        return base, ()
    for f in spec.flags:
        for choice in f.choices or ():
            if choice == f.default:
                continue
            trial = {**base, f.name: choice}
            if [s.name for s in registry.enabled(_parsed(registry, trial))] == [spec.name]:
                return trial, (f.name,)
    return f"--{flag} does not select it alone (another delegate takes precedence)"


def _label(names: Sequence[str], options: Mapping[str, Any]) -> str:
    head = " + ".join(names) if names else "reference (no delegate)"
    opts = ", ".join(f"{k}={_toml_value(v)}" for k, v in options.items())
    return f"{head} ({opts})" if opts else (f"{head} (defaults)" if names else head)


def plan(registry: Any, model_type: str, only: Iterable[str] | None = None,
         cores: int | None = None) -> tuple[list[Configuration], list[Trial]]:
    """The configurations to try, in order, and rows for delegates that cannot apply (with why)."""
    only_set = set(only) if only is not None else None
    skipped: list[Trial] = []
    alone: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {}
    for spec in registry.specs.values():
        if only_set is not None and spec.name not in only_set:
            continue

        def skip(reason: str, spec=spec) -> None:
            c = Configuration(_label([spec.name], {}), (spec.name,), {}, emulated=spec.backend == "emulated")
            skipped.append(Trial(c, SKIPPED, reason, backends=(spec.backend,)))

        avail = registry.availability(spec.name)
        if not avail.ok:
            skip(f"unavailable: {avail.reason}")
            continue
        if not accepts(spec.model_types, model_type):
            skip(f"{model_type} model; {spec.name} takes {', '.join(sorted(spec.model_types))}")
            continue
        sel = _selecting_flags(registry, spec)
        if isinstance(sel, str):
            skip(sel)
            continue
        alone[spec.name] = sel
    configs = [Configuration(_label([], {}), (), {}, phase=0)]
    leftover = alone.get(LEFTOVER_DELEGATE)
    for emulated in (False, True):
        shift = 3 if emulated else 0
        for name, (flags, selectors) in alone.items():
            spec = registry.spec(name)
            if (spec.backend == "emulated") != emulated:
                continue
            default = Configuration(_label([name], {}), (name,), dict(flags), 1 + shift, emulated, None, selectors)
            configs.append(default)
            variants: list[dict[str, Any]] = []
            if spec.backend == "cpu":
                variants += [{"num_threads": n} for n in thread_counts(cores)]
            own = {f.name: f for f in spec.flags}
            if PRECISION_FLAG in own and own[PRECISION_FLAG].type is bool:
                variants.append({PRECISION_FLAG: not own[PRECISION_FLAG].default})
            for v in variants:
                configs.append(Configuration(_label([name], v), (name,), {**flags, **v}, 2 + shift, emulated,
                                             None, selectors))
            if spec.backend != "cpu" and leftover is not None and name != LEFTOVER_DELEGATE:
                names = (name, LEFTOVER_DELEGATE)
                configs.append(Configuration(_label(names, {}), names, {**flags, **leftover[0]}, 3 + shift,
                                             emulated, default.label, selectors + leftover[1]))
    configs.sort(key=lambda c: c.phase)  # stable: registry order within a phase
    return configs, skipped


# --- judging --------------------------------------------------------------------------------
def _loosest(precisions: Iterable[str]) -> str | None:
    ps = list(precisions)
    return max(ps, key=LOOSENESS.index) if ps else None


def judge(result: Any, model: Any, tol: Tolerance) -> tuple[list[dict[str, Any]], list[str]]:
    """Each output of a DiffResult against `tol` (the model-case rule of model_cases.py, without
    the float64 floor): per-output details and one error line per failing output."""
    sg = model.main
    producers = {t: op for op in sg.operators for t in op.outputs}
    outputs, errors = [], []
    for od in result.output_errors:
        t = sg.tensors[od.tensor]
        q = t.quantization
        entry: dict[str, Any] = {"index": od.index, "name": od.name, "dtype": od.dtype,
                                 "avg_error": _num(od.avg_value)}
        avg_steps = None
        if t.dtype.kind in "iu" and q.is_set and q.scale.size == 1 and float(q.scale[0]) > 0:
            scale, zp = float(q.scale[0]), int(q.zero_point[0]) if q.zero_point.size else 0
            allowed_steps = math.floor(tol.allowed((od.max_abs_reference + abs(zp)) * scale, scale) / scale + 1e-9)
            ok = od.max_abs_error <= allowed_steps
            entry.update(max_steps=od.max_abs_error, allowed_steps=allowed_steps)
            msg = f"{od.max_abs_error:g} quantization steps off (allowed {allowed_steps})"
            avg_steps = od.avg_value
        elif t.dtype.kind == "f":
            quantum = 0.0
            p = producers.get(od.tensor)
            if p is not None and p.op == "DEQUANTIZE" and p.inputs:
                qi = sg.tensors[p.inputs[0]].quantization
                quantum = float(np.max(qi.scale)) if qi.is_set and qi.scale.size else 0.0
            allowed = tol.allowed(od.max_abs_reference, quantum or None)
            ok = od.max_abs_error <= allowed
            entry.update(max_abs_error=_num(od.max_abs_error), max_abs_reference=_num(od.max_abs_reference),
                         allowed=_num(allowed))
            msg = f"max |error| {od.max_abs_error:.3g} > allowed {allowed:.3g} (max |reference| {od.max_abs_reference:.3g})"
            avg_steps = od.avg_value / quantum if quantum else None
        else:
            ok = od.max_abs_error == 0
            entry.update(max_abs_error=_num(od.max_abs_error))
            msg = f"integer output differs by up to {od.max_abs_error:g}"
        if ok and avg_steps is not None and tol.avg_steps is not None:
            entry.update(avg_steps=_num(avg_steps), allowed_avg_steps=tol.avg_steps)
            ok = avg_steps <= tol.avg_steps
            msg = f"average error {avg_steps:.3g} quantization steps (allowed {tol.avg_steps:g})"
        entry["ok"] = bool(ok)
        outputs.append(entry)
        if not ok:
            errors.append(f"output {od.index} ('{od.name}'): {msg}")
    return outputs, errors


def accuracy_text(t: Trial) -> str:
    """One short cell: the worst output's error against what was allowed."""
    if not t.outputs:
        return ""
    worst = None
    for o in t.outputs:
        if "max_steps" in o:
            ratio = o["max_steps"] / o["allowed_steps"] if o["allowed_steps"] else (math.inf if o["max_steps"] else 0)
            text = f"{o['max_steps']:g}/{o['allowed_steps']} steps"
        elif "allowed" in o:
            err, allowed = float(o["max_abs_error"]), float(o["allowed"])
            ratio = err / allowed if allowed else (math.inf if err else 0)
            text = f"{err:.2g} <= {allowed:.2g}" if o["ok"] else f"{err:.2g} > {allowed:.2g}"
        else:
            ratio = math.inf if float(o["max_abs_error"]) else 0
            text = f"{float(o['max_abs_error']):g} (exact)"
        if worst is None or ratio > worst[0]:
            worst = (ratio, text)
    return worst[1] if worst else ""


# --- running --------------------------------------------------------------------------------
def model_token(model_path: str) -> str:
    """A serialization token for the model: its stem and a content hash."""
    data = Path(model_path).read_bytes()
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", Path(model_path).stem)[:40] or "model"
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}"


class _Runner:
    def __init__(self, registry: Any, model_path: str, model: Any, numeric: str, tolerances: Tolerances,
                 runs: int, warmup: int, accuracy_runs: int):
        self.registry, self.path, self.model, self.numeric = registry, model_path, model, numeric
        self.tolerances, self.runs, self.warmup, self.accuracy_runs = tolerances, runs, warmup, accuracy_runs
        self.no_cache: set[str] = set()  # delegates seen not to write a serialization cache
        self.token = model_token(model_path)

    def build(self, c: Configuration, extra: Mapping[str, Any] | None = None) -> list[Any]:
        delegates = self.registry.build(_parsed(self.registry, {**c.flags, **(extra or {})}))
        got = [d.name for d in delegates]
        if got != list(c.delegates):
            raise SelectionError(f"the flags {c.flags} build {got or 'no delegate'}, not {list(c.delegates)}")
        return delegates

    def interpreter(self, c: Configuration, delegates: Sequence[Any]) -> Any:
        from acelera.core.interpreter import Interpreter, OpResolverType

        threads = c.flags.get("num_threads")
        it = Interpreter(model_path=self.path, experimental_delegates=list(delegates),
                         num_threads=threads if isinstance(threads, int) and threads > 0 else None,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        return it

    def timed_init(self, c: Configuration, extra: Mapping[str, Any] | None = None) -> tuple[float, Any, list[Any]]:
        t0 = time.perf_counter()
        delegates = self.build(c, extra)
        it = self.interpreter(c, delegates)
        return (time.perf_counter() - t0) * 1e3, it, delegates

    def run(self, t: Trial) -> None:
        from acelera.conformance.inference_diff import (
            InferenceDiffError,
            bounded_inputs,
            diff,
        )

        c = t.config
        threads = c.flags.get("num_threads")
        threads = threads if isinstance(threads, int) and threads > 0 else -1
        delegates = self.build(c)
        t.backends = tuple(getattr(d, "backend", "?") for d in delegates)
        rep = self.interpreter(c, delegates).delegation  # also builds what init will time once, untimed
        if delegates and not rep.node_delegate:
            t.nodes, t.cpu_nodes = len(self.model.main.operators), len(self.model.main.operators)
            t.status, t.reason = SKIPPED, f"{' + '.join(c.delegates)} took no node of this model{_why_not(rep)}"
            return
        if delegates:
            try:
                result = diff(self.path, delegates, num_runs=self.accuracy_runs, num_threads=threads,
                              invocations_per_run=1)
            except InferenceDiffError as e:
                result = _local_diff(self, c, delegates, str(e))
            rep = result.delegation
            t.nodes = len(result.nodes)
            t.placement = [(d.name, len(rep.nodes_of(d.name)), len(rep.partitions_of(d.name))) for d in delegates]
            folded = set(rep.folded) - set(rep.node_delegate)
            t.folded = len(folded)
            t.cpu_nodes = sum(1 for i, _ in result.nodes if i not in rep.node_delegate and i not in folded)
            used = [(self.registry.spec(d.name), d) for d in delegates if rep.nodes_of(d.name)]
            t.precision = _loosest(resolve_precision(s, d, self.numeric) for s, d in used) or \
                resolve_precision(None, None, self.numeric)
            tol = (UNFLOORED_FLOAT_VIEW if t.precision == "float-view"  # no float-view answer here
                   else self.tolerances.for_case(t.precision, "model"))
            t.tolerance = dataclasses.asdict(tol)
            t.outputs, errors = judge(result, self.model, tol)
            if errors:
                t.status, t.reason = FAIL, f"accuracy ({t.precision} model tolerance): " + "; ".join(errors)
        else:
            t.nodes = len(self.model.main.operators)
            t.folded = len(rep.folded)
            t.cpu_nodes = t.nodes - t.folded
            t.reason = "the reference itself"
        ms, it, _ = self.timed_init(c)
        t.init_ms = round(ms, 2)
        bounds, _ = bounded_inputs(it)
        for det, x in zip(it.get_input_details(),
                          _inputs(np.random.default_rng(0), it.get_input_details(), bounds)):
            it.set_tensor(det["index"], x)
        t.latency = measure_latency(it, self.runs, self.warmup).to_dict()
        del it
        self.serialization(t)
        if t.status != FAIL:
            t.status = PASS

    def serialization(self, t: Trial) -> None:
        """Init from a filled serialization cache, for delegates that write one."""
        c = t.config
        hosts = [n for n, b in zip(c.delegates, t.backends) if b != "cpu"]
        if not hosts or all(n in self.no_cache for n in hosts):
            return
        with tempfile.TemporaryDirectory(prefix="acelera-select-") as d:
            extra = {"delegate_serialize_dir": d, "delegate_serialize_token": self.token}
            cold, it, _ = self.timed_init(c, extra)
            del it
            if not os.listdir(d):
                self.no_cache.update(hosts)
                t.serialization = "no serialization cache written"
                return
            warm, it, _ = self.timed_init(c, extra)
            del it
            t.init_ms_serialized = round(warm, 2)
            t.serialization = (f"{'/'.join(hosts)} serialization cache: init {_ms(t.init_ms)} without, "
                               f"{_ms(warm)} from a filled cache ({len(os.listdir(d))} file(s); "
                               f"{_ms(cold)} while filling it)")


def _inputs(rng: np.random.Generator, details: Sequence[Mapping[str, Any]], bounds: Mapping[int, Any]) -> list:
    """inference_diff's inputs; types it does not draw (int16): uniform over the type."""
    from acelera.conformance.inference_diff import INPUT_RANGES, random_input

    out = []
    for k, det in enumerate(details):
        dt, shape = np.dtype(det["dtype"]), tuple(int(x) for x in det["shape"])
        if k in bounds or dt in INPUT_RANGES:
            out.append(random_input(rng, shape, dt, bounds[k][:2] if k in bounds else None))
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dt))
        else:
            out.append(np.zeros(shape, dt))
    return out


def _local_diff(runner: _Runner, c: Configuration, delegates: Sequence[Any], why: str) -> Any:
    """diff()'s measurement for inputs inference_diff does not draw (int16): the same
    accumulation over uniformly random inputs of the type."""
    from acelera.conformance.inference_diff import (
        DiffResult,
        LatencyStats,
        OutputDiff,
        RunningStat,
        bounded_inputs,
    )

    test, ref = runner.interpreter(c, delegates), runner.interpreter(Configuration("", (), {}), [])
    rng = np.random.default_rng(0)
    bounds, notes = bounded_inputs(test)
    outs = test.get_output_details()
    errs = [RunningStat() for _ in outs]
    max_err, max_ref = [0.0] * len(outs), [0.0] * len(outs)
    for _ in range(runner.accuracy_runs):
        xs = _inputs(rng, test.get_input_details(), bounds)
        for it in (test, ref):
            for det, x in zip(it.get_input_details(), xs):
                it.set_tensor(det["index"], x)
            it.invoke()
        for k, det in enumerate(outs):
            a = np.abs(test.get_tensor(det["index"]).astype(np.float64) - ref.get_tensor(det["index"]).astype(np.float64))
            errs[k].update(float(a.mean()) if a.size else 0.0)
            if a.size:
                max_err[k] = max(max_err[k], float(a.max()))
                max_ref[k] = max(max_ref[k], float(np.abs(ref.get_tensor(det["index"]).astype(np.float64)).max()))
    od = [OutputDiff.of(k, int(det["index"]), det["name"], np.dtype(det["dtype"]).name, errs[k], max_err[k], max_ref[k])
          for k, det in enumerate(outs)]
    none = LatencyStats.of(RunningStat())
    return DiffResult(runner.accuracy_runs, none, none, od, test.delegation,
                      [(d.name, getattr(d, "backend", "?")) for d in delegates],
                      [(i, op.name) for i, op in enumerate(test.model.main.operators)],
                      input_notes=notes + [f"local comparison: {why}"])


def _why_not(rep: Any) -> str:
    """': <the most frequent refusal>' from a delegation report, or ''."""
    reasons: dict[str, int] = {}
    for refusals in rep.rejections.values():
        for _, why in refusals:
            reasons[why] = reasons.get(why, 0) + 1
    for _, nodes, msg in rep.failures:
        reasons[f"prepare failed: {msg}"] = reasons.get(f"prepare failed: {msg}", 0) + len(nodes)
    if not reasons:
        return ""
    why, n = max(reasons.items(), key=lambda kv: kv[1])
    return f" (e.g. {n} node(s): {' '.join(why.split())[:160]})"


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text and not isinstance(e, AceleraError) else text or type(e).__name__


def _stack_skip(t: Trial, base: Trial | None) -> str | None:
    """Why a stack is not worth trying, given its accelerator's own row."""
    if base is None:
        return "its accelerator alone was not planned"
    if base.status == SKIPPED:
        return f"{base.config.label} was skipped: {base.reason}"
    if base.status == ERROR:
        return f"{base.config.delegates[0]} fails alone: {base.reason}"
    if base.status == FAIL:
        return f"{base.config.delegates[0]} alone fails accuracy on the nodes it takes (the stack runs them too)"
    if base.cpu_nodes == 0:
        return (f"{base.config.delegates[0]} takes all {base.nodes} nodes alone: nothing is left for "
                f"{LEFTOVER_DELEGATE}")
    return None


def select(model_path: str | os.PathLike, registry: Any = None, *, time_budget: float = DEFAULT_TIME_BUDGET,
           runs: int | None = None, warmup: int | None = None, accuracy_runs: int = DEFAULT_ACCURACY_RUNS,
           tolerances: Tolerances | None = None, delegates: Iterable[str] | None = None,
           allow_emulated: bool = False, cores: int | None = None,
           progress: Callable[[str, int, int, Trial | None], Any] | None = None) -> Selection:
    """Try every applicable configuration for the model at `model_path` and rank them.

    `time_budget` (seconds, from the start): no configuration starts after it is spent (the
    rest are listed as not tried). `runs`/`warmup`: warm latency (default the tolerances'
    [latency] runs and warmup: 10 after 2). `accuracy_runs`: inference_diff runs per
    configuration. `delegates`: only configurations made of these. `progress(label, done,
    total, trial)` is called before each configuration (trial None) and after it.
    """
    from acelera.core.model import load_model
    from acelera.registrar.registry import get_registry

    registry = registry or get_registry()
    tolerances = tolerances or Tolerances()
    runs = tolerances.latency_runs if runs is None else runs
    warmup = tolerances.latency_warmup if warmup is None else warmup
    if not (time_budget >= 0 and math.isfinite(time_budget)):
        raise SelectionError(f"the time budget must be a finite number of seconds >= 0, got {time_budget}")
    for what, v, low in (("runs", runs, 1), ("warmup", warmup, 0), ("accuracy runs", accuracy_runs, 1)):
        if not low <= v <= 10_000:
            raise SelectionError(f"{what} must be in [{low}, 10000], got {v}")
    only = None if delegates is None else list(dict.fromkeys(delegates))
    for name in only or ():
        registry.spec(name)  # a RegistryError naming the installed ones
    start = time.monotonic()
    path = os.fspath(model_path)
    model = load_model(Path(path).read_bytes())
    kind = classify_model(model)
    numeric = "integer" if kind == "full-integer" else "float"
    cores = cores or os.cpu_count() or 1
    with warnings.catch_warnings():  # registry.enabled() warns of GPU fallbacks while probing flags
        warnings.simplefilter("ignore")
        configs, skipped = plan(registry, kind, only, cores)
    trials = [Trial(c) for c in configs]
    by_label = {t.config.label: t for t in trials}
    runner = _Runner(registry, path, model, numeric, tolerances, runs, warmup, accuracy_runs)
    for i, t in enumerate(trials):
        c = t.config
        if time.monotonic() - start >= time_budget:
            t.reason = f"time budget of {time_budget:g} s spent"
            continue
        if c.extends is not None:
            why = _stack_skip(t, by_label.get(c.extends))
            if why is not None:
                t.status, t.reason = SKIPPED, why
                continue
            best = _best_threads(trials)
            if best is not None:
                c.flags["num_threads"] = best
                c.label = _label(c.delegates, {"num_threads": best})
        if progress is not None:
            progress(c.label, i, len(trials), None)
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with np.errstate(all="ignore"):
                    runner.run(t)
            except Exception as e:  # noqa: BLE001  (a plugin's failure is this row's, not the command's)
                t.status, t.reason = ERROR, _one_line(e)
        t.seconds = time.monotonic() - t0
        t.warnings = list(dict.fromkeys(" ".join(str(w.message).split()) for w in caught))[:MAX_WARNINGS]
        if progress is not None:
            progress(c.label, i + 1, len(trials), t)
    sel = Selection(path, kind, numeric, trials + skipped, time_budget, time.monotonic() - start, cores, runs,
                    warmup, accuracy_runs, allow_emulated, tolerances.source, registry)
    passing = [t for t in trials if t.status == PASS]
    passing.sort(key=lambda t: (t.config.emulated and not allow_emulated, t.median_us, t.init_ms or 0.0))
    for r, t in enumerate(passing, 1):
        t.rank = r
    return sel


def _best_threads(trials: Sequence[Trial]) -> int | None:
    """The thread count of the fastest passing xnnpack-cpu-alone configuration that set one."""
    alone = [t for t in trials if t.config.delegates == (LEFTOVER_DELEGATE,) and t.status == PASS
             and isinstance(t.config.flags.get("num_threads"), int)]
    return min(alone, key=lambda t: t.median_us).config.flags["num_threads"] if alone else None


# --- formatting helpers ---------------------------------------------------------------------------
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))


def _py(v: Any) -> str:
    """A Python literal, strings in double quotes."""
    return json.dumps(v) if isinstance(v, str) else repr(v)


def _num(x: float) -> float | str:
    return float(x) if math.isfinite(x) else str(x)


def _us(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f} us"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f} ms"

