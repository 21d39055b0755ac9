"""The GPU kernels, one module per op family, each kernel in OpenCL C and GLSL side by side.

A family module lists its kernels as `common.Kernel(name, opencl, glsl)` pairs in `KERNELS`;
`FAMILIES` below is the order of gpu-opencl's program. The per-language programs are
assembled from them: `opencl.program_source()` (one program, every kernel) and
`glsl.shader_source(kernel, half)` (one compute shader per kernel). Both start with
`params.preamble()`: the parameter-block slots and op codes as named constants, the only way
the kernels refer to them.
"""
from __future__ import annotations

from acelera.backends.gpu.kernels import conv, copies, elementwise, lstm, reduce, spatial
from acelera.backends.gpu.kernels.common import Kernel

FAMILIES = (elementwise, lstm, copies, spatial, reduce, conv)


def all_kernels() -> tuple[Kernel, ...]:
    """Every kernel, in program order (names are unique)."""
    out = tuple(k for family in FAMILIES for k in family.KERNELS)
    names = [k.name for k in out]
    if len(set(names)) != len(names):
        raise RuntimeError(f"GPU kernel names are not unique: {sorted(names)}")
    return out


KERNELS: dict[str, Kernel] = {k.name: k for k in all_kernels()}
