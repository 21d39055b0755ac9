"""How `--help` reads: TFLite's type labels, escaped help text, option names never cut.

- Every option shows its value type as TFLite's tools print it (`bool`, `int32`, `int`,
  `float`, `string`), not click's `<list[str]>` or `<path>`.
- Help text is escaped for rich, so `[tool.acelera]` prints as written.
- Option names are never truncated: rich's help tables may only wrap the description column
  (`help_tables()`, used around the command's main() only: nothing changes process-wide).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from rich.markup import escape
from rich.table import Table

#: Python annotation -> the label TFLite's usage text uses (anything else: string)
LABELS: dict[object, str] = {bool: "bool", int: "int", float: "float"}


def _label(p: Any) -> str:
    if getattr(p, "is_flag", False):
        return "bool"
    ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
    return LABELS.get(ann, "string")


def tflite_style(cmd: Any) -> Any:
    """Relabel and escape every option of `cmd` and its subcommands (in place); returns it."""
    if cmd.help:
        cmd.help = escape(cmd.help)
    if hasattr(cmd, "get_help_option"):  # click makes --help lazily; make it now to label it too
        names = type("Ctx", (), {"help_option_names": ["--help"]})()
        opt = cmd.get_help_option(names)
        if opt is not None:
            opt.metavar = "bool"
    for p in cmd.params:
        if getattr(p, "param_type_name", "") == "argument":
            p.display_type_rich = lambda ctx, label=_label(p): label  # the type column only
        if getattr(p, "param_type_name", "") == "option":
            if getattr(p, "help", None):
                p.help = escape(p.help)
            p.metavar = p.metavar.lower() if p.metavar else _label(p)
    if isinstance(getattr(cmd, "commands", None), dict):  # a group (typer vendors click)
        for sub in cmd.commands.values():
            tflite_style(sub)
    return cmd


class _UncutTable(Table):
    """A help table whose every column but the last (the description) keeps its full width."""

    def __rich_console__(self, console, options):
        for column in self.columns[:-1]:
            column.no_wrap = True
            column.overflow = "ignore"
        if self.columns:
            last = self.columns[-1]
            last.overflow = "fold"  # a long word in a description folds, never "…"
            for cell in last._cells:
                for part in getattr(cell, "renderables", None) or [cell]:
                    if hasattr(part, "overflow"):
                        part.overflow = "fold"
        yield from super().__rich_console__(console, options)


@contextmanager
def help_tables() -> Iterator[None]:
    """While active, typer's rich help panels use tables that never cut option names."""
    from typer import rich_utils

    saved = rich_utils.Table
    rich_utils.Table = _UncutTable  # type: ignore[misc]  # a deliberate monkeypatch of typer's Table class
    try:
        yield
    finally:
        rich_utils.Table = saved  # type: ignore[misc]
