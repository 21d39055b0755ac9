"""Turning declared flags into typer options, and typer's values back into ParsedFlags.

typer builds options from a function's signature, and since typer 0.26 click is vendored,
so options cannot be appended to a built command. Each tool's function therefore gets a
generated `__signature__` with one `typer.Option` per declared flag, grouped per delegate with
`rich_help_panel`. Every option is declared as text and parsed by acelera's own TFLite-style
parser, so `--use_gpu=true`, `--use_gpu true`, `--use-gpu` and a bare `--use_gpu` all work;
AceleraGroup rewrites argv into `--name=value` form before click sees it and remembers the
order flags appeared in, which ranks delegates.
"""
from __future__ import annotations

import inspect
from typing import Annotated, Any, Callable, Iterable, Optional

import typer
from typer.core import TyperGroup

from acelera.registrar.flags import TYPE_NAMES, Flag, FlagSet, ParsedFlags

ARGV_KEY = "acelera.argv"


class AceleraGroup(TyperGroup):
    """The root command group: normalizes TFLite-style flags before click parses them."""

    normalizer: FlagSet = FlagSet()

    def parse_args(self, ctx, args):
        args = self.normalizer.normalize_argv(list(args))
        ctx.meta[ARGV_KEY] = list(args)
        return super().parse_args(ctx, args)


def flag_parameter(flag: Flag) -> inspect.Parameter:
    default = "" if flag.default == "" else str(flag.default).lower() if flag.type is bool else str(flag.default)
    help_text = f"{flag.help} [{TYPE_NAMES[flag.type]}, default: {default!r}]"
    opt = typer.Option(f"--{flag.name}", help=help_text, rich_help_panel=flag.group,
                       metavar=TYPE_NAMES[flag.type].upper(), show_default=False)
    return inspect.Parameter(flag.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[Optional[str], opt])


def ctx_parameter() -> inspect.Parameter:
    return inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)


def make_command(name: str, doc: str, impl: Callable[..., Any], flags: Iterable[Flag],
                 extra: Iterable[inspect.Parameter] = ()) -> Callable[..., Any]:
    """A function whose signature lists `extra` parameters, then one option per flag."""
    flags = list(flags)
    flag_names = {f.name for f in flags}

    def command(ctx: typer.Context, **kwargs: Any) -> Any:
        raw = {k: v for k, v in kwargs.items() if k in flag_names}
        rest = {k: v for k, v in kwargs.items() if k not in flag_names}
        return impl(ctx, raw, **rest)

    params = [ctx_parameter(), *extra, *(flag_parameter(f) for f in flags)]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = name.replace("-", "_")
    command.__doc__ = doc
    return command


def parsed_from(ctx: typer.Context, raw: dict[str, Optional[str]], flagset: FlagSet) -> ParsedFlags:
    """ParsedFlags from typer's raw option strings, with argv positions for delegate ranking."""
    parsed = ParsedFlags(flagset.flags)
    argv = ctx.find_root().meta.get(ARGV_KEY, [])
    for name, text in raw.items():
        if text is None:
            continue
        parsed.values[name] = flagset.flags[name].parse(text)
        parsed.sources[name] = "command line"
        prefix = f"--{name}="
        pos = [i for i, tok in enumerate(argv) if tok.startswith(prefix) or tok == f"--{name}"]
        parsed.positions[name] = pos[-1] + 1 if pos else 0
    return parsed
