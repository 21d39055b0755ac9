"""benchmark_model's inputs: the --input_layer* flags parsed (PopulateInputLayerInfo), random
input data with its per-type ranges, --input_layer_value_files loaded, and tensors as the bytes
TFLite writes for --output_filepath."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from acelera.benchmarking.errors import BenchmarkError, BenchmarkParamError
from acelera.benchmarking.params import BenchmarkParams
from acelera.benchmarking.stats import INT64_MAX, INT64_MIN
from acelera.core.files import DATA_MAX_BYTES, FileError, read_regular_file, regular_file_problem
from acelera.registrar.flags import INT32_MAX

RANDOM_SEED = 0
STRING_FILLER = b"we're have some friends over saturday to hang out in the yard"


# --- input layer flags ----------------------------------------------------------------------
@dataclass
class InputLayerInfo:
    name: str
    shape: tuple[int, ...] = ()
    has_value_range: bool = False
    low: int = 0
    high: int = 0
    input_file_path: str = ""


def _split(s: str, delim: str) -> list[str]:
    return s.split(delim) if s else []


def split_name_and_value_file(item: str) -> tuple[str, str]:
    """`name:path` with `::` escaping a literal colon (SplitInputLayerNameAndValueFile)."""
    delim = -1
    i = 0
    while i < len(item) - 1:
        if item[i] == ":":
            if item[i + 1] == ":":
                i += 1
            elif delim == -1:
                delim = i
            else:
                raise BenchmarkParamError(f"--input_layer_value_files: '{item}' contains more than one delimiter")
        i += 1
    if delim == -1:
        raise BenchmarkParamError(f"--input_layer_value_files: '{item}' doesn't contain any delimiter "
                                  f"(expected name:path)")
    return item[:delim].replace("::", ":"), item[delim + 1:].replace("::", ":")


def _check_listed(flag: str, name: str, names: list[str], input_layer: str) -> None:
    """With --input_layer given, a value range or file must name one of its inputs."""
    if names and name not in names:
        raise BenchmarkParamError(f"--{flag}: cannot find the corresponding input_layer "
                                  f"name({name}) in --input_layer as {input_layer}")


def parse_input_layers(params: BenchmarkParams) -> tuple[list[InputLayerInfo], dict[str, tuple[int, int]], dict[str, str]]:
    """PopulateInputLayerInfo: the --input_layer/--input_layer_shape list, plus value ranges and
    value files by name (matched to inputs later, so they also work without --input_layer)."""
    names = _split(params.input_layer, ",")
    shapes = _split(params.input_layer_shape, ":")
    if len(names) != len(shapes):
        raise BenchmarkParamError(
            f"--input_layer_shape: the number of items in --input_layer_shape ({params.input_layer_shape}, with "
            f"{len(shapes)} items) must match the number of items in --input_layer ({params.input_layer}, with "
            f"{len(names)} items). For example --input_layer=input1,input2 --input_layer_shape=1,224,224,4:1,20")
    infos = []
    for name, shape_s in zip(names, shapes):
        try:
            shape = tuple(int(d) for d in _split(shape_s, ","))
        except ValueError:
            raise BenchmarkParamError(f"--input_layer_shape: incorrect size string specified: '{shape_s}'") from None
        if any(d == -1 for d in shape):
            raise BenchmarkParamError("--input_layer_shape: any unknown sizes in the shapes (-1's) must be replaced "
                                      "with the size you want to benchmark with")
        if any(d < 0 for d in shape):
            raise BenchmarkParamError(f"--input_layer_shape: negative dimension in '{shape_s}'")
        if any(d > INT32_MAX for d in shape):
            raise BenchmarkParamError(f"--input_layer_shape: a dimension in '{shape_s}' is over {INT32_MAX}")
        infos.append(InputLayerInfo(name, shape))

    ranges: dict[str, tuple[int, int]] = {}
    for item in _split(params.input_layer_value_range, ":"):
        parts = item.split(",")
        if len(parts) != 3:
            raise BenchmarkParamError(f"--input_layer_value_range: wrong input value range item specified: "
                                      f"'{item}' (expected name,low,high)")
        name, lo_s, hi_s = parts
        _check_listed("input_layer_value_range", name, names, params.input_layer)
        try:
            lo, hi = int(lo_s), int(hi_s)
        except ValueError:
            lo, hi = 1, 0
        if lo > hi:
            raise BenchmarkParamError(f"--input_layer_value_range: wrong low and high value of the input value "
                                      f"range specified: '{item}'")
        if lo < INT64_MIN or hi > INT64_MAX:
            raise BenchmarkParamError(f"--input_layer_value_range: '{item}': low and high must be 64-bit "
                                      f"integers ([{INT64_MIN}, {INT64_MAX}])")
        ranges[name] = (lo, hi)

    files: dict[str, str] = {}
    for item in _split(params.input_layer_value_files, ","):
        name, path = split_name_and_value_file(item)
        _check_listed("input_layer_value_files", name, names, params.input_layer)
        files[name] = path
    return infos, ranges, files


# --- input data -----------------------------------------------------------------------------
_DEFAULT_RANGES: dict[str, tuple[float, float]] = {
    "FLOAT32": (-0.5, 0.5), "FLOAT64": (-0.5, 0.5), "COMPLEX64": (-0.5, 0.5),
    "INT32": (0, 99), "UINT32": (0, 99), "INT64": (0, 99), "UINT64": (0, 99),
    "UINT8": (0, 254), "INT8": (-127, 127), "INT16": (0, 0), "UINT16": (0, 0),
}


def _to_bfloat16_bits(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def random_tensor_data(rng: np.random.Generator, tensor, shape: Sequence[int],
                       value_range: tuple[int, int] | None = None) -> np.ndarray:
    """Uniform random data for one input, with benchmark_model's per-type ranges."""
    tname = tensor.type_name
    dtype = tensor.dtype
    n = int(np.prod(shape, dtype=np.int64))
    shape = tuple(shape)
    if tname in ("FLOAT16", "BFLOAT16"):  # value ranges are ignored for half types
        vals = rng.uniform(-0.5, 0.5, n).astype(np.float32)
        data = vals.astype(np.float16) if tname == "FLOAT16" else _to_bfloat16_bits(vals)
        return data.reshape(shape)
    if tname == "BOOL":
        return rng.integers(0, 1, n, endpoint=True).astype(np.bool_).reshape(shape)
    if tname == "STRING":
        arr = np.empty(n, dtype=object)
        arr[:] = [STRING_FILLER] * n
        return arr.reshape(shape)
    if tname not in _DEFAULT_RANGES:
        raise BenchmarkError(f"Don't know how to populate tensor {tensor.name} of type {tname}")
    lo, hi = value_range if value_range is not None else _DEFAULT_RANGES[tname]
    if tname in ("FLOAT32", "FLOAT64"):
        return rng.uniform(float(lo), float(hi), n).astype(dtype).reshape(shape)
    if tname == "COMPLEX64":
        re = rng.uniform(float(lo), float(hi), n)
        im = rng.uniform(float(lo), float(hi), n)
        return (re + 1j * im).astype(np.complex64).reshape(shape)
    ints = rng.integers(int(lo), int(hi), n, endpoint=True, dtype=np.int64)
    return ints.astype(dtype).reshape(shape)  # wraps like static_cast for out-of-range bounds


def _check_file_size(path: str, size: int, want: int) -> None:
    if size != want:
        raise BenchmarkParamError(f"--input_layer_value_files: the size of {path} is {size} bytes. "
                                  f"It should be {want} bytes.")


def load_tensor_data(tensor, shape: Sequence[int], path: str) -> np.ndarray:
    """LoadInputTensorData: raw bytes of exactly the tensor's size, or '\\0'-separated strings."""
    n = int(np.prod(shape, dtype=np.int64))
    # a FIFO or a device is refused, never read; a numeric tensor's file must be its exact size
    problem = regular_file_problem(path, DATA_MAX_BYTES)
    want = n * tensor.dtype.itemsize
    if problem is None and tensor.type_name != "STRING":
        _check_file_size(path, os.stat(path).st_size, want)
    raw = None
    if problem is None:
        try:
            raw = read_regular_file(path, DATA_MAX_BYTES, "input_layer_value_file")
        except FileError as e:
            problem = str(e).split("': ", 1)[-1]
    if raw is None:
        raise BenchmarkParamError(f"--input_layer_value_files: failed to read the input_layer_value_file "
                                  f"'{path}': {problem}")
    if tensor.type_name == "STRING":
        if len(path) > 3 and path.endswith(".pb"):
            items = [raw]
        else:
            items = raw.split(b"\0")
            if items and items[-1] == b"":
                items.pop()  # getline does not yield an empty piece after a trailing delimiter
            if len(items) != n:
                raise BenchmarkParamError(f"--input_layer_value_files: the number of string in the "
                                          f"input_layer_value_file({path}) is {len(items)}. It should be {n}.")
        arr = np.empty(len(items), dtype=object)
        arr[:] = items
        return arr.reshape(tuple(shape)) if len(items) == n else arr
    _check_file_size(path, len(raw), want)
    return np.frombuffer(raw, dtype=tensor.dtype).reshape(tuple(shape)).copy()


def _string_tensor_bytes(arr: np.ndarray) -> bytes:
    """TFLite's string tensor buffer: count, count+1 offsets (int32), then the bytes."""
    items = [x if isinstance(x, bytes) else str(x).encode() for x in arr.reshape(-1)]
    n = len(items)
    header = 4 * (n + 2)
    offsets, pos = [], header
    for s in items:
        offsets.append(pos)
        pos += len(s)
    offsets.append(pos)
    return np.array([n] + offsets, "<i4").tobytes() + b"".join(items)


def tensor_bytes(arr: np.ndarray) -> bytes:
    return _string_tensor_bytes(arr) if arr.dtype == object else np.ascontiguousarray(arr).tobytes()
