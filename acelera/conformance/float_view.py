"""The float-view answer of a quantized model, and the floor a float-view delegate is judged on.

A float-view delegate (gpu-opencl, gpu-gl: backends/gpu/compiler.py; LiteRT's GPU delegate)
runs a full-integer model in float: every constant dequantized, every op computed in float on
dequantized values, and every quantized tensor an op produces passed through a quantization
simulator, q = clamp(round(v / scale) + zero_point, qmin, qmax), v = (q - zero_point) * scale,
so values stay on the tensor's grid. QUANTIZE is that rounding onto its output's grid (from a
float, or from another grid: a requantization); DEQUANTIZE is the identity on real values.

The *float-view answer* is that computation done exactly: the reference kernels widened to
float64 (float64.py) on a float graph derived from the quantized one. Each quantized tensor
(int8, uint8, int16 activations; int8/int32 weights and biases) becomes a FLOAT64 tensor
without quantization, constants dequantized in float64 (per channel where quantized so);
QUANTIZE and DEQUANTIZE nodes become the identity; after every node, each output that was an
int8/uint8/int16 quantized tensor is rounded to its grid in float64 (round half away from
zero, as TFLite's quantizer and the GPU's `round`, clamped to the type's range). The graph's
quantized inputs enter dequantized. A node whose kernel takes no float64, or whose float64
result disagrees with its float32 one, computes in float32 on its inputs rounded to float32
(float64.py's rule; `narrow` names those nodes) and its result is rounded to the grid in
float64 like any other. (The GPU backend's float-view plan would cover only the ops the GPU
takes; the reference kernels cover every node, so the answer is that of the whole graph.)

The *floor* of an output is how far acelera's integer reference (LiteRT's bit-exact integer
arithmetic, dequantized) lands from the float-view answer on the same inputs: what an honest
integer implementation of this very graph costs against the exact float view. For a delegate
that stores the float view in half (the GPU backends with precision loss allowed) the floor is
the larger of that and the distance of the float view in half storage (`half=True`: graph
inputs, constants and every tensor an op produces rounded through half after their grid
rounding, graph outputs not; float64 arithmetic otherwise), what half storage costs by itself.
`measure` gives, per output and over the runs, the largest and the average |x - float-view
answer| of the delegate (its error) and of each floor implementation, in real units, with the
output's quantization step (`quantum`: its scale, or for a float output the scale of the
DEQUANTIZE input it comes from) to read them in steps. tolerances.py says how a delegate is
judged on them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from acelera.conformance.float64 import FLOAT32, FLOAT64, _WideExecutor
from acelera.conformance.floor import FloorResult, OutputFloor, _inputs, _interp, _run
from acelera.core.delegate import Delegate
from acelera.core.errors import AceleraError
from acelera.core.executor import Step, node_label
from acelera.core.model import NO_QUANT, Model, Subgraph, Tensor
from acelera.core.quant import round_half_away
from acelera.core.runtime import ModelRuntime

#: quantized tensor types the float view keeps on a grid, with their ranges
GRID_TYPES = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767)}
#: ops that are roundings onto a grid (QUANTIZE) or the identity (DEQUANTIZE) in the float view
BOUNDARY_OPS = ("QUANTIZE", "DEQUANTIZE")


class FloatViewError(AceleraError):
    """The reference kernels cannot compute the model's float-view answer."""


@dataclass(frozen=True)
class Grid:
    """The quantization grid of a tensor: real = scale * (q - zero_point), qmin <= q <= qmax."""

    scale: np.ndarray  # float64, per tensor (size 1) or per channel along `axis`
    zero_point: np.ndarray  # float64, same size
    qmin: int
    qmax: int
    axis: int = 0

    @classmethod
    def of(cls, t: Tensor) -> "Grid | None":
        """The grid of an int8/uint8/int16 quantized tensor with positive scales, else None."""
        q = t.quantization
        if t.type_name not in GRID_TYPES or not q.is_set:
            return None
        scale = np.asarray(q.scale, np.float64).reshape(-1)
        if not np.all(scale > 0):
            return None
        zp = np.asarray(q.zero_point, np.float64).reshape(-1) if np.asarray(q.zero_point).size else np.zeros(1)
        if zp.size == 1 and scale.size > 1:
            zp = np.full(scale.size, zp[0])
        lo, hi = GRID_TYPES[t.type_name]
        return cls(scale, zp, lo, hi, int(q.quantized_dimension))

    @property
    def step(self) -> float:
        """The (largest) quantization step, real units."""
        return float(self.scale.max())

    def _bcast(self, ndim: int) -> tuple[np.ndarray, np.ndarray]:
        if self.scale.size == 1 or ndim == 0:
            return self.scale[0], self.zero_point[0]
        shape = [1] * ndim
        shape[self.axis] = -1
        return self.scale.reshape(shape), self.zero_point.reshape(shape)

    def real(self, q: np.ndarray) -> np.ndarray:
        """Integer values of the grid as real values (float64)."""
        q = np.asarray(q)
        s, z = self._bcast(q.ndim)
        return (q.astype(np.float64) - z) * s

    def snap(self, v: np.ndarray) -> np.ndarray:
        """Real values rounded onto the grid (quantize, clamp, dequantize; float64)."""
        v = np.asarray(v, np.float64)
        s, z = self._bcast(v.ndim)
        with np.errstate(all="ignore"):
            q = np.clip(round_half_away(v / s) + z, self.qmin, self.qmax)
        return (q - z) * s


def dequantized(t: Tensor) -> np.ndarray | None:
    """A quantized constant's real values in float64 (per channel where so); None if not constant."""
    if t.data is None:
        return None
    q = t.quantization
    data = np.asarray(t.data)
    scale = np.asarray(q.scale, np.float64).reshape(-1)
    zp = np.asarray(q.zero_point, np.float64).reshape(-1) if np.asarray(q.zero_point).size else np.zeros(1)
    if scale.size > 1 and data.ndim:
        shape = [1] * data.ndim
        shape[int(q.quantized_dimension)] = -1
        scale = scale.reshape(shape)
        zp = zp.reshape(shape) if zp.size > 1 else zp[0]
    else:
        scale, zp = scale[0], zp[0]
    return (data.astype(np.float64) - zp) * scale


def to_half(x: np.ndarray | None) -> np.ndarray | None:
    """Float values rounded through IEEE half (half storage), kept in their dtype."""
    if x is None or np.asarray(x).dtype.kind != "f":
        return x
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(np.float16).astype(np.asarray(x).dtype)


def float_graph(sg: Subgraph, half: bool = False) -> tuple[Subgraph, Subgraph, dict[int, Grid]]:
    """The float view of `sg` as (float64 graph, float32 graph, tensor -> grid).

    Quantized integer tensors become float tensors without quantization (constants dequantized,
    in float64 for the first graph and rounded to float32 for the second); FLOAT32 tensors are
    FLOAT64 in the first graph; other tensors (int32 shapes and indices, bools) are kept. With
    `half`, float constants are rounded through half first (half storage)."""
    keep = to_half if half else (lambda x: x)
    wide, narrow, grids = [], [], {}
    for t in sg.tensors:
        if t.quantization.is_set and t.dtype.kind in "iu":
            g = Grid.of(t)
            if g is not None:
                grids[t.index] = g
            data = keep(dequantized(t))
            wide.append(dataclasses.replace(t, type=FLOAT64, quantization=NO_QUANT, data=data))
            narrow.append(dataclasses.replace(t, type=FLOAT32, quantization=NO_QUANT,
                                              data=None if data is None else data.astype(np.float32)))
        elif t.type == FLOAT32:
            data = None if t.data is None else keep(np.asarray(t.data, np.float64))
            wide.append(dataclasses.replace(t, type=FLOAT64, quantization=NO_QUANT, data=data))
            narrow.append(dataclasses.replace(t, quantization=NO_QUANT,
                                              data=None if data is None else data.astype(np.float32)))
        else:
            wide.append(t)
            narrow.append(t)
    return (dataclasses.replace(sg, tensors=tuple(wide)), dataclasses.replace(sg, tensors=tuple(narrow)), grids)


def _identity(out_type: np.dtype):
    def run(x, *_):
        return np.asarray(x).astype(out_type, copy=False)
    return run


def _snapping(fn, grids: Sequence[Grid | None], stored: Sequence[bool]):
    """`fn` with each output rounded onto its grid, then through half where `stored` says."""
    def run(*args):
        res = fn(*args)
        single = not isinstance(res, (tuple, list))
        outs = (res,) if single else tuple(res)
        outs = tuple(o if g is None else g.snap(o) for o, g in zip(outs, grids))
        outs = tuple(to_half(o) if h else o for o, h in zip(outs, stored))
        return outs[0] if single else outs
    return run


class _FloatViewExecutor(_WideExecutor):
    def __init__(self, sg: Subgraph, runtime: ModelRuntime, half: bool = False):
        wide, narrow, self.grids = float_graph(sg, half)
        self.half = half
        self.graph_outputs = set(sg.outputs)
        super().__init__(narrow, runtime, wide=wide)

    def reference_step(self, i: int) -> Step:
        op = self.original.operators[i]
        if op.op in BOUNDARY_OPS:
            out = self.sg.tensors[op.outputs[0]].dtype
            step = Step(node_label(self.original, i), _identity(out), op.inputs, op.outputs, (i,),
                        in_shapes=self._input_shapes(op.inputs))
        else:
            step = super().reference_step(i)
        grids = [self.grids.get(k) for k in op.outputs]
        stored = [self.half and k not in self.graph_outputs for k in op.outputs]
        if any(g is not None for g in grids) or any(stored):
            step = dataclasses.replace(step, fn=_snapping(step.fn, grids, stored))
        return step


class FloatViewReference:
    """The main subgraph of a quantized `model` computed in its float view, in float64 where
    the reference kernels allow (see the module docstring)."""

    def __init__(self, model: Model, half: bool = False):
        self.model = model
        self.half = half
        sg = model.main
        self.runtime = ModelRuntime(model)
        try:
            self.ex = _FloatViewExecutor(sg, self.runtime, half)
            self.ex.prepare()
        except AceleraError as e:
            raise FloatViewError(f"no float-view answer for the model: {e}") from None
        grids = self.ex.grids
        producers = {t: op for op in sg.operators for t in op.outputs}
        self.input_grids = [grids.get(t) for t in sg.inputs]
        #: per output: its grid (quantized outputs), else None
        self.output_grids = [grids.get(t) for t in sg.outputs]
        #: per output: its quantization step (for a float output, that of the DEQUANTIZE input it
        #: comes from), 0.0 where it has none
        self.quanta: list[float] = []
        for t, g in zip(sg.outputs, self.output_grids):
            p = producers.get(t)
            if g is None and p is not None and p.op == "DEQUANTIZE" and p.inputs:
                g = grids.get(p.inputs[0])
            self.quanta.append(g.step if g is not None else 0.0)

    @property
    def narrow(self) -> dict[int, str]:
        """Node index -> why it computed in float32."""
        return dict(self.ex.narrow)

    @property
    def widened_nodes(self) -> int:
        return len(self.model.main.operators) - len(self.ex.narrow)

    def real(self, k: int, value: np.ndarray) -> np.ndarray:
        """Output k of an implementation in real units (quantized outputs dequantized; float64)."""
        g = self.output_grids[k]
        v = np.asarray(value)
        if g is not None and v.dtype.kind in "iu":
            return g.real(v)
        return v.astype(np.float64) if v.dtype.kind == "f" else v

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The float-view answer for the model's `inputs` (as the model takes them: quantized
        inputs as integers), from the initial state: real values, float64 (outputs that are
        neither quantized nor float, e.g. ARG_MAX indices, as computed)."""
        sg = self.ex.sg
        self.ex.reset_variables()
        for t, g, x in zip(sg.inputs, self.input_grids, inputs):
            x = np.asarray(x)
            v = g.real(x) if g is not None and x.dtype.kind in "iu" else x.astype(sg.tensors[t].dtype)
            self.ex.values[t] = to_half(v) if self.half else v
        try:
            with np.errstate(all="ignore"):
                self.ex.run()
        except AceleraError as e:
            raise FloatViewError(f"no float-view answer for these inputs: {e}") from None
        return [np.asarray(self.ex.values[t]) for t in sg.outputs]


def _abs_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    return np.abs(a[ok] - b[ok])


INTEGER, HALF = "integer reference", "half-storage float view"


def measure(model: bytes | str, loaded: Model, delegate: Delegate, *, seed: int, runs: int,
            half: bool = False) -> FloorResult:
    """The delegate's error, the floor and the delegate's distance from the integer reference,
    per quantized or float output, against the float-view answer; averages are over elements
    and runs. The floor is the integer reference's error; with `half` (a delegate that stores
    the float view in half) it is the larger of that and the half-storage float view's error
    (each output's `parts` keeps both: implementation -> [max, average])."""
    from acelera.conformance.inference_diff import bounded_inputs

    exact = FloatViewReference(loaded)
    floors: list[tuple[str, Any]] = [(INTEGER, _interp(model))]
    if half:
        floors.append((HALF, FloatViewReference(loaded, half=True)))
    test, ref = _interp(model, [delegate]), floors[0][1]
    bounds, _ = bounded_inputs(test)
    details = test.get_output_details()
    outs = [OutputFloor(k, d["name"], quantum=exact.quanta[k], parts={n: [0.0, 0.0] for n, _ in floors})
            for k, d in enumerate(details)]
    counted = [0] * len(outs)
    rng = np.random.default_rng(seed)
    for _ in range(runs):
        xs = _inputs(rng, test, bounds)
        t, e = _run(test, xs), exact.run(xs)
        got = {n: _run(f, xs) if f is ref else f.run(xs) for n, f in floors}
        for k, (o, tv, ev) in enumerate(zip(outs, t, e)):
            if np.asarray(ev).dtype.kind != "f" or not np.asarray(ev).size:
                continue
            tv = exact.real(k, tv)
            err, vs_ref = _abs_diff(tv, ev), _abs_diff(tv, exact.real(k, got[INTEGER][k]))
            if err.size:
                o.error = max(o.error, float(err.max()))
                o.avg_error += float(err.mean())
            if vs_ref.size:
                o.error_vs_reference = max(o.error_vs_reference, float(vs_ref.max()))
            for n, vals in got.items():
                d = _abs_diff(exact.real(k, vals[k]), ev)
                if d.size:
                    o.parts[n][0] = max(o.parts[n][0], float(d.max()))
                    o.parts[n][1] += float(d.mean())
            fin = np.asarray(ev, np.float64)
            fin = fin[np.isfinite(fin)]
            o.max_abs = max(o.max_abs, float(np.abs(fin).max()) if fin.size else 0.0)
            counted[k] += 1
    for o, count in zip(outs, counted):
        if count:
            o.avg_error /= count
            for part in o.parts.values():
                part[1] /= count
        o.floor = max(p[0] for p in o.parts.values())
        o.avg_floor = max(p[1] for p in o.parts.values())
    return FloorResult(outs, ", ".join(n for n, _ in floors), exact.widened_nodes, len(loaded.main.operators),
                       exact.narrow, runs, answer="float view")
