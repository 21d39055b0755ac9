"""Compact declaration of op-table rows shared by the first-party plugins' specs."""
from __future__ import annotations

from acelera.core.delegate import Constraint, OpSupport, OpTable

F32 = frozenset({"FLOAT32"})
GPU_TYPES = frozenset({"FLOAT32", "FLOAT16", "INT8", "UINT8"})
Q8 = frozenset({"INT8", "UINT8"})


def table(delegate: str, spec: str, dtypes: frozenset[str], constraints: dict | None = None) -> OpTable:
    """Rows from lines of 'OP[,OP...] max_version'; constraints map op -> tuple of Constraint."""
    rows = []
    for line in spec.strip().splitlines():
        names, version = line.rsplit(maxsplit=1)
        for op in names.split(","):
            op = op.strip()
            rows.append(OpSupport(op, int(version), dtypes, tuple((constraints or {}).get(op, ()))))
    return OpTable.of(rows, delegate)


__all__ = ["Constraint", "table", "F32", "GPU_TYPES", "Q8"]
