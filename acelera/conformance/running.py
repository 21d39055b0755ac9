"""What every kind of conformance case uses to run a model: interpreters on the reference
resolver, feeding, timing, the reference run, recorded warnings, small comparisons."""
from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from acelera.conformance import cases as C
from acelera.core.delegate import Delegate
from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.partition import DelegationWarning


def _model_input(model: Any) -> bytes | str:
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    if isinstance(model, (str, Path)):
        return str(model)
    return model()


def _interpreter(model: bytes | str, delegates: Sequence[Delegate] = ()) -> Interpreter:
    """Certification runs LiteRT's plan: no constant folding beyond weights (a single-op case
    such as SHAPE or RANK of a fixed-shape input would otherwise be folded, and the delegate never
    asked for it)."""
    if isinstance(model, bytes):
        return Interpreter(model_content=model, experimental_delegates=list(delegates),
                           experimental_op_resolver_type=OpResolverType.BUILTIN_REF, fold_constants=False)
    return Interpreter(model_path=model, experimental_delegates=list(delegates),
                       experimental_op_resolver_type=OpResolverType.BUILTIN_REF, fold_constants=False)


def _feed(it: Interpreter, inputs: Sequence[np.ndarray]) -> None:
    for det, x in zip(it.get_input_details(), inputs):
        it.set_tensor(det["index"], x)


def _invoke(it: Interpreter) -> float:
    t0 = time.perf_counter_ns()
    with np.errstate(all="ignore"):
        it.invoke()
    return (time.perf_counter_ns() - t0) / 1000.0


def _outputs(it: Interpreter) -> list[np.ndarray]:
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _out_quant(it: Interpreter) -> list[tuple[float | None, int]]:
    out: list[tuple[float | None, int]] = []
    for d in it.get_output_details():
        s, z = d["quantization"]
        kind = np.dtype(d["dtype"]).kind
        out.append((float(s), int(z)) if s and kind in "iu" else (None, 0))
    return out


def _reference(model: bytes | str, inputs: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float, Interpreter]:
    it = _interpreter(model)
    it.allocate_tensors()
    _feed(it, inputs)
    us = _invoke(it)
    return _outputs(it), us, it


def _checked_reference(built: C.Built):
    """The reference run of a case; NotCovered when the reference declines the node."""
    try:
        return _reference(built.model, built.inputs)
    except AceleraError as e:
        if C.reference_gap(e):
            raise C.NotCovered(f"the CPU reference cannot run it: {e}") from None
        raise C.ReferenceFailure(f"the CPU reference fails on this case: {e}") from None


class _Warnings:
    """Record warnings (DelegationWarning and others) raised while a block runs."""

    def __enter__(self):
        self._cm = warnings.catch_warnings(record=True)
        self.records = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)

    def delegation(self) -> list[str]:
        return [str(w.message) for w in self.records if issubclass(w.category, DelegationWarning)]


def _numeric(dtype: str | None, model_type: str | None = None) -> str:
    if model_type is not None:
        return "integer" if model_type == "full-integer" else "float"
    return "integer" if dtype in C.QUANT_DTYPES or dtype == "INT32" else "float"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def _average_ok(entry: dict[str, Any], avg_steps: float, bound: float) -> tuple[bool, str]:
    """The average-error bound of a model case (tolerance avg_steps), recorded in `entry`."""
    entry.update(avg_steps=avg_steps, allowed_avg_steps=bound)
    return avg_steps <= bound, f"average error {avg_steps:.3g} quantization steps (allowed {bound:g})"


def _refusal_reasons(rep, name: str, node_count: int) -> str:
    bits = []
    for n in range(node_count):
        for d, why in rep.rejections.get(n, []):
            if d == name:
                bits.append(f"node {n}: {why}")
    for d, nodes, msg in rep.failures:
        if d == name:
            bits.append(f"prepare failed for nodes {list(nodes)}: {msg}")
    return "; ".join(bits)


class _Skip(Exception):
    """A case that does not apply to this delegate."""


def _describe(d: Delegate) -> str:
    try:
        return str(d.describe())
    except Exception as e:
        return f"describe() raised {type(e).__name__}: {e}"
