"""The hexagon plugin: TFLite's Hexagon support rules, partition limits, emulated integer
execution against the CPU reference, and the --hexagon_profiling profile."""
import warnings

import numpy as np
import pytest
from needs import require_module

from acelera import Interpreter, OpResolverType
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.executor import Executor
from acelera.core.model import load_model
from acelera.plugins.hexagon import SPEC, create
from acelera.plugins.hexagon.cost_model import NODE_OVERHEAD, estimate
from acelera.plugins.hexagon.delegate import HexagonDelegate, HexagonPartitionWarning
from acelera.plugins.hexagon.rules import OP_TABLE
from acelera.plugins.hexagon.runner import HexagonRunner
from acelera.registrar.registry import get_registry
from acelera.samples import tiny_cnn

REF = OpResolverType.BUILTIN_REF  # the reference kernels, not LiteRT's default XNNPACK

I8, U8, I32, F32 = np.int8, np.uint8, np.int32, np.float32
QA = (0.05, 0)          # activation quantization
QW = (0.02, 0)          # per-tensor weights


def ctx(model: bytes, node: int = 0):
    return Executor(load_model(model).main).node_context(node)


def support(model: bytes, node: int = 0):
    return OP_TABLE.check(ctx(model, node))


def qin(shape, dtype=I8, quant=QA):
    return In(shape, dtype, quant)


def qout(shape, dtype=I8, quant=QA):
    return Out(shape, dtype, quant)


def conv(version=3, stride=1, dilation=1, act="RELU", dtype=I8, wquant=QW, kh=3):
    return single_op_model(
        "CONV_2D", [qin((1, 8, 8, 4), dtype), Const(np.ones((2, kh, 3, 4), dtype), wquant),
                    Const(np.zeros(2, I32), (0.001, 0))],
        [qout((1, 8, 8, 2), dtype)], version=version, padding="SAME", stride_h=stride, stride_w=stride,
        dilation_h_factor=dilation, dilation_w_factor=dilation, fused_activation_function=act)


def depthwise(stride=1, dilation=1, mult=1, in_ch=4, kh=3):
    return single_op_model(
        "DEPTHWISE_CONV_2D", [qin((1, 8, 8, in_ch)), Const(np.ones((1, kh, 3, in_ch * mult), I8), QW),
                              Const(np.zeros(in_ch * mult, I32), (0.001, 0))],
        [qout((1, 8, 8, in_ch * mult))], version=3, padding="SAME", stride_h=stride, stride_w=stride,
        dilation_h_factor=dilation, dilation_w_factor=dilation, depth_multiplier=mult,
        fused_activation_function="NONE")


def fc(per_channel=False, const_bias=True, keep_num_dims=False, with_bias_slot=True):
    wq = (np.full(3, 0.02, F32), np.zeros(3, np.int64), 0) if per_channel else QW
    bias = Const(np.zeros(3, I32), (0.001, 0)) if const_bias else qin((3,), I32, (0.001, 0))
    ins = [qin((1, 8)), Const(np.ones((3, 8), I8), wq)] + ([bias] if with_bias_slot else [])
    return single_op_model("FULLY_CONNECTED", ins, [qout((1, 3))], version=4,
                           fused_activation_function="NONE", keep_num_dims=keep_num_dims)


def unary(op, version=2, dtype=I8, shape=(1, 4, 4, 2), out_dtype=None):
    return single_op_model(op, [qin(shape, dtype)], [qout(shape, out_dtype or dtype)], version=version)


def pool(op, padding="SAME", k=3, act="NONE"):
    return single_op_model(op, [qin((1, 16, 16, 2))], [qout((1, 16, 16, 2))], version=2, padding=padding,
                           stride_h=1, stride_w=1, filter_height=k, filter_width=k,
                           fused_activation_function=act)


def resize(size):
    return single_op_model("RESIZE_BILINEAR", [qin((1, 8, 8, 2)), Const(np.array(size, I32))],
                           [qout((1, size[0], size[1], 2))], version=3)


def strided_slice(**masks):
    return single_op_model("STRIDED_SLICE", [qin((1, 8, 8, 2)), Const(np.array([0, 0, 0, 0], I32)),
                                             Const(np.array([1, 4, 4, 2], I32)), Const(np.array([1, 1, 1, 1], I32))],
                           [qout((1, 4, 4, 2))], version=2, **masks)


# --- declaration ----------------------------------------------------------------------------
def test_spec_flags_and_defaults():
    reg = get_registry()
    spec = reg.spec("hexagon")
    assert spec is SPEC and spec.backend == "emulated" and spec.precision == "integer"
    assert reg.availability("hexagon").ok
    flags = {f.name: (f.type, f.default) for f in spec.flags}
    assert flags == {"use_hexagon": (bool, False), "hexagon_lib_path": (str, "/data/local/tmp"),
                     "hexagon_profiling": (bool, False)}
    assert "UNUSED" in next(f.help for f in spec.flags if f.name == "hexagon_lib_path")
    assert (spec.default_max_partitions, spec.default_min_nodes) == (4, 2)
    assert spec.model_types == {"full-integer", "qat"}
    d = reg.create("hexagon", {"hexagon_profiling": "true"})
    assert isinstance(d, HexagonDelegate) and d.profiling and d.backend == "emulated"
    assert "unused" in d.describe()


def test_version_table_matches_check_op_version():
    versions = {r.op: (r.min_version, r.max_version) for r in OP_TABLE}
    assert versions["RELU"] == versions["RSQRT"] == versions["SQUARED_DIFFERENCE"] == (2, 2)
    assert versions["HARD_SWISH"] == versions["NEG"] == versions["RESHAPE"] == (1, 1)
    assert versions["CONV_2D"] == versions["RESIZE_BILINEAR"] == versions["TRANSPOSE_CONV"] == (1, 3)
    assert versions["FULLY_CONNECTED"] == (1, 4) and versions["ADD"] == (1, 2)
    assert "SUM" not in versions and len(versions) == 38
    assert all(r.constraints and r.constraints[0].description == "every input and output has rank <= 4"
               for r in OP_TABLE)


# --- the rules ------------------------------------------------------------------------------
ACCEPTED = {
    "conv": conv(),
    "conv uint8 relu6": conv(dtype=U8, act="RELU6", wquant=(0.02, 128)),
    "depthwise dilated stride 1": depthwise(dilation=2),
    "depthwise multiplier 2 on 1 channel": depthwise(mult=2, in_ch=1),
    "fc per-tensor": fc(),
    "max pool VALID 13": pool("MAX_POOL_2D", "VALID", 13),
    "resize 65": resize((65, 65)),
    "relu v2": unary("RELU", 2),
    "rsqrt int8": unary("RSQRT", 2),
    "strided slice shrink mask": strided_slice(shrink_axis_mask=1),
}

REJECTED = {
    "conv v4": (conv(version=4), "CONV_2D v4: max version supported is 3"),
    "conv stride 4": (conv(stride=4), "stride height and width <= 3"),
    "conv dilation": (conv(dilation=2), "dilation height and width factors are 1"),
    "conv tanh": (conv(act="TANH"), "fused activation is NONE, RELU, RELU_N1_TO_1 or RELU6"),
    "depthwise dilation + stride": (depthwise(stride=2, dilation=2), "dilation only with stride 1"),
    "depthwise multiplier": (depthwise(mult=2, in_ch=2), "depth_multiplier is 1"),
    "depthwise 1-row filter": (depthwise(kh=1), "filter height >= 2"),
    "fc per-channel": (fc(per_channel=True), "no per-channel or blockwise weights"),
    "fc non-constant bias": (fc(const_bias=False), "bias (input 2) is constant or absent"),
    "fc keep_num_dims": (fc(keep_num_dims=True), "keep_num_dims is false"),
    "fc without bias slot": (fc(with_bias_slot=False), "inputs are exactly (uint8|int8, uint8|int8, int32 or absent)"),
    "max pool SAME 13": (pool("MAX_POOL_2D", "SAME", 13), "with SAME padding, filter height and width <= 12"),
    "avg pool relu": (pool("AVERAGE_POOL_2D", act="RELU"), "no fused activation"),
    "resize 66": (resize((66, 8)), "requested size <= 65"),
    "relu v1": (unary("RELU", 1), "RELU v1: min version supported is 2"),
    "rsqrt uint8": (unary("RSQRT", 2, U8), "input type UINT8 is not supported"),
    "hard swish v2": (unary("HARD_SWISH", 2), "max version supported is 1"),
    "quantize to int16": (unary("QUANTIZE", 2, I8, out_dtype=np.int16), "every output is uint8|int8"),
    "int16 logistic": (unary("LOGISTIC", 2, np.int16), "input type INT16 is not supported"),
    "rank 5": (unary("TANH", 2, shape=(1, 2, 2, 2, 2)), "every input and output has rank <= 4"),
    "ellipsis mask": (strided_slice(ellipsis_mask=1), "ellipsis_mask and new_axis_mask are 0"),
    "new axis mask": (strided_slice(new_axis_mask=2), "ellipsis_mask and new_axis_mask are 0"),
    "sum": (single_op_model("SUM", [qin((1, 4, 4, 2)), Const(np.array([1, 2], I32))], [qout((1, 2))],
                            version=2, keep_dims=False), "SUM: op is not supported by hexagon"),
    "mean with dynamic axes": (single_op_model("MEAN", [qin((1, 4, 4, 2)), In((2,), I32)], [qout((1, 2))],
                                               version=2, keep_dims=False), "axes (input 1) is a constant tensor"),
    "pad with dynamic paddings": (single_op_model("PAD", [qin((1, 4, 4, 2)), In((4, 2), I32)],
                                                  [qout((1, 6, 6, 2))], version=2), "paddings (input 1)"),
    "squared difference uint8": (single_op_model("SQUARED_DIFFERENCE", [qin((4,), U8), qin((4,), U8)],
                                                 [qout((4,), U8)], version=2), "input type UINT8"),
    "float conv": (single_op_model("CONV_2D", [In((1, 8, 8, 4)), Const(np.ones((2, 3, 3, 4), F32)),
                                               Const(np.zeros(2, F32))], [Out((1, 8, 8, 2))], padding="SAME",
                                   stride_h=1, stride_w=1), "input type FLOAT32 is not supported (input 0): "
                                                           "the Hexagon delegate runs quantized (uint8/int8) "
                                                           "models only"),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted(name):
    s = support(ACCEPTED[name])
    assert s.ok, s.reason


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejected_with_reason(name):
    model, reason = REJECTED[name]
    s = support(model)
    assert not s.ok and reason in s.reason, s.reason


def test_float_model_refused_entirely_and_runs_on_cpu():
    model = tiny_cnn(quantized=False)
    d = create({})
    it = Interpreter(experimental_op_resolver_type=REF, model_content=model, experimental_delegates=[d])
    it.allocate_tensors()
    rep = it.delegation
    n = len(it.model.main.operators)
    assert rep.partitions == [] and rep.node_delegate == {}
    assert set(rep.rejections) == set(range(n))
    for i in range(n):
        (who, reason), = rep.rejections[i]
        assert who == "hexagon" and "quantized (uint8/int8) models only" in reason
    ref = Interpreter(experimental_op_resolver_type=REF, model_content=model)
    ref.allocate_tensors()
    x = np.random.default_rng(1).standard_normal((1, 32, 32, 3)).astype(F32)
    for i in (it, ref):
        i.set_tensor(i.get_input_details()[0]["index"], x)
        i.invoke()
    out = it.get_output_details()[0]["index"]
    np.testing.assert_array_equal(it.get_tensor(out), ref.get_tensor(out))


# --- partition limits -----------------------------------------------------------------------
def test_partition_defaults_and_cap():
    assert SPEC.partition_limits({}) == (4, 2)
    assert SPEC.partition_limits({"max_delegated_partitions": 7, "min_nodes_per_partition": 5}) == (7, 5)
    assert SPEC.partition_limits({"max_delegated_partitions": 40}) == (16, 2)
    assert create({}).partition_limits() == (4, 2)
    with pytest.warns(HexagonPartitionWarning, match="cap to at most 16 partitions"):
        d = create({"max_delegated_partitions": 40})
    assert d.partition_limits() == (16, 2)
    with pytest.warns(UserWarning, match="hexagon_lib_path=/vendor/lib is ignored"):
        create({"hexagon_lib_path": "/vendor/lib"})


def segmented_chain(segments):
    """int8 chain: runs of ADD (supported) separated by RELU v1 (refused: RELU needs version 2)."""
    b = ModelBuilder()
    t = b.add_input("x", (1, 4), I8, QA)
    one = b.add_constant("one", np.ones((1, 4), I8), QA)
    k = 0
    for s, length in enumerate(segments):
        if s:
            nxt = b.add_tensor(f"r{s}", (1, 4), I8, QA)
            b.add_operator("RELU", [t], [nxt], version=1)
            t = nxt
        for _ in range(length):
            nxt = b.add_tensor(f"t{k}", (1, 4), I8, QA)
            b.add_operator("ADD", [t, one], [nxt], version=2, fused_activation_function="NONE")
            t, k = nxt, k + 1
    b.mark_outputs(t)
    return b.build()


def test_partitions_keep_four_largest_of_at_least_two_nodes():
    model = segmented_chain([2, 3, 1, 2, 2, 4, 2])
    it = Interpreter(experimental_op_resolver_type=REF, model_content=model, experimental_delegates=[create({})])
    it.allocate_tensors()
    parts = it.delegation.partitions_of("hexagon")
    assert sorted(len(p.nodes) for p in parts) == [2, 2, 3, 4]
    assert all("RELU v1: min version supported is 2" in r for rs in it.delegation.rejections.values()
               for _, r in rs)
    it2 = Interpreter(experimental_op_resolver_type=REF, model_content=model, experimental_delegates=[create({"max_delegated_partitions": 10})])
    it2.allocate_tensors()
    assert sorted(len(p.nodes) for p in it2.delegation.partitions_of("hexagon")) == [2, 2, 2, 2, 3, 4]
    ref = Interpreter(experimental_op_resolver_type=REF, model_content=model)
    ref.allocate_tensors()
    x = np.arange(-2, 2, dtype=I8).reshape(1, 4) * 30
    for i in (it, it2, ref):
        i.set_tensor(i.get_input_details()[0]["index"], x)
        i.invoke()
    out = ref.get_output_details()[0]["index"]
    np.testing.assert_array_equal(it.get_tensor(out), ref.get_tensor(out))
    np.testing.assert_array_equal(it2.get_tensor(out), ref.get_tensor(out))


# --- execution ------------------------------------------------------------------------------
def run_both(model: bytes, seed: int = 0):
    d = create({})
    it = Interpreter(experimental_op_resolver_type=REF, model_content=model, experimental_delegates=[d])
    ref = Interpreter(experimental_op_resolver_type=REF, model_content=model)
    rng = np.random.default_rng(seed)
    for i in (it, ref):
        i.allocate_tensors()
    for det in ref.get_input_details():
        info = np.iinfo(det["dtype"])
        x = rng.integers(info.min, info.max + 1, det["shape"]).astype(det["dtype"])
        it.set_tensor(det["index"], x)
        ref.set_tensor(det["index"], x)
    it.invoke()
    ref.invoke()
    outs = [(ref.get_tensor(o["index"]), it.get_tensor(o["index"])) for o in ref.get_output_details()]
    return it, outs


def assert_within_one_step(outs):
    for want, got in outs:
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1


def test_tiny_cnn_int8_fully_delegated_bit_exact():
    it, outs = run_both(tiny_cnn(quantized=True))
    n = len(it.model.main.operators)
    assert it.delegation.nodes_of("hexagon") == list(range(n))
    for want, got in outs:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name, taken, total", [("mobilenet_v2_96_int8", 63, 65),
                                                 ("face_detection_short_range_int8", 92, 92)])
def test_shared_int8_models(models_dir, name, taken, total):
    model = (models_dir / f"{name}.tflite").read_bytes()
    it, outs = run_both(model)
    assert len(it.delegation.nodes_of("hexagon")) == taken and len(it.model.main.operators) == total
    assert_within_one_step(outs)
    for want, got in outs:  # the emulator uses the reference integer kernels: bit-exact in fact
        np.testing.assert_array_equal(got, want)


def test_shared_int8_model_within_one_step_of_litert(models_dir):
    require_module("ai_edge_litert", "ai-edge-litert (LiteRT, the test extra) is not installed")
    from oracle import run_litert

    model = (models_dir / "face_detection_short_range_int8.tflite").read_bytes()
    it, outs = run_both(model, seed=3)
    x = [it.get_tensor(d["index"]) for d in it.get_input_details()]
    want = run_litert(model, x)
    assert_within_one_step([(w, got) for w, (_, got) in zip(want, outs)])


def test_compile_refuses_float_tensors():
    model = tiny_cnn(quantized=False)
    ex = Executor(load_model(model).main)
    from acelera.core.delegate import Partition

    part = Partition((0,), (0,), (3,), {0: ex.node_context(0)}, {})
    with pytest.raises(Exception, match="integer arithmetic only"):
        HexagonRunner().compile(part)


# --- profiling ------------------------------------------------------------------------------
def test_cost_model_formula():
    e = estimate(ctx(conv()))
    assert e.macs == 1 * 8 * 8 * 2 * 3 * 3 * 4
    assert e.cycles == NODE_OVERHEAD + -(-e.macs // 256)
    e = estimate(ctx(depthwise()))
    assert e.macs == 8 * 8 * 4 * 9 and e.cycles == NODE_OVERHEAD + -(-e.macs // 64)


def test_profiling_prints_estimated_cycles_per_op():
    lines = []
    d = HexagonDelegate(hexagon_profiling=True, profile_emit=lines.append)
    it = Interpreter(experimental_op_resolver_type=REF, model_content=tiny_cnn(quantized=True), experimental_delegates=[d])
    it.allocate_tensors()
    it.invoke()
    assert len(lines) == 1  # printed once per graph, on its first invoke
    text = lines[0]
    assert "ESTIMATES" in text and "est. cycles" in text and "cost model" in text
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "AVERAGE_POOL_2D", "FULLY_CONNECTED", "SOFTMAX"):
        assert op in text
    g = d.runner.graphs[0]
    assert g.invokes == 2 and f"{g.total_cycles:,}" in text
    assert "2 invoke(s)" in d.profile_text()
    quiet = create({})
    assert quiet.profile_text() == ""


def test_cli_analyze_and_benchmark(capsys, tmp_path):
    from acelera.cli.app import main

    f32 = tmp_path / "f32.tflite"
    f32.write_bytes(tiny_cnn(quantized=False))
    q = tmp_path / "q.tflite"
    q.write_bytes(tiny_cnn(quantized=True))
    assert main(["analyze", str(f32), "--use_hexagon"]) == 0
    out = capsys.readouterr().out
    assert "hexagon (emulated" in out and "0 of 7 nodes" in out and "models only" in out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["benchmark", f"--graph={q}", "--use_hexagon", "--hexagon_profiling=true",
                     "--num_runs=2", "--warmup_runs=1", "--min_secs=0", "--warmup_min_secs=0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "hexagon delegate created (emulated)." in out and "Hexagon graph 0 profile" in out
