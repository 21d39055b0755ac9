"""LiteRT as the golden oracle: run the same model bytes in LiteRT and acelera and compare."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from acelera.core.interpreter import Interpreter, OpResolverType


def run_litert(model: bytes, inputs: Sequence[np.ndarray], reference: bool | str = True,
               convert=None) -> list[np.ndarray]:
    """Outputs of LiteRT with 1 thread: BUILTIN_REF kernels by default; `reference=False` is the
    default resolver (with XNNPACK); `reference="builtin"` the optimized kernels without XNNPACK.
    `convert(x, dtype)` prepares an input for LiteRT's Python API (default: np.asarray)."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    kind = {True: OpResolverType.BUILTIN_REF, False: OpResolverType.AUTO,
            "builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}[reference]
    it = LiteRT(model_content=model, experimental_op_resolver_type=kind, num_threads=1)
    return _run(it, inputs, convert, empty_from_details=True)


def run_acelera(model: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return _run(Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF), inputs)


def _run(it, inputs, convert=None, empty_from_details: bool = False) -> list[np.ndarray]:
    """Feed, invoke, read the outputs; with `empty_from_details` an empty output (which LiteRT's
    get_tensor cannot read) is rebuilt from its details."""
    convert = convert or (lambda x, dtype: np.asarray(x, dtype=dtype))
    details = it.get_input_details()
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != tuple(np.shape(x)):
            it.resize_tensor_input(d["index"], list(np.shape(x)))
    it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], convert(x, d["dtype"]))
    it.invoke()
    outs = []
    for d in it.get_output_details():
        shape = tuple(int(v) for v in d["shape"])
        try:
            outs.append(np.asarray(it.get_tensor(d["index"])))
        except ValueError:
            if not (empty_from_details and 0 in shape):
                raise
            outs.append(np.zeros(shape, d["dtype"]))
    return outs


def assert_matches_litert(model: bytes, inputs: Sequence[np.ndarray], *, tol: float = 1e-4,
                          reference: bool | str = True) -> list[np.ndarray]:
    """Float outputs within tol * max(1, max|ref|); integer and bool outputs bit-exact."""
    want = run_litert(model, inputs, reference)
    got = run_acelera(model, inputs)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"output {k}: dtype {g.dtype} != LiteRT {w.dtype}"
        assert g.shape == w.shape, f"output {k}: shape {g.shape} != LiteRT {w.shape}"
        if np.issubdtype(w.dtype, np.floating):
            special = ~np.isfinite(w)
            np.testing.assert_array_equal(g[special], w[special], err_msg=f"output {k}: inf/nan positions differ")
            g, w = np.where(special, 0, g), np.where(special, 0, w)
            bound = tol * max(1.0, float(np.max(np.abs(w), initial=0.0)))
            err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)), initial=0.0))
            assert err <= bound or (np.isnan(g) == np.isnan(w)).all() and np.allclose(g, w, atol=bound, equal_nan=True), \
                f"output {k}: max abs error {err} > {bound}"
        else:
            diff = int(np.count_nonzero(g != w))
            assert diff == 0, f"output {k}: {diff} of {w.size} elements differ from LiteRT (max |d| {np.max(np.abs(g.astype(np.int64) - w.astype(np.int64)))})"
    return got


def assert_exact(model: bytes, inputs: Sequence[np.ndarray], reference: bool | str = True) -> list[np.ndarray]:
    """Outputs identical to LiteRT's, floats included (NaN == NaN). assert_matches_litert's
    float tolerance becomes infinite when LiteRT's output holds an inf, so ops that only move or
    convert values are checked here exactly."""
    want = run_litert(model, inputs, reference)
    got = run_acelera(model, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)
    return got


def random_input(shape, dtype, rng: np.random.Generator, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64).astype(dtype)
