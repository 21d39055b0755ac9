"""OpenCL platform/device discovery, selection and the per-process context.

The default device prefers a real GPU, then any accelerator, then a CPU device (PoCL on a
machine without a GPU). `--gpu_opencl_device` (or the ACELERA_GPU_OPENCL_DEVICE environment
variable, which the availability probe also reads) picks one explicitly: "P:D" platform and
device indices, or a case-insensitive substring of "<platform name> <device name>".

Nothing here raises on a machine without OpenCL: `probe()` returns Support(False, reason).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from acelera.core.delegate import Support

ENV_DEVICE = "ACELERA_GPU_OPENCL_DEVICE"
PROBE_SOURCE = "__kernel void probe(__global float *x) { x[get_global_id(0)] *= 2.0f; }"


class DeviceError(Exception):
    """No usable OpenCL device, with the reason."""


@dataclass
class Device:
    """A chosen OpenCL device with its context and in-order queue (one per process)."""

    cl: object  # the pyopencl module
    device: object
    context: object
    queue: object
    label: str
    programs: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def is_gpu(self) -> bool:
        return bool(self.device.type & self.cl.device_type.GPU)

    @property
    def has_fp16(self) -> bool:
        return "cl_khr_fp16" in self.device.extensions

    def identity(self) -> str:
        """Device, platform and driver strings: part of every serialization key."""
        d = self.device
        return "|".join([d.platform.name, d.platform.version, d.name, d.version, d.driver_version])

    def max_work_group(self) -> int:
        return int(self.device.max_work_group_size)


def _import_cl():
    try:
        import pyopencl as cl
    except ImportError as e:
        raise DeviceError(f"pyopencl is not installed ({e}); pip install pyopencl "
                          "(and pocl-binary-distribution for a CPU OpenCL driver)") from None
    except Exception as e:  # a broken installation (missing ICD loader, ...)
        raise DeviceError(f"pyopencl failed to import: {type(e).__name__}: {e}") from None
    return cl


def _kind_rank(cl, dev) -> int:
    t = dev.type
    if t & cl.device_type.GPU:
        return 0
    if t & cl.device_type.ACCELERATOR:
        return 1
    return 2


def list_devices() -> list[tuple[int, int, object, object]]:
    """(platform index, device index, platform, device) for every OpenCL device."""
    cl = _import_cl()
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # PLATFORM_NOT_FOUND_KHR and friends
        raise DeviceError(f"no OpenCL platform found ({type(e).__name__}: {e}); install a driver, "
                          "e.g. pip install pocl-binary-distribution") from None
    out = []
    for pi, p in enumerate(platforms):
        try:
            devices = p.get_devices()
        except Exception:
            continue
        out.extend((pi, di, p, d) for di, d in enumerate(devices))
    if not out:
        raise DeviceError("OpenCL platforms have no devices")
    return out


def select(spec: str = "") -> tuple[object, str]:
    """The device `spec` names ("P:D" or a name substring), or the preferred one."""
    cl = _import_cl()
    found = list_devices()
    spec = (spec or "").strip()
    label = lambda pi, di, p, d: f"{pi}:{di} {p.name.strip()} / {d.name.strip()}"  # noqa: E731
    if spec:
        if ":" in spec and all(part.strip().isdigit() for part in spec.split(":", 1)):
            want = tuple(int(v) for v in spec.split(":", 1))
            hits = [f for f in found if (f[0], f[1]) == want]
        else:
            hits = [f for f in found if spec.lower() in f"{f[2].name} {f[3].name}".lower()]
        if not hits:
            known = "; ".join(label(*f) for f in found)
            raise DeviceError(f"no OpenCL device matches '{spec}' (devices: {known})")
        f = hits[0]
        return f[3], label(*f)
    f = min(found, key=lambda f: (_kind_rank(cl, f[3]), f[0], f[1]))
    return f[3], label(*f)


_devices: dict[str, Device] = {}
_devices_lock = threading.Lock()


def open_device(spec: str = "") -> Device:
    """The process-wide Device for `spec` (created once; contexts are expensive)."""
    spec = (spec or os.environ.get(ENV_DEVICE, "")).strip()
    with _devices_lock:
        if spec in _devices:
            return _devices[spec]
        cl = _import_cl()
        dev, label = select(spec)
        try:
            ctx = cl.Context([dev])
            queue = cl.CommandQueue(ctx)
        except Exception as e:
            raise DeviceError(f"cannot create an OpenCL context on {label}: {type(e).__name__}: {e}") from None
        d = Device(cl, dev, ctx, queue, label)
        _devices[spec] = d
        return d


_probe: Support | None = None


def probe() -> Support:
    """Available when an OpenCL device exists and compiles and runs a tiny kernel."""
    global _probe
    if _probe is not None:
        return _probe
    try:
        d = open_device()
        import numpy as np

        cl = d.cl
        prg = cl.Program(d.context, PROBE_SOURCE).build()
        x = np.arange(4, dtype=np.float32)
        buf = cl.Buffer(d.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
        prg.probe(d.queue, (4,), None, buf)
        cl.enqueue_copy(d.queue, x, buf)
        if not np.array_equal(x, np.arange(4, dtype=np.float32) * 2):
            raise DeviceError(f"{d.label} computed a wrong result in the probe kernel")
        _probe = Support(True, d.label)
    except DeviceError as e:
        _probe = Support(False, str(e))
    except Exception as e:  # a driver that cannot compile (PoCL without a linker), ...
        msg = " ".join(str(e).split())[:300]
        _probe = Support(False, f"OpenCL device cannot build or run kernels: {type(e).__name__}: {msg}")
    return _probe
