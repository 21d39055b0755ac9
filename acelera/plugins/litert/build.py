"""Compiling acelera's example native delegate (native/acelera_addmul_delegate.c) with the
system C compiler: `build_example_delegate(directory) -> path of the .so`."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from acelera.core.errors import AceleraError

NATIVE_DIR = Path(__file__).resolve().parent / "native"
SOURCE = NATIVE_DIR / "acelera_addmul_delegate.c"
LIBRARY_NAME = "libacelera_addmul_delegate" + (".dylib" if sys.platform == "darwin" else ".so")


class BuildError(AceleraError):
    """No C compiler was found, or compiling the example delegate failed."""


def find_compiler() -> str | None:
    """$CC, else gcc, cc or clang on PATH."""
    cc = os.environ.get("CC")
    if cc and shutil.which(cc.split()[0]):
        return cc
    for name in ("gcc", "cc", "clang"):
        if shutil.which(name):
            return name
    return None


def build_example_delegate(directory: str | os.PathLike) -> Path:
    """Compile the example delegate (float32 ADD/MUL) into `directory`; returns the library path."""
    cc = find_compiler()
    if cc is None:
        raise BuildError("no C compiler found (set CC, or install gcc) to build the example delegate")
    out = Path(directory) / LIBRARY_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [*cc.split(), "-O2", "-std=c11", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra",
           "-I", str(NATIVE_DIR), "-o", str(out), str(SOURCE)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"{cc} could not compile {SOURCE.name}: {e}") from None
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise BuildError(f"{cc} failed on {SOURCE.name}: {' | '.join(msg[:5])}")
    return out
