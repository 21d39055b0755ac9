"""Running a Plan on GL: one SSBO per plan buffer, one compute dispatch per launch.

Every GL call runs on the GL device's own thread (context.py). Buffers are made once at
prepare and stay on the device; invoke = one upload per runtime input, the dispatches (with a
shader-storage barrier between them), one download per output. The host-side boundary
conversions (PHWC4 packing, (de)quantization, runtime weight packing) are the shared
`acelera.backends.gpu.boundary.BoundaryMixin`'s.

moderngl never frees a GL object by itself: `close()` (Interpreter.close) deletes the kernel's
buffers on the GL thread and waits; a kernel dropped unclosed has them deleted by a finalizer,
posted to the GL thread to run before the device's next call (without it, a dropped
mobilenet-size interpreter leaked about 9 MB of buffers).
"""
from __future__ import annotations

import weakref

import numpy as np

from acelera.backends.gpu.boundary import BoundaryMixin
from acelera.backends.gpu.kernels.glsl import LOCAL_SIZE, P_WORDS
from acelera.backends.gpu.plan import Plan
from acelera.core.delegate import DelegateKernel, Partition
from acelera.plugins.gpu_gl.context import GLDevice, GLError

MAX_GROUPS = 65535


def groups(n: int) -> tuple[int, int]:
    """(x, y) work-group counts covering n invocations (y > 1 past 65535 groups)."""
    g = -(-n // LOCAL_SIZE)
    gy = -(-g // MAX_GROUPS)
    return -(-g // gy), gy


class GLKernel(BoundaryMixin, DelegateKernel):
    """A prepared partition on the GL device."""

    def __init__(self, partition: Partition, plan: Plan, dev: GLDevice):
        super().__init__(partition)
        self.plan = plan
        self.dev = dev
        self._init_boundary(plan)
        self.buffers: dict = {}
        self.launches: list = []
        self.closed = False
        #: every GL object this kernel made (not the shared programs), for close() / the finalizer
        self._objects: list = []
        self._finalizer = weakref.finalize(self, _release, dev, self._objects, False)
        self._finalizer.atexit = False  # the GL context goes with the process
        dev.call(self._build)

    def _build(self) -> None:
        ctx = self.dev.ctx
        for b in self.plan.buffers.values():
            size = -(-b.nbytes // 16) * 16
            if b.data is not None:
                raw = np.ascontiguousarray(b.data).view(np.uint8).reshape(-1)
                data = np.zeros(size, np.uint8)
                data[:raw.size] = raw
                buf = ctx.buffer(data.tobytes())
            else:
                buf = ctx.buffer(reserve=size)  # zero-filled
            self._objects.append(buf)
            self.buffers[b.name] = buf
        for l in self.plan.launches:
            prg = self.dev.program(l.kernel, self.plan.half)
            p = np.zeros(P_WORDS, np.int32)
            p[:l.params.size] = l.params
            ubo = ctx.buffer(p.tobytes())
            self._objects.append(ubo)
            self.launches.append((prg, [self.buffers[a] for a in l.args], ubo, groups(l.n)))

    def _run(self, hosts: list) -> list:
        ctx = self.dev.ctx
        for (_, port, _), host in zip(self.in_ports, hosts):
            self.buffers[port.buffer].write(host.tobytes())
        for prg, bufs, ubo, (gx, gy) in self.launches:
            for i, b in enumerate(bufs):
                b.bind_to_storage_buffer(i)
            ubo.bind_to_uniform_block(0)
            prg.run(gx, gy)
            ctx.memory_barrier()
        outs: list[np.ndarray] = []
        for port, lay in self.out_ports:
            dt = np.float32 if port.float_storage else self.sdtype
            raw = self.buffers[port.buffer].read(size=lay.size * np.dtype(dt).itemsize)
            outs.append(np.frombuffer(raw, dt))
        return outs

    def invoke(self, *inputs: np.ndarray):
        if self.closed:
            raise GLError("gpu-gl: invoke on a closed kernel (Interpreter.close()): call allocate_tensors() again")
        hosts = [self._to_device(port, lay, inputs[i]) for i, port, lay in self.in_ports]
        flats = self.dev.call(self._run, hosts)
        return tuple(self._from_device(port, lay, flat) for (port, lay), flat in zip(self.out_ports, flats))

    def close(self) -> None:
        """Delete this kernel's GL buffers now (on the GL thread, waiting); idempotent."""
        self.closed = True
        self.buffers, self.launches = {}, []
        info = self._finalizer.detach()
        if info is not None:
            _, fn, args, _ = info
            fn(args[0], args[1], True)

    release = close


def _release(dev: GLDevice, objects: list, wait: bool) -> None:
    """Delete the GL objects in `objects` on the GL thread (and empty the list): waiting for it
    from close(); from a finalizer (any thread, inside any call) posted to run before the
    device's next call (GLDevice.post takes no lock)."""
    todo = list(objects)
    objects.clear()
    if not todo:
        return

    def free() -> None:
        for o in todo:
            o.release()
    if wait:
        dev.call(free)
    else:
        dev.post(free)
