"""`acelera doctor`: each plugin's availability probe plus a tiny model through each delegate.

The tiny model is the float tiny_cnn for delegates that take float models, and its
full-integer (int8) form for those that take quantized models only (Hexagon): every
delegate is exercised on a model it accepts. A delegate that takes none of its nodes is
reported N/A with its reasons, not PASS. Quantized outputs are compared in quantization
steps (at most 1).

With `--strict` (what CI runs) a first-party delegate (one acelera ships, under
acelera.plugins) that is unavailable on this machine is a FAIL, not a SKIP. A delegate that
crashes (any exception, sys.exit() included; not Ctrl-C) is a FAIL and the others still run."""
from __future__ import annotations

import numpy as np

from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.registrar.registry import Registry
from acelera.samples import tiny_cnn

TOLERANCE = {"hardware": 5e-2, "emulated": 5e-2, "cpu": 1e-3}


def _run(model: bytes, x: np.ndarray, delegates) -> tuple[np.ndarray, Interpreter]:
    it = Interpreter(model_content=model, experimental_delegates=delegates,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]), it


def _status(text: str):
    """A spinner on stderr while a step runs (a terminal only; nothing in logs)."""
    from rich.console import Console

    return Console(stderr=True).status(text)


def first_party(registry: Registry, name: str) -> bool:
    """Whether acelera itself ships the plugin that declares delegate `name`."""
    plugin = registry.plugin_of(name)
    return plugin is not None and plugin.module.startswith("acelera.plugins.")


def _indented(lines: list[str], log) -> None:
    for line in lines:
        log(f"      {line}")


def run_doctor(registry: Registry, log=print, strict: bool = False) -> int:
    """Print PASS/FAIL/SKIP per plugin; the exit code is 1 if anything FAILed. `strict`: an
    unavailable first-party delegate FAILs (others still SKIP)."""
    failed = False
    missing = []
    cases = {}
    for kind, quantized in (("float32", False), ("full-integer", True)):
        model = tiny_cnn(quantized=quantized)
        x = np.random.default_rng(0).uniform(-1, 1, (1, 32, 32, 3)).astype(np.float32)
        if quantized:
            x = np.clip(np.round(x * 127.5), -128, 127).astype(np.int8)
        want, ref = _run(model, x, [])
        cases[kind] = (model, x, want, len(ref.model.main.operators))
    for name, reason in registry.broken.items():
        failed = True
        log(f"FAIL  {name}: broken plugin: {reason}")
    for spec in registry.specs.values():
        avail = registry.availability(spec.name)
        if not avail.ok:
            first = (avail.reason.splitlines() or ["no reason given"])[0]
            if strict and first_party(registry, spec.name):
                failed = True
                missing.append(spec.name)
                log(f"FAIL  {spec.name} ({spec.backend}): first-party delegate unavailable: {first}")
            else:
                log(f"SKIP  {spec.name} ({spec.backend}): unavailable: {first}")
            _indented(avail.reason.splitlines()[1:], log)
            continue
        kind = "float32" if "float32" in spec.model_types or not spec.model_types else "full-integer"
        model, x, want, n = cases[kind]
        label = "tiny_cnn" if kind == "float32" else "tiny_cnn (int8)"
        try:
            with _status(f"doctor: running {label} on {spec.name}"):
                got, it = _run(model, x, [registry.create(spec.name)])
            err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            took = len(it.delegation.nodes_of(spec.name))
            limit = 1.0 if kind == "full-integer" else TOLERANCE.get(spec.backend, 1e-3)
            unit = " steps" if kind == "full-integer" else ""
            if took == 0:
                why = sorted({r for rs in it.delegation.rejections.values() for d, r in rs if d == spec.name})
                log(f"N/A   {spec.name} ({spec.backend}): took none of {label}'s {n} nodes"
                    + (f" ({'; '.join(why[:2])})" if why else ""))
                continue
            ok = err <= limit
            failed |= not ok
            log(f"{'PASS' if ok else 'FAIL'}  {spec.name} ({spec.backend}): {label} max|err| {err:.3g}{unit}, "
                f"took {took} of {n} nodes")
            _indented(avail.reason.splitlines(), log)  # what it runs on, when the probe says
        except AceleraError as e:
            failed = True
            log(f"FAIL  {spec.name} ({spec.backend}): {e}")
        except BaseException as e:  # noqa: BLE001  (a plugin's bug, sys.exit() included, fails only it)
            if isinstance(e, KeyboardInterrupt):
                raise
            failed = True
            what = f"called sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"{type(e).__name__}: {e}"
            log(f"FAIL  {spec.name} ({spec.backend}): the delegate crashed: {what}")
    if missing:
        log(f"doctor --strict: {len(missing)} first-party delegate(s) unavailable here: {', '.join(missing)}")
    return 1 if failed else 0
