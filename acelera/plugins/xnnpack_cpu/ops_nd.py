"""Specs of xnnpack-cpu's n-dimensional native kernels (jit_nd.py): broadcasting binary and
unary element-wise ops, TRANSPOSE, small BATCH_MATMUL and the fused LayerNorm, with the op codes
the native records carry."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.spec import (
    F32,
    Act,
    Arena,
    Bufs,
    Nodes,
    Operand,
    Packed,
    Shape,
    Spec,
    Step,
    f32c,
)

BINARY_CODE = {"ADD": 0, "SUB": 1, "MUL": 2, "DIV": 3, "MAXIMUM": 4, "MINIMUM": 5, "SQUARED_DIFFERENCE": 6}


def collapse(shape: Shape, strides: list[list[int]], rank: int = 4) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """shape and per-operand element strides with size-1 dimensions dropped and mergeable
    neighbours merged, padded in front to `rank` dimensions (None: more are left)."""
    dims = [(int(d), [int(st[i]) for st in strides]) for i, d in enumerate(shape) if int(d) != 1]
    out: list[tuple[int, list[int]]] = []
    for d, st in dims:
        if out and all(p == q * d for p, q in zip(out[-1][1], st)):
            out[-1] = (out[-1][0] * d, st)
        else:
            out.append((d, st))
    if len(out) > rank:
        return None
    out = [(1, [0] * len(strides))] * (rank - len(out)) + out
    return (np.array([d for d, _ in out], np.int64),
            [np.array([st[k] for _, st in out], np.int64) for k in range(len(strides))])


def _strides(shape: Shape, out_shape: Shape) -> list[int]:
    """Element strides of a C-contiguous array of `shape` broadcast (right-aligned) to out_shape."""
    shape = [1] * (len(out_shape) - len(shape)) + [int(d) for d in shape]
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc if shape[i] != 1 else 0
        acc *= shape[i]
    return st


#: jit.binary_nd pays a few cycles per run of its innermost dimension: shorter runs than this,
#: more than ND_MAX_SHORT_RUNS of them, stay on numpy
ND_MIN_RUN, ND_MAX_SHORT_RUNS = 16, 64


def broadcast_nd(shapes: list[Shape], out_shape: Shape) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(index space, strides of x, strides of y) for jit.binary_nd, or None."""
    if any(len(sh) > len(out_shape) for sh in shapes):
        return None
    c = collapse(out_shape, [_strides(sh, out_shape) for sh in shapes])
    if c is None:
        return None
    run = int(c[0][-1])
    if run < ND_MIN_RUN and int(np.prod(c[0])) // run > ND_MAX_SHORT_RUNS:
        return None  # many short runs: numpy's broadcasting loops do better
    return c[0], c[1][0], c[1][1]


def binary_nd_spec(label: str, nodes: Nodes, op: str, operands: list[Operand], out_tid: int, act: Act,
                   nd: tuple[np.ndarray, np.ndarray, np.ndarray], same: list) -> Spec:
    """A broadcasting binary op (a per-row operand, a (T, C) constant against (B, T, C), ...)
    on jit.binary_nd."""
    tids = tuple(o for o in operands if isinstance(o, int))
    shp, sx, sy = nd

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, y = (a[o].reshape(-1) if isinstance(o, int) else np.ascontiguousarray(o, F32).reshape(-1)
                for o in operands)
        return jit.Native(jit.OP_BINARY_ND, x, y, a[out_tid].reshape(-1), BINARY_CODE[op], f32c(act.lo),
                          f32c(act.hi), shp, sx, sy)
    return Spec(label, nodes, tids, (out_tid,), build, inplace={out_tid: same[0]} if same else {})


def transpose_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int, in_shape: Shape, perm: Sequence[int]) -> Spec | None:
    """TRANSPOSE as one strided copy (jit.transpose4), None when more than four dimensions remain."""
    if not jit.AVAILABLE or int(np.prod(in_shape)) == 0:
        return None
    st = [int(np.prod(in_shape[i + 1:])) for i in range(len(in_shape))]
    out_shape = [int(in_shape[p]) for p in perm]
    c = collapse(out_shape, [[st[p] for p in perm]])
    if c is None:
        return None
    shp, (sx,) = c

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        return jit.Native(jit.OP_TRANSPOSE, a[x_tid].reshape(-1), a[out_tid].reshape(-1), shp, sx)
    return Spec(label, nodes, (x_tid,), (out_tid,), build)


def layer_norm_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int, rows: int, c: int, eps: float,
                    gamma: np.ndarray, beta: np.ndarray) -> Spec:
    """The LayerNorm subgraph (compiler.Builder.layer_norm) as one jit.layer_norm pass."""
    g = np.ascontiguousarray(gamma, F32).reshape(-1)
    b = np.ascontiguousarray(beta, F32).reshape(-1)

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        return jit.Native(jit.OP_LAYER_NORM, a[x_tid].reshape(-1), a[out_tid].reshape(-1), rows, c, F32(eps), g, b)
    return Spec(label, nodes, (x_tid,), (out_tid,), build)


UNARY_CODE = {"NEG": 0, "RSQRT": 1, "SQRT": 2, "ABS": 3, "SQUARE": 4, "EXP": 5, "TANH": 6, "LOG": 7, "FLOOR": 8,
              "CEIL": 9, "GELU": 10, "SIN": 11, "COS": 12}


def native_unary_spec(label: str, nodes: Nodes, op: str, x_tid: int, out_tid: int) -> Spec:
    """An element-wise float op of UNARY_CODE on jit.unary (out may be x)."""
    code = UNARY_CODE[op]

    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        return jit.Native(jit.OP_UNARY, a[x_tid].reshape(-1), a[out_tid].reshape(-1), code, s[0])
    return Spec(label, nodes, (x_tid,), (out_tid,), build, scratch=(((1536,), F32),), inplace={out_tid: x_tid})


#: BATCH_MATMUL up to this many multiply-adds runs on jit.bmm (BLAS below that costs more in calls)
SMALL_BMM = 1 << 18


def bmm_native(label: str, nodes: Nodes, operands: list[Operand], shapes: list[Shape], out_tid: int,
                out_shape: Shape, adj_x: bool, adj_y: bool) -> Spec | None:
    xs, ys = [int(d) for d in shapes[0]], [int(d) for d in shapes[1]]
    if not jit.AVAILABLE or len(xs) < 2 or len(ys) < 2:
        return None
    m, k = (xs[-1], xs[-2]) if adj_x else (xs[-2], xs[-1])
    k2, n = (ys[-1], ys[-2]) if adj_y else (ys[-2], ys[-1])
    batch = [int(d) for d in out_shape[:-2]]
    nb = int(np.prod(batch))
    if k != k2 or nb * m * n * k > SMALL_BMM or nb * m * n == 0 or k == 0:
        return None

    def bstride(sh: list[int], size: int) -> int | None:
        b = sh[:-2]
        if int(np.prod(b)) == 1:
            return 0
        return size if [1] * (len(batch) - len(b)) + b == batch else None
    xb, yb = bstride(xs, m * k), bstride(ys, k * n)
    if xb is None or yb is None:
        return None
    xm, xk = (1, m) if adj_x else (k, 1)
    yk, yn = (1, k) if adj_y else (n, 1)
    dims = np.array([nb, m, k, n, xb, xm, xk, yb, yk, yn], np.int64)
    tids = tuple(o for o in operands if isinstance(o, int))

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, y = (a[o].reshape(-1) if isinstance(o, int) else np.ascontiguousarray(o, F32).reshape(-1)
                for o in operands)
        return jit.Native(jit.OP_BMM, x, y, a[out_tid].reshape(-1), dims)
    return Spec(label, nodes, tids, (out_tid,), build)
