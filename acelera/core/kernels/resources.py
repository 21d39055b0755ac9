"""Resource kernels: variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) and static
hashtables (HASHTABLE, HASHTABLE_IMPORT, HASHTABLE_FIND, HASHTABLE_SIZE); tflite/kernels/
var_handle.cc, read_variable.cc, assign_variable.cc, hashtable*.cc and
tflite/experimental/resource/.

A RESOURCE tensor holds a key into the interpreter's ModelRuntime.resources, so every
subgraph of the model sees the same variables and tables and they persist across invokes.
Writes are skipped in allocate_tensors' shape pass, which must not change state.
"""
from __future__ import annotations

import numpy as np

from acelera.core.errors import AceleraError, KernelError
from acelera.core.kernels.array_util import check_arity
from acelera.core.kernels.registry import NodeContext, in_shape_pass, register
from acelera.core.model import Tensor


def _runtime(node: NodeContext):
    if node.runtime is None:
        raise node.unsupported("needs the whole model (run it through an Interpreter)")
    return node.runtime


def _handle(node: NodeContext, key) -> np.ndarray:
    out = np.empty(node.outputs[0].shape, dtype=object)
    out.fill(key)
    return out


def _key(handle: np.ndarray, kind: str):
    key = handle.reshape(-1)[0] if handle.size else None
    if not (isinstance(key, tuple) and key[0] == kind):
        raise AceleraError(f"input 0 is not a {kind} resource handle")
    return key


@register("VAR_HANDLE", max_version=1, dtypes=("RESOURCE",))
def var_handle(node: NodeContext):
    check_arity(node, 0, 1)
    rt = _runtime(node)
    key = ("variable", rt.variable_id(node.options.get("container", ""), node.options.get("shared_name", "")))
    return lambda: _handle(node, key)


@register("ASSIGN_VARIABLE", max_version=1, dtypes=("RESOURCE",))
def assign_variable(node: NodeContext):
    rt = _runtime(node)
    if len(node.inputs) != 2 or node.outputs or node.input(0) is None or node.input(1) is None:
        raise node.unsupported("takes a resource handle and a value, and has no outputs")

    def run(handle, value):
        key = _key(handle, "variable")
        if not in_shape_pass():
            old = rt.resources.get(key)
            if old is not None and old.dtype != value.dtype:
                raise AceleraError(f"variable holds {old.dtype}, cannot assign {value.dtype}")
            rt.resources[key] = np.array(value, copy=True)
        return ()

    return run


@register("READ_VARIABLE", max_version=1, dtypes=("RESOURCE",))
def read_variable(node: NodeContext):
    check_arity(node, 1, 1)
    rt = _runtime(node)
    out_t = node.outputs[0]

    def run(handle):
        key = _key(handle, "variable")
        value = rt.resources.get(key)
        if value is None:
            if in_shape_pass():
                return np.zeros(out_t.shape, out_t.dtype)
            raise AceleraError("the variable is read before it was assigned")
        if value.dtype != out_t.dtype:
            raise AceleraError(f"variable holds {value.dtype}, the output is {out_t.type_name}")
        return np.array(value, copy=True)

    return run


_TABLE_TYPES = {(4, 5), (5, 4)}  # (key, value): INT64 -> STRING, STRING -> INT64 (static_hashtable.cc)


class _Table:
    def __init__(self, key_type: int, value_type: int):
        self.key_type, self.value_type = key_type, value_type
        self.map: dict = {}
        self.initialized = False


def _table(rt, handle: np.ndarray) -> _Table:
    table = rt.resources.get(_key(handle, "hashtable"))
    if table is None:
        raise AceleraError("the hashtable does not exist")
    return table


@register("HASHTABLE", max_version=1, dtypes=("RESOURCE",))
def hashtable(node: NodeContext):
    check_arity(node, 0, 1)
    rt = _runtime(node)
    key_t, value_t = int(node.options.get("key_dtype", 0)), int(node.options.get("value_dtype", 0))
    if (key_t, value_t) not in _TABLE_TYPES:
        raise node.unsupported("only int64 -> string and string -> int64 tables are supported (as in LiteRT)")
    key = ("hashtable", int(node.options.get("table_id", 0)))

    def run():
        if key not in rt.resources:
            rt.resources[key] = _Table(key_t, value_t)
        return _handle(node, key)

    return run


def _table_value(v, table_type: int):
    return bytes(v) if table_type == 5 else int(v)


_TABLE_TYPE_NAMES = {("INT64", "STRING"), ("STRING", "INT64")}
_TYPE_NAMES = {4: "INT64", 5: "STRING"}


def _inputs(node: NodeContext, n_in: int, n_out: int) -> list[Tensor]:
    """The node's inputs, once LiteRT's NumInputs/NumOutputs checks (and none absent) pass."""
    check_arity(node, n_in, n_out)
    return [t for t in node.inputs if t is not None]


def _check_table_io(node: NodeContext, n_in: int, n_out: int, key_what: str, value_what: str) -> list[Tensor]:
    """hashtable_import.cc / hashtable_find.cc Prepare: the arity, a RESOURCE handle, and an
    int64 -> string or string -> int64 pair of key and value tensors; the inputs."""
    ins = _inputs(node, n_in, n_out)
    handle, keys = ins[0], ins[1]
    values = ins[2] if n_out == 0 else node.outputs[0]
    if handle.type_name != "RESOURCE":
        raise node.unsupported(f"input 0 must be a RESOURCE handle, not {handle.type_name}")
    if (keys.type_name, values.type_name) not in _TABLE_TYPE_NAMES:
        raise node.unsupported(f"{key_what} {keys.type_name} and {value_what} {values.type_name} are not "
                               "INT64 -> STRING or STRING -> INT64")
    return ins


def _check_table_types(table: _Table, keys: np.ndarray, values_dtype: np.dtype) -> None:
    """StaticHashtable::CheckKeyAndValueTypes at invoke (the table's types are its options')."""
    want_keys = np.dtype(object) if table.key_type == 5 else np.dtype(np.int64)
    want_values = np.dtype(object) if table.value_type == 5 else np.dtype(np.int64)
    if keys.dtype != want_keys or np.dtype(values_dtype) != want_values:
        raise KernelError(f"the hashtable maps {_TYPE_NAMES.get(table.key_type)} to "
                          f"{_TYPE_NAMES.get(table.value_type)}, not {keys.dtype} to {np.dtype(values_dtype)}")


@register("HASHTABLE_IMPORT", max_version=1, dtypes=("RESOURCE",))
def hashtable_import(node: NodeContext):
    _, keys_t, values_t = _check_table_io(node, 3, 0, "keys", "values")
    if keys_t.shape != values_t.shape:
        raise node.unsupported(f"keys {list(keys_t.shape)} and values {list(values_t.shape)} differ in shape")
    rt = _runtime(node)

    def run(handle, keys, values):
        if keys.size != values.size:
            raise AceleraError(f"{keys.size} keys but {values.size} values")
        if in_shape_pass() and _key(handle, "hashtable") not in rt.resources:
            return ()
        table = _table(rt, handle)
        _check_table_types(table, keys, values.dtype)
        if not table.initialized and not in_shape_pass():
            for k, v in zip(keys.reshape(-1), values.reshape(-1)):
                table.map.setdefault(_table_value(k, table.key_type), _table_value(v, table.value_type))
            table.initialized = True
        return ()

    return run


@register("HASHTABLE_FIND", max_version=1, dtypes=("RESOURCE",))
def hashtable_find(node: NodeContext):
    default_t = _check_table_io(node, 3, 1, "keys", "output")[2]
    out_t = node.outputs[0]
    if default_t.type != out_t.type:
        raise node.unsupported(f"default value {default_t.type_name} differs from output {out_t.type_name}")
    if int(np.prod(default_t.shape)) < 1:
        raise node.unsupported("default value has no element")
    rt = _runtime(node)

    def run(handle, keys, default):
        if in_shape_pass() and _key(handle, "hashtable") not in rt.resources:
            return np.zeros(keys.shape, out_t.dtype) if out_t.dtype != object else np.full(keys.shape, b"", object)
        table = _table(rt, handle)
        if not table.initialized and not in_shape_pass():
            raise AceleraError("the hashtable must be initialized (HASHTABLE_IMPORT) before it is used")
        _check_table_types(table, keys, out_t.dtype)
        fallback = _table_value(default.reshape(-1)[0], table.value_type)
        found = [table.map.get(_table_value(k, table.key_type), fallback) for k in keys.reshape(-1)]
        out = np.empty(len(found), dtype=out_t.dtype)
        out[:] = found
        return out.reshape(keys.shape)

    return run


@register("HASHTABLE_SIZE", max_version=1, dtypes=("RESOURCE",))
def hashtable_size(node: NodeContext):
    handle_t = _inputs(node, 1, 1)[0]
    if handle_t.type_name != "RESOURCE" or node.outputs[0].type_name != "INT64":
        raise node.unsupported(f"takes a RESOURCE handle to an INT64 output, not {handle_t.type_name} "
                               f"to {node.outputs[0].type_name}")
    rt = _runtime(node)

    def run(handle):
        if in_shape_pass() and _key(handle, "hashtable") not in rt.resources:
            return np.zeros((1,), np.int64)
        return np.array([len(_table(rt, handle).map)], np.int64)

    return run
