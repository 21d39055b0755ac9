"""Commands whose options are declared Flags: the API the CLI and plugins' commands share.

A plugin's `register_commands(app)` hook receives acelera's typer app. To give a command
TFLite-style flags, declare them as `Flag`s and let `make_command` build the command function:
its signature carries one `--name` option per flag (grouped under the flag's `group` in the
help), and `parsed_from` turns the values typer received back into `ParsedFlags` (typed,
range-checked, with the argv positions that rank delegates)::

    from acelera.registrar.commands import make_command, parsed_from
    from acelera.registrar.flags import Flag, FlagSet

    FLAGS = FlagSet([Flag("my_npu_level", int, 1, "how hard to try", "my-npu", "My NPU")])

    def run(ctx, raw, model):
        options = parsed_from(ctx, raw, FLAGS).options()   # every flag's effective value
        ...

    app.command("my-tool", help="...")(make_command("my-tool", "", run, FLAGS.flags.values(), [
        inspect.Parameter("model", inspect.Parameter.KEYWORD_ONLY,
                          annotation=Annotated[Path, typer.Argument(help="the .tflite model")])]))

Every option is declared as text and parsed by Flag.parse, so the spellings the command line
accepts (`--name=value`, `--name value`, `--dashed-name`, a bare bool `--name`) reach the
command once acelera's root group has normalized argv to `--name=value`: that group collects the
flags of every command made here (`declared_flags`), plugins' commands included.
"""
from __future__ import annotations

import inspect
from typing import Annotated, Any, Callable, Iterable, Iterator, Optional

import typer

from acelera.registrar.flags import TYPE_NAMES, Flag, FlagSet, ParsedFlags

__all__ = ["ARGV_KEY", "declared_flags", "flag_parameter", "make_command", "parsed_from"]

#: where the root group keeps the normalized argv (ctx.meta), read by parsed_from for positions
ARGV_KEY = "acelera.argv"

#: the attribute of a command function made by make_command that lists its flags
_FLAGS_ATTR = "acelera_flags"


def flag_parameter(flag: Flag) -> inspect.Parameter:
    """The keyword-only parameter typer turns into `--<flag.name>`: text, None when not given."""
    default = "" if flag.default == "" else str(flag.default).lower() if flag.type is bool else str(flag.default)
    allowed = ""
    if flag.minimum is not None or flag.maximum is not None:
        text = flag.range_text()
        allowed = f" in {text}" if text.startswith("[") else f" {text}"
    help_text = f"{flag.help} [{TYPE_NAMES[flag.type]}{allowed}, default: {default!r}]"
    opt = typer.Option(f"--{flag.name}", help=help_text, rich_help_panel=flag.group,
                       metavar=TYPE_NAMES[flag.type].upper(), show_default=False)
    return inspect.Parameter(flag.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[Optional[str], opt])


def _ctx_parameter() -> inspect.Parameter:
    return inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)


def make_command(name: str, doc: str, impl: Callable[..., Any], flags: Iterable[Flag],
                 extra: Iterable[inspect.Parameter] = ()) -> Callable[..., Any]:
    """A command function for `app.command(...)`: its signature lists `extra` parameters, then
    one option per flag. When invoked it calls `impl(ctx, raw, **extra_values)`, `raw` mapping
    each flag's name to the text given on the command line (None when absent): pass it to
    parsed_from."""
    flags = tuple(flags)
    flag_names = {f.name for f in flags}

    def command(ctx: typer.Context, **kwargs: Any) -> Any:
        raw = {k: v for k, v in kwargs.items() if k in flag_names}
        rest = {k: v for k, v in kwargs.items() if k not in flag_names}
        return impl(ctx, raw, **rest)

    params = [_ctx_parameter(), *extra, *(flag_parameter(f) for f in flags)]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    setattr(command, _FLAGS_ATTR, flags)
    command.__name__ = name.replace("-", "_")
    command.__doc__ = doc
    return command


def parsed_from(ctx: typer.Context, raw: dict[str, Optional[str]], flagset: FlagSet) -> ParsedFlags:
    """ParsedFlags from the raw option texts make_command's function received: each given
    value parsed by its Flag (a FlagError or FlagValueError naming the flag when it does not
    parse), with its position in the normalized argv (later flags rank later delegates)."""
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


def declared_flags(command: Any) -> Iterator[Flag]:
    """The flags of a click command made from make_command's function, and of every command
    under it when it is a group (registration order, duplicates included)."""
    callback = getattr(command, "callback", None)
    while callback is not None:  # typer wraps the function (functools.update_wrapper)
        flags = getattr(callback, "__dict__", {}).get(_FLAGS_ATTR)
        if flags is not None:
            yield from flags
            break
        callback = getattr(callback, "__wrapped__", None)
    for sub in (getattr(command, "commands", None) or {}).values():
        yield from declared_flags(sub)
