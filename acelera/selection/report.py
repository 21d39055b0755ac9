"""The ranked table (`Selection`) and what is written from it: the winner as a `--config` TOML file,
as LiteRT-style Python, the whole table as JSON; `accuracy_text`, a trial's accuracy cell.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from acelera.selection.candidates import _parsed
from acelera.selection.formatting import _ms, _py, _toml_value, _us
from acelera.selection.measure import model_token
from acelera.selection.trial import NOT_TRIED, PASS, Configuration, SelectionError, Trial


@dataclass
class Selection:
    """The whole table, ranked, and the winner."""

    model: str
    model_type: str
    numeric: str
    trials: list[Trial]
    time_budget_s: float
    elapsed_s: float
    cores: int
    runs: int
    warmup: int
    accuracy_runs: int
    allow_emulated: bool
    tolerances_source: str = "defaults"
    registry: Any = field(default=None, repr=False, compare=False)

    @property
    def ranked(self) -> list[Trial]:
        return sorted((t for t in self.trials if t.rank is not None), key=lambda t: cast(int, t.rank))

    @property
    def winner(self) -> Trial | None:
        best = self.ranked[:1]
        return best[0] if best and self._eligible(best[0]) else None

    def _eligible(self, t: Trial) -> bool:
        return t.status == PASS and (self.allow_emulated or not t.config.emulated)

    @property
    def not_tried(self) -> list[str]:
        return [t.config.label for t in self.trials if t.status == NOT_TRIED]

    @property
    def budget_spent(self) -> bool:
        return bool(self.not_tried)

    # --- output ----------------------------------------------------------------------------
    def to_toml(self) -> str:
        """The winner as a `--config` file (flags under [tool.acelera], so it can also be pasted
        into pyproject.toml); a SelectionError when nothing passed."""
        w = self._need_winner()
        c = w.config
        name = Path(self.model).name
        lines = [f"# acelera select: the fastest configuration that passed accuracy for {name} on this machine",
                 (f"# {c.label}: {_us(w.median_us)} median latency, init {_ms(w.init_ms)}; "
                  f"ran: {w.where() or 'no nodes'}"),
                 f"# use: acelera benchmark --config THIS_FILE --graph {name} (every tool's --config), or paste",
                 "# the table into ./pyproject.toml"]
        if not c.delegates:
            lines.append("# no delegate: the CPU reference kernels were the fastest")
        if w.init_ms_serialized is not None:
            lines += [f"# {w.serialization}; to keep compiled data between runs add:",
                      '# delegate_serialize_dir = "/path/to/cache/dir"',
                      f'# delegate_serialize_token = "{model_token(self.model)}"']
        exact, order = self._toml_order(c)
        if not exact:
            lines.append(f"# the delegates apply in the order of their flags on the command line, which TOML cannot "
                         f"express: run with {' '.join(order)}")
        lines.append("[tool.acelera]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in c.flags.items()]
        return "\n".join(lines) + "\n"

    def _toml_order(self, c: Configuration) -> tuple[bool, list[str]]:
        from acelera.registrar.registry import get_registry

        registry = self.registry or get_registry()
        names = [s.name for s in registry.enabled(_parsed(registry, c.flags, ordered=False))]
        return names == list(c.delegates), [f"--{k}={_toml_value(v)}" for k, v in c.flags.items()]

    def to_python(self, model_path: str | None = None) -> str:
        """The winner as LiteRT-style Python: Interpreter(..., experimental_delegates=[load_delegate(...)])."""
        w = self._need_winner()
        c = w.config
        from acelera.registrar.registry import get_registry

        registry = self.registry or get_registry()
        calls = []
        for name in c.delegates:
            spec = registry.spec(name)
            own = {f.name for f in spec.flags} | {"num_threads"}
            opts = {k: v for k, v in c.flags.items()
                    if k in own and k not in spec.enabled_by and k not in c.selectors}
            opt_text = "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in opts.items()) + "}"
            calls.append(f"load_delegate({_py(name)}, {opt_text})" if opts else f"load_delegate({_py(name)})")
        threads = c.flags.get("num_threads")
        args = [f"model_path={_py(model_path or self.model)}",
                f"experimental_delegates=[{', '.join(calls)}]"]
        if isinstance(threads, int) and threads > 0:
            args.append(f"num_threads={threads}")
        # what was measured: nodes no delegate takes run on the reference kernels (AUTO would add xnnpack-cpu)
        args.append("experimental_op_resolver_type=OpResolverType.BUILTIN_REF")
        pad = " " * len("it = Interpreter(")
        return ("from acelera import Interpreter, OpResolverType, load_delegate\n"
                "it = Interpreter(" + (",\n" + pad).join(args) + ")\n")

    def _need_winner(self) -> Trial:
        w = self.winner
        if w is None:
            raise SelectionError(f"no configuration passed for {self.model}" + (
                " within the time budget" if self.budget_spent else ""))
        return w

    def to_json(self) -> dict[str, Any]:
        w = self.winner
        return {
            "model": self.model, "model_type": self.model_type, "numeric": self.numeric, "cores": self.cores,
            "time_budget_s": self.time_budget_s, "elapsed_s": round(self.elapsed_s, 3),
            "latency_method": f"median of {self.runs} invoke(s) after {self.warmup} warm-up invoke(s)",
            "accuracy_method": f"inference_diff, {self.accuracy_runs} run(s) of random inputs, model-case "
                               f"tolerances ({self.tolerances_source})",
            "allow_emulated": self.allow_emulated,
            "winner": w.config.label if w else None,
            "configurations": [t.to_dict() for t in self.ranked + [t for t in self.trials if t.rank is None]],
            "not_tried": self.not_tried,
            "toml": self.to_toml() if w else None,
            "python": self.to_python() if w else None,
        }


def accuracy_text(t: Trial) -> str:
    """One short cell: the worst output's error against what was allowed."""
    if not t.outputs:
        return ""
    worst = None
    for o in t.outputs:
        if "max_steps" in o:
            ratio = o["max_steps"] / o["allowed_steps"] if o["allowed_steps"] else (math.inf if o["max_steps"] else 0)
            text = f"{o['max_steps']:g}/{o['allowed_steps']} steps"
        elif "allowed" in o:
            err, allowed = float(o["max_abs_error"]), float(o["allowed"])
            ratio = err / allowed if allowed else (math.inf if err else 0)
            text = f"{err:.2g} <= {allowed:.2g}" if o["ok"] else f"{err:.2g} > {allowed:.2g}"
        else:
            ratio = math.inf if float(o["max_abs_error"]) else 0
            text = f"{float(o['max_abs_error']):g} (exact)"
        if worst is None or ratio > worst[0]:
            worst = (ratio, text)
    return worst[1] if worst else ""
