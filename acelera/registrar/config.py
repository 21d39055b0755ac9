"""TOML configuration merged with command-line flags.

Sources, highest precedence first: the command line, the file given with `--config FILE`
(flags at its top level, or under `[tool.acelera]`), `[tool.acelera]` in the working
directory's `pyproject.toml`, then each flag's declared default. Keys are flag names; an
unknown key or a value of the wrong type is an error naming the file. A configuration must be a
regular file of at most 1 MiB (a FIFO or a device is refused, never read).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from acelera.core.errors import AceleraError
from acelera.core.files import CONFIG_MAX_BYTES, read_regular_file
from acelera.registrar.flags import FlagSet, ParsedFlags

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(AceleraError):
    """A configuration file is unreadable, not TOML, or holds unknown keys or wrong types."""


_TOML_TYPES = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


def read_table(path: Path, pyproject: bool) -> dict[str, Any]:
    raw = read_regular_file(path, CONFIG_MAX_BYTES, "config", ConfigError)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None
    tool = data.get("tool", {}).get("acelera") if isinstance(data.get("tool"), dict) else None
    if pyproject:
        return tool if isinstance(tool, dict) else {}
    return tool if isinstance(tool, dict) else data


def apply_config(parsed: ParsedFlags, flagset: FlagSet, config: str | Path | None = None,
                 cwd: str | Path | None = None) -> ParsedFlags:
    """Fill flags not given on the command line from config files (in place; also returned)."""
    sources = []
    if config is not None:
        sources.append((Path(config), False))
    pyproject = Path(cwd or Path.cwd()) / "pyproject.toml"
    if pyproject.is_file():
        sources.append((pyproject, True))
    for path, is_pyproject in sources:
        table = read_table(path, is_pyproject)
        for key, value in table.items():
            canon = flagset.canonical(key)
            if canon is None:
                raise ConfigError(f"{path}: unknown key '{key}'{flagset.suggest(key)}")
            flag = flagset.flags[canon]
            if isinstance(value, bool) and flag.type is not bool or not isinstance(value, _TOML_TYPES[flag.type]):
                raise ConfigError(f"{path}: '{key}' must be a {flag.type.__name__}, got {type(value).__name__} {value!r}")
            if canon not in parsed.values:
                parsed.values[canon] = flag.parse(value, where=str(path))
                parsed.sources[canon] = str(path)
    return parsed
