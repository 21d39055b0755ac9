"""The op registry: builtin name (or custom code) -> KernelSpec with its max version.

A kernel family module registers prepare functions:

    @register("CONV_2D", max_version=6)
    def conv_2d(node: NodeContext) -> Kernel:
        ...                      # read shapes, options, constants; precompute
        def run(x, w, b):        # one argument per node input (None for absent optionals)
            return out           # one array, or a tuple for several outputs
        return run
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Union

import numpy as np

from acelera.core.errors import KernelError, UnsupportedOpError
from acelera.core.model import Operator, Tensor
from acelera.core.opcodes import CUSTOM

Kernel = Callable[..., Union[np.ndarray, tuple]]


_SHAPE_PASS = contextvars.ContextVar("acelera_shape_pass", default=False)


@contextmanager
def shape_pass() -> Iterator[None]:
    """Marks kernel calls made on placeholder (all-zero) inputs while tensors are allocated."""
    token = _SHAPE_PASS.set(True)
    try:
        yield
    finally:
        _SHAPE_PASS.reset(token)


def in_shape_pass() -> bool:
    """True inside allocate_tensors' shape pass: kernels must not fail on data values there
    (a zero divisor, say), only on real inputs, as LiteRT's invoke does."""
    return _SHAPE_PASS.get()


_WIDENING = contextvars.ContextVar("acelera_widening", default=False)


@contextmanager
def widening() -> Iterator[None]:
    """Marks kernel preparation for the float64 evaluation of a float graph (certification's
    numerical floor, conformance/float64.py): float kernels that can compute in float64 accept
    FLOAT64 wherever they accept FLOAT32 and compute in it; outside, FLOAT64 stays refused
    where LiteRT refuses it."""
    token = _WIDENING.set(True)
    try:
        yield
    finally:
        _WIDENING.reset(token)


def float_type_names() -> tuple[str, ...]:
    """The float type names a float32 kernel takes now: FLOAT32, plus FLOAT64 when widening."""
    return ("FLOAT32", "FLOAT64") if _WIDENING.get() else ("FLOAT32",)


def is_float32(t) -> bool:
    """True for a FLOAT32 tensor, or a FLOAT64 one while widening (a float kernel's float path)."""
    return t.type_name == "FLOAT32" or (t.type_name == "FLOAT64" and _WIDENING.get())


def check_divisor(y: np.ndarray, zero=0, what: str = "division by zero") -> None:
    """LiteRT's runtime divisor check (DIV, FLOOR_DIV, FLOOR_MOD): fail the invoke on a divisor
    equal to `zero` (the zero point of a quantized divisor), except in the shape pass."""
    if not _SHAPE_PASS.get() and np.any(np.asarray(y) == zero):
        raise KernelError(what)


@dataclass(frozen=True)
class NodeContext:
    """What a kernel's prepare function sees: the node, its tensors with current shapes, and
    (for control flow, variables and hashtables) the model-wide runtime it runs in."""

    index: int
    op: Operator
    inputs: tuple[Tensor | None, ...]
    outputs: tuple[Tensor, ...]
    runtime: Any = None  # executor.ModelRuntime: subgraphs and resources of the whole model

    @property
    def options(self) -> Mapping[str, Any]:
        return self.op.options

    @property
    def version(self) -> int:
        return self.op.version

    def input(self, i: int) -> Tensor | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def const(self, i: int) -> np.ndarray | None:
        t = self.input(i)
        return None if t is None else t.data

    def unsupported(self, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.op.name}: {what}")


PrepareFn = Callable[[NodeContext], Kernel]


@dataclass(frozen=True)
class KernelSpec:
    op: str
    max_version: int
    prepare: PrepareFn
    dtypes: tuple[str, ...] = ()  # TFLite type names of the main input this kernel accepts


_REGISTRY: dict[str, KernelSpec] = {}


def register(op: str, max_version: int = 1, dtypes: tuple[str, ...] = ()) -> Callable[[PrepareFn], PrepareFn]:
    """Register `prepare` as the reference kernel of builtin op (or custom code) `op`;
    `dtypes` names the TFLite types of its main input it accepts (for the coverage table)."""
    def deco(fn: PrepareFn) -> PrepareFn:
        if op in _REGISTRY:
            raise ValueError(f"kernel for {op} registered twice")
        _REGISTRY[op] = KernelSpec(op, max_version, fn, tuple(dtypes))
        return fn
    return deco


def lookup(op: Operator) -> KernelSpec:
    """The kernel for an operator, or UnsupportedOpError saying why there is none."""
    _load_families()
    key = op.custom_code if op.op == CUSTOM else op.op
    spec = _REGISTRY.get(key) if key is not None else None
    if spec is None:
        if _broken:
            broken = "; ".join(f"kernel module '{m}' failed to import: {e}" for m, e in _broken.items())
            raise UnsupportedOpError(f"{key} is not supported ({broken})")
        if op.op == CUSTOM:
            raise UnsupportedOpError(f"custom op '{op.custom_code}' is not supported")
        raise UnsupportedOpError(f"{op.op} is not supported")
    if op.version > spec.max_version:
        raise UnsupportedOpError(f"{key} version {op.version} is not supported (max {spec.max_version})")
    return spec


def registered() -> dict[str, KernelSpec]:
    """Every registered kernel, by op name."""
    _load_families()
    return dict(_REGISTRY)


_loaded = False
_broken: dict[str, str] = {}


def _load_families() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import importlib
        import pkgutil

        import acelera.core.kernels as pkg

        for mod in pkgutil.iter_modules(pkg.__path__):
            if mod.name not in ("registry", "common"):
                try:
                    importlib.import_module(f"{pkg.__name__}.{mod.name}")
                except Exception as e:  # one broken family must not take down the others
                    _broken[mod.name] = f"{type(e).__name__}: {e}"
