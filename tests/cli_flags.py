"""Flags parsed the way the `acelera` command line parses them (no tests here).

`parse_cli(flagset, argv)` runs argv through the user's path: acelera's root group
(AceleraGroup) normalizes it, click parses the options that make_command declared, and
parsed_from reads their values back. Usage errors propagate as click raises them (their
`format_message()` is what `acelera` prints), bad values as FlagError/FlagValueError.
"""
from __future__ import annotations

from typing import Any, Sequence

import typer

from acelera.cli.options import AceleraGroup
from acelera.registrar.commands import make_command, parsed_from
from acelera.registrar.flags import FlagSet, ParsedFlags

#: click's UsageError (unknown option, missing value), as typer vendors it
UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def parse_cli(flagset: FlagSet, argv: Sequence[str]) -> ParsedFlags:
    got: dict[str, ParsedFlags] = {}

    def impl(ctx: typer.Context, raw: dict[str, Any]) -> None:
        got["parsed"] = parsed_from(ctx, raw, flagset)

    app = typer.Typer(cls=AceleraGroup, add_completion=False)
    app.command("tool")(make_command("tool", "", impl, flagset.flags.values()))
    app.command("other")(lambda: None)  # two commands: a group, like acelera's root
    typer.main.get_command(app).main(args=["tool", *argv], prog_name="acelera", standalone_mode=False)
    return got["parsed"]
