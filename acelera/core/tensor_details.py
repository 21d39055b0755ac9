"""Tensors as LiteRT's Python API describes and takes them: the detail dictionaries of
get_tensor_details()/get_input_details() (tflite/python/interpreter.py's _get_tensor_details) and
STRING values converted to acelera's object arrays of bytes."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from acelera.core import dtypes
from acelera.core.errors import InterpreterError
from acelera.core.model import Tensor

_STRING = dtypes.TYPE_CODES["STRING"]


def details_dtype(t: Tensor) -> type:
    """The numpy type LiteRT reports for a tensor: np.bytes_ for STRING."""
    return np.bytes_ if t.type == _STRING else t.dtype.type


def type_name(dtype: np.dtype) -> str:
    if dtype.kind in "SUO":
        return "STRING"
    try:
        return dtypes.TYPE_NAMES[dtypes.type_code(dtype)]
    except ValueError:
        return "NOTYPE"


def _sparsity_parameters(t: Tensor) -> dict[str, Any]:
    s = t.sparsity
    if s is None:
        return {}
    out: dict[str, Any] = {"traversal_order": np.array(s.traversal_order, np.int32)}
    if s.block_map:
        out["block_map"] = np.array(s.block_map, np.int32)
    dims: list[dict[str, Any]] = []
    for d in s.dim_metadata:
        if d.format == 0:
            dims.append({"format": 0, "dense_size": int(d.dense_size)})
        else:
            dims.append({"format": 1,
                         "array_segments": np.asarray(d.segments if d.segments is not None else [], np.int32),
                         "array_indices": np.asarray(d.indices if d.indices is not None else [], np.int32)})
    out["dim_metadata"] = dims
    return out


def tensor_details(t: Tensor, shape: Sequence[int]) -> dict[str, Any]:
    """A tensor's description with LiteRT's keys, in LiteRT's order."""
    q = t.quantization
    sig = t.shape_signature
    # LiteRT reports the file's signature when it has unknown dimensions, the current shape
    # otherwise (a fixed signature equals the declared shape).
    real_sig = len(sig) != len(t.shape) or any(d < 0 for d in sig)
    return {
        "name": t.name,
        "index": t.index,
        "shape": np.array(shape, np.int32),
        "shape_signature": np.array(sig if real_sig else shape, np.int32),
        "dtype": details_dtype(t),
        "quantization": (float(q.scale[0]), int(q.zero_point[0])) if q.scale.size == 1 else (0.0, 0),
        "quantization_parameters": {
            "scales": q.scale.astype(np.float32),
            "zero_points": q.zero_point.astype(np.int32),
            "quantized_dimension": int(q.quantized_dimension),
            "block_size": 0,
        },
        "sparsity_parameters": _sparsity_parameters(t),
    }



def string_array(value: Any, index: int) -> np.ndarray:
    """A STRING tensor value (numpy array of bytes/str) as acelera's object array of bytes."""
    if not isinstance(value, np.ndarray):
        raise InterpreterError(f"Passed in value type is not a numpy array, got type {type(value).__name__}.")
    if value.dtype.kind not in "SUO":
        raise InterpreterError(f"Cannot use numpy array of type {value.dtype} for string tensor.")
    if value.ndim == 0 and value.dtype.kind in "SU":
        return np.array(value.tobytes(), dtype=object)  # LiteRT stores a 0-d array's raw bytes

    def encode(v: Any) -> bytes:
        if isinstance(v, bytes):
            return v
        if isinstance(v, str):
            return v.encode("utf-8")
        raise InterpreterError(f"Cannot set tensor: string tensor {index} got a {type(v).__name__} item, "
                               f"not str or bytes")

    out = np.empty(value.shape, dtype=object)
    flat = out.reshape(-1)
    for k, v in enumerate(value.reshape(-1).tolist()):
        flat[k] = encode(v)
    return out
