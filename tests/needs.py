"""Skips that CI does not allow: a test whose first-party delegate, package or device is missing.

`require(condition, reason)` (in a test, a fixture or at module level), `require_module(name,
reason)` (like pytest.importorskip) and the `requires(condition, reason)` marker (tests/conftest.py)
skip with the reason locally. With CI=true (.ci/run sets it) they fail with the same reason, so CI
cannot go green while a first-party delegate (gpu-opencl, gpu-gl, ...), a package the setup
installs (pyopencl, moderngl, numba, ai-edge-litert, pillow, pycocotools), the device the setup
provides (PoCL, Mesa) or the shared models beside the checkout are missing.

Skips that do not depend on what this machine has stay plain pytest.skip / skipif: a
parametrization that does not apply, a path that exists only on macOS or only on Mesa, an
optional extra the setup does not install (coremltools).
"""
from __future__ import annotations

import importlib
import os

import pytest

#: True when the CI environment variable is set to anything but "", 0, false or no
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require(condition: object, reason: str) -> None:
    """Skip the calling test (or test module) unless `condition`; under CI=true, fail."""
    __tracebackhide__ = True  # reports point at the caller
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{reason} [CI=true: a first-party delegate, or a package or device the setup provides, "
                    "must be available; run bash scripts/setup as root, then acelera doctor --strict]",
                    pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_module(name: str, reason: str):
    """The imported module `name`, else require(False, reason) with the import error."""
    __tracebackhide__ = True
    try:
        return importlib.import_module(name)
    except ImportError as e:
        require(False, f"{reason} ({e})")
