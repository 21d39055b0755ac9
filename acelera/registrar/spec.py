"""DelegateSpec: everything a plugin declares about one delegate."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from acelera.core.delegate import Delegate, OpTable, Support
from acelera.registrar.flags import INT32_MAX, Flag, FlagError

#: The model types of TFLite's delegates guide.
MODEL_TYPES = ("float32", "float16", "dynamic-range", "full-integer", "qat")
BACKENDS = ("hardware", "emulated", "cpu")
#: the most threads a thread flag may ask for (the BLAS pools clamp it to what they have)
MAX_THREADS = INT32_MAX

#: The registrar's own flags (TFLite's Default-NoDelegate provider), shared by every tool.
COMMON_FLAGS = (
    Flag("num_threads", int, -1, "CPU inference threads; -1 (or 0) = platform default",
         minimum=-1, maximum=MAX_THREADS),
    Flag("max_delegated_partitions", int, 0,
         "Cap on delegated partitions; <=0 = no tool-imposed limit (each delegate applies its own default)"),
    Flag("min_nodes_per_partition", int, 0, "Smallest partition worth delegating; <=0 = the delegate's default"),
    Flag("delegate_serialize_dir", str, "", "Directory where a delegate may cache compiled data (needs the token too)"),
    Flag("delegate_serialize_token", str, "", "Model-specific namespace key for the cache (needs the dir too)"),
    Flag("first_delegate_node_index", int, 0, "First node index eligible for delegation", minimum=0),
    Flag("last_delegate_node_index", int, INT32_MAX, "Last node index eligible for delegation", minimum=0),
)

Options = Mapping[str, Any]


@dataclass(frozen=True)
class DelegateSpec:
    """A delegate as a plugin declares it (see CONTRIBUTING.md, "Writing a delegate")."""

    name: str
    summary: str
    version: str
    flags: tuple[Flag, ...]
    enabled_by: tuple[str, ...]
    op_table: OpTable
    model_types: frozenset[str]
    backend: str
    probe: Callable[[], Support]
    factory: Callable[[Options], Delegate]
    #: extra condition on the effective options, e.g. the GPU backend flag picking CL or GL
    wants: Callable[[Options], bool] = field(default=lambda options: True)
    #: the name of a delegate this one replaces when that one is unavailable (GL for OpenCL)
    fallback_for: str | None = None
    #: what the delegate does with max_delegated_partitions / min_nodes_per_partition <= 0
    default_max_partitions: int = 0
    default_min_nodes: int = 0
    #: arithmetic the conformance suite judges it by: "float32", "float16", "integer"
    #: (at most one quantization step off), "float-view" (quantized models computed in float:
    #: one step per op, whole models against the float-view answer on its floor), "optimized"
    #: (LiteRT's optimized int8 kernels: tolerances.py) or "exact"; or a mapping
    #: {"float": ..., "integer": ...} by case kind (conformance/tolerances.py)
    precision: str | Mapping[str, str] = "float32"
    #: like FP16GraphPartitionHelper: constant fp16 DEQUANTIZE nodes join a fully delegated graph
    fp16_weights_aware: bool = False
    notes: str = ""

    def partition_limits(self, options: Options) -> tuple[int, int]:
        """(max partitions, min nodes) after applying this delegate's defaults; 0 = no limit."""
        mx = int(options.get("max_delegated_partitions", 0) or 0)
        mn = int(options.get("min_nodes_per_partition", 0) or 0)
        return (mx if mx > 0 else self.default_max_partitions, mn if mn > 0 else self.default_min_nodes)

    def validate(self) -> None:
        """Raise ValueError when the declaration itself is inconsistent."""
        if not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"invalid delegate name {self.name!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"{self.name}: backend must be one of {BACKENDS}, got {self.backend!r}")
        bad = set(self.model_types) - set(MODEL_TYPES)
        if bad:
            raise ValueError(f"{self.name}: unknown model types {sorted(bad)} (known: {MODEL_TYPES})")
        names = {f.name for f in self.flags} | {f.name for f in COMMON_FLAGS}
        for e in self.enabled_by:
            if e not in names:
                raise ValueError(f"{self.name}: enabling flag --{e} is not declared")
        if not isinstance(self.op_table, OpTable):
            raise ValueError(f"{self.name}: op_table must be an OpTable")
        for f in self.flags:
            if f.bounds() is None:
                continue
            if isinstance(f.default, bool) or not isinstance(f.default, (int, float)):
                raise ValueError(f"{self.name}: flag --{f.name} needs a numeric default, got {f.default!r}")
            try:
                f.check_range(f.default)
            except FlagError as e:
                raise ValueError(f"{self.name}: the default of {e}") from None
