"""Every code block of the README runs as written (model.tflite: a sample model acelera builds;
lib.so: the example native delegate, compiled with gcc), in a fresh directory.

The first block holds the two setup commands CI itself runs (`bash scripts/run`,
`bash scripts/test`); it is checked for exactly those lines, not run from inside the tests.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from acelera import samples
from acelera.plugins.litert import build_example_delegate

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
BIN = Path(sys.executable).parent


def blocks() -> list[tuple[int, str, str]]:
    text = (ROOT / "README.md").read_text()
    return [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def commands(body: str) -> list[str]:
    """Shell lines, with backslash continuations joined and trailing comments kept."""
    return [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip() and not c.strip().startswith("#")]


@pytest.fixture(scope="module")
def native_lib(tmp_path_factory) -> Path:
    return Path(build_example_delegate(tmp_path_factory.mktemp("native")))


@pytest.fixture
def workdir(tmp_path, native_lib) -> Path:
    """A fresh directory per block: model.tflite and lib.so, nothing else."""
    (tmp_path / "model.tflite").write_bytes(samples.tiny_cnn())
    os.symlink(native_lib, tmp_path / "lib.so")
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def test_every_block_is_tagged_and_the_first_is_the_two_commands():
    found = blocks()
    assert found[0][1:] == ("bash", "bash scripts/run\nbash scripts/test\n")
    assert all(lang in ("bash", "sh", "python") for _, lang, _ in found), [(n, lang) for n, lang, _ in found]


CASES = [(n, lang, body) for n, lang, body in blocks()[1:]]


@pytest.mark.slow
@pytest.mark.parametrize("line, lang, body", CASES, ids=[f"line{n}-{lang}" for n, lang, _ in CASES])
def test_readme_block_runs(workdir, line, lang, body):
    if lang == "python":
        runs = [[sys.executable, "-c", body]]
    else:
        runs = [["bash", "-ec", c] for c in commands(body)]
    for cmd in runs:
        r = subprocess.run(cmd, cwd=workdir, env=_env(), capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"README line {line}: {cmd[-1][:200]}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
