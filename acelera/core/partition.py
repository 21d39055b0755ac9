"""Graph partitioning between delegates, as TFLite does it.

`partition_units` is TFLite's PartitionGraphIntoIndependentNodeSubsets (graph_info.cc): an
epoch-based topological sweep where each epoch collects ready nodes of one kind (supported or
not), so the subsets it returns can be replaced by single kernels without creating cycles.
`apply_delegates` asks each delegate in turn about the nodes still on the CPU, keeps its
largest partitions (ties in graph order) under its limits, prepares a kernel per partition,
and undoes any partition whose preparation fails.
"""
from __future__ import annotations

import dataclasses
import heapq
import warnings
from dataclasses import dataclass, field
from typing import Sequence, cast

import numpy as np

from acelera.core.delegate import Delegate, Partition, Support
from acelera.core.errors import AceleraError
from acelera.core.executor import DATA_DEPENDENT_SHAPES, FOLDABLE, Executor, Step
from acelera.core.kernels.registry import shape_pass


class DelegationError(AceleraError):
    """Delegation was required to be complete and was not, or a delegate failed fatally."""


class DelegationWarning(UserWarning):
    """A delegate could not take a partition; its nodes run on the CPU."""


@dataclass
class Unit:
    """A node of the current execution plan: one CPU node or one delegated partition."""

    nodes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    step: Step
    delegate: str | None = None


@dataclass
class DelegationReport:
    """What ran where: per node the delegate that took it, and each delegate's refusals."""

    delegates: list[str] = field(default_factory=list)
    node_delegate: dict[int, str] = field(default_factory=dict)
    rejections: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    partitions: list[tuple[str, Partition]] = field(default_factory=list)
    failures: list[tuple[str, tuple[int, ...], str]] = field(default_factory=list)
    folded: tuple[int, ...] = ()

    def nodes_of(self, delegate: str) -> list[int]:
        return sorted(n for n, d in self.node_delegate.items() if d == delegate)

    def partitions_of(self, delegate: str) -> list[Partition]:
        return [p for d, p in self.partitions if d == delegate]


def partition_units(units: Sequence[Unit], supported: Sequence[bool], greedy: bool = True) -> list[tuple[bool, list[int]]]:
    """Split units into (kind, [unit indices]) subsets, in epoch order."""
    produced = {t for u in units for t in u.outputs}
    ready = {t for u in units for t in u.inputs if t not in produced}
    assigned = [False] * len(units)
    subsets: list[tuple[bool, list[int]]] = []
    remaining = len(units)
    while remaining:
        kind: bool | None = None
        current: list[int] = []
        changed = True
        while changed:
            changed = False
            for i, u in enumerate(units):
                if assigned[i]:
                    continue
                if not all(t in ready for t in u.inputs) or (kind is not None and supported[i] != kind):
                    if greedy:
                        continue
                    break
                kind = supported[i] if kind is None else kind
                assigned[i] = True
                current.append(i)
                remaining -= 1
                ready.update(u.outputs)
                changed = True
            if not greedy:
                break
        if not current:  # cannot happen for an acyclic plan; guard against looping forever
            raise DelegationError("partitioning found no ready node: the plan has a cycle")
        subsets.append((bool(kind), current))
    return subsets


def select_partitions(subsets: list[list[int]], sizes: Sequence[int], max_partitions: int, min_nodes: int) -> list[list[int]]:
    """The largest subsets first (stable for ties), at most max_partitions, none below min_nodes."""
    order = sorted(subsets, key=lambda s: -sum(sizes[i] for i in s))
    chosen: list[list[int]] = []
    for s in order:
        if max_partitions > 0 and len(chosen) >= max_partitions:
            break
        if min_nodes > 0 and sum(sizes[i] for i in s) < min_nodes:
            break
        chosen.append(s)
    return chosen


def _boundary(ex: Executor, units: Sequence[Unit], members: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    inside = set(members)
    produced = {t for i in members for t in units[i].outputs}
    inputs = sorted({t for i in members for t in units[i].inputs if t not in produced})
    used_outside = {t for j, u in enumerate(units) if j not in inside for t in u.inputs}
    outputs = sorted(t for t in produced if t in used_outside or t in ex.sg.outputs)
    return tuple(inputs), tuple(outputs)


def _topological(units: list[Unit]) -> list[Unit]:
    producer = {t: i for i, u in enumerate(units) for t in u.outputs}
    deps = [{producer[t] for t in u.inputs if t in producer and producer[t] != i} for i, u in enumerate(units)]
    users: dict[int, list[int]] = {}
    for i, d in enumerate(deps):
        for p in d:
            users.setdefault(p, []).append(i)
    missing = [len(d) for d in deps]
    heap = [(min(units[i].nodes), i) for i in range(len(units)) if missing[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, i = heapq.heappop(heap)
        out.append(units[i])
        for j in users.get(i, ()):
            missing[j] -= 1
            if missing[j] == 0:
                heapq.heappush(heap, (min(units[j].nodes), j))
    if len(out) != len(units):
        raise DelegationError("delegation produced a cyclic plan")
    return out


def fp16_weight_sources(ex: Executor) -> dict[int, int]:
    """Folded DEQUANTIZE outputs whose source is a constant float16 tensor: output -> source."""
    out = {}
    for op in ex.sg.operators:
        if op.op == "DEQUANTIZE" and op.inputs and op.inputs[0] >= 0 and op.outputs[0] in ex.folded:
            src = ex.sg.tensors[op.inputs[0]]
            if src.is_constant and src.type_name == "FLOAT16":
                out[op.outputs[0]] = op.inputs[0]
    return out


def _ask(delegate: Delegate, ex: Executor, node: int, fp16: dict[int, int] | None = None) -> Support:
    """The delegate's verdict on a node. For fp16-aware delegates (FP16GraphPartitionHelper)
    inputs fed by folded fp16 DEQUANTIZE nodes are shown as the constant fp16 tensors."""
    ctx = ex.node_context(node)
    if fp16:
        ins = ex.sg.operators[node].inputs
        ctx = dataclasses.replace(ctx, inputs=tuple(ex.tensor(fp16[t]) if t in fp16 else c for t, c in zip(ins, ctx.inputs)))
    try:
        s = delegate.is_node_supported(ctx)
    except Exception as e:
        return Support(False, f"{ex.sg.operators[node].name}: {delegate.name} raised {type(e).__name__}: {e}")
    return s if isinstance(s, Support) else Support(bool(s), "" if s else "rejected")


def _not_prepared(*args):
    """The step of a partition a dry run did not prepare (a dry run never runs its plan)."""
    raise DelegationError("the delegate did not prepare this partition")


def _check_kernel(ex: Executor, kernel, partition: Partition) -> None:
    """Run a freshly prepared kernel once on the reference pass's values (part of the shape
    pass: placeholder zeros) and check its outputs."""
    with np.errstate(all="ignore"), shape_pass():
        outs = kernel.invoke(*[ex.values[t] for t in partition.inputs])
    if isinstance(outs, np.ndarray):
        outs = (outs,)
    outs = tuple(outs)
    if len(outs) != len(partition.outputs):
        raise AceleraError(f"returned {len(outs)} outputs, expected {len(partition.outputs)}")
    for t, v in zip(partition.outputs, outs):
        want = ex.values[t]
        assert want is not None  # the shape pass computed every tensor a node outputs
        if not isinstance(v, np.ndarray) or v.dtype != want.dtype or v.shape != want.shape:
            got = f"{getattr(v, 'dtype', type(v).__name__)}{list(getattr(v, 'shape', ()))}"
            raise AceleraError(f"output tensor {t} is {got}, expected {want.dtype}{list(want.shape)}")


class DelegateInvokeError(AceleraError, RuntimeError):
    """A delegate kernel failed at invoke, or returned outputs that break the model's contract."""


class _DelegatedStep:
    """A partition's step: the delegate kernel, with its outputs checked on every invoke
    (count, dtype, and shape as prepared unless a node's output shape depends on data) and, when
    `cpu_fallback`, the partition's nodes run on
    the reference kernels for an invoke where the kernel raises (LiteRT's
    InvokeWithCPUFallback), with a DelegationWarning saying so."""

    def __init__(self, ex: Executor, name: str, kernel, part: Partition, cpu_fallback: bool):
        self.ex, self.name, self.kernel, self.part, self.cpu_fallback = ex, name, kernel, part, cpu_fallback
        self.expected: list[tuple[np.dtype, tuple[int, ...]]] = []
        for t in part.outputs:
            v = ex.values[t]
            assert v is not None  # the shape pass computed every tensor a node outputs
            self.expected.append((v.dtype, v.shape))
        #: output shapes are fixed unless a node's output shape depends on input values (RANGE, WHERE, ...)
        self.static = not any(ex.sg.operators[n].op in DATA_DEPENDENT_SHAPES for n in part.nodes)
        self._cpu: list[Step] | None = None

    def __call__(self, *args):
        try:
            outs = self.kernel.invoke(*args)
        except Exception as e:
            msg = str(e) if isinstance(e, AceleraError) else f"{type(e).__name__}: {e}"
            if not self.cpu_fallback:
                raise DelegateInvokeError(f"{self.name} delegate failed during invoke: {msg}") from None
            warnings.warn(f"{self.name} delegate failed during invoke on nodes {list(self.part.nodes)} ({msg}); "
                          f"they ran on the CPU for this invoke", DelegationWarning, stacklevel=2)
            return self._on_cpu(args)
        if isinstance(outs, np.ndarray):
            outs = (outs,)
        outs = tuple(outs)
        if len(outs) != len(self.expected):
            raise DelegateInvokeError(f"{self.name} delegate returned {len(outs)} outputs at invoke, "
                                      f"expected {len(self.expected)}")
        for t, v, (dt, shape) in zip(self.part.outputs, outs, self.expected):
            if not isinstance(v, np.ndarray) or v.dtype != dt or (self.static and v.shape != shape):
                got = f"{getattr(v, 'dtype', type(v).__name__)}{list(getattr(v, 'shape', ()))}"
                raise DelegateInvokeError(f"{self.name} delegate returned {got} for output tensor {t} at invoke, "
                                          f"the model declares {dt}{list(shape)}")
        return outs

    def _on_cpu(self, args) -> tuple[np.ndarray, ...]:
        ex = self.ex
        if self._cpu is None:
            members = set(self.part.nodes)
            self._cpu = [ex.reference_step(i) for i in ex.sg.execution_order if i in members]
        values = dict(zip(self.part.inputs, args))
        for step in self._cpu:
            ins = [None if t < 0 else values[t] if t in values else ex.values[t] for t in step.inputs]
            res = step.fn(*ins)
            res = res if isinstance(res, (tuple, list)) else (res,)
            values.update(zip(step.outputs, (np.asarray(r) for r in res)))
        return tuple(values[t] for t in self.part.outputs)


def apply_delegates(ex: Executor, delegates: Sequence[Delegate], require_full_delegation: bool = False,
                    dry_run: bool = False, cpu_fallback: bool = False) -> DelegationReport:
    """Prepare `ex` with the delegates applied in order; returns (and stores) the report.

    With `dry_run` nothing is prepared: the report says what each delegate would take
    (assuming its preparation succeeds) and the plan stays on the reference kernels. With
    `cpu_fallback`, a partition whose kernel raises at invoke runs on the CPU for that invoke.
    """
    ex.prepare()
    report = DelegationReport(delegates=[d.name for d in delegates])
    report.folded = tuple(sorted(ex.folded_nodes))
    # the folded weight nodes (fp16 DEQUANTIZE, DENSIFY) an fp16-aware delegate counts as its own
    weight_nodes = tuple(n for n in report.folded if ex.sg.operators[n].op in FOLDABLE)
    units = [Unit(s.nodes, tuple(sorted({t for t in s.inputs if t >= 0})), s.outputs, s) for s in ex.plan]
    for d in delegates:
        fp16 = fp16_weight_sources(ex) if d.fp16_weights_aware else None
        supported = []
        for u in units:
            if u.delegate is not None:
                supported.append(False)
                continue
            s = _ask(d, ex, u.nodes[0], fp16)
            supported.append(s.ok)
            if not s.ok:
                report.rejections.setdefault(u.nodes[0], []).append((d.name, s.reason))
        subsets = [s for kind, s in partition_units(units, supported) if kind]
        max_p, min_n = d.partition_limits()
        chosen = select_partitions(subsets, [len(u.nodes) for u in units], max_p, min_n)
        full = bool(units) and all(supported)
        replaced: dict[int, Unit] = {}
        for members in chosen:
            nodes = tuple(sorted(n for i in members for n in units[i].nodes))
            inputs, outputs = _boundary(ex, units, members)
            # constants hold their data and folded tensors their computed value: never None
            const = cast("dict[int, np.ndarray]",
                         {t: ex.values[t] for t in inputs if ex.sg.tensors[t].is_constant or t in ex.folded})
            part = Partition(nodes, inputs, outputs, {n: ex.node_context(n) for n in nodes}, const)
            try:
                kernel = None if dry_run else d.prepare(part)
                if kernel is not None:
                    _check_kernel(ex, kernel, part)
            except Exception as e:
                msg = f"{type(e).__name__}: {e}" if not isinstance(e, AceleraError) else str(e)
                report.failures.append((d.name, nodes, msg))
                if require_full_delegation:
                    raise DelegationError(f"{d.name} failed to prepare nodes {list(nodes)}: {msg}") from None
                warnings.warn(f"{d.name} delegate failed to prepare nodes {list(nodes)} ({msg}); "
                              f"they run on the CPU", DelegationWarning, stacklevel=2)
                continue
            label = f"{d.name} partition of {len(nodes)} nodes"
            fn = _DelegatedStep(ex, d.name, kernel, part, cpu_fallback) if kernel is not None else _not_prepared
            unit = Unit(nodes, inputs, outputs, Step(label, fn, inputs, outputs, nodes, d.name,
                                                   ex._input_shapes(inputs)), d.name)
            for i in members:
                replaced[i] = unit
            for n in nodes:
                report.node_delegate[n] = d.name
            report.partitions.append((d.name, part))
        if d.fp16_weights_aware and full and not report.failures:
            for n in weight_nodes:
                report.node_delegate.setdefault(n, d.name)
        if replaced:
            new_units, seen = [], set()
            for i, u in enumerate(units):
                r = replaced.get(i, u)
                if id(r) not in seen:
                    seen.add(id(r))
                    new_units.append(r)
            units = _topological(new_units)
    if not dry_run:
        ex.plan = [u.step for u in units]
        ex.reset_variables()
    ex.report = report
    if require_full_delegation and not dry_run:
        cpu = [n for u in units if u.delegate is None for n in u.nodes]
        if not delegates or cpu:
            raise DelegationError(f"Disallowed CPU fallback detected: nodes {cpu[:20]} run on the CPU")
    return report
