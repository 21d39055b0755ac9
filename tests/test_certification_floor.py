"""Certification grounded in the model's numerical floor, warm median latency, index inputs."""
from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
from plugin_helpers import EP

from acelera.conformance import report, suite
from acelera.conformance.cases import classify_model
from acelera.conformance.float64 import Float64Reference
from acelera.conformance.floor import measure
from acelera.conformance.inference_diff import diff, format_lines
from acelera.conformance.input_bounds import index_bounds
from acelera.conformance.tolerances import ToleranceError, Tolerances
from acelera.core.builder import ModelBuilder
from acelera.core.delegate import Delegate, DelegateKernel, OpSupport, OpTable, Support
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.model import load_model
from acelera.registrar import hookimpl
from acelera.registrar.registry import Registry
from acelera.registrar.spec import DelegateSpec

ZOO = Path(__file__).parent / "models" / "zoo"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"
BIG = np.float32(1e7)


def cancelling_model() -> bytes:
    """y = (x + 1e7) - 1e7: float32 rounds x to the grid of 1e7 (steps of 1), float64 does not."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 64), np.float32)
    big = b.add_constant("big", np.full((1, 64), BIG, np.float32))
    t = b.add_tensor("t", (1, 64), np.float32)
    y = b.add_tensor("y", (1, 64), np.float32)
    b.add_operator("ADD", [x, big], [t], fused_activation_function="NONE")
    b.add_operator("SUB", [t, big], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    return b.build()


class _Exact(DelegateKernel):
    def __init__(self, partition, offset: float):
        super().__init__(partition)
        self.offset = offset

    def invoke(self, *inputs):
        x = inputs[0].astype(np.float64)
        return ((x + float(BIG)) - float(BIG) + self.offset).astype(np.float32),


class ExactDevice(Delegate):
    """Computes the cancelling model in float64 (a device with wider accumulators), plus `offset`."""

    backend = "cpu"

    def __init__(self, name: str = "exact", offset: float = 0.0, **kw):
        super().__init__(**kw)
        self.name, self.offset = name, offset
        self.op_table = OpTable.of([OpSupport("ADD", 2, frozenset({"FLOAT32"})),
                                    OpSupport("SUB", 2, frozenset({"FLOAT32"}))], name)

    def prepare(self, partition):
        return _Exact(partition, self.offset)


def _plugin(name: str, offset: float):
    spec = DelegateSpec(name=name, summary="test", version="1.0", flags=(), enabled_by=(),
                        op_table=ExactDevice(name).op_table, model_types=frozenset({"float32"}), backend="cpu",
                        probe=lambda: Support(True), factory=lambda options: ExactDevice(name, offset))
    mod = types.SimpleNamespace(register_delegates=hookimpl(lambda register: register(spec)), __name__=name)
    return EP(name, mod, dist=f"acelera-{name}")


def test_float64_answer_is_exact_where_float32_rounds():
    model = cancelling_model()
    ref = Float64Reference(load_model(model))
    assert ref.narrow == {} and ref.widened_nodes == 2
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    (y,) = ref.run([x])
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, x.astype(np.float64))
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    assert np.abs(it.get_tensor(it.get_output_details()[0]["index"]) - x).max() >= 0.25  # float32's own error


def test_floor_measures_the_reference_against_float64():
    model = cancelling_model()
    res = measure(model, load_model(model), ExactDevice(), seed=0, runs=2)
    (o,) = res.outputs
    assert o.error == 0.0  # the device is exact
    assert 0.25 <= o.floor <= 0.5  # the float32 reference is off by up to half a step of 1
    assert o.error_vs_reference == o.floor
    assert res.float64_nodes == res.nodes == 2


@pytest.fixture(scope="module")
def floor_certs(tmp_path_factory):
    models = tmp_path_factory.mktemp("cancel")
    (models / "cancelling.tflite").write_bytes(cancelling_model())
    reg = Registry(entry_points=[_plugin("exact", 0.0), _plugin("offset", 3.0)], allow=None)
    return {name: suite.certify(reg, name, models_dir=models) for name in ("exact", "offset")}


def _model_case(cert):
    return next(c for c in cert.cases if c.kind == "model")


def test_exact_device_passes_on_the_floor_where_a_fixed_bound_would_refuse_it(floor_certs):
    case = _model_case(floor_certs["exact"])
    assert case.status == "pass", case.errors
    (out,) = case.details["outputs"]
    assert out["judged_against"] == "float64" and out["max_abs_error"] == 0.0
    assert out["error_vs_reference"] >= 0.25 > out["precision_bound"]  # off from float32 beyond 1e-4
    assert out["allowed"] == pytest.approx(4 * out["floor"])
    assert case.details["floor"]["float64_nodes"] == 2


def test_an_error_beyond_k_floors_fails_naming_floor_and_bound(floor_certs):
    case = _model_case(floor_certs["offset"])
    assert case.status == "fail"
    assert "vs float64" in case.errors[0] and "x floor" in case.errors[0]


def test_reports_show_floor_and_latency_method(floor_certs):
    md = report.markdown(floor_certs["exact"])
    assert "floor" in md and "median of 10 invokes after 2 warm-up invokes" in md
    lat = _model_case(floor_certs["exact"]).details["latency"]
    assert lat["delegate"]["runs"] == 10 and lat["delegate"]["warmup"] == 2
    assert lat["delegate"]["min_us"] <= lat["delegate"]["median_us"] <= lat["delegate"]["max_us"]


def test_latency_and_floor_k_come_from_toml(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text("[tolerances.float32.model]\nfloor_k = 8\n[latency]\nruns = 5\nwarmup = 0\n")
    t = Tolerances.load(p)
    assert t.model["float32"].floor_k == 8 and (t.latency_runs, t.latency_warmup) == (5, 0)
    assert t.to_dict()["latency"] == {"runs": 5, "warmup": 0}
    for bad in ("[latency]\nruns = 0\n", "[latency]\nruns = 1.5\n", "[latency]\nrepeat = 3\n",
                "[tolerances.float32.model]\nfloor_k = -1\n"):
        p.write_text(bad)
        with pytest.raises(ToleranceError):
            Tolerances.load(p)


# --- index inputs and model types --------------------------------------------------------------
def test_token_inputs_are_drawn_from_the_embedding_range():
    path = ZOO / "text_classifier_float32.tflite"
    bounds = index_bounds(load_model(path))
    assert list(bounds) == [0] and bounds[0][:2] == (0, 100) and "GATHER" in bounds[0][2]
    res = diff(str(path), [], num_runs=2)
    assert any(line.startswith("Input 0") and "[0, 100)" in line for line in format_lines(res))


def test_a_quantized_embedding_table_is_dynamic_range_not_full_integer():
    assert classify_model(load_model(ZOO / "text_classifier_dynamic.tflite")) == "dynamic-range"
    assert classify_model(load_model(ZOO / "text_classifier_int8.tflite")) == "full-integer"


def test_float64_answer_of_a_real_model_agrees_with_float32():
    m = load_model(SHARED / "small_cnn_f32.tflite")
    ref = Float64Reference(m)
    assert all(isinstance(why, str) and why for why in ref.narrow.values())
    x = np.random.default_rng(0).uniform(-1, 1, m.main.tensors[m.main.inputs[0]].shape).astype(np.float32)
    it = Interpreter(model_content=m.content or (SHARED / "small_cnn_f32.tflite").read_bytes(),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    y32 = it.get_tensor(it.get_output_details()[0]["index"])
    (y64,) = ref.run([x])
    assert y64.dtype == np.float64
    np.testing.assert_allclose(y64, y32, rtol=1e-4, atol=1e-5)


def test_stateful_models_are_compared_from_the_initial_state_every_run():
    """LSTM state tensors: the float64 answer and the float32 runs all start from zero state."""
    path = ZOO / "lstm_tfkeras_float32.tflite"
    m = load_model(path)
    from acelera.conformance.floor import _interp, _run

    ref = _interp(str(path))
    exact = Float64Reference(m)
    rng = np.random.default_rng(3)
    shape = tuple(m.main.tensors[m.main.inputs[0]].shape)
    for _ in range(3):
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        (y32,) = _run(ref, [x])
        (y64,) = exact.run([x])
        np.testing.assert_allclose(y64, y32, rtol=1e-4, atol=1e-5)
