"""Typed flag specs with TFLite's names and value syntax, merged across plugins.

Values follow TFLite's command-line parser, made friendlier: `--name=value` and
`--name value`, the dashed spelling `--use-gpu`, bools as true/false/1/0, and a bare bool flag
(`--use_gpu`) meaning true. The argv position of each flag is kept: it ranks delegates.

Numbers are checked against the flag's range (`minimum`/`maximum`; an int flag without one
is an int32 like TFLite's, a float flag must be finite): a value outside it is a
FlagValueError, a usage error (exit code 2) naming the flag, the value and the range.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from acelera.core.errors import AceleraError

TYPE_NAMES = {bool: "bool", int: "int32", float: "float", str: "string"}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class FlagError(AceleraError):
    """An unknown flag, a malformed value, or two plugins declaring one flag differently."""


class FlagValueError(FlagError):
    """A numeric flag's value is not a number, not finite or outside the flag's range: a usage
    error, reported like the command line's other usage errors (exit code 2)."""

    exit_code = 2


def format_number(x: float | int) -> str:
    """A bound or value as a user would type it: 2147483647, 0.5, 1e+06, nan."""
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:g}"


@dataclass(frozen=True)
class Flag:
    name: str
    type: type
    default: Any
    help: str = ""
    owner: str = "acelera"
    group: str = "General"
    choices: tuple[str, ...] | None = None
    #: inclusive bounds of an int or float flag; None: an int32 for int flags, any finite float
    minimum: float | int | None = None
    maximum: float | int | None = None

    def same_spec(self, other: "Flag") -> bool:
        return (self.type, self.default, self.choices) == (other.type, other.default, other.choices)

    def describe(self) -> str:
        return f"{TYPE_NAMES[self.type]}, default {self.default!r}"

    def bounds(self) -> tuple[float | int, float | int] | None:
        """(low, high), inclusive, of a numeric flag; None for bool and string flags."""
        if self.type is int:
            return (INT32_MIN if self.minimum is None else self.minimum,
                    INT32_MAX if self.maximum is None else self.maximum)
        if self.type is float:
            return (-math.inf if self.minimum is None else self.minimum,
                    math.inf if self.maximum is None else self.maximum)
        return None

    def range_text(self) -> str:
        """The allowed values of a numeric flag, e.g. '[0, 2147483647]' or 'any finite number'."""
        bounds = self.bounds()
        if bounds is None:
            return ""
        low, high = bounds
        if low == -math.inf and high == math.inf:
            return "any finite number"
        if high == math.inf:
            return f">= {format_number(low)}"
        if low == -math.inf:
            return f"<= {format_number(high)}"
        return f"[{format_number(low)}, {format_number(high)}]"

    def check_range(self, value: float | int, where: str = "") -> float | int:
        """`value` if it is finite and within the flag's bounds, else a FlagValueError."""
        bounds = self.bounds()
        assert bounds is not None, f"--{self.name} is not a numeric flag"
        low, high = bounds
        if isinstance(value, float) and not math.isfinite(value) or not low <= value <= high:
            raise FlagValueError(f"--{self.name}: {format_number(value)} is out of range "
                                 f"(allowed: {self.range_text()}){where}")
        return value

    def parse(self, text: Any, where: str = "") -> Any:
        """Parse a command-line or config value into this flag's type."""
        where = f" ({where})" if where else ""
        value: float | str
        if self.type is bool:
            if isinstance(text, bool):
                return text
            t = str(text).strip().lower()
            if t in ("true", "1"):
                return True
            if t in ("false", "0"):
                return False
            raise FlagError(f"--{self.name}: expected true/false/1/0, got '{text}'{where}")
        if self.type is int:
            if isinstance(text, bool) or (not isinstance(text, (int, str))):
                raise FlagValueError(f"--{self.name}: expected an integer ({self.range_text()}), "
                                     f"got {text!r}{where}")
            try:
                value = int(text)
            except ValueError:
                raise FlagValueError(f"--{self.name}: expected an integer ({self.range_text()}), "
                                     f"got '{_clip(text)}'{where}") from None
            self.check_range(value, where)
        elif self.type is float:
            if isinstance(text, bool) or not isinstance(text, (int, float, str)):
                raise FlagValueError(f"--{self.name}: expected a number ({self.range_text()}), "
                                     f"got {text!r}{where}")
            try:
                value = float(text)
            except (ValueError, OverflowError):
                raise FlagValueError(f"--{self.name}: expected a number ({self.range_text()}), "
                                     f"got '{_clip(text)}'{where}") from None
            self.check_range(value, where)
        else:
            if not isinstance(text, str):
                raise FlagError(f"--{self.name}: expected a string, got {text!r}{where}")
            value = text
        if self.choices is not None and value not in self.choices:
            raise FlagError(f"--{self.name}: '{value}' is not one of {', '.join(repr(c) for c in self.choices)}{where}")
        return value


def _clip(text: object, limit: int = 60) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class ParsedFlags:
    """Flag values set explicitly, where each came from, and argv positions (delegate rank)."""

    flags: Mapping[str, Flag]
    values: dict[str, Any] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    rest: list[str] = field(default_factory=list)

    def get(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        return self.flags[name].default

    def is_set(self, name: str) -> bool:
        return name in self.values

    def options(self) -> dict[str, Any]:
        """Every known flag with its effective value."""
        return {n: self.get(n) for n in self.flags}


class FlagSet:
    """Flags merged from several owners; identical re-declarations are shared, others conflict."""

    def __init__(self, flags: Iterable[Flag] = ()):
        self.flags: dict[str, Flag] = {}
        self.owners: dict[str, list[str]] = {}
        for f in flags:
            self.add(f)

    def add(self, flag: Flag) -> None:
        old = self.flags.get(flag.name)
        if old is None:
            self.flags[flag.name] = flag
            self.owners[flag.name] = [flag.owner]
        elif not old.same_spec(flag):
            raise FlagError(f"flag --{flag.name} is declared by {old.owner} ({old.describe()}) and "
                            f"differently by {flag.owner} ({flag.describe()})")
        elif flag.owner not in self.owners[flag.name]:
            self.owners[flag.name].append(flag.owner)

    def check_compatible(self, flags: Iterable[Flag]) -> None:
        """Raise FlagError if adding `flags` would conflict, without adding anything."""
        trial = FlagSet(self.flags.values())
        for f in flags:
            trial.add(f)

    def canonical(self, token: str) -> str | None:
        name = token.replace("-", "_")
        return name if name in self.flags else None

    def suggest(self, name: str) -> str:
        close = difflib.get_close_matches(name.replace("-", "_"), list(self.flags), n=1, cutoff=0.6)
        return f" (did you mean --{close[0]}?)" if close else ""

    def normalize_argv(self, argv: Sequence[str]) -> list[str]:
        """Rewrite known flags to `--name=value` (bare bools become `=true`); leave the rest.

        The command line's only flag parser is this plus click: acelera's root group
        normalizes argv with it, click parses the options make_command declared
        (acelera.registrar.commands), and parsed_from parses their values with Flag.parse."""
        out = []
        i = 0
        while i < len(argv):
            tok = argv[i]
            if tok.startswith("--") and tok != "--":
                name, eq, value = tok[2:].partition("=")
                canon = self.canonical(name)
                if canon is not None:
                    flag = self.flags[canon]
                    if not eq:
                        nxt = argv[i + 1] if i + 1 < len(argv) else None
                        if flag.type is bool:
                            if nxt is not None and nxt.lower() in ("true", "false", "1", "0"):
                                value, i = nxt, i + 1
                            else:
                                value = "true"
                        elif nxt is not None:
                            value, i = nxt, i + 1
                        else:
                            out.append(f"--{canon}")
                            i += 1
                            continue
                    out.append(f"--{canon}={value}")
                    i += 1
                    continue
            out.append(tok)
            i += 1
        return out
