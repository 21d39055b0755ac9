"""Conformance case generation from a delegate's declared op table.

The table is the contract. For every row (op, versions min..max, dtypes) and every declared
version and dtype, the suite builds single-op models from the op's *generator*: a list of
variants (`OpTemplate`) that vary the op's attributes (fused activations, SAME/VALID,
strides, dilation, depth multipliers, broadcast shapes, per-channel weights, align_corners /
half_pixel_centers, ...). A template is dtype-neutral; `build_graph` materializes it for one
case dtype:

- FLOAT32 / FLOAT16: every float tensor in that type;
- INT8 / UINT8 / INT16: quantized the way TFLite's converter does it. Activations get
  per-tensor scales from their value range (int16 symmetric, zero point 0); weights are int8
  symmetric (per-channel along the output-channel axis for convolutions) for INT8 and INT16
  cases and asymmetric uint8 for UINT8 cases; biases are int32 (int64 with int16
  activations) at scale input_scale * weight_scale. Output scales are calibrated: the float32
  version of the same model runs on the CPU reference with the same data and the observed
  output range sets the scale, except where the op fixes it (LOGISTIC 1/256, TANH 1/128,
  SOFTMAX 1/256, ...) or requires the input's (pooling, concatenation, data movement);
- INT32: integer tensors without quantization.

Which variants a (op, version, dtype) case gets: those whose `min_version` is at most the
version (attributes TFLite only allows from some version on: dilated depthwise v2, grouped
conv v6, keep_num_dims v5, half_pixel_centers v3, rank-5 TRANSPOSE v4, ...), at most
`variants_per_case` of them, rotated by the version index and the seed so that all variants
get exercised across a row's versions. Variants marked `probe` (non-constant weights and
other inputs that commonly violate a delegate's constraints) are added once per (op, dtype)
when the row declares constraints: a probe the table accepts must pass like any op case, one
the table refuses becomes a negative case.

Every case id is stable: `op/CONV_2D/v3/INT8/k3s2_valid_relu`, `neg/ADD/v3/FLOAT32/version`,
`neg/ADD/v1/INT16/dtype`, `model/mobilenet_v2_96_int8`, `behaviour/resize`.

Extending: `@generator("MY_OP")` registers a function `(op) -> list[OpTemplate]`; a plugin
with custom ops can register generators for them before certifying.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from acelera.conformance.graph_builder import Built, build_graph
from acelera.conformance.templates import (  # noqa: F401  (re-exported: the suite's vocabulary)
    CASE_DTYPES,
    DEFAULT_VARIANTS_PER_CASE,
    FLOAT_DTYPES,
    FUSED_ACT_BINARY,
    GENERATORS,
    NEGATIVE_DTYPES,
    NP,
    QUANT_DTYPES,
    SAME_QUANT_BINARY,
    UNARY_DOMAIN,
    UNARY_QUANT,
    NotCovered,
    OpTemplate,
    ReferenceFailure,
    T,
    _conv_opts,
    _int,
    _out_size,
    generator,
    reference_gap,
    reshape,
    templates_for,
)
from acelera.core.errors import AceleraError

__all__ = [
    "T", "OpTemplate", "Built", "Case", "NotCovered", "generator", "GENERATORS", "templates_for",
    "build_graph", "generate_cases", "select_shard", "parse_shard", "classify_model", "case_seed",
    "default_models_dir", "CASE_DTYPES", "QUANT_DTYPES",
]

# --- cases ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One conformance case: an id, what it checks, and how to build it."""

    id: str
    kind: str  # "op", "negative", "model", "behaviour"
    op: str | None = None
    version: int | None = None
    dtype: str | None = None
    variant: str = ""
    template: OpTemplate | None = None
    #: model cases: a path, or a zero-argument callable returning model bytes
    model: Any = None
    model_type: str | None = None
    #: op and negative cases: "delegated" or "refused", as the declared table says
    expect: str = ""
    #: set when the case cannot run at all (no generator, model type not declared, ...)
    status: str | None = None
    reason: str = ""

    def describe(self) -> str:
        parts = [self.kind]
        if self.op:
            parts.append(f"{self.op} v{self.version} {self.dtype}")
        if self.variant:
            parts.append(self.variant)
        return " ".join(parts)


def case_seed(seed: int, case_id: str) -> int:
    """The per-case random seed: stable across processes, shards and Python versions."""
    h = hashlib.sha256(f"{seed}:{case_id}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def _applies(tpl: OpTemplate, dtype: str) -> bool:
    return tpl.dtypes is None or dtype in tpl.dtypes


def _pick(variants: list[OpTemplate], k: int, offset: int) -> list[OpTemplate]:
    if len(variants) <= k:
        return list(variants)
    return [variants[(offset + j) % len(variants)] for j in range(k)]


def _declared(row: Any, tpl: OpTemplate, version: int, dtype: str) -> tuple[bool | None, str]:
    """Whether the row (with its constraints) accepts the variant: (ok, reason); None if unbuildable."""
    from acelera.core.executor import Executor
    from acelera.core.model import load_model

    try:
        built = build_graph([tpl], dtype, version, np.random.default_rng(0), calibrate=False)
        ctx = Executor(load_model(built.model).main).node_context(0)
    except AceleraError as e:
        return None, str(e)
    s = row.check(ctx)
    return s.ok, s.reason


def op_cases(table: Iterable[Any], *, seed: int = 0, variants_per_case: int = DEFAULT_VARIANTS_PER_CASE) -> list[Case]:
    """Op cases and negative cases for every row of an op table.

    Rows with constraints: each variant is built once (without calibration) and checked
    against the row, so that a combination gets variants its constraints accept; the variants
    they refuse become negative "constraint" cases (one per op, dtype and variant).
    """
    out: list[Case] = []
    for row in table:
        op = row.op
        all_tpls = templates_for(op)
        dtypes = sorted(row.dtypes)
        if all_tpls is None:
            for v in range(row.min_version, row.max_version + 1):
                for dt in dtypes:
                    out.append(Case(f"op/{op}/v{v}/{dt}/-", "op", op, v, dt, "-", status="not-covered",
                                    reason=f"no case generator for {op}"))
            continue
        regular = [t for t in all_tpls if not t.probe]
        probes = [t for t in all_tpls if t.probe]
        constrained = bool(row.constraints)
        refused_seen: set[tuple[str, str]] = set()

        def refused(tpl: OpTemplate, v: int, dt: str, reason: str) -> None:  # noqa: B023  (called in this iteration)
            if (tpl.label, dt) not in refused_seen:  # noqa: B023
                refused_seen.add((tpl.label, dt))  # noqa: B023
                out.append(Case(f"neg/{op}/v{v}/{dt}/constraint:{tpl.label}", "negative", op, v, dt,  # noqa: B023
                                f"constraint:{tpl.label}", tpl, expect="refused", reason=reason))

        for vi, v in enumerate(range(row.min_version, row.max_version + 1)):
            for di, dt in enumerate(dtypes):
                pool = [t for t in regular if t.min_version <= v and _applies(t, dt)]
                if not pool:
                    out.append(Case(f"op/{op}/v{v}/{dt}/-", "op", op, v, dt, "-", status="not-covered",
                                    reason=f"no {op} variant for version {v} and {dt}"))
                    continue
                rotated = _pick(pool, len(pool), seed + (vi + di) * variants_per_case)
                if not constrained:
                    chosen = rotated[:variants_per_case]
                else:
                    chosen, why = [], []
                    for tpl in rotated:
                        ok, reason = _declared(row, tpl, v, dt)
                        if ok:
                            chosen.append(tpl)
                            if len(chosen) == variants_per_case:
                                break
                        elif ok is False:
                            why.append(reason)
                            refused(tpl, v, dt, reason)
                    if not chosen:
                        out.append(Case(f"op/{op}/v{v}/{dt}/-", "op", op, v, dt, "-", status="not-covered",
                                        reason=f"every {op} variant the suite builds for v{v} {dt} violates a "
                                               f"declared constraint ({'; '.join(dict.fromkeys(why)) or 'none'})"))
                for tpl in chosen:
                    out.append(Case(f"op/{op}/v{v}/{dt}/{tpl.label}", "op", op, v, dt, tpl.label, tpl,
                                    expect="delegated"))
        if constrained:
            for dt in dtypes:
                for tpl in probes:
                    if not _applies(tpl, dt):
                        continue
                    v = max(row.min_version, min(row.max_version, tpl.min_version))
                    ok, reason = _declared(row, tpl, v, dt)
                    if ok:
                        out.append(Case(f"op/{op}/v{v}/{dt}/{tpl.label}", "op", op, v, dt, tpl.label, tpl,
                                        expect="delegated"))
                    elif ok is False:
                        refused(tpl, v, dt, reason)
        # negative: one version above the declared maximum
        first = next(((dt, t) for dt in dtypes for t in regular if _applies(t, dt)), None)
        if first is not None:
            dt, tpl = first
            v = row.max_version + 1
            out.append(Case(f"neg/{op}/v{v}/{dt}/version", "negative", op, v, dt, f"version:{tpl.label}", tpl,
                            expect="refused"))
        # negative: a dtype the row does not declare
        for dt in NEGATIVE_DTYPES:
            if dt in row.dtypes:
                continue
            dtype_tpl = next((t for t in regular if _applies(t, dt) and t.min_version <= row.max_version), None)
            if dtype_tpl is not None:
                v = max(row.min_version, dtype_tpl.min_version)
                out.append(Case(f"neg/{op}/v{v}/{dt}/dtype", "negative", op, v, dt, f"dtype:{dtype_tpl.label}", dtype_tpl,
                                expect="refused"))
                break
    return _unique(out)


def _unique(cases: list[Case]) -> list[Case]:
    seen: dict[str, int] = {}
    out = []
    for c in cases:
        n = seen.get(c.id, 0)
        seen[c.id] = n + 1
        out.append(c if n == 0 else replace(c, id=f"{c.id}#{n + 1}"))
    return out


# --- model cases ---------------------------------------------------------------------------
def default_models_dir() -> Path | None:
    """`ACELERA_MODELS`, else `../shared/models` next to the repository, else None."""
    env = os.environ.get("ACELERA_MODELS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[2]
    for cand in (here.parent / "shared" / "models", Path.cwd().parent / "shared" / "models"):
        if cand.is_dir():
            return cand
    return None


def classify_model(model: Any) -> str:
    """float32, float16 (fp16 weights through DEQUANTIZE), dynamic-range (int8 weights with float
    activations) or full-integer (quantized activations), from the main subgraph's tensors."""
    sg = model.main
    quant_types = ("INT8", "UINT8", "INT16", "INT4")
    # rows looked up in a quantized constant table are weights too (a dynamic-range Embedding)
    looked_up = {op.outputs[0] for op in sg.operators
                 if op.op in ("GATHER", "EMBEDDING_LOOKUP") and op.outputs
                 and sg.tensors[op.inputs[0 if op.op == "GATHER" else 1]].is_constant}
    for t in sg.tensors:
        if not t.is_constant and t.index not in looked_up and t.type_name in quant_types and t.quantization.is_set:
            return "full-integer"
    has_int_weights = any(t.is_constant and t.type_name in ("INT8", "UINT8", "INT4") and t.quantization.is_set
                          for t in sg.tensors)
    if has_int_weights:
        return "dynamic-range"
    fp16 = {t.index for t in sg.tensors if t.is_constant and t.type_name == "FLOAT16"}
    if any(op.op == "DEQUANTIZE" and op.inputs and op.inputs[0] in fp16 for op in sg.operators):
        return "float16"
    return "float32"


def accepts(model_types: Iterable[str], kind: str) -> bool:
    types = set(model_types)
    return kind in types or (kind == "full-integer" and "qat" in types)


def model_cases(model_types: Iterable[str], models_dir: str | Path | None) -> list[Case]:
    from acelera.core.model import load_model

    out: list[Case] = []
    entries: list[tuple[str, Any]] = []
    if models_dir is not None and Path(models_dir).is_dir():
        for p in sorted(Path(models_dir).glob("*.tflite")):
            entries.append((p.stem, p))
    entries.append(("tiny_cnn_float", _TinyCnn(False)))
    entries.append(("tiny_cnn_int8", _TinyCnn(True)))
    for name, src in entries:
        cid = f"model/{name}"
        try:
            m = load_model(src if isinstance(src, Path) else src())
        except AceleraError as e:
            out.append(Case(cid, "model", variant=name, model=src, status="skip", reason=f"cannot load: {e}"))
            continue
        kind = classify_model(m)
        if not accepts(model_types, kind):
            out.append(Case(cid, "model", variant=name, model=src, model_type=kind, status="skip",
                            reason=f"{kind} model; the delegate declares {', '.join(sorted(model_types))}"))
        else:
            out.append(Case(cid, "model", variant=name, model=src, model_type=kind))
    return out


@dataclass(frozen=True)
class _TinyCnn:
    quantized: bool

    def __call__(self) -> bytes:
        from acelera import samples

        return samples.tiny_cnn(quantized=self.quantized)


BEHAVIOURS = ("repeat", "resize", "prepare-failure", "multi-delegate", "nan-inf")


def behaviour_cases() -> list[Case]:
    return [Case(f"behaviour/{b}", "behaviour", variant=b) for b in BEHAVIOURS]


def generate_cases(spec: Any, *, seed: int = 0, models_dir: str | Path | None = None,
                   variants_per_case: int = DEFAULT_VARIANTS_PER_CASE,
                   kinds: Iterable[str] = ("op", "negative", "model", "behaviour")) -> list[Case]:
    """The full, deterministic case list of a DelegateSpec (before sharding)."""
    kinds = set(kinds)
    out: list[Case] = []
    if kinds & {"op", "negative"}:
        out += [c for c in op_cases(spec.op_table, seed=seed, variants_per_case=variants_per_case) if c.kind in kinds]
    if "model" in kinds:
        out += model_cases(spec.model_types, models_dir)
    if "behaviour" in kinds:
        out += behaviour_cases()
    return out


def parse_shard(text: str | tuple[int, int]) -> tuple[int, int]:
    """'i/n' (0 <= i < n) -> (i, n)."""
    if isinstance(text, tuple):
        i, n = text
    else:
        try:
            a, b = str(text).split("/")
            i, n = int(a), int(b)
        except ValueError:
            raise ValueError(f"shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"shard {i}/{n}: need 0 <= i < n")
    return i, n


def select_shard(cases: Sequence[Case], shard: tuple[int, int] = (0, 1)) -> list[Case]:
    """Round-robin split of the full list: case k goes to shard k mod n."""
    i, n = parse_shard(shard)
    return [c for k, c in enumerate(cases) if k % n == i]


from acelera.conformance import generators_more as _generators_more  # noqa: F401,E402  (registers the newer ops' generators)
