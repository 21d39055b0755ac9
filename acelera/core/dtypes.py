"""TFLite tensor types and their numpy equivalents."""
from __future__ import annotations

import numpy as np

# TensorType enum values of the TFLite schema.
TYPE_NAMES: dict[int, str] = {
    0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL",
    7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64",
    13: "RESOURCE", 14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4", 18: "BFLOAT16",
    21: "FLOAT8_E4M3FN", 22: "FLOAT8_E5M2",
}
TYPE_CODES: dict[str, int] = {v: k for k, v in TYPE_NAMES.items()}

_NUMPY: dict[int, np.dtype] = {
    0: np.dtype(np.float32), 1: np.dtype(np.float16), 2: np.dtype(np.int32), 3: np.dtype(np.uint8),
    4: np.dtype(np.int64), 6: np.dtype(np.bool_), 7: np.dtype(np.int16), 8: np.dtype(np.complex64),
    9: np.dtype(np.int8), 10: np.dtype(np.float64), 11: np.dtype(np.complex128),
    12: np.dtype(np.uint64), 15: np.dtype(np.uint32), 16: np.dtype(np.uint16),
    # INT4 constants are unpacked to int8 at load time.
    17: np.dtype(np.int8),
    # Types without a numpy counterpart are held as raw bytes.
    5: np.dtype(np.object_), 13: np.dtype(np.object_), 14: np.dtype(np.object_),
    18: np.dtype(np.uint16),
    # FLOAT8 values are held as their uint8 bit patterns (kernels only move them).
    21: np.dtype(np.uint8), 22: np.dtype(np.uint8),
}


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
    return type_code_ in (3, 7, 9, 17)
