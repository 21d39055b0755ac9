"""Conformance case generators of the StableHLO ops (element-wise, PAD, GATHER, RNG_BIT_GENERATOR)
and REDUCE_WINDOW.

Generators as described in generators_kit.py (the contract, `DTYPES`, the tensor helpers);
generators_more.py imports this module to register them.
"""
from __future__ import annotations

import numpy as np

from acelera.conformance.generators_kit import MOVE, _bounds, _gen, _ivec, _out_int, _per_dtype, _raw
from acelera.conformance.templates import NP, OpTemplate, T, _int

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
