"""What both evaluation tools share: flag access, label files, interpreters and delegates,
latency statistics, the delegation summary, a progress bar, the JSON output file."""
from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from acelera.conformance.inference_diff import (
    DiffResult,
    LatencyStats,
    RunningStat,
    build_delegates,
    cpp_float,
    delegation_lines,
    to_json,
)
from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.partition import DelegationReport

__all__ = ["EvaluationError", "Flags", "read_lines", "Interpreters", "open_interpreters", "latency_line",
           "latency_json", "Delegation", "progress", "write_json", "cpp_float", "RunningStat", "LatencyStats"]


class EvaluationError(AceleraError):
    """An evaluation cannot run: a missing flag, an unreadable file, inconsistent inputs."""


@dataclass(frozen=True)
class Flags:
    """A tool's flag table over acelera's ParsedFlags: values of flags the parser does not know
    (a test passing a bare registry flagset) fall back to the table's defaults."""

    parsed: Any
    table: Sequence[tuple[str, type, Any, str]]

    def __call__(self, name: str) -> Any:
        default = next(f[2] for f in self.table if f[0] == name)
        return self.parsed.get(name) if name in self.parsed.flags else default


def read_lines(path: str, flag: str) -> list[str]:
    """A text file's lines without line ends and surrounding blanks; trailing empty lines dropped."""
    if not path:
        raise EvaluationError(f"--{flag} is required")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f.read().splitlines()]
    except FileNotFoundError:
        raise EvaluationError(f"--{flag}: no such file: {path}") from None
    except IsADirectoryError:
        raise EvaluationError(f"--{flag}: {path} is a directory, expected a text file") from None
    except OSError as e:
        raise EvaluationError(f"--{flag}: cannot read {path}: {e.strerror or e}") from None
    while lines and not lines[-1]:
        lines.pop()
    return lines


# --- interpreters and delegates --------------------------------------------------------------
@dataclass
class Interpreters:
    """The test interpreter (delegates, threads) and, when compared, the CPU reference (1 thread)."""

    test: Interpreter
    reference: Interpreter | None
    delegation: "Delegation"


def open_interpreters(registry: Any, parsed: Any, model_file: str, threads: int, compare: bool) -> Interpreters:
    """Build the delegates the flags ask for (`--delegate NAME` and registrar flags, as
    inference_diff does) and the interpreters."""
    if not model_file:
        raise EvaluationError("--model_file is required: the path of the .tflite model to evaluate")
    if not os.path.isfile(model_file):
        raise EvaluationError(f"--model_file: no such file: {model_file}")
    if threads < -1:
        raise EvaluationError(f"--num_interpreter_threads must be >= -1, got {threads}")
    delegates = build_delegates(registry, parsed, threads)
    test = Interpreter(model_path=model_file, experimental_delegates=delegates,
                       num_threads=threads if threads > 0 else None,
                       experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    test.allocate_tensors()
    ref = None
    if compare:
        ref = Interpreter(model_path=model_file, num_threads=1,
                          experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        ref.allocate_tensors()
    ops = test.model.main.operators
    deleg = Delegation(test.delegation, [(d.name, getattr(d, "backend", "hardware")) for d in delegates],
                       [(i, op.name) for i, op in enumerate(ops)])
    return Interpreters(test, ref, deleg)


@dataclass
class Delegation:
    """Where the test interpreter runs each node (inference_diff's summary and JSON)."""

    report: DelegationReport
    delegates: list[tuple[str, str]]
    nodes: list[tuple[int, str]]

    def _as_diff(self) -> DiffResult:
        empty = LatencyStats.of(RunningStat())
        return DiffResult(0, empty, empty, [], self.report, self.delegates, self.nodes)

    def lines(self) -> list[str]:
        return delegation_lines(self._as_diff())

    def to_json(self) -> dict[str, Any]:
        return to_json(self._as_diff())["delegation"]


# --- latency -------------------------------------------------------------------------------
def latency_line(label: str, stat: RunningStat) -> str:
    """`Inference latency: avg=85169.7(us), std_dev=505(us)` as run_eval.cc prints it."""
    s = LatencyStats.of(stat)
    return f"{label} latency: avg={cpp_float(s.avg_us)}(us), std_dev={s.std_deviation_us}(us)"


def latency_json(stat: RunningStat) -> dict[str, Any]:
    s = LatencyStats.of(stat)
    return {"last_us": s.last_us, "max_us": s.max_us, "min_us": s.min_us, "sum_us": s.sum_us,
            "avg_us": s.avg_us, "std_deviation_us": s.std_deviation_us}


# --- progress and output ---------------------------------------------------------------------
@contextlib.contextmanager
def progress(total: int, description: str, enabled: bool | None = None) -> Iterator[Callable[[], None]]:
    """A rich progress bar on stderr when it is a terminal (or `enabled`); yields `advance()`."""
    if enabled is None:
        enabled = sys.stderr.isatty() and total > 1
    if not enabled:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)


def write_json(path: str, obj: Any) -> None:
    try:
        with open(path, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    except OSError as e:
        raise EvaluationError(f"--output_file_path: cannot write {path}: {e.strerror or e}") from None
