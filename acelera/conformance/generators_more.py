"""Conformance case generators for the newer reference kernels (issue 13).

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
from flatbuffers import flexbuffers

from acelera.conformance.templates import (
    NP,
    QUANT_DTYPES,
    OpTemplate,
    T,
    _int,
    _out_size,
    generator,
)
from acelera.core.dtypes import TYPE_CODES

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


_HLO_TYPES = ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT32", "INT64", "BOOL")
_HLO_AND_TYPES = ("INT8", "UINT8", "INT16", "INT32", "INT64", "BOOL")
_HLO_SHIFT_TYPES = ("INT8", "INT16", "INT32")


@_gen("STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM", dtypes=_HLO_TYPES)
def stablehlo_binary(op: str) -> list[OpTemplate]:
    return _per_dtype(_HLO_TYPES, lambda dt: _hlo_binary(op, dt))


@_gen("STABLEHLO_AND", dtypes=_HLO_AND_TYPES)
def stablehlo_and(op: str) -> list[OpTemplate]:
    return _per_dtype(_HLO_AND_TYPES, lambda dt: _hlo_binary(op, dt))


@_gen("STABLEHLO_SHIFT_LEFT", dtypes=_HLO_SHIFT_TYPES)
def stablehlo_shift_left(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        bits = np.dtype(NP[dt]).itemsize * 8
        return [OpTemplate(op, (_raw((2, 3, 4), dt), _raw((2, 3, 4), dt, (0, bits - 1))), (_raw((2, 3, 4), dt),),
                           label="3d"),
                OpTemplate(op, (_raw((6,), dt), _raw((6,), dt, (0, 3), const=True)), (_raw((6,), dt),),
                           label="1d_const_shift")]
    return _per_dtype(_HLO_SHIFT_TYPES, make)


def _hlo_binary(op: str, dt: str) -> list[OpTemplate]:
    return [OpTemplate(op, (_raw((2, 3, 4), dt), _raw((2, 3, 4), dt)), (_raw((2, 3, 4), dt),), label="3d"),
            OpTemplate(op, (_raw((1, 4, 4, 2), dt), _raw((1, 4, 4, 2), dt, const=True)), (_raw((1, 4, 4, 2), dt),),
                       label="4d_const")]


@_gen("STABLEHLO_PAD", dtypes=_HLO_TYPES)
def stablehlo_pad(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        def tpl(label, shape, lo, hi, interior):
            out = tuple(a + b + n + max(n - 1, 0) * p for n, a, b, p in zip(shape, lo, hi, interior))
            opts = {"edge_padding_low": lo, "edge_padding_high": hi, "interior_padding": interior}
            return OpTemplate(op, (_raw(shape, dt), _raw((), dt, const=True)), (_raw(out, dt),), opts, label)
        return [tpl("edges_2d", (3, 4), [1, 0], [2, 1], [0, 0]),
                tpl("interior_3d", (2, 3, 2), [0, 1, 0], [1, 0, 0], [1, 2, 1]),
                tpl("negative_edges", (4, 5), [-1, 2], [1, -2], [0, 1])]
    return _per_dtype(_HLO_TYPES, make)


@_gen("STABLEHLO_GATHER", dtypes=MOVE)
def stablehlo_gather(op: str) -> list[OpTemplate]:
    def tpl(label, shape, indices, index_type, out, ivd, offset, collapsed, start_map, sizes):
        opts = {"offset_dims": offset, "collapsed_slice_dims": collapsed, "start_index_map": start_map,
                "index_vector_dim": ivd, "slice_sizes": sizes, "indices_are_sorted": False}
        return OpTemplate(op, (T(shape), _int(indices, index_type)), (T(out),), opts, label, same_quant=True)
    return [tpl("rows", (5, 3), [[4], [1]], "INT32", (2, 3), 1, [1], [0], [0], [1, 3]),
            tpl("clamped_windows_int64", (4, 5, 2), [[0, 1], [3, 4], [2, 2]], "INT64", (3, 2, 2), 1, [1, 2], [0],
                [0, 1], [1, 2, 2]),
            tpl("implicit_index_vector", (6,), [5, 0, 2, 3], "INT32", (4, 2), 1, [1], [], [0], [2])]


_WINDOW_TYPES = ("FLOAT32", "INT8", "UINT8", "INT16", "INT32", "INT64")
_ADD, _MUL, _MIN, _MAX, _ALL, _ANY = 1, 2, 3, 4, 5, 6  # ReduceWindowFunction


@_gen("REDUCE_WINDOW", dtypes=_WINDOW_TYPES + ("BOOL",))
def reduce_window(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        def tpl(label, shape, window, strides, dilations, fn, init, domain=(-5, 5)):
            eff = [(w - 1) * d + 1 for w, d in zip(window, dilations)]
            out = tuple((n - e) // s + 1 for n, e, s in zip(shape, eff, strides))
            ins = (_raw(shape, dt, domain), _raw((), dt, const=True, value=init), _int(window, "INT64"),
                   _int(strides, "INT64"), _int(dilations, "INT64"))
            return OpTemplate(op, ins, (_raw(out, dt),), {"reduce_function": fn}, label)
        if dt == "BOOL":
            return [tpl("all_2x2", (4, 5), [2, 2], [1, 1], [1, 1], _ALL, True, (-0.2, 1.0)),
                    tpl("any_strided", (1, 6, 6, 2), [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], _ANY, False,
                        (-1.0, 0.1))]
        low = -3.0e38 if dt == "FLOAT32" else _bounds(dt)[0]
        return [tpl("sum_2x2", (4, 5), [2, 2], [1, 1], [1, 1], _ADD, 0),
                tpl("max_strided", (1, 6, 6, 2), [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], _MAX, low),
                tpl("prod_dilated", (7, 2), [3, 1], [1, 1], [2, 1], _MUL, 1, (-2, 2))]
    return _per_dtype(_WINDOW_TYPES + ("BOOL",), make)


_PHILOX, _THREEFRY = 1, 2  # RngAlgorithm


@_gen("STABLEHLO_RNG_BIT_GENERATOR", dtypes=("UINT64",))
def stablehlo_rng_bit_generator(op: str) -> list[OpTemplate]:
    def tpl(label, state, algorithm, out_shape, out_type):
        outs = (_out_int((len(state),), "UINT64"), _out_int(out_shape, out_type))
        return OpTemplate(op, (_ivec(state, "UINT64"),), outs, {"algorithm": algorithm}, label,
                          dtypes=frozenset({"UINT64"}))
    return [tpl("philox_int32", [0x1234_5678_9ABC_DEF0, 7], _PHILOX, (3, 5), "INT32"),
            tpl("philox_state3_int64", [42, 2**64 - 3, 0xFFFF_0000_1111], _PHILOX, (2, 3), "INT64"),
            tpl("threefry_uint64", [99, 12345], _THREEFRY, (7,), "UINT64")]


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


# --- data movement ---------------------------------------------------------------------------
@_gen("REVERSE_V2", dtypes=MOVE)
def reverse_v2(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((1, 4, 5, 3)), _int([2])), (T((1, 4, 5, 3)),), label="axis2", same_quant=True),
            OpTemplate(op, (T((3, 4, 2)), _int([0, 1])), (T((3, 4, 2)),), label="axes01", same_quant=True),
            OpTemplate(op, (T((6, 5)), _int([-1])), (T((6, 5)),), label="negative_axis", same_quant=True)]


_REVERSE_SEQUENCE_TYPES = ("FLOAT32", "UINT8", "INT16", "INT32", "INT64")


@_gen("REVERSE_SEQUENCE", dtypes=_REVERSE_SEQUENCE_TYPES)
def reverse_sequence(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((3, 5, 2)), _int([5, 2, 0])), (T((3, 5, 2)),), {"seq_dim": 1, "batch_dim": 0},
                       "seq1_batch0", same_quant=True),
            OpTemplate(op, (T((4, 2, 3)), _int([1, 3], "INT64")), (T((4, 2, 3)),), {"seq_dim": 0, "batch_dim": 1},
                       "seq0_batch1_int64", same_quant=True)]


_MATRIX_TYPES = ("FLOAT32", "INT8", "UINT8", "INT16", "INT32", "INT64")


@_gen("MATRIX_DIAG", dtypes=_MATRIX_TYPES)
def matrix_diag(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((4,)),), (T((4, 4)),), label="vector", same_quant=True),
            OpTemplate(op, (T((2, 3, 5)),), (T((2, 3, 5, 5)),), label="batched", same_quant=True)]


@_gen("MATRIX_SET_DIAG", dtypes=_MATRIX_TYPES)
def matrix_set_diag(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((4, 4)), T((4,))), (T((4, 4)),), label="square", same_quant=True),
            OpTemplate(op, (T((2, 3, 5)), T((2, 3))), (T((2, 3, 5)),), label="batched_wide", same_quant=True),
            OpTemplate(op, (T((5, 2)), T((2,), const=True)), (T((5, 2)),), label="tall_const_diag", same_quant=True)]


@_gen("DYNAMIC_UPDATE_SLICE", dtypes=MOVE)
def dynamic_update_slice(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((4, 5)), T((2, 3)), _int([1, 2])), (T((4, 5)),), label="2d", same_quant=True),
            OpTemplate(op, (T((1, 4, 4, 3)), T((1, 2, 2, 3)), _ivec([0, 3, -1, 0])), (T((1, 4, 4, 3)),),
                       label="4d_clamped_runtime_start", same_quant=True),
            OpTemplate(op, (T((3, 6)), T((3, 2)), _int([0, 4], "INT64")), (T((3, 6)),), label="int64_start",
                       min_version=2, same_quant=True)]


@_gen("DILATE", dtypes=MOVE)
def dilate(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((3, 4)), _int([2, 3]), T((), const=True, domain=(-0.5, 0.5))), (T((5, 10)),),
                       label="2d", same_quant=True),
            OpTemplate(op, (T((1, 3, 3, 2)), _int([1, 2, 2, 1]), T((), const=True, domain=(-0.5, 0.5))),
                       (T((1, 5, 5, 2)),), label="4d_spatial", same_quant=True)]


@_gen("GATHER_ND", dtypes=MOVE)
def gather_nd(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((4, 5, 3)), _int([[0, 1], [3, 4], [2, 0]])), (T((3, 3)),), label="slices_depth2",
                       same_quant=True),
            OpTemplate(op, (T((3, 4)), _int([[[2, 3]], [[0, 0]]], "INT64")), (T((2, 1)),), label="elements_int64",
                       same_quant=True),
            OpTemplate(op, (T((5, 2, 2)), _int([[4], [1]], "INT16")), (T((2, 2, 2)),), label="rows_int16",
                       min_version=4, same_quant=True)]


_SCATTER_ND_TYPES = ("FLOAT32", "INT8", "UINT8", "INT32", "INT64", "BOOL")


@_gen("SCATTER_ND", dtypes=_SCATTER_ND_TYPES)
def scatter_nd(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (_int([[1], [3], [0]]), T((3, 4)), _int([5, 4])), (T((5, 4)),), label="rows",
                       same_quant=True),
            OpTemplate(op, (_int([[0, 1], [2, 2]]), T((2,)), _int([3, 3])), (T((3, 3)),), label="elements",
                       same_quant=True)]


@_gen("SPARSE_TO_DENSE", dtypes=("FLOAT32", "INT8", "UINT8", "INT32", "INT64"))
def sparse_to_dense(op: str) -> list[OpTemplate]:
    d = T((), const=True, domain=(-0.5, 0.5))
    return [OpTemplate(op, (_int([[0, 1], [2, 0], [3, 3]]), _int([4, 4]), T((3,)), d), (T((4, 4)),),
                       {"validate_indices": False}, "2d", same_quant=True),
            OpTemplate(op, (_int([1, 4, 6], "INT64"), _int([8], "INT64"), T((3,)), d), (T((8,)),),
                       {"validate_indices": False}, "1d_int64", same_quant=True),
            OpTemplate(op, (_int([[0, 0, 1], [1, 2, 0]]), _int([2, 3, 2]), T(()), d), (T((2, 3, 2)),),
                       {"validate_indices": False}, "scalar_value", same_quant=True)]


@_gen("EMBEDDING_LOOKUP", dtypes=MOVE)
def embedding_lookup(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (_int([2, 0, 2, 4]), T((5, 3))), (T((4, 3)),), label="rows", same_quant=True),
            OpTemplate(op, (_int([1, 3]), T((4, 2, 3))), (T((2, 2, 3)),), label="3d_table", same_quant=True)]


@_gen("EMBEDDING_LOOKUP_SPARSE", dtypes=FLOAT)
def embedding_lookup_sparse(op: str) -> list[OpTemplate]:
    def tpl(label, combiner, ids, indices, dense, table, out):
        ins = (_int(ids), _int(indices), _int(dense), T((len(ids),), domain=(0.25, 2.0)), T(table))
        return OpTemplate(op, ins, (T(out),), {"combiner": combiner}, label)
    return [tpl("sum", 0, [1, 3, 0, 2], [[0, 0], [0, 1], [1, 0], [2, 0]], [3, 2], (4, 3), (3, 3)),
            tpl("mean_3d", 1, [2, 0, 1], [[0, 0, 0], [1, 1, 0], [1, 1, 1]], [2, 2, 2], (3, 2, 2), (2, 2, 2, 2)),
            tpl("sqrtn", 2, [0, 2, 2], [[0, 0], [0, 1], [1, 0]], [2, 3], (3, 4), (2, 4))]


@_gen("HASHTABLE_LOOKUP", dtypes=MOVE)
def hashtable_lookup(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (_int([7, 3, 12, 5]), _int([1, 3, 5, 7, 9]), T((5, 2))),
                       (T((4, 2)), _out_int((4,), "UINT8")), label="rows_with_miss", same_quant=True),
            OpTemplate(op, (_int([4, -2, 4]), _int([-2, 0, 4]), T((3,))),
                       (T((3,)), _out_int((3,), "UINT8")), label="scalars", same_quant=True)]


@_gen("LSH_PROJECTION", dtypes=MOVE)
def lsh_projection(op: str) -> list[OpTemplate]:
    seeds = T((4, 3), const=True, dtype="FLOAT32", domain=(-1, 1))
    return [OpTemplate(op, (seeds, T((3, 2))), (_out_int((4,)),), {"type": 1}, "sparse"),
            OpTemplate(op, (seeds, T((2, 5)), T((2,), const=True, dtype="FLOAT32", domain=(0.5, 2))),
                       (_out_int((12,)),), {"type": 2}, "dense_weighted")]


_TOPK_TYPES = ("FLOAT32", "INT8", "UINT8", "INT16", "INT32", "INT64")


@_gen("TOPK_V2", dtypes=_TOPK_TYPES)
def topk_v2(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((3, 8)), _int(3)), (T((3, 3)), _out_int((3, 3))), label="k3", same_quant=True),
            OpTemplate(op, (T((2, 2, 5)), _int(5)), (T((2, 2, 5)), _out_int((2, 2, 5))), label="k_all",
                       same_quant=True),
            OpTemplate(op, (T((6,)), _int(2, "INT16")), (T((2,)), _out_int((2,), "INT16")), label="int16_k",
                       min_version=3, same_quant=True)]


_UNIQUE_TYPES = ("FLOAT32", "INT8", "UINT8", "INT16", "INT32", "INT64")
_UNIQUE_VALUES = np.array([0.4, -1.2, 0.4, 0.8, -1.2, 0.0, 0.4, 1.6])


@_gen("UNIQUE", dtypes=_UNIQUE_TYPES)
def unique(op: str) -> list[OpTemplate]:
    x = T((8,), value=_UNIQUE_VALUES, domain=(-2, 2))
    return [OpTemplate(op, (x,), (T((8,)), _out_int((8,))), {"idx_out_type": TYPE_CODES["INT32"]}, "idx_int32",
                       same_quant=True),
            OpTemplate(op, (x,), (T((8,)), _out_int((8,), "INT64")), {"idx_out_type": TYPE_CODES["INT64"]},
                       "idx_int64", same_quant=True)]


@_gen("WHERE", dtypes=("BOOL", "FLOAT32", "INT8", "UINT8", "INT32", "INT64"))
def where(op: str) -> list[OpTemplate]:
    zeros = np.array([[[0.0, 1.0], [0.5, 0.0], [0.0, 0.0]], [[-1.0, 0.0], [0.0, 0.0], [0.25, -0.5]]])
    return [OpTemplate(op, (T((3, 4)),), (_out_int((12, 2), "INT64"),), label="2d"),
            OpTemplate(op, (T((2, 3, 2), value=zeros),), (_out_int((12, 3), "INT64"),), label="3d_zeros")]


@_gen("CUMSUM", dtypes=("FLOAT32", "INT32", "INT64"))
def cumsum(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((3, 5)), _int(1)), (T((3, 5)),), {"exclusive": False, "reverse": False}, "axis1"),
            OpTemplate(op, (T((4, 2, 3)), _int(0)), (T((4, 2, 3)),), {"exclusive": True, "reverse": False},
                       "axis0_exclusive"),
            OpTemplate(op, (T((2, 6)), _int(-1)), (T((2, 6)),), {"exclusive": True, "reverse": True},
                       "last_axis_reverse_exclusive")]


_SEGMENT_TYPES = ("FLOAT32", "INT32")


@_gen("SEGMENT_SUM", dtypes=_SEGMENT_TYPES)
def segment_sum(op: str) -> list[OpTemplate]:
    return [OpTemplate(op, (T((5, 3)), _int([0, 0, 1, 2, 2])), (T((3, 3)),), label="rows"),
            OpTemplate(op, (T((4,)), _int([0, 1, 1, 1])), (T((2,)),), label="vector")]


@_gen("UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN",
      dtypes=_SEGMENT_TYPES)
def unsorted_segment(op: str) -> list[OpTemplate]:
    dom = (0.5, 1.5) if op == "UNSORTED_SEGMENT_PROD" else (-2, 2)
    return [OpTemplate(op, (T((5, 3), domain=dom), _int([2, 0, 2, 1, 0]), _int([4])), (T((4, 3)),),
                       label="rows_empty_segment"),
            OpTemplate(op, (T((2, 3), domain=dom), _int([[1, 0, 1], [0, 0, 1]]), _int(2)), (T((2,)),),
                       label="2d_ids")]


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


# --- quantization, normalization, convolution ------------------------------------------------
@_gen("FAKE_QUANT", dtypes=FLOAT)
def fake_quant(op: str) -> list[OpTemplate]:
    def tpl(label, shape, lo, hi, bits):
        return OpTemplate(op, (T(shape, domain=(-4, 4)),), (T(shape),),
                          {"min": lo, "max": hi, "num_bits": bits, "narrow_range": False}, label)
    return [tpl("8bit_symmetric", (2, 3, 4), -1.0, 1.0, 8), tpl("8bit_relu6", (1, 4, 4, 3), 0.0, 6.0, 8),
            tpl("4bit_asymmetric", (3, 5), -3.2, 2.0, 4)]


@_gen("LOCAL_RESPONSE_NORMALIZATION", dtypes=FLOAT)
def local_response_normalization(op: str) -> list[OpTemplate]:
    def tpl(label, shape, radius, bias, alpha, beta):
        return OpTemplate(op, (T(shape, domain=(-2, 2)),), (T(shape),),
                          {"radius": radius, "bias": bias, "alpha": alpha, "beta": beta}, label)
    return [tpl("radius2", (1, 4, 4, 6), 2, 1.0, 0.5, 0.75), tpl("radius5_wide", (1, 2, 3, 16), 5, 2.0, 0.1, 0.5),
            tpl("radius0", (2, 3, 3, 4), 0, 0.5, 1.0, 1.0)]


@_gen("CONV_3D", dtypes=FLOAT)
def conv_3d(op: str) -> list[OpTemplate]:
    def tpl(label, dhw, cin, cout, k, s, padding, act="NONE", dil=(1, 1, 1), bias=True):
        out = tuple(_out_size(n, kk, ss, padding, dd) for n, kk, ss, dd in zip(dhw, k, s, dil))
        ins = (T((1, *dhw, cin), domain=(-2, 2)), T((*k, cin, cout), role="weights", const=True),
               T((cout,), role="bias", const=True, domain=(-0.5, 0.5)) if bias else None)
        opts = {"padding": padding, "stride_d": s[0], "stride_h": s[1], "stride_w": s[2],
                "dilation_d_factor": dil[0], "dilation_h_factor": dil[1], "dilation_w_factor": dil[2],
                "fused_activation_function": act}
        return OpTemplate(op, ins, (T((1, *out, cout)),), opts, label)
    return [tpl("k3_same", (4, 5, 5), 2, 3, (3, 3, 3), (1, 1, 1), "SAME"),
            tpl("k2_s2_valid_relu", (4, 6, 6), 3, 4, (2, 2, 2), (2, 2, 2), "VALID", "RELU", bias=False),
            tpl("dilated_relu6", (5, 5, 5), 2, 2, (2, 2, 2), (1, 1, 1), "SAME", "RELU6", dil=(2, 1, 2))]


@_gen("CONV_3D_TRANSPOSE", dtypes=FLOAT)
def conv_3d_transpose(op: str) -> list[OpTemplate]:
    def tpl(label, dhw, cin, cout, k, s, padding, act="NONE", bias=False):
        out = tuple(n * ss if padding == "SAME" else (n - 1) * ss + kk for n, kk, ss in zip(dhw, k, s))
        ins = (_int([1, *out, cout]), T((*k, cout, cin), role="weights", const=True),
               T((1, *dhw, cin), domain=(-2, 2)))
        if bias:
            ins += (T((cout,), role="bias", const=True, domain=(-0.5, 0.5)),)
        opts = {"padding": padding, "stride_d": s[0], "stride_h": s[1], "stride_w": s[2],
                "dilation_d_factor": 1, "dilation_h_factor": 1, "dilation_w_factor": 1,
                "fused_activation_function": act}
        return OpTemplate(op, ins, (T((1, *out, cout)),), opts, label)
    return [tpl("k3_s2_same", (2, 3, 3), 2, 3, (3, 3, 3), (2, 2, 2), "SAME"),
            tpl("k2_s1_valid_bias_relu", (3, 2, 4), 3, 2, (2, 2, 2), (1, 1, 1), "VALID", "RELU", bias=True)]


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


# --- detection ---------------------------------------------------------------------------------
@_gen("NON_MAX_SUPPRESSION_V4", dtypes=FLOAT)
def non_max_suppression_v4(op: str) -> list[OpTemplate]:
    def tpl(label, n, max_out, iou, score):
        ins = (T((n, 4), domain=(0, 1)), T((n,), domain=(0, 1)), _int(max_out),
               T((), const=True, value=np.float32(iou)), T((), const=True, value=np.float32(score)))
        return OpTemplate(op, ins, (_out_int((max_out,)), _out_int(())), label=label)
    return [tpl("iou0.5", 10, 5, 0.5, 0.0), tpl("score_threshold", 8, 6, 0.3, 0.4)]


@_gen("NON_MAX_SUPPRESSION_V5", dtypes=FLOAT)
def non_max_suppression_v5(op: str) -> list[OpTemplate]:
    def tpl(label, n, max_out, iou, score, sigma):
        ins = (T((n, 4), domain=(0, 1)), T((n,), domain=(0, 1)), _int(max_out),
               T((), const=True, value=np.float32(iou)), T((), const=True, value=np.float32(score)),
               T((), const=True, value=np.float32(sigma)))
        return OpTemplate(op, ins, (_out_int((max_out,)), T((max_out,)), _out_int(())), label=label)
    return [tpl("hard", 10, 5, 0.5, 0.0, 0.0), tpl("soft_sigma0.5", 8, 6, 0.6, 0.1, 0.5)]


_DETECTION = "TFLite_Detection_PostProcess"


@_gen(_DETECTION, dtypes=("FLOAT32", "UINT8"))
def detection_postprocess(op: str) -> list[OpTemplate]:
    """Box encodings and class scores as inputs, anchors constant; a score threshold of 0 and
    more boxes than detections, so that every output row is written (LiteRT leaves rows past
    the detection count uninitialized)."""
    def tpl(label, n_boxes, n_classes, max_det, per_det, fast, iou):
        opts = {"max_detections": max_det, "max_classes_per_detection": per_det, "num_classes": n_classes,
                "nms_score_threshold": 0.0, "nms_iou_threshold": iou, "y_scale": 10.0, "x_scale": 10.0,
                "h_scale": 5.0, "w_scale": 5.0, "use_regular_nms": not fast}
        d = max_det * per_det
        ins = (T((1, n_boxes, 4), domain=(-1, 1)), T((1, n_boxes, n_classes + 1), domain=(0.05, 1)),
               T((n_boxes, 4), const=True, domain=(0.2, 0.8)))
        outs = (T((1, d, 4), dtype="FLOAT32"), T((1, d), dtype="FLOAT32"), T((1, d), dtype="FLOAT32"),
                T((1,), dtype="FLOAT32"))
        return _custom(op, ins, outs, opts, label)
    return [tpl("fast_nms", 12, 3, 3, 1, True, 0.9), tpl("regular_nms", 10, 2, 4, 1, False, 0.9)]


def _custom(code: str, ins: tuple, outs: tuple, opts: dict, label: str, **kw) -> OpTemplate:
    return OpTemplate("CUSTOM", ins, outs, {}, label, custom_code=code, custom_options=bytes(flexbuffers.Dumps(opts)),
                      **kw)


@_gen("AudioSpectrogram", dtypes=FLOAT)
def audio_spectrogram(op: str) -> list[OpTemplate]:
    def tpl(label, samples, channels, window, stride, squared):
        fft = 1 << (window - 1).bit_length()
        frames = 1 + (samples - window) // stride
        return _custom(op, (T((samples, channels)),), (T((channels, frames, fft // 2 + 1)),),
                       {"window_size": window, "stride": stride, "magnitude_squared": squared}, label)
    return [tpl("window16_stride8", 64, 1, 16, 8, False), tpl("stereo_window20_squared", 50, 2, 20, 10, True)]


@_gen("Mfcc", dtypes=FLOAT)
def mfcc(op: str) -> list[OpTemplate]:
    def tpl(label, shape, rate, lower, upper, channels, n_dct):
        opts = {"upper_frequency_limit": upper, "lower_frequency_limit": lower,
                "filterbank_channel_count": channels, "dct_coefficient_count": n_dct}
        return _custom(op, (T(shape, domain=(0.0, 2.0)), _int(rate)), (T(shape[:2] + (n_dct,)),), opts, label)
    return [tpl("rate8k_13", (1, 3, 33), 8000, 20, 4000, 20, 13),
            tpl("rate16k_2ch", (2, 2, 65), 16000, 100, 7000, 12, 8)]


@_gen("NumericVerify", dtypes=("INT8", "UINT8", "INT16", "FLOAT16"))
def numeric_verify(op: str) -> list[OpTemplate]:
    def tpl(label, shape, opts, **kw):
        ins = (T(shape, domain=(-2, 2)), T(shape, dtype="FLOAT32", domain=(-2, 2)))
        return _custom(op, ins, (T(shape, dtype="FLOAT32"),), opts, label, **kw)
    return [tpl("differences", (2, 3, 4), {"tolerance": 0.0, "log_if_failed": False}),
            tpl("checked_within_tolerance", (1, 4, 4, 2), {"tolerance": 1e6, "log_if_failed": True},
                dtypes=frozenset(QUANT_DTYPES))]


@_gen("aeq.hadamard_rotation", dtypes=("FLOAT32", "INT32"))
def hadamard_rotation(op: str) -> list[OpTemplate]:
    def make(dt: str) -> list[OpTemplate]:
        def tpl(label, shape, size, out_type="FLOAT32"):
            if dt == "FLOAT32":
                x = T(shape)
            else:  # LiteRT reads INT32 data as float32 bits: give it float bits
                n = int(np.prod(shape))
                x = _ivec(np.linspace(-2, 2, n, dtype=np.float32).view(np.int32).reshape(shape))
            y = T(shape, dtype="FLOAT32") if out_type == "FLOAT32" else _out_int(shape)
            return _custom(op, (x,), (y,), {"hadamard_size": size}, label)
        return [tpl("2d_size8", (2, 16), 8), tpl("3d_size4", (1, 3, 12), 4, dt)]
    return _per_dtype(("FLOAT32", "INT32"), make)


# --- recurrent (variable state tensors, float32) -------------------------------------------------
def _state(shape: tuple[int, ...]) -> T:
    return T(shape, variable=True)


def _w(shape: tuple[int, ...], scale: float = 0.5) -> T:
    return T(shape, role="weights", const=True, domain=(-scale, scale))


def _b(n: int) -> T:
    return T((n,), role="bias", const=True, domain=(-0.3, 0.3))


@_gen("RNN", dtypes=FLOAT)
def rnn(op: str) -> list[OpTemplate]:
    def tpl(label, batch, n_in, units, act):
        ins = (T((batch, n_in)), _w((units, n_in)), _w((units, units)), _b(units), _state((batch, units)))
        return OpTemplate(op, ins, (T((batch, units)),),
                          {"fused_activation_function": act, "asymmetric_quantize_inputs": False}, label)
    return [tpl("b1_tanh", 1, 5, 4, "TANH"), tpl("b3_relu", 3, 3, 6, "RELU")]


@_gen("UNIDIRECTIONAL_SEQUENCE_RNN", dtypes=FLOAT)
def unidirectional_sequence_rnn(op: str) -> list[OpTemplate]:
    def tpl(label, batch, steps, n_in, units, act, time_major):
        lead = (steps, batch) if time_major else (batch, steps)
        ins = (T(lead + (n_in,)), _w((units, n_in)), _w((units, units)), _b(units), _state((batch, units)))
        return OpTemplate(op, ins, (T(lead + (units,)),), {"fused_activation_function": act,
                                                           "time_major": time_major,
                                                           "asymmetric_quantize_inputs": False}, label)
    return [tpl("batch_major_tanh", 2, 3, 4, 5, "TANH", False), tpl("time_major_relu", 3, 2, 3, 4, "RELU", True)]


@_gen("BIDIRECTIONAL_SEQUENCE_RNN", dtypes=FLOAT)
def bidirectional_sequence_rnn(op: str) -> list[OpTemplate]:
    def tpl(label, batch, steps, n_in, units, time_major, merge):
        lead = (steps, batch) if time_major else (batch, steps)
        direction = (_w((units, n_in)), _w((units, units)), _b(units), _state((batch, units)))
        ins = (T(lead + (n_in,)),) + direction + direction + (None, None, None)
        outs = (T(lead + (2 * units,)),) if merge else (T(lead + (units,)), T(lead + (units,)))
        opts = {"fused_activation_function": "TANH", "time_major": time_major, "merge_outputs": merge,
                "asymmetric_quantize_inputs": False}
        return OpTemplate(op, ins, outs, opts, label)
    return [tpl("batch_major_two_outputs", 2, 3, 4, 3, False, False),
            tpl("time_major_merged", 1, 4, 3, 2, True, True)]


@_gen("SVDF", dtypes=FLOAT)
def svdf(op: str) -> list[OpTemplate]:
    def tpl(label, batch, n_in, units, rank, memory, act, bias=True):
        filters = units * rank
        ins = (T((batch, n_in)), _w((filters, n_in)), _w((filters, memory)), _b(units) if bias else None,
               _state((batch, memory * filters)))
        return OpTemplate(op, ins, (T((batch, units)),), {"rank": rank, "fused_activation_function": act,
                                                          "asymmetric_quantize_inputs": False}, label)
    return [tpl("rank1_relu", 2, 4, 3, 1, 5, "RELU"), tpl("rank2_nobias", 1, 3, 2, 2, 4, "NONE", bias=False)]


def _lstm_direction(n_in: int, n_cell: int, n_out: int, *, cifg: bool = False, peephole: bool = False,
                    proj: bool = False) -> tuple:
    """One direction's 17 LSTM inputs after the input: gate weights, recurrent weights, peepholes,
    gate biases, projection weights and bias (None where absent)."""
    w_in = tuple(None if (cifg and g == 0) else _w((n_cell, n_in)) for g in range(4))
    w_rec = tuple(None if (cifg and g == 0) else _w((n_cell, n_out)) for g in range(4))
    peep = tuple(_w((n_cell,), 0.3) if peephole and not (cifg and g == 0) else None for g in range(3))
    bias = tuple(None if (cifg and g == 0) else _b(n_cell) for g in range(4))
    projection = (_w((n_out, n_cell)), _b(n_out)) if proj else (None, None)
    return w_in + w_rec + peep + bias + projection


@_gen("UNIDIRECTIONAL_SEQUENCE_LSTM", dtypes=FLOAT)
def unidirectional_sequence_lstm(op: str) -> list[OpTemplate]:
    def tpl(label, batch, steps, n_in, n_cell, n_out, time_major, **kw):
        lead = (steps, batch) if time_major else (batch, steps)
        ins = ((T(lead + (n_in,)),) + _lstm_direction(n_in, n_cell, n_out, **kw)
               + (_state((batch, n_out)), _state((batch, n_cell))) + (None,) * 4)
        opts = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0, "time_major": time_major,
                "asymmetric_quantize_inputs": False}
        return OpTemplate(op, ins, (T(lead + (n_out,)),), opts, label)
    return [tpl("basic", 2, 3, 4, 5, 5, False),
            tpl("cifg_peephole_projection_time_major", 1, 4, 3, 4, 2, True, cifg=True, peephole=True, proj=True)]


@_gen("BIDIRECTIONAL_SEQUENCE_LSTM", dtypes=FLOAT)
def bidirectional_sequence_lstm(op: str) -> list[OpTemplate]:
    def tpl(label, batch, steps, n_in, n_cell, n_out, time_major, merge, **kw):
        lead = (steps, batch) if time_major else (batch, steps)
        fw = _lstm_direction(n_in, n_cell, n_out, **kw)
        bw = _lstm_direction(n_in, n_cell, n_out, **kw)
        states = (_state((batch, n_out)), _state((batch, n_cell)), _state((batch, n_out)), _state((batch, n_cell)))
        ins = (T(lead + (n_in,)),) + fw + bw + states + (None,) * 9
        outs = (T(lead + (2 * n_out,)),) if merge else (T(lead + (n_out,)), T(lead + (n_out,)))
        opts = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0, "merge_outputs": merge,
                "time_major": time_major, "asymmetric_quantize_inputs": False}
        return OpTemplate(op, ins, outs, opts, label)
    return [tpl("two_outputs", 2, 3, 3, 4, 4, False, False),
            tpl("merged_time_major_peephole", 1, 2, 4, 3, 3, True, True, peephole=True)]
