"""hexagon: Qualcomm Hexagon DSP delegate support rules with emulated execution (issue #8).

- rules.py: which nodes the real delegate takes (utils.cc, README; facts §6.3)
- delegate.py: partition limits (4 partitions, capped at 16; 2 nodes) and the factory
- runner.py: the emulated DSP (integer arithmetic) and `--hexagon_profiling`
- cost_model.py: the documented cycle estimates behind the profile
"""
from __future__ import annotations

from dataclasses import dataclass

from acelera.core.delegate import Support
from acelera.plugins.hexagon.delegate import (
    DEFAULT_LIB_PATH,
    DEFAULT_MAX_PARTITIONS,
    DEFAULT_MIN_NODES,
    HexagonDelegate,
    cap_partitions,
    create,
)
from acelera.plugins.hexagon.rules import OP_TABLE
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

G = "Hexagon delegate (emulated)"
FLAGS = (
    Flag("use_hexagon", bool, False, "Enable the Hexagon DSP delegate (emulated on this host)", "hexagon", G),
    Flag("hexagon_lib_path", str, DEFAULT_LIB_PATH,
         "Accepted for command-line compatibility and UNUSED: the emulator loads no libhexagon_nn_skel libraries",
         "hexagon", G),
    Flag("hexagon_profiling", bool, False,
         "Print a per-op profile of each DSP graph from the emulator (cycles are cost-model estimates)",
         "hexagon", G),
)


@dataclass(frozen=True)
class HexagonSpec(DelegateSpec):
    """The spec, with TFLite's cap of 16 partitions applied to --max_delegated_partitions."""

    def partition_limits(self, options):
        mx, mn = super().partition_limits(options)
        return cap_partitions(mx), mn


def probe() -> Support:
    """The emulator runs wherever numpy does: always available."""
    return Support(True)


SPEC = HexagonSpec(
    name="hexagon", summary="Hexagon DSP delegate (emulated, quantized models only, integer arithmetic)",
    version="0.2.0", flags=FLAGS, enabled_by=("use_hexagon",), op_table=OP_TABLE,
    model_types=frozenset({"full-integer", "qat"}), backend="emulated",
    default_max_partitions=DEFAULT_MAX_PARTITIONS, default_min_nodes=DEFAULT_MIN_NODES,
    precision="integer", probe=probe, factory=create,
    notes="Support rules are TFLite's IsNodeSupportedByHexagon; execution is emulated in TFLite's integer "
          "arithmetic; --hexagon_lib_path is unused; --hexagon_profiling cycles are estimates.")


@hookimpl
def register_delegates(register):
    register(SPEC)


__all__ = ["SPEC", "FLAGS", "HexagonDelegate", "create", "probe"]
