"""CPU reference kernels, one module per op family; see registry.py for the kernel contract."""
from acelera.core.kernels.registry import NodeContext, register

__all__ = ["NodeContext", "register"]
