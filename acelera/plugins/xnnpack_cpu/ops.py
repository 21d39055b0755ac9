"""Pooling, reductions, resizing, element-wise and data-movement steps, and the reference-kernel
step that runs anything else (quantized ops, rarely used float ops) in planned buffers."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from acelera.core.kernels.conv import Geometry
from acelera.core.kernels.registry import NodeContext, lookup
from acelera.core.model import Tensor
from acelera.plugins.xnnpack_cpu import int8_conv, int8_tables, jit
from acelera.plugins.xnnpack_cpu.ops_nd import (
    BINARY_CODE,
    UNARY_CODE,
    binary_nd_spec,
    bmm_native,
    broadcast_nd,
    native_unary_spec,
)
from acelera.plugins.xnnpack_cpu.spec import (
    EMPTY,
    F32,
    HSWISH,
    INF,
    KIND_OF_OP,
    MAX_COPY_GROUPS,
    PRELU,
    SIGMOID,
    Act,
    Arena,
    Bufs,
    Nodes,
    Operand,
    Packed,
    Shape,
    Spec,
    Step,
    block_copies,
    clamp_fn,
    epilogue,
    f32c,
    native_copy,
    prelu_numpy,
    seq,
    tile_row,
)

Recipe = Callable[[np.ndarray, np.ndarray], Any]

def tin(ctx: NodeContext, i: int) -> Tensor:
    """ctx's input i, which the op table has made sure is present."""
    t = ctx.input(i)
    if t is None:
        raise ValueError(f"{ctx.op.name}: input {i} is absent")
    return t


# --- pooling, mean ----------------------------------------------------------------------------

def pool_spec(label: str, nodes: Nodes, ctx: NodeContext, x_tid: int, out_tid: int, act: Act, is_max: bool) -> Spec | None:
    """MAX/AVERAGE_POOL_2D on the numba kernel (None: use the reference kernel instead)."""
    if not jit.AVAILABLE:
        return None
    o = ctx.options
    kh, kw = int(o.get("filter_height", 1)), int(o.get("filter_width", 1))
    g = Geometry.make(tin(ctx, 0).shape, kh, kw, int(o.get("padding", 0) or 0),
                      int(o.get("stride_h", 1)), int(o.get("stride_w", 1)), 1, 1)
    if tuple(ctx.outputs[0].shape) != (g.n, g.oh, g.ow, g.c):
        return None
    lo, hi = f32c(act.lo), f32c(act.hi)

    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x = a[x_tid].reshape(g.n, g.h, g.w * g.c)
        out = a[out_tid].reshape(g.n, g.oh, g.ow * g.c)
        return jit.Native(jit.OP_POOL_MAX if is_max else jit.OP_POOL_AVG, x, out, g.c, kh, kw, g.sh, g.sw, g.pt,
                          g.pl, lo, hi, s[0])
    return Spec(label, nodes, (x_tid,), (out_tid,), build, scratch=(((g.w * g.c,), F32),))


def mean_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int, axes: tuple[int, ...], in_shape: Shape,
              act: Act | None = None) -> Spec:
    """Mean over `axes` (global average pooling, MEAN over [1, 2] or [2]). Sums go one axis at
    a time, as in the reference kernel: rows first, then columns (shorter float32 chains than
    one pass over H*W), then a float32 division by the count."""
    count = int(np.prod([in_shape[i] for i in axes]))
    reduced = tuple(d for i, d in enumerate(in_shape) if i not in axes)
    cnt = F32(max(count, 1))
    act = act or Act()
    hw = len(in_shape) == 4 and axes == (1, 2) and count > 0
    numba_hw = hw and jit.AVAILABLE
    if (jit.AVAILABLE and not numba_hw and count > 0 and act.trivial and axes
            and list(axes) == list(range(axes[0], axes[-1] + 1))):
        outer = int(np.prod(in_shape[:axes[0]]))
        inner = int(np.prod(in_shape[axes[-1] + 1:]))

        def build_mid(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
            return jit.Native(jit.OP_MEAN_MID, a[x_tid].reshape(-1), outer, count, inner, a[out_tid].reshape(-1), cnt)
        return Spec(label, nodes, (x_tid,), (out_tid,), build_mid)
    nd = _mean_nd(in_shape, axes) if jit.AVAILABLE and not numba_hw and count > 0 and act.trivial and axes else None
    if nd is not None:
        shp, so = nd

        def build_nd(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
            return jit.Native(jit.OP_MEAN_ND, a[x_tid].reshape(-1), a[out_tid].reshape(-1), shp, so, cnt)
        return Spec(label, nodes, (x_tid,), (out_tid,), build_nd)

    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, out = a[x_tid], a[out_tid].reshape(reduced)
        if numba_hw:
            n, h, w, c = in_shape
            return jit.Native(jit.OP_MEAN_HW, x.reshape(-1), h, w * c, c, out.reshape(-1), f32c(act.lo),
                              f32c(act.hi), s[0])
        red = np.add.reduce
        clamp = clamp_fn(out, act.lo, act.hi)
        if hw:
            tmp = s[0].reshape(in_shape[0], in_shape[2], in_shape[3])

            def run() -> None:
                red(x, axis=1, out=tmp)
                red(tmp, axis=1, out=out)
                np.divide(out, cnt, out=out)
        else:
            def run() -> None:
                red(x, axis=axes, out=out)
                np.divide(out, cnt, out=out)
        return seq(run, clamp)
    scratch = ((((in_shape[0] if not numba_hw else 1) * in_shape[2] * in_shape[3],), F32),) if hw else ()
    return Spec(label, nodes, (x_tid,), (out_tid,), build, scratch=scratch)


def _mean_nd(in_shape: Shape, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    """(index space, output strides) of jit.mean_nd for a mean over axes that are not one
    contiguous range, None when more than four dimensions remain after merging."""
    from acelera.plugins.xnnpack_cpu.ops_nd import collapse

    shape = [int(d) for d in in_shape]
    st_in = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    kept = [1 if i in axes else d for i, d in enumerate(shape)]
    st_out = [0 if i in axes else int(np.prod(kept[i + 1:])) for i in range(len(shape))]
    c = collapse(shape, [st_in, st_out])
    if c is None or int(c[1][0][-1]) != 1:
        return None
    return c[0], c[1][1]


#: LiteRT's float REDUCE_MAX / REDUCE_MIN start from the lowest / highest finite float and keep
#: the running value when a comparison with NaN fails: fmax / fmin from that initial value
REDUCE_UFUNC: dict[str, tuple[np.ufunc, np.float32 | None]] = {
    "SUM": (np.add, None), "REDUCE_MAX": (np.fmax, np.finfo(np.float32).min),
    "REDUCE_MIN": (np.fmin, np.finfo(np.float32).max)}


def reduce_spec(label: str, nodes: Nodes, op: str, x_tid: int, out_tid: int, axes: tuple[int, ...],
                in_shape: Shape) -> Spec | None:
    """MEAN, SUM, REDUCE_MAX or REDUCE_MIN over `axes` (sorted, distinct), keep_dims or not: the
    output buffer is seen with the reduced axes dropped. None (the reference kernel) for an
    empty input, and for MAX/MIN over every axis (the reference starts from the first element
    there, not from the initial value)."""
    if op == "MEAN":
        return mean_spec(label, nodes, x_tid, out_tid, axes, in_shape)
    ufunc, init = REDUCE_UFUNC[op]
    if int(np.prod(in_shape)) == 0 or (init is not None and len(axes) == len(in_shape)):
        return None
    reduced = tuple(d for i, d in enumerate(in_shape) if i not in axes)
    red = ufunc.reduce
    axis: int | tuple[int, ...] = axes[0] if len(axes) == 1 else axes

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, out = a[x_tid], a[out_tid].reshape(reduced)
        if init is None:
            def run() -> None:
                red(x, axis=axis, out=out)
        else:
            def run() -> None:
                red(x, axis=axis, out=out, initial=init)
        return run
    return Spec(label, nodes, (x_tid,), (out_tid,), build)


def batch_matmul_spec(label: str, nodes: Nodes, operands: list[Operand], out_tid: int, adj_x: bool,
                      adj_y: bool, shapes: list[Shape] | None = None, out_shape: Shape | None = None) -> Spec:
    """BATCH_MATMUL (float32): numpy's matmul straight into the output buffer, batch dimensions
    broadcast; adj_x / adj_y transpose the last two axes (views, no copies)."""
    if shapes is not None and out_shape is not None:
        native = bmm_native(label, nodes, operands, shapes, out_tid, out_shape, adj_x, adj_y)
        if native is not None:
            return native
    tids = tuple(o for o in operands if isinstance(o, int))

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, y = (a[o] if isinstance(o, int) else np.ascontiguousarray(o, F32) for o in operands)
        if adj_x:
            x = x.swapaxes(-1, -2)
        if adj_y:
            y = y.swapaxes(-1, -2)
        out = a[out_tid]
        mm = np.matmul

        def run() -> None:
            mm(x, y, out=out)
        return run
    return Spec(label, nodes, tids, (out_tid,), build)


def resize_spec(label: str, nodes: Nodes, ctx: NodeContext, x_tid: int, out_tid: int) -> Spec | None:
    """RESIZE_BILINEAR (float, static size) on the numba kernel; None: the reference kernel."""
    from acelera.core.kernels.resize import _float_coords

    if not jit.AVAILABLE:
        return None
    n, h, w, c = tin(ctx, 0).shape
    _, oh, ow, _ = ctx.outputs[0].shape
    align = bool(ctx.options.get("align_corners", False))
    half = bool(ctx.options.get("half_pixel_centers", False))
    if half and align:
        return None
    ys = _float_coords(h, oh, align, half)
    xs = _float_coords(w, ow, align, half)

    def arr(v: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(v, np.int64 if v.dtype.kind in "iu" else F32)

    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        return jit.Native(jit.OP_RESIZE, a[x_tid].reshape(-1), h, w, c, a[out_tid].reshape(-1), oh, ow,
                          *[arr(v) for v in ys], *[arr(v) for v in xs], s[0])
    return Spec(label, nodes, (x_tid,), (out_tid,), build, scratch=(((w * c,), F32),))


# --- elementwise ------------------------------------------------------------------------------

BINARY = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide}
#: LiteRT's MAXIMUM / MINIMUM: `a > b ? a : b` / `a < b ? a : b`, so NaN in b passes and NaN in a
#: gives b (np.maximum would propagate both, np.fmax neither)
SELECT = {"MAXIMUM": np.greater, "MINIMUM": np.less}


def select_fn(cmp: np.ufunc, x: np.ndarray, y: np.ndarray, out: np.ndarray,
              mask: np.ndarray) -> Callable[[], None]:
    """out = cmp(x, y) ? x : y, with out possibly the buffer of x or of y."""
    copy, invert = np.copyto, np.logical_not
    if np.shares_memory(out, y):
        def run_onto_y() -> None:
            cmp(x, y, out=mask)
            copy(out, x, where=mask)
        return run_onto_y
    keep_x = np.shares_memory(out, x)

    def run() -> None:
        cmp(x, y, out=mask)
        if not keep_x:
            copy(out, x)
        invert(mask, out=mask)
        copy(out, y, where=mask)
    return run


def binary_spec(label: str, nodes: Nodes, op: str, operands: list[Operand], shapes: list[Shape], out_tid: int,
                out_shape: Shape, act: Act) -> Spec:
    """operands: [tid or constant ndarray] x 2, with their shapes; numpy broadcasts.

    A per-channel operand ((1, ..., 1, C) against (..., W, C)) is tiled to a whole row W*C
    (once for a constant, per call otherwise), so numpy's inner loop runs over rows, not C."""
    tids = tuple(o for o in operands if isinstance(o, int))
    out_shape = tuple(out_shape)
    same = [o for o, sh in zip(operands, shapes) if isinstance(o, int) and tuple(sh) == out_shape]
    chan = None
    if len(out_shape) >= 2 and out_shape[-1] > 1:
        for i, sh in enumerate(shapes):
            sh = tuple(sh)
            other = tuple(shapes[1 - i])
            if (other == out_shape and sh and sh[-1] == out_shape[-1] and int(np.prod(sh)) == out_shape[-1]
                    and out_shape[-2] > 1):
                chan = i
    native = _native_binary(operands, shapes, out_shape)
    if native is not None:
        return native_binary_spec(label, nodes, op, operands, out_tid, out_shape, act, *native, same)
    nd = broadcast_nd(shapes, out_shape) if jit.AVAILABLE and int(np.prod(out_shape)) > 0 else None
    if nd is not None:
        return binary_nd_spec(label, nodes, op, operands, out_tid, act, nd, same)
    rows = int(np.prod(out_shape[:-2])) if chan is not None else 0
    row = out_shape[-1] * out_shape[-2] if chan is not None else 0
    scratch: tuple[tuple[tuple[int, ...], Any], ...] = (
        (((row,), F32),) if chan is not None and isinstance(operands[chan], int) else ())
    if op in SELECT:
        scratch += (((int(np.prod(out_shape)),), np.bool_),)

    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, y = (a[o] if isinstance(o, int) else o for o in operands)
        out = a[out_tid]
        pre = None
        if chan is not None:
            vec = (x, y)[chan]
            if isinstance(operands[chan], int):
                tile = s[0]
                src, dst = vec.reshape(-1), tile.reshape(out_shape[-2], out_shape[-1])
                pre = lambda: np.copyto(dst, src)  # noqa: E731
            else:
                tile = tile_row(vec, out_shape[-2])
            full = ((y, x)[chan]).reshape(rows, row)
            x, y = (tile, full) if chan == 0 else (full, tile)
            out = out.reshape(rows, row)
        if op == "SQUARED_DIFFERENCE":
            def run() -> None:
                np.subtract(x, y, out=out)
                np.multiply(out, out, out=out)
        elif op in SELECT:
            run = select_fn(SELECT[op], x, y, out, s[-1].reshape(out.shape))
        else:
            f = BINARY[op]

            def run() -> None:
                f(x, y, out=out)
        return seq(pre, run, clamp_fn(out, act.lo, act.hi))
    return Spec(label, nodes, tids, (out_tid,), build, scratch=scratch, inplace={out_tid: same[0]} if same else {})




def _native_binary(operands: list, shapes: list, out_shape: tuple) -> tuple[int, int] | None:
    """(mode, vector length) when jit.binary can run the op: equal sizes (mode 0), or one
    operand a scalar or a vector along the last axis against the other's full shape (mode 1:
    the second is the vector, 2: the first)."""
    if not jit.AVAILABLE:
        return None
    n = int(np.prod(out_shape))
    sizes = [int(np.prod(sh)) for sh in shapes]
    if tuple(shapes[0]) == tuple(shapes[1]) == out_shape:
        return 0, 0
    c = out_shape[-1] if out_shape else 1
    for i, sh in enumerate(shapes):
        full = tuple(shapes[1 - i]) == out_shape
        vec = sizes[i] == 1 or (sizes[i] == c and tuple(sh)[-1:] == (c,))
        if full and vec and n > 0:
            return 2 - i, sizes[i]
    return None


def native_binary_spec(label: str, nodes: Nodes, op: str, operands: list[Operand], out_tid: int, out_shape: Shape, act: Act,
                       mode: int,
                       c: int, same: list) -> Spec:
    tids = tuple(o for o in operands if isinstance(o, int))
    # the tile is refilled at every call: no longer than the output (a multiple of c)
    n = int(np.prod(out_shape))
    lb = c * max(1, min(512, n) // c) if mode else 1

    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, y = (a[o].reshape(-1) if isinstance(o, int) else np.ascontiguousarray(o, F32).reshape(-1)
                for o in operands)
        return jit.Native(jit.OP_BINARY, x, y, a[out_tid].reshape(-1), BINARY_CODE[op], mode, f32c(act.lo),
                          f32c(act.hi), s[0])
    return Spec(label, nodes, tids, (out_tid,), build, scratch=(((lb,), F32),),
                inplace={out_tid: same[0]} if same else {})


UFUNC: dict[str, np.ufunc] = {
    "ABS": np.abs, "NEG": np.negative, "SQRT": np.sqrt, "SQUARE": np.square, "FLOOR": np.floor, "CEIL": np.ceil,
    "TANH": np.tanh, "EXP": np.exp, "LOG": np.log, "SIN": np.sin, "COS": np.cos}


def _unary_recipe(op: str, ctx: NodeContext) -> tuple[Recipe | None, bool]:
    """fn(x, out) for elementwise float ops (the reference kernels' formulas), and whether
    out may be x itself."""
    z = F32(0)
    if op in UFUNC:
        f = UFUNC[op]
        return (lambda x, o: f(x, out=o)), True
    if op == "RSQRT":  # 1 / sqrt(x) in float32, as the reference kernel
        one = F32(1)

        def rsqrt(x: np.ndarray, o: np.ndarray) -> None:
            np.sqrt(x, out=o)
            np.divide(one, o, out=o)
        return rsqrt, True
    if op == "ROUND":
        return (lambda x, o: np.rint(x, out=o)), True
    if op == "RELU":
        return (lambda x, o: np.maximum(x, z, out=o)), True
    if op == "RELU6":
        return (lambda x, o: np.clip(x, z, F32(6), out=o)), True
    if op == "RELU_N1_TO_1":
        return (lambda x, o: np.clip(x, F32(-1), F32(1), out=o)), True
    if op == "LOGISTIC":
        one = F32(1)

        def logistic(x: np.ndarray, o: np.ndarray) -> None:
            np.negative(x, out=o)
            np.exp(o, out=o)
            np.add(o, one, out=o)
            np.reciprocal(o, out=o)
        return logistic, True
    if op == "HARD_SWISH":
        three, six = F32(3), F32(6)

        def hswish(x: np.ndarray, o: np.ndarray) -> None:
            np.add(x, three, out=o)
            np.clip(o, z, six, out=o)
            np.multiply(o, x, out=o)
            np.divide(o, six, out=o)
        return hswish, False
    if op == "LEAKY_RELU":
        alpha = F32(ctx.options.get("alpha", 0.0) or 0.0)
        if 0 <= alpha <= 1:
            return (lambda x, o: (np.multiply(x, alpha, out=o), np.maximum(x, o, out=o))), False
        if alpha > 1:
            return (lambda x, o: (np.multiply(x, alpha, out=o), np.minimum(x, o, out=o))), False
    return None, False


CLAMPS = {"RELU": (0.0, INF), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def swish_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int, shape: Shape, swish: bool = True) -> Spec:
    """x * LOGISTIC(x) (or LOGISTIC alone) on jit.sigmoid's vector formula, out may be x."""
    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        return jit.Native(jit.OP_SIGMOID, a[x_tid].reshape(-1), a[out_tid].reshape(-1), int(swish), s[0])
    return Spec(label, nodes, (x_tid,), (out_tid,), build, scratch=(((1024,), F32),), inplace={out_tid: x_tid})


def unary_spec(label: str, nodes: Nodes, ctx: NodeContext, x_tid: int, out_tid: int) -> Spec | None:
    kind = KIND_OF_OP.get(ctx.op.name)
    n = int(np.prod(tin(ctx, 0).shape))
    if jit.AVAILABLE and kind == SIGMOID:
        return swish_spec(label, nodes, x_tid, out_tid, tin(ctx, 0).shape, swish=False)
    if jit.AVAILABLE and (kind == HSWISH or ctx.op.name in CLAMPS):  # native: one pass, no Python in between
        lo, hi = CLAMPS.get(ctx.op.name, (-INF, INF))

        def build_jit(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
            x, out = a[x_tid].reshape(-1), a[out_tid].reshape(-1)
            items = [] if np.shares_memory(x, out) and lo == -INF and hi == INF else [
                native_copy(out, [(x, [(0, 0, n, 1, n)])], lo, hi)]
            if kind is not None and kind != PRELU:
                items.append(jit.Native(jit.OP_ACT, out, kind, F32(0), F32(0), EMPTY))
            return items
        return Spec(label, nodes, (x_tid,), (out_tid,), build_jit, inplace={out_tid: x_tid})
    if jit.AVAILABLE and ctx.op.name in UNARY_CODE and n > 0:
        return native_unary_spec(label, nodes, ctx.op.name, x_tid, out_tid)
    recipe, inplace_ok = _unary_recipe(ctx.op.name, ctx)
    if recipe is None:
        return None

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, out = a[x_tid], a[out_tid]
        return lambda: recipe(x, out)
    return Spec(label, nodes, (x_tid,), (out_tid,), build, inplace={out_tid: x_tid} if inplace_ok else {})


#: erfc by Abramowitz & Stegun 7.1.26, the float32 formula of acelera's reference GELU
#: (core/kernels/gelu.py): same operations in the same order, so the same float32 results
_AS_P = F32(0.3275911)
_AS_A1 = F32(1.061405429)
_AS_COEFFS = tuple(F32(c) for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592))
_SQRT1_2 = F32(np.sqrt(0.5))


def gelu_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int, shape: Shape) -> Spec:
    """GELU (exact form, float32): 0.5 x erfc(-x / sqrt 2) as max(x, 0) - 0.5 |x| erfc(|x| / sqrt 2),
    in place on three scratch buffers instead of the reference kernel's temporaries."""
    size = int(np.prod(shape))
    if jit.AVAILABLE and size > 0:
        return native_unary_spec(label, nodes, "GELU", x_tid, out_tid)
    one, half = F32(1), F32(-0.5)
    zero = F32(0)

    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, p = a[x_tid].reshape(-1), a[out_tid].reshape(-1)
        ax, z, t = s[0], s[1], s[2]
        mul, add = np.multiply, np.add

        def run() -> None:
            np.abs(x, out=ax)
            mul(ax, _SQRT1_2, out=z)
            mul(z, _AS_P, out=t)
            add(t, one, out=t)
            np.reciprocal(t, out=t)
            mul(t, _AS_A1, out=p)
            for c in _AS_COEFFS:
                add(p, c, out=p)
                mul(p, t, out=p)
            np.square(z, out=z)
            np.negative(z, out=z)
            np.exp(z, out=z)
            mul(p, z, out=p)
            mul(p, ax, out=p)
            mul(p, half, out=p)
            np.maximum(x, zero, out=z)
            add(p, z, out=p)
        return run
    return Spec(label, nodes, (x_tid,), (out_tid,), build, scratch=(((size,), F32),) * 3)


def prelu_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int, alpha: np.ndarray, shape: Shape) -> Spec:
    c = shape[-1]
    m = int(np.prod(shape[:-1]))
    scratch = () if jit.AVAILABLE else ((tuple(shape), F32),)

    def build(a: Arena, s: Bufs, _p: Bufs, p: Packed) -> Step:
        x, out = a[x_tid], a[out_tid]
        al = p["alpha"]
        if jit.AVAILABLE:
            ow = shape[-2] if len(shape) >= 2 else 1
            if np.shares_memory(x, out):
                return epilogue(out.reshape(m, c), out.reshape(m, c), p["zero"], Act(), None,
                                Act(kind=PRELU, alpha=al), None, ow)
            rows, row = m // ow, ow * c  # x*1 + 0 then PReLU, from x into out in one pass
            return jit.Native(jit.OP_DW_1X1, x.reshape(rows, row), np.ones(row, F32), np.zeros(row, F32),
                              f32c(-INF), f32c(INF), tile_row(al, ow), PRELU, F32(0), F32(0), out.reshape(rows, row))
        return prelu_numpy(x, out, al, s[0])
    return Spec(label, nodes, (x_tid,), (out_tid,), build,
                pack=lambda: {"alpha": np.ascontiguousarray(np.broadcast_to(alpha, (c,)), F32),
                              "zero": np.zeros(c, F32)},
                scratch=scratch, inplace={out_tid: x_tid})


def softmax_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int, shape: Shape) -> Spec:
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    n = shape[-1] if shape else 1

    def build(a: Arena, s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, out = a[x_tid].reshape(rows, n), a[out_tid].reshape(rows, n)
        if jit.AVAILABLE:
            return jit.Native(jit.OP_SOFTMAX, x, out, s[2])
        mx, sm = s[0], s[1]

        def run() -> None:
            np.max(x, axis=1, keepdims=True, out=mx)
            np.subtract(x, mx, out=out)
            np.exp(out, out=out)
            np.sum(out, axis=1, keepdims=True, out=sm)
            np.divide(out, sm, out=out)
        return run
    return Spec(label, nodes, (x_tid,), (out_tid,), build,
                scratch=(((rows, 1), F32), ((rows, 1), F32), ((1024,), F32)), inplace={out_tid: x_tid})


def concat_spec(label: str, nodes: Nodes, operands: list[Operand], out_tid: int, axis: int, act: Act) -> Spec:
    tids = tuple(o for o in operands if isinstance(o, int))

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        parts = [a[o] if isinstance(o, int) else o for o in operands]
        out = a[out_tid]
        if jit.AVAILABLE and out.dtype == F32 and all(np.asarray(p).dtype == F32 for p in parts):
            groups, off = [], 0
            for p in parts:
                p = np.ascontiguousarray(p, F32) if not isinstance(p, np.ndarray) or not p.flags.c_contiguous else p
                begin = [0] * out.ndim
                begin[axis] = off
                groups.append((p, block_copies(p.shape, out.shape, begin)))
                off += p.shape[axis]
            if sum(len(g) for _, g in groups) <= MAX_COPY_GROUPS:
                return native_copy(out, groups, act.lo, act.hi)
        cat = np.concatenate
        return seq(lambda: cat(parts, axis=axis, out=out, casting="unsafe"), clamp_fn(out, act.lo, act.hi))
    # data movement: runs on the storage type (float16 in fp16 mode; clamps are exact there)
    return Spec(label, nodes, tids, (out_tid,), build, float_io=False)


def pad_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int, paddings: np.ndarray) -> Spec:
    """PAD into a private zeroed buffer: only the interior is written per call."""
    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, out = a[x_tid], a[out_tid]
        if jit.AVAILABLE and x.dtype == F32 and out.dtype == F32:
            groups = block_copies(x.shape, out.shape, [int(b) for b, _ in paddings])
            if len(groups) <= MAX_COPY_GROUPS:
                return native_copy(out, [(x, groups)], -INF, INF)
        sl = tuple(slice(int(b), int(b) + d) for (b, _), d in zip(paddings, x.shape))
        dst = out[sl]
        return lambda: np.copyto(dst, x)
    return Spec(label, nodes, (x_tid,), (out_tid,), build, private_out=True, float_io=False)


def slice_spec(label: str, nodes: Nodes, ctx: NodeContext, consts: dict[int, np.ndarray]) -> Spec | None:
    """STRIDED_SLICE / SLICE with constant parameters as copies of runs (an OP_COPY record in the
    native run, not a reference call between two runs). The gathered positions are what the
    reference kernel returns for an array of positions (the same kernel, so the same semantics);
    None (the reference kernel) when they make too many runs."""
    ins, out_tid = list(ctx.op.inputs), ctx.op.outputs[0]
    x_shape, out_shape = tuple(tin(ctx, 0).shape), tuple(ctx.outputs[0].shape)
    n, m = int(np.prod(x_shape, dtype=np.int64)), int(np.prod(out_shape, dtype=np.int64))
    if not jit.AVAILABLE or m == 0 or n > MAX_SLICE_VALUES or any(t >= 0 and t not in consts for t in ins[1:]):
        return None
    try:
        pos = lookup(ctx.op).prepare(ctx)(np.arange(n, dtype=np.int64).reshape(x_shape),
                                          *[None if t < 0 else consts[t] for t in ins[1:]])
        pos = np.asarray(pos[0] if isinstance(pos, (tuple, list)) else pos)
    except Exception:  # noqa: BLE001 - the reference step says what is wrong at its own time
        return None
    if pos.dtype != np.int64 or tuple(pos.shape) != out_shape:
        return None
    groups = copy_groups(pos.reshape(-1))
    if groups is None:
        return None
    idx = np.ascontiguousarray(pos.reshape(-1), np.intp)
    x_tid = ins[0]

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        x, out = a[x_tid], a[out_tid]
        if x.dtype == F32 and out.dtype == F32:
            flat = x.reshape(-1)
            args: list = []
            for s0, d0, run, reps, sst in groups:
                args += [flat[s0:s0 + (reps - 1) * sst + run], d0, run, reps, sst, run]
            return jit.Native(jit.OP_COPY, out.reshape(-1), len(groups), *args, f32c(-INF), f32c(INF), 0)
        src, dst, take = x.reshape(-1), out.reshape(-1), np.take
        return lambda: take(src, idx, out=dst, mode="clip")
    # data movement: runs on the storage type (float16 in fp16 mode)
    return Spec(label, nodes, (x_tid,), (out_tid,), build, float_io=False)


#: a STRIDED_SLICE / SLICE input above this many values keeps the reference kernel (its
#: positions are computed once at preparation)
MAX_SLICE_VALUES = 1 << 22


def copy_groups(pos: np.ndarray) -> list[tuple[int, int, int, int, int]] | None:
    """Positions gathered into a contiguous output as (src offset, dst offset, run, repeats,
    src stride) groups of equal runs of consecutive positions, the starts of a group going
    forwards; None past MAX_COPY_GROUPS."""
    m = pos.shape[0]
    brk = np.flatnonzero(np.diff(pos) != 1) + 1
    starts = np.concatenate(([0], brk)).astype(np.int64)
    lens = np.diff(np.concatenate((starts, [m]))).astype(np.int64)
    srcs = pos[starts]
    groups: list[tuple[int, int, int, int, int]] = []
    i, r = 0, len(starts)
    while i < r:
        run, j = int(lens[i]), i + 1
        sst = int(srcs[j] - srcs[i]) if j < r and lens[j] == run else run
        if sst < 0:  # starts going backwards (a negative stride): runs one by one
            sst = run
        else:
            while j < r and lens[j] == run and srcs[j] - srcs[j - 1] == sst:
                j += 1
        groups.append((int(srcs[i]), int(starts[i]), run, j - i, sst))
        if len(groups) > MAX_COPY_GROUPS:
            return None
        i = j
    return groups


def reshape_spec(label: str, nodes: Nodes, x_tid: int, out_tid: int) -> Spec:
    return Spec(label, nodes, (x_tid,), (out_tid,), None, alias=True)


# --- anything else: the reference kernel ------------------------------------------------------

def reference_spec(label: str, nodes: Nodes, ctx: NodeContext, tids: list[int], consts: dict[int, np.ndarray],
                   float_io: bool) -> Spec:
    """Run the node on its reference kernel, results copied into the planned buffers. Used for
    quantized ops (the reference kernels are bit-exact) and rarely used float ops. Quantized
    CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED get int8_conv's fast steps instead where
    they can (AVERAGE_POOL_2D int8_pool's, SOFTMAX int8_softmax's), int8 elementwise binary
    ops int8_tables' lookup tables; every other quantized step
    says why it falls back (int8_conv.fallbacks)."""
    fallback = ""
    if not float_io:
        if ctx.op.name in int8_conv.FAST_OPS:
            fast = int8_conv.fast_spec(label, nodes, ctx, consts)
        elif ctx.op.name == "AVERAGE_POOL_2D":
            from acelera.plugins.xnnpack_cpu import int8_pool

            fast = int8_pool.avg_pool_spec(label, nodes, ctx)
        elif ctx.op.name == "SOFTMAX":
            from acelera.plugins.xnnpack_cpu import int8_softmax

            fast = int8_softmax.softmax_spec(label, nodes, ctx)
        else:
            fast = int8_tables.table_spec(label, nodes, ctx, consts)
        if not isinstance(fast, str):
            return fast
        fallback = fast
    fn = lookup(ctx.op).prepare(ctx)
    ins_all = list(ctx.op.inputs)
    reads = tuple(t for t in ins_all if t >= 0 and t not in consts)
    outs = tuple(ctx.op.outputs)

    def build(a: Arena, _s: Bufs, _p: Bufs, _k: Packed) -> Step:
        args = [None if t < 0 else (consts[t] if t in consts else a[t]) for t in ins_all]
        dsts = [a[t] for t in outs]
        if len(dsts) == 1:
            d = dsts[0]

            def run1() -> None:
                r = fn(*args)
                np.copyto(d, r[0] if isinstance(r, (tuple, list)) else r, casting="unsafe")
            return run1

        def run() -> None:
            for d, r in zip(dsts, fn(*args)):
                np.copyto(d, r, casting="unsafe")
        return run
    if float_io:
        return Spec(label, nodes, reads, outs, build, float_io=float_io)
    return int8_conv.QuantSpec(label, nodes, reads, outs, build, float_io=False, op=ctx.op.name,
                               fallback=fallback)
