"""The nnapi plugin: TFLite's NNAPI rules by Android SDK level, emulated devices, execution."""
import warnings

import numpy as np
import pytest

from acelera import Interpreter, load_delegate
from acelera.cli.app import main
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.interpreter import OpResolverType
from acelera.plugins.nnapi import SPEC
from acelera.plugins.nnapi.delegate import NnapiDelegate, NnapiOptionWarning
from acelera.registrar.flags import FlagError
from acelera.samples import tiny_cnn


def ctx(model: bytes, i: int = 0):
    return Interpreter(model_content=model)._rt.ex.node_context(i)


def verdict(model: bytes, **options):
    return load_delegate("nnapi", options).is_node_supported(ctx(model))


def mean(dtype=np.float32, quant=None):
    return single_op_model("MEAN", [In((1, 4, 4, 8), dtype, quant), Const(np.array([1, 2], np.int32))],
                           [Out((1, 8), dtype, quant)], keep_dims=False)


def binary(op, dtype=np.float32, quant=None, version=1, act="NONE"):
    return single_op_model(op, [In((2, 3), dtype, quant), In((2, 3), dtype, quant)], [Out((2, 3), dtype, quant)],
                           version=version, fused_activation_function=act)


def conv(version=1, dilation=1, weights_dtype=np.float32):
    w = np.ones((4, 3, 3, 2), weights_dtype)
    wq = (np.float32(0.1), 0) if weights_dtype == np.int8 else None
    return single_op_model("CONV_2D", [In((1, 8, 8, 2)), Const(w, wq), Const(np.zeros(4, np.float32))],
                           [Out((1, 8, 8, 4))], version=version, padding="SAME", stride_h=1, stride_w=1,
                           dilation_h_factor=dilation, dilation_w_factor=dilation, fused_activation_function="NONE")


Q = (0.05, 3)


def test_flags_keep_tflite_names_and_defaults():
    flags = {f.name: (f.type, f.default) for f in SPEC.flags}
    assert flags == {
        "use_nnapi": (bool, False), "nnapi_execution_preference": (str, ""), "nnapi_execution_priority": (str, ""),
        "nnapi_accelerator_name": (str, ""), "disable_nnapi_cpu": (bool, True), "nnapi_allow_fp16": (bool, False),
        "nnapi_allow_dynamic_dimensions": (bool, False), "nnapi_use_burst_mode": (bool, False),
        "nnapi_support_library_path": (str, ""), "nnapi_android_sdk": (int, 30)}
    assert "default 30" in next(f.help for f in SPEC.flags if f.name == "nnapi_android_sdk")
    assert SPEC.backend == "emulated" and SPEC.probe().ok and SPEC.fp16_weights_aware


def test_sdk_level_gates_ops_and_names_the_level():
    s = verdict(mean(), nnapi_android_sdk=27)
    assert not s.ok and s.reason == "MEAN requires Android SDK 28 (emulating 27)" and s.kind == "sdk"
    assert verdict(mean(), nnapi_android_sdk=28).ok
    assert not verdict(mean(np.int8, Q), nnapi_android_sdk=28).ok  # quantized MEAN from 29
    assert verdict(mean(np.int8, Q), nnapi_android_sdk=29).ok
    s = verdict(mean(), nnapi_android_sdk=26)
    assert not s.ok and "NNAPI needs Android SDK 27 (emulating 26)" in s.reason


def test_input_types_by_level():
    s = verdict(binary("SUB", np.int8, Q), nnapi_android_sdk=28)
    assert s.reason == "SUB: input type INT8 requires Android SDK 29 (emulating 28)"
    s = verdict(binary("ADD", np.int32), nnapi_android_sdk=29)
    assert s.reason == "ADD: input type INT32 requires Android SDK 30 (emulating 29)"
    assert verdict(binary("ADD", np.int32)).ok  # 30: INT32 ADD on emu-gpu-fp16
    s = verdict(binary("ADD", np.int32, act="RELU"))
    assert not s.ok and "INT32 inputs take no fused activation" in s.reason
    s = verdict(binary("DIV", np.int32))
    assert not s.ok and "input type INT32 is not supported by NNAPI" in s.reason


def test_versions_and_the_accelerator_rule():
    s = verdict(conv(version=6))
    assert not s.ok and s.reason == "CONV_2D v6: max version supported is 5" and s.kind == "version"
    mul3 = binary("MUL", version=3)
    assert verdict(mul3).ok  # disable_nnapi_cpu on 29+: an accelerator is specified
    assert verdict(mul3, nnapi_accelerator_name="emu-gpu-fp16").ok
    assert "max version supported is 2" in verdict(mul3, disable_nnapi_cpu=False).reason
    assert "max version supported is 2" in verdict(mul3, nnapi_accelerator_name="nnapi-reference").reason


def test_rules_lifted_at_29():
    s = verdict(conv(dilation=2), nnapi_android_sdk=28)
    assert s.reason == "CONV_2D: dilation requires Android SDK 29 (emulating 28)"
    assert verdict(conv(dilation=2), nnapi_android_sdk=29).ok
    s = verdict(conv(weights_dtype=np.int8), nnapi_android_sdk=28)
    assert "hybrid" in s.reason and "requires Android SDK 29 (emulating 28)" in s.reason
    assert verdict(conv(weights_dtype=np.int8)).ok  # hybrid conv from 29, computed as float


def test_accelerator_names():
    with pytest.raises(FlagError, match=r"Must be one of: \{nnapi-reference, emu-gpu-fp16, emu-dsp-int8\}"):
        load_delegate("nnapi", {"nnapi_accelerator_name": "qti-dsp"})
    s = verdict(conv(), nnapi_accelerator_name="emu-dsp-int8")
    assert not s.ok and "emu-dsp-int8 does not compute CONV_2D on FLOAT32" in s.reason and s.kind == "device"
    assert verdict(conv(), nnapi_accelerator_name="nnapi-reference").ok
    with pytest.warns(NnapiOptionWarning, match="needs Android 10"):  # no device selection before 29
        d = load_delegate("nnapi", {"nnapi_accelerator_name": "emu-dsp-int8", "nnapi_android_sdk": 28})
    assert d.config.targets is None and d.is_node_supported(ctx(conv())).ok


def test_support_library_path_is_refused_by_the_emulation(tmp_path):
    lib = tmp_path / "libnnapi_sl.so"
    lib.write_bytes(b"\x7fELF")
    with pytest.raises(FlagError, match=r"nnapi_support_library_path=.*libnnapi_sl.so \(exists\): .*cannot load"):
        load_delegate("nnapi", {"nnapi_support_library_path": str(lib)})


def test_nnapi_flags_without_use_nnapi_warn(tmp_path):
    model = tmp_path / "tiny.tflite"
    model.write_bytes(tiny_cnn())
    with pytest.warns(UserWarning, match=r"^--nnapi_accelerator_name set but nnapi is not enabled: "
                                         r"--use_nnapi=true is needed$"):
        assert main(["benchmark", f"--graph={model}", "--nnapi_accelerator_name=nnapi-reference",
                     "--num_runs=1", "--warmup_runs=0"]) == 0
    # the CLI's one-line form lasts only while main() runs (tests/test_registrar_commands.py)
    assert warnings.formatwarning("x", UserWarning, "f.py", 1).startswith("f.py:1: UserWarning: x")


def test_listing_says_emulated(capsys):
    assert main(["delegates", "show", "nnapi"]) == 0
    out = capsys.readouterr().out
    assert "(emulated)" in out and "--nnapi_android_sdk" in out and "MEAN" in out and "max unlimited" in out


def test_device_feature_level_caps_the_target():
    m = single_op_model("MIRROR_PAD", [In((1, 4, 4, 2)), Const(np.ones((4, 2), np.int32))], [Out((1, 6, 6, 2))],
                        mode="REFLECT")
    assert verdict(m, nnapi_android_sdk=34).ok  # feature level 7, emu-gpu-fp16 is FL7
    assert "requires NNAPI feature level 7 (Android SDK 34) (emulating 33)" in verdict(m, nnapi_android_sdk=33).reason
    s = verdict(m, nnapi_android_sdk=34, nnapi_accelerator_name="emu-dsp-int8")
    assert "emulating 34; emu-dsp-int8 caps the target at Android SDK 30" in s.reason
    s = verdict(m, nnapi_android_sdk=34, disable_nnapi_cpu=False)  # TFLite validates with the API level
    assert "with no target devices TFLite checks API level 34" in s.reason


def test_unknown_preference_and_priority_warn_and_fall_back():
    with pytest.warns(NnapiOptionWarning, match=r"\(fastest\) is not a valid nnapi execution preference"):
        d = load_delegate("nnapi", {"nnapi_execution_preference": "fastest"})
    assert d.config.preference == "undefined"
    with pytest.warns(NnapiOptionWarning, match="priority"):
        d = load_delegate("nnapi", {"nnapi_execution_priority": "urgent"})
    assert d.config.priority == "medium"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = load_delegate("nnapi", {"nnapi_execution_preference": "low_power", "nnapi_execution_priority": "high"})
    assert (d.config.preference, d.config.priority) == ("low_power", "high")


def alternating(n_supported: int) -> bytes:
    """RELU, CEIL, RELU, CEIL, ... : CEIL is not an NNAPI op, so each RELU is its own partition."""
    b = ModelBuilder()
    t = b.add_input("x", (2, 3), np.float32)
    for i in range(2 * n_supported - 1):
        nxt = b.add_tensor(f"t{i}", (2, 3), np.float32)
        b.add_operator("RELU" if i % 2 == 0 else "CEIL", [t], [nxt])
        t = nxt
    b.mark_outputs(t)
    return b.build()


@pytest.mark.parametrize("option,expected", [(0, 4), (2, 2), (-1, 3), (None, 3)])
def test_partition_limits(option, expected):
    d = NnapiDelegate() if option is None else load_delegate("nnapi", {"max_delegated_partitions": option})
    it = Interpreter(model_content=alternating(4), experimental_delegates=[d])
    it.allocate_tensors()
    assert len(it._rt.ex.report.partitions_of("nnapi")) == expected


def test_analyze_names_the_sdk_level_and_the_emulated_backend(capsys, models_dir):
    code = main(["analyze", str(models_dir / "small_cnn_f32.tflite"), "--use_nnapi", "--nnapi_android_sdk=27"])
    out = capsys.readouterr().out
    assert code == 0
    assert "nnapi (emulated" in out and "MEAN requires Android SDK 28 (emulating 27)" in out
    code = main(["analyze", str(models_dir / "small_cnn_f32.tflite"), "--use_nnapi", "--nnapi_accelerator_name=x"])
    err = capsys.readouterr().err
    assert code == 1 and "Could not find the specified NNAPI accelerator: x" in err and err.count("\n") == 1


def test_declared_table_agrees_with_the_default_delegate(models_dir):
    d = load_delegate("nnapi", {})
    models = [mean(), mean(np.int8, Q), binary("ADD", np.int32), binary("DIV", np.int32), binary("MUL", version=3),
              conv(), conv(version=6), conv(weights_dtype=np.int8), alternating(2)]
    nodes = [ctx(m, i) for m in models for i in range(len(Interpreter(model_content=m).model.main.operators))]
    for name in ("small_cnn_int8", "mobilenet_v2_96_f32", "face_detection_short_range_int16x8"):
        it = Interpreter(model_path=str(models_dir / f"{name}.tflite"))
        nodes += [it._rt.ex.node_context(i) for i in range(len(it.model.main.operators))]
    for n in nodes:
        assert SPEC.op_table.check(n).ok == d.is_node_supported(n).ok, n.op.name


def run(model, delegates, seed=0):
    kw = {"model_path": str(model)} if not isinstance(model, bytes) else {"model_content": model}
    it = Interpreter(**kw, experimental_delegates=delegates, num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    rng = np.random.default_rng(seed)
    for det in it.get_input_details():
        dt = det["dtype"]
        x = (rng.uniform(-1, 1, det["shape"]) if np.issubdtype(dt, np.floating)
             else rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, det["shape"]))
        it.set_tensor(det["index"], x.astype(dt))
    it.invoke()
    return [it.get_tensor(det["index"]) for det in it.get_output_details()], it


def assert_close(ref, got, precision):
    for a, b in zip(ref, got):
        assert a.dtype == b.dtype and a.shape == b.shape
        if precision == "float16":
            assert np.max(np.abs(a - b)) <= 1e-2 + 5e-2 * np.max(np.abs(a))
        elif precision == "float32":
            assert np.max(np.abs(a - b)) <= 1e-5 + 1e-5 * np.max(np.abs(a))
        else:  # integer: at most one quantization step
            assert np.max(np.abs(a.astype(np.int64) - b)) <= 1


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("options", [{}, {"nnapi_accelerator_name": "nnapi-reference"},
                                     {"nnapi_accelerator_name": "nnapi-reference", "nnapi_allow_fp16": True}])
def test_tiny_cnn_against_the_cpu_reference(quantized, options):
    model = tiny_cnn(quantized=quantized)
    ref, _ = run(model, [])
    d = load_delegate("nnapi", options)
    got, it = run(model, [d])
    rep = it._rt.ex.report
    assert len(rep.nodes_of("nnapi")) == len(it.model.main.operators) and len(rep.partitions_of("nnapi")) == 1
    assert d.backend == "emulated"
    precision = d.precision["integer" if quantized else "float"]
    named = options.get("nnapi_accelerator_name")
    expected_device = named or ("emu-dsp-int8" if quantized else "emu-gpu-fp16")
    assert set(d.runner.placements.values()) == {expected_device}
    assert precision == {("emu-dsp-int8"): "integer", "emu-gpu-fp16": "float16"}.get(
        expected_device, "exact" if quantized else "float16" if options.get("nnapi_allow_fp16") else "float32")
    assert_close(ref, got, precision)
    if not quantized and precision == "float16":
        assert any(np.any(a != b) for a, b in zip(ref, got))  # fp16 arithmetic really happened


@pytest.mark.parametrize("name", ["small_cnn_int8", "mobilenet_v2_96_f32"])
def test_shared_models_against_the_cpu_reference(models_dir, name):
    path = models_dir / f"{name}.tflite"
    ref, _ = run(path, [])
    d = load_delegate("nnapi", {})
    got, it = run(path, [d])
    assert len(it._rt.ex.report.nodes_of("nnapi")) == len(it.model.main.operators)
    assert_close(ref, got, d.precision["integer" if "int8" in name else "float"])
