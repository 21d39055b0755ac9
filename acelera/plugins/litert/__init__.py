"""litert: native TFLite delegates (.so) hosted through LiteRT (issue #17).

Two delegates:

* `litert-external` (`--external_delegate_path=lib.so --external_delegate_options='k1:v1;k2:v2'`,
  TFLite's flags): a library with TFLite's external delegate ABI
  (`tflite_plugin_create_delegate` / `tflite_plugin_destroy_delegate`), loaded by
  ai_edge_litert's `load_delegate`. `acelera.load_delegate("/path/lib.so", options)` and
  `wrap_litert_delegate(ai_edge_litert Delegate)` give the same delegate.
* `litert-xnnpack` (`--use_litert_xnnpack`): partitions run on the XNNPACK built into LiteRT,
  to compare acelera's `xnnpack-cpu` with the real XNNPACK in one benchmark, inference-diff or
  conformance run.

Each partition is written as a standalone .tflite and run by a LiteRT interpreter with the
native delegate applied; what the delegate really takes is read back from LiteRT node by node
(host.py), so nodes it leaves to LiteRT's CPU kernels are reported as not delegated, with the
reason. `build_example_delegate(dir)` compiles the project's own example native delegate
(float32 ADD/MUL in C, native/). Needs the `litert` extra (`pip install acelera[litert]`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, TypedDict

from acelera.core.delegate import Support
from acelera.plugins.litert.build import build_example_delegate
from acelera.plugins.litert.host import native_table, parse_options
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

if TYPE_CHECKING:
    from typing import Unpack

__all__ = ["wrap_litert_delegate", "load_native_delegate", "build_example_delegate", "EXTERNAL", "XNNPACK"]

EXTERNAL = "litert-external"
XNNPACK = "litert-xnnpack"
INSTALL_HINT = "pip install 'acelera[litert]'"
MISSING_PATH = "no native delegate library given (--external_delegate_path=lib.so)"

G_EXT = "External delegate (.so through LiteRT)"
G_XNN = "LiteRT's XNNPACK"
FLAGS_EXTERNAL = (
    Flag("external_delegate_path", str, "",
         "Library of a native TFLite delegate (TFLite's external delegate ABI), run through LiteRT", EXTERNAL, G_EXT),
    Flag("external_delegate_options", str, "",
         "Options for the external delegate: 'key1:value1;key2:value2'", EXTERNAL, G_EXT),
)
FLAGS_XNNPACK = (
    Flag("use_litert_xnnpack", bool, False,
         "Run partitions on the XNNPACK built into LiteRT (compare with acelera's xnnpack-cpu)", XNNPACK, G_XNN),
)
ALL_MODEL_TYPES = frozenset({"float32", "float16", "dynamic-range", "full-integer", "qat"})
PRECISION = {"float": "float32", "integer": "integer"}


def probe() -> Support:
    """Available wherever ai_edge_litert (the `litert` extra) imports."""
    try:
        from ai_edge_litert import interpreter  # noqa: F401
    except Exception as e:
        return Support(False, f"ai-edge-litert is not importable ({type(e).__name__}: {e}); {INSTALL_HINT}")
    return Support(True)


def _threads(options: Mapping[str, Any]) -> int | None:
    n = int(options.get("num_threads", -1) or -1)
    return n if n > 0 else None


def create_external(options: Mapping[str, Any]):
    """The litert-external delegate for the library in `external_delegate_path` (none: a
    delegate that takes nothing and says why)."""
    from acelera.plugins.litert.host import LiteRTHostDelegate, NativeLibrary
    from acelera.registrar.registry import DelegateLoadError

    path = str(options.get("external_delegate_path") or "")
    source = None
    if path:
        try:
            native_options = parse_options(options.get("external_delegate_options") or "")
        except ValueError as e:
            raise DelegateLoadError(f"Failed to load delegate from {path}: {e}") from None
        source = NativeLibrary(path, native_options)
    return LiteRTHostDelegate(EXTERNAL, source, "hardware", _threads(options), missing=MISSING_PATH)


def create_xnnpack(options: Mapping[str, Any]):
    from acelera.plugins.litert.host import BuiltinXnnpack, LiteRTHostDelegate

    return LiteRTHostDelegate(XNNPACK, BuiltinXnnpack(), "cpu", _threads(options))


class NativeLimits(TypedDict, total=False):
    """The limits `load_native_delegate` passes on to the delegate."""

    num_threads: int | None
    max_delegated_partitions: int
    min_nodes_per_partition: int


def load_native_delegate(path: str, options: Mapping[str, Any] | None = None, **limits: Unpack[NativeLimits]):
    """A litert-external delegate for library `path` with its own options (LiteRT's
    load_delegate(path, options)); ValueError (DelegateLoadError) naming the path if it cannot load."""
    from acelera.plugins.litert.host import LiteRTHostDelegate, NativeLibrary
    from acelera.registrar.registry import DelegateLoadError

    avail = probe()
    if not avail.ok:
        raise DelegateLoadError(f"Failed to load delegate from {path}: the litert plugin is unavailable: "
                                f"{avail.reason}")
    return LiteRTHostDelegate(EXTERNAL, NativeLibrary(str(path), parse_options(options)), "hardware", **limits)


def wrap_litert_delegate(obj: Any):
    """An acelera Delegate running the partitions it takes through LiteRT with `obj`, an
    `ai_edge_litert.interpreter.Delegate` (from LiteRT's load_delegate)."""
    from acelera.plugins.litert.host import LiteRTHostDelegate, WrappedDelegate

    if not hasattr(obj, "_get_native_delegate_pointer"):
        raise TypeError(f"wrap_litert_delegate takes an ai_edge_litert Delegate, got {type(obj).__name__}")
    return LiteRTHostDelegate(EXTERNAL, WrappedDelegate(obj), "hardware")


NOTES = ("Ops: whatever the native library takes, asked of LiteRT node by node (the table below is empty; "
         "`acelera analyze` shows each node's answer and `acelera conformance` builds the declaration from it). "
         "Partitions run in LiteRT with the delegate applied; nodes it leaves to LiteRT's CPU kernels are "
         "reported as not delegated.")

SPEC_EXTERNAL = DelegateSpec(
    name=EXTERNAL, summary="A native TFLite delegate library (.so) hosted through LiteRT", version="0.1.0",
    flags=FLAGS_EXTERNAL, enabled_by=("external_delegate_path",), op_table=native_table(EXTERNAL),
    model_types=ALL_MODEL_TYPES, backend="hardware", probe=probe, factory=create_external, precision=PRECISION,
    fp16_weights_aware=True, notes=NOTES)

SPEC_XNNPACK = DelegateSpec(
    name=XNNPACK, summary="LiteRT's built-in XNNPACK, to compare with acelera's xnnpack-cpu", version="0.1.0",
    flags=FLAGS_XNNPACK, enabled_by=("use_litert_xnnpack",), op_table=native_table(XNNPACK),
    model_types=ALL_MODEL_TYPES, backend="cpu", probe=probe, factory=create_xnnpack,
    precision={"float": "float32", "integer": "optimized"},
    fp16_weights_aware=True, notes=NOTES.replace("the native library", "LiteRT's XNNPACK"))


@hookimpl
def register_delegates(register):
    register(SPEC_EXTERNAL)
    register(SPEC_XNNPACK)
