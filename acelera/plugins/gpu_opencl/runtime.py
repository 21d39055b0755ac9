"""Running a Plan: the OpenCL program, device buffers, preset kernel launches, and invoke.

One program (acelera.backends.gpu.kernels.opencl) serves every partition; it is built once per process, device and
storage precision (or loaded from a cached binary). Each launch gets its own kernel object
with its arguments set once at prepare, so invoke is: one upload per runtime input, the
launches in order on an in-order queue, one download per output.
"""
from __future__ import annotations

import numpy as np

from acelera.backends.gpu.boundary import BoundaryMixin
from acelera.backends.gpu.kernels.opencl import build_options, program_source
from acelera.backends.gpu.plan import Plan
from acelera.core.delegate import DelegateKernel, Partition
from acelera.plugins.gpu_opencl.device import Device

LOCAL_SIZE = 64


def build_program(dev: Device, half: bool, binary: bytes | None = None):
    """(program, how): the shared program of this process ("memo"), else loaded from `binary`
    ("binary"), else compiled from source ("source", also when a given binary fails to load)."""
    cl = dev.cl
    key = ("program", half)
    with dev.lock:
        prg = dev.programs.get(key)
        if prg is not None:
            return prg, "memo"
        opts = build_options(half)
        how = "source"
        if binary:
            try:
                prg = cl.Program(dev.context, [dev.device], [binary]).build(options=opts)
                how = "binary"
            except Exception:
                prg = None
        if prg is None:
            prg = cl.Program(dev.context, program_source()).build(options=opts)
        dev.programs[key] = prg
        return prg, how


def program_binary(prg) -> bytes:
    import pyopencl as cl

    return bytes(prg.get_info(cl.program_info.BINARIES)[0])


class OpenCLKernel(BoundaryMixin, DelegateKernel):
    """A prepared partition on one OpenCL device (host-side boundary: acelera.backends.gpu.boundary)."""

    def __init__(self, partition: Partition, plan: Plan, dev: Device, program):
        super().__init__(partition)
        self.plan = plan
        self.dev = dev
        cl = dev.cl
        ctx = dev.context
        mf = cl.mem_flags
        self._init_boundary(plan)
        self.closed = False
        self.buffers = {}
        for b in plan.buffers.values():
            if b.data is not None:
                data = np.ascontiguousarray(b.data)
                if data.nbytes < b.nbytes:
                    data = np.concatenate([data.view(np.uint8).reshape(-1), np.zeros(b.nbytes - data.nbytes, np.uint8)])
                self.buffers[b.name] = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=data)
            else:
                buf = cl.Buffer(ctx, mf.READ_WRITE, b.nbytes)
                cl.enqueue_fill_buffer(dev.queue, buf, np.zeros(1, np.uint8), 0, b.nbytes)
                self.buffers[b.name] = buf
        self.launches = []
        limit = min(LOCAL_SIZE, dev.max_work_group())
        for l in plan.launches:
            k = cl.Kernel(program, l.kernel)
            pbuf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(l.params, np.int32))
            k.set_args(*[self.buffers[a] for a in l.args], pbuf)
            local = limit
            try:
                local = min(local, int(k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, dev.device)))
            except Exception:
                pass
            glob = -(-l.n // local) * local
            self.launches.append((k, (glob,), (local,), pbuf))
        self.out_host = [np.empty(lay.size, np.float32 if p.float_storage else self.sdtype)
                         for p, lay in self.out_ports]
        dev.queue.finish()

    def invoke(self, *inputs: np.ndarray):
        if self.closed:
            raise RuntimeError("gpu-opencl: invoke on a closed kernel (Interpreter.close()): "
                               "call allocate_tensors() again")
        cl = self.dev.cl
        q = self.dev.queue
        with self.dev.lock:
            keep = []
            for i, port, lay in self.in_ports:
                host = self._to_device(port, lay, inputs[i])
                keep.append(host)
                cl.enqueue_copy(q, self.buffers[port.buffer], host, is_blocking=False)
            for k, glob, local, _ in self.launches:
                cl.enqueue_nd_range_kernel(q, k, glob, local)
            outs = []
            for (port, lay), host in zip(self.out_ports, self.out_host):
                cl.enqueue_copy(q, host, self.buffers[port.buffer], is_blocking=True)
                outs.append(self._from_device(port, lay, host))
        return tuple(outs)

    def close(self) -> None:
        """Release this kernel's device buffers now (pyopencl also frees them when the kernel is
        garbage-collected: a dropped interpreter leaks nothing); idempotent."""
        self.closed = True
        with self.dev.lock:
            for b in list(self.buffers.values()) + [pbuf for *_, pbuf in self.launches]:
                b.release()
            self.buffers, self.launches = {}, []

    release = close
