"""Native steps: the records a step that is only numba work becomes (`Native`, `Par`) and
their encoding (`encode`) for jit_native.run_native. Pure Python (numba or not)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

# A step that is only numba work is a `Native` record instead of a Python closure: consecutive
# records of a partition are encoded into one int64 array (M) with a float32 side array (F) and
# run by one call, run_native(A, M, F), where A is the partition's whole arena as float32. So a
# run of such steps costs one Python call and three argument conversions, however long it is.
#
# Record: [length, op, fields...]. Fields, by argument type:
#   int / bool          the value
#   float               index of the value in F
#   float32 ndarray     [where, offset, *shape]: where 0 = a view into the arena (offset in
#                       floats), 1 = a constant copied into F at offset
#   int ndarray (1-D)   [start, n]: the values inline in M at start (after the fixed fields)
# Each op's decoder (_n_*) reads its fields in the order its encoder wrote them.

OP_EPILOGUE, OP_EPILOGUE_ONTO, OP_EPILOGUE_PARTIAL, OP_DW_1X1, OP_DW, OP_POOL_MAX, OP_POOL_AVG = range(1, 8)
OP_FC_CHAIN, OP_RESIZE, OP_MEAN_HW, OP_ACT, OP_SOFTMAX, OP_GEMM, OP_COPY, OP_BINARY = range(8, 16)
OP_IM2COL_PADDED, OP_SIGMOID = 16, 17
OP_BINARY_ND, OP_UNARY, OP_MEAN_MID, OP_TRANSPOSE, OP_BMM, OP_LAYER_NORM = range(18, 24)
OP_SGEMM, OP_MEAN_ND = 24, 25


class Native:
    """A native step: op code and arguments (see above)."""

    __slots__ = ("op", "args")

    def __init__(self, op: int, *args: Any) -> None:
        self.op = op
        self.args = args


class Par:
    """One step in two halves (lists of closures and native records) that two threads may run
    at once; `whole` (default: first then second) is what runs on one thread."""

    __slots__ = ("first", "second", "whole")

    def __init__(self, first: list, second: list, whole: list | None = None) -> None:
        self.first, self.second = list(first), list(second)
        self.whole = list(whole) if whole is not None else self.first + self.second


def encode(records: list[Native], offset_of: Callable[[np.ndarray], int | None]) -> tuple[np.ndarray, np.ndarray]:
    """(M, F) for run_native from Native records; offset_of(array) -> its float offset in the
    arena, or None for an array outside it (a constant: copied into F)."""
    m: list[int] = []
    f: list = []
    flen = 0
    for r in records:
        fields: list = []
        tables: list = []
        for a in r.args:
            if isinstance(a, np.ndarray):
                if a.dtype == np.float32:
                    off = offset_of(a)
                    if off is not None:
                        fields += [0, int(off)]
                    else:
                        flat = np.ascontiguousarray(a, np.float32).reshape(-1)
                        pad = (-flen) % 16
                        if pad:
                            f.append(np.zeros(pad, np.float32))
                            flen += pad
                        fields += [1, flen]
                        f.append(flat)
                        flen += flat.size
                    fields += [int(d) for d in a.shape]
                else:
                    tables.append((len(fields), np.asarray(a, np.int64).reshape(-1)))
                    fields += [0, int(a.size)]
            elif isinstance(a, (bool, int, np.integer)):
                fields.append(int(a))
            elif isinstance(a, (float, np.floating)):
                f.append(np.array([a], np.float32))
                fields.append(flen)
                flen += 1
            else:
                raise TypeError(f"native argument of type {type(a).__name__}")
        start = len(m)
        pos = start + 2 + len(fields)
        for k, t in tables:
            fields[k] = pos
            pos += t.size
        m += [pos - start, r.op] + fields
        for _, t in tables:
            m += [int(v) for v in t]
    M = np.array(m, np.int64)
    F = np.concatenate(f).astype(np.float32) if f else np.zeros(1, np.float32)
    return M, F
