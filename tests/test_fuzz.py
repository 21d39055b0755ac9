"""Fuzzing: mutated model bytes either load or raise ModelError, quickly; nothing else escapes.

ACELERA_FUZZ_CASES sets the number of load cases (default 2000); ACELERA_FUZZ_RUN_CASES the
number of cases also driven through allocate_tensors() and invoke() (default 300);
ACELERA_FUZZ_DELEGATE_CASES the number driven through every available first-party delegate (150).
"""
import os
import time

import numpy as np

from acelera import AceleraError, ModelError
from acelera.core import model as model_module
from acelera.core.interpreter import Interpreter
from acelera.core.model import load_model

SEEDS = ["sine_float.tflite", "sine_float_int8.tflite", "small_cnn_f32.tflite", "small_cnn_int8.tflite",
         "hand_recrop_int8.tflite", "face_detection_short_range.tflite"]
EXTREMES = [0, 1, 0xFF, 0x7F, 0x80, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x10000, 3]


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    kind = rng.integers(0, 5)
    if kind == 0:  # flip random bytes
        for _ in range(int(rng.integers(1, 9))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
    elif kind == 1:  # overwrite an aligned word with an extreme value
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, len(b) // 4)) * 4
            b[pos:pos + 4] = int(EXTREMES[int(rng.integers(0, len(EXTREMES)))]).to_bytes(4, "little")
    elif kind == 2:  # truncate
        b = b[: int(rng.integers(0, len(b)))]
    elif kind == 3:  # insert or delete a chunk
        pos = int(rng.integers(0, len(b)))
        if rng.integers(0, 2):
            b[pos:pos] = rng.integers(0, 256, int(rng.integers(1, 64))).astype(np.uint8).tobytes()
        else:
            del b[pos:pos + int(rng.integers(1, 64))]
    else:  # flip bits in the first kilobyte, where the tables and vtables live
        for _ in range(int(rng.integers(1, 5))):
            pos = int(rng.integers(0, min(len(b), 1024)))
            b[pos] ^= 1 << int(rng.integers(0, 8))
    return bytes(b)


def seeds(models_dir):
    return [(name, (models_dir / name).read_bytes()) for name in SEEDS if (models_dir / name).exists()]


def test_fuzz_load(models_dir):
    cases = int(os.environ.get("ACELERA_FUZZ_CASES", "2000"))
    rng = np.random.default_rng(1234)
    corpus = seeds(models_dir)
    loaded = 0
    for k in range(cases):
        name, data = corpus[k % len(corpus)]
        bad = mutate(data, rng)
        t0 = time.perf_counter()
        try:
            load_model(bad, name=f"{name}#mut{k}")
            loaded += 1
        except ModelError as e:
            msg = str(e)
            assert msg.startswith(f"{name}#mut{k}") and "\n" not in msg
        elapsed = time.perf_counter() - t0
        assert elapsed < 2.0, f"case {k} ({name}) took {elapsed:.2f}s to load"
    assert 0 < loaded < cases  # the mutations exercise both paths


def test_fuzz_allocate_and_invoke(models_dir, monkeypatch):
    """Mutants that load must allocate and invoke, or fail with an AceleraError: never crash."""
    monkeypatch.setattr(model_module, "MAX_TENSOR_BYTES", 64 << 20)
    cases = int(os.environ.get("ACELERA_FUZZ_RUN_CASES", "300"))
    rng = np.random.default_rng(99)
    corpus = [c for c in seeds(models_dir) if c[0].startswith(("sine", "small_cnn"))]
    ran = 0
    for k in range(cases):
        name, data = corpus[k % len(corpus)]
        bad = mutate(data, rng)
        try:
            it = Interpreter(model_content=bad)
            it.allocate_tensors()
            for d in it.get_input_details():
                it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
            it.invoke()
            ran += 1
        except AceleraError as e:
            assert "\n" not in str(e), str(e)
    assert ran > 0


def test_fuzz_through_every_delegate(models_dir, monkeypatch):
    """Mutants that load, run with each available first-party delegate: a result or one
    AceleraError line (a delegate that cannot prepare falls back with a warning), never a crash."""
    import warnings

    from acelera import load_delegate
    from acelera.registrar.registry import get_registry
    from needs import require

    monkeypatch.setattr(model_module, "MAX_TENSOR_BYTES", 64 << 20)
    reg = get_registry()
    names = [n for n in ("gpu-opencl", "gpu-gl", "xnnpack-cpu", "nnapi", "hexagon", "coreml")
             if n in reg.specs and reg.availability(n).ok]
    require(names, "no first-party delegate is available here")
    delegates = [load_delegate(n) for n in names]
    rng = np.random.default_rng(int(os.environ.get("ACELERA_FUZZ_SEED", "5")))
    corpus = [c for c in seeds(models_dir) if c[0].startswith(("sine", "small_cnn"))]
    ran = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(int(os.environ.get("ACELERA_FUZZ_DELEGATE_CASES", "150"))):
            name, data = corpus[k % len(corpus)]
            bad = mutate(data, rng)
            for d in delegates:
                try:
                    it = Interpreter(model_content=bad, experimental_delegates=[d])
                    it.allocate_tensors()
                    for det in it.get_input_details():
                        it.set_tensor(det["index"], np.zeros(det["shape"], det["dtype"]))
                    it.invoke()
                    ran += 1
                except AceleraError as e:
                    assert "\n" not in str(e), f"{d.name}: {e}"
    assert ran > 0


def test_fuzz_multi_subgraph_models(monkeypatch):
    """Mutated models with control flow, variables and hashtables: a result or one AceleraError
    line, quickly; loops are capped so a mutated condition cannot hang the run."""
    from acelera.core.kernels import control_flow
    from cf_models import ALL

    monkeypatch.setattr(model_module, "MAX_TENSOR_BYTES", 64 << 20)
    monkeypatch.setattr(control_flow, "MAX_LOOP_ITERATIONS", 1000)
    rng = np.random.default_rng(int(os.environ.get("ACELERA_FUZZ_SEED", "11")))
    corpus = [f() for f in ALL]
    loaded = 0
    for k in range(int(os.environ.get("ACELERA_FUZZ_RUN_CASES", "300"))):
        bad = mutate(corpus[k % len(corpus)], rng)
        t0 = time.perf_counter()
        try:
            it = Interpreter(model_content=bad)
            loaded += 1
            it.allocate_tensors()
            for d in it.get_input_details():
                it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
            it.invoke()
            it.invoke()
        except AceleraError as e:
            assert "\n" not in str(e), str(e)
        assert time.perf_counter() - t0 < 5.0, f"case {k} took too long"
    assert loaded > 0
