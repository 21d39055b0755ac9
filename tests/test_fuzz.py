"""Fuzzing: mutated model bytes either load or raise ModelError, quickly; nothing else escapes.

ACELERA_FUZZ_CASES sets the number of load cases (default 2000); ACELERA_FUZZ_RUN_CASES the
number of cases also driven through allocate_tensors() and invoke() (default 300);
ACELERA_FUZZ_DELEGATE_CASES the number driven through every available first-party delegate (150).

Field-level mutants (acelera.conformance.mutate: shapes, types, indices, quantization, options,
subgraph references, operator codes, buffer bytes, overwritten in place so the flatbuffer stays
well formed) of the seed models of benchmarks/fuzz_campaign.py, which runs the long campaign:
ACELERA_FUZZ_FIELD_CASES on the reference (default 400), ACELERA_FUZZ_FIELD_DELEGATE_CASES
through every available first-party delegate (default 38: each seed twice), seed
ACELERA_FUZZ_FIELD_SEED (default 0). Each case runs with max_memory_bytes = 1 GiB and must finish
within FIELD_CASE_SECONDS.
"""
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pytest

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

    from needs import require

    from acelera import load_delegate
    from acelera.registrar.registry import get_registry

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
    from cf_models import ALL

    from acelera.core.kernels import control_flow

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


# --- field-level mutations ------------------------------------------------------------------
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fuzz_campaign  # the campaign's seed models and driver, so that its --replay reproduces a case

from acelera.conformance import mutate as fields  # mutate() above is the byte mutator

FIELD_CASE_SECONDS = 10.0
FIELD_BUDGET = 1 << 30
FIELD_SEED = int(os.environ.get("ACELERA_FUZZ_FIELD_SEED", "0"))


@pytest.fixture(scope="module")
def field_corpus(models_dir):
    seeds = fuzz_campaign.seed_models()
    return [(name, data, fields.find_sites(data)) for name, data in seeds.items()]


def test_field_mutator_sites_and_determinism(field_corpus):
    """Every kind of site the seeds hold is found; a mutant is the same for the same (seed, case),
    keeps the file's size and its flatbuffer structure (the same sites at the same offsets), and
    differs from the seed only inside the mutated fields."""
    kinds = {s.kind for _, _, sites in field_corpus for s in sites}
    # no seed has operator intermediates or Buffer.offset/size (models over 2 GB)
    assert kinds == set(fields.KINDS) - {"op_intermediate", "buffer_field"}, kinds
    for name, data, sites in field_corpus:
        layout = [(s.offset, s.size, s.kind) for s in sites]
        for case in range(3):
            m = fields.mutant(data, FIELD_SEED, case, sites)
            assert m.data == fields.mutant(data, FIELD_SEED, case).data, name
            assert len(m.data) == len(data)
            assert [(s.offset, s.size, s.kind) for s in fields.find_sites(m.data)] == layout, (name, m.describe())
            touched = {i for mu in m.mutations for i in range(mu.offset, mu.offset + mu.size)}
            diff = {i for i, (a, b) in enumerate(zip(data, m.data)) if a != b}
            assert diff <= touched, (name, m.describe())
    assert fields.mutant(data, FIELD_SEED, 0).data != fields.mutant(data, FIELD_SEED + 1, 0).data


def test_field_mutator_values():
    shape = fields.Site(0, 4, "shape", "i", "t shape[0]", 7, 2)
    assert {0, -1, 1, 6, 8, 14, 2**31 - 1, -2**31} <= set(fields.candidates(shape, np.random.default_rng(0)))
    idx = fields.Site(0, 4, "op_input", "i", "op inputs[0]", 3, 10)
    assert {-1, 0, 9, 10, 11, 4} <= set(fields.candidates(idx, np.random.default_rng(0)))
    ttype = fields.Site(0, 1, "tensor_type", "b", "t type", 0)
    assert set(range(fields.TENSOR_TYPES)) | {-1, 127, fields.TENSOR_TYPES} <= set(
        fields.candidates(ttype, np.random.default_rng(0)))
    scale = fields.Site(0, 4, "quant_scale", "f", "t scale", 0.5)
    vals = fields.candidates(scale, np.random.default_rng(0))
    assert any(np.isnan(v) for v in vals) and float("inf") in vals and 0.0 in vals and 1e-45 in vals
    ref = fields.Site(0, 4, "subgraph_ref", "i", "WhileOptions.BodySubgraphIndex", 2, 3, own=0)
    assert {0, 2, 3, -1} <= set(fields.candidates(ref, np.random.default_rng(0)))
    assert fields.pack("I", -1) == b"\xff\xff\xff\xff" and fields.pack("b", 200) == bytes([200])
    assert fields.option_fields("WhileOptions") == {4: ("CondSubgraphIndex", "i", False),
                                                    6: ("BodySubgraphIndex", "i", False)}
    assert fields.option_fields("Conv2DOptions")[4] == ("Padding", "b", False)
    assert fields.option_fields("ReshapeOptions") == {4: ("NewShape", "i", True)}


def _field_cases(field_corpus, cases: int, delegates: list) -> tuple[int, int, list[str]]:
    """Run `cases` mutants (case k of seed model k mod len) on each engine; (ran, errors, failures)."""
    ran = errors = 0
    failures = []
    for k in range(cases):
        name, data, sites = field_corpus[k % len(field_corpus)]
        m = fields.mutant(data, FIELD_SEED, k, sites)
        for d in delegates:
            engine = getattr(d, "name", "reference") if d is not None else "reference"
            repro = (f"{name} case {k} seed {FIELD_SEED} on {engine} [{m.describe()}]; reproduce: python "
                     f"benchmarks/fuzz_campaign.py --replay {name}:{k} --seed {FIELD_SEED}"
                     + (f" --engine {engine}" if d is not None else ""))
            t0 = time.perf_counter()
            try:
                fuzz_campaign.drive(m.data, d, FIELD_BUDGET)
                ran += 1
            except AceleraError as e:
                errors += 1
                if "\n" in str(e):
                    failures.append(f"{repro}: a multi-line error: {e!r}")
            except Exception as e:  # noqa: BLE001  (anything but an AceleraError is the failure)
                failures.append(f"{repro}: {type(e).__name__}: {e}")
            elapsed = time.perf_counter() - t0
            if elapsed > FIELD_CASE_SECONDS:
                failures.append(f"{repro}: took {elapsed:.1f} s (bound {FIELD_CASE_SECONDS:.0f} s)")
    return ran, errors, failures


def _check(ran: int, errors: int, failures: list[str]) -> None:
    assert not failures, f"{len(failures)} field mutants failed:\n" + "\n".join(failures[:20])
    assert ran > 0 and errors > 0  # the mutations exercise both paths
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    assert peak < 4 * FIELD_BUDGET, f"peak RSS {peak >> 20} MiB"


def test_field_mutants_on_the_reference(field_corpus, monkeypatch):
    """Field mutants load, allocate and invoke (zeros, then ones) on the reference kernels or stop
    with one AceleraError line, within the time and memory bounds; nothing else escapes."""
    from acelera.core.kernels import control_flow

    monkeypatch.setattr(control_flow, "MAX_LOOP_ITERATIONS", 1000)
    cases = int(os.environ.get("ACELERA_FUZZ_FIELD_CASES", "400"))
    _check(*_field_cases(field_corpus, cases, [None]))


def test_field_mutants_through_every_delegate(field_corpus, monkeypatch):
    """The same through each available first-party delegate (fewer cases)."""
    import warnings

    from needs import require

    from acelera import load_delegate
    from acelera.core.kernels import control_flow
    from acelera.registrar.registry import get_registry

    monkeypatch.setattr(control_flow, "MAX_LOOP_ITERATIONS", 1000)
    reg = get_registry()
    names = [n for n in fuzz_campaign.DELEGATES if n in reg.specs and reg.availability(n).ok]
    require(names, "no first-party delegate is available here")
    delegates = [load_delegate(n) for n in names]
    cases = int(os.environ.get("ACELERA_FUZZ_FIELD_DELEGATE_CASES", "38"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(*_field_cases(field_corpus, cases, delegates))
