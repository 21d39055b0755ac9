"""Conformance case generators of data movement: reversal, diagonals, slices, gather / scatter,
lookups, TOPK_V2, UNIQUE, WHERE, CUMSUM and segment reductions.

Generators as described in generators_kit.py (the contract, `DTYPES`, the tensor helpers);
generators_more.py imports this module to register them.
"""
from __future__ import annotations

import numpy as np

from acelera.conformance.generators_kit import FLOAT, MOVE, _gen, _ivec, _out_int
from acelera.conformance.templates import OpTemplate, T, _int
from acelera.core.dtypes import TYPE_CODES


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
