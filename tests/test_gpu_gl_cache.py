"""gpu-gl's serialization cache: compiled plans and linked GL program binaries.

With --delegate_serialize_dir and --delegate_serialize_token set, a partition's entry holds
its plan and the binary (glGetProgramBinary) of each shader it runs; a hit loads them with
glProgramBinary. Tested in this process (the per-process program memo emptied, so the
binaries are really loaded) and in fresh processes; corrupt, mismatched and refused entries
are reported and rebuilt; where the driver offers no binary format only the plan is cached.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gpu_testing import require_gl  # noqa: E402

from acelera import Interpreter, load_delegate
from acelera.backends import cache_store
from acelera.core.builder import Const, In, Out, single_op_model

require_gl()

from acelera.backends.gpu.cache import CacheWarning  # noqa: E402
from acelera.plugins.gpu_gl import context as glctx  # noqa: E402
from acelera.plugins.gpu_gl.delegate import CACHE, CACHE_PLAN, COMPILED  # noqa: E402

RNG = np.random.default_rng(77)
X = RNG.uniform(-1, 1, (1, 6, 7, 5)).astype(np.float32)
#: CONV_2D (conv kernel) + fused RELU: a small partition with a packed-weights buffer
MODEL = single_op_model("CONV_2D", [In(X.shape), Const(RNG.uniform(-1, 1, (6, 3, 3, 5)).astype(np.float32)),
                                    Const(RNG.uniform(-1, 1, 6).astype(np.float32))],
                        [Out((1, 6, 7, 6))], padding="SAME", stride_h=1, stride_w=1,
                        fused_activation_function="RELU")
#: ADD only (the cheap "binary" shader): for the fresh-process tests
ADD = single_op_model("ADD", [In((1, 4, 4, 8)), In((1, 4, 4, 8))], [Out((1, 4, 4, 8))])
DEV = glctx.open_device()
needs_binaries = pytest.mark.skipif(not DEV.binary_formats, reason=f"no GL program binary format: {DEV.binary_note}")


def prepare(cache, token="tok", **extra):
    d = load_delegate("gpu-gl", {"delegate_serialize_dir": str(cache), "delegate_serialize_token": token, **extra})
    it = Interpreter(model_content=MODEL, experimental_delegates=[d])
    it.allocate_tensors()
    assert it.delegation.nodes_of("gpu-gl") == [0] and not it.delegation.failures
    it.set_tensor(it.get_input_details()[0]["index"], X)
    it.invoke()
    return d, it.get_tensor(it.get_output_details()[0]["index"]).copy()


def entry(path):
    """The arrays of the cache file's one entry (acelera.backends.cache_store's format)."""
    _, entries = cache_store.read_file(path)
    (e,) = entries.values()
    return {k: np.array(v) for k, v in e.arrays.items()}


def write(path, arrays):
    """Replace the entry's arrays, keeping its key and constant digest, sealed again (a valid
    entry whose content no longer builds or loads, not a tampered one: test_cache_trust.py)."""
    meta, entries = cache_store.read_file(path)
    ((key, e),) = entries.items()
    cache_store.write_file(path, meta, {key: cache_store.Entry(e.consts, arrays)})


@pytest.fixture
def fresh_programs(monkeypatch):
    """An empty program memo, so the next prepare builds every shader (from the cache or source)."""
    monkeypatch.setattr(DEV, "programs", {})
    monkeypatch.setattr(DEV, "program_origin", {})
    return DEV


@needs_binaries
def test_round_trip_with_program_binaries(tmp_path, fresh_programs):
    cache = tmp_path / "cache"
    d, cold = prepare(cache)
    assert d.last_prepare == COMPILED
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].name.startswith("tok_") and files[0].suffix == ".bin"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    shaders = {k[len("__bin__"):] for k in entry(files[0]) if k.startswith("__bin__")}
    assert shaders and shaders == {l.kernel for l in _plan_kernels(files[0])}
    fresh_programs.programs.clear()
    fresh_programs.program_origin.clear()
    d, warm = prepare(cache)
    assert d.last_prepare == CACHE
    assert {DEV.program_origin[(k, True)] for k in shaders} == {"binary"}  # loaded with glProgramBinary
    np.testing.assert_array_equal(warm, cold)
    d, _ = prepare(cache, gpu_precision_loss_allowed=False)  # other options: another entry
    assert d.last_prepare == COMPILED and len(list(cache.iterdir())) == 2
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp")]


def _plan_kernels(path):
    from acelera.backends.gpu.plan import Plan

    arrays = entry(path)
    header = bytes(arrays.pop("__plan__")).decode()
    plan = Plan.from_files(header, {k: v for k, v in arrays.items() if not k.startswith("__")})
    return plan.launches


def test_corrupt_and_mismatched_entries_are_rebuilt(tmp_path):
    cache = tmp_path / "c"
    _, cold = prepare(cache)
    (a,) = cache.iterdir()
    prepare(cache, gpu_precision_loss_allowed=False)
    (b,) = set(cache.iterdir()) - {a}
    a.write_bytes(b"garbage")
    with pytest.warns(CacheWarning, match="corrupt"):
        d, again = prepare(cache)
    assert d.last_prepare == COMPILED
    np.testing.assert_array_equal(again, cold)
    assert prepare(cache)[0].last_prepare in (CACHE, CACHE_PLAN)  # rewritten
    shutil.copyfile(a, b)  # the fp16 entry where the fp32 one belongs
    with pytest.warns(CacheWarning, match="another partition"):
        d, _ = prepare(cache, gpu_precision_loss_allowed=False)
    assert d.last_prepare == COMPILED
    assert prepare(cache, gpu_precision_loss_allowed=False)[0].last_prepare in (CACHE, CACHE_PLAN)


def test_entry_that_does_not_build_is_rebuilt(tmp_path):
    cache = tmp_path / "c"
    _, cold = prepare(cache)
    (path,) = cache.iterdir()
    arrays = entry(path)
    header = json.loads(bytes(arrays["__plan__"]).decode())
    header["launches"][0][2] = ["no-such-buffer"] * 4  # parses, but names no buffer of the plan
    arrays["__plan__"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    write(path, arrays)
    with pytest.warns(CacheWarning, match="cannot be used"):
        d, again = prepare(cache)
    assert d.last_prepare == COMPILED
    np.testing.assert_array_equal(again, cold)
    assert prepare(cache)[0].last_prepare in (CACHE, CACHE_PLAN)


@needs_binaries
@pytest.mark.parametrize("how", ["garbage", "flipped"])
def test_refused_binary_is_reported_and_rebuilt(tmp_path, fresh_programs, how):
    cache = tmp_path / "c"
    _, cold = prepare(cache)
    (path,) = cache.iterdir()
    arrays = entry(path)
    names = [k for k in arrays if k.startswith("__bin__")]
    for k in names:
        blob = bytearray(arrays[k].tobytes())
        if how == "garbage":  # not even a known format
            blob = bytearray(b"not a program")
        else:  # the driver's format, a damaged payload: glProgramBinary leaves GL_LINK_STATUS false
            for i in range(64, len(blob), 97):
                blob[i] ^= 0x5A
        arrays[k] = np.frombuffer(bytes(blob), np.uint8)
    write(path, arrays)
    fresh_programs.programs.clear()
    fresh_programs.program_origin.clear()
    with pytest.warns(CacheWarning, match="do not load"):
        d, again = prepare(cache)
    assert d.last_prepare == CACHE
    assert {DEV.program_origin[(k[len("__bin__"):], True)] for k in names} == {"source"}
    np.testing.assert_array_equal(again, cold)
    stored = entry(path)
    for k in names:  # re-stored with working binaries
        assert stored[k].tobytes() != arrays[k].tobytes()
    fresh_programs.programs.clear()
    d, _ = prepare(cache)
    assert d.last_prepare == CACHE and DEV.program_origin[(names[0][len("__bin__"):], True)] == "binary"


def test_plan_only_without_binary_formats(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(DEV, "binary_formats", ())
    monkeypatch.setattr(DEV, "binary_note", "GL_NUM_PROGRAM_BINARY_FORMATS is 0")
    cache = tmp_path / "c"
    with caplog.at_level(logging.INFO, logger="acelera.gpu_gl"):
        d, cold = prepare(cache)
    assert "offers no program binary format" in caplog.text and "only the compiled partition plans" in caplog.text
    assert d.last_prepare == COMPILED
    (path,) = cache.iterdir()
    assert not [k for k in entry(path) if k.startswith("__bin__")]
    d, warm = prepare(cache)
    assert d.last_prepare == CACHE_PLAN
    np.testing.assert_array_equal(warm, cold)


CHILD = textwrap.dedent("""
    import json, logging, sys, io
    import numpy as np
    from acelera import Interpreter, load_delegate
    stream = io.StringIO()
    logging.getLogger("acelera.gpu_gl").addHandler(logging.StreamHandler(stream))
    logging.getLogger("acelera.gpu_gl").setLevel(logging.INFO)
    d = load_delegate("gpu-gl", {"delegate_serialize_dir": sys.argv[2], "delegate_serialize_token": "t"})
    it = Interpreter(model_path=sys.argv[1], experimental_delegates=[d])
    it.allocate_tensors()
    for det in it.get_input_details():
        it.set_tensor(det["index"], np.full(det["shape"], 0.25, np.float32))
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    print(json.dumps({"how": d.last_prepare, "formats": len(d.dev.binary_formats), "log": stream.getvalue(),
                      "origin": sorted({o for (k, half), o in d.dev.program_origin.items() if half}),
                      "sum": float(out.sum())}))
""")


def child(model, cache, **env):
    out = subprocess.run([sys.executable, "-c", CHILD, str(model), str(cache)], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_binaries
def test_fresh_process_loads_the_binaries(tmp_path):
    model = tmp_path / "add.tflite"
    model.write_bytes(ADD)
    cold = child(model, tmp_path / "c")
    warm = child(model, tmp_path / "c")
    assert (cold["how"], cold["origin"]) == (COMPILED, ["source"])
    assert (warm["how"], warm["origin"]) == (CACHE, ["binary"])  # every shader from its binary
    assert warm["sum"] == cold["sum"] == 0.5 * 128


@pytest.mark.skipif("Mesa" not in DEV.label, reason="MESA_SHADER_CACHE_DISABLE is Mesa's")
def test_fresh_process_without_binary_formats(tmp_path):
    """Mesa with its shader cache disabled offers no program binary format: plan only."""
    model = tmp_path / "add.tflite"
    model.write_bytes(ADD)
    cold = child(model, tmp_path / "c", MESA_SHADER_CACHE_DISABLE="true")
    warm = child(model, tmp_path / "c", MESA_SHADER_CACHE_DISABLE="true")
    assert cold["formats"] == 0 and "offers no program binary format" in cold["log"]
    assert (cold["how"], warm["how"]) == (COMPILED, CACHE_PLAN) and warm["origin"] == ["source"]
    assert warm["sum"] == cold["sum"] == 0.5 * 128
