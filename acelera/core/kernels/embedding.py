"""Embedding and lookup kernels: EMBEDDING_LOOKUP, EMBEDDING_LOOKUP_SPARSE, HASHTABLE_LOOKUP,
LSH_PROJECTION and SKIP_GRAM (tflite/kernels/embedding_lookup.cc, embedding_lookup_sparse.cc,
hashtable_lookup.cc, lsh_projection.cc, skip_gram.cc).

- EMBEDDING_LOOKUP copies rows (any fixed-size type, FLOAT8 bit patterns, and the packed INT4,
  INT2 and UINT4, held unpacked), or dequantizes int8/uint8/int4/int2 rows to float32/float16
  (the hybrid form) with the table's scale, or its per-row scale when quantized per channel.
  Like LiteRT, a uint8 table is read as int8 bytes (legacy hybrid models stored symmetric int8
  weights in uint8 tensors), zero points are not subtracted (LiteRT requires zero_point 0), and
  an int4 (int2) value v is computed as (v * 16) * (scale / 16) ((v * 64) * (scale / 64)) in
  float32, as Unpack4Bit/Unpack2Bit do. One deliberate difference: when a row of a packed table
  does not start on a byte boundary (an odd number of int4 values per row, a number of int2
  values per row not divisible by 4), LiteRT reads the row from the wrong bits (it starts at
  byte offset // 2 or // 4, and its same-type copy moves bytes / rows bytes per row); acelera
  uses the row's own values.
- EMBEDDING_LOOKUP_SPARSE aggregates runs of consecutive lookups that share an output row, in
  float32 and in input order, finishing each run as LiteRT does (mean: / sum of weights,
  sqrtn: / sqrt(sum of squared weights)).
- HASHTABLE_LOOKUP finds keys with glibc's bsearch probing order, so unsorted keys give
  LiteRT's answers; it moves rows of any fixed-size type (FLOAT8 as bit patterns) or strings.
- LSH_PROJECTION hashes (float32 seed bytes + input row bytes) with farmhash's Fingerprint64
  (farmhashna::Hash64), implemented below from the published algorithm; the row bytes of a
  FLOAT8 (or BFLOAT16) input are its bit patterns, as in LiteRT.
- SKIP_GRAM splits the first string as LiteRT does (C isspace; the first character is never
  treated as a separator) and enumerates skip-grams in LiteRT's order.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import KernelError
from acelera.core.kernels.float_formats import FLOAT8
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register
from acelera.core.model import MAX_TENSOR_BYTES, encode_strings

# Types whose rows LiteRT moves as bytes (FLOAT8 and BFLOAT16 as bit patterns).
_FIXED_TYPES = ("FLOAT32", "FLOAT16", "BFLOAT16", "FLOAT64", "INT8", "UINT8", "INT16", "UINT16", "INT32",
                "UINT32", "INT64", "UINT64", "BOOL", "COMPLEX64", "COMPLEX128", *FLOAT8)
_PACKED_TABLES = ("INT4", "INT2", "UINT4")
_HYBRID_TABLES = ("UINT8", "INT8", "INT4", "INT2")
# LiteRT's Unpack4Bit / Unpack2Bit shift a value into the top bits of an int8 and divide the
# scale by the same power of two
_SUBBYTE_SHIFT = {"INT4": 16, "INT2": 64}


def _check_size(shape: tuple[int, ...], itemsize: int) -> None:
    n = 1
    for d in shape:
        n *= int(d)
    if n * itemsize > MAX_TENSOR_BYTES:
        raise KernelError(f"output of shape {list(shape)} exceeds the tensor size limit ({MAX_TENSOR_BYTES} bytes)")


def _as_bytes(v) -> bytes:
    return v if isinstance(v, bytes) else b""


def _string_vector(items: list[bytes]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


# --- EMBEDDING_LOOKUP ---------------------------------------------------------------------

@register("EMBEDDING_LOOKUP", max_version=5, dtypes=_FIXED_TYPES + _PACKED_TABLES)
def embedding_lookup(node: NodeContext) -> Kernel:
    if len(node.inputs) != 2 or len(node.outputs) != 1 or None in node.inputs:
        raise node.unsupported("takes lookup ids and a table and has one output")
    ids_t, table_t = node.inputs
    assert ids_t is not None and table_t is not None  # refused above
    out_t = node.outputs[0]
    if len(ids_t.shape) != 1 or ids_t.type_name != "INT32":
        raise node.unsupported("lookup ids must be an INT32 vector")
    if len(table_t.shape) < 2:
        raise node.unsupported("the table must have rank >= 2")
    q = table_t.quantization
    rows = table_t.shape[0]
    if q.is_set:
        if table_t.type_name in _HYBRID_TABLES and out_t.type_name == "FLOAT32" and int(q.zero_point[0]) != 0:
            raise node.unsupported("hybrid lookup needs zero_point 0")
        if q.per_channel:
            if table_t.type_name not in _HYBRID_TABLES or out_t.type_name not in ("FLOAT32", "FLOAT16"):
                raise node.unsupported("per-channel quantization needs an int8/uint8/int4/int2 table and a float output")
            if q.quantized_dimension != 0 or q.scale.size != rows or q.zero_point.size not in (rows, 1):
                raise node.unsupported("per-channel quantization must be along dimension 0, one scale per row")
    hybrid = out_t.type != table_t.type and out_t.type_name in ("FLOAT32", "FLOAT16")
    if hybrid and table_t.type_name not in _HYBRID_TABLES:
        raise node.unsupported(f"cannot dequantize a {table_t.type_name} table to {out_t.type_name}")
    if not hybrid and (out_t.type != table_t.type or table_t.type_name not in _FIXED_TYPES + _PACKED_TABLES):
        raise node.unsupported(f"a {table_t.type_name} table with a {out_t.type_name} output is not supported")
    out_dtype = out_t.dtype
    shift = _SUBBYTE_SHIFT.get(table_t.type_name) if hybrid else None
    uint8 = table_t.type_name == "UINT8"
    if not q.is_set:
        scales = np.zeros(1, np.float32)  # LiteRT's params.scale of an unquantized table
    else:
        scales = np.asarray(q.scale, np.float32)
    if shift:
        scales = scales / np.float32(shift)

    def run(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
        n_rows = table.shape[0]
        out_shape = ids.shape + table.shape[1:]
        _check_size(out_shape, out_dtype.itemsize)
        if in_shape_pass():
            return np.zeros(out_shape, out_dtype)
        if ids.size:
            bad = (ids < 0) | (ids >= n_rows)
            if bad.any():
                raise KernelError(f"Embedding Lookup: index out of bounds. Got {int(ids[bad][0])}, "
                                  f"and bounds are [0, {n_rows - 1}]")
        picked = table[ids]
        if not hybrid:
            return np.asarray(picked, out_dtype)
        if uint8:
            picked = picked.view(np.int8)
        if shift:
            picked = picked.astype(np.int16) * shift
        s = scales[ids].reshape((-1,) + (1,) * (table.ndim - 1)) if scales.size > 1 else scales[0]
        return (picked.astype(np.float32) * s).astype(out_dtype)

    return run


# --- EMBEDDING_LOOKUP_SPARSE --------------------------------------------------------------

_SUM, _MEAN, _SQRTN = 0, 1, 2


@register("EMBEDDING_LOOKUP_SPARSE", max_version=1, dtypes=("FLOAT32",))
def embedding_lookup_sparse(node: NodeContext) -> Kernel:
    if len(node.inputs) != 5 or len(node.outputs) != 1 or None in node.inputs:
        raise node.unsupported("takes ids, indices, dense_shape, weights and a table")
    ids_t, idx_t, shape_t, w_t, table_t = node.inputs
    assert ids_t is not None and idx_t is not None and shape_t is not None and w_t is not None  # refused above
    assert table_t is not None
    for t, rank, name in ((ids_t, 1, "ids"), (idx_t, 2, "indices"), (shape_t, 1, "dense_shape")):
        if len(t.shape) != rank or t.type_name != "INT32":
            raise node.unsupported(f"{name} must be a rank-{rank} INT32 tensor")
    if len(w_t.shape) != 1 or w_t.type_name != "FLOAT32":
        raise node.unsupported("weights must be a FLOAT32 vector")
    if not (idx_t.shape[0] == ids_t.shape[0] == w_t.shape[0]):
        raise node.unsupported("ids, indices and weights must have the same length")
    if len(table_t.shape) < 2:
        raise node.unsupported("the table must have rank >= 2")
    if table_t.type_name != "FLOAT32":
        raise node.unsupported(f"a {table_t.type_name} table is not supported (LiteRT reads it as float)")
    if node.outputs[0].type_name != "FLOAT32":
        raise node.unsupported("the output must be FLOAT32")
    lookup_rank = idx_t.shape[1]
    if lookup_rank < 1 or shape_t.shape[0] != lookup_rank:
        raise node.unsupported(f"dense_shape of length {shape_t.shape[0]} does not match indices of "
                               f"width {lookup_rank}")
    combiner = int(node.options.get("combiner", _SUM))
    if combiner not in (_MEAN, _SQRTN):
        combiner = _SUM  # LiteRT's finish step divides by 1 for an unknown combiner

    def run(ids, indices, dense_shape, weights, table) -> np.ndarray:
        lead = tuple(int(d) for d in dense_shape[:-1])
        if any(d < 0 for d in lead):
            raise KernelError(f"dense_shape {dense_shape.tolist()} has a negative dimension")
        emb_shape = table.shape[1:]
        _check_size(lead + emb_shape, 4)
        out = np.zeros(lead + emb_shape, np.float32)
        if in_shape_pass() or ids.size == 0:
            return out
        n_rows = table.shape[0]
        bad = (ids < 0) | (ids >= n_rows)
        if bad.any():
            raise KernelError(f"Embedding Lookup Sparse: index out of bounds. Got {int(ids[bad][0])}, "
                              f"and bounds are [0, {n_rows - 1}]")
        strides = np.ones(len(lead), np.int64)
        for k in range(len(lead) - 2, -1, -1):
            strides[k] = strides[k + 1] * lead[k + 1]
        n_out = int(np.prod(lead, dtype=np.int64)) if lead else 1
        coords = indices[:, :-1].astype(np.int64)
        if coords.size and int(np.abs(coords).max()) * int(strides.sum()) >= 1 << 62:
            exact = coords.astype(object) @ strides.astype(object)  # int64 could wrap into range
            if any(b < 0 or b >= n_out for b in exact):
                raise KernelError("sparse indices lie outside dense_shape")
        buckets = coords @ strides if lead else np.zeros(len(ids), np.int64)
        emb = int(np.prod(emb_shape, dtype=np.int64))
        if emb == 0:
            return out
        if np.any((buckets < 0) | (buckets >= n_out)):
            raise KernelError("sparse indices lie outside dense_shape")
        flat = out.reshape(n_out, emb)
        contrib = table.reshape(n_rows, emb)[ids] * weights[:, None]
        starts = np.flatnonzero(np.diff(buckets, prepend=buckets[0] - 1))
        run_buckets = buckets[starts]
        ends = np.append(starts[1:], len(buckets))
        if len(np.unique(run_buckets)) == len(run_buckets):
            # Every output row is one run: ufunc.at adds in input order, as LiteRT does.
            np.add.at(flat, buckets, contrib)
            if combiner != _SUM:
                acc = np.zeros(n_out, np.float32)
                np.add.at(acc, buckets, weights if combiner == _MEAN else weights * weights)
                div = acc[run_buckets] if combiner == _MEAN else np.sqrt(acc[run_buckets])
                flat[run_buckets] /= div[:, None]
            return out
        for b, s, e in zip(run_buckets.tolist(), starts.tolist(), ends.tolist()):
            flat[b] = np.add.accumulate(np.vstack([flat[b:b + 1], contrib[s:e]]), axis=0)[-1]
            if combiner == _MEAN:
                flat[b] /= np.add.accumulate(np.concatenate([[np.float32(0)], weights[s:e]]))[-1]
            elif combiner == _SQRTN:
                w = weights[s:e]
                flat[b] /= np.sqrt(np.add.accumulate(np.concatenate([[np.float32(0)], w * w]))[-1])
        return out

    return run


# --- HASHTABLE_LOOKUP ---------------------------------------------------------------------

def _bsearch(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """glibc bsearch of every query over keys: the index found, or -1. LiteRT's comparator
    returns `query - key`; compiled inline, its sign is that of the exact difference."""
    q = queries.astype(np.int64)
    k = keys.astype(np.int64)
    lo = np.zeros(q.shape, np.int64)
    hi = np.full(q.shape, k.size, np.int64)
    found = np.full(q.shape, -1, np.int64)
    active = lo < hi
    while active.any():
        mid = (lo + hi) // 2
        d = q - k[np.minimum(mid, k.size - 1)]
        hit = active & (d == 0)
        found[hit] = mid[hit]
        hi = np.where(active & (d < 0), mid, hi)
        lo = np.where(active & (d > 0), mid + 1, lo)
        active = ~hit & active & (lo < hi)
    return found


@register("HASHTABLE_LOOKUP", max_version=1, dtypes=_FIXED_TYPES + ("STRING",))
def hashtable_lookup(node: NodeContext) -> Kernel:
    if len(node.inputs) != 3 or len(node.outputs) != 2 or None in node.inputs:
        raise node.unsupported("takes lookups, keys and values and has two outputs")
    look_t, key_t, val_t = node.inputs
    assert look_t is not None and key_t is not None and val_t is not None  # refused above
    out_t, hits_t = node.outputs
    if len(look_t.shape) != 1 or look_t.type_name != "INT32":
        raise node.unsupported("lookups must be an INT32 vector")
    if len(key_t.shape) != 1 or key_t.type_name != "INT32":
        raise node.unsupported("keys must be an INT32 vector")
    if len(val_t.shape) < 1 or val_t.shape[0] != key_t.shape[0]:
        raise node.unsupported(f"values of shape {list(val_t.shape)} do not match {key_t.shape[0]} keys")
    is_string = val_t.type_name == "STRING"
    if is_string and len(val_t.shape) != 1:
        raise node.unsupported("STRING values must be a vector")
    if val_t.type_name not in _FIXED_TYPES + ("STRING",):
        raise node.unsupported(f"values of type {val_t.type_name} are not supported")
    if hits_t.type_name != "UINT8":
        raise node.unsupported("the hits output must be UINT8")
    if out_t.type != val_t.type:
        raise node.unsupported(f"output type {out_t.type_name} differs from values type {val_t.type_name}")
    out_dtype = out_t.dtype

    def run(lookups: np.ndarray, keys: np.ndarray, values: np.ndarray):
        n = lookups.shape[0]
        hits = np.zeros(n, np.uint8)
        if is_string:
            out = np.empty(n, dtype=object)
            out.fill(b"")
        else:
            out = np.zeros((n,) + values.shape[1:], out_dtype)
        if in_shape_pass():
            return out, hits
        if values.shape[0] == 0:
            raise KernelError("the hashtable has no rows")
        found = _bsearch(lookups, keys)
        ok = found >= 0
        hits[ok] = 1
        if is_string:
            out[ok] = [_as_bytes(v) for v in values[found[ok]]]
        else:
            out[ok] = values[found[ok]]
        return out, hits

    return run


# --- LSH_PROJECTION and farmhash Fingerprint64 --------------------------------------------

_M64 = (1 << 64) - 1
_K0, _K1, _K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F


def _rot(v: int, s: int) -> int:
    return ((v >> s) | (v << (64 - s))) & _M64 if s else v


def _f64(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 8], "little")


def _f32(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 4], "little")


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _mix16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M64
    b ^= b >> 47
    return (b * mul) & _M64


def _hash_0_to_16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = _K2 + 2 * n
        a = (_f64(s, 0) + _K2) & _M64
        b = _f64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M64
        d = ((_rot(a, 25) + b) * mul) & _M64
        return _mix16(c, d, mul)
    if n >= 4:
        mul = _K2 + 2 * n
        return _mix16((n + (_f32(s, 0) << 3)) & _M64, _f32(s, n - 4), mul)
    if n:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M64) * _K2) & _M64
    return _K2


def _hash_17_to_32(s: bytes) -> int:
    n = len(s)
    mul = _K2 + 2 * n
    a = (_f64(s, 0) * _K1) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    return _mix16((_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64,
                  (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)


def _hash_33_to_64(s: bytes) -> int:
    n = len(s)
    mul = _K2 + 2 * n
    a = (_f64(s, 0) * _K2) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    y = (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64
    z = _mix16(y, (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
    e = (_f64(s, 16) * mul) & _M64
    f = _f64(s, 24)
    g = ((y + _f64(s, n - 32)) * mul) & _M64
    h = ((z + _f64(s, n - 24)) * mul) & _M64
    return _mix16((_rot((e + f) & _M64, 43) + _rot(g, 30) + h) & _M64,
                  (e + _rot((f + a) & _M64, 18) + g) & _M64, mul)


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _f64(s, i), _f64(s, i + 8), _f64(s, i + 16), _f64(s, i + 24)
    a = (a + w) & _M64
    b = _rot((b + a + z) & _M64, 21)
    c = a
    a = (a + x + y) & _M64
    b = (b + _rot(a, 44)) & _M64
    return (a + z) & _M64, (b + c) & _M64


def fingerprint64(s: bytes) -> int:
    """farmhash Fingerprint64 (= farmhashna::Hash64) of `s`, as an unsigned 64-bit int."""
    n = len(s)
    if n <= 16:
        return _hash_0_to_16(s)
    if n <= 32:
        return _hash_17_to_32(s)
    if n <= 64:
        return _hash_33_to_64(s)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M64
    z = (_shift_mix((y * _K2 + 113) & _M64) * _K2) & _M64
    v = (0, 0)
    w = (0, 0)
    x = (x * _K2 + _f64(s, 0)) & _M64
    end = ((n - 1) // 64) * 64
    last64 = n - 64
    i = 0
    while True:
        x = (_rot((x + y + v[0] + _f64(s, i + 8)) & _M64, 37) * _K1) & _M64
        y = (_rot((y + v[1] + _f64(s, i + 48)) & _M64, 42) * _K1) & _M64
        x ^= w[1]
        y = (y + v[0] + _f64(s, i + 40)) & _M64
        z = (_rot((z + w[0]) & _M64, 33) * _K1) & _M64
        v = _weak32(s, i, (v[1] * _K1) & _M64, (x + w[0]) & _M64)
        w = _weak32(s, i + 32, (z + w[1]) & _M64, (y + _f64(s, i + 16)) & _M64)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = _K1 + ((z & 0xFF) << 1)
    i = last64
    w0 = (w[0] + ((n - 1) & 63)) & _M64
    v0 = (v[0] + w0) & _M64
    w0 = (w0 + v0) & _M64
    v, w = (v0, v[1]), (w0, w[1])
    x = (_rot((x + y + v[0] + _f64(s, i + 8)) & _M64, 37) * mul) & _M64
    y = (_rot((y + v[1] + _f64(s, i + 48)) & _M64, 42) * mul) & _M64
    x ^= (w[1] * 9) & _M64
    y = (y + v[0] * 9 + _f64(s, i + 40)) & _M64
    z = (_rot((z + w[0]) & _M64, 33) * mul) & _M64
    v = _weak32(s, i, (v[1] * mul) & _M64, (x + w[0]) & _M64)
    w = _weak32(s, i + 32, (z + w[1]) & _M64, (y + _f64(s, i + 16)) & _M64)
    z, x = x, z
    return _mix16((_mix16(v[0], w[0], mul) + _shift_mix(y) * _K0 + z) & _M64,
                  (_mix16(v[1], w[1], mul) + x) & _M64, mul)


_SPARSE, _DENSE = 1, 2


@register("LSH_PROJECTION", max_version=1, dtypes=_FIXED_TYPES + ("STRING",))
def lsh_projection(node: NodeContext) -> Kernel:
    if len(node.inputs) not in (2, 3) or len(node.outputs) != 1:
        raise node.unsupported("takes hash seeds, an input and an optional weight")
    if any(t is None for t in node.inputs):
        raise node.unsupported("an absent input is not allowed")
    hash_t, in_t = node.inputs[:2]
    assert hash_t is not None and in_t is not None  # refused above
    w_t = node.input(2)
    if len(hash_t.shape) != 2 or hash_t.type_name != "FLOAT32":
        raise node.unsupported("hash seeds must be a rank-2 FLOAT32 tensor")
    num_hash, num_bits = hash_t.shape
    if num_bits > 32:
        raise node.unsupported(f"{num_bits} bits per hash function exceed 32")
    if len(in_t.shape) < 1 or in_t.shape[0] < 1:
        raise node.unsupported("the input must have rank >= 1 and at least one row")
    if in_t.type_name not in _FIXED_TYPES + ("STRING",):
        raise node.unsupported(f"input of type {in_t.type_name} is not supported")
    if w_t is not None and (len(w_t.shape) != 1 or w_t.shape[0] != in_t.shape[0] or w_t.type_name != "FLOAT32"):
        raise node.unsupported("the weight must be a FLOAT32 vector with one value per input row")
    kind = int(node.options.get("type", 0))
    if kind not in (_SPARSE, _DENSE):
        raise node.unsupported(f"projection type {kind} is not supported")
    if node.outputs[0].type_name != "INT32":
        raise node.unsupported("the output must be INT32")
    out_len = num_hash if kind == _SPARSE else num_hash * num_bits

    def run(seeds: np.ndarray, x: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
        if in_shape_pass():
            return np.zeros(out_len, np.int32)
        raw = encode_strings(x) if x.dtype == np.object_ else np.ascontiguousarray(x).tobytes()
        n = x.shape[0]
        item = len(raw) // n
        rows = [raw[i * item:(i + 1) * item] for i in range(n)]
        ws = None if weight is None else [float(v) for v in weight]
        bits = np.zeros(num_hash * num_bits, np.int64)
        for k, seed in enumerate(np.ascontiguousarray(seeds, np.float32).reshape(-1)):
            prefix = seed.tobytes()
            score = 0.0
            for i, row in enumerate(rows):
                h = fingerprint64(prefix + row)
                value = float(h - (1 << 64) if h >> 63 else h)
                score += value if ws is None else ws[i] * value
            bits[k] = score > 0
        if kind == _DENSE:
            return bits.astype(np.int32)
        out = np.zeros(num_hash, np.int64)
        for i in range(num_hash):
            sig = 0
            for b in bits[i * num_bits:(i + 1) * num_bits].tolist():
                sig = ((sig << 1) | b) & 0xFFFFFFFF
            # 1 << 32 is computed by an x86 shift, whose count wraps modulo 32.
            out[i] = sig + i * (1 << (num_bits & 31))
        return ((out + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)

    return run


# --- SKIP_GRAM ----------------------------------------------------------------------------

_SPACES = frozenset(b" \t\n\v\f\r")
_MAX_SKIP_GRAM_NODES = 1 << 22


def _words(s: bytes) -> list[bytes]:
    words = []
    prev = 0
    for i in range(1, len(s)):
        if s[i] in _SPACES:
            if i > prev and s[prev] not in _SPACES:
                words.append(s[prev:i])
            prev = i + 1
    if len(s) > prev:
        words.append(s[prev:])
    return words


@register("SKIP_GRAM", max_version=1, dtypes=("STRING",))
def skip_gram(node: NodeContext) -> Kernel:
    if len(node.inputs) != 1 or len(node.outputs) != 1 or node.inputs[0] is None:
        raise node.unsupported("takes one input and has one output")
    if node.inputs[0].type_name != "STRING" or node.outputs[0].type_name != "STRING":
        raise node.unsupported("input and output must be STRING")
    ngram = int(node.options.get("ngram_size", 0))
    max_skip = int(node.options.get("max_skip_size", 0))
    include_all = bool(node.options.get("include_all_ngrams", False))

    def included(size: int) -> bool:
        return size > 0 and (size <= ngram if include_all else size == ngram)

    def check_work(words: list[bytes]) -> None:
        """Refuse (before generating) outputs too large to hold or too slow to enumerate: counts
        of word sequences with gaps of at most max_skip + 1, by length, in float64."""
        n = len(words)
        lens = np.array([len(w) for w in words], np.float64)
        count, size = np.ones(n), lens.copy()
        nodes = float(n)
        out_bytes = (lens.sum() + 4 * n) if included(1) else 0.0
        for k in range(2, min(ngram, n) + 1):
            if max_skip < 0:
                break
            c0, s0 = np.concatenate([[0.0], np.cumsum(count)]), np.concatenate([[0.0], np.cumsum(size)])
            j = np.arange(n)
            lo = np.maximum(j - max_skip - 1, 0)
            count, size = c0[j] - c0[lo], s0[j] - s0[lo]
            size += count * (lens + 1)
            total = count.sum()
            if total == 0:
                break
            nodes += total
            if included(k):
                out_bytes += size.sum() + 4 * total
            if nodes > _MAX_SKIP_GRAM_NODES or out_bytes > MAX_TENSOR_BYTES:
                raise KernelError(f"skip-grams of {n} words with ngram_size {ngram} and max_skip_size "
                                  f"{max_skip} are too many to generate")

    def run(x: np.ndarray) -> np.ndarray:
        if in_shape_pass():
            return _string_vector([])
        if x.size == 0:
            raise KernelError("the input has no string")
        words = _words(_as_bytes(x.reshape(-1)[0]))
        n = len(words)
        if ngram < 0 or n < ngram:
            return _string_vector([])
        check_work(words)
        grams: list[bytes] = []
        # Depth-first over word sequences; a sequence is emitted after all its extensions.
        stack = [0]
        nxt = [0]  # last candidate tried for the next position of each prefix length
        top_next = 0
        while True:
            m = len(stack)
            c = nxt[-1]
            if m < ngram and c + 1 < n and c - stack[-1] <= max_skip:
                nxt[-1] = c + 1
                stack.append(c + 1)
                nxt.append(c + 1)
                continue
            if included(m):
                grams.append(b" ".join(words[i] for i in stack))
            stack.pop()
            nxt.pop()
            if not stack:
                if ngram > 0 and top_next + 1 < n:
                    top_next += 1
                    stack, nxt = [top_next], [top_next]
                    continue
                break
        return _string_vector(grams)

    return run
