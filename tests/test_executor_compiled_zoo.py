"""The generated plan (acelera.core.compiled_plan) is an exact stand-in for the executor's step
loop on every model of the converter zoo: the same bits over three invokes with different
inputs, the generated form made before the first."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from acelera.core import executor
from acelera.core.interpreter import Interpreter, OpResolverType

ZOO = Path(__file__).parent / "models" / "zoo"


def _inputs(it: Interpreter, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for d in it.get_input_details():
        dt = np.dtype(d["dtype"])
        if np.issubdtype(dt, np.floating):
            out.append(rng.uniform(-1, 1, d["shape"]).astype(dt))
        elif dt in (np.int32, np.int64):  # token ids and indices: small and non-negative
            out.append(rng.integers(0, 16, d["shape"]).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, int(info.max) + 1, d["shape"]).astype(dt))
    return out


def _three_runs(path: Path) -> list[list[np.ndarray]]:
    it = Interpreter(model_path=str(path), num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    rng = np.random.default_rng(7)
    runs = []
    for _ in range(3):
        for d, x in zip(it.get_input_details(), _inputs(it, rng)):
            it.set_tensor(d["index"], x)
        it.invoke()
        runs.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    return runs


@pytest.mark.parametrize("path", sorted(ZOO.glob("*.tflite")), ids=lambda p: p.stem)
def test_generated_and_interpreted_plans_give_the_same_bits(path, monkeypatch):
    monkeypatch.setattr(executor, "COMPILE_AFTER", 0)
    generated = _three_runs(path)
    monkeypatch.setattr(executor, "COMPILE_AFTER", 10**9)
    interpreted = _three_runs(path)
    for g_run, i_run in zip(generated, interpreted):
        assert len(g_run) == len(i_run)
        for g, i in zip(g_run, i_run):
            assert g.dtype == i.dtype and g.shape == i.shape
            np.testing.assert_array_equal(g, i)
