"""The acelera CLI end to end: in-process (main / CliRunner) and as a real subprocess."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acelera.cli.app import build_app, main
from acelera.registrar.registry import get_registry
from acelera.samples import tiny_cnn

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "third_party_delegate"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("m") / "tiny.tflite"
    p.write_bytes(tiny_cnn())
    return p


def run_main(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_delegates_list_json(capsys):
    code, out, _ = run_main(capsys, "delegates", "list", "--json")
    assert code == 0
    data = json.loads(out)
    names = {d["name"]: d for d in data["delegates"]}
    assert {"xnnpack-cpu", "gpu-opencl", "gpu-gl", "nnapi", "hexagon", "coreml"} <= set(names)
    assert names["nnapi"]["backend"] == "emulated"
    assert names["gpu-opencl"]["available"] in (True, False) and "reason" in names["gpu-opencl"]


def test_delegates_show(capsys):
    code, out, _ = run_main(capsys, "delegates", "show", "hexagon")
    assert code == 0
    assert "--use_hexagon" in out and "CONV_2D" in out and "full-integer" in out and "max 4" in out


def test_unknown_delegate_is_one_line_error(capsys):
    code, _, err = run_main(capsys, "delegates", "show", "nope")
    assert code == 1 and err.startswith("error: no delegate named 'nope'") and err.count("\n") == 1


def test_doctor(capsys):
    code, out, _ = run_main(capsys, "doctor")
    assert "SKIP  nnapi (emulated): unavailable" in out or "PASS  nnapi" in out
    assert code in (0, 1)


def test_benchmark_tflite_command_line(capsys, model):
    code, out, _ = run_main(capsys, "benchmark", f"--graph={model}", "--num_threads=1", "--use_xnnpack=false",
                            "--num_runs=3", "--min_secs=0.01", "--warmup_runs=1", "--warmup_min_secs=0.01")
    assert code == 0, out
    assert "Inference timings in us: Init:" in out
    assert "Running benchmark for at least 3 iterations" in out


def test_benchmark_missing_model(capsys, tmp_path):
    code, _, err = run_main(capsys, "benchmark", f"--graph={tmp_path / 'no.tflite'}", "--num_runs=1")
    assert code == 1 and "cannot read model file" in err and err.count("\n") == 1


def test_unknown_flag_suggests(capsys, model):
    code, _, err = run_main(capsys, "benchmark", f"--graph={model}", "--num_run=3")
    assert code == 2 and "--num_run" in err


def test_bad_flag_value(capsys, model):
    code, _, err = run_main(capsys, "benchmark", f"--graph={model}", "--use_gpu=maybe")
    assert code == 1 and "expected true/false/1/0" in err


def test_unavailable_delegate_is_clear(capsys, model):
    from plugin_helpers import EP, plugin

    from acelera.registrar.registry import Registry
    reg = Registry([EP("npu", plugin("npu", available=False))])
    code = main(["benchmark", f"--graph={model}", "--use_npu", "--num_runs=1"], registry=reg)
    err = capsys.readouterr().err
    assert code == 1 and err == "error: npu is unavailable: no device\n"


def test_analyze_text_json_svg(capsys, model, tmp_path):
    code, out, _ = run_main(capsys, "analyze", str(model), "--use_hexagon", "--use_gpu")
    assert code == 0
    assert "hexagon (emulated" in out and "input type FLOAT32 is not supported" in out
    code, out, _ = run_main(capsys, "analyze", str(model), "--json", f"--svg={tmp_path / 'g.svg'}")
    data = json.loads(out)
    assert len(data["scenarios"]) >= 6  # no flags: every delegate planned on its own
    gpu = next(s for s in data["scenarios"] if s["delegates"][0]["name"] == "gpu-opencl")
    assert gpu["summary"]["gpu-opencl"] == 7 and gpu["summary"]["cpu"] == 0
    assert "<svg" in (tmp_path / "g.svg").read_text()


def test_help_lists_plugin_flags_in_panels():
    from typer.testing import CliRunner
    res = CliRunner().invoke(build_app(get_registry()), ["benchmark", "--help"], terminal_width=200)
    assert res.exit_code == 0
    for text in ("--use_gpu", "--gpu_backend", "--use_nnapi", "--use_hexagon", "--num_runs", "GPU delegate"):
        assert text in res.output, text


def test_cli_runner_analyze(model):
    from typer.testing import CliRunner
    res = CliRunner().invoke(build_app(get_registry()), ["analyze", str(model), "--use-coreml"])
    assert res.exit_code == 0 and "coreml (emulated" in res.output


def test_subprocess(model):
    res = subprocess.run([sys.executable, "-m", "acelera", "benchmark", f"--graph={model}", "--num_runs=2",
                          "--min_secs=0", "--warmup_runs=1", "--warmup_min_secs=0"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Inference timings in us" in res.stdout
    res = subprocess.run([sys.executable, "-m", "acelera", "analyze", "/nonexistent.tflite"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and res.stderr.startswith("error: ") and "Traceback" not in res.stderr


def test_new_delegate_matches_example(tmp_path):
    from acelera.cli.scaffold import files
    for rel, text in files("example").items():
        assert (EXAMPLE / rel).read_text() == text, rel
    code = main(["new-delegate", "my-npu", "--dir", str(tmp_path / "pkg")])
    assert code == 0 and (tmp_path / "pkg" / "acelera_my_npu.py").exists()
    assert main(["new-delegate", "Bad Name", "--dir", str(tmp_path / "x")]) == 1


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory):
    """The example plugin installed into a private site directory (added with PYTHONPATH)."""
    site = tmp_path_factory.mktemp("site")
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--target", str(site), str(EXAMPLE)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    env = dict(os.environ, PYTHONPATH=str(site))
    return env


def acelera_cmd(env, *args):
    return subprocess.run([sys.executable, "-m", "acelera", *args], capture_output=True, text=True, env=env, timeout=120)


def test_third_party_plugin_installed_and_removed(installed_example, model):
    env = installed_example
    listing = json.loads(acelera_cmd(env, "delegates", "list", "--json").stdout)
    assert "example" in [d["name"] for d in listing["delegates"]]
    for tool in ("benchmark", "analyze"):
        assert "--use_example" in acelera_cmd(env, tool, "--help").stdout
    res = acelera_cmd(env, "benchmark", f"--graph={model}", "--use_example", "--num_runs=2", "--min_secs=0",
                      "--warmup_runs=1", "--warmup_min_secs=0")
    assert res.returncode == 0, res.stderr
    assert "example delegate created" in res.stdout
    assert "partially executed by the delegate" in res.stdout
    res = acelera_cmd(env, "analyze", str(model), "--use_example", "--json")
    summary = json.loads(res.stdout)["scenarios"][0]["summary"]
    assert summary["example"] == 2  # CONV_2D and ADD, in two partitions around the depthwise conv
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE)],
                         capture_output=True, text=True, env=env, timeout=300, cwd=EXAMPLE)
    assert res.returncode == 0, res.stdout + res.stderr
    # "uninstalled": without the site directory the plugin and its flag are gone
    env_without = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    listing = json.loads(acelera_cmd(env_without, "delegates", "list", "--json").stdout)
    assert "example" not in [d["name"] for d in listing["delegates"]]
    assert "--use_example" not in acelera_cmd(env_without, "benchmark", "--help").stdout


def test_inference_diff_command(capsys, model, tmp_path):
    out_json = tmp_path / "diff.json"
    code, out, _ = run_main(capsys, "inference-diff", f"--model_file={model}", "--num_runs=3",
                            f"--output_file_path={out_json}")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "Num evaluation runs: 3"
    assert lines[1].startswith("Reference run latency: avg=") and lines[3] == "OutputDiff[0]: avg_error=0, std_dev=0"
    data = json.loads(out_json.read_text())
    assert data["num_runs"] == 3
    code, _, err = run_main(capsys, "inference-diff", f"--model_file={model}", "--delegate=tpu")
    assert code == 1 and "Unsupported TFLite delegate: tpu" in err


def test_conformance_command(capsys, tmp_path):
    code, _, err = run_main(capsys, "conformance")
    assert code == 2 and err.startswith("error: no delegate to certify") and "--delegate" in err
    code, _, err = run_main(capsys, "conformance", "--delegate", "nope")
    assert code == 1 and "no delegate named 'nope'" in err
    code, out, _ = run_main(capsys, "conformance", "--delegate", "hexagon", "--shard", "0/12",
                            "--report", str(tmp_path))
    assert code == 0, out
    cert = json.loads((tmp_path / "hexagon" / "certificate.json").read_text())
    assert cert["verdict"] == "PASS" and cert["backend"] == "emulated"
    assert (tmp_path / "hexagon" / "junit.xml").read_text().startswith("<?xml")


def test_eval_commands_are_wired(capsys, tmp_path):
    code, _, err = run_main(capsys, "eval", "image-classification", f"--model_file={tmp_path / 'm.tflite'}")
    assert code == 1 and err.startswith("error: ")
    from typer.testing import CliRunner
    res = CliRunner().invoke(build_app(get_registry()), ["eval", "object-detection", "--help"], terminal_width=200)
    assert res.exit_code == 0 and "--ground_truth_json" in res.output and "--use_nnapi" in res.output
