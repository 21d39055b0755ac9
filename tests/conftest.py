import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from needs import IN_CI, require  # noqa: E402  (skips that fail under CI=true: tests/needs.py)

MODELS = Path(os.environ.get("ACELERA_MODELS", Path(__file__).resolve().parents[1].parent / "shared" / "models"))


@pytest.fixture(scope="session")
def models_dir() -> Path:
    require(MODELS.is_dir(), f"shared models not found at {MODELS} (set ACELERA_MODELS)")
    return MODELS


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: whole-model tests (run in CI, skipped by -m 'not slow')")
    config.addinivalue_line("markers", "requires(condition, reason): skip unless condition; fail under CI=true "
                            "(tests/needs.py)")


def pytest_report_header(config):
    if IN_CI:
        return "CI=true: a missing first-party delegate, package or device fails its tests instead of skipping them"


def pytest_runtest_setup(item):
    for mark in item.iter_markers("requires"):
        require(*mark.args, **mark.kwargs)
