"""Running conformance cases against the CPU reference, verdicts and certificates.

`certify(registry, name)` certifies one delegate: it generates the case list from the
plugin's declared op table (cases.py), keeps this run's shard of it, runs every case and
returns a Certificate. `run(...)` is the `acelera conformance` command.

What each kind of case checks
- op: a single-op model inside the declaration. If the declared table (its constraints
  included) accepts the node, the delegate must take the whole graph as exactly one partition
  and every output must agree with the CPU reference within the tolerance of the delegate's
  precision (tolerances.py). If a declared constraint refuses the node, the case is a
  negative one (below).
- negative: a model just outside the declaration (version max+1, an undeclared dtype, a
  violated constraint). The delegate must refuse the node and the graph, run through CPU
  fallback, must give the reference result exactly. When the CPU reference itself cannot run
  the node only the refusal is checked (the case says so).
- model: a real model (models_dir, plus the tiny CNN built in acelera.samples) of a type the
  plugin declares (float32 / float16 / dynamic-range / full-integer), compared with the
  reference through the inference_diff engine with per-output criteria. Partial delegation
  is allowed; the share of delegated nodes is recorded.
- behaviour: on a short chain of an op the delegate declares: repeated invokes give
  bit-identical results; resize_tensor_input (batch 1 -> 3 on a model whose batch dimension is
  -1 in its signature) then invoke gives the reference result with the new shape (the
  delegated share before and after is recorded: a delegate may decline dynamic shapes); a
  failure at the end of the delegate's prepare falls back to the CPU with a DelegationWarning
  and the reference result; with a second delegate taking an op the first does not declare,
  the nodes go exactly where the partitioning rules (and the delegate's partition limits) say
  and the result agrees with the reference.

Single-op cases are run with `min_nodes_per_partition=1` (unless the options given set it),
so that delegates whose default minimum partition is larger (Hexagon, Core ML: 2) take a lone
node, as TFLite's acceleration tests force delegation of single-op models; model and
behaviour cases use the delegate with the options as given.

Statuses: pass, fail, not-covered (the suite cannot generate the case, or the CPU reference
declines it: no kernel for that op, version or dtype; a reference kernel that *fails* is a
failure, so a broken reference cannot pass a certification silently), skip (not applicable: a model type the plugin does not declare, no op to
build a behaviour graph from). An unavailable delegate (its availability probe says no) is
not certified: its certificate has status "unavailable", verdict "UNAVAILABLE", the probe's
reason and no cases.
"""
from __future__ import annotations

import math
import platform
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from acelera.conformance import cases as C
from acelera.conformance.tolerances import Tolerance, Tolerances, compare, resolve_precision
from acelera.core.delegate import Delegate, OpSupport, OpTable, Support
from acelera.core.errors import AceleraError
from acelera.core.executor import Executor
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.model import load_model
from acelera.core.partition import DelegationWarning, select_partitions
from acelera.core.subplan import ReferenceKernel

__all__ = ["CaseResult", "Certificate", "Certification", "certify", "merge", "run", "run_case",
           "VERDICT_RULE", "STATUSES", "SUITE_NAME"]

SUITE_NAME = "acelera-conformance"
STATUSES = ("pass", "fail", "not-covered", "skip")
MODEL_RUNS = 2  # inference_diff runs per model case (1 invocation each)

VERDICT_RULE = (
    "PASS when no case fails: every declared (op, version, dtype) case the suite can build and "
    "the CPU reference can run is delegated as exactly one partition holding every node and "
    "agrees with the reference within the tolerance of the delegate's precision; every case just "
    "outside the declaration (version max+1, an undeclared dtype, a violated constraint) is "
    "refused by the delegate and the CPU fallback gives the reference result; every model case "
    "is within its per-output tolerance; every behaviour case holds (deterministic repeated "
    "invokes, resize then invoke, clean fallback when prepare fails, correct partitioning with a "
    "second delegate). At least one case must pass. Declared combinations the suite cannot "
    "test (no generator, or no CPU reference kernel) are reported as not covered and do not "
    "fail the verdict{strict}; skipped cases do not count. Coverage counts a declared op as "
    "passed when it has at least one passing case and no failing case.")


def verdict_rule(strict: bool) -> str:
    return VERDICT_RULE.format(strict=" unless strict coverage is on ([verdict] not_covered = \"fail\"), "
                                      "which it is for this run" if strict else
                               " (strict coverage, [verdict] not_covered = \"fail\", makes them fail)")


# --- results -------------------------------------------------------------------------------
@dataclass
class CaseResult:
    """The outcome of one case."""

    id: str
    kind: str
    status: str
    op: str | None = None
    version: int | None = None
    dtype: str | None = None
    variant: str = ""
    #: op cases: "delegated" (inside the declaration) or "refused" (a constraint says no)
    expected: str = ""
    errors: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    #: wall time of one invoke with the delegate, microseconds
    latency_us: float | None = None
    #: wall time of one invoke of the CPU reference, microseconds
    reference_latency_us: float | None = None
    seconds: float = 0.0
    precision: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CaseResult":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else str(v)
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    return x


@dataclass
class Certificate:
    """Everything a certification run established about one delegate."""

    delegate: str
    status: str  # "certified", "unavailable", "error"
    verdict: str  # "PASS", "FAIL", "UNAVAILABLE"
    reason: str = ""
    suite: str = SUITE_NAME
    acelera_version: str = ""
    plugin: dict[str, Any] = field(default_factory=dict)
    backend: str = ""
    platform: dict[str, Any] = field(default_factory=dict)
    device: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    precision: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, Any] = field(default_factory=dict)
    model_types: list[str] = field(default_factory=list)
    declared: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 0
    shard: str = "0/1"
    total_cases: int = 0
    cases: list[CaseResult] = field(default_factory=list)
    coverage: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    verdict_rule: str = ""
    verdict_reasons: list[str] = field(default_factory=list)
    started: str = ""
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if c.status == "fail"]

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "cases"}
        d["cases"] = [c.to_dict() for c in self.cases]
        return _jsonable(d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Certificate":
        known = set(cls.__dataclass_fields__)
        kw = {k: v for k, v in d.items() if k in known and k != "cases"}
        return cls(**kw, cases=[CaseResult.from_dict(c) for c in d.get("cases", [])])


# --- helpers -------------------------------------------------------------------------------
def _model_input(model: Any) -> bytes | str:
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    if isinstance(model, (str, Path)):
        return str(model)
    return model()


def _interpreter(model: bytes | str, delegates: Sequence[Delegate] = ()) -> Interpreter:
    if isinstance(model, bytes):
        return Interpreter(model_content=model, experimental_delegates=list(delegates),
                           experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    return Interpreter(model_path=model, experimental_delegates=list(delegates),
                       experimental_op_resolver_type=OpResolverType.BUILTIN_REF)


def _feed(it: Interpreter, inputs: Sequence[np.ndarray]) -> None:
    for det, x in zip(it.get_input_details(), inputs):
        it.set_tensor(det["index"], x)


def _invoke(it: Interpreter) -> float:
    t0 = time.perf_counter_ns()
    with np.errstate(all="ignore"):
        it.invoke()
    return (time.perf_counter_ns() - t0) / 1000.0


def _outputs(it: Interpreter) -> list[np.ndarray]:
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _out_quant(it: Interpreter) -> list[tuple[float | None, int]]:
    out = []
    for d in it.get_output_details():
        s, z = d["quantization"]
        kind = np.dtype(d["dtype"]).kind
        out.append((float(s), int(z)) if s and kind in "iu" else (None, 0))
    return out


def _reference(model: bytes | str, inputs: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float, Interpreter]:
    it = _interpreter(model)
    it.allocate_tensors()
    _feed(it, inputs)
    us = _invoke(it)
    return _outputs(it), us, it


def _checked_reference(built: C.Built):
    """The reference run of a case; NotCovered when the reference declines the node."""
    try:
        return _reference(built.model, built.inputs)
    except AceleraError as e:
        if C.reference_gap(e):
            raise C.NotCovered(f"the CPU reference cannot run it: {e}") from None
        raise C.ReferenceFailure(f"the CPU reference fails on this case: {e}") from None


class _Warnings:
    """Record warnings (DelegationWarning and others) raised while a block runs."""

    def __enter__(self):
        self._cm = warnings.catch_warnings(record=True)
        self.records = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)

    def delegation(self) -> list[str]:
        return [str(w.message) for w in self.records if issubclass(w.category, DelegationWarning)]


def _numeric(dtype: str | None, model_type: str | None = None) -> str:
    if model_type is not None:
        return "integer" if model_type == "full-integer" else "float"
    return "integer" if dtype in C.QUANT_DTYPES or dtype == "INT32" else "float"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def _average_ok(entry: dict[str, Any], avg_steps: float, bound: float) -> tuple[bool, str]:
    """The average-error bound of a model case (tolerance avg_steps), recorded in `entry`."""
    entry.update(avg_steps=avg_steps, allowed_avg_steps=bound)
    return avg_steps <= bound, f"average error {avg_steps:.3g} quantization steps (allowed {bound:g})"


def _refusal_reasons(rep, name: str, node_count: int) -> str:
    bits = []
    for n in range(node_count):
        for d, why in rep.rejections.get(n, []):
            if d == name:
                bits.append(f"node {n}: {why}")
    for d, nodes, msg in rep.failures:
        if d == name:
            bits.append(f"prepare failed for nodes {list(nodes)}: {msg}")
    return "; ".join(bits)


# --- the certification run -------------------------------------------------------------------
class Certification:
    """One delegate's certification: its case list (this shard), the delegate and the runner.

    `certify()` drives it; the pytest plugin runs its cases one test at a time.
    """

    def __init__(self, registry: Any, name: str, *, models_dir: str | Path | None = None, seed: int = 0,
                 shard: tuple[int, int] | str = (0, 1), tolerances: Tolerances | str | Path | None = None,
                 options: Mapping[str, Any] | None = None,
                 variants_per_case: int = C.DEFAULT_VARIANTS_PER_CASE):
        self.registry = registry
        self.name = name
        self.spec = registry.spec(name)
        self.seed = int(seed)
        self.shard = C.parse_shard(shard)
        self.tolerances = tolerances if isinstance(tolerances, Tolerances) else Tolerances.load(tolerances)
        self.options = dict(options or {})
        self.models_dir = C.default_models_dir() if models_dir is None else Path(models_dir)
        self.variants_per_case = variants_per_case
        self.availability: Support = registry.availability(name)
        self._delegate: Delegate | None = None
        self._op_delegate: Delegate | None = None
        self.error = ""
        self.all_cases: list[C.Case] = []
        self.cases: list[C.Case] = []
        if self.availability.ok and getattr(self.spec.op_table, "discovered", False):
            self._discover()
        if self.availability.ok:
            self.all_cases = C.generate_cases(self.spec, seed=self.seed, models_dir=self.models_dir,
                                              variants_per_case=variants_per_case)
            self.cases = C.select_shard(self.all_cases, self.shard)

    def _discover(self) -> None:
        """A delegate that declares no op table (a native delegate hosted through LiteRT) is
        certified on what it takes, asked of the delegate itself (discover.py)."""
        from dataclasses import replace

        from acelera.conformance.discover import discover_table

        try:
            d = self.op_delegate
        except Exception:
            return  # certify() reports that the delegate cannot be created
        why = getattr(d, "unavailable_reason", "")
        if why:
            self.availability = Support(False, why)
            return
        self.spec = replace(self.spec, op_table=discover_table(d))

    @property
    def table(self):
        """The delegate's own op table when it has one (rules may depend on its options)."""
        try:
            return getattr(self.delegate, "op_table", None) or self.spec.op_table
        except Exception:
            return self.spec.op_table

    # --- the delegate --------------------------------------------------------------------
    @property
    def delegate(self) -> Delegate:
        if self._delegate is None:
            self._delegate = self.registry.create(self.name, self.options)
        return self._delegate

    @property
    def op_delegate(self) -> Delegate:
        """The delegate for single-op cases: `min_nodes_per_partition=1` unless the options set it,
        so that delegates whose default minimum is larger (Hexagon, Core ML: 2) take a lone node,
        as TFLite's acceleration tests force delegation of single-op models."""
        if self._op_delegate is None:
            opts = dict(self.options)
            if int(opts.get("min_nodes_per_partition", 0) or 0) <= 0:
                opts["min_nodes_per_partition"] = 1
            self._op_delegate = self.registry.create(self.name, opts)
        return self._op_delegate

    def new_delegate(self) -> Delegate:
        return self.registry.create(self.name, self.options)

    def precision(self, numeric: str) -> str:
        return resolve_precision(self.spec, self._delegate or self._op_delegate, numeric)

    def tolerance(self, numeric: str, kind: str, op: str | None = None) -> tuple[str, Tolerance]:
        p = self.precision(numeric)
        return p, self.tolerances.for_case(p, kind, op)

    # --- running -------------------------------------------------------------------------
    def run_case(self, case: C.Case) -> CaseResult:
        t0 = time.perf_counter()
        res = CaseResult(case.id, case.kind, "pass", case.op, case.version, case.dtype, case.variant, case.expect)
        if case.status is not None:
            res.status = case.status
            res.errors = [case.reason] if case.reason else []
            return res
        try:
            if case.kind in ("op", "negative"):
                self._run_op(case, res)
            elif case.kind == "model":
                self._run_model(case, res)
            elif case.kind == "behaviour":
                getattr(self, "_behaviour_" + case.variant.replace("-", "_"))(case, res)
            else:
                raise ValueError(f"unknown case kind {case.kind!r}")
        except C.NotCovered as e:
            res.status, res.errors = "not-covered", [str(e)]
        except _Skip as e:
            res.status, res.errors = "skip", [str(e)]
        except Exception as e:  # anything the delegate (or the suite) raised fails the case
            res.status = "fail"
            res.errors.append(f"{type(e).__name__}: {e}" if not isinstance(e, AceleraError) else str(e))
        if res.errors and res.status == "pass":
            res.status = "fail"
        res.seconds = round(time.perf_counter() - t0, 6)
        return res

    def _rng(self, case: C.Case) -> np.random.Generator:
        return np.random.default_rng(C.case_seed(self.seed, case.id))

    # --- op and negative cases -------------------------------------------------------------
    def _run_op(self, case: C.Case, res: CaseResult) -> None:
        built = C.build_graph([case.template], case.dtype, case.version, self._rng(case))
        model = load_model(built.model)
        ctx = Executor(model.main).node_context(0)
        declared = self.table.check(ctx)
        numeric = _numeric(case.dtype)
        d = self.op_delegate
        if declared.ok and case.kind == "op":
            res.expected = "delegated"
            self._expect_delegated(case, res, built, numeric)
        else:
            res.expected = "refused"
            if case.kind == "op":
                res.kind = "negative"
            if declared.ok:
                self._table_accepts_outside(case, res, ctx)
                return
            res.details["declared"] = declared.reason
            self._expect_refused(case, res, built, ctx, d)

    def _table_accepts_outside(self, case: C.Case, res: CaseResult, ctx) -> None:
        """A negative case the op table's own check accepts: the check contradicts the declared
        matrix (a version above max_version, an input type outside dtypes) -> fail."""
        from acelera.core.delegate import data_type

        row = self.table.rows.get(case.op)
        if row is not None and case.variant.startswith("version:") and case.version > row.max_version:
            res.errors.append(f"the op table's check accepts {case.op} v{case.version} although the row declares "
                              f"max_version {row.max_version}")
            return
        t = data_type(ctx)
        if row is not None and case.variant.startswith("dtype:") and t is not None and t not in row.dtypes:
            res.errors.append(f"the op table's check accepts input type {t} although the row declares "
                              f"{', '.join(sorted(row.dtypes))}")
            return
        raise _Skip(f"the declared table accepts this {case.variant} case (input type {t})")

    def _expect_delegated(self, case: C.Case, res: CaseResult, built: C.Built, numeric: str) -> None:
        ref, ref_us, ref_it = _checked_reference(built)
        res.reference_latency_us = round(ref_us, 1)
        d = self.op_delegate
        with _Warnings() as w:
            it = _interpreter(built.model, [d])
            it.allocate_tensors()
        rep = it.delegation
        n = len(it.model.main.operators)
        parts = rep.partitions_of(d.name)
        res.details["partitions"] = len(parts)
        if len(parts) != 1 or tuple(sorted(parts[0].nodes)) != tuple(range(n)):
            why = _refusal_reasons(rep, d.name, n) or "; ".join(w.delegation()) or "no partition"
            res.errors.append(f"not fully delegated ({len(parts)} partition(s), {len(rep.nodes_of(d.name))}/{n} "
                              f"nodes): {why}")
            return
        _feed(it, built.inputs)
        res.latency_us = round(_invoke(it), 1)
        self._compare(res, _outputs(it), ref, _out_quant(ref_it), built.quantum, numeric, "op", case.op)

    def _expect_refused(self, case: C.Case, res: CaseResult, built: C.Built, ctx, d: Delegate) -> None:
        try:
            s = d.is_node_supported(ctx)
            s = s if isinstance(s, Support) else Support(bool(s))
        except Exception as e:  # the partitioner counts an exception as a refusal
            s = Support(False, f"raised {type(e).__name__}: {e}")
        if s.ok:
            res.errors.append(f"the delegate accepts a node outside its declaration ({res.details['declared']})")
            return
        res.details["refusal"] = s.reason
        try:
            ref, ref_us, ref_it = _checked_reference(built)
        except C.NotCovered as e:
            res.details["fallback"] = f"not checked: {e}"
            return
        res.reference_latency_us = round(ref_us, 1)
        with _Warnings():
            it = _interpreter(built.model, [d])
            it.allocate_tensors()
        taken = it.delegation.nodes_of(d.name)
        if taken:
            res.errors.append(f"the delegate took nodes {taken} outside its declaration")
            return
        _feed(it, built.inputs)
        res.latency_us = round(_invoke(it), 1)
        for k, (t, r) in enumerate(zip(_outputs(it), ref)):
            if not _same(t, r):
                res.errors.append(f"output {k}: the CPU fallback result differs from the reference")
        res.details["fallback"] = "CPU fallback equals the reference"

    def _compare(self, res: CaseResult, outs, ref, quants, quantum, numeric: str, kind: str, op: str | None) -> None:
        precision, tol = self.tolerance(numeric, kind, op)
        res.precision = precision
        res.details["tolerance"] = asdict(tol)
        per_output = []
        for k, (t, r) in enumerate(zip(outs, ref)):
            scale, zp = quants[k] if k < len(quants) else (None, 0)
            q = quantum[k] if k < len(quantum) else 0.0
            cmp = compare(t, r, tol, scale=scale, zero_point=zp, quantum=q or None)
            per_output.append(cmp.to_dict())
            if not cmp.ok:
                res.errors.append(f"output {k}: {cmp.message} ({precision} tolerance)")
        res.details["outputs"] = per_output

    # --- model cases -----------------------------------------------------------------------
    def _run_model(self, case: C.Case, res: CaseResult) -> None:
        from acelera.conformance.inference_diff import diff

        model = _model_input(case.model)
        numeric = _numeric(None, case.model_type)
        res.details["model_type"] = case.model_type
        res.dtype = case.model_type
        from acelera.conformance.inference_diff import InferenceDiffError

        d = self.delegate
        seed = C.case_seed(self.seed, case.id) % (2 ** 32)
        try:
            with _Warnings() as w:
                result = diff(model, [d], num_runs=MODEL_RUNS, num_threads=1, invocations_per_run=1, seed=seed)
        except InferenceDiffError as e:
            # input types inference_diff does not generate (int16): the same comparison, locally
            res.details["engine"] = f"local comparison ({e})"
            with _Warnings() as w:
                result = _local_diff(model, d, seed)
        except AceleraError:
            try:
                _interpreter(model).allocate_tensors()
            except AceleraError as e2:
                if C.reference_gap(e2):
                    raise C.NotCovered(f"the CPU reference cannot run the model: {e2}") from None
                raise C.ReferenceFailure(f"the CPU reference fails on the model: {e2}") from None
            raise
        m = load_model(model)
        sg = m.main
        rep = result.delegation
        taken = rep.nodes_of(d.name)
        res.details.update({
            "nodes": len(sg.operators), "delegated_nodes": len(taken), "partitions": len(rep.partitions_of(d.name)),
            "runs": result.num_runs,
        })
        if w.delegation():
            res.details["warnings"] = w.delegation()
        self._model_latency(model, d, res)
        precision, tol = self.tolerance(numeric, "model")
        res.precision = precision
        res.details["tolerance"] = asdict(tol)
        floors = None
        if numeric == "float" and precision in ("float32", "float16") and tol.floor_k and any(
                sg.tensors[od.tensor].dtype.kind == "f" for od in result.output_errors):
            from acelera.conformance.floor import measure, to_details

            floors = measure(model, m, d, seed=seed, runs=MODEL_RUNS, half=precision == "float16")
            res.details["floor"] = to_details(floors)
        producers = {t: op for op in sg.operators for t in op.outputs}
        per_output = []
        for od in result.output_errors:
            t = sg.tensors[od.tensor]
            q = t.quantization
            entry: dict[str, Any] = {"name": od.name, "avg_error": od.avg_value, "std_dev": od.std_deviation}
            if t.dtype.kind in "iu" and q.is_set and q.scale.size == 1 and float(q.scale[0]) > 0:
                scale, zp = float(q.scale[0]), int(q.zero_point[0]) if q.zero_point.size else 0
                steps = od.max_abs_error
                max_ref = (od.max_abs_reference + abs(zp)) * scale
                allowed = tol.allowed(max_ref, scale)
                allowed_steps = math.floor(allowed / scale + 1e-9)
                ok = steps <= allowed_steps
                entry.update(max_steps=steps, allowed_steps=allowed_steps, max_abs_error=steps * scale)
                msg = f"{steps:g} quantization steps off (allowed {allowed_steps})"
                if ok and tol.avg_steps is not None:
                    ok, msg = _average_ok(entry, od.avg_value, tol.avg_steps)
            elif t.dtype.kind == "f":
                quantum = 0.0
                p = producers.get(od.tensor)
                if p is not None and p.op == "DEQUANTIZE" and p.inputs:
                    qi = sg.tensors[p.inputs[0]].quantization
                    quantum = float(np.max(qi.scale)) if qi.is_set else 0.0
                if floors is not None:
                    fo = floors.outputs[od.index]
                    bound = tol.allowed(fo.max_abs, quantum or None)
                    allowed = tol.allowed(fo.max_abs, quantum or None, fo.floor)
                    ok = fo.error <= allowed
                    entry.update(max_abs_error=fo.error, judged_against="float64", floor=fo.floor,
                                 error_vs_reference=fo.error_vs_reference, max_abs_reference=fo.max_abs,
                                 allowed=allowed, precision_bound=bound)
                    msg = (f"max |error| vs float64 {fo.error:.6g} > allowed {allowed:.6g} "
                           f"(max of {bound:.3g} and {tol.floor_k:g} x floor {fo.floor:.3g})")
                else:
                    allowed = tol.allowed(od.max_abs_reference, quantum or None)
                    ok = od.max_abs_error <= allowed
                    entry.update(max_abs_error=od.max_abs_error, max_abs_reference=od.max_abs_reference,
                                 allowed=allowed)
                    msg = f"max |error| {od.max_abs_error:.6g} > allowed {allowed:.6g}"
                if ok and quantum and tol.avg_steps is not None:
                    ok, msg = _average_ok(entry, od.avg_value / quantum, tol.avg_steps)
            else:
                ok = od.max_abs_error == 0
                entry.update(max_abs_error=od.max_abs_error)
                msg = f"integer output differs by up to {od.max_abs_error:g}"
            entry["ok"] = bool(ok)
            per_output.append(entry)
            if not ok:
                res.errors.append(f"output {od.index} ('{od.name}'): {msg} ({precision} tolerance)")
        res.details["outputs"] = per_output

    def _model_latency(self, model: bytes | str, d: Delegate, res: CaseResult) -> None:
        """Warm latency of the delegate and of the reference: the median of N invokes after W."""
        from acelera.conformance.inference_diff import bounded_inputs
        from acelera.conformance.latency import measure_latency

        runs, warm = self.tolerances.latency_runs, self.tolerances.latency_warmup
        test, ref = _interpreter(model, [d]), _interpreter(model)
        test.allocate_tensors()
        ref.allocate_tensors()
        bounds, _ = bounded_inputs(test)
        from acelera.conformance.floor import _inputs

        xs = _inputs(np.random.default_rng(0), test, bounds)
        _feed(test, xs)
        _feed(ref, xs)
        t, r = measure_latency(test, runs, warm), measure_latency(ref, runs, warm)
        res.latency_us, res.reference_latency_us = t.median_us, r.median_us
        res.details["latency"] = {"method": t.method, "delegate": t.to_dict(), "reference": r.to_dict()}

    # --- behaviour cases -----------------------------------------------------------------
    def _chain_op(self, exclude_table: OpTable | None = None, dtype: str | None = None):
        """(template, version, dtype) of an op the delegate declares that chains shape-preserving."""
        from acelera.core.kernels.registry import registered

        ref = registered()
        table = exclude_table if exclude_table is not None else self.table
        want_float = C.accepts(self.spec.model_types, "float32") or C.accepts(self.spec.model_types, "float16")
        dtypes = [dtype] if dtype else (["FLOAT32"] if want_float else []) + ["INT8", "UINT8", "INT16", "FLOAT32"]
        for dt in dict.fromkeys(dtypes):
            for op in CHAIN_OPS:
                if op not in ref:
                    continue
                row = table.rows.get(op) if exclude_table is None else None
                if exclude_table is None:
                    if row is None or dt not in row.dtypes:
                        continue
                    v = min(row.max_version, ref[op].max_version)
                    if v < row.min_version:
                        continue
                else:
                    other = table.rows.get(op)
                    if other is not None and dt in other.dtypes:
                        continue
                    v = 1
                tpl = chain_template(op)
                try:  # the reference must run it, and a declared op must pass the table's constraints
                    built = C.build_graph([tpl, tpl], dt, v, np.random.default_rng(0))
                    m = load_model(built.model)
                    ex = Executor(m.main)
                    if exclude_table is None and not all(self.table.check(ex.node_context(i)).ok
                                                         for i in range(2)):
                        continue
                    _reference(built.model, built.inputs)
                except AceleraError:
                    continue
                yield tpl, v, dt

    def _first_chain(self):
        found = next(self._chain_op(), None)
        if found is None:
            raise _Skip("no declared op the suite can chain into a behaviour graph "
                        f"(one of {', '.join(CHAIN_OPS[:8])}, ...)")
        return found

    def _run_length(self, d: Delegate) -> int:
        _, min_nodes = d.partition_limits()
        return max(2, int(min_nodes or 0))

    def _delegated_run(self, res: CaseResult, model: bytes, d: Delegate, expect_all: bool = True) -> Interpreter:
        with _Warnings() as w:
            it = _interpreter(model, [d])
            it.allocate_tensors()
        n = len(it.model.main.operators)
        taken = it.delegation.nodes_of(d.name)
        if expect_all and len(taken) != n:
            why = _refusal_reasons(it.delegation, d.name, n) or "; ".join(w.delegation())
            raise AssertionError(f"not fully delegated ({len(taken)}/{n} nodes): {why}")
        return it

    def _behaviour_repeat(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        d = self.delegate
        m = self._run_length(d)
        rng = self._rng(case)
        built = C.build_graph([tpl] * m, dt, v, rng)
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op} v{v} {dt}"
        ref, ref_us, ref_it = _reference(built.model, built.inputs)
        it = self._delegated_run(res, built.model, d)
        x = built.inputs
        other = [np.flip(a).copy() for a in x]
        _feed(it, x)
        res.latency_us = round(_invoke(it), 1)
        first = _outputs(it)
        _invoke(it)
        second = _outputs(it)
        _feed(it, other)
        _invoke(it)
        _feed(it, x)
        _invoke(it)
        third = _outputs(it)
        for k, (a, b, c) in enumerate(zip(first, second, third)):
            if not _same(a, b):
                res.errors.append(f"output {k}: a second invoke on the same input gave a different result")
            if not _same(a, c):
                res.errors.append(f"output {k}: invoking again after other inputs gave a different result")
        self._compare(res, first, ref, _out_quant(ref_it), built.quantum, _numeric(dt), "model", None)

    def _behaviour_resize(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        d = self.delegate
        m = self._run_length(d)
        built = C.build_graph([tpl] * m, dt, v, self._rng(case), dynamic_batch=True)
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op} v{v} {dt}, batch 1 -> 3"
        # A delegate may decline graphs with a dynamic dimension (NNAPI without
        # allow_dynamic_dimensions): then the CPU fallback must still give the right result.
        it = self._delegated_run(res, built.model, d, expect_all=False)
        n = len(it.model.main.operators)
        res.details["delegated_before"] = f"{len(it.delegation.nodes_of(d.name))}/{n}"
        _feed(it, built.inputs)
        _invoke(it)
        x = built.inputs[0]
        big = np.concatenate([x, np.flip(x, axis=-1), np.flip(x, axis=1) if x.ndim > 2 else x], axis=0)
        ref_it = _interpreter(built.model)
        for interp in (it, ref_it):
            interp.resize_tensor_input(interp.get_input_details()[0]["index"], list(big.shape))
            with _Warnings():
                interp.allocate_tensors()
            interp.set_tensor(interp.get_input_details()[0]["index"], big)
        res.details["delegated_after"] = f"{len(it.delegation.nodes_of(d.name))}/{n}"
        res.latency_us = round(_invoke(it), 1)
        res.reference_latency_us = round(_invoke(ref_it), 1)
        outs, ref = _outputs(it), _outputs(ref_it)
        for k, o in enumerate(outs):
            if o.shape[0] != big.shape[0]:
                res.errors.append(f"output {k} has shape {list(o.shape)} after resizing the batch to {big.shape[0]}")
        if not res.errors:
            self._compare(res, outs, ref, _out_quant(ref_it), built.quantum, _numeric(dt), "model", None)

    def _behaviour_prepare_failure(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        inner = self.new_delegate()
        d = _PrepareFails(inner)
        m = self._run_length(inner)
        built = C.build_graph([tpl] * m, dt, v, self._rng(case))
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op} v{v} {dt}"
        ref, ref_us, _ = _reference(built.model, built.inputs)
        with _Warnings() as w:
            it = _interpreter(built.model, [d])
            it.allocate_tensors()
        if not w.delegation():
            res.errors.append("no DelegationWarning was emitted when prepare failed")
        taken = it.delegation.nodes_of(d.name)
        if taken:
            res.errors.append(f"nodes {taken} stayed on the delegate although its prepare failed")
        if not d.calls:
            res.errors.append("the delegate was never asked to prepare a partition")
        _feed(it, built.inputs)
        res.latency_us = round(_invoke(it), 1)
        for k, (t, r) in enumerate(zip(_outputs(it), ref)):
            if not _same(t, r):
                res.errors.append(f"output {k}: the CPU fallback result differs from the reference")
        res.details["warning"] = (w.delegation() or [""])[0]

    def _behaviour_multi_delegate(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        helper_pick = next(self._chain_op(exclude_table=self.table, dtype=dt), None)
        if helper_pick is None:
            raise _Skip(f"every op the suite can chain is declared by {self.name} for {dt}")
        htpl, hv, _ = helper_pick
        d = self.delegate
        helper = _HelperDelegate(htpl.op, dt)
        m = self._run_length(d)
        nodes = [tpl] * m + [htpl] + [tpl] * m
        versions = [v] * m + [hv] + [v] * m
        built = C.build_graph(nodes, dt, versions, self._rng(case))
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op}, {htpl.op} (second delegate), {m} x {tpl.op}; {dt}"
        ref, ref_us, ref_it = _reference(built.model, built.inputs)
        with _Warnings() as w:
            it = _interpreter(built.model, [d, helper])
            it.allocate_tensors()
        rep = it.delegation
        runs = [list(range(m)), list(range(m + 1, 2 * m + 1))]
        max_p, min_n = d.partition_limits()
        chosen = select_partitions(runs, [1] * (2 * m + 1), max_p, min_n)
        want = {n: d.name for r in chosen for n in r}
        want[m] = helper.name
        got = {n: rep.node_delegate.get(n) for n in range(2 * m + 1)}
        expect = {n: want.get(n) for n in range(2 * m + 1)}
        res.details["expected"] = {str(k): v_ for k, v_ in expect.items()}
        res.details["assignment"] = {str(k): v_ for k, v_ in got.items()}
        if got != expect:
            why = _refusal_reasons(rep, d.name, 2 * m + 1) or "; ".join(w.delegation())
            res.errors.append(f"partitioning with a second delegate: nodes went {got}, expected {expect}"
                              + (f" ({why})" if why else ""))
            return
        _feed(it, built.inputs)
        res.latency_us = round(_invoke(it), 1)
        res.reference_latency_us = round(ref_us, 1)
        self._compare(res, _outputs(it), ref, _out_quant(ref_it), built.quantum, _numeric(dt), "model", None)

    # --- the certificate -----------------------------------------------------------------
    def certificate(self, results: Sequence[CaseResult], *, started: str = "", duration_s: float = 0.0,
                    status: str | None = None, reason: str = "") -> Certificate:
        import acelera

        spec = self.spec
        info = self.registry.plugin_of(self.name)
        plugin = {"name": info.name if info else "?", "distribution": info.distribution if info else "?",
                  "distribution_version": info.version if info else "?", "module": info.module if info else "?",
                  "delegate_version": spec.version, "summary": spec.summary}
        d = self._delegate or self._op_delegate
        cert = Certificate(
            delegate=self.name, status=status or ("certified" if self.availability.ok else "unavailable"),
            verdict="", reason=reason or ("" if self.availability.ok else self.availability.reason),
            acelera_version=acelera.__version__, plugin=plugin, backend=spec.backend,
            platform=platform_info(), device=_describe(d) if d is not None else "",
            options=_jsonable({k: v for k, v in self.options.items()}),
            precision={"float": self.precision("float"), "integer": self.precision("integer")},
            tolerances=self.tolerances.to_dict(), model_types=sorted(spec.model_types),
            declared=declared_matrix(spec.op_table), seed=self.seed, shard=f"{self.shard[0]}/{self.shard[1]}",
            total_cases=len(self.all_cases), cases=list(results),
            verdict_rule=verdict_rule(self.tolerances.strict_coverage), started=started,
            duration_s=round(duration_s, 3))
        finish(cert, spec.op_table, self.tolerances.strict_coverage)
        return cert


def _local_diff(model: bytes | str, d: Delegate, seed: int):
    """inference_diff's measurement for models whose input types it refuses (int16 inputs):
    MODEL_RUNS runs of uniformly random inputs over each input type's range."""
    from acelera.conformance.inference_diff import DiffResult, LatencyStats, OutputDiff, RunningStat, bounded_inputs

    test, ref = _interpreter(model, [d]), _interpreter(model)
    test.allocate_tensors()
    ref.allocate_tensors()
    rng = np.random.default_rng(seed)
    bounds, notes = bounded_inputs(test)
    outs = test.get_output_details()
    errs = [RunningStat() for _ in outs]
    max_err, max_ref = [0.0] * len(outs), [0.0] * len(outs)
    lat_t, lat_r = RunningStat(), RunningStat()
    for _ in range(MODEL_RUNS):
        inputs = []
        for k, det in enumerate(test.get_input_details()):
            dt = np.dtype(det["dtype"])
            shape = tuple(int(x) for x in det["shape"])
            if k in bounds:
                inputs.append(rng.integers(bounds[k][0], bounds[k][1], shape).astype(dt))
            elif dt.kind == "f":
                inputs.append(rng.uniform(-1, 1, shape).astype(dt))
            elif dt.kind in "iu":
                info = np.iinfo(dt)
                inputs.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dt))
            else:
                inputs.append(np.zeros(shape, dt))
        _feed(test, inputs)
        _feed(ref, inputs)
        lat_t.update(_invoke(test))
        lat_r.update(_invoke(ref))
        for k, det in enumerate(outs):
            t = test.get_tensor(det["index"]).astype(np.float64)
            r = ref.get_tensor(det["index"]).astype(np.float64)
            a = np.abs(t - r)
            errs[k].update(float(a.mean()) if a.size else 0.0)
            if a.size:
                max_err[k] = max(max_err[k], float(a.max()))
                max_ref[k] = max(max_ref[k], float(np.abs(r).max()))
    od = [OutputDiff.of(k, int(det["index"]), det["name"], np.dtype(det["dtype"]).name, errs[k], max_err[k], max_ref[k])
          for k, det in enumerate(outs)]
    return DiffResult(MODEL_RUNS, LatencyStats.of(lat_r), LatencyStats.of(lat_t), od, test.delegation,
                      [(d.name, d.backend)], [(i, op.name) for i, op in enumerate(test.model.main.operators)],
                      input_notes=notes)


class _Skip(Exception):
    """A case that does not apply to this delegate."""


def _describe(d: Delegate) -> str:
    try:
        return str(d.describe())
    except Exception as e:
        return f"describe() raised {type(e).__name__}: {e}"


def platform_info() -> dict[str, str]:
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "machine": platform.machine(), "python": platform.python_version(),
            "numpy": np.__version__}


def declared_matrix(table: OpTable) -> list[dict[str, Any]]:
    return [{"op": r.op, "min_version": r.min_version, "max_version": r.max_version, "dtypes": sorted(r.dtypes),
             "constraints": [c.description for c in r.constraints]} for r in table]


# --- coverage and verdict ------------------------------------------------------------------
def finish(cert: Certificate, table: OpTable | None = None, strict: bool = False) -> Certificate:
    """Fill counts, coverage and the verdict of a certificate from its cases (in place)."""
    cert.counts = {s: sum(1 for c in cert.cases if c.status == s) for s in STATUSES}
    cert.counts["total"] = len(cert.cases)
    rows = table if table is not None else [_Row(r) for r in cert.declared]
    combos: dict[tuple[str, int, str], str] = {}
    ops: dict[str, str] = {}
    for r in rows:
        ops[r.op] = "not-covered"
        for v in range(r.min_version, r.max_version + 1):
            for dt in sorted(r.dtypes):
                combos[(r.op, v, dt)] = "not-covered"
    op_fail: set[str] = set()
    op_pass: set[str] = set()
    for c in cert.cases:
        if c.kind not in ("op", "negative") or c.op is None:
            continue
        key = (c.op, c.version, c.dtype)
        if c.status == "fail":
            op_fail.add(c.op)
            if key in combos and c.kind == "op":
                combos[key] = "fail"
        elif c.status == "pass" and c.kind == "op" and c.expected == "delegated":
            op_pass.add(c.op)
            if combos.get(key) == "not-covered":
                combos[key] = "pass"
    for op in ops:
        ops[op] = "fail" if op in op_fail else "pass" if op in op_pass else "not-covered"
    partial = cert.shard != "0/1"
    cert.coverage = {
        "ops_passed": sum(1 for s in ops.values() if s == "pass"), "ops_declared": len(ops),
        "ops_failed": sum(1 for s in ops.values() if s == "fail"),
        "ops_not_covered": sum(1 for s in ops.values() if s == "not-covered"),
        "combinations_passed": sum(1 for s in combos.values() if s == "pass"),
        "combinations_declared": len(combos),
        "combinations_not_covered": sum(1 for s in combos.values() if s == "not-covered"),
        "ops": ops, "partial": partial,
        "not_covered": [f"{o} v{v} {dt}" for (o, v, dt), s in combos.items() if s == "not-covered"],
    }
    reasons: list[str] = []
    if cert.status == "unavailable":
        cert.verdict = "UNAVAILABLE"
        reasons.append(f"not certified: {cert.reason}")
    elif cert.status == "error":
        cert.verdict = "FAIL"
        reasons.append(cert.reason)
    else:
        fails = [c for c in cert.cases if c.status == "fail"]
        for c in fails[:20]:
            reasons.append(f"{c.id}: {(c.errors or ['failed'])[0]}")
        if len(fails) > 20:
            reasons.append(f"... and {len(fails) - 20} more failing cases")
        if strict and cert.coverage["combinations_not_covered"] and not partial:
            reasons.append(f"{cert.coverage['combinations_not_covered']} declared combinations are not covered "
                           f"(strict coverage)")
        if cert.counts["pass"] == 0:
            reasons.append("no case passed")
        cert.verdict = "FAIL" if reasons else "PASS"
    cert.verdict_reasons = reasons
    return cert


@dataclass
class _Row:
    """An op-table row rebuilt from a certificate's declared matrix."""

    d: Mapping[str, Any]

    def __getattr__(self, k):
        if k == "dtypes":
            return set(self.d["dtypes"])
        return self.d[k]


def merge(certs: Sequence[Certificate]) -> Certificate:
    """One certificate from the shards of a run (same delegate, seed and shard count)."""
    if not certs:
        raise ValueError("no certificates to merge")
    base = certs[0]
    names = {c.delegate for c in certs}
    if len(names) != 1:
        raise ValueError(f"certificates of different delegates: {sorted(names)}")
    n = {c.shard.split("/")[1] for c in certs}
    if len(n) != 1 or {c.seed for c in certs} != {base.seed}:
        raise ValueError("certificates from different shard counts or seeds")
    shards = sorted(int(c.shard.split("/")[0]) for c in certs)
    count = int(next(iter(n)))
    merged = Certificate.from_dict(base.to_dict())
    merged.cases = [r for c in sorted(certs, key=lambda c: c.shard) for r in c.cases]
    merged.duration_s = round(sum(c.duration_s for c in certs), 3)
    merged.shard = "0/1" if shards == list(range(count)) else ",".join(f"{s}/{count}" for s in shards) + f" of {count}"
    if any(c.status != "certified" for c in certs):
        bad = next(c for c in certs if c.status != "certified")
        merged.status, merged.reason = bad.status, bad.reason
    strict = bool(base.tolerances.get("strict_coverage", False)) if isinstance(base.tolerances, dict) else False
    return finish(merged, None, strict)


# --- helper delegates for behaviour cases ----------------------------------------------------
CHAIN_OPS = ["RELU", "RELU6", "RELU_N1_TO_1", "TANH", "LOGISTIC", "ABS", "NEG", "HARD_SWISH", "ELU",
             "LEAKY_RELU", "ADD", "MUL", "SUB", "MAXIMUM", "MINIMUM", "CONV_2D", "DEPTHWISE_CONV_2D",
             "AVERAGE_POOL_2D", "MAX_POOL_2D", "PRELU", "SQUARE", "FLOOR", "CEIL", "EXP", "SIN", "COS", "GELU",
             "SQUARED_DIFFERENCE"]
CHAIN_SHAPE = (1, 6, 6, 4)


def chain_template(op: str) -> C.OpTemplate:
    """A shape-preserving single-input variant of `op` on CHAIN_SHAPE (for behaviour graphs)."""
    s = CHAIN_SHAPE
    c = s[-1]
    if op in ("ADD", "MUL", "SUB", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"):
        opts = {"fused_activation_function": "NONE"} if op in C.FUSED_ACT_BINARY else {}
        if op in ("ADD", "SUB"):
            opts["pot_scale_int16"] = False
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)), C.T((c,), const=True, domain=(-1, 1))), (C.T(s),), opts,
                            "chain", same_quant=op in C.SAME_QUANT_BINARY)
    if op == "CONV_2D":
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)), C.T((c, 1, 1, c), role="weights", const=True, axis=0),
                                 C.T((c,), role="bias", const=True, domain=(-0.5, 0.5))), (C.T(s),),
                            C._conv_opts("SAME", 1, 1), "chain")
    if op == "DEPTHWISE_CONV_2D":
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)), C.T((1, 3, 3, c), role="weights", const=True, axis=3),
                                 C.T((c,), role="bias", const=True, domain=(-0.5, 0.5))), (C.T(s),),
                            C._conv_opts("SAME", 1, 1) | {"depth_multiplier": 1}, "chain")
    if op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        opts = {"padding": "SAME", "stride_h": 1, "stride_w": 1, "filter_height": 3, "filter_width": 3,
                "fused_activation_function": "NONE"}
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)),), (C.T(s),), opts, "chain", same_quant=True)
    if op == "PRELU":
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)), C.T((1, 1, c), role="weights", const=True, domain=(0.05, 0.5))),
                            (C.T(s),), {}, "chain")
    opts: dict[str, Any] = {}
    if op == "LEAKY_RELU":
        opts = {"alpha": 0.2}
    dom = C.UNARY_DOMAIN.get(op, (-2, 2))
    return C.OpTemplate(op, (C.T(s, domain=dom),), (C.T(s, quant=C.UNARY_QUANT.get(op)),), opts, "chain")


class _HelperDelegate(Delegate):
    """A second delegate for the multi-delegate case: takes one op, runs it on the reference."""

    name = "conformance-helper"
    backend = "cpu"

    def __init__(self, op: str, dtype: str):
        super().__init__()
        self.op_table = OpTable.of([OpSupport(op, max_version=1, dtypes=frozenset({dtype}))], self.name)

    def prepare(self, partition):
        return ReferenceKernel(partition)


class _PrepareFails(Delegate):
    """Wraps a delegate so that its prepare fails after the real one has run."""

    def __init__(self, inner: Delegate):
        super().__init__(inner.max_delegated_partitions, inner.min_nodes_per_partition)
        self.inner = inner
        self.name = inner.name
        self.backend = inner.backend
        self.op_table = inner.op_table
        self.fp16_weights_aware = inner.fp16_weights_aware
        self.calls = 0

    def is_node_supported(self, node):
        return self.inner.is_node_supported(node)

    def partition_limits(self):
        return self.inner.partition_limits()

    def prepare(self, partition):
        self.calls += 1
        self.inner.prepare(partition)
        raise RuntimeError("conformance: injected failure at the end of prepare")

    def describe(self) -> str:
        return self.inner.describe()


# --- entry points ----------------------------------------------------------------------------
Progress = Callable[[int, int, CaseResult], Any]


def certify(registry: Any, name: str, *, models_dir: str | Path | None = None, seed: int = 0,
            shard: tuple[int, int] | str = (0, 1), tolerances: Tolerances | str | Path | None = None,
            progress: Progress | None = None, options: Mapping[str, Any] | None = None,
            variants_per_case: int = C.DEFAULT_VARIANTS_PER_CASE) -> Certificate:
    """Certify delegate `name` of `registry` against the CPU reference.

    `shard=(i, n)` (or "i/n") runs only cases k with k % n == i of the full deterministic list;
    `progress(done, total, result)` is called after every case. An unavailable delegate gets a
    certificate with status "unavailable" and verdict "UNAVAILABLE" (no cases run).
    """
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    cert_run = Certification(registry, name, models_dir=models_dir, seed=seed, shard=shard, tolerances=tolerances,
                             options=options, variants_per_case=variants_per_case)
    if not cert_run.availability.ok:
        return cert_run.certificate([], started=started, duration_s=time.perf_counter() - t0)
    try:
        cert_run.delegate
        cert_run.op_delegate
    except Exception as e:
        msg = str(e) if isinstance(e, AceleraError) else f"{type(e).__name__}: {e}"
        return cert_run.certificate([], started=started, duration_s=time.perf_counter() - t0, status="error",
                                    reason=f"cannot create the delegate: {msg}")
    results: list[CaseResult] = []
    total = len(cert_run.cases)
    for k, case in enumerate(cert_run.cases):
        r = cert_run.run_case(case)
        results.append(r)
        if progress is not None:
            progress(k + 1, total, r)
    return cert_run.certificate(results, started=started, duration_s=time.perf_counter() - t0)


def run_case(registry: Any, name: str, case_id: str, **kw) -> CaseResult:
    """Run one case of a delegate's full case list by id (for reproducing a failure)."""
    c = Certification(registry, name, **kw)
    for case in c.all_cases:
        if case.id == case_id:
            return c.run_case(case)
    raise KeyError(f"no case {case_id!r} for {name}")


def run(registry: Any, names: Sequence[str] = (), *, all_: bool = False, models_dir: str | Path | None = None,
        shard: tuple[int, int] | str = (0, 1), seed: int = 0, report_dir: str | Path | None = None,
        tolerances_file: str | Path | None = None, log: Callable[[str], Any] = print,
        options: Mapping[str, Any] | None = None) -> int:
    """The `acelera conformance` command. Exit code 0 only when every certified delegate PASSes.

    `all_`: every delegate in the registry; unavailable ones are listed and skipped (they do not
    change the exit code). A delegate named explicitly that is unavailable makes the exit code 1.
    Reports per delegate go to `report_dir/<name>/` (certificate.json, junit.xml, summary.md,
    summary.html). `options` are flag values set on the command line; each delegate gets its own
    flags and the common ones (e.g. --external_delegate_path for litert-external).
    """
    from acelera.conformance import report

    tolerances = Tolerances.load(tolerances_file)
    shard = C.parse_shard(shard)
    targets = list(dict.fromkeys(list(names) + (sorted(registry.specs) if all_ else [])))
    if not targets:
        log("no delegate to certify: give --delegate NAME or --all")
        return 2
    for n in targets:
        registry.spec(n)  # unknown names fail before anything runs
    interactive = sys.stdout.isatty()
    exit_code = 0
    certified = 0
    for name in targets:
        avail = registry.availability(name)
        if not avail.ok:
            log(f"{name}: unavailable ({avail.reason}); not certified")
            if name in names:
                exit_code = 1
                cert = Certification(registry, name, models_dir=models_dir, seed=seed, shard=shard,
                                     tolerances=tolerances).certificate([], started="")
                if report_dir is not None:
                    report.write_all(cert, Path(report_dir) / _safe(name))
            continue
        own = _options_for(registry, name, options)
        if interactive:
            cert = _certify_with_bar(registry, name, models_dir, seed, shard, tolerances, own)
        else:
            last = [0]

            def progress(done: int, total: int, r: CaseResult) -> None:
                if r.status == "fail":
                    log(f"  FAIL {r.id}: {(r.errors or [''])[0]}")
                pct = done * 4 // max(total, 1)
                if pct != last[0] and done:
                    last[0] = pct
                    log(f"{name}: {done}/{total} cases")

            cert = certify(registry, name, models_dir=models_dir, seed=seed, shard=shard, tolerances=tolerances,
                           progress=progress, options=own)
        certified += 1
        for line in report.summary_lines(cert):
            log(line)
        if report_dir is not None:
            out = Path(report_dir) / _safe(name)
            report.write_all(cert, out)
            log(f"reports: {out}")
        if not cert.passed and (cert.status != "unavailable" or name in names):
            exit_code = 1
    if certified == 0 and all_:
        log("no available delegate was certified")
    return exit_code


def _options_for(registry: Any, name: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    from acelera.registrar.spec import COMMON_FLAGS

    own = {f.name for f in registry.spec(name).flags} | {f.name for f in COMMON_FLAGS}
    return {k: v for k, v in (options or {}).items() if k in own}


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _certify_with_bar(registry, name, models_dir, seed, shard, tolerances, options=None) -> Certificate:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

    with Bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
             TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task(name, total=None, failed=0)
        failed = [0]

        def progress(done: int, total: int, r: CaseResult) -> None:
            if r.status == "fail":
                failed[0] += 1
            bar.update(task, completed=done, total=total, failed=failed[0])

        return certify(registry, name, models_dir=models_dir, seed=seed, shard=shard, tolerances=tolerances,
                       progress=progress, options=options)
