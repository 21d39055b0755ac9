"""What the newer ops' conformance case generators share (issue 13): the contract, the record of
what they build (`DTYPES`, `NOT_GENERATED`) and the tensor helpers.

Same contract as the generators in cases.py: `@generator("OP")` functions returning
OpTemplate variants, materialized by `build_graph` for one case dtype. The first non-constant
input of every variant is the op's main input, so a case's dtype is what a delegate's op table
checks (`delegate.data_type`): index, shape and id inputs that come first are constants.

Integer arithmetic ops (bitwise, shifts, StableHLO element-wise, shape and index producers)
take raw integer tensors (role "int") of the case dtype, never quantized; ops that only move,
pick or compare values take the case dtype's data tensors, quantized with one shared
quantization (`same_quant`) in INT8 / UINT8 / INT16 cases.

`DTYPES` lists, per op, the case dtypes the variants are built for (every type the reference
kernel and LiteRT accept that the suite can materialize); `NOT_GENERATED` names the ops with a
reference kernel but no generator, and why.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from acelera.conformance.templates import NP, OpTemplate, T, generator

__all__ = ["DTYPES", "NOT_GENERATED"]

FLOAT = ("FLOAT32",)
INTS = ("INT8", "UINT8", "INT16", "INT32", "INT64", "UINT64")
#: data types of ops that only move elements (quantized cases share one quantization)
MOVE = ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT32", "INT64", "BOOL")

DTYPES: dict[str, tuple[str, ...]] = {}

NOT_GENERATED: dict[str, str] = {
    "RFFT2D": "its COMPLEX64 output: the suite's comparison (tolerances.compare) has no complex rule",
    "SKIP_GRAM": "STRING input and output",
    "DENSIFY": "its input is a constant sparse tensor (the T model has no sparsity)",
    "IF": "subgraphs", "WHILE": "subgraphs", "CALL_ONCE": "subgraphs",
    "STABLEHLO_COMPOSITE": "subgraphs", "STABLEHLO_CASE": "subgraphs",
    "VAR_HANDLE": "resource tensors", "READ_VARIABLE": "resource tensors", "ASSIGN_VARIABLE": "resource tensors",
    "HASHTABLE": "resource tensors", "HASHTABLE_FIND": "resource tensors", "HASHTABLE_IMPORT": "resource tensors",
    "HASHTABLE_SIZE": "resource tensors",
    "STABLEHLO_SCATTER": "subgraphs (its update computation)",
    "STABLEHLO_REDUCE_WINDOW": "subgraphs (its reduction body)",
}


def _gen(*ops: str, dtypes: Iterable[str]) -> Callable:
    """@generator(*ops) that also records the case dtypes the variants are built for."""
    dts = tuple(dtypes)

    def deco(fn):
        for op in ops:
            DTYPES[op] = dts
        return generator(*ops)(fn)
    return deco


def _per_dtype(dtypes: Iterable[str], make: Callable[[str], list[OpTemplate]]) -> list[OpTemplate]:
    """Variants built separately for each case dtype (tensor types fixed to it)."""
    return [replace(t, dtypes=frozenset({dt})) for dt in dtypes for t in make(dt)]


def _bounds(dt: str) -> tuple[int, int]:
    if dt == "INT64":
        return -(2 ** 62), 2 ** 62  # random integers are drawn as int64
    info = np.iinfo(NP[dt])
    return int(info.min), int(info.max)


def _raw(shape: tuple[int, ...], dt: str, domain: tuple[float, float] | None = None, *, const: bool = False,
         value=None) -> T:
    """A tensor of type `dt` with raw values: integers as unquantized role "int" tensors (random in
    `domain`, the type's whole range by default), floats and bools as data."""
    if dt in INTS:
        return T(shape, role="int", const=const, value=None if value is None else np.asarray(value, NP[dt]),
                 domain=domain or _bounds(dt), dtype=dt)
    return T(shape, const=const, value=value, domain=domain or (-2.0, 2.0), dtype=dt)


def _ivec(values, dtype: str = "INT32", *, const: bool = False) -> T:
    """An int parameter with fixed contents; a graph input unless `const`."""
    a: np.ndarray = np.asarray(values, NP[dtype])
    return T(tuple(a.shape), role="int", const=const, value=a, dtype=dtype)


def _out_int(shape: tuple[int, ...], dtype: str = "INT32") -> T:
    return T(shape, role="int", dtype=dtype)


def _float_bits(values) -> list[int]:
    """float32 values as the int32 words ModelBuilder writes into a float vector option."""
    return [int(v) for v in np.asarray(values, np.float32).view(np.int32)]
