"""Model-wide state shared by the executors of one interpreter.

An interpreter runs its primary subgraph (and signature subgraphs) through one `Executor` each;
control-flow kernels (IF, WHILE, CALL_ONCE) call the model's other subgraphs through this
runtime, and resource kernels (VAR_HANDLE, READ/ASSIGN_VARIABLE, HASHTABLE_*) keep their state
here, so variables persist across invokes and are shared by every subgraph of the model.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from acelera.core.errors import AceleraError
from acelera.core.model import Model, Operator

Resolver = Callable[[Operator], Any]  # Operator -> KernelSpec (registry.lookup's contract)


class ModelRuntime:
    """The model, its op resolver, its resources and the executors of called subgraphs."""

    def __init__(self, model: Model, resolver: Resolver | None = None):
        self.model = model
        self.resolver = resolver
        self.resources: dict[int, Any] = {}  # resource id -> variable value or hashtable dict
        self.resource_ids: dict[tuple[str, str], int] = {}  # (container, shared_name) -> id
        self.initialized: set[int] = set()  # subgraphs CALL_ONCE has run
        self._callees: dict[int, Any] = {}  # subgraph index -> Executor
        self._active: list[int] = []
        self.max_memory_bytes: int | None = None  # the interpreter's memory budget (Executor.prepare)
        self.fold_constants = True  # Executor.prepare folds shape computations (Interpreter(fold_constants=))

    def lookup(self, op: Operator):
        """The kernel spec for `op`: the interpreter's resolver first, then the registry."""
        from acelera.core.kernels.registry import lookup

        if self.resolver is not None:
            spec = self.resolver(op)
            if spec is not None:
                return spec
        return lookup(op)

    def reset(self) -> None:
        """Forget resource variables, hashtables and CALL_ONCE state (reset_all_variables)."""
        self.resources.clear()
        self.initialized.clear()

    def variable_id(self, container: str, shared_name: str) -> int:
        """The resource id of a VAR_HANDLE (same names -> same variable across subgraphs)."""
        key = (container or "", shared_name or "")
        if key not in self.resource_ids:
            self.resource_ids[key] = len(self.resource_ids)
        return self.resource_ids[key]

    # --- called subgraphs ----------------------------------------------------------------
    def check_subgraph(self, index: int, what: str) -> None:
        n = len(self.model.subgraphs)
        if not 0 < index < n:
            raise AceleraError(f"{what} subgraph index {index} out of range (1..{n - 1})")

    def callee(self, index: int, shapes: Sequence[tuple[int, ...]]):
        """The executor of subgraph `index`, prepared for inputs of `shapes` (re-prepared when
        they change); unsupported ops inside it surface here, at the caller's prepare."""
        from acelera.core.executor import Executor

        ex = self._callees.get(index)
        if ex is None:
            ex = self._callees[index] = Executor(self.model.subgraphs[index], self)
        sg = ex.sg
        if len(shapes) != len(sg.inputs):
            raise AceleraError(f"subgraph {index} takes {len(sg.inputs)} inputs, the caller passes {len(shapes)}")
        want = [tuple(int(d) for d in s) for s in shapes]
        if not ex.plan_ready or any(ex.shapes[t] != s for t, s in zip(sg.inputs, want)):
            for t, s in zip(sg.inputs, want):
                ex.shapes[t] = s
            ex.prepare()
        return ex

    def call(self, index: int, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run subgraph `index` on `inputs` and return its outputs. Inputs whose shapes differ
        from the last call's re-prepare only the steps they reach (a loop body whose variables
        change shape is not re-planned)."""
        active = self._active
        if index in active:
            raise AceleraError(f"subgraph {index} is called recursively")
        ex = self._callees.get(index)
        if ex is None or not ex.plan_ready:
            ex = self.callee(index, [np.shape(x) for x in inputs])
        sg = ex.sg
        if len(inputs) != len(sg.inputs):
            raise AceleraError(f"subgraph {index} takes {len(sg.inputs)} inputs, the caller passes {len(inputs)}")
        values, shapes = ex.values, ex.shapes
        changed = False
        for t, want, x in zip(sg.inputs, ex.input_dtypes, inputs):
            if x.dtype is not want and x.dtype != want:
                x = np.asarray(x, want)
            values[t] = x
            if x.shape != shapes[t]:
                changed = True
        active.append(index)
        try:
            ex.run(changed)
        finally:
            active.pop()
        return [values[t] for t in sg.outputs]
