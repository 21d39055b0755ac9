"""Float-view certification: the exact float-view answer of a quantized model, the integer
reference's floor against it, and float-view delegates judged on that floor (float_view.py)."""
from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
from needs import require
from plugin_helpers import EP

from acelera.conformance import cases as C
from acelera.conformance import float_view, report, suite
from acelera.conformance.float_view import FloatViewReference, Grid
from acelera.conformance.tolerances import FLOOR_K, Tolerances
from acelera.core.builder import ModelBuilder
from acelera.core.delegate import Delegate, DelegateKernel, OpSupport, OpTable, Support
from acelera.core.model import load_model
from acelera.core.subplan import ReferenceKernel
from acelera.registrar import hookimpl
from acelera.registrar.registry import Registry
from acelera.registrar.spec import DelegateSpec

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"
ALL_INT8 = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)


def _snap(v: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """Round half away from zero onto the int8 grid, clamped, back to real values (float64)."""
    r = v / scale
    q = np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5) + zp, -128, 127)
    return (q - zp) * scale


# --- the float-view answer ---------------------------------------------------------------------
XS, CS, TS, YS = 0.5, 0.25, 0.5, 1 / 256
C_Q = np.array([(-1) ** k * (2 * (k % 64) + 1) for k in range(256)], np.int8).reshape(1, 256)  # odd: ties


def add_logistic_model() -> bytes:
    """t = ADD(x, c), y = LOGISTIC(t): x on a grid of 1/2, c of 1/4 with odd integers, t of 1/2,
    so x + c sits at a tie of t's grid everywhere, and large sums clamp at t's range."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 256), np.int8, quant=(XS, 0))
    c = b.add_constant("c", C_Q, quant=(CS, 0))
    t = b.add_tensor("t", (1, 256), np.int8, quant=(TS, 0))
    y = b.add_tensor("y", (1, 256), np.int8, quant=(YS, -128))
    b.add_operator("ADD", [x, c], [t], fused_activation_function="NONE")
    b.add_operator("LOGISTIC", [t], [y])
    b.mark_outputs(y)
    return b.build()


def test_float_view_answer_of_a_two_op_model_is_computed_by_hand():
    ref = FloatViewReference(load_model(add_logistic_model()))
    assert ref.narrow == {} and ref.widened_nodes == 2
    (y,) = ref.run([ALL_INT8])
    x, c = ALL_INT8.astype(np.float64) * XS, C_Q.astype(np.float64) * CS
    t = _snap(x + c, TS, 0)
    assert np.all(np.abs((x + c) / TS % 1) == 0.5)  # every sum a tie: rounded away from zero
    assert t.max() == 127 * TS and t.min() == -128 * TS  # and clamped
    hand = _snap(1 / (1 + np.exp(-t)), YS, -128)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, hand)
    assert ref.quanta == [YS] and ref.output_grids[0].step == YS


def test_quantize_and_dequantize_are_grid_roundings():
    b = ModelBuilder()
    x = b.add_input("x", (1, 64), np.float32)
    q1 = b.add_tensor("q1", (1, 64), np.int8, quant=(0.1, 3))
    q2 = b.add_tensor("q2", (1, 64), np.uint8, quant=(0.3, 128))
    y = b.add_tensor("y", (1, 64), np.float32)
    b.add_operator("QUANTIZE", [x], [q1])
    b.add_operator("QUANTIZE", [q1], [q2])  # requantization onto another grid
    b.add_operator("DEQUANTIZE", [q2], [y])
    b.mark_outputs(y)
    ref = FloatViewReference(load_model(b.build()))
    xv = np.linspace(-20, 20, 64).astype(np.float32).reshape(1, 64)
    (got,) = ref.run([xv])
    s1, s2 = float(np.float32(0.1)), float(np.float32(0.3))  # scales are stored as float32
    r = _snap(xv.astype(np.float64), s1, 3) / s2
    want = (np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5) + 128, 0, 255) - 128) * s2
    np.testing.assert_array_equal(got, want)
    assert ref.quanta == [pytest.approx(0.3)]  # a float output is read in steps of its DEQUANTIZE input


def test_per_channel_constants_are_dequantized_per_channel():
    g = Grid(np.array([0.5, 0.25]), np.array([1.0, 0.0]), -128, 127, axis=1)
    np.testing.assert_array_equal(g.real(np.array([[3, 3]], np.int8)), [[1.0, 0.75]])
    np.testing.assert_array_equal(g.snap(np.array([[0.74, 0.74], [1000.0, -1000.0]])), [[0.5, 0.75], [63.0, -32.0]])


def test_half_storage_float_view_rounds_what_a_half_device_stores():
    """Half storage (the GPU with precision loss allowed): inputs, constants and every tensor an
    op produces pass through half after their grid rounding; graph outputs do not."""
    xs, cs, ts, ys = (float(np.float32(v)) for v in (0.0137, 0.0291, 0.0413, 0.0031))
    b = ModelBuilder()
    x = b.add_input("x", (1, 256), np.int8, quant=(xs, 2))
    c = b.add_constant("c", C_Q, quant=(cs, -3))
    t = b.add_tensor("t", (1, 256), np.int8, quant=(ts, 1))
    y = b.add_tensor("y", (1, 256), np.int8, quant=(ys, 0))
    b.add_operator("ADD", [x, c], [t], fused_activation_function="NONE")
    b.add_operator("QUANTIZE", [t], [y])
    b.mark_outputs(y)
    m = load_model(b.build())
    h = lambda v: v.astype(np.float16).astype(np.float64)  # noqa: E731
    xr, cr = (ALL_INT8.astype(np.float64) - 2) * xs, (C_Q.astype(np.float64) + 3) * cs
    (exact,) = FloatViewReference(m).run([ALL_INT8])
    (half,) = FloatViewReference(m, half=True).run([ALL_INT8])
    np.testing.assert_array_equal(exact, _snap(_snap(xr + cr, ts, 1), ys, 0))
    np.testing.assert_array_equal(half, _snap(h(_snap(h(xr) + h(cr), ts, 1)), ys, 0))
    assert 0 < np.count_nonzero(half != exact) < 256  # half storage moves a few values a step


def test_floor_is_zero_where_the_integer_arithmetic_is_exact():
    """MAX_POOL moves grid values, and ADD on power-of-two grids is exact: the integer
    reference is the float-view answer, so the floor is 0 and the precision's 1 step governs."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 8, 8, 4), np.int8, quant=(0.5, 2))
    p = b.add_tensor("p", (1, 4, 4, 4), np.int8, quant=(0.5, 2))
    c = b.add_constant("c", np.arange(-8, 8, dtype=np.int8).reshape(1, 4, 4, 1), quant=(0.25, 0))
    y = b.add_tensor("y", (1, 4, 4, 4), np.int8, quant=(0.25, 0))
    b.add_operator("MAX_POOL_2D", [x], [p], padding="VALID", stride_w=2, stride_h=2, filter_width=2,
                   filter_height=2, fused_activation_function="NONE")
    b.add_operator("ADD", [p, c], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    model = b.build()
    res = float_view.measure(model, load_model(model), Integer(model), seed=0, runs=3)
    (o,) = res.outputs
    assert o.floor == 0.0 and o.avg_floor == 0.0 and o.error == 0.0 and o.quantum == 0.25
    assert res.answer == "float view" and res.floor_of == "integer reference" and res.float64_nodes == 2


# --- judging float-view delegates on the floor ---------------------------------------------------
MS = 0.0021


def mean_model() -> bytes:
    """MEAN over 16 int8 values per channel, onto a finer grid: LiteRT's fixed-point rescale
    rounds a few of the 256 outputs one step apart from the exact mean (a floor of 1 step)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 256), np.int8, quant=(0.0137, 2))
    ax = b.add_constant("ax", np.array([1, 2], np.int32))
    y = b.add_tensor("y", (1, 256), np.int8, quant=(MS, 1))
    b.add_operator("MEAN", [x, ax], [y], keep_dims=False)
    b.mark_outputs(y)
    return b.build()


class _FloatView(DelegateKernel):
    """The exact float-view answer, moved `shift` steps toward the middle of the range at the
    first element (`where="one"`) or at every element (`where="all"`)."""

    def __init__(self, partition, model: bytes, shift: int, where: str):
        super().__init__(partition)
        m = load_model(model)
        self.fv, self.inp = FloatViewReference(m), partition.inputs.index(m.main.inputs[0])
        self.shift, self.where = shift, where
        q = m.main.tensors[m.main.outputs[0]].quantization
        self.scale, self.zp = float(q.scale[0]), int(q.zero_point[0])

    def invoke(self, *inputs):
        (e,) = self.fv.run([inputs[self.inp]])
        q = np.rint(e / self.scale).astype(np.int64) + self.zp
        move = np.where(q < 0, self.shift, -self.shift)
        if self.where == "one":
            move.reshape(-1)[1:] = 0
        return (np.clip(q + move, -128, 127).astype(np.int8),)


class Integer(Delegate):
    """LiteRT's integer arithmetic (the reference kernels) claiming the float view."""

    backend, name = "cpu", "integer"

    def __init__(self, model: bytes = b"", **kw):
        super().__init__(**kw)
        self.op_table = OpTable.of([OpSupport(op, 3, frozenset({"INT8"})) for op in ("MEAN", "ADD", "MAX_POOL_2D")],
                                   self.name)

    def prepare(self, partition):
        return ReferenceKernel(partition)


class FloatViewDevice(Integer):
    def __init__(self, name: str, model: bytes, shift: int = 0, where: str = "one", **kw):
        self.name = name
        super().__init__(model, **kw)
        self.model, self.shift, self.where = model, shift, where

    def prepare(self, partition):
        return _FloatView(partition, self.model, self.shift, self.where)


def _plugin(name: str, make):
    spec = DelegateSpec(name=name, summary="test", version="1.0", flags=(), enabled_by=(),
                        op_table=Integer().op_table, model_types=frozenset({"full-integer"}), backend="cpu",
                        probe=lambda: Support(True), factory=lambda options: make(),
                        precision={"float": "float32", "integer": "float-view"})
    mod = types.SimpleNamespace(register_delegates=hookimpl(lambda register: register(spec)), __name__=name)
    return EP(name, mod, dist=f"acelera-{name}")


def _model_case(reg, name: str, models: Path, tolerances=None):
    run = suite.Certification(reg, name, models_dir=models, tolerances=tolerances)
    names = {p.stem for p in models.glob("*.tflite")}  # not the built-in sample model
    (case,) = [c for c in C.model_cases(run.spec.model_types, models) if c.variant in names]
    return run.run_case(case)


@pytest.fixture(scope="module")
def mean_cases(tmp_path_factory):
    models = tmp_path_factory.mktemp("fv")
    model = mean_model()
    (models / "mean_int8.tflite").write_bytes(model)
    devices = {
        "integer": lambda: Integer(model),
        "exact": lambda: FloatViewDevice("exact", model),
        "within": lambda: FloatViewDevice("within", model, shift=int(FLOOR_K)),  # 4 steps at one element
        "beyond": lambda: FloatViewDevice("beyond", model, shift=int(FLOOR_K) + 1),
        "biased": lambda: FloatViewDevice("biased", model, shift=2, where="all"),
    }
    reg = Registry(entry_points=[_plugin(n, f) for n, f in devices.items()], allow=None)
    out = {n: _model_case(reg, n, models) for n in devices}
    loose = Tolerances.from_mapping({"tolerances": {"float-view": {"model": {"floor_k": 8}}}})
    out["beyond, floor_k 8"] = _model_case(reg, "beyond", models, loose)
    return out


def _out(case) -> dict:
    (o,) = case.details["outputs"]
    return o


def test_the_mean_model_has_a_floor_of_one_step(mean_cases):
    o = _out(mean_cases["integer"])
    assert o["judged_against"] == "float view" and o["floor_steps"] == 1 and o["max_steps"] == 1
    assert 0 < o["avg_floor_steps"] < 0.25 and o["quantum"] == pytest.approx(MS)
    assert mean_cases["integer"].details["floor"]["floor_of"] == "integer reference"


def test_the_exact_float_view_passes_though_a_step_off_the_integer_reference(mean_cases):
    case = mean_cases["exact"]
    assert case.status == "pass", case.errors
    o = _out(case)
    assert o["max_steps"] == 0 and o["steps_vs_reference"] == 1 and o["allowed_steps"] == FLOOR_K


def test_a_delegate_within_k_floors_passes_beyond_fails(mean_cases):
    within, beyond = mean_cases["within"], mean_cases["beyond"]
    assert within.status == "pass", within.errors
    assert _out(within)["max_steps"] == 4 > _out(within)["precision_bound"] / MS  # room from the floor only
    assert beyond.status == "fail" and _out(beyond)["max_steps"] == 5
    assert "5 quantization steps off the float-view answer (allowed 4: max of 1 and 4 x floor 1)" in beyond.errors[0]
    assert mean_cases["beyond, floor_k 8"].status == "pass"  # [tolerances.float-view.model] floor_k


def test_a_delegate_biased_everywhere_fails_the_average_rule(mean_cases):
    case = mean_cases["biased"]
    assert case.status == "fail"
    o = _out(case)
    assert o["max_steps"] == 2 <= o["allowed_steps"] and o["avg_steps"] == 2 and o["allowed_avg_steps"] == 1
    assert "average error 2 quantization steps off the float-view answer" in case.errors[0]


def test_reports_show_the_float_view_floor(mean_cases, tmp_path):
    from acelera.conformance.certificate import Certificate, finish

    cert = finish(Certificate("exact", "certified", "", cases=[mean_cases["exact"]]))
    md = report.markdown(cert)
    assert "error 0 steps vs the float view, floor 1, allowed 4" in md
    assert "float view answer: " in md and "1 nodes in float64, floor of the integer reference" in md


def test_float_view_tolerance_defaults_and_override(tmp_path):
    t = Tolerances().for_case("float-view", "model")
    assert (t.steps, t.avg_steps, t.floor_k) == (1, 1, FLOOR_K)
    p = tmp_path / "t.toml"
    p.write_text("[tolerances.float-view.model]\nfloor_k = 8\navg_steps = 2\n")
    t = Tolerances.load(p).for_case("float-view", "model")
    assert (t.floor_k, t.avg_steps) == (8, 2)


# --- a shared int8 model through gpu-opencl --------------------------------------------------------
def test_gpu_opencl_model_case_on_the_float_view_floor(tmp_path):
    from gpu_testing import require_opencl

    require_opencl()
    src = SHARED / "hand_recrop_int8.tflite"
    require(src.is_file(), f"shared models not found at {SHARED}")
    (tmp_path / src.name).symlink_to(src)
    from acelera.registrar.registry import get_registry

    case = _model_case(get_registry(), "gpu-opencl", tmp_path)
    assert case.status == "pass", case.errors
    assert case.precision == "float-view" and case.details["delegated_nodes"] > 0
    fl = case.details["floor"]
    assert fl["answer"] == "float view" and fl["float64_nodes"] == fl["nodes"]
    (o,) = case.details["outputs"]
    assert o["judged_against"] == "float view" and o["floor_steps"] >= 1  # the integer reference is off
    assert set(o["floors_steps"]) == {"integer reference", "half-storage float view"}  # it stores half
    assert o["max_steps"] <= o["allowed_steps"] == max(1, int(FLOOR_K * o["floor_steps"]))
    assert o["avg_steps"] <= o["allowed_avg_steps"]
