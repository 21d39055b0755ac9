"""Nodes of an acelera model as standalone .tflite models for LiteRT, and what LiteRT did with them.

`write_graph` writes a set of nodes (one node for a support probe, a whole partition for a
kernel) with acelera's ModelBuilder: the tensors the nodes read that nothing inside produces
become graph inputs (or constants, with their data), the requested tensors become graph
outputs. The written model is read back and compared with the original nodes, so an option
the writer cannot keep refuses the node instead of changing what runs.

`delegated_nodes` reads back which nodes of such a model LiteRT replaced by delegate kernels:
LiteRT appends one DELEGATE node per delegated subset after the model's own nodes, with the
subset's boundary tensors as its inputs and outputs (tflite/core/subgraph.cc,
ReplaceNodeSubsetsWithDelegateKernels). A node is replaced when a delegate node produces one
of its outputs, or when everything it produces is consumed only by replaced nodes and feeds
no delegate node from outside.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from acelera.core.builder import ModelBuilder
from acelera.core.model import Operator, Tensor, load_model

#: Tensor types a standalone model can carry with their data (numpy has an exact counterpart).
HOSTABLE_TYPES = frozenset({"FLOAT32", "FLOAT16", "FLOAT64", "INT8", "UINT8", "INT16", "UINT16", "INT32",
                            "UINT32", "INT64", "UINT64", "BOOL", "COMPLEX64"})


class WriteError(Exception):
    """The nodes cannot be written as a standalone model that means the same."""


@dataclass(frozen=True)
class Written:
    """A standalone model: its bytes and, for each original tensor index, the index in it."""

    content: bytes
    tensor_map: Mapping[int, int]
    inputs: tuple[int, ...]  # original indices of the graph inputs, in order
    outputs: tuple[int, ...]  # original indices of the graph outputs, in order
    n_ops: int


def unhostable(op: Operator, tensors: Iterable[Tensor | None]) -> str:
    """Why a node cannot be run as a standalone model ('' when it can)."""
    for key in op.options:
        if key.endswith(("subgraph_index", "subgraph_indices")):
            return "it calls other subgraphs (control flow is not hosted)"
    for t in tensors:
        if t is None:
            continue
        if t.is_variable:
            return f"tensor {t.index} is a variable (state stays in acelera)"
        if t.type_name not in HOSTABLE_TYPES:
            return f"tensor {t.index} is {t.type_name}"
        if t.sparsity is not None:
            return f"tensor {t.index} is sparse"
    return ""


def _quant(t: Tensor) -> tuple | None:
    q = t.quantization
    if not q.is_set:
        return None
    zp = q.zero_point if q.zero_point.size else np.zeros(q.scale.shape, np.int64)
    if q.scale.size == 1:
        return float(q.scale[0]), int(zp.reshape(-1)[0])
    return np.asarray(q.scale, np.float32), np.asarray(zp, np.int64), int(q.quantized_dimension)


def write_graph(ops: Sequence[Operator], tensors: Mapping[int, Tensor], outputs: Sequence[int],
                constants: Mapping[int, np.ndarray], inputs: Sequence[int] | None = None) -> Written:
    """A standalone model of `ops` (in execution order) over `tensors` (original index -> IR
    tensor with its current shape). Tensors in `constants` are written with that data; the
    other tensors read but not produced are graph inputs (in the order of `inputs` if given)."""
    b = ModelBuilder(description="acelera litert partition")
    produced = {t for op in ops for t in op.outputs}
    read = [t for op in ops for t in op.inputs if t >= 0]
    if inputs is None:
        inputs = [t for t in dict.fromkeys(read) if t not in produced and t not in constants]
    mapping: dict[int, int] = {}

    def tensor(i: int) -> int:
        if i in mapping:
            return mapping[i]
        t = tensors[i]
        name = t.name or f"t{i}"
        if i in constants:
            data = np.ascontiguousarray(constants[i])
            if data.shape != t.shape and data.size == int(np.prod(t.shape)):
                data = data.reshape(t.shape)  # e.g. a scalar stored as one element
            mapping[i] = b.add_constant(name, data, _quant(t))
        elif i in inputs:
            mapping[i] = b.add_input(name, t.shape, t.type_name, _quant(t))
        else:
            mapping[i] = b.add_tensor(name, t.shape, t.type_name, _quant(t))
        return mapping[i]

    for i in inputs:
        tensor(i)
    for op in ops:
        ins = [tensor(t) if t >= 0 else -1 for t in op.inputs]
        outs = [tensor(t) for t in op.outputs]
        inter = [tensor(t) for t in op.intermediates]
        try:
            b.add_operator(op.op, ins, outs, version=op.version, custom_code=op.custom_code,
                           custom_options=op.custom_options, intermediates=inter, **dict(op.options))
        except Exception as e:
            raise WriteError(f"cannot write {op.name}: {type(e).__name__}: {e}") from None
    b.mark_outputs(*[mapping[t] for t in outputs])
    try:
        content = b.build()
    except Exception as e:
        raise WriteError(f"cannot serialize: {type(e).__name__}: {e}") from None
    _check_round_trip(content, ops, tensors, mapping, constants)
    return Written(content, mapping, tuple(inputs), tuple(outputs), len(ops))


def _same_option(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return np.float32(a) == np.float32(b) or (a != a and b != b)
    return a == b


def _check_round_trip(content: bytes, ops: Sequence[Operator], tensors: Mapping[int, Tensor],
                      mapping: Mapping[int, int], constants: Mapping[int, np.ndarray]) -> None:
    try:
        sg = load_model(content, "<litert partition>").main
    except Exception as e:
        raise WriteError(f"the written model does not load: {e}") from None
    for op, new in zip(ops, sg.operators):
        if (new.op, new.version, new.custom_code, new.custom_options) != (op.op, op.version, op.custom_code,
                                                                          op.custom_options):
            raise WriteError(f"{op.name} changed when written")
        keys = set(op.options) | set(new.options)
        for k in sorted(keys):
            if not _same_option(op.options.get(k), new.options.get(k)):
                raise WriteError(f"{op.name} option {k} cannot be written "
                                 f"({op.options.get(k)!r} became {new.options.get(k)!r})")
    for i, j in mapping.items():
        t, w = tensors[i], sg.tensors[j]
        want_type = t.type_name if i not in constants else w.type_name
        if w.type_name != want_type or w.shape != t.shape:
            raise WriteError(f"tensor {i} changed when written ({t.type_name}{list(t.shape)} became "
                             f"{w.type_name}{list(w.shape)})")


def delegated_nodes(wrapper: Any, n_ops: int, graph_outputs: Iterable[int]) -> set[int]:
    """Indices (< n_ops) of the model's nodes LiteRT replaced by delegate kernels, from a LiteRT
    interpreter wrapper (`Interpreter._interpreter`) after delegation."""
    total = int(wrapper.NumNodes())
    if total <= n_ops:
        return set()
    d_in: set[int] = set()
    d_out: set[int] = set()
    for k in range(n_ops, total):
        d_in.update(int(t) for t in wrapper.NodeInputs(k))
        d_out.update(int(t) for t in wrapper.NodeOutputs(k))
    outs = [[int(t) for t in wrapper.NodeOutputs(i)] for i in range(n_ops)]
    users: dict[int, list[int]] = {}
    for i in range(n_ops):
        for t in wrapper.NodeInputs(i):
            users.setdefault(int(t), []).append(i)
    final = set(int(t) for t in graph_outputs)
    replaced = {i for i in range(n_ops) if any(t in d_out for t in outs[i])}
    changed = True
    while changed:
        changed = False
        for i in range(n_ops):
            if i in replaced or any(t in d_in or t in final for t in outs[i]):
                continue
            consumers = [u for t in outs[i] for u in users.get(t, [])]
            if consumers and all(u in replaced for u in consumers):
                replaced.add(i)
                changed = True
    return replaced
