"""Field-level mutations of .tflite models, for fuzzing the loader, the validator and the kernels.

`find_sites(data)` walks a model's flatbuffer with the `tflite` schema bindings and lists every
place where one field's value is stored (a `Site`: byte offset, size, kind): tensor shapes and
shape signatures, tensor types and flags, buffer indices, quantization scales, zero points and
dimensions, operator opcode indices and input/output/intermediate tensor indices, builtin option
fields (found through the options table's own vtable, so every field the file stores, with the
width and type the schema gives it), control-flow subgraph references (WHILE, IF, CALL_ONCE,
CALL and the StableHLO ops that name a subgraph), subgraph inputs and outputs, signature
indices, operator codes and versions, and constant buffer bytes.

`mutant(data, seed, case)` picks one to three sites and a value for each, deterministically
from (seed, case): a kind uniformly among the kinds the model has, a site of that kind, then a
value among the extremes and plausible neighbours of that kind (0, -1, 1, the original n, n+1,
the count of what an index refers to and one past it, 2**31-1, -2**31, another valid index; for
floats 0, -1, nan, inf, 1e-45, 1e30; for enums every value in range and a few out of range).
The values overwrite the fields in place, so the file keeps its size and stays a well-formed
flatbuffer: the mutant gets past the parser to the model validator and the kernels.

Vtable slots follow the field order of LiteRT's tflite/converter/schema/schema.fbs
(slot = 4 + 2 * field id; a union takes two ids, its type then its value).

    python -m acelera.conformance.mutate MODEL --seed S --case K [-o OUT]   # rebuild one mutant
    python -m acelera.conformance.mutate MODEL --sites                      # list its sites
"""
from __future__ import annotations

import argparse
import inspect
import math
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import tflite

# table Model
_MODEL_OPERATOR_CODES, _MODEL_SUBGRAPHS, _MODEL_BUFFERS, _MODEL_SIGNATURE_DEFS = 6, 8, 12, 18
# table SubGraph
_SG_TENSORS, _SG_INPUTS, _SG_OUTPUTS, _SG_OPERATORS = 4, 6, 8, 10
# table Tensor
_T_SHAPE, _T_TYPE, _T_BUFFER, _T_QUANTIZATION, _T_IS_VARIABLE, _T_SHAPE_SIGNATURE, _T_HAS_RANK = 4, 6, 8, 12, 14, 18, 20
# table QuantizationParameters
_Q_SCALE, _Q_ZERO_POINT, _Q_QUANTIZED_DIMENSION = 8, 10, 16
# table Operator
_OP_OPCODE_INDEX, _OP_INPUTS, _OP_OUTPUTS, _OP_OPTIONS_TYPE, _OP_OPTIONS = 4, 6, 8, 10, 12
_OP_INTERMEDIATES, _OP_OPTIONS2_TYPE, _OP_OPTIONS2 = 20, 26, 28
# table OperatorCode
_OC_DEPRECATED_BUILTIN_CODE, _OC_VERSION, _OC_BUILTIN_CODE = 4, 8, 10
# table Buffer
_B_DATA, _B_OFFSET, _B_SIZE = 4, 6, 8
# table SignatureDef / TensorMap
_SD_INPUTS, _SD_OUTPUTS, _SD_SUBGRAPH_INDEX, _TM_TENSOR_INDEX = 4, 6, 12, 6

#: enum TensorType: FLOAT32 = 0 ... FLOAT8_E5M2 = 22 (the schema is newer than the bindings)
TENSOR_TYPES = 23
#: enum BuiltinOperator: ADD = 0 ... STABLEHLO_CASE = 209
BUILTIN_OPERATORS = 210

I32_MAX, I32_MIN = 2**31 - 1, -2**31
FLOAT_VALUES = (0.0, -1.0, float("nan"), float("inf"), float("-inf"), 1e-45, 1e30, -1e30)

#: every kind of site, in the order find_sites lists them
KINDS = ("shape", "shape_signature", "tensor_type", "tensor_flag", "buffer_index", "quant_scale",
         "quant_zero_point", "quant_dimension", "opcode_index", "op_input", "op_output", "op_intermediate",
         "option", "subgraph_ref", "subgraph_input", "subgraph_output", "signature", "builtin_code",
         "deprecated_builtin_code", "opcode_version", "buffer_field", "buffer_data")


@dataclass(frozen=True)
class Site:
    """Where one field's value is stored: `size` bytes at `offset`, packed as struct `fmt`."""

    offset: int
    size: int
    kind: str
    fmt: str  # struct format of the field ('b', 'B', 'i', 'I', 'q', 'f', ...); buffer_data: 'B'
    where: str  # e.g. "subgraph 0 tensor 3 shape[1]"
    original: float | None = None
    count: int = 0  # what an index refers to (tensors, buffers, subgraphs, ...), or the tensor's rank
    own: int = -1  # the subgraph holding the site, for subgraph references


@dataclass(frozen=True)
class Mutation:
    """`value`, packed as `fmt`, written over `size` bytes at `offset`."""

    offset: int
    size: int
    fmt: str
    value: float
    kind: str
    where: str

    def payload(self) -> bytes:
        return pack(self.fmt, self.value)

    def describe(self) -> str:
        return f"{self.where} ({self.kind}, byte {self.offset}) := {_show(self.value)}"


@dataclass(frozen=True)
class Mutant:
    data: bytes
    mutations: tuple[Mutation, ...]
    seed: int
    case: int

    def describe(self) -> str:
        return "; ".join(m.describe() for m in self.mutations)


def _show(v: float) -> str:
    return repr(float(v)) if isinstance(v, float) else str(int(v))


def pack(fmt: str, value: float) -> bytes:
    """`value` as `fmt`, little-endian; integers wrap to the field's width (-1 -> all ones)."""
    if fmt in "efd":
        return struct.pack("<" + fmt, float(value))
    size = struct.calcsize("<" + ("B" if fmt == "?" else fmt))
    return (int(value) % (1 << (8 * size))).to_bytes(size, "little")


def apply(data: bytes, mutations: Sequence[Mutation]) -> bytes:
    b = bytearray(data)
    for m in mutations:
        payload = m.payload()
        assert len(payload) == m.size and 0 <= m.offset and m.offset + m.size <= len(b), m
        b[m.offset:m.offset + m.size] = payload
    return bytes(b)


# --- walking the flatbuffer ----------------------------------------------------------------
def _scalar(tab: flatbuffers.table.Table, slot: int) -> int | None:
    o = tab.Offset(slot)
    return tab.Pos + o if o else None


def _vector(tab: flatbuffers.table.Table, slot: int) -> tuple[int, int]:
    """(position of the first element, length); (0, 0) when the field is absent."""
    o = tab.Offset(slot)
    return (tab.Vector(o), tab.VectorLen(o)) if o else (0, 0)


def _read(data: bytes, fmt: str, pos: int) -> float:
    return struct.unpack_from("<" + fmt, data, pos)[0]


class _Probe:
    """Stands in for a table's `_tab` while a bindings accessor runs, to learn which vtable slot
    the accessor reads and as what (scalar or vector element, and its number type)."""

    Pos = 0
    Bytes = b""

    def __init__(self) -> None:
        self.slot: int | None = None
        self.vector = False
        self.flags = None

    def Offset(self, slot: int) -> int:
        self.slot = slot
        return 4

    def Vector(self, off: int) -> int:
        self.vector = True
        return 0

    def VectorLen(self, off: int) -> int:
        self.vector = True
        return 1

    def Get(self, flags, off: int):
        self.flags = flags
        return 0

    def GetVectorAsNumpy(self, flags, off: int):
        self.vector, self.flags = True, flags
        return np.zeros(0)

    def Indirect(self, off: int) -> int:
        return 0

    def String(self, off: int) -> bytes:
        return b""

    def Union(self, t, off: int):
        return None


_ACCESSOR_SKIP = ("AsNumpy", "Length", "IsNone", "BufferHasIdentifier")


@cache
def option_fields(cls_name: str) -> dict[int, tuple[str, str, bool]]:
    """For the options table `cls_name` (a `tflite` bindings class): vtable slot -> (accessor
    name, struct format, is a vector), for its scalar fields and vectors of scalars."""
    cls = getattr(tflite, cls_name, None)
    if not isinstance(cls, type):
        return {}
    fields: dict[int, tuple[str, str, bool]] = {}
    for name, fn in vars(cls).items():
        if name.startswith(("_", "GetRootAs")) or name == "Init" or name.endswith(_ACCESSOR_SKIP):
            continue
        if not callable(fn):
            continue
        params = len(inspect.signature(fn).parameters)
        if params not in (1, 2):
            continue
        obj: Any = object.__new__(cls)  # no bindings class defines __new__; the probe needs no __init__
        probe = _Probe()
        obj._tab = probe
        try:
            fn(obj) if params == 1 else fn(obj, 0)
        except Exception:  # noqa: BLE001, S112  (an accessor of a nested table or struct: not a site)
            continue
        if probe.slot is not None and probe.flags is not None:
            fields[probe.slot] = (name, probe.flags.packer_type.format.lstrip("<"), probe.vector)
    return fields


@cache
def _union_names(union: str) -> dict[int, str]:
    cls = getattr(tflite, union)
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int) and v}


def _options_sites(data: bytes, op_tab, type_slot: int, value_slot: int, union: str, where: str,
                   n_subgraphs: int, own: int) -> list[Site]:
    """Every field the operator's options table stores, found by walking the table's vtable."""
    tpos = _scalar(op_tab, type_slot)
    vo = op_tab.Offset(value_slot)
    if tpos is None or not vo:
        return []
    cls_name = _union_names(union).get(data[tpos])
    table = op_tab.Indirect(op_tab.Pos + vo)
    vtable = table - _read(data, "i", table)
    vt_size = int(_read(data, "H", vtable))
    known = option_fields(cls_name) if cls_name else {}
    sites = []
    for slot in range(4, vt_size, 2):
        off = _read(data, "H", vtable + slot)
        if not off:
            continue
        name, fmt, is_vec = known.get(slot, (f"field{(slot - 4) // 2}", "B", False))
        kind = "subgraph_ref" if "Subgraph" in name else "option"
        label = f"{where} {cls_name or union}.{name}"
        if is_vec:
            start = table + off + _read(data, "I", table + off)
            n = int(_read(data, "I", start))
            size = struct.calcsize("<" + fmt)
            for j in range(n):
                pos = start + 4 + j * size
                sites.append(Site(pos, size, kind, fmt, f"{label}[{j}]", _read(data, fmt, pos), n_subgraphs, own))
        else:
            pos = table + off
            size = struct.calcsize("<" + fmt)
            sites.append(Site(pos, size, kind, fmt, label, _read(data, fmt, pos), n_subgraphs, own))
    return sites


def _index_vector(data: bytes, tab, slot: int, kind: str, where: str, count: int) -> list[Site]:
    start, n = _vector(tab, slot)
    return [Site(start + 4 * j, 4, kind, "i", f"{where}[{j}]", _read(data, "i", start + 4 * j), count)
            for j in range(n)]


def find_sites(data: bytes) -> list[Site]:
    """Every mutation site of the model `data`, in a fixed order (the walk's)."""
    data = bytes(data)
    model = tflite.Model.GetRootAsModel(data, 0)
    n_buffers, n_codes, n_subgraphs = model.BuffersLength(), model.OperatorCodesLength(), model.SubgraphsLength()
    sites: list[Site] = []
    for s in range(n_subgraphs):
        sg = model.Subgraphs(s)
        n_tensors = sg.TensorsLength()
        for t in range(n_tensors):
            tensor = sg.Tensors(t)
            tab, w = tensor._tab, f"subgraph {s} tensor {t}"
            start, rank = _vector(tab, _T_SHAPE)
            for j in range(rank):
                sites.append(Site(start + 4 * j, 4, "shape", "i", f"{w} shape[{j}]",
                                  _read(data, "i", start + 4 * j), rank))
            start, n = _vector(tab, _T_SHAPE_SIGNATURE)
            for j in range(n):
                sites.append(Site(start + 4 * j, 4, "shape_signature", "i", f"{w} shape_signature[{j}]",
                                  _read(data, "i", start + 4 * j), n))
            if (pos := _scalar(tab, _T_TYPE)) is not None:
                sites.append(Site(pos, 1, "tensor_type", "b", f"{w} type", _read(data, "b", pos)))
            for slot, name in ((_T_IS_VARIABLE, "is_variable"), (_T_HAS_RANK, "has_rank")):
                if (pos := _scalar(tab, slot)) is not None:
                    sites.append(Site(pos, 1, "tensor_flag", "B", f"{w} {name}", data[pos]))
            if (pos := _scalar(tab, _T_BUFFER)) is not None:
                sites.append(Site(pos, 4, "buffer_index", "I", f"{w} buffer", _read(data, "I", pos), n_buffers))
            q = tensor.Quantization()
            if q is not None:
                start, n = _vector(q._tab, _Q_SCALE)
                for j in range(n):
                    sites.append(Site(start + 4 * j, 4, "quant_scale", "f", f"{w} quantization.scale[{j}]",
                                      _read(data, "f", start + 4 * j), n))
                start, n = _vector(q._tab, _Q_ZERO_POINT)
                for j in range(n):
                    sites.append(Site(start + 8 * j, 8, "quant_zero_point", "q", f"{w} quantization.zero_point[{j}]",
                                      _read(data, "q", start + 8 * j), n))
                if (pos := _scalar(q._tab, _Q_QUANTIZED_DIMENSION)) is not None:
                    sites.append(Site(pos, 4, "quant_dimension", "i", f"{w} quantization.quantized_dimension",
                                      _read(data, "i", pos), rank))
        for o in range(sg.OperatorsLength()):
            op = sg.Operators(o)
            tab, w = op._tab, f"subgraph {s} operator {o}"
            if (pos := _scalar(tab, _OP_OPCODE_INDEX)) is not None:
                sites.append(Site(pos, 4, "opcode_index", "I", f"{w} opcode_index", _read(data, "I", pos), n_codes))
            sites += _index_vector(data, tab, _OP_INPUTS, "op_input", f"{w} inputs", n_tensors)
            sites += _index_vector(data, tab, _OP_OUTPUTS, "op_output", f"{w} outputs", n_tensors)
            sites += _index_vector(data, tab, _OP_INTERMEDIATES, "op_intermediate", f"{w} intermediates", n_tensors)
            sites += _options_sites(data, tab, _OP_OPTIONS_TYPE, _OP_OPTIONS, "BuiltinOptions", w, n_subgraphs, s)
            sites += _options_sites(data, tab, _OP_OPTIONS2_TYPE, _OP_OPTIONS2, "BuiltinOptions2", w, n_subgraphs, s)
        sites += _index_vector(data, sg._tab, _SG_INPUTS, "subgraph_input", f"subgraph {s} inputs", n_tensors)
        sites += _index_vector(data, sg._tab, _SG_OUTPUTS, "subgraph_output", f"subgraph {s} outputs", n_tensors)
    for k in range(model.SignatureDefsLength()):
        sd = model.SignatureDefs(k)
        n_tensors = 0
        if (pos := _scalar(sd._tab, _SD_SUBGRAPH_INDEX)) is not None:
            sub = _read(data, "I", pos)
            sites.append(Site(pos, 4, "signature", "I", f"signature {k} subgraph_index", sub, n_subgraphs))
            if sub < n_subgraphs:
                n_tensors = model.Subgraphs(sub).TensorsLength()
        for side, n in (("inputs", sd.InputsLength()), ("outputs", sd.OutputsLength())):
            for j in range(n):
                tm = sd.Inputs(j) if side == "inputs" else sd.Outputs(j)
                if (pos := _scalar(tm._tab, _TM_TENSOR_INDEX)) is not None:
                    sites.append(Site(pos, 4, "signature", "I", f"signature {k} {side}[{j}].tensor_index",
                                      _read(data, "I", pos), n_tensors))
    for c in range(n_codes):
        tab, w = model.OperatorCodes(c)._tab, f"operator_code {c}"
        if (pos := _scalar(tab, _OC_BUILTIN_CODE)) is not None:
            sites.append(Site(pos, 4, "builtin_code", "i", f"{w} builtin_code", _read(data, "i", pos)))
        if (pos := _scalar(tab, _OC_DEPRECATED_BUILTIN_CODE)) is not None:
            sites.append(Site(pos, 1, "deprecated_builtin_code", "b", f"{w} deprecated_builtin_code",
                              _read(data, "b", pos)))
        if (pos := _scalar(tab, _OC_VERSION)) is not None:
            sites.append(Site(pos, 4, "opcode_version", "i", f"{w} version", _read(data, "i", pos)))
    for b in range(n_buffers):
        tab = model.Buffers(b)._tab
        for slot, name in ((_B_OFFSET, "offset"), (_B_SIZE, "size")):
            if (pos := _scalar(tab, slot)) is not None:
                sites.append(Site(pos, 8, "buffer_field", "Q", f"buffer {b} {name}", _read(data, "Q", pos)))
        start, n = _vector(tab, _B_DATA)
        if n:
            sites.append(Site(start, n, "buffer_data", "B", f"buffer {b} data"))
    return sites


# --- choosing values -----------------------------------------------------------------------
def _ints(fmt: str, values: Sequence[int]) -> list[int]:
    """`values` that fit the field's width (after wrapping), without repeats, in order."""
    bits = 8 * struct.calcsize("<" + ("B" if fmt == "?" else fmt))
    out, seen = [], set()
    for v in values:
        key = int(v) % (1 << bits)
        if key not in seen:
            seen.add(key)
            out.append(int(v))
    return out


def _index_values(site: Site, rng: np.random.Generator) -> list[int]:
    n, orig = site.count, int(site.original or 0)
    other = int(rng.integers(0, n)) if n > 0 else 0
    return [0, -1, 1, -2, n - 1, n, n + 1, orig + 1, orig - 1, other, I32_MAX, I32_MIN, 2**32 - 1]


def candidates(site: Site, rng: np.random.Generator) -> Sequence[float]:
    """The values `site` may take (buffer_data sites are handled by `choose`)."""
    kind, fmt, orig = site.kind, site.fmt, site.original
    if fmt in "efd":
        extra = [] if orig is None or not math.isfinite(orig) else [orig * 256, orig / 256, -orig]
        return list(FLOAT_VALUES) + extra
    o = int(orig or 0)
    if kind in ("shape", "shape_signature"):
        vals = [0, -1, 1, 2, o - 1, o + 1, 2 * o, 1 << 16, 1 << 20, I32_MAX, I32_MIN]
    elif kind == "tensor_type":
        vals = list(range(TENSOR_TYPES)) + [TENSOR_TYPES, TENSOR_TYPES + 1, 127, -1, -128]
    elif kind == "tensor_flag" or fmt == "?":
        vals = [0, 1, 2, 255]
    elif kind in ("buffer_index", "opcode_index", "op_input", "op_output", "op_intermediate",
                  "subgraph_input", "subgraph_output", "signature"):
        vals = _index_values(site, rng)
    elif kind == "subgraph_ref":
        vals = _index_values(site, rng) + [site.own, 0]
    elif kind == "quant_zero_point":
        vals = [0, -1, 1, o + 1, o - 1, 127, -128, 255, 256, -129, 32767, -32768, I32_MAX, I32_MIN,
                2**63 - 1, -2**63]
    elif kind == "quant_dimension":
        vals = [0, -1, 1, site.count - 1, site.count, site.count + 1, I32_MAX, I32_MIN]
    elif kind == "builtin_code":
        vals = list(range(BUILTIN_OPERATORS)) + [-1, BUILTIN_OPERATORS, BUILTIN_OPERATORS + 1, I32_MAX, I32_MIN]
    elif kind == "deprecated_builtin_code":
        vals = list(range(128)) + [-1, -128]
    elif kind == "opcode_version":
        vals = list(range(-1, 9)) + [o + 1, 100, I32_MAX, I32_MIN]
    elif kind == "buffer_field":
        vals = [0, 1, 16, o + 1, 2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1]
    elif struct.calcsize("<" + fmt) == 1:  # option enums and bytes
        vals = list(range(8)) + [o + 1, -1, 127, -128]
    else:  # option integers (strides, axes, sizes, vector elements)
        vals = [0, -1, 1, 2, 3, o - 1, o + 1, 2 * o, 1 << 16, 1 << 20, I32_MAX, I32_MIN]
        if struct.calcsize("<" + fmt) == 8:
            vals += [2**63 - 1, -2**63]
    return _ints(fmt, vals)


_WORD_INTS = (0, -1, 1, 0x7FFF, -0x8000, 1 << 16, I32_MAX, I32_MIN)
_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF)


def choose(data: bytes, site: Site, rng: np.random.Generator) -> Mutation:
    """One value for `site`: a Mutation of the whole field, or for buffer data of one aligned
    word (an integer or float extreme, or its neighbour) or one byte."""
    if site.kind != "buffer_data":
        vals = candidates(site, rng)
        return Mutation(site.offset, site.size, site.fmt, vals[int(rng.integers(0, len(vals)))], site.kind,
                        site.where)
    words = site.size // 4
    if words and rng.random() < 0.75:
        j = int(rng.integers(0, words))
        pos = site.offset + 4 * j
        orig = _read(data, "i", pos)
        pick = int(rng.integers(0, 3))
        value: float
        if pick == 0:
            fmt, value = "i", _WORD_INTS[int(rng.integers(0, len(_WORD_INTS)))]
        elif pick == 1:
            fmt, value = "i", orig + int(rng.choice([-1, 1]))
        else:
            fmt, value = "f", FLOAT_VALUES[int(rng.integers(0, len(FLOAT_VALUES)))]
        return Mutation(pos, 4, fmt, value, "buffer_data", f"{site.where}[{4 * j}:{4 * j + 4}]")
    j = int(rng.integers(0, site.size))
    return Mutation(site.offset + j, 1, "B", _BYTES[int(rng.integers(0, len(_BYTES)))], "buffer_data",
                    f"{site.where}[{j}]")


def by_kind(sites: Sequence[Site]) -> dict[str, list[Site]]:
    groups: dict[str, list[Site]] = {}
    for s in sites:
        groups.setdefault(s.kind, []).append(s)
    return {k: groups[k] for k in KINDS if k in groups}


def mutant(data: bytes, seed: int, case: int, sites: Sequence[Site] | None = None) -> Mutant:
    """Mutant `case` of `data` for `seed`: the same (data, seed, case) always gives the same bytes.
    `sites`: find_sites(data), when the caller has it already."""
    groups = by_kind(find_sites(data) if sites is None else sites)
    kinds = list(groups)
    rng = np.random.default_rng([seed & 0xFFFFFFFF, case & 0xFFFFFFFF])
    n = 1 + int(rng.choice(3, p=[0.7, 0.2, 0.1]))
    muts = []
    for _ in range(n):
        group = groups[kinds[int(rng.integers(0, len(kinds)))]]
        muts.append(choose(data, group[int(rng.integers(0, len(group)))], rng))
    return Mutant(apply(data, muts), tuple(muts), seed, case)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m acelera.conformance.mutate",
                                 description="Rebuild one field-level mutant of a .tflite model, or list its sites.")
    ap.add_argument("model", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", type=int, default=0)
    ap.add_argument("--sites", action="store_true", help="list the model's mutation sites")
    ap.add_argument("-o", "--output", type=Path, help="write the mutant here")
    args = ap.parse_args(argv)
    data = args.model.read_bytes()
    if args.sites:
        for s in find_sites(data):
            print(f"{s.offset:8d} {s.size:6d} {s.kind:24} {s.where}")
        return 0
    m = mutant(data, args.seed, args.case)
    print(m.describe())
    if args.output:
        args.output.write_bytes(m.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
