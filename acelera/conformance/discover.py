"""The declaration of a delegate that declares none: native delegates hosted through LiteRT.

A native TFLite delegate (a .so with TFLite's external delegate ABI) says nothing about the ops
it takes; the litert plugin asks LiteRT node by node. To certify one, the suite builds its
declaration from those answers: for every op the suite has a generator for and the CPU
reference runs, and every case dtype the reference kernel accepts, the op's variants are built
at version 1 (then the first one at the reference's highest version) until the delegate takes
one; the versions it takes that variant at give the row's range. Every row carries one constraint, the
delegate's own answer, so each generated variant is an op case when the delegate takes it and a
negative case when it does not, and the usual version/dtype negative cases probe just outside.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from acelera.conformance import cases as C
from acelera.core.delegate import Constraint, OpSupport, OpTable
from acelera.core.errors import AceleraError

TAKEN = "taken by the native delegate (asked through LiteRT)"


def _takes(delegate: Any, tpl: C.OpTemplate, dtype: str, version: int) -> bool:
    from acelera.core.executor import Executor
    from acelera.core.model import load_model

    try:
        built = C.build_graph([tpl], dtype, version, np.random.default_rng(0), calibrate=False)
        takes_model = getattr(delegate, "takes_model", None)
        if takes_model is not None:  # the built model is already standalone: ask about it directly
            return bool(takes_model(built.model).ok)
        ctx = Executor(load_model(built.model).main).node_context(0)
        return bool(delegate.is_node_supported(ctx).ok)
    except AceleraError:
        return False


def discover_table(delegate: Any, dtypes: Iterable[str] | None = None) -> OpTable:
    """An op table of what `delegate` takes among the cases the suite can build (at `dtypes`,
    else the delegate's `discover_dtypes`, else every case dtype)."""
    from acelera.core.kernels.registry import registered

    if dtypes is None:
        dtypes = getattr(delegate, "discover_dtypes", None) or C.CASE_DTYPES
    dtypes = tuple(dtypes)
    reference = registered()
    accepted = lambda node: bool(delegate.is_node_supported(node).ok)  # noqa: E731
    rows = []
    for op in sorted(C.GENERATORS):
        kernel = reference.get(op)
        tpls = C.templates_for(op) or []
        if kernel is None or not tpls:
            continue
        top = kernel.max_version
        versions: set[int] = set()
        taken_dtypes: set[str] = set()
        for dt in dtypes:
            if kernel.dtypes and dt not in kernel.dtypes:
                continue
            usable = [t for t in tpls if C._applies(t, dt)]
            found = next((t for t in usable if t.min_version <= 1 and _takes(delegate, t, dt, 1)), None)
            if found is None and top > 1:  # a delegate that only takes newer versions
                found = next((t for t in usable[:1] if _takes(delegate, t, dt, top)), None)
            if found is None:
                continue
            taken_dtypes.add(dt)
            versions.update(v for v in range(found.min_version, top + 1) if _takes(delegate, found, dt, v))
        if taken_dtypes and versions:
            rows.append(OpSupport(op, max_version=max(versions), min_version=min(versions),
                                  dtypes=frozenset(taken_dtypes), constraints=(Constraint(TAKEN, accepted),)))
    return OpTable.of(rows, getattr(delegate, "name", "delegate"))
