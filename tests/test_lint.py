"""The code stays lint-clean (ruff: pyflakes, pycodestyle, import order, bugbear) and every
module of acelera/ stays clean under mypy (no module is exempt)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_ruff():
    r = _run(str(BIN / "ruff"), "check", "acelera", "tests", "benchmarks", "tools")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_mypy():
    r = _run(str(BIN / "mypy"), "acelera")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
