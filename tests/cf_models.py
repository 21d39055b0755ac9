"""Models with control flow, resources and data-dependent shapes, built with the ModelBuilder;
shared by the control-flow tests and the fuzz test."""
from __future__ import annotations

import numpy as np

from acelera.core.builder import ModelBuilder


def while_sum_model() -> bytes:
    """while i < n: i += 1; acc = acc * 2 + x  (the Keras-3 RNN loop shape, in miniature)."""
    b = ModelBuilder()
    i = b.add_input("i", (), np.int32)
    n = b.add_input("n", (), np.int32)
    acc = b.add_input("acc", (2,), np.float32)
    x = b.add_input("x", (2,), np.float32)
    outs = [b.add_tensor(f"o{k}", s, d) for k, (s, d) in enumerate([((), np.int32), ((), np.int32),
                                                                   ((2,), np.float32), ((2,), np.float32)])]
    cond = b.add_subgraph("cond")
    body = b.add_subgraph("body")
    b.add_operator("WHILE", [i, n, acc, x], outs, cond_subgraph_index=cond.index,
                   body_subgraph_index=body.index)
    b.mark_outputs(outs[0], outs[2])

    ci = [cond.add_input(f"c{k}", s, d) for k, (s, d) in enumerate([((), np.int32), ((), np.int32),
                                                                  ((2,), np.float32), ((2,), np.float32)])]
    c = cond.add_tensor("less", (), np.bool_)
    cond.add_operator("LESS", [ci[0], ci[1]], [c])
    cond.mark_outputs(c)

    bi = [body.add_input(f"b{k}", s, d) for k, (s, d) in enumerate([((), np.int32), ((), np.int32),
                                                                  ((2,), np.float32), ((2,), np.float32)])]
    one = body.add_constant("one", np.array(1, np.int32))
    two = body.add_constant("two", np.array([2, 2], np.float32))
    i2 = body.add_tensor("i2", (), np.int32)
    body.add_operator("ADD", [bi[0], one], [i2])
    m = body.add_tensor("m", (2,), np.float32)
    body.add_operator("MUL", [bi[2], two], [m])
    a2 = body.add_tensor("a2", (2,), np.float32)
    body.add_operator("ADD", [m, bi[3]], [a2])
    body.mark_outputs(i2, bi[1], a2, bi[3])
    return b.build()

def if_model() -> bytes:
    """y = x + 1 if c else x * 3"""
    b = ModelBuilder()
    c = b.add_input("c", (1,), np.bool_)
    x = b.add_input("x", (3,), np.float32)
    y = b.add_tensor("y", (3,), np.float32)
    then, else_ = b.add_subgraph("then"), b.add_subgraph("else")
    b.add_operator("IF", [c, x], [y], then_subgraph_index=then.index, else_subgraph_index=else_.index)
    b.mark_outputs(y)
    for g, op, k in ((then, "ADD", 1.0), (else_, "MUL", 3.0)):
        gx = g.add_input("x", (3,), np.float32)
        kk = g.add_constant("k", np.full(3, k, np.float32))
        gy = g.add_tensor("y", (3,), np.float32)
        g.add_operator(op, [gx, kk], [gy])
        g.mark_outputs(gy)
    return b.build()

def variable_model() -> bytes:
    """Subgraph 0: CALL_ONCE(init); v += x; return v.  init: v = [10, 20]."""
    b = ModelBuilder()
    x = b.add_input("x", (2,), np.float32)
    init = b.add_subgraph("init")
    b.add_operator("CALL_ONCE", [], [], init_subgraph_index=init.index)
    h = b.add_tensor("h", (), "RESOURCE")
    b.add_operator("VAR_HANDLE", [], [h], container="", shared_name="v")
    v = b.add_tensor("v", (2,), np.float32)
    b.add_operator("READ_VARIABLE", [h], [v])
    s = b.add_tensor("s", (2,), np.float32)
    b.add_operator("ADD", [v, x], [s])
    b.add_operator("ASSIGN_VARIABLE", [h, s], [])
    b.mark_outputs(s)
    ih = init.add_tensor("h", (), "RESOURCE")
    init.add_operator("VAR_HANDLE", [], [ih], container="", shared_name="v")
    k = init.add_constant("k", np.array([10, 20], np.float32))
    init.add_operator("ASSIGN_VARIABLE", [ih, k], [])
    return b.build()

def hashtable_model() -> bytes:
    b = ModelBuilder()
    q = b.add_input("q", (3,), np.bytes_)
    h = b.add_tensor("h", (), "RESOURCE")
    b.add_operator("HASHTABLE", [], [h], table_id=1, key_dtype=5, value_dtype=4)
    keys = b.add_constant("keys", np.array([b"cat", b"dog", b"eel"], object))
    vals = b.add_constant("vals", np.array([1, 2, 3], np.int64))
    b.add_operator("HASHTABLE_IMPORT", [h, keys, vals], [])
    dflt = b.add_constant("dflt", np.array([-1], np.int64))
    out = b.add_tensor("out", (3,), np.int64)
    b.add_operator("HASHTABLE_FIND", [h, q, dflt], [out])
    size = b.add_tensor("size", (1,), np.int64)
    b.add_operator("HASHTABLE_SIZE", [h], [size])
    b.mark_outputs(out, size)
    return b.build()

def where_gather_model() -> bytes:
    """WHERE(x > 0) -> indices [n, 1] -> GATHER_ND-free: RESHAPE to [n] via SHAPE of the result,
    then GATHER x at those indices: the output length depends on the data."""
    b = ModelBuilder()
    x = b.add_input("x", (6,), np.float32)
    zero = b.add_constant("zero", np.array([0], np.float32))
    m = b.add_tensor("m", (6,), np.bool_)
    b.add_operator("GREATER", [x, zero], [m])
    idx = b.add_tensor("idx", (6, 1), np.int64, shape_signature=(-1, 1))
    b.add_operator("WHERE", [m], [idx])
    shape = b.add_constant("shape", np.array([-1], np.int32))
    flat = b.add_tensor("flat", (6,), np.int64, shape_signature=(-1,))
    b.add_operator("RESHAPE", [idx, shape], [flat])
    y = b.add_tensor("y", (6,), np.float32, shape_signature=(-1,))
    b.add_operator("GATHER", [x, flat], [y], axis=0)
    two = b.add_constant("two", np.array([2], np.float32))
    z = b.add_tensor("z", (6,), np.float32, shape_signature=(-1,))
    b.add_operator("MUL", [y, two], [z])
    b.mark_outputs(z)
    return b.build()



def runtime_reshape_model() -> bytes:
    """RESHAPE(x, s) with the shape fed at run time, then MUL and ADD: every invoke may change
    the shapes of the last two nodes."""
    b = ModelBuilder()
    x = b.add_input("x", (6,), np.float32)
    s = b.add_input("s", (2,), np.int32)
    r = b.add_tensor("r", (2, 3), np.float32, shape_signature=(-1, -1))
    b.add_operator("RESHAPE", [x, s], [r])
    k = b.add_constant("k", np.array([2], np.float32))
    y = b.add_tensor("y", (2, 3), np.float32, shape_signature=(-1, -1))
    b.add_operator("MUL", [r, k], [y])
    z = b.add_tensor("z", (2, 3), np.float32, shape_signature=(-1, -1))
    b.add_operator("ADD", [y, k], [z])
    b.mark_outputs(z)
    return b.build()



def case_model() -> bytes:
    """STABLEHLO_CASE over three branches: x + 1, x * 3, -x."""
    b = ModelBuilder()
    i = b.add_input("i", (), np.int32)
    x = b.add_input("x", (3,), np.float32)
    y = b.add_tensor("y", (3,), np.float32)
    branches = [b.add_subgraph(f"branch{k}") for k in range(3)]
    b.add_operator("STABLEHLO_CASE", [i, x], [y], branch_subgraph_indices=[g.index for g in branches])
    b.mark_outputs(y)
    for g, (op, k) in zip(branches, [("ADD", 1.0), ("MUL", 3.0), ("SUB", 0.0)]):
        gx = g.add_input("x", (3,), np.float32)
        kk = g.add_constant("k", np.full(3, k, np.float32))
        gy = g.add_tensor("y", (3,), np.float32)
        g.add_operator(op, [kk, gx] if op == "SUB" else [gx, kk], [gy])
        g.mark_outputs(gy)
    return b.build()

ALL = [while_sum_model, case_model, if_model, variable_model, hashtable_model, where_gather_model, runtime_reshape_model]


def loop_model(b: ModelBuilder, specs, body_fn, outputs: tuple[int, ...]):
    """A WHILE over loop variables `specs` [(name, shape, dtype, signature)], `i < n` on the
    first two; `body_fn(body, inputs)` returns the body's outputs."""
    ins = [b.add_input(n, s, d, shape_signature=sig) for n, s, d, sig in specs]
    outs = [b.add_tensor(f"o_{n}", s, d, shape_signature=sig) for n, s, d, sig in specs]
    cond, body = b.add_subgraph("cond"), b.add_subgraph("body")
    b.add_operator("WHILE", ins, outs, cond_subgraph_index=cond.index, body_subgraph_index=body.index)
    b.mark_outputs(*[outs[k] for k in outputs])
    ci = [cond.add_input(n, s, d, shape_signature=sig) for n, s, d, sig in specs]
    c = cond.add_tensor("less", (), np.bool_)
    cond.add_operator("LESS", [ci[0], ci[1]], [c])
    cond.mark_outputs(c)
    bi = [body.add_input(n, s, d, shape_signature=sig) for n, s, d, sig in specs]
    body.mark_outputs(*body_fn(body, bi))
    return b.build()
