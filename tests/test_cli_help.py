"""--help and `delegates show`: flag names whole at any width, TFLite's type labels, escaped text; --version."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from acelera import __version__
from acelera.registrar.registry import get_registry

ACELERA = [sys.executable, "-m", "acelera"]


def _run(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS=str(columns), TERM="dumb")
    return subprocess.run([*ACELERA, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_benchmark_help_never_cuts_a_flag_name(columns):
    out = _run("benchmark", "--help", columns=columns).stdout
    assert "…" not in out
    flat = "".join(out.split())  # a folded description may split words, never a flag name's column
    for name in get_registry().flagset.flags:
        assert f"--{name}" in out or f"--{name}" in flat, name


@pytest.mark.parametrize("command", [["benchmark"], ["conformance"], ["inference-diff"], ["analyze"], []])
def test_help_uses_tflite_type_labels_and_escapes_text(command):
    out = _run(*command, "--help").stdout
    for bad in ("<list[str]>", "<path>", "<bool>", "<int>", "INT32", "STRING", "BOOL"):
        assert bad not in out, (command, bad)
    if command == ["benchmark"]:
        assert "[tool.acelera]" in out  # not swallowed as rich markup
        assert " bool " in out and (" int32 " in out or " int " in out) and " string " in out


def test_delegates_show_keeps_flag_names_whole():
    out = _run("delegates", "show", "gpu-opencl").stdout
    assert "…" not in out
    assert "--gpu_experimental_enable_quant" in out and "--gpu_inference_for_sustained_speed" in out
    assert " str " not in out and " string " in out


def test_version():
    assert _run("--version").stdout.strip() == f"acelera {__version__}"
    assert _run("-V").stdout.strip() == f"acelera {__version__}"
    lines = _run("--version", "-v").stdout.splitlines()
    assert lines[0] == f"acelera {__version__}"
    for name in ("xnnpack-cpu", "gpu-opencl", "nnapi"):
        assert any(line.split()[0] == name and "acelera" in line for line in lines[1:]), name
    assert "--version" in _run("--help").stdout
