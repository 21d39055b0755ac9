"""`acelera doctor`: each plugin's availability probe plus a tiny model through each delegate."""
from __future__ import annotations

import numpy as np

from acelera.core.errors import AceleraError
from acelera.core.interpreter import Interpreter
from acelera.registrar.registry import Registry
from acelera.samples import tiny_cnn

TOLERANCE = {"hardware": 5e-2, "emulated": 5e-2, "cpu": 1e-3}


def _run(model: bytes, x: np.ndarray, delegates) -> tuple[np.ndarray, Interpreter]:
    it = Interpreter(model_content=model, experimental_delegates=delegates)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]), it


def run_doctor(registry: Registry, log=print) -> int:
    """Print PASS/FAIL/SKIP per plugin; the exit code is 1 if anything FAILed."""
    failed = False
    model = tiny_cnn()
    x = np.random.default_rng(0).uniform(-1, 1, (1, 32, 32, 3)).astype(np.float32)
    want, ref = _run(model, x, [])
    n = len(ref.model.main.operators)
    for name, reason in registry.broken.items():
        failed = True
        log(f"FAIL  {name}: broken plugin: {reason}")
    for spec in registry.specs.values():
        avail = registry.availability(spec.name)
        if not avail.ok:
            log(f"SKIP  {spec.name} ({spec.backend}): unavailable: {avail.reason}")
            continue
        try:
            got, it = _run(model, x, [registry.create(spec.name)])
            err = float(np.max(np.abs(got - want)))
            took = len(it.delegation.nodes_of(spec.name))
            ok = err <= TOLERANCE.get(spec.backend, 1e-3)
            failed |= not ok
            log(f"{'PASS' if ok else 'FAIL'}  {spec.name} ({spec.backend}): tiny_cnn max|err| {err:.3g}, "
                f"took {took} of {n} nodes")
        except AceleraError as e:
            failed = True
            log(f"FAIL  {spec.name} ({spec.backend}): {e}")
    return 1 if failed else 0
