"""inference_diff engine: number formatting, random inputs, error metrics, JSON, the command."""
import json
import re
import types

import numpy as np
import pytest
from cli_flags import parse_cli

from acelera.conformance import inference_diff as idiff
from acelera.conformance.inference_diff import (
    INFERENCE_DIFF_FLAGS,
    cpp_float,
    diff,
    format_lines,
    random_input,
    resolve_delegate,
    to_json,
    truncated_gaussian,
)
from acelera.core.builder import In, ModelBuilder, Out, single_op_model
from acelera.core.delegate import Delegate, OpSupport, OpTable, Support
from acelera.core.errors import AceleraError
from acelera.core.subplan import ReferenceKernel
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag, FlagSet
from acelera.registrar.registry import Registry
from acelera.registrar.spec import DelegateSpec


# --- test delegates --------------------------------------------------------------------------
class OffsetKernel(ReferenceKernel):
    def __init__(self, partition, offset):
        super().__init__(partition)
        self.offset = offset

    def invoke(self, *inputs):
        outs = super().invoke(*inputs)
        return tuple((o.astype(np.float64) + self.offset).astype(o.dtype) for o in outs)


class OffsetDelegate(Delegate):
    """Runs ops on the reference kernels and adds `offset` to every partition output."""

    backend = "emulated"

    def __init__(self, name="offset", ops=("ADD",), dtypes=("FLOAT32",), offset=0.0, **kw):
        super().__init__(**kw)
        self.name = name
        self.op_table = OpTable.of([OpSupport(op, 3, frozenset(dtypes)) for op in ops], name)
        self.offset = offset

    def prepare(self, partition):
        return OffsetKernel(partition, self.offset) if self.offset else ReferenceKernel(partition)


def add_f32():
    return single_op_model("ADD", [In((2, 8)), In((2, 8))], [Out((2, 8))], fused_activation_function="NONE")


def add_i8():
    q_in, q_out = (0.5, 0), (2.0, 0)  # output stays within [-64, 64]: an offset never saturates
    return single_op_model("ADD", [In((4, 4), np.int8, q_in), In((4, 4), np.int8, q_in)],
                           [Out((4, 4), np.int8, q_out)], fused_activation_function="NONE")


def add_relu():
    b = ModelBuilder()
    x = b.add_input("x", (3, 3), np.float32)
    y = b.add_input("y", (3, 3), np.float32)
    s = b.add_tensor("s", (3, 3), np.float32)
    r = b.add_tensor("r", (3, 3), np.float32)
    b.add_operator("ADD", [x, y], [s], fused_activation_function="NONE")
    b.add_operator("RELU", [s], [r])
    b.mark_outputs(r)
    return b.build()


# --- number formatting -----------------------------------------------------------------------
@pytest.mark.parametrize("value,text", [
    (84364.2, "84364.2"), (84364.1999, "84364.2"), (7281.6399, "7281.64"), (1.96277e-05, "1.96277e-05"),
    (6.957671e-06, "6.95767e-06"), (0.0, "0"), (12525, "12525"), (12525.0, "12525"), (1e6, "1e+06"),
    (123456789.0, "1.23457e+08"), (999999.5, "1e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"), (0.25, "0.25"),
    (-3.5, "-3.5"), (float("inf"), "inf"), (float("nan"), "nan"), (100000.0, "100000"),
])
def test_cpp_float(value, text):
    assert cpp_float(value) == text


# --- random inputs ---------------------------------------------------------------------------
def test_truncated_gaussian_in_unit_interval():
    u = truncated_gaussian(np.random.default_rng(1), 50_000)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01
    # truncation at +-1.5 sigma: the std of the truncated normal is about 0.74 * 1/3
    assert 0.22 < u.std() < 0.27


@pytest.mark.parametrize("dtype,lo,hi,center", [
    (np.float32, -1, 1, 0.0), (np.float16, -1, 1, 0.0), (np.uint8, 0, 255, 127), (np.int8, -128, 127, 0),
    (np.int32, -(2**31), 2**31 - 1, 0.0), (np.int64, -(2**63), 2**63 - 1, 0.0),
])
def test_gaussian_input_ranges(dtype, lo, hi, center):
    v = random_input(np.random.default_rng(2), (100, 100), dtype)
    assert v.dtype == np.dtype(dtype) and v.shape == (100, 100)
    assert v.min() >= lo and v.max() <= hi
    width = float(hi) - float(lo)
    assert abs(v.astype(np.float64).mean() - center) < 0.02 * width
    assert v.astype(np.float64).std() > 0.2 * width  # spread over the range, not uniform-tiny
    assert v.min() < center < v.max()


def test_bool_inputs_are_always_false_and_int16_is_refused():
    v = random_input(np.random.default_rng(3), (5, 7), np.bool_)
    assert v.dtype == np.bool_ and not v.any()
    with pytest.raises(AceleraError, match="only supports"):
        random_input(np.random.default_rng(3), (2,), np.int16)


# --- the engine ------------------------------------------------------------------------------
def test_float_offset_is_reported_as_avg_error():
    d = OffsetDelegate(offset=0.25)
    r = diff(add_f32(), [d], num_runs=6)
    assert r.num_runs == 6
    (o,) = r.output_errors
    assert o.avg_value == pytest.approx(0.25, abs=1e-6)
    assert o.std_deviation < 1e-6
    assert o.min_value == pytest.approx(0.25, abs=1e-6) and o.max_value == pytest.approx(0.25, abs=1e-6)
    assert o.max_abs_error == pytest.approx(0.25, abs=1e-6)
    assert 0 < o.max_abs_reference <= 2.0
    assert r.delegation.nodes_of("offset") == [0]
    for lat in (r.test_latency, r.reference_latency):
        assert lat.min_us <= lat.avg_us <= lat.max_us
        assert lat.sum_us >= lat.max_us and lat.last_us >= lat.min_us
        assert isinstance(lat.std_deviation_us, int) and lat.std_deviation_us >= 0
        assert lat.avg_us == pytest.approx(lat.sum_us / (6 * 3))


def test_int8_offset_is_reported_as_avg_error():
    d = OffsetDelegate(dtypes=("INT8",), offset=3)
    r = diff(add_i8(), [d], num_runs=5, num_threads=2)
    (o,) = r.output_errors
    assert o.dtype == "int8"
    assert o.avg_value == 3.0 and o.std_deviation == 0.0 and o.max_value == 3.0 and o.max_abs_error == 3.0
    assert r.delegation.nodes_of("offset") == [0]


def test_identical_delegate_gives_zero_error():
    r = diff(add_f32(), [OffsetDelegate()], num_runs=4)
    (o,) = r.output_errors
    assert (o.avg_value, o.std_deviation, o.min_value, o.max_value, o.max_abs_error) == (0, 0, 0, 0, 0)
    r = diff(add_i8(), [], num_runs=2)
    assert r.output_errors[0].avg_value == 0 and r.delegation.node_delegate == {}


def test_deterministic_per_seed():
    # error proportional to the inputs: equal seeds give equal stats, others differ
    class Scale(OffsetKernel):
        def invoke(self, *inputs):
            return tuple(o * np.float32(1.01) for o in ReferenceKernel.invoke(self, *inputs))

    class ScaleDelegate(OffsetDelegate):
        def prepare(self, partition):
            return Scale(partition, 0)

    a = diff(add_f32(), [ScaleDelegate()], num_runs=3, seed=7).output_errors[0]
    b = diff(add_f32(), [ScaleDelegate()], num_runs=3, seed=7).output_errors[0]
    c = diff(add_f32(), [ScaleDelegate()], num_runs=3, seed=8).output_errors[0]
    assert a.avg_value > 0 and a.std_deviation > 0
    assert (a.avg_value, a.std_deviation, a.max_abs_error) == (b.avg_value, b.std_deviation, b.max_abs_error)
    assert a.avg_value != c.avg_value
    assert diff(add_f32(), [], num_runs=1).seed == idiff.DEFAULT_SEED


def test_unsupported_input_type_is_an_error():
    model = single_op_model("CAST", [In((4,), np.int16)], [Out((4,), np.float32)])
    with pytest.raises(AceleraError, match="input 0 .* is int16"):
        diff(model, [], num_runs=1)
    with pytest.raises(AceleraError, match="num_runs"):
        diff(add_f32(), [], num_runs=0)


# --- output ----------------------------------------------------------------------------------
def test_format_lines_and_delegation_summary():
    r = diff(add_relu(), [OffsetDelegate(offset=0.5)], num_runs=3)
    lines = format_lines(r)
    assert lines[0] == "Num evaluation runs: 3"
    assert re.fullmatch(r"Reference run latency: avg=[0-9.e+-]+\(us\), std_dev=\d+\(us\)", lines[1])
    assert re.fullmatch(r"Test run latency: avg=[0-9.e+-]+\(us\), std_dev=\d+\(us\)", lines[2])
    assert re.fullmatch(r"OutputDiff\[0\]: avg_error=[0-9.e+-]+, std_dev=[0-9.e+-]+", lines[3])
    assert float(lines[3].split("avg_error=")[1].split(",")[0]) > 0  # the offset survives RELU mostly
    assert lines[4] == "Delegate offset (emulated): 1 of 2 nodes in 1 partition(s)"
    assert lines[5] == "CPU fallback: 1 node(s)"
    assert lines[6] == "  node 1 (RELU): offset: op is not supported by offset"
    lines = format_lines(diff(add_f32(), [], num_runs=1))
    assert lines[-2] == "No delegate applied: all 1 node(s) run on the CPU"
    assert lines[-1].startswith("Note: with no delegate the test interpreter is the CPU reference itself")


def test_json_structure():
    r = diff(add_relu(), [OffsetDelegate(offset=0.5)], num_runs=2)
    j = json.loads(json.dumps(to_json(r)))
    assert j["num_runs"] == 2
    m = j["process_metrics"]["inference_profiler_metrics"]
    for key in ("reference_latency", "test_latency"):
        assert set(m[key]) == {"last_us", "max_us", "min_us", "sum_us", "avg_us", "std_deviation_us"}
    assert len(m["output_errors"]) == 1
    assert set(m["output_errors"][0]) == {"max_value", "min_value", "avg_value", "std_deviation"}
    assert j["outputs"][0]["max_abs_error"] == pytest.approx(0.5, abs=1e-6)
    dl = j["delegation"]
    assert dl["num_nodes"] == 2
    assert dl["delegates"] == [{"name": "offset", "backend": "emulated", "nodes": [0], "partitions": [[0]]}]
    assert dl["cpu_nodes"] == [{"node": 1, "op": "RELU", "reason": "offset: op is not supported by offset"}]


# --- the command -----------------------------------------------------------------------------
class EP:
    def __init__(self, name, obj):
        self.name, self._obj = name, obj
        self.dist = types.SimpleNamespace(name="fake", version="1")

    def load(self):
        return self._obj


def plugin(name, available=True, fallback_for=None, offset=0.0, flag=None):
    flag = flag or f"use_{name.replace('-', '_')}"
    created = []

    def factory(options):
        d = OffsetDelegate(name, offset=offset)
        d.options = dict(options)
        created.append(d)
        return d

    spec = DelegateSpec(name, "test", "1", (Flag(flag, bool, False, "", name),), (flag,),
                        OpTable.of([OpSupport("ADD")], name), frozenset({"float32"}), "emulated",
                        (lambda: Support(True)) if available else (lambda: Support(False, "no device")), factory,
                        fallback_for=fallback_for)
    mod = types.SimpleNamespace(__name__=name, created=created)

    @hookimpl
    def register_delegates(register):
        register(spec)
    mod.register_delegates = register_delegates
    return mod


def parse(reg, argv):
    own = [Flag(n, t, d, h, "inference_diff") for n, t, d, h in INFERENCE_DIFF_FLAGS]
    fs = FlagSet(list(reg.flagset.flags.values()) + own)
    return parse_cli(fs, argv)


def test_flags_table():
    assert [(n, t, d) for n, t, d, _ in INFERENCE_DIFF_FLAGS] == [
        ("model_file", str, ""), ("output_file_path", str, ""), ("num_runs", int, 50),
        ("num_interpreter_threads", int, 1), ("delegate", str, "")]


def test_run_requires_model_file():
    reg = Registry([])
    with pytest.raises(AceleraError, match="--model_file"):
        idiff.run(reg, parse(reg, []), log=lambda s: None)


def test_resolve_delegate_names():
    reg = Registry([EP("a", plugin("gpu-opencl", available=False)),
                    EP("b", plugin("gpu-gl", fallback_for="gpu-opencl")), EP("c", plugin("mine"))])
    assert resolve_delegate(reg, "gpu") == "gpu-gl"
    assert resolve_delegate(reg, "mine") == "mine"
    assert resolve_delegate(reg, "xnnpack") == "xnnpack-cpu"
    assert resolve_delegate(reg, "nnapi") == "nnapi"
    with pytest.raises(AceleraError, match="^Unsupported TFLite delegate: tpu$"):
        resolve_delegate(reg, "tpu")
    reg = Registry([EP("a", plugin("gpu-opencl")), EP("b", plugin("gpu-gl", fallback_for="gpu-opencl"))])
    assert resolve_delegate(reg, "gpu") == "gpu-opencl"


def test_run_end_to_end(tmp_path):
    model = tmp_path / "add.tflite"
    model.write_bytes(add_f32())
    p, q = plugin("pdel", offset=0.125), plugin("qdel")
    reg = Registry([EP("p", p), EP("q", q)])
    out = tmp_path / "m.json"
    lines = []
    argv = [f"--model_file={model}", "--num_runs=3", "--delegate=pdel", "--use_qdel", "--use_pdel",
            f"--output_file_path={out}", "--num_interpreter_threads=2"]
    assert idiff.run(reg, parse(reg, argv), log=lines.append) == 0
    assert lines[0] == "Num evaluation runs: 3"
    assert lines[3].startswith("OutputDiff[0]: avg_error=0.125, std_dev=")
    # --delegate first, then the registrar's (pdel not repeated); pdel took the only node
    assert lines[4:7] == ["Delegate pdel (emulated): 1 of 1 nodes in 1 partition(s)",
                          "Delegate qdel (emulated): 0 of 1 nodes in 0 partition(s)", "CPU fallback: 0 node(s)"]
    assert p.created[0].options["num_threads"] == 2 and q.created[0].options["num_threads"] == 2
    j = json.loads(out.read_text())
    assert j["num_runs"] == 3 and [d["name"] for d in j["delegation"]["delegates"]] == ["pdel", "qdel"]
    with pytest.raises(AceleraError, match="Unsupported TFLite delegate: bogus"):
        idiff.run(reg, parse(reg, [f"--model_file={model}", "--delegate=bogus"]), log=lines.append)
