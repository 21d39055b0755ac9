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
  and the result agrees with the reference; with NaN, +inf and -inf at known positions of
  every float input (nan-inf), the outputs hold NaN exactly where the reference does and the
  reference's infinities (+-FLT_MAX, where LiteRT's kernels saturate, counts as the infinity
  of its sign; +-inf where the reference is finite beyond the float16 range is half
  overflow), the other elements agree within tolerance, and the next invoke on finite inputs
  gives the reference result (a quantized behaviour graph skips it).

Single-op cases are run with `min_nodes_per_partition=1` (unless the options given set it),
so that delegates whose default minimum partition is larger (Hexagon, Core ML: 2) take a lone
node, as TFLite's acceleration tests force delegation of single-op models; model and
behaviour cases use the delegate with the options as given.

Statuses: pass, fail, not-covered (the suite cannot generate the case, or the CPU reference
declines it: no kernel for that op, version or dtype; a reference kernel that *fails* is a
failure, so a broken reference cannot pass a certification silently), skip (not applicable: a
model type the plugin does not declare, no op to
build a behaviour graph from, NaN / Inf on a quantized graph). An unavailable delegate (its availability probe says
no) is not certified: its certificate has status "unavailable", verdict "UNAVAILABLE", the probe's
reason and no cases.
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from acelera.conformance import cases as C
from acelera.conformance.behaviour import BehaviourCases
from acelera.conformance.certificate import (  # noqa: F401  (the suite's public names)
    STATUSES,
    SUITE_NAME,
    VERDICT_RULE,
    CaseResult,
    Certificate,
    _jsonable,
    declared_matrix,
    finish,
    merge,
    platform_info,
    verdict_rule,
)
from acelera.conformance.model_cases import ModelCases
from acelera.conformance.running import (  # noqa: F401
    _average_ok,
    _checked_reference,
    _describe,
    _feed,
    _interpreter,
    _invoke,
    _numeric,
    _out_quant,
    _outputs,
    _reference,
    _refusal_reasons,
    _same,
    _Skip,
    _Warnings,
)
from acelera.conformance.tolerances import (
    Tolerance,
    Tolerances,
    compare,
    resolve_precision,
)
from acelera.core.delegate import Delegate, Support
from acelera.core.errors import AceleraError
from acelera.core.executor import Executor
from acelera.core.model import load_model

__all__ = ["CaseResult", "Certificate", "Certification", "certify", "merge", "run", "run_case",
           "VERDICT_RULE", "STATUSES", "SUITE_NAME"]


# --- results -------------------------------------------------------------------------------


# --- helpers -------------------------------------------------------------------------------


# --- the certification run -------------------------------------------------------------------
class Certification(ModelCases, BehaviourCases):
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
        # op_cases gives every op and negative case it does not mark unrunnable a template, dtype and version
        assert case.template is not None and case.dtype is not None and case.version is not None
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


    # --- behaviour cases -----------------------------------------------------------------


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


# --- coverage and verdict ------------------------------------------------------------------


# --- helper delegates for behaviour cases ----------------------------------------------------


# --- entry points ----------------------------------------------------------------------------
class NothingToCertify(AceleraError):
    """`acelera conformance` without a delegate: a usage error (exit code 2)."""

    exit_code = 2


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
        _ = cert_run.delegate, cert_run.op_delegate  # create both now: a failure is the certificate's error
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
        raise NothingToCertify("no delegate to certify: give --delegate NAME or --all")
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
                if pct != last[0] and done:  # noqa: B023  (called during this iteration)
                    last[0] = pct  # noqa: B023
                    log(f"{name}: {done}/{total} cases")  # noqa: B023

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
    return certify_with_progress(registry, name, models_dir=models_dir, seed=seed, shard=shard,
                                 tolerances=tolerances, options=options)


def certify_with_progress(registry: Any, name: str, **kw: Any) -> Certificate:
    """certify() with a rich progress bar (cases done, failures, time; transient)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.progress import Progress as Bar

    with Bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
             TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task(name, total=None, failed=0)
        failed = [0]

        def progress(done: int, total: int, r: CaseResult) -> None:
            if r.status == "fail":
                failed[0] += 1
            bar.update(task, completed=done, total=total, failed=failed[0])

        return certify(registry, name, progress=progress, **kw)
