"""The delegate API: Delegate, DelegateKernel, and declarative op support tables.

In the spirit of TFLite's SimpleDelegate: a delegate says which nodes it supports (with a
reason when it does not), how it wants to be partitioned, and turns each partition it is
given into a DelegateKernel that runs on numpy arrays at the partition boundary.

An OpTable is data, like onnxruntime's GetCapability tables and TFLite's op lists: the same
table drives partitioning, `acelera delegates show` and conformance case generation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from acelera.core.kernels.registry import NodeContext


@dataclass(frozen=True)
class Support:
    """Whether a delegate takes a node, and if not, why."""

    ok: bool
    reason: str = ""
    #: TFLite's compatibility-result categories: "op", "version", "input type", "constraint"
    kind: str = ""

    def __bool__(self) -> bool:
        return self.ok


SUPPORTED = Support(True)


@dataclass(frozen=True)
class Constraint:
    """A named predicate over a node; `description` is what a rejection says."""

    description: str
    check: Callable[[NodeContext], bool]


@dataclass(frozen=True)
class OpSupport:
    """One row of an op table: an op, its version range, data dtypes and constraints."""

    op: str
    max_version: int = 1
    dtypes: frozenset[str] = frozenset({"FLOAT32"})
    constraints: tuple[Constraint, ...] = ()
    min_version: int = 1
    #: the input whose type is checked against `dtypes`; None = the first non-constant input
    data_input: int | None = None

    def check(self, node: NodeContext) -> Support:
        name = node.op.name
        v = node.version
        if v > self.max_version:
            return Support(False, f"{name} v{v}: max version supported is {self.max_version}", "version")
        if v < self.min_version:
            return Support(False, f"{name} v{v}: min version supported is {self.min_version}", "version")
        if self.data_input is None:
            t = data_type(node)
        else:
            d = node.input(self.data_input)
            t = None if d is None else d.type_name
        if t is not None and t not in self.dtypes:
            return Support(False, f"{name}: input type {t} is not supported "
                                  f"(supported: {', '.join(sorted(self.dtypes))})", "input type")
        for c in self.constraints:
            try:
                ok = c.check(node)
            except Exception as e:  # a constraint that cannot evaluate rejects the node
                return Support(False, f"{name}: {c.description} (could not check: {type(e).__name__})", "constraint")
            if not ok:
                return Support(False, f"{name}: {c.description}", "constraint")
        return SUPPORTED


def data_type(node: NodeContext) -> str | None:
    """The TFLite type name of a node's first non-constant input (its data type)."""
    for t in node.inputs:
        if t is not None and not t.is_constant:
            return t.type_name
    for t in node.inputs:
        if t is not None:
            return t.type_name
    return None


@dataclass(frozen=True)
class OpTable:
    """A delegate's declared op support, keyed by op name (custom ops by custom code)."""

    rows: Mapping[str, OpSupport]
    delegate: str = "delegate"

    @classmethod
    def of(cls, rows: Iterable[OpSupport], delegate: str = "delegate") -> "OpTable":
        return cls({r.op: r for r in rows}, delegate)

    def check(self, node: NodeContext) -> Support:
        row = self.rows.get(node.op.name)
        if row is None:
            return Support(False, f"{node.op.name}: op is not supported by {self.delegate}", "op")
        return row.check(node)

    def __iter__(self):
        return iter(self.rows.values())

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class Partition:
    """A connected set of nodes handed to one delegate, with its boundary tensors."""

    nodes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    contexts: Mapping[int, NodeContext] = field(repr=False, default_factory=dict)
    constants: Mapping[int, np.ndarray] = field(repr=False, default_factory=dict)


class DelegateKernel:
    """Runs one partition: `invoke(*inputs)` receives arrays for `partition.inputs` in order
    and returns a tuple of arrays for `partition.outputs`."""

    def __init__(self, partition: Partition):
        self.partition = partition

    def invoke(self, *inputs: np.ndarray) -> Sequence[np.ndarray]:
        raise NotImplementedError

    def close(self) -> None:
        """Release now what the kernel holds outside Python's memory (device buffers, programs)
        instead of whenever it is garbage-collected. Optional: the default does nothing; a
        kernel holding device resources overrides it (and should also free them from a
        weakref.finalize when it is dropped unclosed). Interpreter.close() calls it on every
        delegate kernel of its plan; it may be called more than once, and the kernel is not
        invoked afterwards."""


class Delegate:
    """Base class of delegates. Subclasses set `name`, `op_table` and implement `prepare`."""

    name: str = "delegate"
    backend: str = "hardware"  # "hardware", "emulated" or "cpu"
    op_table: OpTable | None = None
    #: like FP16GraphPartitionHelper: constant fp16 DEQUANTIZE nodes join a fully delegated graph
    fp16_weights_aware: bool = False

    def __init__(self, max_delegated_partitions: int = 0, min_nodes_per_partition: int = 0):
        self.max_delegated_partitions = max_delegated_partitions
        self.min_nodes_per_partition = min_nodes_per_partition

    def is_node_supported(self, node: NodeContext) -> Support:
        if self.op_table is None:
            return Support(False, f"{node.op.name}: {self.name} declares no op table")
        return self.op_table.check(node)

    def partition_limits(self) -> tuple[int, int]:
        """(max partitions, min nodes per partition) after the delegate's own defaults; <=0 = no limit."""
        return self.max_delegated_partitions, self.min_nodes_per_partition

    def prepare(self, partition: Partition) -> DelegateKernel:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name} ({self.backend})"

    def __repr__(self) -> str:
        return f"<Delegate {self.describe()}>"
