"""Conformance case generators of array creation and shapes: SHAPE, RANK, FILL, RANGE, BROADCAST_TO,
BROADCAST_ARGS, ONE_HOT, BUCKETIZE, BITCAST.

Generators as described in generators_kit.py (the contract, `DTYPES`, the tensor helpers);
generators_more.py imports this module to register them.
"""
from __future__ import annotations

import numpy as np

from acelera.conformance.generators_kit import INTS, MOVE, _float_bits, _gen, _ivec, _out_int, _per_dtype, _raw
from acelera.conformance.templates import QUANT_DTYPES, OpTemplate, T, _int
from acelera.core.dtypes import TYPE_CODES


# --- array creation and shapes ---------------------------------------------------------------
@_gen("SHAPE", dtypes=MOVE + ("COMPLEX64",))
def shape(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 5, 3)),), (_out_int((4,)),), {"out_type": TYPE_CODES["INT32"]}, "4d_int32"),
            OpTemplate(op, (T((2, 7)),), (_out_int((2,), "INT64"),), {"out_type": TYPE_CODES["INT64"]}, "2d_int64")]


@_gen("RANK", dtypes=MOVE + ("COMPLEX64",))
def rank(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 5, 3)),), (_out_int(()),), label="4d"),
            OpTemplate(op, (T((6,)),), (_out_int(()),), label="1d")]


@_gen("FILL", dtypes=MOVE)
def fill(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (_int([2, 3, 4]), T(())), (T((2, 3, 4)),), label="3d", same_quant=True),
            OpTemplate(op, (_int([5, 2], "INT64"), T(())), (T((5, 2)),), label="int64_dims", same_quant=True)]


@_gen("RANGE", dtypes=("FLOAT32", "INT32", "INT64"))
def range_(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        def tpl(label, values, n):
            if dt == "FLOAT32":
                return OpTemplate(op, tuple(T((), value=np.float32(v)) for v in values), (T((n,)),), label=label)
            return OpTemplate(op, tuple(_ivec(v, dt) for v in values), (_out_int((n,), dt),), label=label)
        if dt == "FLOAT32":
            return [tpl("ascending", (0.5, 3.75, 0.25), 13), tpl("descending", (2.0, -1.0, -0.5), 6)]
        return [tpl("ascending", (-3, 10, 2), 7), tpl("descending", (5, -4, -3), 3)]
    return _per_dtype(("FLOAT32", "INT32", "INT64"), make)


@_gen("BROADCAST_TO", dtypes=MOVE)
def broadcast_to(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((3, 1)), _int([2, 3, 4])), (T((2, 3, 4)),), label="rank_up", min_version=2,
                       same_quant=True),
            OpTemplate(op, (T((1, 4, 1, 2)), _int([2, 4, 3, 2], "INT64")), (T((2, 4, 3, 2)),), label="int64_shape",
                       min_version=2, same_quant=True)]


@_gen("BROADCAST_ARGS", dtypes=("INT32", "INT64"))
def broadcast_args(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        return [OpTemplate(op, (_ivec([2, 1, 3], dt), _ivec([4, 1], dt)), (_out_int((3,), dt),), label="rank3_rank2"),
                OpTemplate(op, (_ivec([3, 5], dt), _ivec([1], dt, const=True)), (_out_int((2,), dt),),
                           label="const_ones")]
    return _per_dtype(("INT32", "INT64"), make)


@_gen("ONE_HOT", dtypes=("INT32", "INT64"))
def one_hot(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        def tpl(label, shape, depth, axis, vtype, on, off):
            rank = len(shape)
            a = rank if axis == -1 else axis
            out = shape[:a] + (depth,) + shape[a:]
            ins = (_raw(shape, dt, (-1, depth)), _int(depth), _raw((), vtype, const=True, value=on),
                   _raw((), vtype, const=True, value=off))
            return OpTemplate(op, ins, (_raw(out, vtype),), {"axis": axis}, label)
        return [tpl("last_axis_float", (2, 3), 4, -1, "FLOAT32", 1.0, 0.0),
                tpl("axis0_int32", (5,), 3, 0, "INT32", 7, -2),
                tpl("axis1_bool", (2, 3), 4, 1, "BOOL", True, False)]
    return _per_dtype(("INT32", "INT64"), make)


_BUCKETS = [-1.5, -0.25, 0.0, 0.5, 1.0, 10.0]


@_gen("BUCKETIZE", dtypes=("FLOAT32", "INT32", "INT64"))
def bucketize(op: str) -> list[OpTemplate]:
    # ModelBuilder writes vector options as int32 words: pass the boundaries' float32 bits
    return [OpTemplate(op, (T((2, 3, 4), domain=(-2, 2)),), (_out_int((2, 3, 4)),),
                       {"boundaries": _float_bits(_BUCKETS)}, "3d"),
            OpTemplate(op, (T((7,), domain=(-2, 2)),), (_out_int((7,)),), {"boundaries": _float_bits([0.3])},
                       "1d_one_boundary")]


_BitcastVariant = tuple[tuple[int, ...], str, tuple[int, ...]]
_BITCASTS: dict[str, list[_BitcastVariant]] = {  # case dtype -> (input shape, output type, output shape) per variant
    "FLOAT32": [((2, 3), "INT32", (2, 3)), ((2, 3), "UINT8", (2, 3, 4))],
    "INT32": [((2, 3), "FLOAT32", (2, 3)), ((3,), "INT16", (3, 2))],
    "INT8": [((2, 3), "UINT8", (2, 3)), ((2, 4), "INT32", (2,))],
    "UINT8": [((4, 2), "INT8", (4, 2)), ((3, 2), "INT16", (3,))],
    "INT16": [((2, 3), "UINT8", (2, 3, 2)), ((5,), "INT16", (5,))],
    "INT64": [((2, 3), "INT32", (2, 3, 2)), ((4,), "UINT8", (4, 8))],
    "FLOAT16": [((2, 3), "INT16", (2, 3)), ((3, 2), "FLOAT32", (3,))],
    "BOOL": [((2, 3), "UINT8", (2, 3)), ((2, 2), "INT16", (2,))],
}


@_gen("BITCAST", dtypes=tuple(_BITCASTS))
def bitcast(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        out = []
        for shape, to, out_shape in _BITCASTS[dt]:
            x = T(shape) if dt in QUANT_DTYPES else _raw(shape, dt)
            y = _out_int(out_shape, to) if to in INTS else T(out_shape, dtype=to)
            out.append(OpTemplate(op, (x,), (y,), label=f"to_{to.lower()}_{len(out_shape)}d"))
        return out
    return _per_dtype(tuple(_BITCASTS), make)
