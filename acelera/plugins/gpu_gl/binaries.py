"""Linked GL program binaries (GL_ARB_get_program_binary; core in GL 4.1 and ES 3.0) via ctypes.

moderngl has no glGetProgramBinary/glProgramBinary, so gpu-gl calls them, and the few calls a
program made from a binary needs (create, link status, use, dispatch, delete), through
function pointers from `eglGetProcAddress` of libEGL, the library moderngl's 'egl' backend
made the context with. Everything here must run on the GL thread (context.py).

A stored binary is 4 bytes of its GLenum format (little-endian) followed by the driver's
blob. A driver may offer no binary format at all (GL_NUM_PROGRAM_BINARY_FORMATS = 0: Mesa
does so when its shader cache is disabled); then nothing is stored. A binary the driver
refuses (GL_LINK_STATUS false, e.g. after a driver update) gives None, never an exception.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import struct
from typing import Any, Callable

GL_NUM_PROGRAM_BINARY_FORMATS = 0x87FE
GL_PROGRAM_BINARY_FORMATS = 0x87FF
GL_PROGRAM_BINARY_LENGTH = 0x8741
GL_LINK_STATUS = 0x8B82

_U, _I, _P = ctypes.c_uint, ctypes.c_int, ctypes.c_void_p
_SIGS = {  # name -> (restype, argtypes)
    "glGetError": (_U, ()),
    "glGetIntegerv": (None, (_U, ctypes.POINTER(_I))),
    "glGetProgramiv": (None, (_U, _U, ctypes.POINTER(_I))),
    "glGetProgramBinary": (None, (_U, _I, ctypes.POINTER(_I), ctypes.POINTER(_U), _P)),
    "glProgramBinary": (None, (_U, _U, _P, _I)),
    "glCreateProgram": (_U, ()),
    "glDeleteProgram": (None, (_U,)),
    "glUseProgram": (None, (_U,)),
    "glDispatchCompute": (None, (_U, _U, _U)),
}


class BinaryAPI:
    """The GL entry points above, resolved once on the GL thread; OSError when one is missing."""

    # set in __init__ from _SIGS (ctypes function pointers)
    glGetError: Callable[[], int]
    glGetIntegerv: Callable[[int, Any], None]
    glGetProgramiv: Callable[[int, int, Any], None]
    glGetProgramBinary: Callable[[int, int, Any, Any, Any], None]
    glProgramBinary: Callable[[int, int, bytes, int], None]
    glCreateProgram: Callable[[], int]
    glDeleteProgram: Callable[[int], None]
    glUseProgram: Callable[[int], None]
    glDispatchCompute: Callable[[int, int, int], None]

    def __init__(self, libegl: str | None = None):
        egl = ctypes.CDLL(libegl or ctypes.util.find_library("EGL") or "libEGL.so.1")
        gpa = egl.eglGetProcAddress
        gpa.restype, gpa.argtypes = _P, [ctypes.c_char_p]
        for name, (res, args) in _SIGS.items():
            addr = gpa(name.encode())
            if not addr:
                raise OSError(f"eglGetProcAddress('{name}') returned NULL")
            setattr(self, name, ctypes.CFUNCTYPE(res, *args)(addr))

    def _clear_errors(self) -> None:
        for _ in range(16):
            if self.glGetError() == 0:
                return

    def formats(self) -> tuple[int, ...]:
        """The binary formats the driver offers (empty: none)."""
        self._clear_errors()
        n = _I(0)
        self.glGetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, ctypes.byref(n))
        if self.glGetError() != 0 or n.value <= 0:
            return ()
        fmts = (_I * n.value)()
        self.glGetIntegerv(GL_PROGRAM_BINARY_FORMATS, fmts)
        return tuple(int(f) & 0xFFFFFFFF for f in fmts)

    def get(self, glo: int) -> bytes:
        """The linked program's binary (format prefix + blob), b"" when the driver gives none."""
        self._clear_errors()
        n = _I(0)
        self.glGetProgramiv(glo, GL_PROGRAM_BINARY_LENGTH, ctypes.byref(n))
        if self.glGetError() != 0 or n.value <= 0:
            return b""
        buf = ctypes.create_string_buffer(n.value)
        length, fmt = _I(0), _U(0)
        self.glGetProgramBinary(glo, n.value, ctypes.byref(length), ctypes.byref(fmt), buf)
        if self.glGetError() != 0 or length.value <= 0:
            return b""
        return struct.pack("<I", fmt.value) + buf.raw[:length.value]

    def load(self, blob: bytes, formats: tuple[int, ...]) -> "BinaryProgram | None":
        """A program linked from a stored binary, or None where the driver refuses it."""
        if len(blob) <= 4:
            return None
        fmt = struct.unpack_from("<I", blob)[0]
        if fmt not in formats:
            return None
        data = blob[4:]
        self._clear_errors()
        glo = int(self.glCreateProgram())
        if not glo:
            return None
        self.glProgramBinary(glo, fmt, data, len(data))
        status = _I(0)
        self.glGetProgramiv(glo, GL_LINK_STATUS, ctypes.byref(status))
        if self.glGetError() != 0 or not status.value:
            self.glDeleteProgram(glo)
            self._clear_errors()
            return None
        return BinaryProgram(self, glo)


class BinaryProgram:
    """A compute program loaded from a binary, with the parts of moderngl's ComputeShader that
    the runtime uses (`glo`, `run`, `release`)."""

    def __init__(self, api: BinaryAPI, glo: int):
        self._api = api
        self.glo = glo

    def run(self, group_x: int = 1, group_y: int = 1, group_z: int = 1) -> None:
        self._api.glUseProgram(self.glo)
        self._api.glDispatchCompute(group_x, group_y, group_z)

    def release(self) -> None:
        if self.glo:
            self._api.glDeleteProgram(self.glo)
            self.glo = 0
