"""TFLite tensor types, their numpy equivalents, and the packing of the sub-byte types.

INT4 and UINT4 pack two values per byte, INT2 four, lowest bits first, the last byte padded
with zero bits (LiteRT's tensor_utils::PackInt8IntoDenseInt / UnpackPackedIntToInt8 in
tflite/kernels/internal/portable_tensor_utils.cc; tflite/util.cc BytesRequired). acelera holds
them unpacked, one value per element: INT4 and INT2 as int8, UINT4 as uint8.
"""
from __future__ import annotations

import numpy as np

# TensorType enum values of the TFLite schema.
TYPE_NAMES: dict[int, str] = {
    0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL",
    7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64",
    13: "RESOURCE", 14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4", 18: "BFLOAT16",
    19: "INT2", 20: "UINT4", 21: "FLOAT8_E4M3FN", 22: "FLOAT8_E5M2",
}
TYPE_CODES: dict[str, int] = {v: k for k, v in TYPE_NAMES.items()}

_NUMPY: dict[int, np.dtype] = {
    0: np.dtype(np.float32), 1: np.dtype(np.float16), 2: np.dtype(np.int32), 3: np.dtype(np.uint8),
    4: np.dtype(np.int64), 6: np.dtype(np.bool_), 7: np.dtype(np.int16), 8: np.dtype(np.complex64),
    9: np.dtype(np.int8), 10: np.dtype(np.float64), 11: np.dtype(np.complex128),
    12: np.dtype(np.uint64), 15: np.dtype(np.uint32), 16: np.dtype(np.uint16),
    # The packed sub-byte types are unpacked at load time (see PACKED_BITS).
    17: np.dtype(np.int8), 19: np.dtype(np.int8), 20: np.dtype(np.uint8),
    # Types without a numpy counterpart are held as raw bytes.
    5: np.dtype(np.object_), 13: np.dtype(np.object_), 14: np.dtype(np.object_),
    18: np.dtype(np.uint16),
    # FLOAT8 values are held as their uint8 bit patterns (kernels only move them).
    21: np.dtype(np.uint8), 22: np.dtype(np.uint8),
}

#: bits per value of the packed types: INT4, INT2, UINT4
PACKED_BITS: dict[int, int] = {17: 4, 19: 2, 20: 4}
#: [min, max] of the values each packed type holds
PACKED_RANGES: dict[int, tuple[int, int]] = {17: (-8, 7), 19: (-2, 1), 20: (0, 15)}


def numpy_dtype(type_code: int) -> np.dtype:
    """The numpy dtype acelera uses for a TFLite TensorType."""
    return _NUMPY[type_code]


def type_code(dtype: np.dtype | type | str) -> int:
    """The TFLite TensorType for a numpy dtype or TFLite type name."""
    if isinstance(dtype, str) and dtype.upper() in TYPE_CODES:
        return TYPE_CODES[dtype.upper()]
    dt = np.dtype(dtype)
    for code in (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 15, 16):
        if _NUMPY[code] == dt:
            return code
    raise ValueError(f"no TFLite type for dtype {dt}")


def is_quantized_type(type_code_: int) -> bool:
    return type_code_ in (3, 7, 9, 17, 19, 20)


def packed_size(type_code_: int, n_elements: int) -> int:
    """Bytes a packed buffer of `n_elements` values of INT4/INT2/UINT4 takes (util.cc BytesRequired)."""
    per_byte = 8 // PACKED_BITS[type_code_]
    return (n_elements + per_byte - 1) // per_byte


def unpack(raw: bytes | memoryview | np.ndarray, type_code_: int, n_elements: int) -> np.ndarray:
    """The first `n_elements` values of a packed INT4/INT2/UINT4 buffer as a flat int8 (uint8 for
    UINT4) array; the buffer must hold at least packed_size(type_code_, n_elements) bytes."""
    bits = PACKED_BITS[type_code_]
    b = np.frombuffer(raw, np.uint8) if not isinstance(raw, np.ndarray) else raw.view(np.uint8).reshape(-1)
    b = b[:packed_size(type_code_, n_elements)]
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    v = ((b[:, None] >> shifts) & ((1 << bits) - 1)).reshape(-1)[:n_elements]
    if type_code_ == 20:
        return v.astype(np.uint8)
    half = 1 << (bits - 1)
    return (v.astype(np.int16) - ((v >= half) << bits)).astype(np.int8)


def pack(values: np.ndarray, type_code_: int) -> bytes:
    """Pack values of INT4/INT2/UINT4 (any integer array, flattened in C order; only the low bits
    of each value are kept, as PackInt8IntoDenseInt does) into LiteRT's dense layout."""
    bits = PACKED_BITS[type_code_]
    per_byte = 8 // bits
    v = np.asarray(values).reshape(-1).astype(np.int64) & ((1 << bits) - 1)
    pad = (-v.size) % per_byte
    if pad:
        v = np.concatenate([v, np.zeros(pad, np.int64)])
    shifts = np.arange(0, 8, bits, dtype=np.int64)
    return (v.reshape(-1, per_byte) << shifts).sum(axis=1).astype(np.uint8).tobytes()
