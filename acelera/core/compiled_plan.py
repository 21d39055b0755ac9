"""The executor's plan compiled into one generated Python function (`Compiled`), and the
per-step entries the executor's interpreted loop walks before a plan is compiled."""
from __future__ import annotations

import os
from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

from acelera.core.plan_step import DATA_DEPENDENT_SHAPES, MAX_PREPARED_STEPS, Step, unprepared

if TYPE_CHECKING:
    from acelera.core.executor import Executor

# Runs of a plan before it is compiled into one function (see Compiled): compiling costs about
# as much as a hundred runs save, so plans run only a few times (most tests) are not compiled.
COMPILE_AFTER = int(os.environ.get("ACELERA_PLAN_COMPILE_AFTER", "16"))

_ND = np.ndarray

# Data-dependent ops whose output shapes depend on values only through these inputs (the
# rest through input shapes): with those inputs constant, the output shape is fixed.
_SHAPING_INPUTS: dict[str, tuple[int, ...]] = {
    "RESHAPE": (1,), "EXPAND_DIMS": (1,), "SLICE": (1, 2), "STRIDED_SLICE": (1, 2, 3),
    "PAD": (1,), "PADV2": (1,), "MIRROR_PAD": (1,), "TILE": (1,), "BROADCAST_TO": (1,),
    "FILL": (0,), "RESIZE_BILINEAR": (1,), "RESIZE_NEAREST_NEIGHBOR": (1,), "SPLIT_V": (1, 2),
    "BATCH_TO_SPACE_ND": (1, 2), "SPACE_TO_BATCH_ND": (1, 2), "TRANSPOSE_CONV": (0,),
}


# Ops outside DATA_DEPENDENT_SHAPES whose output shape still follows the values of these inputs
# (an axis, a permutation, a window) when those are not constant.
_VALUE_SHAPED: dict[str, tuple[int, ...]] = {
    "ARG_MAX": (1,), "ARG_MIN": (1,), "MEAN": (1,), "SUM": (1,), "REDUCE_PROD": (1,),
    "REDUCE_MAX": (1,), "REDUCE_MIN": (1,), "REDUCE_ANY": (1,), "REDUCE_ALL": (1,),
    "TRANSPOSE": (1,), "SPLIT": (0,), "REDUCE_WINDOW": (2, 3, 4),
}


class Compiled:
    """The plan as one generated Python function, so that a small model or a loop body costs
    little more than its kernels: one line per kernel call with the value slots as arguments,
    no per-step tuple unpacking.

    Output shapes are only checked where they may change: at steps whose op's output shape
    depends on input values (DATA_DEPENDENT_SHAPES, unless the values it depends on are
    constant), delegated and unprepared steps, and, transitively, at the steps they feed. A
    step fed by such a tensor first compares those inputs' shapes with the ones it was
    prepared for ("guards") and is re-prepared in place when they differ; the other steps run
    unchecked (their inputs keep the shapes they were prepared for, so their outputs do too).
    A subgraph's inputs are assumed unchanged: a run whose inputs changed shape goes through
    Executor._run_dynamic, which re-prepares and replaces the affected kernels here.

    Kernels and guard shapes sit in lists (`kernels`, `guards`) so that a re-prepared step
    changes one slot, not the code. The plan step a failure happened in is found from the
    failing line of the generated code (no per-step bookkeeping while it runs)."""

    def __init__(self, ex: Executor):
        sg = ex.sg
        fixed = {t.index for t in sg.tensors if t.is_constant} | set(ex.folded)
        varying: set[int] = set()  # tensors whose shape may change at invoke
        self.plan = ex.plan
        self.kernels: list = [step.fn for step in ex.plan]
        self.entries: list[tuple] = [entry(step, k) for k, step in enumerate(ex.plan)]
        self.guards: list = []
        self.guard_at: list[tuple[int, ...]] = []  # per step: input positions that are guarded
        self.checked: list[bool] = []  # per step: whether its output shapes may change
        for step in ex.plan:
            at = tuple(p for p, t in enumerate(step.inputs) if t >= 0 and t in varying)
            self.guard_at.append(at)
            self.guards.append(self._guard(step, at))
            may_change = bool(at) or step.fn is unprepared or output_shape_varies(ex, step, fixed)
            self.checked.append(may_change)
            if may_change:
                varying.update(step.outputs)
        # (step, guarded input shapes) -> (step prepared for them, its entry); valid while the
        # subgraph's inputs keep their shapes (Executor._run_dynamic clears it)
        self.variants: dict[tuple[int, tuple], tuple[Step, tuple]] = {}
        self.runs = 0
        self.fn: Callable[..., int | None] | None = None
        self.line_step: dict[int, int] = {}
        self.label = f"<acelera plan of subgraph {sg.index}>"

    def generate(self) -> Callable[..., int | None]:
        """The plan's function (compiling costs tens of microseconds per step: done once the
        plan has run COMPILE_AFTER times)."""
        lines = ["def run(v, S, F, G, R, Y, nd):"]
        for k, step in enumerate(self.plan):
            ins, outs, at = step.inputs, step.outputs, self.guard_at[k]
            if at or self.guards[k] is None:
                shp = "".join(f"v[{ins[p]}].shape, " for p in at)
                lines.append(f"    if (g := ({shp})) != G[{k}] and R({k}, g): return {~k}")
            args = ", ".join(f"v[{t}]" if t >= 0 else "None" for t in ins)
            call = f"F[{k}]({args})"
            first = len(lines) + 1
            if len(outs) == 1:
                t = outs[0]
                lines.append(f"    r = {call}")
                if self.checked[k]:
                    lines.append(f"    if r.__class__ is nd: v[{t}] = r; S[{t}] = r.shape")
                    lines.append(f"    else: Y({k}, r)")
                else:
                    lines.append(f"    if r.__class__ is nd: v[{t}] = r")
                    lines.append(f"    elif Y({k}, r): return {k + 1}")
            elif self.checked[k] or not outs:
                lines.append(f"    Y({k}, {call})")
            else:
                lines.append(f"    {', '.join(f'v[{t}]' for t in outs)}, = {call}")
            for n in range(first, len(lines) + 1):
                self.line_step[n] = k
        lines.append("    return None")
        scope: dict = {}
        exec(compile("\n".join(lines), self.label, "exec"), scope)
        fn = self.fn = scope["run"]
        return fn

    @staticmethod
    def _guard(step: Step, at: tuple[int, ...]):
        if step.fn is unprepared or step.in_shapes is None:
            return None
        return tuple(step.in_shapes[p] for p in at)

    def remember(self, k: int, key: tuple) -> None:
        """Keep plan step k as the variant for guarded input shapes `key` (bounded)."""
        if len(self.variants) >= MAX_PREPARED_STEPS:
            self.variants.clear()
        self.variants[k, key] = (self.plan[k], self.entries[k])

    def replace(self, k: int, step: Step) -> None:
        """Plan step k was re-prepared (same node, other input shapes)."""
        self.kernels[k] = step.fn
        self.entries[k] = entry(step, k)
        self.guards[k] = self._guard(step, self.guard_at[k])

    def failed_step(self, tb) -> Step | None:
        """The plan step whose line of the generated code `tb` (a traceback) passed through;
        None for a failure outside them (a guard's re-prepare names its node itself)."""
        code = self.fn.__code__ if self.fn is not None else None
        k = None
        while tb is not None:
            if tb.tb_frame.f_code is code:
                k = self.line_step.get(tb.tb_lineno)
            tb = tb.tb_next
        return self.plan[k] if k is not None and k < len(self.plan) else None


class Unprepared(Exception):
    """Raised by a plan entry whose node is not prepared: the run goes on step by step."""


def _needs_prepare(*args):
    raise Unprepared


def _no_inputs(values: list) -> tuple:
    return ()


def _with_absent(inputs: tuple[int, ...]):
    def args(values: list) -> tuple:
        return tuple(values[i] if i >= 0 else None for i in inputs)
    return args


def entry(step: Step, k: int) -> tuple:
    """Plan step k as Executor._interpret walks it (see there). The getter is an itemgetter
    where every input is present."""
    fn = _needs_prepare if step.fn is unprepared else step.fn
    ins, outs = step.inputs, step.outputs
    t = outs[0] if len(outs) == 1 else -1
    if len(ins) == 1 and ins[0] >= 0:
        return (fn, False, ins[0], t, k)
    if not ins:
        return (fn, True, _no_inputs, t, k)
    if len(ins) > 1 and min(ins) >= 0:
        return (fn, True, itemgetter(*ins), t, k)
    return (fn, True, _with_absent(ins), t, k)


def output_shape_varies(ex: Executor, step: Step, fixed: set[int]) -> bool:
    """Whether step's output shapes may change while its input shapes stay the same."""
    if step.delegate is not None or len(step.nodes) != 1:
        return True
    operator = ex.sg.operators[step.nodes[0]]
    resolver = getattr(ex.runtime, "resolver", None)
    if resolver is not None and resolver(operator) is not None:  # a user's kernel: no assumptions
        return True
    op = operator.op
    if op in DATA_DEPENDENT_SHAPES:
        shaping = _SHAPING_INPUTS.get(op)
        if shaping is None:
            return True
    else:
        shaping = _VALUE_SHAPED.get(op)
        if shaping is None:
            return False
    ins = step.inputs
    return any(p < len(ins) and ins[p] >= 0 and ins[p] not in fixed for p in shaping)
