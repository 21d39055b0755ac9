"""Numeric tolerances of the conformance suite, per delegate precision.

A delegate's *precision* says what arithmetic it claims, and so how far its results may be
from the CPU reference:

=========  ==================================================================================
float32    float32 compute (other summation order, fused kernels, other libm): tight bounds.
float16    float16 storage and arithmetic (GPU with precision loss allowed, NNAPI allow_fp16,
           Core ML's Neural Engine): relative error of about 1e-2.
integer    integer arithmetic that may round differently: at most 1 quantization step.
float-view quantized models computed in float with quantization simulators between ops (the
           view TFLite's GPU delegate runs them in): each op within 1 step of the integer
           reference; whole models against the exact float-view answer, on the floor of the
           integer reference (below).
optimized  integer arithmetic that requantizes its own way (LiteRT's optimized int8 kernels and
           its XNNPACK: float requantization, other softmax/logistic tables): each op within 1
           step of the integer reference; whole models on the bound LiteRT's optimized kernels
           meet against LiteRT's reference kernels (UNFLOORED_FLOAT_VIEW, below).
exact      bit-exact integer arithmetic: every value equal to the reference.
=========  ==================================================================================

Where the precision comes from: a `precision` attribute of the delegate instance, else of its
DelegateSpec (a string, or a mapping ``{"float": ..., "integer": ...}`` by case kind; read
with getattr so specs without the attribute work). Without one: "float32" for float cases
and "exact" for integer (quantized) cases.

The rule. For one output, with ``err`` the largest |test - reference| over its elements in
real units (quantized values are dequantized with the output's scale):

    err <= max(max_abs + rel * max|reference|, steps * quantum)

and, where the tolerance sets ``avg_steps``, the average |test - reference| over the
output's elements and runs (inference_diff's avg_error) in quantization steps must not exceed
it.

``quantum`` is the output's quantization scale for quantized outputs; for a float output of a
quantized case (DEQUANTIZE, models with float outputs behind DEQUANTIZE) it is the scale of
the quantized tensor it comes from, where known, else 0. NaN must be NaN in both, infinities
must be equal, and non-quantized integer or bool outputs (ARG_MAX indices, comparisons) must
be equal in every precision. Single-op cases (op, negative and behaviour cases) use one
Tolerance per precision; model cases use a looser one per precision (`model`), since errors
accumulate over layers.

Defaults:

=========  ==========================  ===========================================
precision  op cases                    model cases
=========  ==========================  ===========================================
float32    max_abs 1e-5, rel 1e-5,     max_abs 1e-4, rel 1e-4, steps 1
           steps 1
float16    max_abs 1e-3, rel 1e-2,     max_abs 1e-2, rel 5e-2, steps 2
           steps 1
integer    steps 1                     steps 3
float-view steps 1                     steps 1, avg_steps 1, floor_k 4 (vs the
                                       float-view answer)
optimized  steps 1                     steps 128, avg_steps 12
exact      all 0                       all 0
=========  ==========================  ===========================================

Float model cases are judged against the model's own numerical floor (floor.py). The float
outputs of a float32, float16-weight or dynamic-range model are computed exactly (in float64
by the reference kernels, float64.py); the *floor* of an output is how far acelera's float32
reference lands from that answer on the same inputs (for float16 delegates: half storage,
every constant and intermediate rounded to half). The delegate's own distance from the
float64 answer must stay within max(the bound above, floor_k x floor), floor_k = FLOOR_K
(4) by default. An output whose logits reach 1e3 through cancelling sums has a floor of
order 1 and gets that room; a well-conditioned one has a floor near 1e-6 and keeps the
precision's bound. Reports show the floor beside each error.

Float-view model cases are floored the same way, on the float-view answer (float_view.py):
the quantized graph computed exactly, in float64 by the reference kernels on dequantized
values, each op's quantized outputs rounded onto their grid (quantize, clamp to the type's
range, dequantize), QUANTIZE as that rounding and DEQUANTIZE as the identity. That is what a
float-view delegate computes, less its own float32 rounding and storage. The *floor* of an
output is how far acelera's integer reference (LiteRT's integer arithmetic, dequantized) lands
from the float-view answer, in real units and in steps of the output's scale (of the
DEQUANTIZE input for a float output); for a delegate that stores half (it claims float16 for
float cases: the GPU backends with precision loss allowed) it is the larger of that and the
distance of the float view in half storage (every input, constant and intermediate tensor
rounded through half after its grid rounding, as the GPU stores them), the float-view
counterpart of float16's half-storage floor. Two rules, both against the float-view answer:

- max: the delegate's largest error (steps) <= max(steps, floor_k x floor);
- average: its average error over elements and runs (steps) <= max(avg_steps, floor_k x
  the average floor).

Why both: the largest error of an ill-conditioned output is set by single elements, where one
rounding that flips in an early layer (a value at a tie of its grid, which float32, half
storage and the integer arithmetic each round their own way) moves a few outputs far. On
face_detection_short_range_int8 the integer reference is up to 20 and 36 steps off the
float-view answer on its two outputs (half storage: 20 and 55) while its average error stays
at 1.1 and 2.3 steps, so the max rule gives room at single elements and the average rule keeps
the output as a whole where an honest implementation lands (a delegate biased by a few steps
everywhere fails it). Where both floors are 0 the precision's own bound governs: 1 step at any
element and 1 on average (a value at a tie of the last grid may round either way). The half
floor is needed: on misc_ops_a_int8 the integer reference equals the float-view answer at an
output that squares a sum, and half storage flips one rounding of that sum, which the square
makes 3 steps; gpu-opencl and gpu-gl are off by exactly that. Measured with the defaults
(the certification's seeds, 2 runs, the shared and zoo int8 models): gpu-opencl and gpu-gl
stay within 1.6 floors at single elements and 1.4 average floors; LiteRT's XNNPACK (which
requantizes in float; float32 storage, so only the integer floor) is closer to the float-view
answer than the integer reference itself (7 and 13 steps on face_detection_short_range_int8,
averages 0.14 and 0.49): the float-view answer is what float implementations compute. With
floor_k = 0 ([tolerances.float-view.model]) a float-view case is judged against the integer
reference with steps and avg_steps alone. A model whose float-view answer the reference kernels
cannot compute is not covered.

Overrides come from a TOML file (`acelera conformance --tolerances FILE`, or
`Tolerances.load(path)`); every key is optional and replaces only what it names::

    [tolerances.float16]          # op, negative and behaviour cases
    max_abs = 2e-3
    rel = 1e-2
    steps = 1

    [tolerances.float16.model]    # model cases
    rel = 0.1

    [tolerances.float16.ops.SOFTMAX]   # one op's cases (op-level override of the above)
    max_abs = 5e-3

    [tolerances.float32.model]    # float model cases: k x the model's floor (below)
    floor_k = 8

    [tolerances.float-view.model] # quantized model cases: k x the float-view floor
    floor_k = 8

    [verdict]
    not_covered = "fail"          # "ignore" (default) or "fail": see suite.VERDICT_RULE

    [latency]                     # model-case latency: median of `runs` after `warmup`
    runs = 20
    warmup = 3

The same tables may sit under ``[tool.acelera.conformance]`` (e.g. in pyproject.toml).
Unknown precisions or keys are errors naming the file.
"""
from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from acelera.core.errors import AceleraError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PRECISIONS = ("float32", "float16", "integer", "float-view", "optimized", "exact")
KEYS = ("max_abs", "rel", "steps", "avg_steps", "floor_k")
#: model-case latency: the median of `runs` timed invokes after `warmup` untimed ones
LATENCY_RUNS, LATENCY_WARMUP = 10, 2
#: how far a float32 delegate may be from the float64 answer, in multiples of the float32
#: reference's own distance from it (the floor): a second honest float32 implementation with
#: another summation order lands within 1-3 floors of the exact answer; 4 leaves room without
#: letting a real bug through on a well-conditioned output (where the floor is tiny and the
#: precision's own bound governs). The same k for float16 against the half-storage floor, and
#: for the float-view against the integer reference's distance from the float-view answer.
FLOOR_K = 4.0


class ToleranceError(AceleraError):
    """A tolerance file is unreadable or holds unknown precisions, keys or wrong types."""


@dataclass(frozen=True)
class Tolerance:
    """err <= max(max_abs + rel * max|reference|, steps * quantum), in real units."""

    max_abs: float = 0.0
    rel: float = 0.0
    steps: float = 0.0
    #: bound on the average error in quantization steps (model cases of quantized outputs); None: none
    avg_steps: float | None = None
    #: model cases: also allow floor_k x the model's numerical floor (floor.py; float_view.py for
    #: float-view cases, where the average-error bound is floored too)
    floor_k: float = 0.0

    def allowed(self, max_abs_reference: float, quantum: float | None = None, floor: float = 0.0) -> float:
        bound = self.max_abs + self.rel * max_abs_reference
        if quantum:
            bound = max(bound, self.steps * quantum)
        return max(bound, self.floor_k * floor)

    def describe(self) -> str:
        avg = "" if self.avg_steps is None else f" avg_steps={self.avg_steps:g}"
        k = f" floor_k={self.floor_k:g}" if self.floor_k else ""
        return f"max_abs={self.max_abs:g} rel={self.rel:g} steps={self.steps:g}{avg}{k}"


DEFAULT_OP: dict[str, Tolerance] = {
    "float32": Tolerance(1e-5, 1e-5, 1),
    "float16": Tolerance(1e-3, 1e-2, 1),
    "integer": Tolerance(0.0, 0.0, 1),
    "float-view": Tolerance(0.0, 0.0, 1),
    "optimized": Tolerance(0.0, 0.0, 1),
    "exact": Tolerance(0.0, 0.0, 0),
}
#: the "optimized" precision's model bound, and float-view model outputs judged without the
#: float-view answer (acelera select compares each configuration with the integer reference
#: only): what LiteRT's own optimized int8 kernels and its XNNPACK delegate meet against
#: LiteRT's reference kernels on the shared int8 models
#: (single elements up to 94 steps, averages up to 2.9, 10 on one one-element score), rounded
#: up: half the 8-bit range, an average of 12 steps.
UNFLOORED_FLOAT_VIEW = Tolerance(0.0, 0.0, 128, avg_steps=12)

DEFAULT_MODEL: dict[str, Tolerance] = {
    "float32": Tolerance(1e-4, 1e-4, 1, floor_k=FLOOR_K),
    "float16": Tolerance(1e-2, 5e-2, 2, floor_k=FLOOR_K),
    "integer": Tolerance(0.0, 0.0, 3),
    "float-view": Tolerance(0.0, 0.0, 1, avg_steps=1, floor_k=FLOOR_K),
    "optimized": UNFLOORED_FLOAT_VIEW,
    "exact": Tolerance(0.0, 0.0, 0),
}



@dataclass
class Tolerances:
    """The tolerance set of one certification run (defaults plus TOML overrides)."""

    op: dict[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_OP))
    model: dict[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_MODEL))
    #: (precision, op) -> Tolerance for that op's single-op cases
    per_op: dict[tuple[str, str], Tolerance] = field(default_factory=dict)
    #: True: declared combinations the suite cannot test fail the verdict
    strict_coverage: bool = False
    source: str = "defaults"
    #: model-case latency: median of `latency_runs` invokes after `latency_warmup` ([latency] in TOML)
    latency_runs: int = LATENCY_RUNS
    latency_warmup: int = LATENCY_WARMUP

    def for_case(self, precision: str, kind: str, op: str | None = None) -> Tolerance:
        if precision not in PRECISIONS:
            raise ToleranceError(f"unknown precision '{precision}' (known: {', '.join(PRECISIONS)})")
        if kind == "model":
            return self.model[precision]
        if op is not None and (precision, op) in self.per_op:
            return self.per_op[(precision, op)]
        return self.op[precision]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "strict_coverage": self.strict_coverage,
                               "latency": {"runs": self.latency_runs, "warmup": self.latency_warmup}}
        for p in PRECISIONS:
            entry: dict[str, Any] = dict(asdict(self.op[p]))
            entry["model"] = asdict(self.model[p])
            ops = {op: asdict(t) for (pp, op), t in sorted(self.per_op.items()) if pp == p}
            if ops:
                entry["ops"] = ops
            out[p] = entry
        return out

    # --- TOML ----------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path | None) -> "Tolerances":
        """Defaults overridden by the TOML file at `path` (None: the defaults)."""
        if path is None:
            return cls()
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise ToleranceError(f"{p}: cannot read tolerances: {e.strerror or e}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ToleranceError(f"{p}: invalid TOML: {e}") from None
        tool = data.get("tool", {}).get("acelera", {}).get("conformance") if isinstance(data.get("tool"), dict) else None
        if isinstance(tool, dict):
            data = tool
        return cls.from_mapping(data, str(p))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "tolerances") -> "Tolerances":
        tol = cls(source=where)
        unknown = set(data) - {"tolerances", "verdict", "latency"}
        if unknown:
            raise ToleranceError(f"{where}: unknown top-level key(s) {sorted(unknown)} "
                                 f"(expected [tolerances.*], [verdict], [latency])")
        latency = data.get("latency", {})
        if not isinstance(latency, Mapping) or set(latency) - {"runs", "warmup"}:
            raise ToleranceError(f"{where}: [latency] takes only runs = N and warmup = N")
        for key, low in (("runs", 1), ("warmup", 0)):
            v = latency.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not low <= v <= 10_000):
                raise ToleranceError(f"{where}: latency.{key} must be an integer in [{low}, 10000], got {v!r}")
        tol.latency_runs = int(latency.get("runs", LATENCY_RUNS))
        tol.latency_warmup = int(latency.get("warmup", LATENCY_WARMUP))
        table = data.get("tolerances", {})
        if not isinstance(table, Mapping):
            raise ToleranceError(f"{where}: [tolerances] must be a table")
        for precision, entry in table.items():
            if precision not in PRECISIONS:
                raise ToleranceError(f"{where}: unknown precision '{precision}' (known: {', '.join(PRECISIONS)})")
            if not isinstance(entry, Mapping):
                raise ToleranceError(f"{where}: [tolerances.{precision}] must be a table")
            base = {k: v for k, v in entry.items() if k not in ("model", "ops")}
            tol.op[precision] = _override(tol.op[precision], base, f"{where}: [tolerances.{precision}]")
            if "model" in entry:
                tol.model[precision] = _override(tol.model[precision], entry["model"],
                                                 f"{where}: [tolerances.{precision}.model]")
            ops = entry.get("ops", {})
            if not isinstance(ops, Mapping):
                raise ToleranceError(f"{where}: [tolerances.{precision}.ops] must be a table")
            for op, values in ops.items():
                tol.per_op[(precision, op)] = _override(tol.op[precision], values,
                                                        f"{where}: [tolerances.{precision}.ops.{op}]")
        verdict = data.get("verdict", {})
        if not isinstance(verdict, Mapping) or set(verdict) - {"not_covered"}:
            raise ToleranceError(f"{where}: [verdict] takes only not_covered = \"ignore\" | \"fail\"")
        nc = verdict.get("not_covered", "ignore")
        if nc not in ("ignore", "fail"):
            raise ToleranceError(f"{where}: verdict.not_covered must be \"ignore\" or \"fail\", got {nc!r}")
        tol.strict_coverage = nc == "fail"
        return tol


def _override(base: Tolerance, values: Any, where: str) -> Tolerance:
    if not isinstance(values, Mapping):
        raise ToleranceError(f"{where} must be a table")
    bad = set(values) - set(KEYS)
    if bad:
        raise ToleranceError(f"{where}: unknown key(s) {sorted(bad)} (known: {', '.join(KEYS)})")
    for k, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v):
            raise ToleranceError(f"{where}: {k} must be a non-negative number, got {v!r}")
    return replace(base, **{k: float(v) for k, v in values.items()})


# --- precision -------------------------------------------------------------------------------
def resolve_precision(spec: Any, delegate: Any = None, numeric: str = "float") -> str:
    """The precision a delegate claims for `numeric` ("float" or "integer") cases."""
    claimed = getattr(delegate, "precision", None) if delegate is not None else None
    if claimed is None:
        claimed = getattr(spec, "precision", None)
    if isinstance(claimed, Mapping):
        claimed = claimed.get(numeric, claimed.get("default"))
    if claimed is None or callable(claimed):
        return "float32" if numeric == "float" else "exact"
    claimed = str(claimed)
    if claimed not in PRECISIONS:
        raise ToleranceError(f"{getattr(spec, 'name', '?')}: unknown precision '{claimed}' "
                             f"(known: {', '.join(PRECISIONS)})")
    return claimed


# --- comparison ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing one output with the reference."""

    ok: bool
    max_abs_error: float
    max_abs_reference: float
    allowed: float
    message: str = ""
    #: largest difference in quantization steps (quantized outputs only)
    max_steps: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"ok": self.ok, "max_abs_error": _num(self.max_abs_error),
             "max_abs_reference": _num(self.max_abs_reference), "allowed": _num(self.allowed)}
        if self.max_steps is not None:
            d["max_steps"] = self.max_steps
        if self.message:
            d["message"] = self.message
        return d


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def compare(test: np.ndarray, ref: np.ndarray, tol: Tolerance, *, scale: float | None = None,
            zero_point: int = 0, quantum: float | None = None) -> Comparison:
    """Compare one output array with the reference under `tol`.

    `scale`/`zero_point`: the output's (per-tensor) quantization, for quantized outputs.
    `quantum`: for float outputs, the quantization step they derive from (if any).
    """
    test, ref = np.asarray(test), np.asarray(ref)
    if test.shape != ref.shape:
        return Comparison(False, math.inf, math.nan, 0.0, f"shape {list(test.shape)} differs from reference {list(ref.shape)}")
    if test.dtype != ref.dtype:
        return Comparison(False, math.inf, math.nan, 0.0, f"dtype {test.dtype} differs from reference {ref.dtype}")
    if ref.size == 0:
        return Comparison(True, 0.0, 0.0, 0.0)
    if ref.dtype.kind == "f":
        t, r = test.astype(np.float64), ref.astype(np.float64)
        nan_t, nan_r = np.isnan(t), np.isnan(r)
        if np.any(nan_t != nan_r):
            k = int(np.flatnonzero((nan_t != nan_r).ravel())[0])
            return Comparison(False, math.inf, math.nan, 0.0,
                              f"NaN mismatch at element {k}: test {t.ravel()[k].item()!r}, reference {r.ravel()[k].item()!r}")
        inf = np.isinf(r) | np.isinf(t)
        if np.any(inf & (t != r)):
            k = int(np.flatnonzero((inf & (t != r)).ravel())[0])
            return Comparison(False, math.inf, math.nan, 0.0,
                              f"infinity mismatch at element {k}: test {t.ravel()[k].item()!r}, "
                              f"reference {r.ravel()[k].item()!r}")
        ok_mask = ~(nan_r | inf)
        diff = np.where(ok_mask, np.abs(t - r), 0.0)
        max_ref = float(np.max(np.where(ok_mask, np.abs(r), 0.0)))
        err = float(diff.max())
        allowed = tol.allowed(max_ref, quantum)
        ok = err <= allowed
        msg = "" if ok else _where(diff, t, r, err, allowed)
        return Comparison(ok, err, max_ref, allowed, msg)
    if scale is not None and scale > 0 and ref.dtype.kind in "iu":
        steps = np.abs(test.astype(np.int64) - ref.astype(np.int64))
        max_steps = int(steps.max())
        err = max_steps * scale
        max_ref = float(np.max(np.abs(ref.astype(np.int64) - zero_point))) * scale
        allowed = tol.allowed(max_ref, scale)
        allowed_steps = math.floor(allowed / scale + 1e-9)
        ok = max_steps <= allowed_steps
        msg = "" if ok else (f"{max_steps} quantization steps off (allowed {allowed_steps}); "
                             + _where(steps.astype(np.float64), test, ref, float(max_steps), float(allowed_steps)))
        return Comparison(ok, err, max_ref, allowed, msg, max_steps)
    # non-quantized integers and bools: exact in every precision
    t, r = test.astype(np.float64), ref.astype(np.float64)
    diff = np.abs(t - r)
    err = float(diff.max())
    ok = err == 0
    return Comparison(ok, err, float(np.abs(r).max()), 0.0, "" if ok else _where(diff, test, ref, err, 0.0))


def _where(diff: np.ndarray, t: np.ndarray, r: np.ndarray, err: float, allowed: float) -> str:
    k = int(np.argmax(diff.ravel()))
    idx = tuple(int(i) for i in np.unravel_index(k, diff.shape)) if diff.ndim else ()
    tv, rv = np.asarray(t).ravel()[k].item(), np.asarray(r).ravel()[k].item()
    return f"max error {err:.6g} > allowed {allowed:.6g} at {list(idx)}: test {tv!r}, reference {rv!r}"
