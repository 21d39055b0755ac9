"""The conformance suite: case generation, certification verdicts, sharding, reports, pytest plugin."""
from __future__ import annotations

import importlib.util
import json
import types
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from acelera import samples
from acelera.conformance import cases as C
from acelera.conformance import report, suite
from acelera.conformance.tolerances import Tolerance, ToleranceError, Tolerances, compare, resolve_precision
from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.delegate import OpSupport
from acelera.core.model import load_model
from acelera.registrar.registry import Registry

pytest_plugins = ["pytester"]

from plugin_helpers import BASIC, EP, EXAMPLE, F32, ROOT, TestDelegate, load_example, make_plugin  # noqa: F401


@pytest.fixture(scope="module")
def registry():
    return Registry(entry_points=[
        EP("example", load_example(), dist="acelera-example"),
        make_plugin("perturbed", BASIC, perturb="MUL"),
        make_plugin("overclaim", BASIC + [OpSupport("TANH", 1, F32)], cannot="TANH"),
        make_plugin("sloppy", BASIC, accept_all=True),
        make_plugin("jittery", BASIC, jitter=True),
        make_plugin("absent", BASIC, probe="no such device on this host"),
        make_plugin("fp16", [OpSupport("SQUARED_DIFFERENCE", 2, F32 | {"FLOAT16"})]),  # no FLOAT16 kernel (nor in LiteRT)
    ], allow=None)


@pytest.fixture(scope="module")
def no_models(tmp_path_factory):
    return tmp_path_factory.mktemp("no-models")


@pytest.fixture(scope="module")
def example_cert(registry, no_models):
    return suite.certify(registry, "example", models_dir=no_models)


@pytest.fixture(scope="module")
def perturbed_cert(registry, no_models):
    return suite.certify(registry, "perturbed", models_dir=no_models)


# --- certification verdicts ----------------------------------------------------------------
def test_example_delegate_certifies_pass(example_cert):
    cert = example_cert
    assert cert.verdict == "PASS", cert.verdict_reasons
    assert cert.status == "certified"
    assert cert.coverage["ops_passed"] == cert.coverage["ops_declared"] == 4
    assert cert.coverage["combinations_passed"] == cert.coverage["combinations_declared"] == 6
    kinds = {c.kind for c in cert.cases}
    assert kinds == {"op", "negative", "model", "behaviour"}
    assert {c.id for c in cert.cases if c.kind == "behaviour"} == {
        "behaviour/repeat", "behaviour/resize", "behaviour/prepare-failure", "behaviour/multi-delegate",
        "behaviour/nan-inf"}
    assert all(c.status == "pass" for c in cert.cases if c.kind == "behaviour")
    # every declared (op, version) appears, and just outside the declaration is refused
    assert {"neg/ADD/v3/FLOAT32/version", "neg/CONV_2D/v2/FLOAT32/version", "neg/RELU/v1/INT8/dtype"} <= {
        c.id for c in cert.cases}
    # the example's constraint (constant weights) turns the runtime-weights probe into a negative case
    probe = next(c for c in cert.cases if c.id.endswith("constraint:runtime_weights"))
    assert probe.status == "pass" and probe.expected == "refused" and "constant" in probe.details["declared"]
    model = next(c for c in cert.cases if c.id == "model/tiny_cnn_float")
    assert model.status == "pass" and model.details["delegated_nodes"] > 0
    assert cert.plugin["distribution"] == "acelera-example" and cert.plugin["delegate_version"] == "0.1.0"
    assert cert.backend == "cpu" and cert.device and cert.platform["platform"]
    assert cert.declared[0]["op"] == "ADD" and cert.declared[-1]["constraints"] == ["weights must be constant"]
    assert "PASS when no case fails" in cert.verdict_rule


def test_perturbed_op_fails_naming_op_and_case(perturbed_cert):
    cert = perturbed_cert
    assert cert.verdict == "FAIL"
    failed = cert.failures()
    assert failed and all(c.op == "MUL" for c in failed if c.kind == "op")
    assert any(c.id.startswith("op/MUL/v1/FLOAT32/") for c in failed)
    assert "max error" in failed[0].errors[0] and "float32 tolerance" in failed[0].errors[0]
    assert cert.coverage["ops"]["MUL"] == "fail" and cert.coverage["ops"]["ADD"] == "pass"
    assert any(r.startswith("op/MUL/") for r in cert.verdict_reasons)
    assert any("FAIL op/MUL/" in line for line in report.summary_lines(cert))


def test_declared_op_it_cannot_run_fails(registry, no_models):
    cert = suite.certify(registry, "overclaim", models_dir=no_models)
    assert cert.verdict == "FAIL"
    tanh = [c for c in cert.failures() if c.op == "TANH" and c.kind == "op"]
    assert tanh, [c.id for c in cert.failures()]
    assert "not fully delegated" in tanh[0].errors[0] and "TANH is not implemented" in tanh[0].errors[0]
    assert cert.coverage["ops"]["TANH"] == "fail" and cert.coverage["ops"]["ADD"] == "pass"


def test_accepting_undeclared_nodes_fails_negative_cases(registry, no_models):
    cert = suite.certify(registry, "sloppy", models_dir=no_models)
    neg = [c for c in cert.failures() if c.kind == "negative"]
    assert cert.verdict == "FAIL" and neg
    assert "outside its declaration" in neg[0].errors[0]


def test_nondeterministic_delegate_fails_repeat(registry, no_models):
    cert = suite.certify(registry, "jittery", models_dir=no_models)
    repeat = next(c for c in cert.cases if c.id == "behaviour/repeat")
    assert repeat.status == "fail" and "different result" in repeat.errors[0]


def test_unavailable_delegate_is_not_certified(registry, no_models, tmp_path):
    cert = suite.certify(registry, "absent", models_dir=no_models)
    assert cert.status == "unavailable" and cert.verdict == "UNAVAILABLE"
    assert cert.reason == "no such device on this host" and cert.cases == []
    assert cert.declared  # the support matrix is still recorded
    paths = report.write_all(cert, tmp_path / "absent")
    suite_el = ET.parse(paths["junit"]).getroot().find("testsuite")
    assert suite_el.get("skipped") == "1"
    assert suite.run(registry, ["absent"], models_dir=no_models, log=lambda s: None) == 1


def test_not_covered_counts_and_strict_coverage(registry, no_models, tmp_path):
    cert = suite.certify(registry, "fp16", models_dir=no_models)
    assert cert.verdict == "PASS"
    nc = [c for c in cert.cases if c.status == "not-covered"]
    assert nc and all(c.dtype == "FLOAT16" for c in nc)
    assert "CPU reference cannot run it" in nc[0].errors[0]
    assert cert.coverage["combinations_not_covered"] == 2 and cert.coverage["combinations_passed"] == 2
    toml = tmp_path / "tol.toml"
    toml.write_text('[verdict]\nnot_covered = "fail"\n')
    strict = suite.certify(registry, "fp16", models_dir=no_models, tolerances=toml)
    assert strict.verdict == "FAIL" and any("strict coverage" in r for r in strict.verdict_reasons)


# --- sharding and seeds --------------------------------------------------------------------
def test_shards_partition_the_case_list_exactly(registry, no_models, example_cert):
    spec = registry.spec("example")
    full = [c.id for c in C.generate_cases(spec, models_dir=no_models)]
    assert len(full) == len(set(full))
    parts = [[c.id for c in C.select_shard(C.generate_cases(spec, models_dir=no_models), (i, 3))] for i in range(3)]
    assert sorted(sum(parts, [])) == sorted(full)
    assert all(not set(a) & set(b) for i, a in enumerate(parts) for b in parts[i + 1:])
    certs = [suite.certify(registry, "example", models_dir=no_models, shard=f"{i}/3") for i in range(3)]
    for part, cert in zip(parts, certs):
        assert [c.id for c in cert.cases] == part and cert.shard.endswith("/3") and cert.coverage["partial"]
    merged = suite.merge(certs)
    assert sorted(c.id for c in merged.cases) == sorted(c.id for c in example_cert.cases)
    assert merged.verdict == "PASS" and merged.shard == "0/1"
    assert merged.coverage["ops_passed"] == 4 and not merged.coverage["partial"]
    with pytest.raises(ValueError):
        C.parse_shard("3/3")


def test_seed_reproducibility(registry, no_models):
    spec = registry.spec("example")
    case = next(c for c in C.generate_cases(spec, models_dir=no_models) if c.op == "CONV_2D" and c.kind == "op")

    def build(seed):
        b = C.build_graph([case.template], case.dtype, case.version, np.random.default_rng(C.case_seed(seed, case.id)))
        return b.model, b.inputs

    (m1, x1), (m2, x2), (m3, _) = build(7), build(7), build(8)
    assert m1 == m2 and all(np.array_equal(a, b) for a, b in zip(x1, x2)) and m1 != m3
    a = suite.certify(registry, "example", models_dir=no_models, seed=7)
    b = suite.certify(registry, "example", models_dir=no_models, seed=7)

    def digest(cert):
        return [(c.id, c.status, json.dumps(c.details.get("outputs"), sort_keys=True)) for c in cert.cases]
    assert digest(a) == digest(b)


# --- reports -------------------------------------------------------------------------------
def test_reports_are_written_and_parseable(perturbed_cert, tmp_path):
    paths = report.write_all(perturbed_cert, tmp_path / "rep")
    data = json.loads(paths["json"].read_text())
    assert data["delegate"] == "perturbed" and data["verdict"] == "FAIL"
    for key in ("acelera_version", "plugin", "backend", "platform", "device", "declared", "cases", "coverage",
                "verdict_rule", "tolerances", "precision"):
        assert key in data
    assert report.load_json(paths["json"]).to_dict() == data
    root = ET.parse(paths["junit"]).getroot()
    ts = root.find("testsuite")
    cases = ts.findall("testcase")
    assert len(cases) == len(perturbed_cert.cases) == int(ts.get("tests"))
    failures = [tc for tc in cases if tc.find("failure") is not None]
    assert len(failures) == int(ts.get("failures")) == perturbed_cert.counts["fail"] > 0
    assert any(tc.get("name").startswith("op/MUL/") for tc in failures)
    md = paths["markdown"].read_text()
    assert "# Conformance certificate: perturbed" in md and "**Verdict: FAIL**" in md
    assert "| MUL |" in md and "## Failures" in md and "`op/MUL/" in md
    assert "<html>" in paths["html"].read_text()


def test_run_command_writes_reports_and_exit_codes(registry, no_models, tmp_path):
    lines: list[str] = []
    assert suite.run(registry, ["example"], models_dir=no_models, report_dir=tmp_path, log=lines.append) == 0
    assert (tmp_path / "example" / "certificate.json").is_file() and (tmp_path / "example" / "junit.xml").is_file()
    assert any(line.startswith("example: PASS") for line in lines)
    lines.clear()
    assert suite.run(registry, ["example", "perturbed"], models_dir=no_models, log=lines.append) == 1
    assert any("FAIL op/MUL/" in line for line in lines)


# --- tolerances, precision, model classification -------------------------------------------
def test_tolerance_rule_and_toml(tmp_path):
    tol = Tolerance(1e-3, 1e-2, 1)
    ref = np.array([1.0, -2.0, 0.5], np.float32)
    assert compare(ref + np.float32(0.02), ref, tol).ok  # 0.02 <= 1e-3 + 1e-2 * 2
    assert not compare(ref + np.float32(0.03), ref, tol).ok
    nan = np.array([np.nan, 1.0], np.float32)
    assert compare(nan, nan, tol).ok and not compare(np.array([0.0, 1.0], np.float32), nan, tol).ok
    q = np.array([10, -5, 3], np.int8)
    assert compare(q + np.int8(1), q, Tolerance(steps=1), scale=0.1).ok
    assert not compare(q + np.int8(2), q, Tolerance(steps=1), scale=0.1).ok
    assert not compare(q + np.int8(1), q, Tolerance(), scale=0.1).ok  # exact
    assert not compare(np.array([1, 2]), np.array([1, 3]), Tolerance(1.0, 1.0, 5)).ok  # plain ints: exact
    f = tmp_path / "t.toml"
    f.write_text("[tolerances.float16]\nmax_abs = 0.5\n[tolerances.float16.model]\nrel = 0.25\n"
                 "[tolerances.float16.ops.SOFTMAX]\nsteps = 4\n")
    t = Tolerances.load(f)
    assert t.for_case("float16", "op").max_abs == 0.5 and t.for_case("float16", "op").rel == 1e-2
    assert t.for_case("float16", "model").rel == 0.25 and t.for_case("float16", "op", "SOFTMAX").steps == 4
    assert t.for_case("float32", "op") == Tolerances().for_case("float32", "op")
    f.write_text("[tolerances.float64]\nmax_abs = 1\n")
    with pytest.raises(ToleranceError, match="unknown precision 'float64'"):
        Tolerances.load(f)
    f.write_text("[tolerances.float32]\nabs = 1\n")
    with pytest.raises(ToleranceError, match="unknown key"):
        Tolerances.load(f)


def test_float_view_model_tolerance_bounds_the_average(tmp_path):
    from acelera.conformance.suite import _average_ok

    tol = Tolerances().for_case("float-view", "model")
    assert (tol.steps, tol.avg_steps, tol.floor_k) == (1, 1, 4) and Tolerances().for_case("float-view", "op").steps == 1
    entry: dict = {}
    assert _average_ok(entry, 0.5, tol.avg_steps)[0] and entry["avg_steps"] == 0.5
    ok, msg = _average_ok({}, 1.5, tol.avg_steps)
    assert not ok and "average error 1.5 quantization steps (allowed 1)" in msg
    f = tmp_path / "t.toml"
    f.write_text("[tolerances.float-view.model]\navg_steps = 2\n")
    assert Tolerances.load(f).for_case("float-view", "model").avg_steps == 2
    assert "avg_steps=2" in Tolerances.load(f).for_case("float-view", "model").describe()
    f.write_text("[tolerances.float-view.model]\navg_steps = -1\n")
    with pytest.raises(ToleranceError, match="avg_steps must be a non-negative number"):
        Tolerances.load(f)


def test_precision_resolution():
    bare = types.SimpleNamespace(name="bare")
    assert resolve_precision(bare, None, "float") == "float32"
    assert resolve_precision(bare, None, "integer") == "exact"
    assert resolve_precision(types.SimpleNamespace(precision="float16"), None, "integer") == "float16"
    mixed = types.SimpleNamespace(precision={"float": "float16", "integer": "integer"})
    assert resolve_precision(mixed, None, "integer") == "integer"
    assert resolve_precision(mixed, types.SimpleNamespace(precision="float32"), "float") == "float32"


def test_model_classification(models_dir_optional):
    assert C.classify_model(load_model(samples.tiny_cnn())) == "float32"
    assert C.classify_model(load_model(samples.tiny_cnn(quantized=True))) == "full-integer"
    w = np.ones((4, 3), np.float32)
    fp16 = _fp16_weights_model(w)
    assert C.classify_model(load_model(fp16)) == "float16"
    dyn = single_op_model("FULLY_CONNECTED", [In((1, 3)), Const(np.ones((4, 3), np.int8), (0.1, 0)), None],
                          [Out((1, 4))], version=3)
    assert C.classify_model(load_model(dyn)) == "dynamic-range"
    if models_dir_optional is not None:
        assert C.classify_model(load_model(models_dir_optional / "face_detection_short_range.tflite")) == "float16"
        assert C.classify_model(load_model(models_dir_optional / "mobilenet_v2_96_int8.tflite")) == "full-integer"
        assert C.classify_model(load_model(models_dir_optional / "hand_recrop.tflite")) == "float32"


@pytest.fixture
def models_dir_optional():
    d = C.default_models_dir()
    return d if d is not None and (d / "mobilenet_v2_96_int8.tflite").is_file() else None


def _fp16_weights_model(w):
    from acelera.core.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", (1, 3), np.float32)
    c = b.add_constant("w16", w.astype(np.float16))
    wf = b.add_tensor("w", w.shape, np.float32)
    b.add_operator("DEQUANTIZE", [c], [wf])
    y = b.add_tensor("y", (1, 4), np.float32)
    b.add_operator("FULLY_CONNECTED", [x, wf, -1], [y])
    b.mark_outputs(y)
    return b.build()


# --- generators ----------------------------------------------------------------------------
def _first_party_specs():
    out = []
    for mod in ("xnnpack_cpu", "gpu_opencl", "gpu_gl", "nnapi", "hexagon", "coreml"):
        out.append(importlib.import_module(f"acelera.plugins.{mod}").SPEC)
    return out


def test_every_declared_op_has_a_generator():
    ops = {r.op for s in _first_party_specs() for r in s.op_table} | {r.op for r in load_example().OP_TABLE}
    missing = sorted(op for op in ops if C.templates_for(op) is None)
    assert missing == []


def test_generated_cases_pass_on_a_reference_delegate(no_models):
    """Every first-party declaration run by a delegate that *is* the CPU reference: nothing may fail,
    and anything not covered must be the CPU reference's own gap."""
    rows: dict[str, OpSupport] = {}
    for s in _first_party_specs():
        for r in s.op_table:
            old = rows.get(r.op)
            rows[r.op] = OpSupport(r.op, max(r.max_version, old.max_version if old else 0),
                                   r.dtypes | (old.dtypes if old else frozenset()))
    reg = Registry(entry_points=[make_plugin("everything", list(rows.values()), precision="exact",
                                            model_types=("float32", "full-integer"))], allow=None)
    cert = suite.certify(reg, "everything", models_dir=no_models, variants_per_case=1)
    assert cert.verdict == "PASS", cert.verdict_reasons
    allowed = ("CPU reference cannot run", "cannot calibrate", "no output quantization defined",
               "no Convolution2DTransposeBias variant")
    odd = {c.errors[0] for c in cert.cases if c.status == "not-covered" and not any(a in c.errors[0] for a in allowed)}
    assert odd == set()
    assert cert.coverage["ops_passed"] >= 55


def test_quantized_conv_cases_use_per_channel_weights():
    tpl = C.templates_for("CONV_2D")[0]
    b = C.build_graph([tpl], "INT8", 3, np.random.default_rng(0))
    m = load_model(b.model)
    w = m.main.tensors[m.main.operators[0].inputs[1]]
    assert w.type_name == "INT8" and w.quantization.scale.size == 4 and w.quantization.quantized_dimension == 0
    bias = m.main.tensors[m.main.operators[0].inputs[2]]
    assert bias.type_name == "INT32"
    b16 = C.build_graph([tpl], "INT16", 4, np.random.default_rng(0))
    m16 = load_model(b16.model)
    assert m16.main.tensors[m16.main.operators[0].inputs[2]].type_name == "INT64"


# --- pytest plugin -------------------------------------------------------------------------
def _plugin_args():
    eps = metadata.entry_points(group="pytest11")
    loaded = any(ep.value.startswith("acelera.conformance.pytest_plugin") for ep in eps)
    return [] if loaded else ["-p", "acelera.conformance.pytest_plugin"]


CONFTEST = f"""
import importlib.util, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from plugin_helpers import EP, make_plugin, load_example, BASIC
from acelera.registrar.registry import Registry

def pytest_acelera_registry(config):
    return Registry(entry_points=[EP("example", load_example(), dist="acelera-example"),
                                  make_plugin("perturbed", BASIC, perturb="MUL")], allow=None)
"""


def test_pytest_plugin_generates_one_test_per_case(pytester, no_models, example_cert):
    pytester.makeconftest(CONFTEST)
    out = pytester.runpytest_inprocess(*_plugin_args(), "--acelera-delegate", "example", "--acelera-models",
                                       str(no_models), "--acelera-report", str(pytester.path / "rep"))
    n = len(example_cert.cases)
    skipped = sum(1 for c in example_cert.cases if c.status in ("skip", "not-covered"))
    out.assert_outcomes(passed=n - skipped, skipped=skipped)
    out.stdout.fnmatch_lines(["*acelera conformance*", "example: PASS*"])
    assert json.loads((pytester.path / "rep" / "example" / "certificate.json").read_text())["verdict"] == "PASS"
    bad = pytester.runpytest_inprocess(*_plugin_args(), "--acelera-delegate", "perturbed", "--acelera-models",
                                       str(no_models), "-k", "MUL")
    assert bad.ret == 1
    bad.stdout.fnmatch_lines(["*FAILED *acelera-conformance::test_conformance[[]perturbed:op/MUL/v1/FLOAT32/*"])


@pytest.mark.parametrize("dist", ["load", "loadgroup"])
def test_pytest_plugin_under_xdist_writes_one_merged_certificate(pytester, no_models, example_cert, dist):
    """Two xdist workers share the cases; the controller writes one certificate with all of them."""
    pytester.makeconftest(CONFTEST)
    rep = pytester.path / "rep"
    out = pytester.runpytest_subprocess(*_plugin_args(), "-n", "2", "--dist", dist, "--acelera-delegate", "example",
                                        "--acelera-models", str(no_models), "--acelera-report", str(rep))
    assert out.ret == 0, out.stdout.str()[-2000:]
    out.stdout.fnmatch_lines(["*acelera conformance*", "example: PASS*"])
    cert = json.loads((rep / "example" / "certificate.json").read_text())
    assert cert["verdict"] == "PASS"
    assert [c["id"] for c in cert["cases"]] == [c.id for c in example_cert.cases]
    assert cert["counts"]["pass"] == example_cert.counts["pass"]
    workers = {c["details"]["worker"].split("/")[-1] for c in cert["cases"]}
    assert len(workers) == (2 if dist == "load" else 1)  # loadgroup keeps a delegate on one worker
