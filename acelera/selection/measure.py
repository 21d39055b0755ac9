"""One configuration measured: built from its flags, checked for accuracy against the CPU reference
(inference_diff, judged with the model-case tolerance), timed (init, warm latency, init from a
filled serialization cache) and described (which delegate took which nodes).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import re
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from acelera.conformance.latency import measure_latency
from acelera.conformance.tolerances import UNFLOORED_FLOAT_VIEW, Tolerance, Tolerances, resolve_precision
from acelera.selection.candidates import _parsed
from acelera.selection.formatting import _ms, _num
from acelera.selection.trial import FAIL, LOOSENESS, PASS, SKIPPED, Configuration, SelectionError, Trial


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
        from acelera.conformance.inference_diff import InferenceDiffError, bounded_inputs, diff

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
    from acelera.conformance.inference_diff import DiffResult, LatencyStats, OutputDiff, RunningStat, bounded_inputs

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
