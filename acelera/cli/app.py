"""The acelera typer app. Every tool's options are generated from the installed plugins' flags."""
from __future__ import annotations

import contextlib
import inspect
import json
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from acelera import __version__
from acelera.cli.help_format import help_tables, tflite_style
from acelera.cli.ops_cmd import OPS_HELP, ops_command
from acelera.cli.options import (
    PATH_FLAGS,
    TOOL_RANGES,
    AceleraGroup,
    check_path,
    check_path_flags,
    ranged,
)
from acelera.core.errors import AceleraError
from acelera.registrar.commands import make_command, parsed_from
from acelera.registrar.config import apply_config
from acelera.registrar.flags import INT32_MAX, TYPE_NAMES, Flag, FlagSet, ParsedFlags
from acelera.registrar.registry import Registry

console = Console(highlight=False, soft_wrap=True)


def _param(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


CONFIG = _param("config", Annotated[Optional[Path], typer.Option(
    "--config", help="TOML file of flag values (command line > this file > [tool.acelera] in ./pyproject.toml > defaults)",
    rich_help_panel="General")], None)


def tool_flagset(registry: Registry, tool_flags: list[Flag]) -> FlagSet:
    fs = FlagSet(registry.flagset.flags.values())
    for f in tool_flags:
        fs.add(f)
    return fs


def resolve(ctx: typer.Context, raw: dict, flagset: FlagSet, config: Optional[Path]) -> ParsedFlags:
    return apply_config(parsed_from(ctx, raw, flagset), flagset, config)


def benchmark_flags() -> list[Flag]:
    from acelera.benchmarking import BENCHMARK_FLAGS, BENCHMARK_RANGES

    return [ranged(Flag(n, t, d, h, "benchmark", "Benchmark"), BENCHMARK_RANGES) for n, t, d, h in BENCHMARK_FLAGS]


#: --seed of `conformance`: numpy seeds are unsigned 32-bit here
SEED_MAX = (1 << 32) - 1


def parse_shard(text: str) -> tuple[int, int]:
    """--shard 'i/n' with 0 <= i < n; a usage error (exit code 2) naming the flag otherwise."""
    parts = str(text).split("/")
    try:
        if len(parts) != 2:
            raise ValueError
        i, n = int(parts[0]), int(parts[1])
    except ValueError:
        raise typer.BadParameter(f"'{text}' is not i/n (e.g. 0/4)", param_hint="'--shard'") from None
    if not 1 <= n <= INT32_MAX or not 0 <= i < n:
        raise typer.BadParameter(f"{i}/{n} is out of range (allowed: i/n with 0 <= i < n <= {INT32_MAX})",
                                 param_hint="'--shard'")
    return i, n


def plugin_failure(e: BaseException) -> str:
    """A plugin's exception in one line (sys.exit() included)."""
    if isinstance(e, SystemExit):
        return f"called sys.exit({e.code!r})"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def build_app(registry: Registry) -> typer.Typer:
    app = typer.Typer(cls=AceleraGroup, add_completion=False, no_args_is_help=True,
                      help=f"acelera {__version__}: run TensorFlow Lite models through pluggable delegates.")

    @app.callback()
    def root(version: Annotated[bool, typer.Option(
                 "--version", "-V", help="print acelera's version (with -v: every installed delegate's too) and exit")]
             = False,
             verbose: Annotated[bool, typer.Option("--verbose", "-v", help="with --version: list the delegates")]
             = False) -> None:
        if version:  # main() answers `acelera --version [-v]` before the app is built; this is the help entry
            print("\n".join(version_lines(registry, verbose)))
            raise typer.Exit(0)
    bench = benchmark_flags()
    bench_fs = tool_flagset(registry, bench)
    delegate_fs = registry.flagset

    def benchmark(ctx, raw, config):
        from acelera.cli.benchmark_cmd import run

        return run(registry, resolve(ctx, raw, bench_fs, config))

    app.command("benchmark", help="Benchmark a model like TFLite's benchmark_model (--graph=MODEL).")(
        make_command("benchmark", "", benchmark, bench_fs.flags.values(), [CONFIG]))

    from acelera.cli.select_cmd import register_select

    register_select(app, registry)

    def analyze(ctx, raw, model, json_out, svg_out, dot_out, html_out, config):
        from acelera.cli import analyze as an
        from acelera.cli import graph_picture as gp
        from acelera.core.files import write_text_file

        parsed = resolve(ctx, raw, delegate_fs, config)
        check_path(model, "model")
        check_path_flags(parsed)
        outs = {"svg": svg_out, "dot": dot_out, "html": html_out}
        for flag, path in outs.items():
            if path is not None:
                check_path(path, "output", flag)
        interp, scenarios = an.plan(str(model), registry, parsed)
        lines = an.text_lines(interp, scenarios)
        if any(outs.values()):
            dot = gp.dot_source(interp, scenarios[0])
            if dot_out is not None:
                write_text_file(dot_out, dot, "DOT graph")
            if svg_out is not None or html_out is not None:
                picture = gp.render(dot)
                if svg_out is not None:
                    write_text_file(svg_out, picture, "SVG picture")
                if html_out is not None:
                    write_text_file(html_out, gp.html_page(f"acelera analyze {model}", picture, lines), "HTML page")
        if json_out:
            print(json.dumps(an.to_json(interp, scenarios), indent=2))
        else:
            print("\n".join(lines))
            for flag, path in outs.items():
                if path is not None:
                    print(f"graph {flag.upper()} written to {path}")

    app.command("analyze", help="Show which delegate takes each node of MODEL, and why others refuse.")(
        make_command("analyze", "", analyze, delegate_fs.flags.values(), [
            _param("model", Annotated[Path, typer.Argument(help="the .tflite model")]),
            _param("json_out", Annotated[bool, typer.Option("--json", help="print JSON")], False),
            _param("svg_out", Annotated[Optional[Path], typer.Option(
                "--svg", help="write the graph picture here (laid out by Graphviz dot)")], None),
            _param("dot_out", Annotated[Optional[Path], typer.Option(
                "--dot", help="write the graph as Graphviz DOT text here")], None),
            _param("html_out", Annotated[Optional[Path], typer.Option(
                "--html", help="write a self-contained HTML page (picture and analysis) here")], None),
            CONFIG]))

    from acelera.conformance.inference_diff import INFERENCE_DIFF_FLAGS

    diff_flags = [ranged(Flag(n, t, d, h, "inference-diff", "inference_diff"), TOOL_RANGES["inference-diff"])
                  for n, t, d, h in INFERENCE_DIFF_FLAGS]
    diff_fs = tool_flagset(registry, diff_flags)

    def inference_diff(ctx, raw, config):
        from acelera.conformance.inference_diff import run as run_diff

        parsed = resolve(ctx, raw, diff_fs, config)
        check_path_flags(parsed, PATH_FLAGS["inference-diff"])
        return run_diff(registry, parsed)

    app.command("inference-diff", help="Compare a delegate with the CPU reference like TFLite's inference_diff "
                "(--model_file=MODEL --delegate=NAME).")(
        make_command("inference-diff", "", inference_diff, diff_fs.flags.values(), [CONFIG]))

    from acelera.evaluation import EVAL_IC_FLAGS, EVAL_OD_FLAGS

    evaluate = typer.Typer(help="Task-based evaluation like TFLite's evaluation tools, with any delegate.",
                           no_args_is_help=True)
    for cmd, table, runner, text in (
            ("image-classification", EVAL_IC_FLAGS, "run_image_classification",
             "Top-1..10 accuracy on labelled images (TFLite's imagenet_image_classification)."),
            ("object-detection", EVAL_OD_FLAGS, "run_object_detection",
             "COCO mAP of an SSD-style detector (TFLite's coco_object_detection).")):
        own = [ranged(Flag(n, t, d, h, f"eval {cmd}", cmd), TOOL_RANGES["eval"]) for n, t, d, h in table]
        fs = tool_flagset(registry, own)

        def evaluate_cmd(ctx, raw, config, _fs=fs, _runner=runner):
            import acelera.evaluation as ev

            parsed = resolve(ctx, raw, _fs, config)
            check_path_flags(parsed, PATH_FLAGS["eval"])
            return getattr(ev, _runner)(registry, parsed)

        evaluate.command(cmd, help=text)(make_command(cmd, "", evaluate_cmd, fs.flags.values(), [CONFIG]))
    app.add_typer(evaluate, name="eval")

    def conformance(ctx, raw, delegate, all_, models, shard, seed, report, tolerances):
        from acelera.conformance.suite import run as run_suite

        shard = "{}/{}".format(*parse_shard(shard))
        if not 0 <= seed <= SEED_MAX:
            raise typer.BadParameter(f"{seed} is out of range (allowed: [0, {SEED_MAX}])", param_hint="'--seed'")
        if models is not None:
            check_path(models, "dir", "models")
        if report is not None:
            check_path(report, "new-dir", "report")
        if tolerances is not None:
            check_path(tolerances, "toml", "tolerances")
        # delegate flags (--external_delegate_path=lib.so, --use_litert_xnnpack, ...) certify the
        # delegates they enable, with those options, besides the ones named by --delegate
        parsed = parsed_from(ctx, raw, delegate_fs)
        check_path_flags(parsed)
        names = list(delegate or []) + [s.name for s in registry.enabled(parsed)]
        quiet_delegate_logs()
        raise typer.Exit(run_suite(registry, list(dict.fromkeys(names)), all_=all_, models_dir=models, shard=shard,
                                   seed=seed, report_dir=report, tolerances_file=tolerances,
                                   options=dict(parsed.values)))

    app.command("conformance", help="Certify delegates against the CPU reference (op, negative, model and "
                "behaviour cases); writes certificate.json, junit.xml and summaries.")(
        make_command("conformance", "", conformance, delegate_fs.flags.values(), [
            _param("delegate", Annotated[Optional[list[str]], typer.Option(
                "--delegate", help="delegate to certify (repeatable)")], None),
            _param("all_", Annotated[bool, typer.Option("--all", help="certify every available delegate")], False),
            _param("models", Annotated[Optional[Path], typer.Option(
                "--models", help="directory of .tflite models for model cases")], None),
            _param("shard", Annotated[str, typer.Option("--shard", help="run shard i of n (i/n), for CI matrices")],
                   "0/1"),
            _param("seed", Annotated[int, typer.Option("--seed", help="seed for generated cases and inputs "
                                                       f"(0 to {SEED_MAX})")], 0),
            _param("report", Annotated[Optional[Path], typer.Option("--report", help="directory for the reports")],
                   None),
            _param("tolerances", Annotated[Optional[Path], typer.Option(
                "--tolerances", help="TOML file overriding tolerances")], None)]))

    delegates = typer.Typer(help="List and describe installed delegate plugins.", no_args_is_help=True)

    @delegates.command("list", help="Installed delegates: version, backend, availability; broken plugins.")
    def list_(json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False):
        rows = delegate_rows(registry)
        if json_out:
            print(json.dumps({"delegates": rows, "broken": registry.broken}, indent=2))
            return
        t = Table("delegate", "version", "backend", "plugin")
        t.add_column("available", overflow="fold")  # a long device name wraps; it is never cut short
        for r in rows:
            t.add_row(r["name"], r["version"], r["backend"], r["plugin"],
                      "yes" if r["available"] else escape(f"no: {r['reason']}"))
        for name, reason in registry.broken.items():
            t.add_row(name, "?", "?", name, escape(f"BROKEN: {reason}"))
        console.print(t)

    @delegates.command("show", help="A delegate's flags, op table and accepted model types.")
    def show(name: Annotated[str, typer.Argument(help="delegate name")]):
        spec = registry.spec(name)
        avail = registry.availability(name)
        print(f"{spec.name} {spec.version} ({spec.backend}): {spec.summary}")
        print(f"available: {'yes' if avail.ok else 'no: ' + avail.reason}")
        print(f"enabled by: {', '.join('--' + e for e in spec.enabled_by)}")
        kinds = ('float32', 'float16', 'dynamic-range', 'full-integer', 'qat')
        print(f"model types: {', '.join(m for m in kinds if m in spec.model_types)}")
        mx, mn = spec.partition_limits({})
        print(f"partitions: max {mx or 'unlimited'}, min nodes {mn or 'none'} (when the flags leave them at 0)")
        if spec.notes:
            print(f"notes: {spec.notes}")
        t = Table(title="flags")
        t.add_column("flag", no_wrap=True)  # a flag name is copied from here: never cut
        t.add_column("type", no_wrap=True)
        t.add_column("default", overflow="fold")
        t.add_column("help", overflow="fold")
        for f in spec.flags:
            default = str(f.default).lower() if f.type is bool else repr(f.default)
            t.add_row(f"--{f.name}", TYPE_NAMES[f.type], escape(default), escape(f.help))
        console.print(t)
        t = Table(title="op support")
        t.add_column("op", no_wrap=True)
        for col in ("versions", "dtypes", "constraints"):
            t.add_column(col, overflow="fold")
        for row in spec.op_table:
            t.add_row(row.op, f"{row.min_version}-{row.max_version}", ", ".join(sorted(row.dtypes)),
                      escape("; ".join(c.description for c in row.constraints)))
        console.print(t)

    app.add_typer(delegates, name="delegates")
    app.command("ops", help=OPS_HELP)(ops_command)

    @app.command("doctor", help="Run each delegate's availability probe and a tiny model: PASS/FAIL.")
    def doctor(strict: Annotated[bool, typer.Option(
            "--strict", help="FAIL (exit 1) when a first-party delegate is unavailable here, not SKIP")] = False):
        from acelera.cli.doctor import run_doctor

        raise typer.Exit(run_doctor(registry, print, strict=strict))

    @app.command("new-delegate", help="Scaffold an installable delegate plugin package.")
    def new_delegate(name: Annotated[str, typer.Argument(help="delegate name, e.g. my-npu")],
                     directory: Annotated[Optional[Path], typer.Option("--dir", help="target directory")] = None):
        from acelera.cli.scaffold import names, scaffold

        target = directory or Path(f"acelera-{names(name)['name']}")
        check_path(target, "new-dir", "dir")
        for p in scaffold(name, target):
            print(f"wrote {p}")
        print(f"next: pip install -e {target} && acelera delegates list")

    @app.command("demo", help="The default job: run acelera's own sample models on every available delegate.")
    def demo():
        from acelera.demo import main as demo_main

        quiet_delegate_logs()
        raise typer.Exit(demo_main(registry))

    @app.command("version", help="Print acelera's version.")
    def version():
        print(f"acelera {__version__}")

    for impl in registry.pm.hook.register_commands.get_hookimpls():
        try:
            impl.function(app=app)
        except BaseException as e:  # noqa: BLE001  (sys.exit() in a plugin breaks only that plugin)
            if isinstance(e, KeyboardInterrupt):
                raise
            registry.broken[impl.plugin_name] = f"register_commands failed: {plugin_failure(e)}"
    return app


def delegate_rows(registry: Registry) -> list[dict[str, Any]]:
    rows = []
    for spec in registry.specs.values():
        avail = registry.availability(spec.name)
        plugin = registry.plugin_of(spec.name)
        rows.append({"name": spec.name, "version": spec.version, "backend": spec.backend,
                     "plugin": plugin.distribution if plugin else "?", "available": avail.ok,
                     "reason": avail.reason, "summary": spec.summary})
    return rows


TOOL_HANDLER = "acelera-tool"  # the name of the handler tool_logging installs


@contextlib.contextmanager
def tool_logging() -> Iterator[None]:
    """Delegates log what they take and refuse on the `acelera` logger; while a command runs,
    tools show it on stdout, TFLite-style. The logger's handlers and level are put back afterwards,
    so a program that calls main() keeps its own logging setup."""
    import logging

    logger = logging.getLogger("acelera")
    saved_level = logger.level
    handler = None
    if not any(h.get_name() == TOOL_HANDLER for h in logger.handlers):
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        handler.set_name(TOOL_HANDLER)
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        if handler is not None:
            logger.removeHandler(handler)
        logger.setLevel(saved_level)


def _one_line(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> str:
    return f"WARNING: {message}\n"


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Warnings (delegation fallbacks, unused delegate flags) as one line each, not file:line,
    while a command runs; the process's own format is put back afterwards."""
    saved = warnings.formatwarning
    warnings.formatwarning = _one_line
    try:
        yield
    finally:
        if warnings.formatwarning is _one_line:  # unless someone replaced it meanwhile
            warnings.formatwarning = saved


def quiet_delegate_logs() -> None:
    """For tools that prepare thousands of partitions (conformance): only warnings."""
    import logging

    logging.getLogger("acelera").setLevel(logging.WARNING)


def version_lines(registry: Registry, verbose: bool) -> list[str]:
    """`acelera --version`: the package; with -v every installed delegate and its plugin."""
    lines = [f"acelera {__version__}"]
    if verbose:
        for name in sorted(registry.specs):
            spec = registry.specs[name]
            plugin = next((p for p in registry.plugins.values() if name in p.delegates), None)
            dist = f" ({plugin.distribution} {plugin.version})" if plugin is not None else ""
            lines.append(f"  {name} {spec.version} [{spec.backend}]{dist}")
        for name, why in sorted(getattr(registry, "broken", {}).items()):
            lines.append(f"  {name}: broken ({why})")
    return lines


def main(argv: list[str] | None = None, registry: Registry | None = None) -> int:
    """Entry point of the `acelera` command: one-line errors and warnings, exit codes, `--debug`
    tracebacks."""
    with one_line_warnings(), tool_logging():
        return _main(argv, registry)


def _main(argv: list[str] | None, registry: Registry | None) -> int:
    from acelera.registrar.registry import get_registry

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    if args and args[0] in ("--version", "-V") and set(args[1:]) <= {"-v", "--verbose"}:
        print("\n".join(version_lines(registry or get_registry(), True)) if len(args) > 1
              else f"acelera {__version__}")
        return 0
    try:
        registry = registry or get_registry()
        cmd = tflite_style(typer.main.get_command(build_app(registry)))
        with help_tables():
            result = cmd.main(args=args, prog_name="acelera", standalone_mode=False)
        return int(result or 0)
    except AceleraError as e:
        if debug:
            raise
        print(f"error: {e}", file=sys.stderr)
        return int(getattr(e, "exit_code", 1))  # FlagValueError: a usage error, 2
    except Exception as e:
        code = getattr(e, "exit_code", None)
        if type(e).__name__ in ("Exit", "Abort") or (code is not None and not hasattr(e, "format_message")):
            return int(code or 0)
        if hasattr(e, "format_message"):
            if debug:
                raise
            print(f"error: {e.format_message()}", file=sys.stderr)
            return int(code if code is not None else 2)
        if debug:
            raise
        print(f"error: internal error: {type(e).__name__}: {e} (run with --debug for the traceback)", file=sys.stderr)
        return 3
