"""Which configurations apply to a model: the delegates that are available and take its type, the
flags that select each alone, its variants (threads, precision) and stacks, in the order tried.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from acelera.conformance.cases import accepts
from acelera.selection.formatting import _toml_value
from acelera.selection.trial import LEFTOVER_DELEGATE, PRECISION_FLAG, SKIPPED, Configuration, Trial


def thread_counts(cores: int | None = None) -> list[int]:
    """1, 2 and the machine's core count when larger."""
    cores = cores or os.cpu_count() or 1
    return sorted({1, 2, cores})


def _parsed(registry: Any, flags: Mapping[str, Any], ordered: bool = True) -> Any:
    """ParsedFlags holding `flags`; `ordered`: argv positions in the mapping's order (delegate rank)."""
    from acelera.registrar.flags import ParsedFlags

    parsed = ParsedFlags(registry.flagset.flags)
    for i, (k, v) in enumerate(flags.items()):
        parsed.values[k] = v
        parsed.sources[k] = "select"
        parsed.positions[k] = i + 1 if ordered else 0
    return parsed


def _selecting_flags(registry: Any, spec: Any) -> tuple[dict[str, Any], tuple[str, ...]] | str:
    """The flags that enable `spec` alone (its bool enabling flag, plus a choice flag where
    delegates share it: gpu_backend), or why none do."""
    flag = next((f for f in spec.enabled_by if registry.flagset.flags[f].type is bool), None)
    if flag is None:
        needs = ", ".join(f"--{f}" for f in spec.enabled_by) or "a flag"
        return f"needs {needs} (e.g. a native delegate library); not tried"
    base = {flag: True}
    if [s.name for s in registry.enabled(_parsed(registry, base))] == [spec.name]:
        return base, ()
    for f in spec.flags:
        for choice in f.choices or ():
            if choice == f.default:
                continue
            trial = {**base, f.name: choice}
            if [s.name for s in registry.enabled(_parsed(registry, trial))] == [spec.name]:
                return trial, (f.name,)
    return f"--{flag} does not select it alone (another delegate takes precedence)"


def _label(names: Sequence[str], options: Mapping[str, Any]) -> str:
    head = " + ".join(names) if names else "reference (no delegate)"
    opts = ", ".join(f"{k}={_toml_value(v)}" for k, v in options.items())
    return f"{head} ({opts})" if opts else (f"{head} (defaults)" if names else head)


def plan(registry: Any, model_type: str, only: Iterable[str] | None = None,
         cores: int | None = None) -> tuple[list[Configuration], list[Trial]]:
    """The configurations to try, in order, and rows for delegates that cannot apply (with why)."""
    only_set = set(only) if only is not None else None
    skipped: list[Trial] = []
    alone: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {}
    for spec in registry.specs.values():
        if only_set is not None and spec.name not in only_set:
            continue

        def skip(reason: str, spec=spec) -> None:
            c = Configuration(_label([spec.name], {}), (spec.name,), {}, emulated=spec.backend == "emulated")
            skipped.append(Trial(c, SKIPPED, reason, backends=(spec.backend,)))

        avail = registry.availability(spec.name)
        if not avail.ok:
            skip(f"unavailable: {avail.reason}")
            continue
        if not accepts(spec.model_types, model_type):
            skip(f"{model_type} model; {spec.name} takes {', '.join(sorted(spec.model_types))}")
            continue
        sel = _selecting_flags(registry, spec)
        if isinstance(sel, str):
            skip(sel)
            continue
        alone[spec.name] = sel
    configs = [Configuration(_label([], {}), (), {}, phase=0)]
    leftover = alone.get(LEFTOVER_DELEGATE)
    for emulated in (False, True):
        shift = 3 if emulated else 0
        for name, (flags, selectors) in alone.items():
            spec = registry.spec(name)
            if (spec.backend == "emulated") != emulated:
                continue
            default = Configuration(_label([name], {}), (name,), dict(flags), 1 + shift, emulated, None, selectors)
            configs.append(default)
            variants: list[dict[str, Any]] = []
            if spec.backend == "cpu":
                variants += [{"num_threads": n} for n in thread_counts(cores)]
            own = {f.name: f for f in spec.flags}
            if PRECISION_FLAG in own and own[PRECISION_FLAG].type is bool:
                variants.append({PRECISION_FLAG: not own[PRECISION_FLAG].default})
            for v in variants:
                configs.append(Configuration(_label([name], v), (name,), {**flags, **v}, 2 + shift, emulated,
                                             None, selectors))
            if spec.backend != "cpu" and leftover is not None and name != LEFTOVER_DELEGATE:
                names = (name, LEFTOVER_DELEGATE)
                configs.append(Configuration(_label(names, {}), names, {**flags, **leftover[0]}, 3 + shift,
                                             emulated, default.label, selectors + leftover[1]))
    configs.sort(key=lambda c: c.phase)  # stable: registry order within a phase
    return configs, skipped
