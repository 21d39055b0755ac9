"""Execution of one subgraph: an ordered plan of kernels over a list of tensor values.

`Executor.prepare()` binds every node to a kernel (or, later, to a delegate kernel), runs the
plan once on zero inputs to fix every tensor's shape and check every kernel's dtypes, and
folds constant subexpressions (DEQUANTIZE of fp16 weights, DENSIFY of sparse weights) so they
run once. `Executor.run()` then executes the plan.

Small models and loop bodies spend most of their time in this loop rather than in kernels, so
`run()` calls a compiled form of the plan: one generated function with a line per kernel call
(see `Compiled`), checking shapes only at the steps whose shapes may change at invoke and
re-preparing in place a step whose inputs changed shape. When a subgraph's inputs change shape,
or a shape changes where the plan did not expect it, the plan runs step by step, re-preparing
the steps whose input shapes changed. Steps prepared at invoke are kept per node and input
shapes, so a loop body whose shapes change every iteration prepares each variant once.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
from typing import TYPE_CHECKING, Sequence

import numpy as np

from acelera.core import fpstate, memory
from acelera.core.compiled_plan import _ND, COMPILE_AFTER, Compiled, Unprepared, output_shape_varies
from acelera.core.errors import AceleraError, KernelError, ModelError, UnsupportedOpError  # noqa: F401 (KernelError re-exported)
from acelera.core.kernels.registry import NodeContext, lookup, registered, shape_pass
from acelera.core.model import Subgraph, Tensor
from acelera.core.plan_step import (  # noqa: F401 (Step, node_label, DATA_DEPENDENT_SHAPES re-exported)
    DATA_DEPENDENT_SHAPES,
    MAX_PREPARED_STEPS,
    NEVER_FOLDED,
    Step,
    node_label,
    unprepared,
)

if TYPE_CHECKING:
    from acelera.core.partition import DelegationReport

FOLDABLE = frozenset({"DEQUANTIZE", "DENSIFY"})  # folded whatever their output size (weights)
MAX_FOLDED_BYTES = 64 << 10  # other constant expressions with larger outputs stay run-time nodes
_UNFOLDABLE_TYPES = frozenset({"STRING", "RESOURCE", "VARIANT"})


_malloc_tuned = False


def tune_malloc() -> None:
    """Keep freed kernel temporaries in the heap instead of returning them to the OS.

    glibc serves blocks above 128 KiB with mmap and unmaps them on free, so every kernel
    call that makes a large temporary pays page faults again; raising the mmap and trim
    thresholds made such loops about 10x faster here. This changes the whole process's
    allocator, so it is not done at import: Interpreter() calls it, once per process (later
    calls return at once). Linux/glibc only, a no-op elsewhere or with ACELERA_NO_MALLOPT set.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return
    _malloc_tuned = True
    import ctypes
    import sys

    if not sys.platform.startswith("linux") or os.environ.get("ACELERA_NO_MALLOPT"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        libc.mallopt(M_MMAP_THRESHOLD, 256 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 512 << 20)
    except (OSError, AttributeError):
        pass


def _check_arity(fn, n: int, label: str) -> None:
    """A node with more (or fewer) inputs than its kernel's run() takes is a malformed model:
    refuse it at prepare, naming the node, instead of failing inside the kernel at invoke."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*([None] * n))
    except TypeError:
        takes = sum(1 for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        raise ModelError(f"{label}: has {n} input(s), its kernel takes {takes}") from None


class Executor:
    def __init__(self, subgraph: Subgraph, runtime=None):
        self.sg = subgraph
        self.runtime = runtime  # runtime.ModelRuntime: resolver, resources, called subgraphs
        self.shapes: list[tuple[int, ...]] = [t.shape for t in subgraph.tensors]
        self.values: list[np.ndarray | None] = [None] * len(subgraph.tensors)
        self.input_dtypes = tuple(subgraph.tensors[t].dtype for t in subgraph.inputs)
        self._plan: list[Step] = []
        self._compiled: Compiled | None = None  # the plan as run() calls it (see Compiled)
        self._prepared: dict[tuple, Step] = {}  # (node, input shapes) -> step prepared at invoke
        self._check_all = False  # the next run checks every step's input shapes
        self.plan_ready = False
        self.folded: set[int] = set()  # tensors computed once at prepare (see prepare)
        self.folded_nodes: list[int] = []  # the nodes that computed them, in execution order
        self.deferred: set[int] = set()  # nodes prepared at invoke (downstream of dynamic shapes)
        self._failed: Step | None = None
        self.report: DelegationReport | None = None  # set by partition.apply_delegates
        self.callee = False  # run by control flow (see _is_callee), not by an interpreter
        self.pinned: dict[int, np.ndarray] = {}  # input tensor -> the value it always has (prepare)

    @property
    def plan(self) -> list[Step]:
        """The execution plan. Assign a new list to change it (the executor keeps a compiled
        form of it); the executor itself edits it in place when shapes change at invoke."""
        return self._plan

    @plan.setter
    def plan(self, steps: list[Step]) -> None:
        self._plan = steps
        self._compiled = None

    # --- tensors -------------------------------------------------------------------------
    def tensor(self, i: int) -> Tensor:
        """The IR tensor with its current shape; a folded tensor (see `prepare`) is shown as a
        constant holding its folded value."""
        t = self.sg.tensors[i]
        if i in self.folded:
            return dataclasses.replace(t, shape=self.shapes[i], data=self.values[i])
        return t if t.shape == self.shapes[i] else dataclasses.replace(t, shape=self.shapes[i])

    def node_context(self, i: int) -> NodeContext:
        op = self.sg.operators[i]
        return NodeContext(i, op, tuple(self.tensor(t) if t >= 0 else None for t in op.inputs),
                           tuple(self.tensor(t) for t in op.outputs), self.runtime)

    def lookup(self, i: int):
        op = self.sg.operators[i]
        return self.runtime.lookup(op) if self.runtime is not None else lookup(op)

    # --- preparation ---------------------------------------------------------------------
    def reference_step(self, i: int) -> Step:
        """Bind node i to its reference kernel."""
        op = self.sg.operators[i]
        label = node_label(self.sg, i)
        try:
            spec = self.lookup(i)
        except UnsupportedOpError as e:
            where = f"subgraph {self.sg.index} " if self.sg.index else ""
            raise UnsupportedOpError(f"{where}node {i}: {e}") from None
        try:
            fn = spec.prepare(self.node_context(i))
        except AceleraError as e:
            raise type(e)(f"{label}: {e}") from None
        except Exception as e:
            raise KernelError(f"{label}: cannot prepare kernel: {type(e).__name__}: {e}") from None
        _check_arity(fn, len(op.inputs), label)
        return Step(label, fn, op.inputs, op.outputs, (i,), in_shapes=self._input_shapes(op.inputs))

    def _input_shapes(self, inputs: Sequence[int]) -> tuple:
        return tuple(self.shapes[t] if t >= 0 else None for t in inputs)

    def prepare(self) -> None:
        """Bind every node to its reference kernel in order (each sees the shapes its producers
        computed), fix shapes with a pass on zero inputs, and fold constant subexpressions.

        A node downstream of a data-dependent shape (WHERE, RANGE, a RESHAPE fed at run time,
        ...) that cannot be prepared on the placeholder shapes is deferred: it is prepared at
        invoke, when real values have fixed its input shapes, as LiteRT's dynamic tensors are.

        Folding: a node whose outputs are fixed once the plan is made runs here, once, on real
        values, and leaves the plan (see `_foldable`): DEQUANTIZE/DENSIFY of constant weights,
        any other deterministic op on constant or folded inputs with outputs of at most
        MAX_FOLDED_BYTES, and SHAPE/RANK of a tensor whose shape does not depend on input
        values. Folded values are read-only and shown to later kernels and delegates as
        constants (`tensor`); every prepare (allocate_tensors after a resize) folds again.

        With a memory budget (the runtime's max_memory_bytes) every step is checked against it
        before its kernel runs, at the shapes the pass has computed so far (memory.StepBudget): a
        MemoryBudgetError, never deferred, instead of a kernel allocating past it."""
        self.folded = set()
        self.folded_nodes = []
        self.deferred = set()
        self._prepared = {}
        self._check_all = False
        self.values = [t.data if t.is_constant else None for t in self.sg.tensors]
        for t, v in self.pinned.items():  # shown to kernels as constants, like folded tensors
            self.values[t] = v
            self.folded.add(t)
        self.reset_variables()
        self.plan = []
        self.plan_ready = False
        budget = getattr(self.runtime, "max_memory_bytes", None)  # set by the interpreter at allocate
        self._budget = memory.StepBudget(self.sg, self.shapes, budget) if budget else None
        tainted: set[int] = set()  # tensors whose shape may change with input values
        # tensors whose shape may differ at invoke from the one the plan records (a called
        # subgraph's inputs change shape without a new prepare): never folded through SHAPE
        varying: set[int] = set(self.sg.inputs) - self.folded if self._is_callee() else set()
        fixed = {t.index for t in self.sg.tensors if t.is_constant and not t.is_variable} | self.folded
        for i in self.sg.execution_order:
            op = self.sg.operators[i]
            dynamic_in = any(t in tainted for t in op.inputs)
            step = None
            try:
                step = self.reference_step(i)
                self._shape_pass(step, self._foldable(i, fixed, varying))
            except (UnsupportedOpError, memory.MemoryBudgetError):
                raise
            except AceleraError:
                if not dynamic_in:
                    raise
                self._defer(i)
            if self.folded_nodes and self.folded_nodes[-1] == i:
                fixed.update(op.outputs)
                continue
            if dynamic_in or op.op in DATA_DEPENDENT_SHAPES or i in self.deferred:
                tainted.update(op.outputs)
            if (step is None or i in self.deferred or not varying.isdisjoint(op.inputs)
                    or output_shape_varies(self, step, fixed)):
                varying.update(op.outputs)
        self._budget = None
        for t in self.sg.inputs:
            current = self.values[t]
            if current is None or current.shape != self.shapes[t]:
                self.values[t] = np.zeros(self.shapes[t], self.sg.tensors[t].dtype)
        self.reset_variables()
        self._compiled = None
        self.plan_ready = True

    def _is_callee(self) -> bool:
        """Whether this executor runs a subgraph that control flow calls (ModelRuntime.callee)."""
        if self.callee:
            return True
        callees = getattr(self.runtime, "_callees", None)
        return isinstance(callees, dict) and callees.get(self.sg.index) is self

    def _foldable(self, i: int, fixed: set[int], varying: set[int]) -> bool:
        """Whether node i's outputs are fixed once the plan is made, so that it may be folded:
        a deterministic, stateless reference kernel (not a user's resolver's) over `fixed`
        (constant or folded) inputs, or SHAPE/RANK of a tensor whose shape is not `varying`."""
        op = self.sg.operators[i]
        if op.op in NEVER_FOLDED or not op.outputs or not any(t >= 0 for t in op.inputs):
            return False
        tensors = self.sg.tensors
        if any(tensors[t].is_variable or tensors[t].type_name in _UNFOLDABLE_TYPES for t in op.outputs):
            return False
        if op.op in ("SHAPE", "RANK"):
            x = op.inputs[0]
            if x < 0 or x in varying:
                return False
        elif not all(t < 0 or t in fixed for t in op.inputs):
            return False
        resolver = getattr(self.runtime, "resolver", None)
        if resolver is not None and resolver(op) is not None:
            return False
        if not getattr(self.runtime, "fold_constants", True) and op.op not in FOLDABLE:
            return False  # the interpreter asked for LiteRT's plan: only weights are folded
        return op.op in registered()  # CUSTOM ops never fold

    def _defer(self, i: int) -> None:
        """Leave node i to be prepared at invoke; its outputs keep their declared shapes."""
        op = self.sg.operators[i]
        self.deferred.add(i)
        for t in op.outputs:
            decl = self.sg.tensors[t]
            self.shapes[t] = decl.shape
            self.values[t] = np.zeros(decl.shape, decl.dtype)
        self.plan.append(Step(node_label(self.sg, i), unprepared, op.inputs, op.outputs, (i,)))

    def reset_variables(self) -> None:
        """Variable (state) tensors back to their initial value, as LiteRT's AllocateTensors does:
        a constant's data, else zero (the zero point for int8 states, as
        LiteRT's ResetVariableTensor does)."""
        for t in self.sg.tensors:
            if t.is_variable:
                if t.is_constant:
                    self.values[t.index] = np.array(t.data, copy=True)
                    continue
                zero = int(t.quantization.zero_point[0]) if t.quantized and t.type_name == "INT8" else 0
                self.values[t.index] = np.full(self.shapes[t.index], zero, t.dtype)

    def _shape_pass(self, step: Step, foldable: bool = False) -> None:
        """Run `step` once on current values (zeros for graph inputs) to learn output shapes.
        A `foldable` step (see `_foldable`) runs on its real, fixed inputs outside the shape pass
        and is folded: left out of the plan, its outputs kept read-only (unless they are larger
        than MAX_FOLDED_BYTES, or its kernel fails on them: then it stays a run-time node, and
        fails at invoke as it would without folding)."""
        args: list[np.ndarray | None] = []
        for t in step.inputs:
            if t < 0:
                args.append(None)
                continue
            v = self.values[t]
            if v is None:
                v = np.zeros(self.shapes[t], self.sg.tensors[t].dtype)
            args.append(v)
        budget = getattr(self, "_budget", None)
        if budget is not None and len(step.nodes) == 1:  # before the kernel allocates its outputs
            budget.before(self.sg.operators[step.nodes[0]], self.shapes, step.label)
        outs = None
        if foldable:
            try:
                with np.errstate(all="ignore"):
                    outs = self._call(step, args)
            except AceleraError:
                foldable = False
        if outs is None:
            with np.errstate(all="ignore"), shape_pass():
                outs = self._call(step, args)
        for t, v in zip(step.outputs, outs):
            declared = self.sg.tensors[t]
            if v.dtype != declared.dtype:
                raise KernelError(f"{step.label}: kernel produced {v.dtype} for tensor {t} "
                                  f"but the model declares {declared.type_name}")
        if foldable and self.sg.operators[step.nodes[0]].op not in FOLDABLE:
            foldable = sum(v.nbytes for v in outs) <= MAX_FOLDED_BYTES
        for t, v in zip(step.outputs, outs):
            if foldable and v.flags.writeable:
                v = v.view()  # the kernel may keep (and later write) the array it returned
                v.flags.writeable = False
            self.shapes[t] = tuple(v.shape)
            self.values[t] = v
        if budget is not None:
            budget.after(step.outputs, self.shapes, step.label)
        if foldable:
            self.folded.update(step.outputs)
            self.folded_nodes.append(step.nodes[0])
        else:
            self.plan.append(step)

    def _call(self, step: Step, args: Sequence) -> tuple[np.ndarray, ...]:
        try:
            res = step.fn(*args)
        except AceleraError as e:
            raise type(e)(f"{step.label}: {e}") from None
        except Exception as e:
            raise KernelError(f"{step.label}: {type(e).__name__}: {e}") from None
        if not isinstance(res, (tuple, list)):
            res = (np.asarray(res),)
        res = tuple(np.asarray(r) for r in res)
        if len(res) != len(step.outputs):
            raise KernelError(f"{step.label}: kernel returned {len(res)} outputs, expected {len(step.outputs)}")
        return tuple(res)

    # --- execution -----------------------------------------------------------------------
    def run_profiled(self) -> list[float]:
        """Run the plan step by step and return each step's wall time in seconds (same order
        as `plan`). Every step's input shapes are checked, as in a run after a shape change."""
        times: list[float] = []
        self._failed = None
        try:
            self._quietly(self._run_profiled, self.values, times)
        except BaseException as e:
            self._check_all = True
            self._relabel(e)
        return times

    def _run_profiled(self, values: list, times: list[float]) -> None:
        import time

        clock = time.perf_counter
        plan = self._plan
        if self._compiled is not None:
            self._compiled.variants.clear()
        j = 0
        while j < len(plan):
            t0 = clock()
            nxt = self._dynamic_step(values, j, None)
            if nxt != j:  # j == nxt: a delegated step gave way to reference steps
                times.append(clock() - t0)
            j = nxt

    def run(self, inputs_changed: bool = False) -> None:
        """Run the plan on `values`. With `inputs_changed` the subgraph's inputs may have other
        shapes than `shapes` records (a called subgraph whose loop variables change shape):
        the steps whose input shapes changed are then re-prepared, as after a data-dependent
        shape."""
        self._failed = None
        try:
            if inputs_changed or self._check_all or not fpstate.fp_errors_ignored():
                self._quietly(self._run, self.values, inputs_changed)
            else:  # a subgraph called from a running plan, its inputs as last time
                k = self._run_plan(self.values)
                if k is not None:
                    self._run_rest(self.values, k)
        except BaseException as e:
            self._relabel(e)

    def run_unchanged(self) -> None:
        """run() for a called subgraph whose inputs kept their shapes, from inside a running
        plan (numpy's floating-point errors already ignored): the compiled plan directly."""
        c = self._compiled
        fn = c.fn if c is not None else None
        if c is None or fn is None or self._check_all:
            self.run(False)
            return
        self._failed = None
        values = self.values
        try:
            k = fn(values, self.shapes, c.kernels, c.guards, self._guard_failed, self._store, _ND)
        except BaseException as e:
            self._failed = c.failed_step(e.__traceback__)
            self._relabel(e)
        if k is not None:
            try:
                self._run_rest(values, k)
            except BaseException as e:
                self._relabel(e)

    @staticmethod
    def _quietly(fn, *args) -> None:
        """fn(*args) with numpy's floating-point errors ignored."""
        if fpstate.FP_STATE is None:  # pragma: no cover - numpy 1.x
            with np.errstate(all="ignore"):
                fn(*args)
            return
        token = fpstate.quiet_fp()
        if token is None:  # already quiet: a subgraph called from a running plan
            fn(*args)
            return
        try:
            fn(*args)
        finally:
            fpstate.FP_STATE.reset(token)

    def _relabel(self, e: BaseException) -> None:
        """Raise `e` naming the step that failed (`_failed`): AceleraErrors keep their type,
        other exceptions become KernelErrors. Other BaseExceptions pass unchanged."""
        step = self._failed
        if isinstance(e, AceleraError):
            if step is None:
                raise e
            raise type(e)(f"{step.label}: {e}") from None
        if isinstance(e, Exception):
            label = step.label if step is not None else "plan"
            raise KernelError(f"{label}: {type(e).__name__}: {e}") from None
        raise e

    def _run(self, values: list, inputs_changed: bool) -> None:
        changed: set[int] | None = None
        if inputs_changed:
            shapes = self.shapes
            changed = set()
            for t in self.sg.inputs:
                s = tuple(np.shape(values[t]))
                if s != shapes[t]:
                    shapes[t] = s
                    changed.add(t)
        if self._check_all:  # a dynamic run failed half-way: some steps may be stale
            self._check_all = False
            self._run_dynamic(values, 0, None)
        elif changed:
            self._run_dynamic(values, 0, changed)
        else:
            k = self._run_plan(values)
            if k is not None:
                self._run_rest(values, k)

    def _run_rest(self, values: list, k: int) -> None:
        """Go on step by step where `_run_plan` stopped (its return value k)."""
        if k < 0:  # a delegated step gave way to reference steps: check from there on
            self._run_dynamic(values, ~k, None)
        else:  # step k - 1's outputs changed shape where the plan did not expect it
            self._run_dynamic(values, k, set(self._plan[k - 1].outputs))

    def _compile(self) -> Compiled:
        self._compiled = Compiled(self)
        return self._compiled

    def _run_plan(self, values: list) -> int | None:
        """Run the compiled plan (see Compiled). Returns None when done, else where
        `_run_dynamic` takes over: k + 1 after a step k whose outputs changed shape where the
        plan did not expect it, ~j (negative) at a step j to check from there on (not prepared
        yet, or a delegated step that gave way to reference steps)."""
        c = self._compiled
        if c is None:
            c = self._compile()
        fn = c.fn
        if fn is None:
            c.runs += 1
            if c.runs <= COMPILE_AFTER:
                return self._interpret(c, values)
            fn = c.generate()
        try:
            return fn(values, self.shapes, c.kernels, c.guards, self._guard_failed, self._store, _ND)
        except BaseException as e:
            self._failed = c.failed_step(e.__traceback__)
            raise

    def _interpret(self, c: Compiled, values: list) -> int | None:
        """_run_plan before the plan is generated: a loop over (kernel, whether its arguments
        come from a tuple-returning getter, that getter or the single input's index, the single
        output's index or -1, k), checking every output's shape."""
        shapes = self.shapes
        nd = _ND
        k = -1
        try:
            for fn, many, src, t, k in c.entries:
                res = fn(*src(values)) if many else fn(values[src])
                if t >= 0 and res.__class__ is nd:
                    values[t] = res
                    if res.shape == shapes[t]:
                        continue
                    shapes[t] = res.shape
                elif not self._store(k, res):
                    continue
                return k + 1
        except Unprepared:
            return ~k
        except BaseException:
            self._failed = self._plan[k] if k >= 0 else None
            raise
        return None

    def _store(self, k: int, res) -> bool:
        """Store the outputs of plan step k (several, or not a plain ndarray) and record their
        shapes; True when one changed shape."""
        outputs = self._plan[k].outputs
        if len(outputs) == 1 and isinstance(res, np.ndarray):
            res = (res,)
        values, shapes = self.values, self.shapes
        changed = False
        for t, v in zip(outputs, res):
            values[t] = v
            s = tuple(np.shape(v))
            if s != shapes[t]:
                shapes[t] = s
                changed = True
        return changed

    def _guard_failed(self, k: int, key: tuple | None = None) -> bool:
        """A compiled step's guarded inputs changed shape (to `key`): re-prepare it in place
        (True when the plan itself changed, so the rest must run step by step from k)."""
        c = self._compiled
        if c is not None and key is not None:
            hit = c.variants.get((k, key))
            if hit is not None:  # prepared before for these shapes
                self._plan[k] = hit[0]
                c.kernels[k], c.entries[k], c.guards[k] = hit[0].fn, hit[1], key
                return False
        step = self._plan[k]
        values: list = self.values
        now = tuple(tuple(np.shape(values[t])) if t >= 0 else None for t in step.inputs)
        if step.in_shapes == now:
            if c is not None:
                c.replace(k, step)
            return False
        if self._reprepare(k, now):
            return True
        if c is not None and c is self._compiled and key is not None and c.guards[k] == key:
            c.remember(k, key)
        return False

    def _reprepare(self, j: int, now: tuple) -> bool:
        """Plan step j prepared for input shapes `now` (which `shapes` records from here); True
        when the step was delegated and gave way to reference steps (the plan changed)."""
        step = self._plan[j]
        shapes = self.shapes
        for t, s in zip(step.inputs, now):
            if s is not None:  # t >= 0
                shapes[t] = s
        if step.delegate is not None:
            self._undelegate(j)
            return True
        self._failed = None
        budget = getattr(self.runtime, "max_memory_bytes", None)
        if budget:  # the new shapes come from data: check them as the shape pass checks declared ones
            memory.StepBudget(self.sg, shapes, budget).before(self.sg.operators[step.nodes[0]], shapes, step.label)
        if step.in_shapes is not None and step.fn is not unprepared:
            self._keep_prepared(step)  # the shapes may come back
        new = self._prepared_step(step.nodes[0], now)
        self._plan[j] = new
        if self._compiled is not None:
            self._compiled.replace(j, new)
        return False

    def _run_dynamic(self, values: list, j: int, changed: set[int] | None) -> None:
        """Run plan steps j, j+1, ... after a shape the plan did not expect (tensors `changed`
        differ from their last shapes; None: check every step), re-preparing every step whose
        input shapes changed (LiteRT resizes dynamic tensors and re-prepares their consumers
        the same way). Steps prepared here are kept per (node, input shapes), so a loop body
        whose shapes alternate prepares each variant once. A delegated step whose inputs
        changed shape falls back to the reference kernels of its nodes."""
        if self._compiled is not None:  # the shapes the variants were prepared under may change
            self._compiled.variants.clear()
        try:
            plan = self._plan
            while j < len(plan):
                j = self._dynamic_step(values, j, changed)
        except BaseException:
            self._check_all = True
            raise

    def _dynamic_step(self, values: list, j: int, changed: set[int] | None) -> int:
        """Run plan step j, re-preparing it first when its input shapes changed; returns the
        index of the next step (j again when a delegated step gave way to reference steps)."""
        step = self._plan[j]
        if changed is None or step.in_shapes is None or not changed.isdisjoint(step.inputs):
            now = tuple(tuple(np.shape(values[t])) if t >= 0 else None for t in step.inputs)
            if step.in_shapes != now:
                if self._reprepare(j, now):
                    return j
                step = self._plan[j]
        self._failed = step
        res = step.fn(*[values[i] if i >= 0 else None for i in step.inputs])
        if isinstance(res, np.ndarray):
            res = (res,)
        shapes = self.shapes
        for t, v in zip(step.outputs, res):
            values[t] = v
            s = tuple(np.shape(v))
            if s != shapes[t]:
                shapes[t] = s
                if changed is not None:
                    changed.add(t)
        return j + 1

    def _prepared_step(self, node: int, in_shapes: tuple) -> Step:
        """Node `node` prepared for inputs of `in_shapes` (which `shapes` now holds)."""
        step = self._prepared.get((node, in_shapes))
        if step is None:
            step = self._keep_prepared(self.reference_step(node))
        self.deferred.discard(node)
        return step

    def _keep_prepared(self, step: Step) -> Step:
        """Remember a reference step by node and input shapes (bounded)."""
        if len(self._prepared) >= MAX_PREPARED_STEPS:
            self._prepared.clear()
        self._prepared[(step.nodes[0], step.in_shapes)] = step
        return step

    def _undelegate(self, j: int) -> None:
        """Replace delegated plan step j by reference steps for its nodes (shapes went dynamic)."""
        import warnings

        step = self.plan[j]
        assert step.delegate is not None  # only delegated steps are undelegated
        refs = [Step(node_label(self.sg, n), unprepared, self.sg.operators[n].inputs,
                     self.sg.operators[n].outputs, (n,)) for n in sorted(step.nodes, key=self.sg.execution_order.index)]
        self.plan[j:j + 1] = refs
        self._compiled = None
        msg = "input shapes changed at invoke (dynamic tensors); the nodes run on the CPU reference"
        if self.report is not None:
            self.report.failures.append((step.delegate, step.nodes, msg))
            for n in step.nodes:
                self.report.node_delegate.pop(n, None)
        warnings.warn(f"{step.delegate} partition of nodes {list(step.nodes)}: {msg}", stacklevel=3)
