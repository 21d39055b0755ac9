"""The headless GL context of gpu-gl, and the one thread that may use it.

A GL context is current on the thread that made it. gpu-gl makes one context per process on
a dedicated worker thread ("acelera-gl") and runs every GL call there: `GLDevice.call(fn)`
runs `fn` on that thread (directly when already on it) and waits for its result, so a kernel
prepared on one thread can be invoked from any other. Calls are serialized; a call that does
not finish within `CALL_TIMEOUT_S` raises `GLError` rather than hanging.

Programs are built once per process, kernel and storage precision: from source (moderngl),
or from a stored program binary (binaries.py) when the serialization cache has one.
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
import hashlib
import threading

from acelera.backends.gpu.kernels.glsl import KERNELS, VERSION_DESKTOP, VERSION_ES, shader_source
from acelera.core.delegate import Support
from acelera.core.errors import AceleraError

CALL_TIMEOUT_S = 300.0


class GLError(AceleraError):
    """The GL context cannot be made or used."""


class GLDevice:
    def __init__(self):
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="acelera-gl")
        self._thread: threading.Thread | None = None
        self.ctx = None
        self.version_line = VERSION_ES
        self.programs: dict = {}
        #: (kernel, half) -> "source" | "binary": how each program of `programs` was made
        self.program_origin: dict = {}
        self.label = ""
        self.binary_api = None
        #: the program binary formats the driver offers (GL_PROGRAM_BINARY_FORMATS); empty: none
        self.binary_formats: tuple[int, ...] = ()
        #: why there are no binary formats ("" when there are)
        self.binary_note = ""
        self._digest = ""
        self._identity: dict = {}
        #: work posted by finalizers (post), run on the GL thread before the next call
        self._posted: collections.deque = collections.deque()
        self.call(self._open)

    def _open(self) -> None:
        import moderngl

        self._thread = threading.current_thread()
        # moderngl-stubs type each **settings value as dict[str, Any]; backend is a str
        self.ctx = moderngl.create_standalone_context(backend="egl", require=430)  # type: ignore[arg-type]
        info = self.ctx.info
        self.label = f"{info.get('GL_RENDERER', '?')}, {info.get('GL_VERSION', '?')}"
        self._identity = {k: str(info.get(k, "")) for k in ("GL_VENDOR", "GL_RENDERER", "GL_VERSION")}
        try:
            self.ctx.compute_shader(shader_source("unary", True, VERSION_ES))
        except Exception:
            # a desktop driver without ES 3.1 shading language: same bodies, desktop version line
            self.version_line = VERSION_DESKTOP
        try:
            from acelera.plugins.gpu_gl.binaries import BinaryAPI

            self.binary_api = BinaryAPI()
            self.binary_formats = self.binary_api.formats()
            if not self.binary_formats:
                mesa = " (Mesa offers none while its shader cache is disabled)" if "Mesa" in self.label else ""
                self.binary_note = f"GL_NUM_PROGRAM_BINARY_FORMATS is 0{mesa}"
        except Exception as e:  # noqa: BLE001  (no binaries is not an error)
            self.binary_api, self.binary_formats = None, ()
            self.binary_note = f"glGetProgramBinary/glProgramBinary unavailable ({type(e).__name__}: {e})"

    def call(self, fn, *args, **kw):
        if threading.current_thread() is self._thread:
            return fn(*args, **kw)
        fut = self._pool.submit(self._task, fn, args, kw)
        try:
            return fut.result(timeout=CALL_TIMEOUT_S)
        except cf.TimeoutError:
            raise GLError(f"gpu-gl: a GL call did not finish within {CALL_TIMEOUT_S:.0f} s") from None

    def post(self, fn) -> None:
        """Have `fn` run on the GL thread before the next GL call, without waiting. For
        finalizers: the garbage collector may run them on any thread, inside any call, even
        one holding the pool's own lock, so this takes no lock (a deque append)."""
        self._posted.append(fn)

    def _run_posted(self) -> None:
        while self._posted:
            try:
                self._posted.popleft()()
            except Exception:  # noqa: BLE001  (freeing a dropped kernel's objects never fails a call)
                pass

    def _task(self, fn, args, kw):
        self._run_posted()
        return fn(*args, **kw)

    def identity(self) -> dict:
        """The device and driver strings (read on the GL thread when the context was made)."""
        return dict(self._identity)

    def source_digest(self) -> str:
        """sha256 of every shader source this device compiles (part of the cache key)."""
        if not self._digest:
            h = hashlib.sha256(self.version_line.encode())
            for k in sorted(KERNELS):
                for half in (False, True):
                    h.update(shader_source(k, half, self.version_line).encode())
            self._digest = h.hexdigest()
        return self._digest

    def program(self, kernel: str, half: bool):
        """The compute shader of `kernel` (compiled once per process and storage precision).
        Must run on the GL thread."""
        key = (kernel, half)
        prg = self.programs.get(key)
        if prg is None:
            prg = self.ctx.compute_shader(shader_source(kernel, half, self.version_line))
            self.programs[key] = prg
            self.program_origin[key] = "source"
        return prg

    def load_programs(self, half: bool, blobs: dict[str, bytes]) -> list[str]:
        """Make the programs not built yet from stored binaries; the names the driver refused
        (they are compiled from source when first used). Must run on the GL thread."""
        refused = []
        for name, blob in sorted(blobs.items()):
            key = (name, half)
            if key in self.programs or name not in KERNELS:
                continue
            prg = None
            if self.binary_api is not None and self.binary_formats:
                try:
                    prg = self.binary_api.load(blob, self.binary_formats)
                except Exception:  # noqa: BLE001  (a bad binary is rebuilt, never fatal)
                    prg = None
            if prg is None:
                refused.append(name)
            else:
                self.programs[key] = prg
                self.program_origin[key] = "binary"
        return refused

    def program_binaries(self, names, half: bool) -> dict[str, bytes]:
        """The linked binaries of these kernels' programs (built now if needed); those the
        driver does not give are left out. Must run on the GL thread."""
        out: dict[str, bytes] = {}
        if self.binary_api is None or not self.binary_formats:
            return out
        for name in names:
            try:
                blob = self.binary_api.get(self.program(name, half).glo)
            except Exception:  # noqa: BLE001
                blob = b""
            if blob:
                out[name] = blob
        return out


_device: GLDevice | None = None
_error: str | None = None
_lock = threading.Lock()


def open_device() -> GLDevice:
    """The process's GL device (made on first use); GLError with the reason when there is none."""
    global _device, _error
    with _lock:
        if _device is not None:
            return _device
        if _error is not None:
            raise GLError(_error)
        try:
            import moderngl  # noqa: F401
        except Exception as e:  # noqa: BLE001
            _error = f"moderngl is not installed ({e}); pip install moderngl"
            raise GLError(_error) from None
        try:
            dev = GLDevice()
            dev.call(_smoke, dev)
        except Exception as e:  # noqa: BLE001
            _error = f"no headless OpenGL 4.3 / ES 3.1 context through EGL: {type(e).__name__}: {e}".strip()
            raise GLError(_error) from None
        _device = dev
        return dev


def _smoke(dev: GLDevice) -> None:
    """Compile and run a tiny compute shader (the unary kernel: RELU on 4 values)."""
    import numpy as np

    ctx = dev.ctx
    prg = dev.program("unary", False)
    p = np.zeros(64, np.int32)
    p[0] = p[3] = -1
    p[10], p[11], p[12], p[16], p[17] = 1, 4, 1, 1, 0
    p[18] = np.array([0.0], np.float32).view(np.int32)[0]
    p[19] = np.array([np.inf], np.float32).view(np.int32)[0]
    a = ctx.buffer(np.array([-1, 2, -3, 4], np.float32).tobytes())
    d = ctx.buffer(reserve=16)
    u = ctx.buffer(p.tobytes())
    for i, b in enumerate((a, a, a, d)):
        b.bind_to_storage_buffer(i)
    u.bind_to_uniform_block(0)
    prg.run(1)
    got = np.frombuffer(d.read(), np.float32)
    for b in (a, d, u):
        b.release()
    if not np.array_equal(got, [0, 2, 0, 4]):
        raise GLError(f"the smoke-test compute shader computed {got.tolist()}, not [0, 2, 0, 4]")


def probe() -> Support:
    try:
        open_device()
    except GLError as e:
        return Support(False, str(e))
    except Exception as e:  # noqa: BLE001  (never raise from a probe)
        return Support(False, f"{type(e).__name__}: {e}")
    return Support(True)
