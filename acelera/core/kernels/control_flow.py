"""Control flow over the model's other subgraphs: IF, WHILE, CALL_ONCE (tflite/kernels/if.cc,
while.cc, call_once.cc).

The called subgraphs run on the reference kernels through the interpreter's ModelRuntime,
each with its own tensors; delegates only ever see the primary subgraph. The loader has
already refused out-of-range subgraph indices and call cycles.
"""
from __future__ import annotations

import os

import numpy as np

from acelera.core.dtypes import TYPE_NAMES
from acelera.core.kernels.registry import NodeContext, in_shape_pass, register
from acelera.core.while_loop import WhileLoop, truth

MAX_LOOP_ITERATIONS = int(os.environ.get("ACELERA_MAX_LOOP_ITERATIONS", "1000000"))


def _runtime(node: NodeContext):
    if node.runtime is None:
        raise node.unsupported("needs the whole model (run it through an Interpreter)")
    return node.runtime


def _subgraph(node: NodeContext, key: str) -> int:
    rt = _runtime(node)
    index = int(node.options.get(key, -1))
    rt.check_subgraph(index, key.replace("_subgraph_index", ""))
    return index


def _shape_check(node: NodeContext, rt, index: int, n_in: int, n_out: int, what: str) -> None:
    sg = rt.model.subgraphs[index]
    if len(sg.inputs) != n_in or len(sg.outputs) != n_out:
        raise node.unsupported(f"{what} subgraph {index} has {len(sg.inputs)} inputs and {len(sg.outputs)} "
                               f"outputs, the node needs {n_in} and {n_out}")


def _input_shapes(node: NodeContext, start: int = 0) -> list[tuple[int, ...]]:
    shapes = []
    for i, t in enumerate(node.inputs[start:], start):
        if t is None:
            raise node.unsupported(f"input {i} is missing")
        shapes.append(t.shape)
    return shapes


_truth = truth


_ANY = tuple(sorted(TYPE_NAMES.values()))  # values pass through to the called subgraphs untouched


@register("IF", max_version=1, dtypes=("BOOL",))
def if_(node: NodeContext):
    rt = _runtime(node)
    then_i, else_i = _subgraph(node, "then_subgraph_index"), _subgraph(node, "else_subgraph_index")
    n_in, n_out = len(node.inputs) - 1, len(node.outputs)
    cond_t = node.input(0)
    if n_in < 0 or cond_t is None or cond_t.type_name != "BOOL":
        raise node.unsupported("the condition (input 0) must be a BOOL tensor")
    for index, what in ((then_i, "then"), (else_i, "else")):
        _shape_check(node, rt, index, n_in, n_out, what)
        rt.callee(index, _input_shapes(node, 1))

    def run(cond, *args):
        return tuple(rt.call(then_i if _truth(cond, "IF condition") else else_i, args))

    return run


@register("WHILE", max_version=1, dtypes=_ANY)
def while_(node: NodeContext):
    rt = _runtime(node)
    cond_i, body_i = _subgraph(node, "cond_subgraph_index"), _subgraph(node, "body_subgraph_index")
    n = len(node.inputs)
    if len(node.outputs) != n or any(t is None for t in node.inputs):
        raise node.unsupported(f"needs as many outputs as inputs ({n}), got {len(node.outputs)}")
    _shape_check(node, rt, cond_i, n, 1, "cond")
    _shape_check(node, rt, body_i, n, n, "body")
    shapes = _input_shapes(node)
    rt.callee(cond_i, shapes)
    rt.callee(body_i, shapes)

    consts = [None if t is None or t.is_variable else t.data for t in node.inputs]
    loop = WhileLoop(rt, cond_i, body_i, shapes, consts)

    def run(*args):
        if in_shape_pass():
            return tuple(np.array(a, copy=True) for a in args)
        # The body's outputs feed its next iteration as they are (kernels never write to their
        # inputs); only the loop's final values are copied out of the subgraphs' tensors.
        return loop(args, MAX_LOOP_ITERATIONS)

    return run


@register("CALL_ONCE", max_version=1, dtypes=())
def call_once(node: NodeContext):
    rt = _runtime(node)
    init = _subgraph(node, "init_subgraph_index")
    _shape_check(node, rt, init, 0, 0, "init")
    rt.callee(init, [])

    def run(*args):
        if not in_shape_pass() and init not in rt.initialized:
            rt.call(init, [])
            rt.initialized.add(init)
        return ()

    return run


@register("STABLEHLO_COMPOSITE", max_version=1, dtypes=_ANY)
def stablehlo_composite(node: NodeContext):
    rt = _runtime(node)
    index = _subgraph(node, "decomposition_subgraph_index")
    _shape_check(node, rt, index, len(node.inputs), len(node.outputs), "decomposition")
    rt.callee(index, _input_shapes(node))
    return lambda *args: tuple(rt.call(index, args))


@register("STABLEHLO_CASE", max_version=1, dtypes=("INT32",))
def stablehlo_case(node: NodeContext):
    rt = _runtime(node)
    branches = tuple(int(i) for i in node.options.get("branch_subgraph_indices", ()))
    if not branches:
        raise node.unsupported("needs at least one branch subgraph")
    index_t = node.input(0)
    if index_t is None or index_t.type_name != "INT32" or int(np.prod(index_t.shape, dtype=np.int64)) != 1:
        raise node.unsupported("the branch index (input 0) must be a single INT32")
    for b in branches:
        rt.check_subgraph(b, "branch")
        _shape_check(node, rt, b, len(node.inputs) - 1, len(node.outputs), "branch")
        rt.callee(b, _input_shapes(node, 1))

    def run(index, *args):
        i = int(index.reshape(-1)[0])
        if not 0 <= i < len(branches):  # out of range selects the last branch, as in LiteRT
            i = len(branches) - 1
        return tuple(rt.call(branches[i], args))

    return run
