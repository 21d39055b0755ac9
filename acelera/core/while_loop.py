"""The loop of a WHILE node (tflite/kernels/while.cc): the cond and body subgraphs' executors
run back to back, the body's outputs fed straight into the next iteration.

Loop variables that the body passes through unchanged (body output k is body input k) and that
are constant in the caller (weights, folded DEQUANTIZEs) are "pinned": the loop gets its own
executors for cond and body, prepared with those inputs as constants, so that their kernels
take their constant-operand paths (a FULLY_CONNECTED whose bias is such a variable, as in
tf.keras's fp16 GRU) and constant expressions over them are folded once.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from acelera.core.errors import AceleraError
from acelera.core.fpstate import fp_errors_ignored


def truth(value: np.ndarray, what: str) -> bool:
    """A condition tensor's value (a single element, as LiteRT requires)."""
    if value.size != 1:
        raise AceleraError(f"{what} must be a single boolean, got shape {list(value.shape)}")
    return bool(value.item())


def pinnable(rt, body_i: int, cond_i: int, consts: Sequence[np.ndarray | None]) -> dict[int, np.ndarray]:
    """Loop-variable positions -> constant values that every iteration sees unchanged."""
    model = rt.model
    body, cond = model.subgraphs[body_i], model.subgraphs[cond_i]
    pins: dict[int, np.ndarray] = {}
    for k, c in enumerate(consts):
        if c is None or body.outputs[k] != body.inputs[k]:
            continue
        bt, ct = body.tensors[body.inputs[k]], cond.tensors[cond.inputs[k]]
        if bt.is_variable or ct.is_variable or c.dtype != bt.dtype or c.dtype != ct.dtype:
            continue
        if tuple(c.shape) != tuple(bt.shape) and bt.shape:
            continue
        pins[k] = c
    return pins


_PREDICATE_OPS = {"LESS": "<", "LESS_EQUAL": "<=", "GREATER": ">", "GREATER_EQUAL": ">=", "EQUAL": "==",
                  "NOT_EQUAL": "!=", "LOGICAL_AND": "and", "LOGICAL_OR": "or"}
_PREDICATE_TYPES = frozenset({"INT32", "INT64", "FLOAT32", "BOOL"})


def scalar_predicate(rt, index: int) -> Callable[[list], bool | None] | None:
    """A cond subgraph made only of comparisons and logical ops on 0-d, unquantized tensors (a
    loop counter against its bound) as one Python function of the list of loop variables
    (their `item()`s compare as the kernels do: see compare.py) that returns None when a
    variable it reads is not 0-d; None for any other cond, or where the interpreter's resolver
    may supply its own kernels."""
    sg = rt.model.subgraphs[index]
    if rt.resolver is not None or len(sg.outputs) != 1:
        return None
    tensors = sg.tensors
    names: dict[int, str] = {}
    for k, t in enumerate(sg.inputs):
        names.setdefault(t, f"a{k}")
    consts: dict[str, object] = {}
    lines = []
    for i in sg.execution_order:
        op = sg.operators[i]
        sym = "not" if op.op == "LOGICAL_NOT" else _PREDICATE_OPS.get(op.op)
        if sym is None or len(op.outputs) != 1 or len(op.inputs) != (1 if sym == "not" else 2):
            return None
        for t in (*op.inputs, op.outputs[0]):
            tt = tensors[t] if t >= 0 else None
            if (tt is None or tt.shape != () or tt.type_name not in _PREDICATE_TYPES or tt.quantized
                    or tt.is_variable):
                return None
        for t in op.inputs:
            if t in names:
                continue
            if tensors[t].data is None:
                return None  # written by no earlier node of the cond
            names[t] = f"c{t}"
            consts[f"c{t}"] = np.asarray(tensors[t].data).item()
        ins = [names[t] for t in op.inputs]
        expr = f"not {ins[0]}" if sym == "not" else f"{ins[0]} {sym} {ins[1]}"
        if op.op == "LOGICAL_AND" or op.op == "LOGICAL_OR":
            expr = f"bool({expr})"
        names[op.outputs[0]] = f"t{op.outputs[0]}"
        lines.append(f"    t{op.outputs[0]} = {expr}")
    out = sg.outputs[0]
    if out not in names or tensors[out].type_name != "BOOL" or tensors[out].shape != ():
        return None
    used = {n for line in lines for n in line.replace("(", " ").replace(")", " ").split()} | {names[out]}
    head = ["def predicate(v):"]
    for k, t in enumerate(sg.inputs):
        if names[t] == f"a{k}" and f"a{k}" in used:
            head += [f"    a{k} = v[{k}]", f"    if a{k}.ndim: return None", f"    a{k} = a{k}.item()"]
    src = "\n".join([*head, *lines, f"    return {names[out]}"])
    scope: dict = dict(consts)
    exec(compile(src, f"<acelera loop condition of subgraph {index}>", "exec"), scope)
    return scope["predicate"]


class WhileLoop:
    """Runs one WHILE node's loop; see the module docstring."""

    def __init__(self, rt, cond_i: int, body_i: int, shapes: Sequence[tuple[int, ...]],
                 consts: Sequence[np.ndarray | None]):
        self.rt = rt
        self.cond_i, self.body_i = cond_i, body_i
        model = rt.model
        cond_sg, body_sg = model.subgraphs[cond_i], model.subgraphs[body_i]
        self.cond_in, self.body_in = cond_sg.inputs, body_sg.inputs
        # the positions the cond reads (often only the counter): the others are not fed to it
        read = {t for op in cond_sg.operators for t in op.inputs} | set(cond_sg.outputs)
        self.cond_read = tuple(k for k, t in enumerate(cond_sg.inputs) if t in read)
        self.cond_out, self.body_out = cond_sg.outputs[0], body_sg.outputs
        # the body's outputs need no conversion when every loop variable keeps one dtype
        self.same_dtypes = cond_i != body_i and all(
            cond_sg.tensors[c].dtype == body_sg.tensors[b].dtype == body_sg.tensors[o].dtype
            for c, b, o in zip(cond_sg.inputs, body_sg.inputs, body_sg.outputs))
        # the cond as a Python predicate of the loop variables' items, where it is that simple
        self.predicate = scalar_predicate(rt, cond_i) if self.same_dtypes else None
        self.cond: Any = None  # the loop's own executors (pinned inputs), else the runtime's
        self.body: Any = None
        pins = pinnable(rt, body_i, cond_i, consts) if self.same_dtypes else {}
        if pins:
            try:
                self.cond = self._own(cond_i, shapes, pins)
                self.body = self._own(body_i, shapes, pins)
            except AceleraError:  # e.g. a kernel refusing a constant it accepts at invoke
                self.cond = self.body = None

    def _own(self, index: int, shapes: Sequence[tuple[int, ...]], pins: dict[int, np.ndarray]):
        from acelera.core.executor import Executor

        ex = Executor(self.rt.model.subgraphs[index], self.rt)
        ex.callee = True
        sg = ex.sg
        for t, s in zip(sg.inputs, shapes):
            ex.shapes[t] = tuple(int(d) for d in s)
        ex.pinned = {sg.inputs[k]: v for k, v in pins.items()}
        ex.prepare()
        return ex

    def __call__(self, args: Sequence[np.ndarray], limit: int) -> tuple[np.ndarray, ...]:
        """The loop variables' final values (copies), after at most `limit` iterations."""
        rt = self.rt
        cex, bex = self.cond, self.body
        if cex is None:
            cex, bex = rt._callees.get(self.cond_i), rt._callees.get(self.body_i)
            if (not self.same_dtypes or cex is None or bex is None
                    or not cex.plan_ready or not bex.plan_ready):
                return self._generic(args, limit)
        ci, bi = self.cond_i, self.body_i
        active = rt._active
        for index in (ci, bi):
            if index in active:
                raise AceleraError(f"subgraph {index} is called recursively")
        cond_in, body_in, cond_out, body_out = self.cond_in, self.body_in, self.cond_out, self.body_out
        cond_read = self.cond_read
        values = [x if x.dtype is d or x.dtype == d else np.asarray(x, d)
                  for x, d in zip(args, cex.input_dtypes)]
        cv, cs, bv, bs = cex.values, cex.shapes, bex.values, bex.shapes
        run_cond, run_body = cex.run, bex.run
        if fp_errors_ignored():  # inside an invoke: unchanged shapes go straight to the plans
            cond_fast, body_fast = cex.run_unchanged, bex.run_unchanged
        else:
            cond_fast = body_fast = None
        push, pop = active.append, active.pop
        predicate = self.predicate
        for _ in range(limit):
            go = None if predicate is None else predicate(values)
            if go is None:
                changed = False
                for k in cond_read:
                    x = values[k]
                    t = cond_in[k]
                    cv[t] = x
                    if x.shape != cs[t]:
                        changed = True
                push(ci)
                try:
                    if changed or cond_fast is None:
                        run_cond(changed)
                    else:
                        cond_fast()
                finally:
                    pop()
                cond = cv[cond_out]
                if cond.size != 1:
                    truth(cond, "WHILE condition")
                go = cond.item()
            if not go:
                return tuple([np.array(v, copy=True) for v in values])
            changed = False
            for t, x in zip(body_in, values):
                bv[t] = x
                if x.shape != bs[t]:
                    changed = True
            push(bi)
            try:
                if changed or body_fast is None:
                    run_body(changed)
                else:
                    body_fast()
            finally:
                pop()
            values = [bv[t] for t in body_out]
        raise _too_long(limit)

    def _generic(self, args: Sequence[np.ndarray], limit: int) -> tuple[np.ndarray, ...]:
        """The loop through ModelRuntime.call (which converts dtypes and prepares callees)."""
        call, ci, bi = self.rt.call, self.cond_i, self.body_i
        values = args
        for _ in range(limit):
            cond = call(ci, values)[0]
            if cond.size != 1:
                truth(cond, "WHILE condition")
            if not cond.item():
                return tuple(np.array(v, copy=True) for v in values)
            values = call(bi, values)
        raise _too_long(limit)


def _too_long(limit: int) -> AceleraError:
    return AceleraError(f"loop did not finish after {limit} iterations "
                        f"(ACELERA_MAX_LOOP_ITERATIONS raises the limit)")
