import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

MODELS = Path(os.environ.get("ACELERA_MODELS", Path(__file__).resolve().parents[1].parent / "shared" / "models"))


@pytest.fixture(scope="session")
def models_dir() -> Path:
    if not MODELS.is_dir():
        pytest.skip(f"shared models not found at {MODELS} (set ACELERA_MODELS)")
    return MODELS


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: whole-model tests (run in CI, skipped by -m 'not slow')")
