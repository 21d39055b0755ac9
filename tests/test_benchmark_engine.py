"""benchmark_model's engine: stat lines, profiling tables, the run algorithm and its log lines."""
import json
import re

import numpy as np
import pytest

from acelera import AceleraError, Interpreter, OpResolverType
from acelera.benchmarking import (
    BENCHMARK_FLAGS,
    BenchmarkParamError,
    BenchmarkParams,
    BenchmarkResult,
    Stat,
    StatsCalculator,
    fmt_g,
    format_stat,
    percentile,
    run_benchmark,
    split_name_and_value_file,
)
from acelera.core.builder import In, ModelBuilder, Out, single_op_model
from acelera.core.delegate import Delegate, Support
from acelera.core.errors import UnsupportedOpError
from acelera.core.kernels import registry as kreg
from acelera.core.kernels.registry import in_shape_pass, registered
from acelera.core.partition import DelegationError
from acelera.core.subplan import ReferenceKernel

REF = OpResolverType.BUILTIN_REF  # the reference kernels, not LiteRT's default XNNPACK

# Test-only custom kernels, registered for this module's tests only (each test gets them through
# the autouse fixture below, and the global registry is restored afterwards).
ADD_CODE, FAIL_CODE = "AceleraBenchTestAdd", "AceleraBenchTestFail"


def _bench_add(node):
    return lambda a, b: np.add(a, b).astype(a.dtype)


def _bench_fail(node):
    def run(a):
        if not in_shape_pass():  # placeholder zeros at allocate_tensors; real data when benchmarked
            raise RuntimeError("device on fire")
        return a.copy()
    return run


@pytest.fixture(autouse=True)
def _test_kernels(monkeypatch):
    for code, fn in ((ADD_CODE, _bench_add), (FAIL_CODE, _bench_fail)):
        monkeypatch.setitem(kreg._REGISTRY, code, kreg.KernelSpec(code, 1, fn))


def _has_builtin(op: str) -> bool:
    return op in registered()


def add_op() -> dict:
    return {"op": "ADD", "fused_activation_function": "NONE"} if _has_builtin("ADD") else \
        {"op": "CUSTOM", "custom_code": ADD_CODE}


def add_model(dtype=np.float32, shape=(1, 3)) -> bytes:
    return single_op_model(inputs=[In(shape, dtype), In(shape, dtype)], outputs=[Out(shape, dtype)], **add_op())


def chain_model(n: int = 2, signature=(1, 3)) -> bytes:
    """x -> add(x, x) -> add(., .) ... with n nodes; x may have a dynamic batch."""
    b = ModelBuilder()
    t = b.add_input("x", (1, 3), np.float32, shape_signature=signature)
    kw = add_op()
    op = kw.pop("op")
    for i in range(n):
        nxt = b.add_tensor(f"t{i}", (1, 3), np.float32)
        b.add_operator(op, [t, t], [nxt], **kw)
        t = nxt
    b.mark_outputs(t)
    return b.build()


class TakeDelegate(Delegate):
    """Takes the nodes whose index is in `nodes` (all when None) and runs them on reference kernels."""

    def __init__(self, name="TEST", nodes=None):
        super().__init__()
        self.name = name
        self.nodes = nodes

    def is_node_supported(self, node):
        ok = self.nodes is None or node.index in self.nodes
        return Support(ok, "" if ok else "not taken")

    def prepare(self, partition):
        return ReferenceKernel(partition)


@pytest.fixture
def graph(tmp_path):
    def write(model: bytes, name="model.tflite"):
        path = tmp_path / name
        path.write_bytes(model)
        return str(path)
    return write


def fast(graph_path, **kw) -> BenchmarkParams:
    base = dict(graph=graph_path, num_runs=3, min_secs=0.0, warmup_runs=1, warmup_min_secs=0.0)
    base.update(kw)
    return BenchmarkParams(**base)


def bench(params, delegates=(), interp_kw=None):
    lines = []

    def make():
        return Interpreter(experimental_op_resolver_type=REF, model_path=params.graph, experimental_delegates=list(delegates), **(interp_kw or {}))

    result = run_benchmark(params, make, lines.append)
    return result, lines


# --- formatting on synthetic data ------------------------------------------------------------
def test_stat_line_forms():
    assert format_stat([]) == "count=0 p5=0 median=0 p95=0"
    assert format_stat([], percentiles=False) == "count=0"
    assert format_stat([7]) == "count=1 curr=7 p5=7 median=7 p95=7"
    assert format_stat([5, 5, 5], percentiles=False) == "count=3 curr=5(all same)"
    vals = [100, 300, 200, 400]
    # avg 250, population std sqrt(12500)=111.8 truncated to 111; p5 idx 0, median idx 2, p95 idx 3
    assert format_stat(vals) == "count=4 first=100 curr=400 min=100 max=400 avg=250 std=111 p5=100 median=300 p95=400"


def test_avg_prints_like_an_ostream_double():
    assert fmt_g(38806.2) == "38806.2"
    assert fmt_g(1295630.0) == "1.29563e+06"
    assert fmt_g(1.0) == "1" and fmt_g(0.5) == "0.5" and fmt_g(150.0) == "150"
    assert "avg=1.29563e+06" in format_stat([1295600, 1295660])


def test_percentiles_are_nth_element_at_floor():
    vals = list(range(20, 0, -1))  # 20..1 unsorted
    assert percentile(vals, 5) == sorted(vals)[1]  # floor(20*5/100) = 1
    assert percentile(vals, 50) == sorted(vals)[10]
    assert percentile(vals, 95) == sorted(vals)[19]
    assert percentile(vals, 100) == 1  # last element of the unsorted copy
    assert percentile([], 50) == 0
    s = Stat([3, 1, 2])
    assert (s.min, s.max, s.first, s.newest, s.std_deviation) == (1, 3, 3, 2, 0)  # std 0.816 -> 0


def synthetic_calculator(csv=False) -> StatsCalculator:
    calc = StatsCalculator(csv=csv)
    calc.add_run([("[a]:0", "CONV_2D", 300, 0), ("[b]:1", "ADD", 100, 0), ("[c, d]:2", "CONV_2D", 600, 0)])
    calc.add_run([("[a]:0", "CONV_2D", 500, 0), ("[b]:1", "ADD", 100, 0), ("[c, d]:2", "CONV_2D", 400, 0)])
    return calc


def test_profile_tables_layout():
    text = synthetic_calculator().report()
    lines = text.split("\n")
    assert lines[0] == "============================== Run Order =============================="
    assert lines[1] == ("\t" + "[node type]".rjust(40) + "\t  [first]\t [avg ms]\t     [%]\t  [cdf%]"
                        "\t  [mem KB]\t[times called]\t[Name]")
    # total over both runs 2000 us: node a 800 us = 40%, avg 0.4 ms, first 0.3 ms
    assert lines[2] == ("\t" + "CONV_2D".rjust(40) + "\t    0.300\t    0.400\t 40.000%\t 40.000%"
                        "\t     0.000\t        1\t[a]:0")
    assert lines[3].endswith("\t 10.000%\t 50.000%\t     0.000\t        1\t[b]:1")
    assert lines[4].endswith("\t 50.000%\t100.000%\t     0.000\t        1\t[c, d]:2")
    assert lines[5] == ""
    assert lines[6] == "============================== Top by Computation Time =============================="
    top = [ln.rsplit("\t", 1)[1] for ln in lines[8:11]]
    assert top == ["[c, d]:2", "[a]:0", "[b]:1"]
    i = lines.index("Number of nodes executed: 3")
    assert lines[i + 1] == "============================== Summary by node type =============================="
    assert lines[i + 2] == ("\t" + "[Node type]".rjust(40) + "\t  [count]\t  [avg ms]\t    [avg %]\t    [cdf %]"
                            "\t  [mem KB]\t[times called]")
    assert lines[i + 3] == ("\t" + "CONV_2D".rjust(40) + "\t        2\t     0.900\t    90.000%\t    90.000%"
                            "\t     0.000\t        2")
    assert lines[i + 4].startswith("\t" + "ADD".rjust(40) + "\t        1\t     0.100\t    10.000%\t   100.000%")
    assert "Timings (microseconds): count=2 curr=1000(all same)" in text
    assert "Memory (bytes): count=0\n3 nodes observed\n" in text


def test_top_by_time_is_limited_to_ten():
    calc = StatsCalculator()
    calc.add_run([(f"[t{i}]:{i}", "ADD", i + 1, 0) for i in range(15)])
    text = calc.stats_by_metric("Top by Computation Time", "time", 10)
    rows = [ln for ln in text.split("\n")[2:] if ln]
    assert len(rows) == 10 and rows[0].endswith("[t14]:14")


def test_profile_csv_format():
    text = synthetic_calculator(csv=True).report()
    assert "node type, first, avg_ms, %, cdf%, mem KB, times called, name" in text
    assert "CONV_2D, 0.3, 0.4, 40%, 40%, 0, 1, [a]:0" in text
    assert "CONV_2D, 0.6, 0.5, 50%, 100%, 0, 1, [c\t d]:2" in text  # commas in names become tabs
    assert "node type, count, avg_ms, avg %, cdf %, mem KB, times called\nCONV_2D, 2, 0.9, 90%, 90%, 0, 2\n" in text


def test_flags_table_describes_every_param():
    names = [f[0] for f in BENCHMARK_FLAGS]
    assert names[0] == "graph" and len(names) == len(set(names))
    table = {n: (t, d) for n, t, d, _ in BENCHMARK_FLAGS}
    assert table["num_runs"] == (int, 50) and table["min_secs"] == (float, 1.0)
    assert table["max_secs"] == (float, 150.0) and table["warmup_min_secs"] == (float, 0.5)
    assert table["enable_op_profiling"] == (bool, False) and table["op_profiling_output_mode"] == (str, "stdout")
    assert all(h for *_, h in BENCHMARK_FLAGS)


def test_value_file_item_split_with_escaped_colon():
    assert split_name_and_value_file("input::0:/tmp/a.bin") == ("input:0", "/tmp/a.bin")
    with pytest.raises(BenchmarkParamError, match="input_layer_value_files"):
        split_name_and_value_file("a:b:c")
    with pytest.raises(BenchmarkParamError, match="input_layer_value_files"):
        split_name_and_value_file("nodelimiter")


# --- end-to-end --------------------------------------------------------------------------------
def test_log_lines_and_result(graph, tmp_path):
    path = graph(add_model())
    out = tmp_path / "result.json"
    result, lines = bench(fast(path, result_file_path=str(out)))
    text = "\n".join(lines)
    assert lines[0] == "STARTING!"
    assert "Log parameter values verbosely: [0]" in lines
    assert f"Graph: [{path}]" in lines and "Min num runs: [3]" in lines
    assert re.search(r"^The input model file size \(MB\): [0-9.e-]+$", text, re.M)
    assert re.search(r"^Initialized session in [0-9.e+]+ms\.$", text, re.M)
    runs = [ln for ln in lines if ln.startswith("Running benchmark")]
    assert runs == ["Running benchmark for at least 1 iterations and at least 0 seconds but terminate if "
                    "exceeding 150 seconds.",
                    "Running benchmark for at least 3 iterations and at least 0 seconds but terminate if "
                    "exceeding 150 seconds."]
    stats = [ln for ln in lines if ln.startswith("count=")]
    assert len(stats) == 2 and stats[1].startswith("count=3 ")
    assert re.search(r"^Inference timings in us: Init: \d+, First inference: \d+, Warmup \(avg\): [0-9.e+]+, "
                     r"Inference \(avg\): [0-9.e+]+$", text, re.M)
    assert re.search(r"^Memory footprint delta from the start of the tool \(MB\): init=\S+ overall=\S+$", text, re.M)
    assert "Explicitly applied" not in text
    assert isinstance(result, BenchmarkResult)
    assert result.misc_metrics.num_runs == 3 and result.misc_metrics.num_warmup_runs == 1
    assert result.input_bytes == 24 and len(result.inference_time_us) == 3
    lat = result.latency_metrics
    assert lat.min_ms <= lat.median_ms <= lat.max_ms and lat.init_ms > 0
    saved = json.loads(out.read_text())
    assert set(saved) == {"latency_metrics", "memory_metrics", "misc_metrics"}
    assert saved["misc_metrics"]["num_runs"] == 3
    assert set(saved["latency_metrics"]) == {"avg_ms", "min_ms", "max_ms", "stddev_ms", "median_ms", "p5_ms",
                                             "p95_ms", "init_ms", "first_inference_ms", "average_warm_up_ms"}
    assert "peak_mem_mb" not in saved["memory_metrics"]
    assert f"Saved benchmark result to: {out}" in lines


def test_dry_run_runs_nothing(graph):
    result, lines = bench(fast(graph(add_model()), dry_run=True, verbose=True))
    assert "Log parameter values verbosely: [1]" in lines and "Num threads: [-1]" in lines
    assert "Running benchmark for at least 0 iterations and at least -1 seconds but terminate if exceeding " \
           "150 seconds." in lines
    assert lines.count("count=0 p5=0 median=0 p95=0") == 2
    assert "Run w/o invoking kernels: [1]" in lines
    assert result.misc_metrics.num_runs == 0 and result.misc_metrics.num_warmup_runs == 0
    assert any(ln.startswith("Inference timings in us: Init: ") and ln.endswith(
        "First inference: 0, Warmup (avg): 0, Inference (avg): 0") for ln in lines)


def test_value_range_and_output_file(graph, tmp_path):
    path = graph(add_model(np.int32))
    out = tmp_path / "out.bin"
    bench(fast(path, input_layer_value_range="in0,5,5:in1,7,7", output_filepath=str(out)))
    np.testing.assert_array_equal(np.frombuffer(out.read_bytes(), np.int32), [12, 12, 12])


def test_default_random_ranges(graph, tmp_path):
    # int32 inputs in [0, 99]: the second input is pinned to 0 so the output shows the first
    out2 = tmp_path / "out2.bin"
    bench(fast(graph(add_model(np.int32, (1, 500)), "i32.tflite"), output_filepath=str(out2),
               input_layer_value_range="in1,0,0"))
    v = np.frombuffer(out2.read_bytes(), np.int32)
    assert v.min() >= 0 and v.max() <= 99 and len(set(v.tolist())) > 10
    out3 = tmp_path / "out3.bin"
    bench(fast(graph(add_model(np.float32, (1, 500)), "f32.tflite"), output_filepath=str(out3)))
    f = np.frombuffer(out3.read_bytes(), np.float32)
    assert f.min() >= -1.0 and f.max() <= 1.0 and f.std() > 0.1


def test_value_files_win_over_ranges(graph, tmp_path):
    path = graph(add_model())
    a = tmp_path / "a.bin"
    a.write_bytes(np.array([[1, 2, 3]], np.float32).tobytes())
    out = tmp_path / "out.bin"
    _, lines = bench(fast(path, input_layer_value_files=f"in0:{a}", input_layer_value_range="in0,0,0:in1,0,0",
                          output_filepath=str(out)))
    np.testing.assert_array_equal(np.frombuffer(out.read_bytes(), np.float32), [1, 2, 3])
    assert any(ln.startswith("WARN: The input_name:in0 appears both") for ln in lines)
    a.write_bytes(b"\0" * 5)
    with pytest.raises(BenchmarkParamError, match=r"input_layer_value_files.*5 bytes. It should be 12 bytes"):
        bench(fast(path, input_layer_value_files=f"in0:{a}"))


def test_input_layer_shape_resizes(graph, tmp_path):
    path = graph(chain_model(1, signature=(-1, 3)))
    out = tmp_path / "out.bin"
    result, lines = bench(fast(path, input_layer="x", input_layer_shape="4,3", output_filepath=str(out)))
    assert result.input_bytes == 4 * 3 * 4
    assert len(out.read_bytes()) == 4 * 3 * 4
    assert "Input layers: [x]" in lines and "Input shapes: [4,3]" in lines


@pytest.mark.parametrize("kw, flag", [
    (dict(input_layer_value_range="in0,1"), "input_layer_value_range"),
    (dict(input_layer_value_range="in0,5,1"), "input_layer_value_range"),
    (dict(input_layer_value_range="in0,a,b"), "input_layer_value_range"),
    (dict(input_layer_value_range="nosuch,1,2"), "input_layer_value_range"),
    (dict(input_layer="in0,in1", input_layer_shape="1,3"), "input_layer_shape"),
    (dict(input_layer="in0,in1", input_layer_shape="1,3:-1,3"), "input_layer_shape"),
    (dict(input_layer="in0,in1", input_layer_shape="1,3:1,x"), "input_layer_shape"),
    (dict(input_layer="in0,in1", input_layer_shape="1,3:3"), "input_layer_shape"),
    (dict(enable_op_profiling=True, op_profiling_output_mode="proto"), "op_profiling_output_mode"),
    (dict(enable_op_profiling=True, op_profiling_output_mode="xml"), "op_profiling_output_mode"),
    (dict(graph=""), "graph"),
    (dict(num_runs="many"), "num_runs"),
])
def test_bad_params_name_the_flag(graph, kw, flag):
    with pytest.raises(BenchmarkParamError, match=f"--{flag}") as e:
        bench(fast(graph(add_model()), **kw))
    assert isinstance(e.value, AceleraError) and "\n" not in str(e.value)


def test_delegate_application_lines(graph):
    path = graph(chain_model(3))
    _, lines = bench(fast(path), [TakeDelegate("FULL")])
    assert "Explicitly applied FULL delegate, and the model graph will be completely executed by the " \
           "delegate." in lines
    _, lines = bench(fast(path), [TakeDelegate("HALF", {0, 2})])
    assert "Explicitly applied HALF delegate, and the model graph will be partially executed by the " \
           "delegate w/ 2 delegate kernels." in lines
    _, lines = bench(fast(path), [TakeDelegate("NONE", set()), TakeDelegate("SECOND")])
    assert "Going to apply 2 delegates one after another." in lines
    assert "Though NONE delegate is explicitly applied, the model graph will not be executed by the " \
           "delegate." in lines
    assert "Explicitly applied SECOND delegate, and the model graph will be completely executed by the " \
           "delegate." in lines


def test_require_full_delegation(graph):
    path = graph(chain_model(3))
    with pytest.raises(DelegationError, match="Disallowed CPU fallback"):
        bench(fast(path, require_full_delegation=True), [TakeDelegate("HALF", {0})])
    with pytest.raises(DelegationError, match="Disallowed CPU fallback"):
        bench(fast(path, require_full_delegation=True))
    result, _ = bench(fast(path, require_full_delegation=True), [TakeDelegate("FULL")])
    assert result.misc_metrics.num_runs == 3


def test_require_full_delegation_on_a_preallocated_interpreter(graph):
    path = graph(chain_model(2))

    def make():
        it = Interpreter(experimental_op_resolver_type=REF, model_path=path, experimental_delegates=[TakeDelegate("HALF", {0})])
        it.allocate_tensors()
        return it

    with pytest.raises(DelegationError, match="Disallowed CPU fallback"):
        run_benchmark(fast(path, require_full_delegation=True), make, lambda line: None)


def test_op_profiling_stdout(graph):
    path = graph(chain_model(3))
    result, lines = bench(fast(path, enable_op_profiling=True), [TakeDelegate("GPU", {1, 2})])
    i = lines.index("Operator-wise Profiling Info for Regular Benchmark Runs:")
    assert "Profiling Info for Benchmark Initialization:" in lines[:i]
    assert lines[i + 1] == "============================== Run Order =============================="
    rows = lines[i + 3:i + 5]
    op = add_op().get("custom_code", "ADD")
    assert rows[0].split("\t")[1].strip() == op and rows[0].endswith("\t[t0]:0")
    # the delegate kernel is a new node after the 3 model nodes, named by its output tensors
    assert rows[1].split("\t")[1].strip() == "DELEGATE:GPU" and rows[1].endswith("\t[t2]:3")
    assert rows[0].split("\t")[7].strip() == "1"  # times called per run
    assert "Number of nodes executed: 2" in lines
    assert any(ln.startswith("Timings (microseconds): count=3") for ln in lines[i:])
    assert "AllocateTensors/0" in "\n".join(lines[:i])
    assert result.op_profile is not None and "Run Order" in result.op_profile


def test_op_profiling_csv_to_file(graph, tmp_path):
    out = tmp_path / "profile.csv"
    _, lines = bench(fast(graph(add_model()), enable_op_profiling=True, op_profiling_output_mode="csv",
                          op_profiling_output_file=str(out)))
    text = out.read_text()
    assert "Operator-wise Profiling Info for Regular Benchmark Runs:" not in lines
    assert "Operator-wise Profiling Info for Regular Benchmark Runs:\n" in text
    assert "node type, first, avg_ms, %, cdf%, mem KB, times called, name" in text
    assert re.search(r"^\S+, [0-9.e-]+, [0-9.e-]+, \S+%, \S+%, 0, 1, \[out0\]:0$", text, re.M)


def test_peak_memory_lines(graph):
    result, lines = bench(fast(graph(add_model()), report_peak_memory_footprint=True,
                               memory_footprint_check_interval_ms=0))
    assert any(ln.startswith("WARN: --memory_footprint_check_interval_ms is set to 0") for ln in lines)
    text = "\n".join(lines)
    assert re.search(r"^Overall peak memory footprint \(MB\) via periodic monitoring: [0-9.e+]+$", text, re.M)
    assert "Memory status at the end of exeution:" in lines
    assert re.search(r"^- VmRSS              : \d+ MB$", text, re.M)
    assert result.memory_metrics.peak_mem_mb > 0


def test_run_delay_and_min_secs(graph):
    result, lines = bench(fast(graph(add_model()), num_runs=1, min_secs=0.05, run_delay=0.02, warmup_runs=0,
                               warmup_min_secs=-1.0))
    assert 2 <= result.misc_metrics.num_runs <= 4
    assert result.misc_metrics.num_warmup_runs == 0


def test_warmup_error_aborts(graph):
    path = graph(single_op_model("CUSTOM", [In((1, 3))], [Out((1, 3))], custom_code=FAIL_CODE))
    lines = []
    with pytest.raises(AceleraError, match="device on fire"):
        run_benchmark(fast(path), lambda: Interpreter(experimental_op_resolver_type=REF, model_path=path), lines.append)
    assert not any(ln.startswith("Inference timings") for ln in lines)
    assert any(ln.startswith("ERROR: ") and "device on fire" in ln for ln in lines)


def test_tiny_cnn(graph):
    from acelera.samples import tiny_cnn

    path = graph(tiny_cnn())
    try:
        Interpreter(experimental_op_resolver_type=REF, model_path=path).allocate_tensors()
    except UnsupportedOpError as e:
        pytest.skip(f"tiny_cnn needs a kernel that is not written yet: {e}")
    result, lines = bench(fast(path, enable_op_profiling=True))
    assert result.misc_metrics.num_runs == 3
    assert "Number of nodes executed: 7" in lines
