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

from acelera.core.errors import AceleraError
from acelera.core.kernels.registry import NodeContext, in_shape_pass, register


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
    rt = _runtime(node)
    key = ("variable", rt.variable_id(node.options.get("container", ""), node.options.get("shared_name", "")))
    return lambda: _handle(node, key)


@register("ASSIGN_VARIABLE", max_version=1, dtypes=("RESOURCE",))
def assign_variable(node: NodeContext):
    rt = _runtime(node)
    if len(node.inputs) != 2 or node.input(1) is None:
        raise node.unsupported("takes a resource handle and a value")

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


@register("HASHTABLE_IMPORT", max_version=1, dtypes=("RESOURCE",))
def hashtable_import(node: NodeContext):
    rt = _runtime(node)

    def run(handle, keys, values):
        if keys.size != values.size:
            raise AceleraError(f"{keys.size} keys but {values.size} values")
        if in_shape_pass() and _key(handle, "hashtable") not in rt.resources:
            return ()
        table = _table(rt, handle)
        if not table.initialized and not in_shape_pass():
            for k, v in zip(keys.reshape(-1), values.reshape(-1)):
                table.map.setdefault(_table_value(k, table.key_type), _table_value(v, table.value_type))
            table.initialized = True
        return ()

    return run


@register("HASHTABLE_FIND", max_version=1, dtypes=("RESOURCE",))
def hashtable_find(node: NodeContext):
    rt = _runtime(node)
    out_t = node.outputs[0]

    def run(handle, keys, default):
        if in_shape_pass() and _key(handle, "hashtable") not in rt.resources:
            return np.zeros(keys.shape, out_t.dtype) if out_t.dtype != object else np.full(keys.shape, b"", object)
        table = _table(rt, handle)
        if not table.initialized and not in_shape_pass():
            raise AceleraError("the hashtable must be initialized (HASHTABLE_IMPORT) before it is used")
        fallback = _table_value(default.reshape(-1)[0], table.value_type)
        found = [table.map.get(_table_value(k, table.key_type), fallback) for k in keys.reshape(-1)]
        out = np.empty(len(found), dtype=out_t.dtype)
        out[:] = found
        return out.reshape(keys.shape)

    return run


@register("HASHTABLE_SIZE", max_version=1, dtypes=("RESOURCE",))
def hashtable_size(node: NodeContext):
    rt = _runtime(node)

    def run(handle):
        if in_shape_pass() and _key(handle, "hashtable") not in rt.resources:
            return np.zeros((1,), np.int64)
        return np.array([len(_table(rt, handle).map)], np.int64)

    return run
