"""Load and validate .tflite flatbuffers into an immutable, typed IR.

Everything read from the file is checked (indices, vector lengths against the file size,
buffer sizes against shape x dtype, graph acyclicity) before any kernel runs; anything
malformed raises ModelError naming the file and the offending tensor/op index.
"""
from __future__ import annotations

import heapq
import importlib
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from acelera.core import dtypes
from acelera.core.errors import ModelError
from acelera.core.opcodes import BUILTIN_NAMES, CUSTOM

MAX_TENSOR_BYTES = int(os.environ.get("ACELERA_MAX_TENSOR_BYTES", str(4 << 30)))
_IDENT = b"TFL3"
CASE_OPTIONS = 23  # BuiltinOptions2.StablehloCaseOptions in LiteRT's schema.fbs


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: real = scale * (q - zero_point), per tensor or per channel."""

    scale: np.ndarray
    zero_point: np.ndarray
    quantized_dimension: int = 0
    min: tuple[float, ...] = ()
    max: tuple[float, ...] = ()

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    @property
    def is_set(self) -> bool:
        return self.scale.size > 0


NO_QUANT = Quantization(np.zeros(0, np.float32), np.zeros(0, np.int64))


@dataclass(frozen=True)
class DimensionMetadata:
    format: int  # 0 DENSE, 1 SPARSE_CSR
    dense_size: int
    segments: np.ndarray | None
    indices: np.ndarray | None


@dataclass(frozen=True)
class Sparsity:
    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dim_metadata: tuple[DimensionMetadata, ...]


@dataclass(frozen=True, eq=False)
class Tensor:
    index: int
    name: str
    type: int
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...]
    buffer: int
    data: np.ndarray | None
    quantization: Quantization = NO_QUANT
    is_variable: bool = False
    sparsity: Sparsity | None = None

    @property
    def dtype(self) -> np.dtype:
        return dtypes.numpy_dtype(self.type)

    @property
    def type_name(self) -> str:
        return dtypes.TYPE_NAMES[self.type]

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def quantized(self) -> bool:
        return self.quantization.is_set


@dataclass(frozen=True, eq=False)
class Operator:
    index: int
    op: str  # builtin name, or "CUSTOM"
    builtin_code: int
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    custom_code: str | None = None
    custom_options: bytes = b""
    intermediates: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        """The op's display name: the builtin name, or the custom code for custom ops."""
        if self.op == CUSTOM:
            assert self.custom_code is not None  # the parser sets it for every custom op
            return self.custom_code
        return self.op


@dataclass(frozen=True, eq=False)
class Subgraph:
    index: int
    name: str
    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    execution_order: tuple[int, ...]


@dataclass(frozen=True)
class SignatureDef:
    key: str
    subgraph_index: int
    inputs: Mapping[str, int]
    outputs: Mapping[str, int]


@dataclass(frozen=True, eq=False)
class Model:
    version: int
    description: str
    subgraphs: tuple[Subgraph, ...]
    signature_defs: tuple[SignatureDef, ...]
    metadata: Mapping[str, bytes]
    source: str
    content: bytes = field(repr=False, default=b"")

    @property
    def main(self) -> Subgraph:
        return self.subgraphs[0]


#: [min, max] of zero points per quantized storage type
#: QuantizationDetails union members (schema.fbs) acelera's kernels do not implement
UNSUPPORTED_QUANTIZATION_DETAILS = {2: "blockwise (BlockwiseQuantization)", 3: "multi-axis (MultiAxisQuantization)"}
QUANTIZED_RANGES = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767), "INT4": (-8, 7),
                    "UINT4": (0, 15), "INT2": (-2, 1)}


def load_model(source: str | os.PathLike | bytes | bytearray | memoryview, name: str | None = None) -> Model:
    """Parse and validate a .tflite model from a path or from bytes."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = bytes(source)
        label = name or "<model bytes>"
    else:
        label = name or str(source)
        try:
            buf = Path(source).read_bytes()
        except OSError as e:
            raise ModelError(f"{label}: cannot read model file: {e.strerror or e}") from None
    return _Loader(buf, label).load()


class _Loader:
    def __init__(self, buf: bytes, label: str):
        self.buf = buf
        self.label = label

    def fail(self, what: str) -> ModelError:
        return ModelError(f"{self.label}: {what}")

    def load(self) -> Model:
        buf = self.buf
        if len(buf) < 8:
            raise self.fail(f"file is too small to be a TFLite model ({len(buf)} bytes)")
        if buf[4:8] != _IDENT:
            raise self.fail("not a TFLite model (missing 'TFL3' file identifier)")
        try:
            return self._parse()
        except ModelError:
            raise
        except RecursionError:
            raise self.fail("corrupt flatbuffer (nesting too deep)") from None
        except MemoryError:
            raise self.fail("corrupt flatbuffer (implausible sizes)") from None
        except Exception as e:  # any decoding failure of a hostile file
            raise self.fail(f"corrupt flatbuffer ({type(e).__name__}: {e})") from None

    # --- helpers -------------------------------------------------------------------------
    def count(self, n: int, elem_size: int, what: str) -> int:
        if n < 0 or n * elem_size > len(self.buf):
            raise self.fail(f"{what}: vector length {n} exceeds the file size")
        return n

    def vec(self, obj, name: str, what: str, elem_size: int = 4) -> np.ndarray:
        if getattr(obj, name + "IsNone")():
            return np.zeros(0, np.int64)
        self.count(getattr(obj, name + "Length")(), elem_size, what)
        return np.asarray(getattr(obj, name + "AsNumpy")())

    def text(self, raw: bytes | None) -> str:
        return raw.decode("utf-8", "replace") if raw else ""

    # --- parsing -------------------------------------------------------------------------
    def _parse(self) -> Model:
        tfl = _schema("Model")
        m = tfl.GetRootAsModel(self.buf, 0)
        buffers = self._buffers(m)
        n_codes = self.count(m.OperatorCodesLength(), 4, "operator_codes")
        codes = []
        for i in range(n_codes):
            oc = m.OperatorCodes(i)
            code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
            custom = self.text(oc.CustomCode()) if code == 32 else None
            codes.append((code, custom, max(1, int(oc.Version()))))
        n_sub = self.count(m.SubgraphsLength(), 4, "subgraphs")
        if n_sub == 0:
            raise self.fail("model has no subgraphs")
        subgraphs = tuple(self._subgraph(m.Subgraphs(i), i, buffers, codes) for i in range(n_sub))
        self._check_calls(subgraphs)
        sigs = self._signatures(m, subgraphs)
        metadata = {}
        for i in range(self.count(m.MetadataLength(), 4, "metadata")):
            md = m.Metadata(i)
            b = md.Buffer()
            if not 0 <= b < len(buffers):
                raise self.fail(f"metadata {i}: buffer index {b} out of range")
            metadata[self.text(md.Name())] = bytes(buffers[b])
        return Model(int(m.Version()), self.text(m.Description()), subgraphs, sigs,
                     MappingProxyType(metadata), self.label, self.buf)

    def _buffers(self, m) -> list[memoryview]:
        out = []
        mv = memoryview(self.buf)
        for i in range(self.count(m.BuffersLength(), 4, "buffers")):
            b = m.Buffers(i)
            off, size = int(b.Offset()), int(b.Size())
            if off > 1:
                if off + size > len(self.buf):
                    raise self.fail(f"buffer {i}: external data [{off}, {off + size}) lies outside the file")
                out.append(mv[off:off + size])
            elif b.DataIsNone():
                out.append(mv[0:0])
            else:
                n = self.count(b.DataLength(), 1, f"buffer {i}")
                start = b._tab.Vector(b._tab.Offset(4))
                if start + n > len(self.buf):
                    raise self.fail(f"buffer {i}: data lies outside the file")
                out.append(mv[start:start + n])
        return out

    def _subgraph(self, sg, si: int, buffers: list, codes: list) -> Subgraph:
        where = f"subgraph {si}"
        n_t = self.count(sg.TensorsLength(), 4, f"{where} tensors")
        tensors = tuple(self._tensor(sg.Tensors(i), i, buffers, where) for i in range(n_t))
        n_op = self.count(sg.OperatorsLength(), 4, f"{where} operators")
        ops = tuple(self._operator(sg.Operators(i), i, n_t, codes, where) for i in range(n_op))
        inputs = tuple(int(x) for x in self.vec(sg, "Inputs", f"{where} inputs"))
        outputs = tuple(int(x) for x in self.vec(sg, "Outputs", f"{where} outputs"))
        for kind, idx in (("input", inputs), ("output", outputs)):
            for t in idx:
                if not 0 <= t < n_t:
                    raise self.fail(f"{where}: graph {kind} tensor index {t} out of range (0..{n_t - 1})")
        self._check_graph_io(tensors, ops, inputs, outputs, where)
        order = self._execution_order(tensors, ops, inputs, where)
        return Subgraph(si, self.text(sg.Name()), tensors, ops, inputs, outputs, order)

    def _check_graph_io(self, tensors, ops, inputs, outputs, where: str) -> None:
        """Every graph output is written (by a node, or is an input, a constant or a variable);
        no node writes a graph input (LiteRT would run the node on its own input buffer)."""
        ins = set(inputs)
        written: set[int] = set()
        for op in ops:
            for t in op.outputs:
                if t in ins:
                    raise self.fail(f"{where} node {op.index} ({op.op}): writes graph input tensor {t} "
                                    f"('{tensors[t].name}')")
                written.add(t)
        for t in outputs:
            tt = tensors[t]
            if t not in written and t not in ins and not tt.is_constant and not tt.is_variable:
                raise self.fail(f"{where}: graph output tensor {t} ('{tt.name}') is never written "
                                f"(no node produces it and it is not an input or a constant)")

    def _tensor(self, t, i: int, buffers: list, where: str) -> Tensor:
        label = f"{where} tensor {i}"
        ttype = int(t.Type())
        if ttype not in dtypes.TYPE_NAMES:
            raise self.fail(f"{label}: unknown tensor type {ttype}")
        shape = tuple(int(x) for x in self.vec(t, "Shape", f"{label} shape"))
        sig = tuple(int(x) for x in self.vec(t, "ShapeSignature", f"{label} shape_signature")) or shape
        if any(d < 0 for d in shape):
            raise self.fail(f"{label}: negative dimension in shape {list(shape)}")
        if len(shape) > 16:
            raise self.fail(f"{label}: rank {len(shape)} is too large")
        dt = dtypes.numpy_dtype(ttype)
        n_elem = int(np.prod(shape, dtype=np.float64)) if shape else 1
        if dt != np.object_ and n_elem * dt.itemsize > MAX_TENSOR_BYTES:
            raise self.fail(f"{label}: shape {list(shape)} needs {n_elem * dt.itemsize} bytes "
                            f"(limit {MAX_TENSOR_BYTES}, set ACELERA_MAX_TENSOR_BYTES to raise it)")
        b = int(t.Buffer())
        if not 0 <= b < max(1, len(buffers)):
            raise self.fail(f"{label}: buffer index {b} out of range (0..{len(buffers) - 1})")
        quant = self._quantization(t.Quantization(), label, shape)
        if quant.is_set and quant.scale.size:
            self._check_quantized_range(quant, ttype, label)
        sparsity = self._sparsity(t.Sparsity(), label) if t.Sparsity() is not None else None
        raw = buffers[b] if b < len(buffers) else memoryview(b"")
        data = None
        if len(raw):
            tname = self.text(t.Name())
            data = self._constant(raw, ttype, dt, shape, n_elem, sparsity, label, f" ('{tname}')" if tname else "")
        elif b > 0 and n_elem == 0 and dt != np.object_:
            data = np.zeros(shape, dt)  # an empty constant has an empty buffer
        return Tensor(i, self.text(t.Name()), ttype, shape, sig, b, data, quant,
                      bool(t.IsVariable()), sparsity)

    def _constant(self, raw, ttype: int, dt: np.dtype, shape, n_elem: int, sparsity, label: str,
                  name: str = ""):
        if ttype == 5:
            return self._strings(raw, shape, n_elem, label)
        if dt == np.object_:
            return np.frombuffer(raw, np.uint8)  # resources and variants stay raw bytes
        if sparsity is not None and ttype in dtypes.PACKED_BITS:
            raise self.fail(f"{label}{name}: sparse {dtypes.TYPE_NAMES[ttype]} constants are not supported")
        if sparsity is not None:
            if len(raw) % dt.itemsize:
                raise self.fail(f"{label}: sparse buffer size {len(raw)} is not a multiple of {dt.itemsize}")
            return np.frombuffer(raw, dt)
        if ttype in dtypes.PACKED_BITS:  # INT4, INT2, UINT4: several values per byte, low bits first
            need = dtypes.packed_size(ttype, n_elem)
            if len(raw) != need:
                raise self.fail(f"{label}{name}: buffer has {len(raw)} bytes but {dtypes.TYPE_NAMES[ttype]} shape "
                                f"{list(shape)} packs into {need}")
            arr = dtypes.unpack(raw, ttype, n_elem).reshape(shape)
            arr.flags.writeable = False
            return arr
        need = n_elem * dt.itemsize
        if len(raw) != need:
            raise self.fail(f"{label}: buffer has {len(raw)} bytes but shape {list(shape)} of "
                            f"{dtypes.TYPE_NAMES[ttype]} needs {need}")
        arr = np.frombuffer(raw, dt).reshape(shape)
        arr.flags.writeable = False
        return arr

    def _strings(self, raw, shape, n_elem: int, label: str) -> np.ndarray:
        """A STRING buffer (int32 count, count + 1 int32 offsets, then the bytes) as an object
        array of bytes with the tensor's shape."""
        try:
            return decode_strings(bytes(raw), shape)
        except ValueError as e:
            raise self.fail(f"{label}: {e}") from None

    def _quantization(self, q, label: str, shape) -> Quantization:
        if q is None:
            return NO_QUANT
        details = int(q.DetailsType())
        if details in UNSUPPORTED_QUANTIZATION_DETAILS:
            raise self.fail(f"{label}: {UNSUPPORTED_QUANTIZATION_DETAILS[details]} quantization is not supported "
                            "(its values would be read as unquantized)")
        scale = self.vec(q, "Scale", f"{label} quantization scale").astype(np.float32)
        zp = self.vec(q, "ZeroPoint", f"{label} quantization zero_point", 8).astype(np.int64)
        mn = tuple(float(x) for x in self.vec(q, "Min", f"{label} quantization min"))
        mx = tuple(float(x) for x in self.vec(q, "Max", f"{label} quantization max"))
        qd = int(q.QuantizedDimension())
        if scale.size == 0:
            return Quantization(scale, zp, qd, mn, mx) if (mn or mx) else NO_QUANT
        if zp.size == 0:
            zp = np.zeros(scale.size, np.int64)
        if zp.size != scale.size:
            raise self.fail(f"{label}: {scale.size} quantization scales but {zp.size} zero points")
        if scale.size > 1:
            if not 0 <= qd < max(1, len(shape)) or (shape and shape[qd] != scale.size):
                raise self.fail(f"{label}: per-channel quantization with {scale.size} scales does not "
                                f"match dimension {qd} of shape {list(shape)}")
        if not np.all(np.isfinite(scale)):
            raise self.fail(f"{label}: non-finite quantization scale")
        return Quantization(scale, zp, qd, mn, mx)

    def _check_quantized_range(self, q: Quantization, ttype: int, label: str) -> None:
        """LiteRT's kernels refuse these at prepare: a scale that is zero, negative or denormal
        (its reciprocal overflows the fixed-point multiplier), a zero point outside the type."""
        name = dtypes.TYPE_NAMES[ttype]
        if name not in QUANTIZED_RANGES:
            return
        s = q.scale
        bad = np.flatnonzero(~(s >= np.finfo(np.float32).tiny))
        if bad.size:
            k = int(bad[0])
            what = "not positive" if not s[k] > 0 else "denormal"
            where = f" (channel {k})" if s.size > 1 else ""
            raise self.fail(f"{label}: quantization scale {float(s[k])!r}{where} is {what}")
        lo, hi = QUANTIZED_RANGES[name]
        out = np.flatnonzero((q.zero_point < lo) | (q.zero_point > hi))
        if out.size:
            k = int(out[0])
            raise self.fail(f"{label}: zero point {int(q.zero_point[k])} is outside {name}'s range [{lo}, {hi}]")

    def _sparsity(self, s, label: str) -> Sparsity:
        order = tuple(int(x) for x in self.vec(s, "TraversalOrder", f"{label} traversal_order"))
        bmap = tuple(int(x) for x in self.vec(s, "BlockMap", f"{label} block_map"))
        dims = []
        for d in range(self.count(s.DimMetadataLength(), 4, f"{label} dim_metadata")):
            dm = s.DimMetadata(d)
            seg = self._index_vector(dm.ArraySegmentsType(), dm.ArraySegments(), f"{label} segments")
            idx = self._index_vector(dm.ArrayIndicesType(), dm.ArrayIndices(), f"{label} indices")
            dims.append(DimensionMetadata(int(dm.Format()), int(dm.DenseSize()), seg, idx))
        return Sparsity(order, bmap, tuple(dims))

    def _index_vector(self, utype: int, table, what: str):
        names = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}
        if table is None or utype not in names:
            return None
        cls = _schema(names[utype])
        v = cls()
        v.Init(table.Bytes, table.Pos)
        return self.vec(v, "Values", what, 1).astype(np.int64)

    def _operator(self, op, i: int, n_t: int, codes: list, where: str) -> Operator:
        label = f"{where} node {i}"
        oci = int(op.OpcodeIndex())
        if not 0 <= oci < len(codes):
            raise self.fail(f"{label}: opcode index {oci} out of range (0..{len(codes) - 1})")
        code, custom, version = codes[oci]
        name = BUILTIN_NAMES.get(code)
        if name is None:
            raise self.fail(f"{label}: unknown builtin operator code {code}")
        ins = tuple(int(x) for x in self.vec(op, "Inputs", f"{label} inputs"))
        outs = tuple(int(x) for x in self.vec(op, "Outputs", f"{label} outputs"))
        inter = tuple(int(x) for x in self.vec(op, "Intermediates", f"{label} intermediates"))
        for kind, idx, optional in (("input", ins, True), ("output", outs, False), ("intermediate", inter, False)):
            for t in idx:
                if not (0 <= t < n_t or (optional and t == -1)):
                    raise self.fail(f"{label} ({name}): {kind} tensor index {t} out of range (0..{n_t - 1})")
        options = self._options(op, label)
        custom_opts = b""
        if not op.CustomOptionsIsNone():
            self.count(op.CustomOptionsLength(), 1, f"{label} custom_options")
            custom_opts = op.CustomOptionsAsNumpy().tobytes()
        return Operator(i, name, code, version, ins, outs, options, custom, custom_opts, inter)

    def _options(self, op, label: str) -> Mapping[str, Any]:
        otype = int(op.BuiltinOptionsType())
        names, table = _option_class_names(), None
        if otype == 0:
            otype = int(op.BuiltinOptions2Type()) if hasattr(op, "BuiltinOptions2Type") else 0
            if otype == 0:
                return MappingProxyType({})
            names, table = _option_class_names("BuiltinOptions2"), op.BuiltinOptions2()
            if otype == CASE_OPTIONS and table is not None and otype not in names:
                return MappingProxyType({"branch_subgraph_indices": self._case_branches(table, label)})
        else:
            table = op.BuiltinOptions()
        cls_name = names.get(otype)
        if cls_name is None or table is None:
            raise self.fail(f"{label}: unknown builtin options type {otype}")
        obj = _schema(cls_name)()
        obj.Init(table.Bytes, table.Pos)
        out: dict[str, Any] = {}
        for getter, key, is_vec in _option_fields(cls_name):
            if is_vec:
                out[key] = tuple(self.vec(obj, getter, f"{label} option {key}").tolist())
            else:
                val = getattr(obj, getter)()
                out[key] = val.decode("utf-8", "replace") if isinstance(val, bytes) else val
        return MappingProxyType(out)

    def _check_calls(self, subgraphs) -> None:
        """Subgraph indices named by control-flow options exist, and no subgraph calls itself,
        directly or through others (LiteRT would recurse without end)."""
        n = len(subgraphs)
        calls: dict[int, set[int]] = {}
        for sg in subgraphs:
            for op in sg.operators:
                for key, val in op.options.items():
                    if not key.endswith(("subgraph_index", "subgraph_indices")):
                        continue
                    for target in (val if isinstance(val, tuple) else (val,)):
                        if not 0 <= int(target) < n:
                            raise self.fail(f"subgraph {sg.index} node {op.index} ({op.name}): {key} "
                                            f"{target} out of range (0..{n - 1})")
                        calls.setdefault(sg.index, set()).add(int(target))
        state: dict[int, int] = {}  # 1 visiting, 2 done

        def visit(i: int, path: list[int]) -> None:
            state[i] = 1
            for j in sorted(calls.get(i, ())):
                if state.get(j) == 1:
                    cycle = " -> ".join(str(k) for k in path[path.index(j):] + [j])
                    raise self.fail(f"subgraphs call each other in a cycle ({cycle})")
                if j not in state:
                    visit(j, path + [j])
            state[i] = 2

        for i in range(n):
            if i not in state:
                visit(i, [i])

    def _case_branches(self, table, label: str) -> tuple[int, ...]:
        """StablehloCaseOptions.branch_subgraph_indices ([int], field 0), read by hand: the
        schema bindings on PyPI predate the table."""
        o = table.Offset(4)
        if not o:
            return ()
        n = self.count(table.VectorLen(o), 4, f"{label} branch_subgraph_indices")
        start = table.Vector(o)
        if start + 4 * n > len(self.buf):
            raise self.fail(f"{label}: branch_subgraph_indices lie outside the file")
        return tuple(int(v) for v in np.frombuffer(self.buf, "<i4", n, start))

    def _signatures(self, m, subgraphs) -> tuple[SignatureDef, ...]:
        sigs = []
        for i in range(self.count(m.SignatureDefsLength(), 4, "signature_defs")):
            s = m.SignatureDefs(i)
            si = int(s.SubgraphIndex())
            if not 0 <= si < len(subgraphs):
                raise self.fail(f"signature {i}: subgraph index {si} out of range")
            n_t = len(subgraphs[si].tensors)
            maps = []
            for kind in ("Inputs", "Outputs"):
                d = {}
                for j in range(self.count(getattr(s, kind + "Length")(), 4, f"signature {i} {kind}")):
                    tm = getattr(s, kind)(j)
                    ti = int(tm.TensorIndex())
                    if not 0 <= ti < n_t:
                        raise self.fail(f"signature {i}: {kind.lower()[:-1]} tensor index {ti} out of range")
                    d[self.text(tm.Name())] = ti
                maps.append(MappingProxyType(d))
            sigs.append(SignatureDef(self.text(s.SignatureKey()), si, maps[0], maps[1]))
        return tuple(sigs)

    def _execution_order(self, tensors, ops, inputs, where: str) -> tuple[int, ...]:
        producer: dict[int, int] = {}
        for op in ops:
            for t in op.outputs:
                if t in producer:
                    raise self.fail(f"{where}: tensor {t} is written by node {producer[t]} and node {op.index}")
                if tensors[t].is_constant:
                    raise self.fail(f"{where} node {op.index} ({op.name}): writes constant tensor {t}")
                producer[t] = op.index
        ready = set(inputs)
        deps = []
        for op in ops:
            d = set()
            for t in op.inputs:
                if t < 0 or t in ready or tensors[t].is_constant or tensors[t].is_variable:
                    continue
                p = producer.get(t)
                if p is None:
                    raise self.fail(f"{where} node {op.index} ({op.name}): input tensor {t} "
                                    f"('{tensors[t].name}') is never written")
                if p == op.index:
                    raise self.fail(f"{where} node {op.index} ({op.name}): reads its own output tensor {t}")
                d.add(p)
            deps.append(d)
        if all(p < op.index for op, d in zip(ops, deps) for p in d):
            return tuple(range(len(ops)))
        # Kahn's algorithm, lowest node index first, so the order stays close to the file's.
        consumers: dict[int, list[int]] = {}
        missing = [len(d) for d in deps]
        for i, d in enumerate(deps):
            for p in d:
                consumers.setdefault(p, []).append(i)
        heap = [i for i, n in enumerate(missing) if n == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            i = heapq.heappop(heap)
            order.append(i)
            for c in consumers.get(i, ()):
                missing[c] -= 1
                if missing[c] == 0:
                    heapq.heappush(heap, c)
        if len(order) != len(ops):
            stuck = sorted(set(range(len(ops))) - set(order))
            raise self.fail(f"{where}: the graph has a cycle through nodes {stuck[:10]}")
        return tuple(order)


def decode_strings(raw: bytes, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """TFLite's string buffer format -> object array of bytes (ValueError when malformed)."""
    if len(raw) < 4:
        raise ValueError(f"string buffer of {len(raw)} bytes has no count")
    n = int(np.frombuffer(raw, "<i4", 1)[0])
    if n < 0 or 4 * (n + 2) > len(raw):
        raise ValueError(f"string count {n} does not fit a buffer of {len(raw)} bytes")
    offs = np.frombuffer(raw, "<i4", n + 1, 4).astype(np.int64)
    if offs[0] != 4 * (n + 2) or np.any(np.diff(offs) < 0) or offs[-1] > len(raw):
        raise ValueError("string offsets are out of order or outside the buffer")
    if shape is not None and n != (int(np.prod(shape, dtype=np.int64)) if shape else 1):
        raise ValueError(f"{n} strings do not fill shape {list(shape)}")
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = raw[offs[i]:offs[i + 1]]
    return out.reshape(shape if shape is not None else (n,))


def encode_strings(values: np.ndarray) -> bytes:
    """An array of bytes/str -> TFLite's string buffer format."""
    items = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in np.asarray(values, dtype=object).reshape(-1)]
    n = len(items)
    offs = [4 * (n + 2)]
    for b in items:
        offs.append(offs[-1] + len(b))
    return np.asarray([n] + offs, "<i4").tobytes() + b"".join(items)


def _schema(name: str):
    return getattr(importlib.import_module("tflite." + name), name)


@lru_cache(maxsize=None)
def _option_class_names(union: str = "BuiltinOptions") -> dict[int, str]:
    cls = _schema(union)
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int) and v}


_SKIP_SUFFIX = ("Length", "AsNumpy", "IsNone", "BufferHasIdentifier")


@lru_cache(maxsize=None)
def _option_fields(cls_name: str) -> tuple[tuple[str, str, bool], ...]:
    cls = _schema(cls_name)
    fields = []
    for attr in dir(cls):
        if attr.startswith("_") or attr in ("Init",) or attr.startswith("GetRootAs") or attr.endswith(_SKIP_SUFFIX):
            continue
        is_vec = hasattr(cls, attr + "AsNumpy")
        key = re.sub(r"(?<!^)(?=[A-Z])", "_", attr).lower()
        fields.append((attr, key, is_vec))
    return tuple(fields)
