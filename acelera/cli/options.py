"""The CLI's flag plumbing: the root group that normalizes argv, tool ranges and path checks.

typer builds options from a function's signature, and since typer 0.26 click is vendored,
so options cannot be appended to a built command. Each tool's function therefore gets a
generated `__signature__` with one `typer.Option` per declared flag, grouped per delegate with
`rich_help_panel`: acelera.registrar.commands builds it (make_command, parsed_from), for the
tools here and for plugins' commands alike. Every option is declared as text and parsed by
acelera's own TFLite-style parser, so `--use_gpu=true`, `--use_gpu true`, `--use-gpu` and a
bare `--use_gpu` all work; AceleraGroup rewrites argv into `--name=value` form before click
sees it and remembers the order flags appeared in, which ranks delegates.

Numeric flags carry a range (Flag.minimum/maximum; the tools' own tables are plain tuples, so
their ranges are in TOOL_RANGES); path flags are checked with check_path_flags before a tool
opens anything (regular files only, with a size cap: a FIFO or /dev/zero never reaches a reader).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Optional

from typer.core import TyperGroup

from acelera.core.errors import ModelError
from acelera.core.files import (
    CONFIG_MAX_BYTES,
    DATA_MAX_BYTES,
    MODEL_MAX_BYTES,
    FileError,
    directory_problem,
    output_path_problem,
    regular_file_problem,
)
from acelera.registrar.commands import ARGV_KEY, declared_flags
from acelera.registrar.flags import INT32_MAX, INT32_MIN, Flag, FlagSet, ParsedFlags
from acelera.registrar.spec import MAX_THREADS

#: inclusive (minimum, maximum) of the tools' own numeric flags, by tool then flag name
TOOL_RANGES: dict[str, dict[str, tuple[int | float, int | float]]] = {
    "inference-diff": {"num_runs": (1, INT32_MAX), "num_interpreter_threads": (-1, MAX_THREADS)},
    "eval": {"num_images": (0, INT32_MAX), "num_interpreter_threads": (-1, MAX_THREADS),
             "class_offset": (INT32_MIN, INT32_MAX)},
}

#: what each path flag of a tool names: "model" (a .tflite file, at most 2 GiB), "file" (a data
#: file, at most 2 GiB), "library" (a shared library, at most 2 GiB), "toml" (at most 1 MiB),
#: "dir" (an existing directory), "new-dir" (a directory, created when missing), "output" (a
#: file the tool writes) or "cache" (a regular file read when present, else created)
PATH_FLAGS: dict[str, dict[str, str]] = {
    "benchmark": {"graph": "model", "op_profiling_output_file": "output", "result_file_path": "output",
                  "output_filepath": "output"},
    "inference-diff": {"model_file": "model", "output_file_path": "output"},
    "eval": {"model_file": "model", "ground_truth_images_path": "dir", "ground_truth_labels": "file",
             "model_output_labels": "file", "denylist_file_path": "file", "ground_truth_proto": "file",
             "ground_truth_json": "file", "output_file_path": "output"},
}

#: path flags every tool shares (the registrar's, and the TFLite delegate flags plugins declare),
#: checked wherever the tool's flags include them
SHARED_PATH_FLAGS: dict[str, str] = {"delegate_serialize_dir": "new-dir", "external_delegate_path": "library",
                                     "xnnpack_weight_cache_file_path": "cache"}

_LIMITS = {"model": MODEL_MAX_BYTES, "file": DATA_MAX_BYTES, "library": DATA_MAX_BYTES, "toml": CONFIG_MAX_BYTES}
_WHAT = {"model": "model file", "file": "file", "library": "library", "toml": "TOML file"}


def ranged(flag: Flag, ranges: Mapping[str, tuple[int | float, int | float]]) -> Flag:
    """`flag` with its range from `ranges` (unchanged when `ranges` does not name it)."""
    if flag.name not in ranges:
        return flag
    low, high = ranges[flag.name]
    return dataclasses.replace(flag, minimum=low, maximum=high)


def path_problem(value: str | os.PathLike, kind: str) -> tuple[str, str] | None:
    """(verb phrase, reason) when `value` cannot serve as a path of `kind`, else None."""
    if kind == "library" and os.sep not in os.fspath(value) and (os.altsep or os.sep) not in os.fspath(value):
        return None  # a bare name is searched for by the dynamic loader, as dlopen does
    if kind in _LIMITS:
        problem = regular_file_problem(value, _LIMITS[kind])
        return None if problem is None else (f"cannot read {_WHAT[kind]}", problem)
    if kind in ("dir", "new-dir"):
        problem = directory_problem(value, may_be_missing=kind == "new-dir")
        return None if problem is None else ("cannot use directory", problem)
    if kind == "output":
        problem = output_path_problem(value)
        return None if problem is None else ("cannot write", problem)
    if kind == "cache":
        problem = output_path_problem(value)
        if problem is None and os.path.exists(value):
            problem = regular_file_problem(value, DATA_MAX_BYTES)
        return None if problem is None else ("cannot use cache file", problem)
    raise ValueError(f"unknown path kind {kind!r}")


def check_path(value: str | os.PathLike, kind: str, flag: str | None = None) -> None:
    """A one-line error when `value` cannot serve as a path of `kind` (see PATH_FLAGS): a
    ModelError for a model, else a FileError, naming the flag, the path and the reason."""
    found = path_problem(value, kind)
    if found is not None:
        verb, problem = found
        prefix = f"--{flag}: " if flag else ""
        error = ModelError if kind == "model" else FileError
        raise error(f"{prefix}{verb} '{os.fspath(value)}': {problem}")


def check_path_flags(parsed: ParsedFlags, kinds: Mapping[str, str] = {}) -> None:
    """Check every path flag in `kinds` and SHARED_PATH_FLAGS that is set to a non-empty value
    (see check_path)."""
    for name, kind in {**SHARED_PATH_FLAGS, **kinds}.items():
        if name in parsed.flags:
            value = parsed.get(name)
            if isinstance(value, str) and value:
                check_path(value, kind, name)


class AceleraGroup(TyperGroup):
    """The root command group: normalizes TFLite-style flags before click parses them.

    Each built group has its own normalizer: the flags of every command under it that
    make_command built (plugins' commands included), the first declaration of a name winning.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.normalizer = FlagSet()
        super().__init__(*args, **kwargs)
        for command in self.commands.values():
            self._learn_flags(command)

    def add_command(self, cmd: Any, name: Optional[str] = None) -> None:
        super().add_command(cmd, name)
        self._learn_flags(cmd)

    def _learn_flags(self, command: Any) -> None:
        for flag in declared_flags(command):
            self.normalizer.flags.setdefault(flag.name, flag)

    def parse_args(self, ctx, args):
        args = self.normalizer.normalize_argv(list(args))
        ctx.meta[ARGV_KEY] = list(args)
        return super().parse_args(ctx, args)
