"""The litert plugin: native TFLite delegates (.so) hosted through LiteRT, and LiteRT's XNNPACK.

The native delegate is the project's own example (acelera/plugins/litert/native/: float32 ADD
and MUL written in C against TFLite's C ABI), compiled here with the system compiler; LiteRT
loading and running it is what proves the ABI layout.
"""
import json
import sys

import numpy as np
import pytest
from cli_flags import parse_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import acelera
from acelera import Interpreter, load_delegate
from acelera.cli.app import build_app
from acelera.core.builder import In, ModelBuilder, Out, single_op_model
from acelera.core.errors import AceleraError
from acelera.core.interpreter import OpResolverType
from acelera.plugins.litert import bridge, build_example_delegate, wrap_litert_delegate
from acelera.plugins.litert.host import parse_options
from acelera.registrar import registry as registry_module
from acelera.registrar.registry import DelegateLoadError, Registry, get_registry
from acelera.samples import tiny_cnn

F32 = np.float32
LEFT = "left the node to LiteRT's CPU kernels"


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> str:
    return str(build_example_delegate(tmp_path_factory.mktemp("native")))


def mixed_model() -> bytes:
    """ADD(relu) -> TANH -> MUL(const, no activation) -> MUL(relu6), with broadcasting: the example
    delegate takes nodes 0 and 2 and leaves TANH (not its op) and the RELU6 MUL (not its activation)."""
    b = ModelBuilder()
    x = b.add_input("x", (2, 1, 4), F32)
    y = b.add_input("y", (3, 1), F32)
    c = b.add_constant("c", np.array([1.5, -2, 0.5, 3], F32))
    t1, t2, t3, t4 = (b.add_tensor(f"t{k}", (2, 3, 4), F32) for k in range(1, 5))
    b.add_operator("ADD", [x, y], [t1], fused_activation_function="RELU")
    b.add_operator("TANH", [t1], [t2])
    b.add_operator("MUL", [t2, c], [t3], fused_activation_function="NONE")
    b.add_operator("MUL", [t3, t1], [t4], fused_activation_function="RELU6")
    b.mark_outputs(t4, t2)
    return b.build()


def chain_model(batch: int = 1, dynamic: bool = False) -> bytes:
    """ADD -> MUL -> ADD on (batch, 3, 4): all three taken, one partition."""
    b = ModelBuilder()
    sig = (-1, 3, 4) if dynamic else None
    x = b.add_input("x", (batch, 3, 4), F32, shape_signature=sig)
    y = b.add_input("y", (batch, 3, 4), F32, shape_signature=sig)
    c = b.add_constant("c", np.linspace(-1, 1, 4).astype(F32))
    t1, t2, t3 = (b.add_tensor(f"t{k}", (batch, 3, 4), F32, shape_signature=sig) for k in range(1, 4))
    b.add_operator("ADD", [x, y], [t1])
    b.add_operator("MUL", [t1, c], [t2])
    b.add_operator("ADD", [t2, x], [t3], fused_activation_function="RELU")
    b.mark_outputs(t3)
    return b.build()


def run(model: bytes, inputs, delegates=()):
    it = Interpreter(model_content=model, experimental_delegates=list(delegates),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    details = it.get_input_details()
    for d, v in zip(details, inputs):
        if tuple(d["shape"]) != v.shape:
            it.resize_tensor_input(d["index"], list(v.shape))
    it.allocate_tensors()
    for d, v in zip(details, inputs):
        it.set_tensor(d["index"], v)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()], it


def inputs_of(model: bytes, seed: int = 0):
    rng = np.random.default_rng(seed)
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    return [rng.uniform(-2, 2, tuple(d["shape"])).astype(F32) for d in it.get_input_details()]


# --- the C delegate in LiteRT itself -----------------------------------------------------------------
def test_litert_loads_and_runs_the_c_delegate(lib):
    from ai_edge_litert import interpreter as L

    model = mixed_model()
    it = L.Interpreter(model_content=model, experimental_delegates=[L.load_delegate(lib)],
                       experimental_op_resolver_type=L.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    assert [it._get_op_details(i)["op_name"] for i in range(it._interpreter.NumNodes())][-1] == "DELEGATE"
    assert bridge.delegated_nodes(it._interpreter, 4, [6, 3]) == {0, 2}
    it.allocate_tensors()
    x, y = inputs_of(model)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.set_tensor(it.get_input_details()[1]["index"], y)
    it.invoke()
    t1 = np.maximum(x + y, 0)
    want = np.clip(np.tanh(t1) * np.array([1.5, -2, 0.5, 3], F32) * t1, 0, 6)
    np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]), want, rtol=1e-6, atol=1e-6)


def test_delegated_nodes_reads_back_partial_partitions(lib):
    """ADD -> TANH -> MUL -> MUL: LiteRT makes two delegate kernels ({ADD}, {MUL, MUL}); the MUL
    inside the second one (its output never leaves the kernel) counts as replaced too."""
    from ai_edge_litert import interpreter as L

    b = ModelBuilder()
    x, y = b.add_input("x", (1, 4), F32), b.add_input("y", (1, 4), F32)
    t = [b.add_tensor(f"t{k}", (1, 4), F32) for k in range(4)]
    b.add_operator("ADD", [x, y], [t[0]])
    b.add_operator("TANH", [t[0]], [t[1]])
    b.add_operator("MUL", [t[1], y], [t[2]])
    b.add_operator("MUL", [t[2], t[0]], [t[3]])
    b.mark_outputs(t[3])
    it = L.Interpreter(model_content=b.build(), experimental_delegates=[L.load_delegate(lib)],
                       experimental_op_resolver_type=L.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    assert it._interpreter.NumNodes() == 6
    assert bridge.delegated_nodes(it._interpreter, 4, [t[3]]) == {0, 2, 3}


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["ADD", "MUL"]), st.sampled_from(["NONE", "RELU"]),
       st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=4),
       st.lists(st.booleans(), min_size=4, max_size=4), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_broadcasting_matches_numpy(lib, op, act, shape, ones, drop, seed):
    """Random broadcastable shapes through the C delegate (hosted by acelera) equal numpy."""
    a_shape = tuple(shape)
    b_shape = tuple(1 if o else d for d, o in zip(shape, ones))[min(drop, len(shape) - 1):]
    out_shape = np.broadcast_shapes(a_shape, b_shape)
    model = single_op_model(op, [In(a_shape), In(b_shape)], [Out(out_shape)], fused_activation_function=act)
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-3, 3, a_shape).astype(F32), rng.uniform(-3, 3, b_shape).astype(F32)
    (got,), it = run(model, [a, b], [load_delegate(lib)])
    assert it.delegation.nodes_of("litert-external") == [0]
    want = a + b if op == "ADD" else a * b
    np.testing.assert_array_equal(got, np.maximum(want, 0) if act == "RELU" else want)


# --- hosting through acelera -------------------------------------------------------------------------
def test_load_delegate_path_takes_add_mul_and_reports_the_rest(lib):
    model = mixed_model()
    d = load_delegate(lib)
    assert d.name == "litert-external" and lib in d.describe()
    x = inputs_of(model)
    (got, got2), it = run(model, x, [d])
    rep = it.delegation
    assert rep.nodes_of("litert-external") == [0, 2]
    assert [tuple(p.nodes) for p in rep.partitions_of("litert-external")] == [(0,), (2,)]
    reasons = {n: r for n, rs in rep.rejections.items() for _, r in rs}
    assert set(reasons) == {1, 3}
    assert reasons[1] == f"TANH v1: the native delegate libacelera_addmul_delegate.so {LEFT}"
    assert reasons[3] == f"MUL v1: the native delegate libacelera_addmul_delegate.so {LEFT}"
    want, want2 = run(model, x)[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got2, want2)


def test_library_options_reach_the_library(lib):
    model = mixed_model()
    _, it = run(model, inputs_of(model), [load_delegate(lib, {"ops": "mul"})])
    assert it.delegation.nodes_of("litert-external") == [2]
    assert parse_options("ops:add; other : a:b ;") == {"ops": "add", "other": "a:b"}
    with pytest.raises(ValueError, match="expected key:value"):
        parse_options("ops")


def test_one_partition_of_several_nodes_and_resize(lib):
    model = chain_model(dynamic=True)
    d = load_delegate(lib)
    x = inputs_of(model)
    got, it = run(model, x, [d])
    assert [tuple(p.nodes) for p in it.delegation.partitions_of(d.name)] == [(0, 1, 2)]
    np.testing.assert_array_equal(got[0], run(model, x)[0][0])
    big = [np.concatenate([v, -v, 2 * v]) for v in x]
    got, it = run(model, big, [d])
    assert it.delegation.nodes_of(d.name) == [0, 1, 2] and got[0].shape == (3, 3, 4)
    np.testing.assert_array_equal(got[0], run(model, big)[0][0])


def test_a_partition_litert_only_partly_delegates_falls_back(lib):
    """If the native delegate takes fewer nodes of a partition in LiteRT than acelera planned,
    the partition is not counted as delegated: it runs on acelera's CPU, with a warning."""
    from acelera.core.delegate import Support
    from acelera.core.partition import DelegationWarning

    d = load_delegate(lib, {"ops": "add"})
    d.is_node_supported = lambda node: Support(True)  # plan all three nodes into one partition
    model = chain_model()
    x = inputs_of(model)
    with pytest.warns(DelegationWarning, match=r"took 2 of the partition's 3 nodes in LiteRT and left nodes \[1\]"):
        got, it = run(model, x, [d])
    assert it.delegation.nodes_of(d.name) == [] and it.delegation.failures
    np.testing.assert_array_equal(got[0], run(model, x)[0][0])


def test_wrap_litert_delegate_object(lib):
    from ai_edge_litert import interpreter as L

    obj = L.load_delegate(lib)
    d = wrap_litert_delegate(obj)
    model = mixed_model()
    x = inputs_of(model)
    got, it = run(model, x, [d])
    assert it.delegation.nodes_of(d.name) == [0, 2]
    got2, it2 = run(model, x, [obj])  # Interpreter(experimental_delegates=[LiteRT Delegate])
    assert it2.delegation.nodes_of("litert-external") == [0, 2]
    np.testing.assert_array_equal(got[0], got2[0])
    with pytest.raises(TypeError):
        wrap_litert_delegate(object())


def test_litert_xnnpack_runs_the_real_xnnpack():
    model = tiny_cnn()
    d = load_delegate("litert-xnnpack")
    x = [np.random.default_rng(1).uniform(-1, 1, (1, 32, 32, 3)).astype(F32)]
    (got,), it = run(model, x, [d])
    n = len(it.model.main.operators)
    assert it.delegation.nodes_of("litert-xnnpack") == list(range(n))
    want = run(model, x)[0][0]
    assert np.max(np.abs(got - want)) <= 1e-4 * max(1.0, float(np.max(np.abs(want))))
    assert d.backend == "cpu" and "XNNPACK" in d.describe()


def test_pathless_external_delegate_takes_nothing_and_says_why():
    d = get_registry().create("litert-external")
    _, it = run(tiny_cnn(), [np.zeros((1, 32, 32, 3), F32)], [d])
    assert it.delegation.nodes_of(d.name) == []
    assert all("--external_delegate_path" in r for rs in it.delegation.rejections.values() for _, r in rs)


# --- errors ------------------------------------------------------------------------------------------
def test_missing_or_invalid_library_is_a_value_error_naming_the_path(lib, tmp_path):
    from acelera.plugins.litert.build import find_compiler

    no_symbols = tmp_path / "libnothing.so"
    src = tmp_path / "nothing.c"
    src.write_text("int acelera_nothing = 1;\n")
    import subprocess
    subprocess.run([find_compiler(), "-shared", "-fPIC", "-o", str(no_symbols), str(src)], check=True)
    not_elf = tmp_path / "libjunk.so"
    not_elf.write_bytes(b"not a library")
    cases = [(str(tmp_path / "libmissing.so"), None, "no such file"),
             (str(not_elf), None, "libjunk.so"),
             (str(no_symbols), None, "does not export tflite_plugin_create_delegate"),
             (lib, {"bogus": "1"}, "unknown option 'bogus'"),
             (lib, {"ops": "div"}, "ops='div'")]
    for path, options, detail in cases:
        with pytest.raises(ValueError) as e:
            acelera.load_delegate(path, options)
        assert isinstance(e.value, DelegateLoadError) and isinstance(e.value, AceleraError)
        assert f"Failed to load delegate from {path}" in str(e.value) and detail in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="neither an installed delegate"):
        acelera.load_delegate("no-such-delegate")
    try:  # the common LiteRT fallback pattern works
        acelera.load_delegate(str(tmp_path / "libmissing.so"))
    except (ValueError, OSError):
        pass


def test_unavailable_without_ai_edge_litert(lib, monkeypatch):
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    reg = Registry()
    monkeypatch.setattr(registry_module, "_default", reg)
    for name in ("litert-external", "litert-xnnpack"):
        avail = reg.availability(name)
        assert not avail.ok and "ai-edge-litert is not importable" in avail.reason and "acelera[litert]" in avail.reason
    with pytest.raises(DelegateLoadError, match=r"Failed to load delegate from .*litert-external is unavailable: "
                                                r"ai-edge-litert is not importable"):
        acelera.load_delegate(lib)
    assert "xnnpack-cpu" in reg.specs and not reg.broken  # the plugin itself still imports


# --- registrar and CLI -------------------------------------------------------------------------------
def test_flags_enable_the_delegates(lib):
    reg = get_registry()
    parsed = parse_cli(reg.flagset, [f"--external_delegate_path={lib}", "--external_delegate_options=ops:add",
                                     "--use_litert_xnnpack"])
    ds = reg.build(parsed)
    assert [d.name for d in ds] == ["litert-external", "litert-xnnpack"]
    assert ds[0].source.options == {"ops": "add"}
    with pytest.warns(UserWarning, match="--external_delegate_options set but litert-external is not enabled: "
                                         "--external_delegate_path is needed"):
        assert reg.build(parse_cli(reg.flagset, ["--external_delegate_options=ops:add"])) == []


@pytest.fixture(scope="module")
def cli():
    runner = CliRunner()
    app = build_app(get_registry())
    return lambda *args: runner.invoke(app, list(args), terminal_width=200)


@pytest.fixture(scope="module")
def mobile_model(tmp_path_factory):
    p = tmp_path_factory.mktemp("m") / "mixed.tflite"
    p.write_bytes(mixed_model())
    return p


def test_cli_analyze_reports_what_litert_delegated(cli, lib, mobile_model):
    res = cli("analyze", str(mobile_model), f"--external_delegate_path={lib}", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output[res.output.index("{"):])
    nodes = data["scenarios"][0]["nodes"]
    assert [n["delegate"] for n in nodes] == ["litert-external", None, "litert-external", None]
    assert LEFT in nodes[3]["rejections"][0]["reason"]


def test_cli_benchmark_and_inference_diff_flags(cli, lib, mobile_model):
    res = cli("benchmark", f"--graph={mobile_model}", f"--external_delegate_path={lib}",
              "--external_delegate_options=ops:add;", "--num_runs=2", "--warmup_runs=1", "--min_secs=0.001",
              "--warmup_min_secs=0.001")
    assert res.exit_code == 0, res.output
    assert "litert-external delegate created" in res.output and "w/ 1 delegate kernels" in res.output
    res = cli("inference-diff", f"--model_file={mobile_model}", "--use_litert_xnnpack", "--num_runs=2")
    assert res.exit_code == 0, res.output
    assert "Delegate litert-xnnpack (cpu): 4 of 4 nodes" in res.output
    res = cli("inference-diff", f"--model_file={mobile_model}", f"--external_delegate_path={lib}", "--num_runs=2")
    assert res.exit_code == 0 and "Delegate litert-external (hardware): 2 of 4 nodes" in res.output, res.output
    res = cli("benchmark", f"--graph={mobile_model}", "--external_delegate_path=/no/such/libx.so")
    assert res.exit_code != 0
    assert isinstance(res.exception, ValueError) and "/no/such/libx.so" in str(res.exception)


def test_cli_conformance_certifies_the_native_delegate(cli, lib, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    res = cli("conformance", f"--external_delegate_path={lib}", "--models", str(models), "--report", str(tmp_path))
    assert res.exit_code == 0, res.output
    cert = json.loads((tmp_path / "litert-external" / "certificate.json").read_text())
    assert cert["verdict"] == "PASS" and lib in cert["device"]
    assert [r["op"] for r in cert["declared"]] == ["ADD", "MUL"]
    assert all(r["dtypes"] == ["FLOAT32"] and r["max_version"] == 2 for r in cert["declared"])
    by = {}
    for c in cert["cases"]:
        by.setdefault(c["kind"], []).append(c)
    assert {c["status"] for cs in by.values() for c in cs} == {"pass"}
    assert len(by["op"]) >= 8 and any(c["variant"] == "version:same_shape" for c in by["negative"])
    assert any(c["variant"].startswith("dtype:") for c in by["negative"])
    assert {c["variant"] for c in by["behaviour"]} == {"repeat", "resize", "prepare-failure", "multi-delegate",
                                                       "nan-inf"}
    assert {c["id"] for c in by["model"]} == {"model/tiny_cnn_float", "model/tiny_cnn_int8"}
    res = cli("conformance", "--delegate", "litert-external", "--models", str(models))
    assert res.exit_code == 1 and "UNAVAILABLE" in res.output and "--external_delegate_path" in res.output
