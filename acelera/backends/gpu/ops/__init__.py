"""The partition compiler's op handlers, one module per op family.

Each family module keeps its handlers in its own `HANDLERS` table (`common.Handlers`, filled by
its `@handles(...)` decorators). `HANDLERS` here merges the tables of `FAMILIES`, the explicit
list of those modules; the compiler imports it. A handler module imports the compiler only for
type hints, so nothing cycles.
"""
from __future__ import annotations

from acelera.backends.gpu.ops import conv, elementwise, layout_ops, logical, lstm
from acelera.backends.gpu.ops.common import Handler

FAMILIES = (conv, elementwise, layout_ops, logical, lstm)


def _merge() -> dict[str, Handler]:
    table: dict[str, Handler] = {}
    for family in FAMILIES:
        for op, fn in family.HANDLERS.items():
            if op in table:
                raise RuntimeError(f"{op} has two GPU handlers ({family.__name__})")
            table[op] = fn
    return table


#: op name -> handler, every op the partition compiler implements
HANDLERS: dict[str, Handler] = _merge()
