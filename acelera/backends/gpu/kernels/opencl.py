"""gpu-opencl's program: the preamble (params), the common header, then every kernel of every
family (`kernels.KERNELS`), built once per device and storage precision."""
from __future__ import annotations

from acelera.backends.gpu.kernels import KERNELS
from acelera.backends.gpu.kernels.common import OPENCL_HEADER
from acelera.backends.gpu.params import preamble


def program_source() -> str:
    """The whole program: every kernel the partition compiler may launch."""
    return preamble() + OPENCL_HEADER + "".join(k.opencl for k in KERNELS.values())


def build_options(half_storage: bool) -> str:
    return "-DHALF_STORAGE" if half_storage else ""
