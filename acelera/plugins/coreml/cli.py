"""`acelera coreml-export MODEL --out DIR`: the Core ML delegate's partitions as model packages."""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated

#: the registrar's shared flags the Core ML delegate reads (facts 1.3)
COMMON = ("max_delegated_partitions", "min_nodes_per_partition", "first_delegate_node_index",
          "last_delegate_node_index")


def add_export_command(app) -> None:
    """Register `coreml-export` on the acelera typer app (called from the register_commands hook)."""
    import typer

    from acelera.plugins.coreml import FLAGS
    from acelera.plugins.coreml.export import FORMATS, export_model
    from acelera.registrar.commands import make_command, parsed_from
    from acelera.registrar.flags import FlagSet
    from acelera.registrar.spec import COMMON_FLAGS

    flags = [f for f in FLAGS if f.name != "use_coreml"] + [f for f in COMMON_FLAGS if f.name in COMMON]
    flagset = FlagSet(flags)

    def export(ctx, raw, model, out, fmt):
        options = parsed_from(ctx, raw, flagset).options()
        if fmt not in FORMATS:
            raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}")
        paths = export_model(model, out, options, fmt)
        for p in paths:
            print(p)
        print(f"{len(paths)} Core ML partition(s) of {model} written to {out} (see {Path(out) / 'manifest.json'})")

    def param(name, annotation, default=inspect.Parameter.empty):
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)

    app.command("coreml-export", help="Write each partition the Core ML delegate takes from MODEL as a Core ML "
                "model package (needs coremltools: pip install 'acelera\\[coreml]').")(
        make_command("coreml-export", "", export, flags, [
            param("model", Annotated[Path, typer.Argument(help="the .tflite model")]),
            param("out", Annotated[Path, typer.Option("--out", help="directory for the packages and manifest.json")]),
            param("fmt", Annotated[str, typer.Option("--format", help="mlprogram (.mlpackage, default) or "
                                                     "neuralnetwork (.mlmodel, Core ML 3)")], "mlprogram"),
        ]))
