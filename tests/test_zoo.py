"""The converter zoo (tests/models/zoo, written by TensorFlow's own converter through
tools/make_models.py) on acelera, checked against LiteRT.

Every model of manifest.json runs once with batch 1 and, when its batch is unfixed (shape_signature
-1), once more resized to batch 2. Inputs are random with a seed fixed per model: floats uniform in
[-1, 1], token inputs in their vocabulary range, other integer inputs (int8 / int16 I/O of the
quantized variants) over their full range.

The oracle is LiteRT's reference kernels (BUILTIN_REF). Float outputs must agree within
max(1e-4, 2 x spread) relative to max(1, max|ref|), where spread is LiteRT's own disagreement
between its reference and optimized (BUILTIN_WITHOUT_DEFAULT_DELEGATES) kernels on that output;
integer and bool outputs must be bit-exact. Where BUILTIN_REF has no registration for an op of the
model, the oracle is the optimized builtin kernels and the spread is taken against LiteRT's default
resolver (XNNPACK); the test id then says `builtin(<OP>)`.

Nothing is skipped: a model acelera cannot run yet fails.
"""
from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from oracle import run_acelera, run_litert

ZOO = Path(__file__).parent / "models" / "zoo"
MANIFEST = json.loads((ZOO / "manifest.json").read_text())

# The keras.applications nets are the heaviest (hundreds of ms per case on acelera): only with -m slow
# (CI runs everything); the rest of the zoo stays in the default run.
SLOW = {"mobilenet_v3_small", "efficientnet_b0"}


def _ref_missing(data: bytes) -> str | None:
    """The op LiteRT's reference resolver has no registration for (None when it has them all)."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType
    try:
        LiteRT(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
               num_threads=1).allocate_tensors()
    except (ValueError, RuntimeError) as e:
        m = re.search(r"(?:builtin opcode|custom op) '([A-Za-z0-9_]+)'", str(e))
        if m is None:
            raise
        return m.group(1)
    return None


def _cases():
    for e in MANIFEST["models"]:
        data = (ZOO / e["file"]).read_bytes()
        missing = _ref_missing(data)
        batches = [1]
        if any(i["shape_signature"] and i["shape_signature"][0] == -1 for i in e["inputs"]):
            batches.append(2)
        for batch in batches:
            tid = f"{e['name']}_{e['variant']}" + ("" if batch == 1 else "-batch2") \
                + ("" if missing is None else f"-builtin({missing})")
            marks = [pytest.mark.slow] if e["name"] in SLOW else []
            yield pytest.param(e, batch, missing, id=tid, marks=marks)


def make_inputs(entry: dict, batch: int) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(entry["file"].encode()) + 1000 * batch)
    out = []
    for spec in entry["inputs"]:
        shape = list(spec["shape"])
        if spec["shape_signature"] and spec["shape_signature"][0] == -1:
            shape[0] = batch
        dtype = np.dtype(spec["dtype"])
        if "range" in spec:
            lo, hi = spec["range"]
            out.append(rng.integers(lo, hi, size=shape).astype(dtype))
        elif np.issubdtype(dtype, np.floating):
            out.append(rng.uniform(-1.0, 1.0, size=shape).astype(dtype))
        elif dtype == np.bool_:
            out.append(rng.integers(0, 2, size=shape).astype(np.bool_))
        else:
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64).astype(dtype))
    return out


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    fin = np.isfinite(a) & np.isfinite(b)
    if not np.array_equal(np.isfinite(a), np.isfinite(b)):
        return float("inf")
    return float(np.max(np.abs(a[fin].astype(np.float64) - b[fin].astype(np.float64)), initial=0.0))


@pytest.mark.parametrize("entry, batch, ref_missing", list(_cases()))
def test_zoo_model(entry, batch, ref_missing):
    data = (ZOO / entry["file"]).read_bytes()
    inputs = make_inputs(entry, batch)
    oracle, second = (True, "builtin") if ref_missing is None else ("builtin", False)
    want = run_litert(data, inputs, reference=oracle)
    other = run_litert(data, inputs, reference=second)
    got = run_acelera(data, inputs)
    assert len(got) == len(want), f"{len(got)} outputs, LiteRT has {len(want)}"
    for k, (g, w, o) in enumerate(zip(got, want, other)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"output {k}: dtype {g.dtype} != LiteRT {w.dtype}"
        assert g.shape == w.shape, f"output {k}: shape {g.shape} != LiteRT {w.shape}"
        if np.issubdtype(w.dtype, np.floating):
            special = ~np.isfinite(w)
            np.testing.assert_array_equal(g[special], w[special], err_msg=f"output {k}: inf/nan positions differ")
            scale = max(1.0, float(np.max(np.abs(np.where(special, 0, w)), initial=0.0)))
            spread = _max_abs_diff(w, np.asarray(o))
            bound = max(1e-4 * scale, 2.0 * spread)
            err = _max_abs_diff(np.where(special, 0, g), np.where(special, 0, w))
            assert err <= bound, (f"output {k}: max abs error {err:.3g} > {bound:.3g} "
                                  f"(max|ref| {scale:.3g}, LiteRT ref-vs-optimized spread {spread:.3g})")
        else:
            diff = int(np.count_nonzero(g != w))
            assert diff == 0, (f"output {k}: {diff} of {w.size} elements differ from LiteRT (max |d| "
                               f"{int(np.max(np.abs(g.astype(np.int64) - w.astype(np.int64))))})")


def test_manifest_consistent():
    """Every manifest entry has its file, and every .tflite of the folder is in the manifest."""
    files = {e["file"] for e in MANIFEST["models"]}
    assert files == {p.name for p in ZOO.glob("*.tflite")}
    assert sum((ZOO / f).stat().st_size for f in files) < 40 * 2**20
