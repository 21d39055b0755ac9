"""NaN in, NaN out: every float delegate on NaN and +-inf inputs, against the CPU reference.

Where the reference (acelera's BUILTIN_REF kernels) gives NaN, a delegate must give NaN at the
same positions, and nowhere else; where it gives +-inf, the same infinity (+-FLT_MAX, LiteRT's
saturation, counts as the infinity of its sign: `special_value_errors`, the rule of the
conformance suite's nan-inf behaviour case). Cases:

- single-op models of every float op each delegate declares (the conformance generators' variants
  of its highest declared version), with NaN, +inf and -inf at known positions of every data
  input (weights fed at run time keep finite values), and with NaN alone; in the delegate's
  default precision and in its other one (half storage on the GPUs by default, float32 with
  gpu_precision_loss_allowed=false; xnnpack_force_fp16, nnapi_allow_fp16);
- the shared float models (sine, small CNN, MobileNetV2, the MediaPipe models) with NaN in the
  input, and with +-inf in it. An infinity that runs through several layers meets LiteRT's
  +-FLT_MAX clamps, so the reference's answer there is saturated garbage (about 1e33..3e38,
  or NaN, depending on summation order): whole models with +-inf are held to "no plausible
  number where the reference has none, and none of those where it has one" (`implausible`).

The conformance suite's nan-inf behaviour case is checked on test delegates that drop NaN, clamp
+-inf to finite values or keep NaN after it is gone from the inputs.

A delegate may instead agree with LiteRT's own reference kernels (ai_edge_litert, BUILTIN_REF)
where acelera's reference differs from them on special values (GELU(+inf) is +inf in LiteRT,
NaN in the reference's formula; +-inf through FULLY_CONNECTED, ADD_N and AVERAGE_POOL_2D is
+-FLT_MAX in LiteRT).

hexagon runs quantized models only: no tensor of it holds NaN.
"""
from __future__ import annotations

import functools
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from needs import require
from plugin_helpers import EP

from acelera.conformance import cases as C
from acelera.conformance.behaviour import FLT_MAX, special_value_errors, with_special_values
from acelera.core.delegate import Delegate, OpSupport, OpTable, Support
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.subplan import ReferenceKernel, reference_factory
from acelera.registrar import hookimpl
from acelera.registrar.registry import Registry
from acelera.registrar.spec import DelegateSpec

DELEGATES = ("xnnpack-cpu", "gpu-opencl", "gpu-gl", "nnapi", "coreml")
#: the same delegates in their other precision (the GPUs store half by default, the others float32)
OTHER_PRECISION = {"xnnpack-cpu": {"xnnpack_force_fp16": True}, "gpu-opencl": {"gpu_precision_loss_allowed": False},
                   "gpu-gl": {"gpu_precision_loss_allowed": False}, "nnapi": {"nnapi_allow_fp16": True}}
FLOAT_MODELS = ("sine_float", "small_cnn_f32", "mobilenet_v2_96_f32", "face_detection_short_range",
                "face_landmark", "selfie_segmentation", "hand_recrop")
#: input patterns: which special values, at SPECIAL_POSITIONS (shifted per input)
PATTERNS = {"nan+inf": ("nan", "+inf", "-inf"), "nan": ("nan",), "inf": ("+inf", "-inf")}
#: at most this many variants of each op (its highest declared version) per delegate
VARIANTS_PER_OP = 3
#: beyond this magnitude an output of these models is saturation, not a computed value
IMPLAUSIBLE = 1e30


@functools.lru_cache(maxsize=None)
def registry():
    from acelera.registrar.registry import get_registry

    return get_registry()


def delegate(name: str, options: dict | None = None):
    """A fresh delegate that takes a lone node (as the conformance suite's single-op cases)."""
    reg = registry()
    avail = reg.availability(name)
    require(avail.ok, f"{name} is not available here: {avail.reason}")
    return reg.create(name, {"min_nodes_per_partition": 1, **(options or {})})


def run(model: bytes | str, inputs, delegates=()) -> tuple[list[np.ndarray], Interpreter]:
    kw = {"model_content": model} if isinstance(model, bytes) else {"model_path": str(model)}
    it = Interpreter(**kw, experimental_delegates=list(delegates),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    with np.errstate(all="ignore"):
        it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()], it


def run_litert(model: bytes | str, inputs) -> list[np.ndarray] | None:
    """LiteRT's reference kernels on the same inputs; None where LiteRT cannot run the model."""
    from oracle import run_litert as litert

    data = model if isinstance(model, bytes) else Path(model).read_bytes()
    try:
        return litert(data, inputs)
    except Exception:
        return None


def agreement(outs, ref, litert, rule) -> list[str]:
    """`rule`'s errors against the reference, or none where the outputs follow LiteRT instead."""
    def errors(want):
        return [e for k, (t, r) in enumerate(zip(outs, want)) if r.dtype.kind == "f"
                for e in rule(t, r, f"output {k}")]
    errs = errors(ref)
    if errs and litert is not None and not errors(litert):
        return []
    return errs


def implausible(test: np.ndarray, ref: np.ndarray, label: str) -> list[str]:
    """Whole models with +-inf: no plausible number where the reference has none, and the reverse."""
    with np.errstate(invalid="ignore"):
        bad_t = ~np.isfinite(test) | (np.abs(test.astype(np.float64)) >= IMPLAUSIBLE)
        bad_r = ~np.isfinite(ref) | (np.abs(ref.astype(np.float64)) >= IMPLAUSIBLE)
    out = []
    for mask, what in ((bad_r & ~bad_t, "a plausible number where the reference has NaN, inf or saturation"),
                       (bad_t & ~bad_r, "NaN, inf or saturation where the reference is plausible")):
        k = np.flatnonzero(mask.reshape(-1))
        if k.size:
            i = int(k[0])
            out.append(f"{label}: {k.size} element(s) {what}, e.g. flat {i}: test {test.reshape(-1)[i]!r}, "
                       f"reference {ref.reshape(-1)[i]!r}")
    return out


def poisoned(inputs, kinds, data_flags=None) -> list[np.ndarray]:
    flags = data_flags or [True] * len(inputs)
    return [with_special_values(x, kinds, offset=11 * k)[0] if flag else x
            for k, (x, flag) in enumerate(zip(inputs, flags))]


# --- the rule itself -------------------------------------------------------------------------

def test_special_value_rule():
    ref = np.array([np.nan, np.inf, -np.inf, FLT_MAX, -FLT_MAX, 1.0, 1e6, 2.0], np.float32)
    same = np.array([np.nan, np.inf, -FLT_MAX, np.inf, -FLT_MAX, 1.0, np.inf, 2.0], np.float32)
    assert special_value_errors(same, ref) == []
    lost = same.copy()
    lost[0] = 0.1  # NaN turned into a plausible number
    assert "not NaN where the reference is NaN" in special_value_errors(lost, ref)[0]
    extra = same.copy()
    extra[7] = np.nan
    assert "NaN where the reference is not" in special_value_errors(extra, ref)[0]
    wrong_inf = same.copy()
    wrong_inf[1] = -np.inf
    assert "not the reference's infinity" in special_value_errors(wrong_inf, ref)[0]
    clamped = same.copy()
    clamped[1] = 3.0e38  # +inf turned into a finite number
    assert "not the reference's infinity" in special_value_errors(clamped, ref)[0]
    inf_of_finite = same.copy()
    inf_of_finite[5] = np.inf
    assert "infinite where the reference is finite" in special_value_errors(inf_of_finite, ref)[0]


def test_with_special_values_places_each_kind():
    x = np.zeros((1, 6, 6, 4), np.float32)
    y, placed = with_special_values(x)
    assert set(placed) == {"nan", "+inf", "-inf"}
    assert np.isnan(y).sum() == len(placed["nan"]) and np.isposinf(y).sum() == len(placed["+inf"])
    assert not np.isnan(x).any()
    one, placed = with_special_values(np.zeros((1, 1), np.float32))
    assert np.isnan(one).all() and placed == {"nan": [0]}
    ints, placed = with_special_values(np.zeros(4, np.int8))
    assert placed == {} and not ints.any()


# --- the conformance case ----------------------------------------------------------------------

class Mutating(Delegate):
    """Takes RELU and runs it on the reference kernel, then applies `mutate` to its outputs."""

    backend = "cpu"

    def __init__(self, name, table, mutate):
        super().__init__()
        self.name, self.op_table, self.mutate = name, table, mutate

    def prepare(self, partition):
        def factory(ctx):
            fn = reference_factory(ctx)
            return lambda *args: self.mutate(np.array(fn(*args)))
        return ReferenceKernel(partition, factory)


def mutating_plugin(name, mutate):
    table = OpTable.of([OpSupport("RELU", 1, frozenset({"FLOAT32"}))], name)
    spec = DelegateSpec(name=name, summary=f"{name} test delegate", version="1.0", flags=(), enabled_by=(),
                        op_table=table, model_types=frozenset({"float32"}), backend="cpu",
                        probe=lambda: Support(True), factory=lambda options: Mutating(name, table, mutate))
    mod = types.SimpleNamespace(register_delegates=hookimpl(lambda register: register(spec)), __name__=f"test_{name}")
    return EP(name, mod, dist=f"acelera-{name}")


def nan_inf_case(reg, name):
    from acelera.conformance.suite import Certification

    cert = Certification(reg, name, models_dir=Path("/nonexistent"))
    case = next(c for c in cert.all_cases if c.id == "behaviour/nan-inf")
    return cert.run_case(case)


def test_nan_inf_behaviour_case():
    with np.errstate(invalid="ignore"):
        reg = Registry(entry_points=[
            mutating_plugin("faithful", lambda y: y),
            mutating_plugin("saturating", lambda y: np.clip(y, -FLT_MAX, FLT_MAX)),  # LiteRT's own clamp
            mutating_plugin("nan-dropping", lambda y: np.nan_to_num(y, nan=0.0, posinf=np.inf, neginf=-np.inf)),
            mutating_plugin("inf-finite", lambda y: np.where(np.isinf(y), np.sign(y) * 1e30, y).astype(y.dtype)),
            mutating_plugin("nan-sticky", lambda y: y if np.isnan(y).any() else y + np.float32(np.nan)),
        ], allow=None)
    for good in ("faithful", "saturating"):
        res = nan_inf_case(reg, good)
        assert res.status == "pass", (good, res.errors)
        assert res.details["graph"].endswith("RELU v1 FLOAT32") and res.details["reference_nan"] == [2]
        assert res.details["special_inputs"]["input 0"] == {"nan": [0, 80], "+inf": [26, 107], "-inf": [49, 130]}
    dropped = nan_inf_case(reg, "nan-dropping")
    assert dropped.status == "fail" and "not NaN where the reference is NaN" in dropped.errors[0]
    finite = nan_inf_case(reg, "inf-finite")
    assert finite.status == "fail" and "not the reference's infinity" in finite.errors[0]
    sticky = nan_inf_case(reg, "nan-sticky")  # NaN everywhere once it has seen one: the clean invoke fails
    assert sticky.status == "fail" and any("NaN mismatch" in e for e in sticky.errors)


def test_nan_inf_behaviour_skips_quantized_graphs():
    from acelera.conformance.suite import Certification

    cert = Certification(registry(), "hexagon", models_dir=Path("/nonexistent"))
    require(cert.availability.ok, f"hexagon is not available here: {cert.availability.reason}")
    res = cert.run_case(next(c for c in cert.all_cases if c.id == "behaviour/nan-inf"))
    assert res.status == "skip" and "quantized" in res.errors[0]


# --- single-op models ------------------------------------------------------------------------

def float_op_cases(d) -> list[C.Case]:
    """Up to VARIANTS_PER_OP FLOAT32 op cases per declared op, at its highest declared version."""
    table = getattr(d, "op_table", None) or registry().spec(d.name).op_table
    cases = [c for c in C.op_cases(table) if c.kind == "op" and c.dtype == "FLOAT32" and c.status is None]
    top: dict[str, int] = {}
    for c in cases:
        top[c.op] = max(top.get(c.op, 0), c.version)
    picked: dict[str, list[C.Case]] = {}
    for c in cases:
        if c.version == top[c.op] and len(picked.setdefault(c.op, [])) < VARIANTS_PER_OP:
            picked[c.op].append(c)
    return [c for cs in picked.values() for c in cs]


SINGLE_OP_RUNS = [(name, {}) for name in DELEGATES] + list(OTHER_PRECISION.items())


@pytest.mark.parametrize("name, options", SINGLE_OP_RUNS,
                         ids=[n + ("-other-precision" if o else "") for n, o in SINGLE_OP_RUNS])
def test_single_ops(name, options):
    d = delegate(name, options)
    cases = float_op_cases(d)
    assert cases, f"{name} declares no float op the suite can build"
    failures, ops = [], set()
    for case in cases:
        built = C.build_graph([case.template], "FLOAT32", case.version, np.random.default_rng(7))
        specs = [t for t in case.template.inputs if t is not None and not t.const and not t.variable]
        data = [t.role == "data" for t in specs]
        for pattern in ("nan+inf", "nan"):
            xs = poisoned(built.inputs, PATTERNS[pattern], data)
            ref, _ = run(built.model, xs)
            outs, it = run(built.model, xs, [d])
            if len(it.delegation.nodes_of(name)) != 1:
                failures.append(f"{case.id}: not delegated ({it.delegation.rejections})")
                break
            ops.add(case.op)
            errs = agreement(outs, ref, None, special_value_errors)
            if errs:
                errs = agreement(outs, ref, run_litert(built.model, xs), special_value_errors)
            failures += [f"{case.id} [{pattern}]: {e}" for e in errs]
    assert not failures, f"{name}: {len(failures)} failure(s) over {len(ops)} ops:\n" + "\n".join(failures[:40])


# --- whole models ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def model_inputs(path: str) -> tuple[np.ndarray, ...]:
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    rng = np.random.default_rng(11)
    return tuple(rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]) for d in it.get_input_details())


@functools.lru_cache(maxsize=None)
def model_reference(path: str, pattern: str):
    xs = poisoned(model_inputs(path), PATTERNS[pattern])
    ref, _ = run(path, xs)
    return xs, ref


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ("nan", "inf"))
@pytest.mark.parametrize("name", DELEGATES)
def test_shared_models(name, pattern, models_dir):
    d = delegate(name)
    failures, ran = [], 0
    for stem in FLOAT_MODELS:
        path = models_dir / f"{stem}.tflite"
        require(path.is_file(), f"{path} is missing")
        xs, ref = model_reference(str(path), pattern)
        outs, it = run(str(path), xs, [d])
        if not it.delegation.nodes_of(name):
            continue  # nothing of this model runs on the delegate: nothing to check
        ran += 1
        rule = special_value_errors if pattern == "nan" else implausible
        errs = agreement(outs, ref, None, rule)
        if errs:
            errs = agreement(outs, ref, run_litert(str(path), xs), rule)
        failures += [f"{stem}: {e}" for e in errs]
        if pattern == "nan":
            # NaN at two pixels of the input reaches the outputs of every one of these models
            assert any(np.isnan(r).any() for r in ref), f"{stem}: the reference lost the input's NaN"
    assert ran, f"{name} takes nothing of the shared float models"
    assert not failures, f"{name}, {pattern}: " + "\n".join(failures)
