"""The float64 answer of a float model: the reference kernels on the graph with float64 tensors.

Certification judges a delegate's float outputs against this answer and against the float32
reference's own error from it (the model's numerical floor, tolerances.py). The float graph is
widened: every FLOAT32 tensor becomes FLOAT64 (constant data converted exactly) and each node is
prepared twice, on the widened tensors and on the original float32 ones. At run time a node's
float64 kernel is used when it exists and agrees with its float32 kernel on the same inputs
(within WIDE_AGREEMENT of max(1, max|input|, max|float32 output|): a float64 path that lands elsewhere
is a kernel that does not really take float64, not a rounding difference); otherwise the node
computes in float32 on its inputs rounded to float32 and its outputs widen again. `narrow`
names those nodes and why, so a report can say how much of the answer is float64.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from acelera.core import dtypes
from acelera.core.errors import AceleraError
from acelera.core.executor import Executor, Step, node_label
from acelera.core.kernels.registry import NodeContext, in_shape_pass, widening
from acelera.core.model import Model, Subgraph, Tensor
from acelera.core.runtime import ModelRuntime

WIDE_AGREEMENT = 1e-3
FLOAT32, FLOAT64 = dtypes.TYPE_CODES["FLOAT32"], dtypes.TYPE_CODES["FLOAT64"]


def _widen_tensor(t: Tensor) -> Tensor:
    if t.type != FLOAT32 or t.quantization.is_set:
        return t
    data = None if t.data is None else np.asarray(t.data, np.float64)
    return dataclasses.replace(t, type=FLOAT64, data=data)


def widen(sg: Subgraph) -> Subgraph:
    """`sg` with every (non-quantized) FLOAT32 tensor as FLOAT64."""
    return dataclasses.replace(sg, tensors=tuple(_widen_tensor(t) for t in sg.tensors))


class _WideExecutor(Executor):
    """Runs `wide` (default: `widen(original)`, same tensors with FLOAT32 as FLOAT64), each node
    prepared on both graphs (float_view.py passes its own float64 graph)."""

    def __init__(self, original: Subgraph, runtime: ModelRuntime, wide: Subgraph | None = None):
        super().__init__(widen(original) if wide is None else wide, runtime)
        self.original = original
        self.narrow: dict[int, str] = {}

    def _narrow_context(self, i: int) -> NodeContext:
        op = self.original.operators[i]

        def t(k: int) -> Tensor:
            orig = self.original.tensors[k]
            return orig if orig.shape == self.shapes[k] else dataclasses.replace(orig, shape=self.shapes[k])

        return NodeContext(i, op, tuple(t(k) if k >= 0 else None for k in op.inputs),
                           tuple(t(k) for k in op.outputs), self.runtime)

    def reference_step(self, i: int) -> Step:
        op = self.original.operators[i]
        label = node_label(self.original, i)
        spec = self.lookup(i)
        try:
            narrow = spec.prepare(self._narrow_context(i))
        except AceleraError as e:
            raise type(e)(f"{label}: {e}") from None
        widened = [k for k in tuple(op.inputs) + tuple(op.outputs)
                   if k >= 0 and self.sg.tensors[k].type != self.original.tensors[k].type]
        wide = None
        if widened:
            try:
                with widening():
                    wide = spec.prepare(self.node_context(i))
            except Exception as e:  # the kernel takes no float64: this node computes in float32
                self.narrow[i] = f"no float64 kernel ({str(e).splitlines()[0][:80]})"
        fn = self._combined(i, wide, narrow)
        return Step(label, fn, op.inputs, op.outputs, (i,), in_shapes=self._input_shapes(op.inputs))

    def _combined(self, i: int, wide, narrow):
        in_types = [self.original.tensors[k].dtype if k >= 0 else None for k in self.original.operators[i].inputs]
        out_types = [self.sg.tensors[k].dtype for k in self.original.operators[i].outputs]

        def lift(outs) -> tuple[np.ndarray, ...]:
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            return tuple(np.asarray(o).astype(dt, copy=False) for o, dt in zip(outs, out_types))

        def run(*args):
            small = [a if a is None or dt is None else np.asarray(a).astype(dt, copy=False)
                     for a, dt in zip(args, in_types)]
            base = lift(narrow(*small))
            if wide is None or i in self.narrow and not in_shape_pass():
                return base
            try:
                got = wide(*args)
            except Exception as e:
                if not in_shape_pass():
                    self.narrow[i] = f"float64 kernel failed ({type(e).__name__})"
                return base
            got = got if isinstance(got, (tuple, list)) else (got,)
            why = _disagreement(got, base, out_types, _magnitude(args))
            if why and in_shape_pass():
                return base  # placeholder inputs; real inputs decide
            if why:
                self.narrow[i] = why
                return base
            return tuple(np.asarray(g) for g in got)

        return run


def _magnitude(args: Sequence) -> float:
    """The largest finite |value| among a node's float inputs (the scale its rounding works at)."""
    m = 0.0
    for a in args:
        if a is None:
            continue
        a = np.asarray(a)
        if a.dtype.kind == "f" and a.size:
            fin = a[np.isfinite(a)]
            if fin.size:
                m = max(m, float(np.abs(fin).max()))
    return m


def _disagreement(wide: Sequence, narrow: Sequence[np.ndarray], types: Sequence[np.dtype],
                  magnitude: float = 0.0) -> str:
    if len(wide) != len(narrow):
        return "float64 kernel returned another number of outputs"
    for w, n, dt in zip(wide, narrow, types):
        w = np.asarray(w)
        if w.shape != n.shape or w.dtype != dt:
            return f"float64 kernel returned {w.dtype}{list(w.shape)}"
        if dt.kind != "f":
            if not np.array_equal(w, n):
                return "float64 kernel's integer output differs"
            continue
        a, b = w.astype(np.float64), n.astype(np.float64)
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            return "float64 kernel's NaNs differ"
        fin = np.isfinite(a) & np.isfinite(b)
        if not np.array_equal(a[~fin & ~np.isnan(a)], b[~fin & ~np.isnan(b)]):
            return "float64 kernel's infinities differ"
        if fin.any():
            scale = max(1.0, magnitude, float(np.abs(b[fin]).max()))
            if float(np.abs(a[fin] - b[fin]).max()) > WIDE_AGREEMENT * scale:
                return "float64 kernel disagrees with float32 beyond rounding"
    return ""


class Float64Reference:
    """The main subgraph of `model` evaluated in float64 where the reference kernels allow."""

    def __init__(self, model: Model):
        self.model = model
        self.runtime = ModelRuntime(model)
        self.ex = _WideExecutor(model.main, self.runtime)
        self.ex.prepare()

    @property
    def narrow(self) -> dict[int, str]:
        """Node index -> why it computed in float32."""
        return dict(self.ex.narrow)

    @property
    def widened_nodes(self) -> int:
        return len(self.model.main.operators) - len(self.ex.narrow)

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The model's outputs for `inputs` from the initial state (float outputs as float64).
        Variable (state) tensors are reset first: a narrow kernel updates a float32 copy of a
        state, so state cannot carry from one run to the next here."""
        sg = self.ex.sg
        self.ex.reset_variables()  # from the initial state, like floor.py's float32 runs
        for t, x in zip(sg.inputs, inputs):
            self.ex.values[t] = np.asarray(x).astype(sg.tensors[t].dtype)
        self.ex.run()
        return [np.asarray(self.ex.values[t]) for t in sg.outputs]
