"""coreml: Apple Core ML delegate support rules with emulated execution (issue #8).

- rules.py: which nodes the real delegate takes (coreml_delegate.mm and its builders; facts 6.4)
- device.py: options as TFLite resolves them, the delegate, and the emulated Neural Engine
  (float16 storage and results)
- export.py: each delegated partition written as a Core ML model package (needs coremltools:
  `pip install acelera[coreml]`); cli.py: the `acelera coreml-export` command
"""
from __future__ import annotations

from acelera.core.delegate import Support
from acelera.plugins.coreml.device import CoreMLDelegate, create, resolve_version
from acelera.plugins.coreml.rules import NEWEST_VERSION, op_table
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

G = "Core ML delegate (emulated)"
FLAGS = (
    Flag("use_coreml", bool, False, "Enable the Core ML delegate (uses all devices, not only the Neural Engine)",
         "coreml", G),
    Flag("coreml_version", int, 0,
         "Target Core ML version: 2 or 3; 0 = newest (3); other values warn and use 3. RESHAPE only below 3",
         "coreml", G),
    Flag("coreml_devices", str, "all",
         "Compute units: 'all' (CPU, GPU, Neural Engine) or 'neural_engine' only; both emulated in float16",
         "coreml", G, ("all", "neural_engine")),
)


def probe() -> Support:
    """Emulation runs anywhere numpy does; nothing on this host is an Apple device."""
    return Support(True)


NOTES = ("Float models only (float32, or float16 weights behind constant DEQUANTIZE nodes, taken as "
         "FP16GraphPartitionHelper does). Executed by an emulated Neural Engine: float16 weights, "
         "activations and results, also for --coreml_devices=all. Defaults: unlimited partitions, "
         "at least 2 nodes each. `acelera coreml-export MODEL --out DIR` writes the delegated "
         "partitions as Core ML model packages (needs coremltools).")

SPEC = DelegateSpec(
    name="coreml", summary="Core ML delegate (emulated Neural Engine, float models only)", version="0.2.0",
    flags=FLAGS, enabled_by=("use_coreml",), op_table=op_table(NEWEST_VERSION),
    model_types=frozenset({"float32", "float16"}), backend="emulated",
    probe=probe, factory=create, default_max_partitions=0, default_min_nodes=2,
    precision="float16", fp16_weights_aware=True, notes=NOTES)


@hookimpl
def register_delegates(register):
    register(SPEC)


@hookimpl
def register_commands(app):
    from acelera.plugins.coreml.cli import add_export_command

    add_export_command(app)


__all__ = ["SPEC", "FLAGS", "CoreMLDelegate", "create", "op_table", "resolve_version"]
