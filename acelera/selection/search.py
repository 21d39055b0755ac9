"""`select()`: every applicable configuration tried in order within the time budget, then ranked."""
from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from acelera.conformance.cases import classify_model
from acelera.conformance.tolerances import Tolerances
from acelera.core.errors import AceleraError
from acelera.selection.candidates import _label, plan
from acelera.selection.measure import _Runner
from acelera.selection.report import Selection
from acelera.selection.trial import (
    DEFAULT_ACCURACY_RUNS,
    DEFAULT_TIME_BUDGET,
    ERROR,
    FAIL,
    LEFTOVER_DELEGATE,
    MAX_WARNINGS,
    PASS,
    SKIPPED,
    SelectionError,
    Trial,
)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text and not isinstance(e, AceleraError) else text or type(e).__name__


def _stack_skip(t: Trial, base: Trial | None) -> str | None:
    """Why a stack is not worth trying, given its accelerator's own row."""
    if base is None:
        return "its accelerator alone was not planned"
    if base.status == SKIPPED:
        return f"{base.config.label} was skipped: {base.reason}"
    if base.status == ERROR:
        return f"{base.config.delegates[0]} fails alone: {base.reason}"
    if base.status == FAIL:
        return f"{base.config.delegates[0]} alone fails accuracy on the nodes it takes (the stack runs them too)"
    if base.cpu_nodes == 0:
        return (f"{base.config.delegates[0]} takes all {base.nodes} nodes alone: nothing is left for "
                f"{LEFTOVER_DELEGATE}")
    return None


def select(model_path: str | os.PathLike, registry: Any = None, *, time_budget: float = DEFAULT_TIME_BUDGET,
           runs: int | None = None, warmup: int | None = None, accuracy_runs: int = DEFAULT_ACCURACY_RUNS,
           tolerances: Tolerances | None = None, delegates: Iterable[str] | None = None,
           allow_emulated: bool = False, cores: int | None = None,
           progress: Callable[[str, int, int, Trial | None], Any] | None = None) -> Selection:
    """Try every applicable configuration for the model at `model_path` and rank them.

    `time_budget` (seconds, from the start): no configuration starts after it is spent (the
    rest are listed as not tried). `runs`/`warmup`: warm latency (default the tolerances'
    [latency] runs and warmup: 10 after 2). `accuracy_runs`: inference_diff runs per
    configuration. `delegates`: only configurations made of these. `progress(label, done,
    total, trial)` is called before each configuration (trial None) and after it.
    """
    from acelera.core.model import load_model
    from acelera.registrar.registry import get_registry

    registry = registry or get_registry()
    tolerances = tolerances or Tolerances()
    runs = tolerances.latency_runs if runs is None else runs
    warmup = tolerances.latency_warmup if warmup is None else warmup
    if not (time_budget >= 0 and math.isfinite(time_budget)):
        raise SelectionError(f"the time budget must be a finite number of seconds >= 0, got {time_budget}")
    for what, v, low in (("runs", runs, 1), ("warmup", warmup, 0), ("accuracy runs", accuracy_runs, 1)):
        if not low <= v <= 10_000:
            raise SelectionError(f"{what} must be in [{low}, 10000], got {v}")
    only = None if delegates is None else list(dict.fromkeys(delegates))
    for name in only or ():
        registry.spec(name)  # a RegistryError naming the installed ones
    start = time.monotonic()
    path = os.fspath(model_path)
    model = load_model(Path(path).read_bytes())
    kind = classify_model(model)
    numeric = "integer" if kind == "full-integer" else "float"
    cores = cores or os.cpu_count() or 1
    with warnings.catch_warnings():  # registry.enabled() warns of GPU fallbacks while probing flags
        warnings.simplefilter("ignore")
        configs, skipped = plan(registry, kind, only, cores)
    trials = [Trial(c) for c in configs]
    by_label = {t.config.label: t for t in trials}
    runner = _Runner(registry, path, model, numeric, tolerances, runs, warmup, accuracy_runs)
    for i, t in enumerate(trials):
        c = t.config
        if time.monotonic() - start >= time_budget:
            t.reason = f"time budget of {time_budget:g} s spent"
            continue
        if c.extends is not None:
            why = _stack_skip(t, by_label.get(c.extends))
            if why is not None:
                t.status, t.reason = SKIPPED, why
                continue
            best = _best_threads(trials)
            if best is not None:
                c.flags["num_threads"] = best
                c.label = _label(c.delegates, {"num_threads": best})
        if progress is not None:
            progress(c.label, i, len(trials), None)
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with np.errstate(all="ignore"):
                    runner.run(t)
            except Exception as e:  # noqa: BLE001  (a plugin's failure is this row's, not the command's)
                t.status, t.reason = ERROR, _one_line(e)
        t.seconds = time.monotonic() - t0
        t.warnings = list(dict.fromkeys(" ".join(str(w.message).split()) for w in caught))[:MAX_WARNINGS]
        if progress is not None:
            progress(c.label, i + 1, len(trials), t)
    sel = Selection(path, kind, numeric, trials + skipped, time_budget, time.monotonic() - start, cores, runs,
                    warmup, accuracy_runs, allow_emulated, tolerances.source, registry)
    passing = [t for t in trials if t.status == PASS]
    passing.sort(key=lambda t: (t.config.emulated and not allow_emulated, t.median_us, t.init_ms or 0.0))
    for r, t in enumerate(passing, 1):
        t.rank = r
    return sel


def _best_threads(trials: Sequence[Trial]) -> int | None:
    """The thread count of the fastest passing xnnpack-cpu-alone configuration that set one."""
    alone = [t for t in trials if t.config.delegates == (LEFTOVER_DELEGATE,) and t.status == PASS
             and isinstance(t.config.flags.get("num_threads"), int)]
    return min(alone, key=lambda t: t.median_us).config.flags["num_threads"] if alone else None
