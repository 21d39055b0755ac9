"""HexagonDelegate: the real delegate's partition limits, its support rules, an emulated DSP."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping

from acelera.backends.emulation import EmulatedDelegate
from acelera.plugins.hexagon.rules import OP_TABLE
from acelera.plugins.hexagon.runner import HexagonRunner

# hexagon_delegate.cc: kMaxHexagonGraphs, kMaxMaxHexagonGraphs, kMinNodesPerHexagonGraph
DEFAULT_MAX_PARTITIONS = 4
MAX_PARTITIONS_CAP = 16
DEFAULT_MIN_NODES = 2
DEFAULT_LIB_PATH = "/data/local/tmp"


class HexagonPartitionWarning(UserWarning):
    """More than 16 partitions were asked for; the Hexagon delegate caps them at 16."""


def cap_partitions(n: int) -> int:
    return min(n, MAX_PARTITIONS_CAP)


def partition_limits(max_partitions: int, min_nodes: int) -> tuple[int, int]:
    """TFLite's HexagonDelegate constructor: <=0 -> 4 partitions (more than 16 -> 16); <=0 -> 2 nodes."""
    mx = DEFAULT_MAX_PARTITIONS if max_partitions <= 0 else cap_partitions(max_partitions)
    mn = DEFAULT_MIN_NODES if min_nodes <= 0 else min_nodes
    return mx, mn


class HexagonDelegate(EmulatedDelegate):
    """Takes what IsNodeSupportedByHexagon takes; runs each partition as an emulated DSP graph.

    `hexagon_lib_path` is accepted for command-line compatibility and ignored: the emulator
    loads no Hexagon libraries.
    """

    name = "hexagon"
    precision = "integer"
    runner: HexagonRunner

    def __init__(self, hexagon_profiling: bool = False, hexagon_lib_path: str = DEFAULT_LIB_PATH,
                 max_delegated_partitions: int = 0, min_nodes_per_partition: int = 0,
                 profile_emit: Callable[[str], None] | None = None):
        if max_delegated_partitions > MAX_PARTITIONS_CAP:
            warnings.warn(f"Hexagon delegate: cannot have this many {max_delegated_partitions} partitions, "
                          f"and will cap to at most {MAX_PARTITIONS_CAP} partitions.",
                          HexagonPartitionWarning, stacklevel=2)
        if hexagon_lib_path != DEFAULT_LIB_PATH:
            warnings.warn(f"--hexagon_lib_path={hexagon_lib_path} is ignored: the emulated Hexagon delegate "
                          f"loads no DSP libraries", UserWarning, stacklevel=2)
        super().__init__(HexagonRunner(hexagon_profiling, profile_emit),
                         max_delegated_partitions=max_delegated_partitions,
                         min_nodes_per_partition=min_nodes_per_partition)
        self.op_table = OP_TABLE
        self.profiling = hexagon_profiling
        self.lib_path = hexagon_lib_path

    def partition_limits(self) -> tuple[int, int]:
        return partition_limits(self.max_delegated_partitions, self.min_nodes_per_partition)

    def profile_text(self) -> str:
        """The profile of every partition prepared so far (empty without --hexagon_profiling)."""
        return self.runner.profile_text() if self.profiling else ""

    def describe(self) -> str:
        return f"{self.name}: {self.runner.describe()}; hexagon_lib_path unused"


def create(options: Mapping[str, Any]) -> HexagonDelegate:
    """The plugin factory: options keyed by flag name (TFLite's Hexagon provider)."""
    return HexagonDelegate(
        hexagon_profiling=bool(options.get("hexagon_profiling", False)),
        hexagon_lib_path=str(options.get("hexagon_lib_path", DEFAULT_LIB_PATH)),
        max_delegated_partitions=int(options.get("max_delegated_partitions", 0) or 0),
        min_nodes_per_partition=int(options.get("min_nodes_per_partition", 0) or 0))
