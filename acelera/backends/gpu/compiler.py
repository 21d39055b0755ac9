"""The partition compiler: a Partition -> a Plan of device buffers and kernel launches.

Every tensor of the partition gets one device buffer in PHWC4 layout (layout.py), except
where storage can be shared: a reshape that leaves storage unchanged aliases its input, and
an elementwise activation op whose input has no other use is fused into the kernel that
produces that input (its buffer is reused). Constants (weights, biases, operands) are packed
once here, dequantized to float for quantized models (the float view TFLite's GPU delegate
runs quantized models in): each quantized tensor the partition produces is passed through a
quantization simulator in its producer's epilogue, and the partition's int8/uint8 inputs and
outputs are (de)quantized on the host at invoke.

Bool and int32 tensors (comparison results, LOGICAL_AND, CAST, SELECT conditions) are floats
inside a partition: bools 0.0 / 1.0, int32 values as float. In a half-storage plan their
buffers hold float32 (`f32bufs`: every bool exact, int32 exact up to 2**24), so the kernels that
read them take a per-operand flag (`operand`). Ops whose result jumps at a threshold
(comparisons, FLOOR_DIV, FLOOR_MOD, SIGN, CAST to int32/bool) read a partition input or a
constant operand as float32 too (`operand(..., exact=True)`): the host uploads a float32 copy,
so rounding the input to half cannot flip a result the reference computes in float32. The
host converts bool and int32 tensors at the partition boundary (boundary.py).

Each op is compiled by its handler (`ops.HANDLERS`: ops/, one module per op family), which
adds buffers and launches; a launch's parameter block is `params`: the slots every kernel
reads, then the kernel's geometry in the order of its table in params.py.
"""
from __future__ import annotations

import numpy as np

from acelera.backends.gpu import params as S
from acelera.backends.gpu.layout import Layout
from acelera.backends.gpu.ops import HANDLERS
from acelera.backends.gpu.ops.common import CompileError, f2i, quant_params
from acelera.backends.gpu.packing import PACKERS
from acelera.backends.gpu.plan import Buffer, Launch, Plan, Port
from acelera.core.delegate import Partition
from acelera.core.model import Tensor

FLT_MAX = float(np.finfo(np.float32).max)
#: kernels whose output store runs the epilogue, so a following activation can fuse into them
FUSABLE = ("conv2d", "depthwise", "fully_connected", "transpose_conv", "binary", "pool", "unary", "resize",
           "where")
#: tensor types held in float32 buffers in a half-storage plan
NON_FLOAT = frozenset({"BOOL", "INT32"})


class Compiler:
    def __init__(self, partition: Partition, half: bool):
        self.part = partition
        self.half = half
        self.sdtype = np.float16 if half else np.float32
        self.plan = Plan(half)
        self.tbuf: dict[int, str] = {}  # tensor -> buffer name
        self.tlayout: dict[int, Layout] = {}
        self.ttensor: dict[int, Tensor] = {}
        self.const_bufs: dict[int, str] = {}
        self.writer: dict[str, int] = {}  # buffer -> index of the launch that last wrote it
        self.uses: dict[int, int] = {}
        self.extra_ports: list[Port] = []
        #: buffers holding float32 in a half-storage plan, and float32 copies of operands
        #: (tensor -> buffer) read exactly
        self.f32bufs: set[str] = set()
        self.exact_bufs: dict[int, str] = {}
        self._n = 0
        outs = set(partition.outputs)
        self.boundary_out = outs
        for n in partition.nodes:
            for t in partition.contexts[n].op.inputs:
                if t >= 0:
                    self.uses[t] = self.uses.get(t, 0) + 1

    # --- tensors and buffers -------------------------------------------------------------
    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def add_buffer(self, nbytes: int, data: np.ndarray | None = None, prefix: str = "k") -> str:
        name = self.name(prefix)
        self.plan.buffers[name] = Buffer(name, max(int(nbytes), 16), data)
        return name

    def is_const(self, t: Tensor) -> bool:
        return t.index in self.part.constants or t.data is not None

    def value(self, t: Tensor, as_float: bool = True) -> np.ndarray:
        """A constant's value; quantized integers dequantized (per channel where so)."""
        v = self.part.constants.get(t.index)
        if v is None:
            v = t.data
        if v is None:
            raise CompileError(f"tensor '{t.name}' must be constant")
        v = np.asarray(v)
        if not as_float:
            return v
        q = t.quantization
        if q.is_set and np.issubdtype(v.dtype, np.integer):
            scale = np.asarray(q.scale, np.float64)
            zp = np.asarray(q.zero_point, np.float64)
            if scale.size > 1:
                shape = [1] * v.ndim
                shape[q.quantized_dimension] = -1
                scale, zp = scale.reshape(shape), zp.reshape(shape)
            return ((v.astype(np.float64) - zp) * scale).astype(np.float32)
        return v.astype(np.float32)

    def layout(self, t: Tensor) -> Layout:
        return Layout(tuple(int(d) for d in t.shape))

    def input(self, t: Tensor) -> str:
        """The buffer holding tensor t (a constant is packed and uploaded once)."""
        if t.index in self.tbuf:
            name = self.tbuf[t.index]
            if name in self.f32bufs:
                raise CompileError(f"{t.type_name} tensor '{t.name}' is read by a kernel without float32 operands")
            return name
        if self.is_const(t):
            if t.index not in self.const_bufs:
                lay = self.layout(t)
                data = lay.pack(self.value(t), self.sdtype)
                self.const_bufs[t.index] = self.add_buffer(data.nbytes, data)
                self.tlayout[t.index] = lay
            return self.const_bufs[t.index]
        raise CompileError(f"tensor {t.index} ('{t.name}') is used before it is produced")

    def output(self, t: Tensor, data: np.ndarray | None = None) -> str:
        """A fresh buffer for tensor t, produced by the node being compiled (float32 for bool and
        int32 tensors in a half-storage plan)."""
        lay = self.layout(t)
        f32 = self.half and t.type_name in NON_FLOAT
        name = self.add_buffer(lay.size * (4 if f32 else np.dtype(self.sdtype).itemsize), data, prefix="t")
        if f32:
            self.f32bufs.add(name)
        self.tbuf[t.index] = name
        self.tlayout[t.index] = lay
        self.ttensor[t.index] = t
        return name

    def operand(self, t: Tensor, exact: bool = False) -> tuple[str, int]:
        """(buffer, 1 if it holds float32 in a half-storage plan) for a kernel that reads either.

        With `exact`, a partition input or a constant is read from a float32 copy (uploaded by
        the host, or packed here) instead of its half buffer."""
        if t.index in self.tbuf:
            name = self.tbuf[t.index]
            if name in self.f32bufs:
                return name, 1
            if exact and self.half and t.index in self.part.inputs and t.index not in self.part.constants:
                return self._exact_input(t), 1
            return name, 0
        if exact and self.half and self.is_const(t):
            if t.index not in self.exact_bufs:
                data = self.layout(t).pack(self.value(t), np.float32)
                self.exact_bufs[t.index] = self.add_buffer(data.nbytes, data)
                self.f32bufs.add(self.exact_bufs[t.index])
            return self.exact_bufs[t.index], 1
        return self.input(t), 0

    def _exact_input(self, t: Tensor) -> str:
        """A float32 copy of runtime partition input t, uploaded by the host at invoke."""
        if t.index not in self.exact_bufs:
            name = self.add_buffer(self.layout(t).size * 4, prefix="t")
            self.f32bufs.add(name)
            p = port(t, name)
            p.index, p.float_storage = self.part.inputs.index(t.index), True
            self.extra_ports.append(p)
            self.exact_bufs[t.index] = name
        return self.exact_bufs[t.index]

    def alias(self, out: Tensor, src: Tensor) -> None:
        self.tbuf[out.index] = self.input(src)
        self.tlayout[out.index] = self.layout(out)
        self.ttensor[out.index] = out

    def packed(self, t: Tensor, packer: str, arg: int) -> str:
        """Weights in a kernel's packed order: packed now if constant, else on the host at every
        invoke (a runtime weights input of the partition)."""
        if self.is_const(t):
            data = self.storage(PACKERS[packer](self.value(t), arg))
            return self.add_buffer(data.nbytes, data)
        if t.index not in self.part.inputs:
            raise CompileError(f"weights '{t.name}' are computed inside the partition")
        size = PACKERS[packer](np.zeros(t.shape, np.float32), arg).size
        name = self.add_buffer(size * np.dtype(self.sdtype).itemsize)
        p = port(t, name)
        p.index, p.pack, p.pack_arg = self.part.inputs.index(t.index), packer, arg
        q = t.quantization
        if q.is_set and q.per_channel:
            p.channel_quant = ([float(v) for v in q.scale], [int(v) for v in q.zero_point], int(q.quantized_dimension))
        self.extra_ports.append(p)
        return name

    def temp(self, lay: Layout) -> str:
        return self.add_buffer(lay.size * np.dtype(self.sdtype).itemsize, prefix="x")

    def storage(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(values, np.float32).astype(self.sdtype)

    def table(self, values: np.ndarray) -> str:
        """An int32 (or float32 bits) table buffer."""
        data = np.ascontiguousarray(values).view(np.int32).reshape(-1)
        return self.add_buffer(data.nbytes, data)

    # --- launches -----------------------------------------------------------------------
    def params(self, n: int, out_layout: Layout, out: Tensor | None, geometry=(), act=None) -> np.ndarray:
        """The parameter block: epilogue (fused activation, quantization simulator), slice mask,
        work-item count, then the geometry."""
        p = np.zeros(S.P_GEOM + len(geometry), np.int32)
        p[S.P_ACT1] = p[S.P_ACT2] = S.U_NONE
        if act is not None:
            code, lo, hi = act
            p[S.P_ACT1], p[S.P_LO1], p[S.P_HI1] = code, f2i(lo), f2i(hi)
        q = quant_params(out)
        if q is not None:
            scale, zp, qmin, qmax = q
            p[S.P_QS], p[S.P_QZ], p[S.P_QMIN], p[S.P_QMAX] = f2i(scale), f2i(zp), f2i(qmin), f2i(qmax)
        p[S.P_OS] = out_layout.S
        p[S.P_OREM] = out_layout.C - 4 * (out_layout.S - 1)
        p[S.P_N] = n
        for i, g in enumerate(geometry):
            p[S.P_GEOM + i] = f2i(g) if isinstance(g, float) else int(g)
        return p

    def launch(self, kernel: str, n: int, a, b, c, dst: str, params: np.ndarray, node: int) -> Launch | None:
        if n <= 0:
            return None
        if a is None:
            a = dst  # unused inputs still need a valid buffer
        if dst in self.f32bufs:
            params[S.P_F32OUT] = 1
        l = Launch(kernel, int(n), (a, b or a, c or a, dst), params, node)
        self.plan.launches.append(l)
        self.writer[dst] = len(self.plan.launches) - 1
        return l

    def fuse_activation(self, x: Tensor, y: Tensor, act: tuple) -> bool:
        """Fold an activation op (x -> y) into the kernel that produced x, if x has no other use."""
        if x.index in self.boundary_out or self.uses.get(x.index, 0) != 1 or x.index not in self.ttensor:
            return False
        if quant_params(x) is not None or tuple(x.shape) != tuple(y.shape):
            return False
        buf = self.tbuf[x.index]
        li = self.writer.get(buf)
        if li is None:
            return False
        l = self.plan.launches[li]
        if not l.kernel.startswith(FUSABLE) or l.args[3] != buf:
            return False
        p = l.params
        slot = S.P_ACT1 if p[S.P_ACT1] == S.U_NONE else S.P_ACT2 if p[S.P_ACT2] == S.U_NONE else None
        if slot is None:
            return False
        code, lo, hi = act
        p[slot], p[slot + 1], p[slot + 2] = code, f2i(lo), f2i(hi)
        q = quant_params(y)
        if q is not None:
            scale, zp, qmin, qmax = q
            p[S.P_QS], p[S.P_QZ], p[S.P_QMIN], p[S.P_QMAX] = f2i(scale), f2i(zp), f2i(qmin), f2i(qmax)
        self.tbuf[y.index] = buf
        self.tlayout[y.index] = self.layout(y)
        self.ttensor[y.index] = y
        return True

    # --- the whole partition ---------------------------------------------------------------
    def compile(self) -> Plan:
        part = self.part
        for t in part.inputs:
            if t in part.constants:
                continue
            ctx_t = self._tensor(t)
            self.output(ctx_t)
        for n in self._order():
            ctx = part.contexts[n]
            handler = HANDLERS.get(ctx.op.name)
            if handler is None:
                raise CompileError(f"{ctx.op.name} has no OpenCL kernel")
            handler(self, ctx)
        plan = self.plan
        for i, t in enumerate(part.inputs):
            tt = self._tensor(t)
            buf = None if t in part.constants else self.tbuf[t]
            p = port(tt, buf)
            p.index, p.float_storage = i, buf in self.f32bufs
            plan.inputs.append(p)
        plan.inputs.extend(self.extra_ports)
        for t in part.outputs:
            if t not in self.tbuf:
                raise CompileError(f"partition output {t} is not produced")
            p = port(self.ttensor.get(t) or self._tensor(t), self.tbuf[t])
            p.float_storage = p.buffer in self.f32bufs
            plan.outputs.append(p)
        if self.half:
            self._float_outputs()
        used = {a for l in plan.launches for a in l.args} | {p.buffer for p in plan.outputs}
        for p in plan.inputs:
            if p.buffer is not None and p.buffer not in used:
                p.buffer = None  # e.g. runtime weights, uploaded packed instead
        return plan

    def _float_outputs(self) -> None:
        """Keep partition outputs in float32 where only their producer touches the buffer:
        rounding a result to half on its way out would only add error."""
        plan = self.plan
        writers: dict[str, list] = {}
        read: set[str] = set()
        for l in plan.launches:
            writers.setdefault(l.args[3], []).append(l)
            read.update(a for a in l.args[:3] if a != l.args[3])
        inputs = {self.tbuf.get(t) for t in self.part.inputs}
        outs = [p.buffer for p in plan.outputs]
        for p in plan.outputs:
            b = p.buffer
            if b is None:
                continue
            ls = writers.get(b, [])
            if (p.float_storage or not ls or b in read or b in inputs or outs.count(b) != 1
                    or plan.buffers[b].data is not None):
                continue
            for l in ls:
                l.params[S.P_F32OUT] = 1
            plan.buffers[b].nbytes = max(plan.buffers[b].nbytes * 2, 16)
            p.float_storage = True

    def _tensor(self, t: int) -> Tensor:
        for n in self.part.nodes:
            ctx = self.part.contexts[n]
            for x in tuple(ctx.inputs) + tuple(ctx.outputs):
                if x is not None and x.index == t:
                    return x
        raise CompileError(f"tensor {t} is not used by the partition")

    def _order(self) -> list[int]:
        """The partition's nodes in dependency order (index order where free)."""
        part = self.part
        producer = {t: n for n in part.nodes for t in part.contexts[n].op.outputs}
        done, order = set(), []
        pending = list(part.nodes)
        while pending:
            progressed = False
            for n in list(pending):
                deps = [producer[t] for t in part.contexts[n].op.inputs if t in producer and producer[t] != n]
                if all(d in done for d in deps):
                    order.append(n)
                    done.add(n)
                    pending.remove(n)
                    progressed = True
            if not progressed:
                raise CompileError("the partition has a cycle")
        return order


def port(t: Tensor, buf: str | None) -> Port:
    q = quant_params(t)
    scale, zp = (q[0], int(q[1])) if q else (0.0, 0)
    return Port(t.index, buf, tuple(int(d) for d in t.shape), t.type_name, scale, zp)


def compile_partition(partition: Partition, half: bool) -> Plan:
    return Compiler(partition, half).compile()
