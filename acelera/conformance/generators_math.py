"""Conformance case generators of element-wise math (ATAN2, bitwise ops, shifts), random numbers,
complex parts and boolean reductions.

Generators as described in generators_kit.py (the contract, `DTYPES`, the tensor helpers);
generators_more.py imports this module to register them.
"""
from __future__ import annotations

import numpy as np

from acelera.conformance.generators_kit import FLOAT, _gen, _ivec, _out_int, _per_dtype, _raw
from acelera.conformance.templates import NP, OpTemplate, T, _int


# --- element-wise math -----------------------------------------------------------------------
@_gen("ATAN2", dtypes=("FLOAT32", "FLOAT16"))
def atan2(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((2, 3, 4), domain=(-2, 2)), T((2, 3, 4), domain=(-2, 2))), (T((2, 3, 4)),),
                       label="3d"),
            OpTemplate(op, (T((1, 4, 4, 3), domain=(-2, 2)), T((1, 4, 4, 3), const=True, domain=(-2, 2))),
                       (T((1, 4, 4, 3)),), label="4d_const_x")]


_BITWISE = ("INT8", "UINT8", "INT16", "INT32")


@_gen("BITWISE_XOR", "RIGHT_SHIFT", dtypes=_BITWISE)
def bitwise(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        bits = np.dtype(NP[dt]).itemsize * 8
        b_dom = (0, bits - 1) if op == "RIGHT_SHIFT" else None
        return [OpTemplate(op, (_raw((2, 3, 4), dt), _raw((2, 3, 4), dt, b_dom)), (_raw((2, 3, 4), dt),),
                           label="same_shape"),
                OpTemplate(op, (_raw((2, 3, 4), dt), _raw((1, 1, 4), dt, b_dom, const=True)), (_raw((2, 3, 4), dt),),
                           label="broadcast_const")]
    return _per_dtype(_BITWISE, make)


# --- random ----------------------------------------------------------------------------------
@_gen("RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", dtypes=("INT32",))
def random_(op: str) -> list[OpTemplate]:
    only = frozenset({"INT32"})  # the shape input is the only input
    return [OpTemplate(op, (_ivec([3, 4]),), (T((3, 4), dtype="FLOAT32"),), {"seed": 7, "seed2": 11}, "2d",
                       dtypes=only),
            OpTemplate(op, (_ivec([2, 2, 5]),), (T((2, 2, 5), dtype="FLOAT32"),), {"seed": 123, "seed2": 0},
                       "3d_seed_only", dtypes=only)]


@_gen("MULTINOMIAL", dtypes=FLOAT)
def multinomial(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((2, 5), domain=(-2, 2)), _int(6)), (_out_int((2, 6), "INT64"),),
                       {"seed": 3, "seed2": 9}, "int64_samples"),
            OpTemplate(op, (T((3, 4), domain=(-1, 3)), _int(4)), (_out_int((3, 4)),), {"seed": 1, "seed2": 2},
                       "int32_samples")]


# --- complex -----------------------------------------------------------------------------------
_COMPLEX = (np.array([[1.5, -0.25, 0.0], [3.0, -2.0, 0.5]]) + 1j * np.array([[0.5, 2.0, -1.0], [0.0, -0.75, 4.0]]))


@_gen("REAL", "IMAG", "COMPLEX_ABS", dtypes=("COMPLEX64",))
def complex_parts(op: str) -> list[OpTemplate]:
    only = frozenset({"COMPLEX64"})  # the values are complex
    return [OpTemplate(op, (T((2, 3), value=_COMPLEX.astype(np.complex64)),), (T((2, 3), dtype="FLOAT32"),),
                       label="2d", dtypes=only),
            OpTemplate(op, (T((6,), value=_COMPLEX.reshape(-1)[::-1].astype(np.complex64)),),
                       (T((6,), dtype="FLOAT32"),), label="1d", dtypes=only)]


# --- boolean reductions ------------------------------------------------------------------------
@_gen("REDUCE_ALL", "REDUCE_ANY", dtypes=("BOOL",))
def reduce_bool(op: str) -> list[OpTemplate]:
    dom = (-0.05, 1.0) if op == "REDUCE_ALL" else (-1.0, 0.05)  # mostly true / mostly false
    return [OpTemplate(op, (T((2, 3, 4), domain=dom), _int([1])), (T((2, 4)),), {"keep_dims": False}, "axis1"),
            OpTemplate(op, (T((1, 3, 3, 2), domain=dom), _int([1, 2])), (T((1, 1, 1, 2)),), {"keep_dims": True},
                       "hw_keep_dims")]
