"""Certificates: case results, a delegate's certificate, coverage and the verdict, merging shards."""
from __future__ import annotations

import math
import platform
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from acelera.core.delegate import OpTable

__all__ = ["CaseResult", "Certificate", "finish", "merge", "VERDICT_RULE", "STATUSES", "SUITE_NAME"]


SUITE_NAME = "acelera-conformance"


STATUSES = ("pass", "fail", "not-covered", "skip")


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


def platform_info() -> dict[str, str]:
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "machine": platform.machine(), "python": platform.python_version(),
            "numpy": np.__version__}


def declared_matrix(table: OpTable) -> list[dict[str, Any]]:
    return [{"op": r.op, "min_version": r.min_version, "max_version": r.max_version, "dtypes": sorted(r.dtypes),
             "constraints": [c.description for c in r.constraints]} for r in table]


def finish(cert: Certificate, table: OpTable | None = None, strict: bool = False) -> Certificate:
    """Fill counts, coverage and the verdict of a certificate from its cases (in place)."""
    cert.counts = {s: sum(1 for c in cert.cases if c.status == s) for s in STATUSES}
    cert.counts["total"] = len(cert.cases)
    rows = table if table is not None else [_Row(r) for r in cert.declared]
    combos: dict[tuple[str, int | None, str | None], str] = {}
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
