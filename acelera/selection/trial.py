"""The rows of `acelera select`'s table: a `Configuration` to try, its `Trial` (status, accuracy,
latency, placement), the statuses and the settings every step shares.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from acelera.core.errors import AceleraError

#: the delegate stacked under an accelerator to take the nodes it leaves
LEFTOVER_DELEGATE = "xnnpack-cpu"
#: the precision flag whose two values are tried (the GPU delegates')
PRECISION_FLAG = "gpu_precision_loss_allowed"
DEFAULT_TIME_BUDGET = 60.0
DEFAULT_ACCURACY_RUNS = 3
#: loosest last: a stack is judged by the loosest precision among the delegates that took nodes
LOOSENESS = ("exact", "float32", "integer", "float16", "float-view", "optimized")
MAX_WARNINGS = 5

PASS, FAIL, ERROR, SKIPPED, NOT_TRIED = "pass", "fail", "error", "skipped", "not tried"


class SelectionError(AceleraError):
    """select() cannot run: an unknown delegate, a bad budget or count."""


@dataclass
class Configuration:
    """One way to run the model: delegates in order and the flag values that build them."""

    label: str
    delegates: tuple[str, ...]
    #: flag name -> value, as `--config` reads them
    flags: dict[str, Any]
    phase: int = 1
    emulated: bool = False
    #: label of the configuration this stack extends (it runs only when that one left nodes)
    extends: str | None = None
    #: flags that only pick the delegate among those sharing its enabling flag (gpu_backend)
    selectors: tuple[str, ...] = ()


@dataclass
class Trial:
    """A configuration's row of the table."""

    config: Configuration
    status: str = NOT_TRIED
    reason: str = ""
    backends: tuple[str, ...] = ()
    precision: str | None = None
    tolerance: dict[str, Any] | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    latency: dict[str, Any] | None = None
    init_ms: float | None = None
    #: init from a filled serialization cache (None: not tried or not used by the delegates)
    init_ms_serialized: float | None = None
    serialization: str = ""
    #: total nodes; per delegate (name, nodes taken, partitions); nodes left on the CPU
    nodes: int = 0
    placement: list[tuple[str, int, int]] = field(default_factory=list)
    cpu_nodes: int = 0
    #: constant nodes evaluated once at allocate_tensors() (fp16 weight DEQUANTIZE) no delegate took
    folded: int = 0
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rank: int | None = None

    @property
    def median_us(self) -> float:
        return float(self.latency["median_us"]) if self.latency else math.inf

    def where(self) -> str:
        """'gpu-opencl 7/7 nodes', 'coreml 6/7 nodes in 2 partitions; CPU 1/7'."""
        if self.status in (SKIPPED, NOT_TRIED) or not self.nodes:
            return ""
        parts = [f"{n} {k}/{self.nodes} nodes" + (f" in {p} partitions" if p > 1 else "")
                 for n, k, p in self.placement]
        if self.cpu_nodes or not parts:
            parts.append(f"CPU {self.cpu_nodes}/{self.nodes}")
        if self.folded:
            parts.append(f"{self.folded} constant-folded")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        c = self.config
        return {
            "rank": self.rank, "label": c.label, "delegates": list(c.delegates), "flags": dict(c.flags),
            "status": self.status, "reason": self.reason, "emulated": c.emulated, "backends": list(self.backends),
            "precision": self.precision, "tolerance": self.tolerance, "outputs": self.outputs,
            "latency_us": self.latency, "init_ms": self.init_ms, "init_ms_serialized": self.init_ms_serialized,
            "serialization": self.serialization,
            "delegation": {"nodes": self.nodes, "cpu_nodes": self.cpu_nodes, "folded_nodes": self.folded,
                           "delegates": [{"name": n, "nodes": k, "partitions": p} for n, k, p in self.placement]},
            "where": self.where(), "warnings": self.warnings, "seconds": round(self.seconds, 3),
        }
