"""CI cannot go green with a first-party delegate dead: `acelera doctor --strict` fails naming it,
and with CI=true a test that needs a missing delegate, package or device fails instead of
skipping (tests/needs.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import needs
import pytest

from acelera.cli.doctor import first_party, run_doctor
from acelera.core.delegate import OpSupport, OpTable, Support
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.registry import Registry, get_registry
from acelera.registrar.spec import DelegateSpec

TESTS = Path(__file__).resolve().parent


def unavailable_plugin(module: str, name: str, reason: str):
    flag = f"use_{name.replace('-', '_')}"
    spec = DelegateSpec(name, f"{name} stand-in", "1.0", (Flag(flag, bool, False, f"enable {name}", name, name),),
                        (flag,), OpTable.of([OpSupport("ADD", 3)], name), frozenset({"float32"}), "hardware",
                        lambda: Support(False, reason), lambda options: None)
    mod = types.SimpleNamespace(__name__=module)

    @hookimpl
    def register_delegates(register):
        register(spec)
    mod.register_delegates = register_delegates
    return mod


@pytest.fixture
def registry():
    reg = Registry(entry_points=[])
    reg.load_plugin("fake_cl", lambda: unavailable_plugin(
        "acelera.plugins.fake_cl", "fake-cl", "no OpenCL device builds and runs kernels\n0:0 PoCL / cpu: kernel "
        "build failed: unknown target CPU 'generic'"), "acelera")
    reg.load_plugin("acme_npu", lambda: unavailable_plugin("acme_npu", "acme-npu", "no NPU here"), "acme-npu")
    return reg


def test_doctor_skips_unavailable_delegates_without_strict(registry):
    out = []
    assert run_doctor(registry, out.append) == 0
    assert out == ["SKIP  fake-cl (hardware): unavailable: no OpenCL device builds and runs kernels",
                   "      0:0 PoCL / cpu: kernel build failed: unknown target CPU 'generic'",
                   "SKIP  acme-npu (hardware): unavailable: no NPU here"]


def test_doctor_strict_fails_on_an_unavailable_first_party_delegate(registry):
    out = []
    assert run_doctor(registry, out.append, strict=True) == 1
    assert out == ["FAIL  fake-cl (hardware): first-party delegate unavailable: no OpenCL device builds and runs "
                   "kernels",
                   "      0:0 PoCL / cpu: kernel build failed: unknown target CPU 'generic'",
                   "SKIP  acme-npu (hardware): unavailable: no NPU here",  # not acelera's: still a skip
                   "doctor --strict: 1 first-party delegate(s) unavailable here: fake-cl"]


def test_first_party_delegates_are_acelera_plugins():
    reg = get_registry()
    for name in ("xnnpack-cpu", "gpu-opencl", "gpu-gl", "nnapi", "hexagon", "coreml"):
        assert first_party(reg, name), name


def test_require_skips_locally_and_fails_under_ci(monkeypatch):
    needs.require(True, "never raised")
    monkeypatch.setattr(needs, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="gpu-x is unavailable"):
        needs.require(False, "gpu-x is unavailable")
    monkeypatch.setattr(needs, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match=r"gpu-x is unavailable \[CI=true"):
        needs.require(False, "gpu-x is unavailable")
    with pytest.raises(pytest.fail.Exception, match="no_such_module_here"):
        needs.require_module("no_such_module_here", "a package the setup installs is missing")
    assert needs.require_module("numpy", "numpy is missing").__name__ == "numpy"


@pytest.mark.parametrize("ci, code, outcome", [("", 5, "1 skipped"), ("true", 2, "1 error")])  # 5: none ran
def test_module_guard_skips_locally_and_errors_under_ci(tmp_path, ci, code, outcome):
    (tmp_path / "test_guarded.py").write_text(
        "from needs import require\nrequire(False, 'fake-delegate is unavailable here')\n\n"
        "def test_never_runs():\n    pass\n")
    env = {**os.environ, "CI": ci, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-p", "no:acelera_conformance", str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == code and outcome in r.stdout, r.stdout + r.stderr
    assert "fake-delegate is unavailable here" in r.stdout
