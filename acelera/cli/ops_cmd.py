"""`acelera ops`: LiteRT's builtin and custom ops against acelera's CPU kernels.

`--markdown` prints docs/ops.md exactly (regenerate it with `acelera ops --markdown > docs/ops.md`).
"""
from __future__ import annotations

import json
from typing import Annotated

import typer

OPS_HELP = "LiteRT's ops against acelera's CPU kernels: versions, dtypes, what is missing (docs/ops.md)."

_STYLE = {"supported": "green", "partial": "yellow", "missing": "red"}


def ops_command(
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    missing: Annotated[bool, typer.Option("--missing", help="only the ops acelera lacks or covers partially")] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="print the docs/ops.md page")] = False,
) -> None:
    """Print the coverage table (rich), or JSON, or the Markdown page."""
    from acelera.core import litert_ops

    if markdown and (json_out or missing):
        raise typer.BadParameter("--markdown prints the whole docs/ops.md page; it takes no --json or --missing")
    if markdown:
        print(litert_ops.markdown(), end="")
        return
    rows = list(litert_ops.coverage())
    counts = litert_ops.summary(rows)
    shown = [r for r in rows if r.status != litert_ops.SUPPORTED] if missing else rows
    if json_out:
        print(json.dumps({"summary": counts, "ops": [r.to_dict() for r in shown],
                          "acelera_only": litert_ops.acelera_only()}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    table = Table("op", "LiteRT versions", "acelera max", "status", "missing",
                  title=f"{counts['pairs_supported']} of {counts['pairs']} LiteRT (op, version) pairs supported")
    for r in shown:
        name = f"{r.op} (custom)" if r.custom else r.op
        mx = "-" if r.acelera_max_version is None else str(r.acelera_max_version)
        table.add_row(name, r.litert_versions, mx, f"[{_STYLE[r.status]}]{r.status}[/]", r.missing)
    console.print(table)
    console.print(f"{counts['supported']} supported, {counts['partial']} partial, {counts['missing']} missing "
                  f"of {counts['ops']} ops")
