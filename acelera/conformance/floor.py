"""A float model's numerical floor, and a delegate's error measured against the float64 answer.

For each run's inputs (drawn as inference_diff draws them, index inputs bounded), three answers
are compared: the float64 answer (float64.py), acelera's float32 reference and the delegate.
The *floor* of an output is the largest |float32 reference - float64| seen: how far an honest
float32 implementation of this very graph already is from the exact answer. A delegate is
judged by its own largest |delegate - float64| against max(the precision's tolerance,
k x the floor) (tolerances.py, `floor_k`): an ill-conditioned output (large logits built
from cancelling sums) gets room in proportion to what float32 itself costs there, and a
well-conditioned one keeps the precision's tight bound.

For delegates that claim float16 the floor is that of half storage (every constant and
intermediate tensor rounded to half, float32 arithmetic: backends/gpu/half_floor.py) against
float64, for the same reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from acelera.conformance.float64 import Float64Reference
from acelera.core.delegate import Delegate
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.model import Model


@dataclass
class OutputFloor:
    """One float output over all runs (real units)."""

    index: int
    name: str
    error: float = 0.0  # max |delegate - float64|
    floor: float = 0.0  # max |floor implementation - float64|
    error_vs_reference: float = 0.0  # max |delegate - float32 reference|
    max_abs: float = 0.0  # max |float64 answer|
    #: quantized models (float_view.py): the output's quantization step, and the average
    #: |delegate - answer| and |floor implementation - answer| over elements and runs
    quantum: float = 0.0
    avg_error: float = 0.0
    avg_floor: float = 0.0
    #: where the floor is the larger of several implementations' errors: name -> [max, average]
    parts: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class FloorResult:
    outputs: list[OutputFloor]
    #: the implementation the floor measures ("float32 reference" or "half storage")
    floor_of: str
    float64_nodes: int
    nodes: int
    #: node index -> why it computed in float32 in the float64 answer
    narrow: dict[int, str] = field(default_factory=dict)
    runs: int = 0
    #: what the float64 answer is: "float64" (float models), "float view" (quantized models)
    answer: str = "float64"

    def describe(self) -> str:
        return (f"{self.answer} answer: {self.float64_nodes} of {self.nodes} nodes in float64; "
                f"floor: {self.floor_of} vs the {self.answer} answer over {self.runs} run(s)")


def _interp(model: bytes | str, delegates: Sequence[Delegate] = ()) -> Interpreter:
    key = "model_content" if isinstance(model, (bytes, bytearray)) else "model_path"
    source: dict[str, Any] = {key: model}
    it = Interpreter(**source, experimental_delegates=list(delegates),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def _inputs(rng: np.random.Generator, it: Interpreter, bounds) -> list[np.ndarray]:
    from acelera.conformance.inference_diff import INPUT_RANGES, random_input

    out = []
    for k, det in enumerate(it.get_input_details()):
        dt, shape = np.dtype(det["dtype"]), tuple(int(x) for x in det["shape"])
        if k in bounds or dt in INPUT_RANGES:
            out.append(random_input(rng, shape, dt, bounds[k][:2] if k in bounds else None))
        else:  # int16 and other types inference_diff does not draw: uniform over the type
            info = np.iinfo(dt) if dt.kind in "iu" else None
            out.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dt) if info is not None
                       else np.zeros(shape, dt))
    return out


def _run(it: Interpreter, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    it.reset_all_variables()  # every run from the initial state: stateful models (LSTM states) compare alike
    for det, x in zip(it.get_input_details(), inputs):
        it.set_tensor(det["index"], x)
    with np.errstate(all="ignore"):
        it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    return float(np.abs(a[ok] - b[ok]).max()) if ok.any() else 0.0


def measure(model: bytes | str, loaded: Model, delegate: Delegate, *, seed: int, runs: int,
            half: bool = False) -> FloorResult:
    """The delegate's error, the floor and the float32 reference's error, per float output."""
    from acelera.conformance.inference_diff import bounded_inputs

    exact = Float64Reference(loaded)
    test, ref = _interp(model, [delegate]), _interp(model)
    floor_it = ref
    if half:
        from acelera.backends.gpu.half_floor import HalfStorageDelegate

        floor_it = _interp(model, [HalfStorageDelegate()])
    bounds, _ = bounded_inputs(test)
    details = test.get_output_details()
    outs = [OutputFloor(k, d["name"]) for k, d in enumerate(details)]
    rng = np.random.default_rng(seed)
    for _ in range(runs):
        xs = _inputs(rng, test, bounds)
        t, r, e = _run(test, xs), _run(ref, xs), exact.run(xs)
        f = r if floor_it is ref else _run(floor_it, xs)
        for o, tv, rv, fv, ev in zip(outs, t, r, f, e):
            if np.asarray(ev).dtype.kind != "f" or not np.asarray(ev).size:
                continue
            o.error = max(o.error, _max_abs_diff(tv, ev))
            o.floor = max(o.floor, _max_abs_diff(fv, ev))
            o.error_vs_reference = max(o.error_vs_reference, _max_abs_diff(tv, rv))
            fin = np.asarray(ev, np.float64)
            fin = fin[np.isfinite(fin)]
            o.max_abs = max(o.max_abs, float(np.abs(fin).max()) if fin.size else 0.0)
    n = len(loaded.main.operators)
    return FloorResult(outs, "half storage" if half else "float32 reference", exact.widened_nodes, n,
                       exact.narrow, runs)


def to_details(res: FloorResult) -> dict[str, Any]:
    narrow: dict[str, int] = {}
    for why in res.narrow.values():
        narrow[why] = narrow.get(why, 0) + 1
    return {"answer": res.answer, "floor_of": res.floor_of, "float64_nodes": res.float64_nodes, "nodes": res.nodes,
            "float32_nodes_why": narrow, "runs": res.runs}
