"""Partition -> compiled program: fuse node chains, pack weights once, plan buffers, build steps.

Fusion (float32):
- CONV_2D / FULLY_CONNECTED [-> ADD of a residual, possibly a channel-PADded one] [-> RELU,
  RELU6, RELU_N1_TO_1 clamps, then one PRELU, HARD_SWISH or (small) LOGISTIC] is one step:
  blocked im2col (from a zero-bordered copy) + BLAS GEMM (called from the native run where
  numpy's OpenBLAS allows, jit_blas.py) + one epilogue pass, or for few output pixels one
  numba GEMM with the epilogue fused (conv.SMALL_M);
- a CONV_2D whose only reader is a DEPTHWISE_CONV_2D leaves its bias and clamp to the
  depthwise step, which applies them while it copies its input (one pass less);
- chains of small FULLY_CONNECTED / pointwise CONV_2D layers (MLPs, squeeze-excite blocks)
  with their activations are one numba call;
- DEPTHWISE_CONV_2D [-> activations] is one depthwise call (with a depth multiplier: after a
  copy of its input with every channel repeated);
- LOGISTIC + MUL(x, LOGISTIC(x)) (swish) is one pass;
- the converter's LayerNorm subgraph over the last axis (MEAN, NEG, SQUARED_DIFFERENCE, MEAN,
  ADD, RSQRT, MUL, MUL, ADD, MUL, ADD) is one pass per row (Builder.layer_norm).
A chain only absorbs a node whose input has no other reader and is not a partition output
(nor taken by another chain), and runs where its last node was. Quantized nodes run on the
int8 steps (int8_conv.py) or the reference kernels (bit-exact).

Buffers are planned in planner.py; partition inputs are copied into their buffers at invoke
time (in the storage type: float16 in fp16 mode).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from acelera.core.delegate import Partition
from acelera.core.kernels.conv import Geometry
from acelera.core.kernels.registry import NodeContext
from acelera.plugins.xnnpack_cpu import conv, ops, ops_nd
from acelera.plugins.xnnpack_cpu.spec import ACT_BOUNDS, INF, KIND_OF_OP, PRELU, Act, Spec, f32c

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
CLAMP_OPS = {"RELU": (0.0, INF), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}
UNARY = ("ABS", "NEG", "SQRT", "SQUARE", "FLOOR", "CEIL", "TANH", "ROUND", "RELU", "RELU6", "RELU_N1_TO_1",
         "LOGISTIC", "HARD_SWISH", "LEAKY_RELU", "RSQRT", "EXP", "LOG", "SIN", "COS")
REDUCE = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN")
NATIVE_BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")


@dataclass
class Graph:
    """The partition's nodes in execution order with producer/consumer maps."""

    part: Partition
    order: list[int]
    consts: dict[int, np.ndarray]
    readers: dict[int, list[int]] = field(default_factory=dict)  # tensor -> reading nodes (per use)
    outputs: frozenset = frozenset()

    @staticmethod
    def of(part: Partition) -> "Graph":
        ctxs = part.contexts
        consts = {t: np.asarray(v) for t, v in part.constants.items()}
        for n in part.nodes:
            for ti in ctxs[n].inputs:
                if ti is not None and ti.is_constant and ti.data is not None:
                    consts.setdefault(ti.index, ti.data)
        g = Graph(part, _topological(part), consts, outputs=frozenset(part.outputs))
        for n in g.order:
            for t in ctxs[n].op.inputs:
                if t >= 0:
                    g.readers.setdefault(t, []).append(n)
        return g

    def ctx(self, n: int) -> NodeContext:
        return self.part.contexts[n]

    def sole_reader(self, t: int) -> int | None:
        """The node reading t, when it is read exactly once inside and not needed outside."""
        r = self.readers.get(t, [])
        return r[0] if len(r) == 1 and t not in self.outputs else None

    def const(self, t: int) -> np.ndarray | None:
        return self.consts.get(t)

    def need(self, t: int) -> np.ndarray:
        """The constant t, which the op table has made sure is static (weights)."""
        v = self.consts.get(t)
        if v is None:
            raise ValueError(f"tensor {t} is not constant")
        return v


def _topological(part: Partition) -> list[int]:
    ctxs = part.contexts
    producer = {t: n for n in part.nodes for t in ctxs[n].op.outputs}
    done: set[int] = set()
    order: list[int] = []
    for n in sorted(part.nodes):
        stack = [(n, False)]
        while stack:
            m, expanded = stack.pop()
            if m in done:
                continue
            if expanded:
                done.add(m)
                order.append(m)
                continue
            stack.append((m, True))
            for t in ctxs[m].op.inputs:
                p = producer.get(t)
                if p is not None and p not in done:
                    stack.append((p, False))
    return order


def act_of(ctx: NodeContext) -> Act:
    lo, hi = ACT_BOUNDS.get(int(ctx.options.get("fused_activation_function", 0) or 0), (-INF, INF))
    return Act(lo, hi)


def is_float(ctx: NodeContext) -> bool:
    return all(t.type_name == "FLOAT32" for t in ctx.outputs) and all(
        t is None or t.type_name == "FLOAT32" for t in ctx.inputs[:1])


# --- fusion and specs ------------------------------------------------------------------------------

class Builder:
    """Turns the graph into Specs (fusing chains) in execution order."""

    def __init__(self, graph: Graph, fp16: bool):
        self.g = graph
        self.fp16 = fp16
        self.absorbed: set[int] = set()
        self.deferred: set[int] = set()
        self.specs: list[tuple[int, Spec]] = []  # (position of the last node, spec)
        #: depthwise node -> (bias, clamp) of the convolution feeding it, which it applies itself
        self.pre: dict[int, tuple[np.ndarray, Act]] = {}
        self.pos = {n: i for i, n in enumerate(graph.order)}

    @overload
    def r16(self, a: np.ndarray) -> np.ndarray: ...

    @overload
    def r16(self, a: None) -> None: ...

    def r16(self, a: np.ndarray | None) -> np.ndarray | None:
        """Round float weights through float16 in fp16 mode (stored as float32 for BLAS)."""
        if a is None:
            return None
        a = np.asarray(a, np.float32)
        return a.astype(np.float16).astype(np.float32) if self.fp16 else a

    def run(self) -> list[Spec]:
        self.deferred = self._deferred_pads()
        for n in self.g.order:
            if n in self.absorbed or n in self.deferred:
                continue
            last, spec = self.node_spec(n)
            self.specs.append((self.pos[last], spec))
        for n in self.deferred - self.absorbed:  # a chain did not take it after all
            self.specs.append((self.pos[n], self.node_spec(n)[1]))
        self.specs.sort(key=lambda p: p[0])
        return [s for _, s in self.specs]

    def reader(self, t: int) -> int | None:
        """The sole reader of t (graph.sole_reader) unless a chain has already taken it (the
        residual ADD of two convolutions goes to the first chain that reaches it)."""
        r = self.g.sole_reader(t)
        return None if r is None or r in self.absorbed else r

    def last(self, nodes: list[int]) -> int:
        """The node of `nodes` that runs last: where their fused step goes."""
        return max(nodes, key=self.pos.__getitem__)

    def label(self, nodes: list[int]) -> str:
        ops = "+".join(self.g.ctx(n).op.name for n in nodes)
        return f"{ops} (node{'s' if len(nodes) > 1 else ''} {', '.join(map(str, nodes))})"

    def node_spec(self, n: int) -> tuple[int, Spec]:
        ctx = self.g.ctx(n)
        op = ctx.op.name
        spec = None
        if is_float(ctx):
            if op in ("FULLY_CONNECTED", "CONV_2D") and self.small_fc(n) and not self._feeds_add(n):
                return self.fc_chain(n)
            if op in ("CONV_2D", "FULLY_CONNECTED"):
                return self.gemm_chain(n)
            if op == "DEPTHWISE_CONV_2D":
                r = self.dw_chain(n)
                if r is not None:
                    return r
            if op == "LOGISTIC":
                m = self._swish_mul(n)
                if m is not None:  # x * LOGISTIC(x) (swish, SiLU) in one pass
                    self.absorbed.add(m)
                    return m, ops.swish_spec(self.label([n, m]), (n, m), ctx.op.inputs[0], self.g.ctx(m).op.outputs[0],
                                             ops.tin(ctx, 0).shape)
            if op == "MEAN":
                ln = self.layer_norm(n)
                if ln is not None:
                    return ln
            spec = self.single(n, ctx, op)
        if spec is None:
            spec = ops.reference_spec(self.label([n]), (n,), ctx, list(ctx.op.inputs), self.g.consts,
                                    float_io=any(t.type_name == "FLOAT32" for t in ctx.outputs) or any(
                                        t is not None and t.type_name == "FLOAT32" for t in ctx.inputs))
        return n, spec

    # -- chains -----------------------------------------------------------------------------------
    def absorb_tail(self, t: int, act1: Act, act2: Act, after_add: bool,
                    allow_prelu: bool = True) -> tuple[list[int], int, Act, Act]:
        """Absorb the activation nodes reading t (each its only reader): RELU-family clamps
        compose with the clamp before them; one PRELU, HARD_SWISH or LOGISTIC becomes act2.
        Returns (nodes, new tensor, act1, act2); after_add: clamps go into act2."""
        nodes = []
        while True:
            r = self.reader(t)
            if r is None or not is_float(self.g.ctx(r)):
                break
            rc = self.g.ctx(r)
            op = rc.op.name
            if op in CLAMP_OPS:
                if act2.trivial and not after_add:
                    new = act1.then_clamp(*CLAMP_OPS[op])
                    if new is None:
                        break
                    act1 = new
                else:
                    new = act2.then_clamp(*CLAMP_OPS[op])
                    if new is None:
                        break
                    act2 = new
            elif op in KIND_OF_OP and act2.trivial:
                if op == "LOGISTIC" and int(np.prod(rc.outputs[0].shape)) > self.SMALL_SIGMOID:
                    break  # numba's exp is scalar: numpy's vectorized one wins on large tensors
                if op == "PRELU":
                    alpha = self.g.const(rc.op.inputs[1])
                    c = rc.outputs[0].shape[-1]
                    if not allow_prelu or alpha is None or not _channel_vector(alpha, c):
                        break
                    alpha = np.broadcast_to(np.asarray(alpha, np.float32).reshape(-1), (c,))
                    act2 = Act(kind=PRELU, alpha=self.r16(np.ascontiguousarray(alpha)))
                else:
                    act2 = Act(kind=KIND_OF_OP[op])
            else:
                break
            nodes.append(r)
            self.absorbed.add(r)
            t = rc.op.outputs[0]
        return nodes, t, act1, act2

    SMALL_FC = 1 << 16  # M*K*N up to which one numba loop beats BLAS plus an epilogue
    SMALL_FC_BLAS = 1 << 10  # the same when the native run calls BLAS itself (jit.blas_sgemm)
    SMALL_SIGMOID = 4096  # LOGISTIC fused into a numba loop only up to this many values

    def fc_dims(self, n: int) -> tuple[int, int, int]:
        """(M, K, N) of a FULLY_CONNECTED or a pointwise CONV_2D seen as one."""
        ctx = self.g.ctx(n)
        w = ops.tin(ctx, 1)
        k, nn = int(np.prod(w.shape[1:])), int(w.shape[0])
        return int(np.prod(ops.tin(ctx, 0).shape)) // max(k, 1), k, nn

    def _feeds_add(self, n: int) -> bool:
        """Whether n's output goes only to an ADD (a residual the GEMM path fuses)."""
        r = self.reader(self.g.ctx(n).op.outputs[0])
        return r is not None and self.g.ctx(r).op.name == "ADD"

    def small_fc(self, n: int) -> bool:
        """A FULLY_CONNECTED, or a 1x1 stride-1 unpadded CONV_2D, small enough for jit.fc_chain."""
        from acelera.plugins.xnnpack_cpu import jit

        ctx = self.g.ctx(n)
        if (not jit.AVAILABLE or ctx.op.name not in ("FULLY_CONNECTED", "CONV_2D") or len(ctx.op.inputs) < 2
                or self.g.const(ctx.op.inputs[1]) is None or not is_float(ctx)):
            return False
        if ctx.op.name == "CONV_2D":
            g = conv.conv_geometry(ctx)
            if not (g.pointwise and g.sh == 1 and g.sw == 1 and g.dh == 1 and g.dw == 1):
                return False
        elif ctx.op.name != "FULLY_CONNECTED" or len(ops.tin(ctx, 1).shape) != 2:
            return False
        m, k, nn = self.fc_dims(n)
        return m * k * nn <= (self.SMALL_FC_BLAS if jit.blas_sgemm() else self.SMALL_FC)

    def fc_chain(self, n: int) -> tuple[int, Spec]:
        """Consecutive small FULLY_CONNECTED / pointwise CONV_2D layers (each feeding only the
        next) with their activations as one call.
        In fp16 mode every layer stays its own step, so each output is rounded to float16."""
        g = self.g
        layers: list[tuple[int, int, int, np.ndarray, np.ndarray | None, tuple[Act, Act], int]] = []
        nodes: list[int] = []
        cur = n
        while True:
            ctx = g.ctx(cur)
            m, k, nn = self.fc_dims(cur)
            if layers and (m != layers[0][0] or k != layers[-1][2]):
                break
            if layers:
                self.absorbed.add(cur)
            w = g.need(ctx.op.inputs[1])
            b = g.const(ctx.op.inputs[2]) if len(ctx.op.inputs) > 2 and ctx.op.inputs[2] >= 0 else None
            more, t, act, act2 = self.absorb_tail(ctx.op.outputs[0], act_of(ctx), Act(), False, allow_prelu=False)
            nodes += [cur] + more
            layers.append((m, k, nn, w, b, (act, act2), t))
            nxt = self.reader(t)
            if (self.fp16 or nxt is None or not self.small_fc(nxt) or g.ctx(nxt).op.inputs[0] != t
                    or self._feeds_add(nxt)):
                break
            cur = nxt
        x_tid = g.ctx(n).op.inputs[0]
        out_tid = layers[-1][6]
        r16 = self.r16

        def pack() -> dict[str, np.ndarray]:
            params, meta, off = [], [], 0
            for _, k, nn, w, b, (act, act2), _t in layers:
                wt = np.ascontiguousarray(r16(w).reshape(nn, k).T).reshape(-1)
                bb = r16(b).reshape(-1) if b is not None else np.zeros(nn, np.float32)
                bounds = np.array([f32c(v) for v in (act.lo, act.hi, act2.lo, act2.hi)], np.float32)
                meta.append([k, nn, off, off + wt.size, off + wt.size + nn, act2.kind])
                params += [wt, bb, bounds]
                off += wt.size + nn + 4
            return {"params": np.concatenate(params).astype(np.float32), "meta": np.array(meta, np.int64)}
        m = layers[0][0]
        width = max(nn for _, _, nn, *_ in layers)
        spec = conv.fc_chain_spec(self.label(nodes), tuple(nodes), x_tid, out_tid, m, layers[0][1], width, pack,
                               sum(l_[0] * l_[1] * l_[2] for l_ in layers))
        return self.last(nodes), spec

    def gemm_chain(self, n: int) -> tuple[int, Spec]:
        g = self.g
        ctx = g.ctx(n)
        kind = "fc" if ctx.op.name == "FULLY_CONNECTED" else "conv"
        x_tid = ctx.op.inputs[0]
        w = g.need(ctx.op.inputs[1])
        b = g.const(ctx.op.inputs[2]) if len(ctx.op.inputs) > 2 and ctx.op.inputs[2] >= 0 else None
        out_t = ctx.outputs[0]
        t = ctx.op.outputs[0]
        nodes = [n]
        act1 = act_of(ctx)
        act2 = Act()
        res_tid, cres, full = None, 0, False
        c_out = out_t.shape[-1]
        # residual ADD
        r = self.reader(t)
        if r is not None and g.ctx(r).op.name == "ADD" and is_float(g.ctx(r)):
            rc = g.ctx(r)
            a_, b_ = rc.op.inputs[:2]
            other = b_ if a_ == t else a_
            if other != t and other >= 0 and other not in g.consts and tuple(rc.outputs[0].shape) == tuple(out_t.shape):
                pad_node = self._channel_pad_producer(other, rc.outputs[0].shape)
                if pad_node is not None and pad_node in self.deferred:
                    res_tid = g.ctx(pad_node).op.inputs[0]
                    cres = ops.tin(g.ctx(pad_node), 0).shape[-1]
                    nodes += [pad_node, r]
                    self.absorbed.add(pad_node)
                elif tuple(ops.tin(g.ctx(r), rc.op.inputs.index(other)).shape) == tuple(out_t.shape):
                    res_tid, cres, full = other, c_out, True
                    nodes.append(r)
                if res_tid is not None:
                    self.absorbed.add(r)
                    act2 = act_of(rc)
                    t = rc.op.outputs[0]
        more, t, act1, act2 = self.absorb_tail(t, act1, act2, after_add=res_tid is not None)
        nodes += more
        geom: Geometry | None = None
        pointwise_s1 = False
        if kind == "conv":
            geom = conv.conv_geometry(ctx)
            m = geom.n * geom.oh * geom.ow
            k = geom.kh * geom.kw * geom.c
            pointwise_s1 = geom.pointwise and geom.sh == 1 and geom.sw == 1
        else:
            k = int(ops.tin(ctx, 1).shape[1])
            m = int(np.prod(ops.tin(ctx, 0).shape)) // k
        alpha = act2.alpha
        dw = self.reader(t)
        raw = (res_tid is None and act2.trivial and m > conv.SMALL_M and self._dw_takes_bias(t) and dw is not None
               and (geom is None or not geom.pointwise or pointwise_s1))
        if raw and dw is not None:  # the depthwise conv reading t adds the bias and clamp as it copies its input
            self.pre[dw] = (self.r16(b).reshape(-1) if b is not None else np.zeros(c_out, np.float32),
                                        act1)

        def pack() -> dict[str, np.ndarray]:
            wm = self.r16(w).reshape(w.shape[0], -1)
            p = {"w": np.ascontiguousarray(wm.T), "b": self.r16(b).reshape(-1).copy() if b is not None
                 else np.zeros(c_out, np.float32)}
            if alpha is not None:
                p["alpha"] = np.ascontiguousarray(alpha, np.float32)
            return p
        spec = conv.gemm_spec(self.label(nodes), tuple(nodes), x_tid, t, res_tid, kind, geom, m, k, c_out, pack,
                           act1, act2, cres, full, raw=raw)
        return self.last(nodes), spec

    def _swish_mul(self, n: int) -> int | None:
        """The MUL computing x * LOGISTIC(x) from LOGISTIC node n, when x feeds only those two
        nodes and the MUL has no activation."""
        from acelera.plugins.xnnpack_cpu import jit

        g = self.g
        ctx = g.ctx(n)
        x, s = ctx.op.inputs[0], ctx.op.outputs[0]
        m = self.reader(s)
        if not jit.AVAILABLE or m is None or x in g.consts or x in g.outputs:
            return None
        mc = g.ctx(m)
        if (mc.op.name != "MUL" or not is_float(mc) or sorted(mc.op.inputs[:2]) != sorted((x, s))
                or int(mc.options.get("fused_activation_function", 0) or 0) != 0
                or tuple(mc.outputs[0].shape) != tuple(ops.tin(ctx, 0).shape)):
            return None
        return m if sorted(g.readers.get(x, [])) == sorted((n, m)) else None

    def _dw_takes_bias(self, t: int) -> bool:
        """Whether t is read only by a DEPTHWISE_CONV_2D that runs jit.dw_rows (float32 storage,
        depth multiplier 1), which can then apply the producer's bias and clamp itself."""
        from acelera.plugins.xnnpack_cpu import jit

        r = self.reader(t)
        if r is None or self.fp16 or not jit.AVAILABLE:
            return False
        rc = self.g.ctx(r)
        if rc.op.name != "DEPTHWISE_CONV_2D" or not is_float(rc) or rc.op.inputs[0] != t:
            return False
        if self.g.const(rc.op.inputs[1]) is None or ops.tin(rc, 1).shape[3] != ops.tin(rc, 0).shape[3]:
            return False
        return not conv.dw_is_scale(conv.conv_geometry(rc))

    def _deferred_pads(self) -> set[int]:
        """Channel PADs that a later CONV_2D chain takes as its residual: not emitted alone."""
        g = self.g
        out = set()
        for n in g.order:
            ctx = g.ctx(n)
            if ctx.op.name != "PAD" or self._channel_pad_producer(ctx.op.outputs[0], ctx.outputs[0].shape) is None:
                continue
            add = g.sole_reader(ctx.op.outputs[0])
            if add is None or g.ctx(add).op.name != "ADD" or not is_float(g.ctx(add)):
                continue
            other = [t for t in g.ctx(add).op.inputs[:2] if t != ctx.op.outputs[0]]
            prod = [p for p in g.order if other and other[0] in g.ctx(p).op.outputs]
            if (prod and g.ctx(prod[0]).op.name in ("CONV_2D", "FULLY_CONNECTED") and is_float(g.ctx(prod[0]))
                    and g.sole_reader(other[0]) == add
                    and tuple(g.ctx(prod[0]).outputs[0].shape) == tuple(g.ctx(add).outputs[0].shape)):
                out.add(n)
        return out

    def _channel_pad_producer(self, t: int, want_shape: Sequence[int]) -> int | None:
        """The PAD node producing t when it only appends zero channels and t has no other use."""
        g = self.g
        for n in g.order:
            ctx = g.ctx(n)
            if t in ctx.op.outputs:
                if ctx.op.name != "PAD" or g.sole_reader(t) is None or not is_float(ctx):
                    return None
                p = g.const(ctx.op.inputs[1])
                if p is None:
                    return None
                p = np.asarray(p).reshape(-1, 2)
                if np.any(p[:-1] != 0) or p[-1, 0] != 0 or tuple(ctx.outputs[0].shape) != tuple(want_shape):
                    return None
                return n
        return None

    def dw_chain(self, n: int) -> tuple[int, Spec] | None:
        g = self.g
        ctx = g.ctx(n)
        x_t, w_t = ops.tin(ctx, 0), ops.tin(ctx, 1)
        w = g.const(ctx.op.inputs[1])
        from acelera.plugins.xnnpack_cpu import jit

        cin, cout = int(x_t.shape[3]), int(w_t.shape[3])
        mult = cout // cin if cin > 0 and cout % cin == 0 else 0
        if w is None or mult < 1 or (mult > 1 and (not jit.AVAILABLE or len(x_t.shape) != 4)):
            return None  # the reference kernel
        geom = conv.conv_geometry(ctx, cout if mult > 1 else None)
        b = g.const(ctx.op.inputs[2]) if len(ctx.op.inputs) > 2 and ctx.op.inputs[2] >= 0 else None
        more, t, act, act2 = self.absorb_tail(ctx.op.outputs[0], act_of(ctx), Act(), after_add=False)
        nodes = [n] + more
        alpha = act2.alpha
        pre = self.pre.get(n)
        spec = conv.dw_spec(self.label(nodes), tuple(nodes), ctx.op.inputs[0], t, geom,
                         lambda: conv.dw_pack(w, b, alpha, geom, self.r16, pre), act, act2, pre[1] if pre is not None else None)
        if mult > 1:
            spec = conv.dw_multiplier_spec(spec, ctx.op.inputs[0], tuple(x_t.shape), mult)
        return self.last(nodes), spec

    # -- LayerNorm ---------------------------------------------------------------------------------
    def layer_norm(self, n: int) -> tuple[int, Spec] | None:
        """The converter's LayerNorm over the last axis, starting at its first MEAN (node n):
        m = MEAN(x), NEG(m), SQUARED_DIFFERENCE(x, m), v = MEAN(.), ADD(v, eps), RSQRT,
        g = MUL(., gamma), t = MUL(-m, g), b = ADD(t, beta), MUL(x, g), y = ADD(x g, b);
        every intermediate read only inside the pattern, no fused activations."""
        from acelera.plugins.xnnpack_cpu import jit

        g = self.g
        if not jit.AVAILABLE:
            return None
        ctx = g.ctx(n)
        x = ctx.op.inputs[0]
        shape = tuple(ops.tin(ctx, 0).shape)
        if not shape or x in g.consts or not self._last_axis_mean(n, x):
            return None
        c = int(shape[-1])
        m = ctx.op.outputs[0]

        def only(t: int, want: str, other: int | None = None, const_size: int | None = None) -> tuple[int, int] | None:
            """(node, output) of the sole reader of t, of op `want`, no activation, whose other
            operand is `other` or a float constant of const_size values."""
            r = self.reader(t)
            if r is None or r == n:
                return None
            rc = g.ctx(r)
            if rc.op.name != want or not is_float(rc) or int(rc.options.get("fused_activation_function", 0) or 0):
                return None
            ins = list(rc.op.inputs[:2]) if want not in ("RSQRT", "MEAN") else [rc.op.inputs[0]]
            if t not in ins:
                return None
            if want in ("MUL", "ADD", "SQUARED_DIFFERENCE"):
                o = ins[1] if ins[0] == t and ins[1] != t else ins[0]
                if other is not None and o != other:
                    return None
                if const_size is not None:
                    v = g.const(o)
                    if v is None or v.size != const_size or v.dtype != np.float32 or (
                            v.ndim and any(d != 1 for d in v.shape[:-1])):
                        return None
            return r, rc.op.outputs[0]
        readers = g.readers.get(m, [])
        if m in g.outputs or len(readers) != 2 or any(r in self.absorbed for r in readers):
            return None
        kinds = {g.ctx(r).op.name: r for r in readers}
        if set(kinds) != {"NEG", "SQUARED_DIFFERENCE"}:
            return None
        neg, sqd = kinds["NEG"], kinds["SQUARED_DIFFERENCE"]
        if sorted(g.ctx(sqd).op.inputs[:2]) != sorted((x, m)) or not is_float(g.ctx(sqd)) or not is_float(g.ctx(neg)):
            return None
        nm, sq = g.ctx(neg).op.outputs[0], g.ctx(sqd).op.outputs[0]
        var = self.reader(sq)
        if var is None or g.ctx(var).op.name != "MEAN" or not self._last_axis_mean(var, sq):
            return None
        v = g.ctx(var).op.outputs[0]
        step = only(v, "ADD", const_size=1)
        if step is None:
            return None
        add_eps, ve = step
        eps_t = [t for t in g.ctx(add_eps).op.inputs[:2] if t != v][0]
        step = only(ve, "RSQRT")
        if step is None:
            return None
        rsq, r = step
        step = only(r, "MUL", const_size=c)
        if step is None:
            return None
        mul_g, gt = step
        gamma_t = [t for t in g.ctx(mul_g).op.inputs[:2] if t != r][0]
        g_readers = g.readers.get(gt, [])
        if gt in g.outputs or len(g_readers) != 2:
            return None
        mul_t = self.reader(nm)
        if mul_t is None or mul_t not in g_readers or sorted(g.ctx(mul_t).op.inputs[:2]) != sorted((nm, gt)):
            return None
        mul_x = [q for q in g_readers if q != mul_t][0]
        mc = g.ctx(mul_x)
        if (mc.op.name != "MUL" or sorted(mc.op.inputs[:2]) != sorted((x, gt)) or mul_x in self.absorbed
                or int(mc.options.get("fused_activation_function", 0) or 0)
                or int(g.ctx(mul_t).options.get("fused_activation_function", 0) or 0)):
            return None
        step = only(g.ctx(mul_t).op.outputs[0], "ADD", const_size=c)
        if step is None:
            return None
        add_b, bt = step
        beta_t = [t for t in g.ctx(add_b).op.inputs[:2] if t != g.ctx(mul_t).op.outputs[0]][0]
        xg = mc.op.outputs[0]
        step = only(xg, "ADD", other=bt)
        if step is None or self.reader(bt) != step[0]:
            return None
        final, y = step
        if tuple(g.ctx(final).outputs[0].shape) != shape:
            return None
        nodes = [n, neg, sqd, var, add_eps, rsq, mul_g, mul_t, add_b, mul_x, final]
        self.absorbed.update(nodes[1:])
        rows = int(np.prod(shape[:-1]))
        eps = float(np.asarray(g.need(eps_t), np.float32).reshape(-1)[0])
        spec = ops_nd.layer_norm_spec(self.label(nodes), tuple(nodes), x, y, rows, c, eps,
                                   self.r16(g.need(gamma_t)), self.r16(g.need(beta_t)))
        return self.last(nodes), spec

    def _last_axis_mean(self, n: int, x: int) -> bool:
        """Whether MEAN node n reduces its input x over the last axis only, keeping it."""
        ctx = self.g.ctx(n)
        if ctx.op.inputs[0] != x or not is_float(ctx) or not ctx.options.get("keep_dims", False):
            return False
        rank = len(ops.tin(ctx, 0).shape)
        axes = self.g.const(ctx.op.inputs[1]) if len(ctx.op.inputs) > 1 else None
        return (axes is not None and rank > 0 and ops.tin(ctx, 0).shape[-1] > 0
                and {int(a) % rank for a in np.asarray(axes).reshape(-1)} == {rank - 1})

    # -- single nodes -----------------------------------------------------------------------------
    def single(self, n: int, ctx: NodeContext, op: str) -> Spec | None:
        g = self.g
        lab = self.label([n])
        ins = ctx.op.inputs
        out = ctx.op.outputs[0]
        if op in NATIVE_BINARY:
            operands = [t if t not in g.consts else self.r16(g.consts[t]) for t in ins[:2]]
            return ops.binary_spec(lab, (n,), op, operands, [ops.tin(ctx, 0).shape, ops.tin(ctx, 1).shape], out,
                                 ctx.outputs[0].shape, act_of(ctx))
        if op == "CONCATENATION" and any(t not in g.consts for t in ins):
            axis = int(ctx.options.get("axis", 0)) % len(ctx.outputs[0].shape)
            operands = [t if t not in g.consts else self.r16(g.consts[t]) for t in ins]
            return ops.concat_spec(lab, (n,), operands, out, axis, act_of(ctx))
        if ins and ins[0] in g.consts:
            return None  # a constant input: the reference kernel handles it
        if op in UNARY:
            return ops.unary_spec(lab, (n,), ctx, ins[0], out)
        if op == "GELU" and not ctx.options.get("approximate", False):
            return ops.gelu_spec(lab, (n,), ins[0], out, ops.tin(ctx, 0).shape)
        if op in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
            o = ctx.options
            x_shape = ops.tin(ctx, 0).shape
            glob = (op == "AVERAGE_POOL_2D" and int(o.get("filter_height", 0)) == x_shape[1]
                    and int(o.get("filter_width", 0)) == x_shape[2] and tuple(ctx.outputs[0].shape[1:3]) == (1, 1))
            if glob:
                return ops.mean_spec(lab, (n,), ins[0], out, (1, 2), x_shape, act_of(ctx))
            return ops.pool_spec(lab, (n,), ctx, ins[0], out, act_of(ctx), op == "MAX_POOL_2D")
        if op in REDUCE:
            x_shape = tuple(ops.tin(ctx, 0).shape)
            axes = tuple(sorted({int(a) % len(x_shape) for a in np.asarray(g.const(ins[1])).reshape(-1)}))
            return ops.reduce_spec(lab, (n,), op, ins[0], out, axes, x_shape)
        if op == "BATCH_MATMUL":
            operands = [t if t not in g.consts else self.r16(g.consts[t]) for t in ins[:2]]
            return ops.batch_matmul_spec(lab, (n,), operands, out, bool(ctx.options.get("adj_x", False)),
                                         bool(ctx.options.get("adj_y", False)),
                                         [ops.tin(ctx, 0).shape, ops.tin(ctx, 1).shape], ctx.outputs[0].shape)
        if op == "TRANSPOSE" and ins[1] in g.consts:
            x_shape = tuple(ops.tin(ctx, 0).shape)
            perm = [int(p) % max(len(x_shape), 1) for p in np.asarray(g.consts[ins[1]]).reshape(-1)]
            if sorted(perm) == list(range(len(x_shape))) and tuple(ctx.outputs[0].shape) == tuple(
                    x_shape[p] for p in perm):
                return ops_nd.transpose_spec(lab, (n,), ins[0], out, x_shape, perm)
            return None
        if op == "PRELU":
            alpha = g.const(ins[1])
            c = ctx.outputs[0].shape[-1] if ctx.outputs[0].shape else 1
            if alpha is not None and _channel_vector(alpha, c):
                return ops.prelu_spec(lab, (n,), ins[0], out, self.r16(alpha).reshape(-1), ctx.outputs[0].shape)
            return None
        if op == "SOFTMAX" and ops.tin(ctx, 0).shape:
            return ops.softmax_spec(lab, (n,), ins[0], out, ops.tin(ctx, 0).shape)
        if op == "PAD":
            return ops.pad_spec(lab, (n,), ins[0], out, np.asarray(g.const(ins[1])).reshape(-1, 2))
        if op in ("RESHAPE", "EXPAND_DIMS"):
            return ops.reshape_spec(lab, (n,), ins[0], out)
        if op in ("STRIDED_SLICE", "SLICE"):
            return ops.slice_spec(lab, (n,), ctx, g.consts)
        if op == "RESIZE_BILINEAR" and ins[1] in g.consts and len(ops.tin(ctx, 0).shape) == 4:
            return ops.resize_spec(lab, (n,), ctx, ins[0], out)
        return None


def _channel_vector(alpha: np.ndarray, c: int) -> bool:
    shape = tuple(alpha.shape)
    return all(d == 1 for d in shape[:-1]) and (not shape or shape[-1] in (1, c))
