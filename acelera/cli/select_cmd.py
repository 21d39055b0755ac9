"""`acelera select MODEL`: which delegate configuration should this model use here?

The command around acelera.selection.select(): progress while it runs (rich, on stderr), the
ranked table (rich) or `--json`, the winner as a `--config` TOML file (`--out`) and as Python.
"""
from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

HELP = ("Which delegate configuration should MODEL use here? Tries them, checks accuracy, ranks by latency.\n\n"
        "Every applicable configuration (each delegate alone, precision and thread variants, accelerator + "
        "xnnpack-cpu stacks) is checked against the CPU reference with the inference_diff engine and the "
        "conformance tolerances, timed (warm latency, init), and the passing ones are ranked; --out writes the "
        "winner as a TOML file for any tool's --config, and the equivalent Python is printed.")

STATUS_STYLE = {"pass": "green", "fail": "red", "error": "red", "skipped": "dim", "not tried": "yellow"}


def register_select(app: typer.Typer, registry: Any) -> None:
    """Add the `select` command to the acelera app."""

    @app.command("select", help=HELP)
    def select(
            model: Annotated[Path, typer.Argument(help="the .tflite model")],
            time_budget: Annotated[float, typer.Option(
                "--time-budget", help="seconds; no configuration starts after they are spent (the rest are "
                                      "listed as not tried)")] = 60.0,
            out: Annotated[Path | None, typer.Option(
                "--out", help="write the winner here as a TOML file for any tool's --config")] = None,
            json_out: Annotated[bool, typer.Option("--json", help="print the whole table as JSON")] = False,
            delegate: Annotated[list[str] | None, typer.Option(
                "--delegate", help="only configurations made of these delegates (repeatable)")] = None,
            runs: Annotated[int, typer.Option("--runs", help="timed invokes per configuration (median)")] = 10,
            warmup: Annotated[int, typer.Option("--warmup", help="untimed invokes before them")] = 2,
            accuracy_runs: Annotated[int, typer.Option(
                "--accuracy-runs", help="inference_diff runs (random inputs) per configuration")] = 3,
            tolerances: Annotated[Path | None, typer.Option(
                "--tolerances", help="TOML file overriding the tolerances (as for `acelera conformance`)")] = None,
            allow_emulated: Annotated[bool, typer.Option(
                "--allow-emulated", help="let emulated delegates (nnapi, hexagon, coreml here) win; they are "
                                         "always tried and listed")] = False):
        raise typer.Exit(run(registry, model, time_budget=time_budget, out=out, json_out=json_out,
                             delegates=delegate, runs=runs, warmup=warmup, accuracy_runs=accuracy_runs,
                             tolerances=tolerances, allow_emulated=allow_emulated))


def _check_count(value: int, low: int, flag: str) -> None:
    if not low <= value <= 10_000:
        raise typer.BadParameter(f"{value} is out of range (allowed: [{low}, 10000])", param_hint=f"'{flag}'")


def run(registry: Any, model: Path, *, time_budget: float = 60.0, out: Path | None = None, json_out: bool = False,
        delegates: list[str] | None = None, runs: int = 10, warmup: int = 2, accuracy_runs: int = 3,
        tolerances: Path | None = None, allow_emulated: bool = False) -> int:
    from acelera.cli.options import check_path
    from acelera.conformance.tolerances import Tolerances
    from acelera.core.files import write_text_file
    from acelera.selection import select

    if not (math.isfinite(time_budget) and time_budget >= 0):
        raise typer.BadParameter(f"{time_budget} is not a number of seconds >= 0", param_hint="'--time-budget'")
    _check_count(runs, 1, "--runs")
    _check_count(warmup, 0, "--warmup")
    _check_count(accuracy_runs, 1, "--accuracy-runs")
    check_path(model, "model")
    if out is not None:
        check_path(out, "output", "out")
    if tolerances is not None:
        check_path(tolerances, "toml", "tolerances")
    tol = Tolerances.load(tolerances)
    for name in delegates or ():
        registry.spec(name)  # one line naming the installed delegates

    logger = logging.getLogger("acelera")
    level = logger.level
    logger.setLevel(logging.WARNING)  # delegates' INFO lines would interleave with the table
    try:
        with _Progress() as progress:
            sel = select(model, registry, time_budget=time_budget, runs=runs, warmup=warmup,
                         accuracy_runs=accuracy_runs, tolerances=tol, delegates=delegates,
                         allow_emulated=allow_emulated, progress=progress)
    finally:
        logger.setLevel(level)
    winner = sel.winner
    if out is not None and winner is not None:
        write_text_file(out, sel.to_toml(), "TOML file")
    if json_out:
        print(json.dumps(sel.to_json(), indent=2))
    else:
        print_report(sel, out)
    if winner is None:
        why = f" (time budget of {time_budget:g} s spent; raise --time-budget)" if sel.not_tried else ""
        print(f"error: no configuration passed{why}", file=sys.stderr)
        return 1
    return 0


class _Progress:
    """A rich progress bar on a terminal; one line per configuration on stderr otherwise."""

    def __enter__(self):
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.bar = None
        if self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.bar = Progress(TextColumn("select"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.description}"), TimeElapsedColumn(), console=self.console,
                                transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task("planning", total=None)
        return self

    def __call__(self, label: str, done: int, total: int, trial: Any) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total, description=label)
        elif trial is not None:
            lat = f", {trial.median_us:.1f} us" if trial.latency else ""
            print(f"select [{done}/{total}] {label}: {trial.status}{lat} ({trial.seconds:.1f} s)", file=sys.stderr)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False


def _cell(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None or not math.isfinite(x) else fmt.format(x)


def print_report(sel: Any, out: Path | None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from acelera.selection import NOT_TRIED, accuracy_text

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    t = Table(title=f"acelera select {escape(Path(sel.model).name)} ({sel.model_type} model, {sel.cores} core(s); "
                    f"latency: median of {sel.runs} after {sel.warmup} warm-up)", title_justify="left")
    columns: tuple[tuple[str, dict[str, Any]], ...] = (  # names, Table.add_column's keyword arguments
        ("#", {"justify": "right"}), ("configuration", {}), ("status", {}),
        ("latency us", {"justify": "right"}), ("init ms", {"justify": "right"}),
        ("cached", {"justify": "right"}), ("precision", {}), ("accuracy (worst output)", {}),
        ("ran where", {}), ("note", {"overflow": "fold"}))
    for col, kw in columns:
        t.add_column(col, **kw)
    order = {"pass": 0, "fail": 1, "error": 2, "skipped": 3, NOT_TRIED: 4}
    rest = sorted((x for x in sel.trials if x.rank is None), key=lambda x: order.get(x.status, 5))
    for x in sel.ranked + rest:
        c = x.config
        status = x.status + (" (emulated)" if c.emulated and x.status == "pass" else "")
        note = x.reason if x.status != "pass" else ""
        if x.status == "pass" and c.emulated and not sel.allow_emulated:
            note = "emulated here: may win only with --allow-emulated"
        if x.warnings:
            note = "; ".join(filter(None, [note, *x.warnings[:2]]))
        t.add_row(str(x.rank or ""), escape(c.label), f"[{STATUS_STYLE.get(x.status, '')}]{status}[/]",
                  _cell(x.median_us if x.latency else None), _cell(x.init_ms), _cell(x.init_ms_serialized),
                  x.precision or "", escape(accuracy_text(x)), escape(x.where()), escape(note))
    console.print(t)
    if sel.not_tried:
        print(f"Not tried (time budget of {sel.time_budget_s:g} s spent after {sel.elapsed_s:.1f} s): "
              + ", ".join(sel.not_tried))
    w = sel.winner
    if w is None:
        return
    print(f"Winner: {w.config.label}: {w.median_us:.1f} us median, init {_cell(w.init_ms)} ms; {w.where()}")
    if w.serialization and w.init_ms_serialized is not None:
        print(f"  {w.serialization}")
    if out is not None:
        print(f"Wrote {out}: acelera benchmark --config {out} --graph {sel.model}")
    else:
        print("As a --config file (--out FILE.toml writes it):")
        print(sel.to_toml(), end="")
    print("In Python:")
    print(sel.to_python(), end="")
