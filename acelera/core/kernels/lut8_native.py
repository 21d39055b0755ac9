"""numba loop of the tabulated quantized 8-bit binary ops (binary_common.lut8_kernel: ADD, SUB,
MUL, ... of int8/uint8 tensors through a 256x256 table built with LiteRT's fixed-point formulas):
out[i] = table[a[i] << 8 | b[i]] over the broadcasts that collapse to a 2-D grid, in one pass
without index temporaries.

The jitted function lives in this module and calls none of another module (numba's cache watches
only the defining file). numba is imported, and the loop compiled (or loaded from numba's on-disk
cache), on first use: `lut8_gather_kernel()` returns it, or None when numba cannot be imported
(the caller then runs its numpy path).
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _lut8_gather(table, a, b, out, rows, cols, sar, sac, sbr, sbc):  # pragma: no cover - compiled
    """table (65536,) indexed by a << 8 | b; a, b flat uint8, out flat (rows * cols): output
    element (r, c) reads a[r * sar + c * sac] and b[r * sbr + c * sbc] (strides of 0 broadcast)."""
    i = 0
    for r in range(rows):
        pa = r * sar
        pb = r * sbr
        for c in range(cols):
            out[i] = table[(np.int64(a[pa + c * sac]) << 8) | np.int64(b[pb + c * sbc])]
            i += 1


def broadcast_plan(ash: tuple, bsh: tuple) -> tuple | None:
    """(output shape, rows, cols, a row stride, a column stride, b row stride, b column stride)
    when the broadcast of ash and bsh collapses to a (rows, cols) grid (same shapes, a
    single-element operand, a trailing-dimension vector, a per-row column, ...), else None."""
    try:
        shape = tuple(np.broadcast_shapes(ash, bsh))
    except ValueError:
        return None
    n = len(shape)
    pa, pb = (1,) * (n - len(ash)) + tuple(ash), (1,) * (n - len(bsh)) + tuple(bsh)
    groups: list[list] = []  # [a full, b full, size] over the dimensions above 1, merged
    for d in range(n):
        if shape[d] == 1:
            continue
        key = (pa[d] != 1, pb[d] != 1)
        if groups and groups[-1][0] == key:
            groups[-1][1] *= shape[d]
        else:
            groups.append([key, shape[d]])
    if len(groups) > 2:
        return None
    while len(groups) < 2:
        groups.insert(0, [(True, True), 1])
    (ra, rb), rows = groups[0]
    (ca, cb), cols = groups[1]
    a_cols, b_cols = (cols if ca else 1), (cols if cb else 1)
    return (shape, rows, cols, a_cols if ra else 0, int(ca), b_cols if rb else 0, int(cb))


_KERNEL: Any = None
_FAILED = False


def lut8_gather_kernel() -> Any:
    """The compiled table gather (None without numba)."""
    global _KERNEL, _FAILED
    if _KERNEL is None and not _FAILED:
        try:
            import numba
        except Exception:  # pragma: no cover - numba is a dependency
            _FAILED = True
            return None
        _KERNEL = numba.njit(cache=True, nogil=True, error_model="numpy")(_lut8_gather)
    return _KERNEL
