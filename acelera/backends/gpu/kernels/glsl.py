"""gpu-gl's GLSL ES 3.1 compute shaders, one per kernel name (`kernels.KERNELS`).

A shader is the version line, the preamble (params), the common header, the loads of a, b, c
and the store of dst for the storage precision, then the kernel's own text. The sources start
with ``#version 310 es``; the context swaps in ``#version 430`` where a desktop driver refuses
the ES line (the bodies are ES-compatible).
"""
from __future__ import annotations

from acelera.backends.gpu.kernels import KERNELS as _KERNELS
from acelera.backends.gpu.kernels.common import (
    GLSL_HEADER,
    GLSL_STORE,
    GLSL_STORE_FLOAT,
    GLSL_STORE_HALF,
    glsl_loads,
)
from acelera.backends.gpu.params import preamble

LOCAL_SIZE = 64  # layout(local_size_x = 64) in the header
P_WORDS = 64  # parameter block: ivec4[16]

VERSION_ES = "#version 310 es"
VERSION_DESKTOP = "#version 430"

#: kernel name -> its shader's own text
KERNELS: dict[str, str] = {name: k.glsl for name, k in _KERNELS.items()}


def shader_source(kernel: str, half: bool, version: str = VERSION_ES) -> str:
    """The whole compute shader of `kernel` for half or float32 storage."""
    body = KERNELS.get(kernel)
    if body is None:
        raise KeyError(f"gpu-gl has no shader '{kernel}'")
    loads = "".join(glsl_loads(buf, half) for buf in ("a", "b", "c"))
    return "\n".join([version, preamble(), GLSL_HEADER, loads, GLSL_STORE_HALF if half else GLSL_STORE_FLOAT,
                      GLSL_STORE, body])


def all_sources() -> str:
    """Every shader's text but the loads (part of the serialization key)."""
    return (preamble() + GLSL_HEADER + GLSL_STORE_HALF + GLSL_STORE_FLOAT + GLSL_STORE
            + "".join(KERNELS[k] for k in sorted(KERNELS)))
