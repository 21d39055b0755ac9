"""OpenCL platform/device discovery, probing, selection and the per-process context.

Every device of every platform the ICD loader lists (Debian's PoCL through /etc/OpenCL/vendors,
a GPU vendor's driver, pyopencl's bundled loader's PoCL from the `pocl` extra) is probed by
building and running a tiny kernel on it: a driver can list a device and still fail every
build (PoCL 3.0 with LLVM 14 on CPUs it cannot name: "unknown target CPU 'generic'"). The
default device is the first that passes, preferring a real GPU, then an accelerator, then a
CPU device, then platform order (the loader lists system drivers before pyopencl's bundled
one). Each rejected device is reported in one short line.

`--gpu_opencl_device` (or the ACELERA_GPU_OPENCL_DEVICE environment variable, which the
availability probe also reads) picks one explicitly: "P:D" platform and device indices, or a
case-insensitive substring of "<platform name> <driver version> / <device name>"; the
chosen device is probed too.

Nothing here raises on a machine without OpenCL: `probe()` returns Support(False, reason).
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acelera.core.delegate import Support

if TYPE_CHECKING:
    import pyopencl

ENV_DEVICE = "ACELERA_GPU_OPENCL_DEVICE"
PROBE_SOURCE = "__kernel void probe(__global float *x) { x[get_global_id(0)] *= 2.0f; }"
INSTALL_HINT = ("install an OpenCL driver: Debian's pocl-opencl-icd (scripts/setup does, as root), "
                "else pip install pocl-binary-distribution")
#: the longest reason kept for one rejected device (cut at a word)
REASON_CHARS = 110


class DeviceError(Exception):
    """No usable OpenCL device, with the reason."""


@dataclass
class Device:
    """A chosen OpenCL device with its context and in-order queue (one per process)."""

    cl: Any  # the pyopencl module
    device: pyopencl.Device
    context: pyopencl.Context
    queue: pyopencl.CommandQueue
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


@dataclass
class Candidate:
    """One listed device and what its probe found (`error` is None when it builds and runs)."""

    index: tuple[int, int]
    platform: object
    device: object
    label: str
    rank: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        return f"{self.label}: {self.error}"


def _import_cl():
    try:
        import pyopencl as cl
    except ImportError as e:
        raise DeviceError(f"pyopencl is not installed ({e}); pip install pyopencl, then {INSTALL_HINT}") from None
    except Exception as e:  # a broken installation (missing ICD loader, ...)
        raise DeviceError(f"pyopencl failed to import: {short_reason(e)}") from None
    return cl


_FILE_POS = re.compile(r"\S+:\d+:\d+:\s*")
_ADDRESS = re.compile(r"\s*\bat 0x[0-9a-fA-F]+")


def _clip(text: str, limit: int = REASON_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:")
    return f"{cut} ..."


def short_reason(e: BaseException) -> str:
    """One short line for a driver error: the compiler's first `error:` line when the build log
    has one, else the first distinct part of the message; no pointer addresses, cut at a word."""
    text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln[ln.index("error:"):] for ln in lines if "error:" in ln]
    if errors:
        msg = "kernel build failed: " + _FILE_POS.sub("", errors[0][len("error:"):].strip(), count=1)
    elif lines:
        msg = lines[0].split(" - ")[0]  # pyopencl repeats "clX failed: CODE - clX failed: CODE - ..."
        log = [ln for ln in lines[1:] if not ln.startswith(("Build on ", "(options:"))]
        if log:
            msg = f"{msg}: {log[0]}"
    else:
        msg = type(e).__name__
    msg = " ".join(_ADDRESS.sub("", msg).split())
    return _clip(msg)


def _kind_rank(cl, dev) -> int:
    t = dev.type
    if t & cl.device_type.GPU:
        return 0
    if t & cl.device_type.ACCELERATOR:
        return 1
    return 2


def _label(pi: int, di: int, p, d) -> str:
    try:
        driver = d.driver_version.strip()
    except Exception:  # noqa: BLE001
        driver = ""
    return " ".join(f"{pi}:{di} {p.name.strip()} {driver}".split()) + f" / {d.name.strip()}"


def list_devices() -> list[tuple[int, int, object, object]]:
    """(platform index, device index, platform, device) for every OpenCL device."""
    cl = _import_cl()
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # PLATFORM_NOT_FOUND_KHR and friends
        raise DeviceError(f"no OpenCL platform found ({short_reason(e)}); {INSTALL_HINT}") from None
    out: list[tuple[int, int, object, object]] = []
    for pi, p in enumerate(platforms):
        try:
            devices = p.get_devices()
        except Exception:  # noqa: BLE001  (a platform with no devices raises DEVICE_NOT_FOUND)
            continue
        out.extend((pi, di, p, d) for di, d in enumerate(devices))
    if not out:
        raise DeviceError(f"OpenCL platforms have no devices; {INSTALL_HINT}")
    return out


def _matches(spec: str, found) -> list:
    if ":" in spec and all(part.strip().isdigit() for part in spec.split(":", 1)):
        want = tuple(int(v) for v in spec.split(":", 1))
        return [f for f in found if (f[0], f[1]) == want]
    s = spec.lower()
    return [f for f in found if s in f"{f[2].name} {f[3].name}".lower() or s in _label(*f).lower()]


_devices: dict[tuple[int, int], Device] = {}
_candidates: list[Candidate] | None = None
_devices_lock = threading.Lock()


def _try(cl, f) -> Candidate:
    """Open a context on one device and build and run the probe kernel there."""
    import numpy as np

    pi, di, p, d = f
    c = Candidate((pi, di), p, d, _label(*f), _kind_rank(cl, d))
    if c.index in _devices:
        return c
    try:
        ctx = cl.Context([d])
        queue = cl.CommandQueue(ctx)
        prg = cl.Program(ctx, PROBE_SOURCE).build()
        x = np.arange(4, dtype=np.float32)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
        prg.probe(queue, (4,), None, buf)
        cl.enqueue_copy(queue, x, buf)
        queue.finish()
        if not np.array_equal(x, np.arange(4, dtype=np.float32) * 2):
            c.error = f"the probe kernel computed {x.tolist()}, not [0, 2, 4, 6]"
            return c
    except Exception as e:  # noqa: BLE001  (a driver that cannot compile: unknown CPU, no linker, ...)
        c.error = short_reason(e)
        return c
    _devices[c.index] = Device(cl, d, ctx, queue, c.label)
    return c


def candidates() -> list[Candidate]:
    """Every listed device, probed once per process, in preference order."""
    global _candidates
    with _devices_lock:
        if _candidates is None:
            cl = _import_cl()
            found = [_try(cl, f) for f in list_devices()]
            _candidates = sorted(found, key=lambda c: (c.rank, c.index))
        return list(_candidates)


def _preferred() -> Candidate:
    tried = candidates()
    working = [c for c in tried if c.ok]
    if not working:
        lines = "\n".join(c.line() for c in sorted(tried, key=lambda c: c.index))
        raise DeviceError(f"no OpenCL device builds and runs kernels; {INSTALL_HINT}\n{lines}")
    return working[0]


def _named(spec: str):
    found = list_devices()
    hits = _matches(spec, found)
    if not hits:
        known = "; ".join(_label(*f) for f in found)
        raise DeviceError(f"no OpenCL device matches '{spec}' (devices: {known})")
    return hits[0]


def select(spec: str = "") -> tuple[object, str]:
    """The device `spec` names ("P:D" or a name substring), or the preferred working one."""
    spec = (spec or "").strip()
    if not spec:
        c = _preferred()
        return c.device, c.label
    f = _named(spec)
    return f[3], _label(*f)


def open_device(spec: str = "") -> Device:
    """The process-wide Device for `spec` (created and probed once; contexts are expensive)."""
    spec = (spec or os.environ.get(ENV_DEVICE, "")).strip()
    if not spec:
        return _devices[_preferred().index]
    cl = _import_cl()
    with _devices_lock:
        c = _try(cl, _named(spec))
    if not c.ok:
        raise DeviceError(f"OpenCL device {c.line()}")
    return _devices[c.index]


def rejected() -> list[str]:
    """One line per probed device that cannot build or run kernels (after `probe()`)."""
    return [c.line() for c in sorted(_candidates or [], key=lambda c: c.index) if not c.ok]


_probe: Support | None = None


def probe() -> Support:
    """Available when an OpenCL device (the one ACELERA_GPU_OPENCL_DEVICE names, else any)
    builds and runs a tiny kernel; the reason names the device, then each rejected one."""
    global _probe
    if _probe is not None:
        return _probe
    try:
        d = open_device()
        others = [f"rejected {line}" for line in rejected()]
        _probe = Support(True, "\n".join([d.label, *others]))
    except DeviceError as e:
        _probe = Support(False, str(e))
    except Exception as e:  # noqa: BLE001  (never raise from a probe)
        _probe = Support(False, f"OpenCL device probe failed: {short_reason(e)}")
    return _probe
