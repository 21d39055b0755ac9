"""ModelBuilder: write valid .tflite files (single-op models, small graphs, control flow).

    b = ModelBuilder()
    x = b.add_input("x", (1, 8, 8, 3), np.float32)
    w = b.add_constant("w", weights)
    y = b.add_tensor("y", (1, 8, 8, 4), np.float32)
    b.add_operator("CONV_2D", [x, w, -1], [y], padding="SAME", stride_h=1, stride_w=1)
    b.mark_outputs(y)
    data = b.build()

Control flow: `body = b.add_subgraph("body")` returns a builder for another subgraph (sharing
the model's buffers); pass `body.index` in WHILE/IF/CALL_ONCE options. STRING constants are
arrays of bytes or str (`add_constant("s", np.array([b"a", b"bc"], object))`); string tensors
take `dtype=np.bytes_` (or "STRING").

Option values may be given by enum name (padding="SAME", fused_activation_function="RELU")
or by number. Quantization is `quant=(scale, zero_point)` or `(scales, zero_points, axis)`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import flatbuffers
import numpy as np

from acelera.core import dtypes
from acelera.core.model import CASE_OPTIONS, encode_strings
from acelera.core.opcodes import BUILTIN_CODES

# Builtin op -> options table of the schema (only ops that have one).
_ALL_OPTIONS_TABLES: dict[str, str | None] = {  # None: the op has no options table
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions", "FULLY_CONNECTED": "FullyConnectedOptions",
    "BATCH_MATMUL": "BatchMatMulOptions", "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions", "L2_POOL_2D": "Pool2DOptions", "ADD": "AddOptions",
    "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions",
    "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
    "SQUARED_DIFFERENCE": "SquaredDifferenceOptions", "POW": "PowOptions",
    "CONCATENATION": "ConcatenationOptions", "RESHAPE": "ReshapeOptions",
    "SQUEEZE": "SqueezeOptions", "EXPAND_DIMS": "ExpandDimsOptions",
    "TRANSPOSE": "TransposeOptions", "PAD": "PadOptions", "PADV2": "PadV2Options",
    "MIRROR_PAD": "MirrorPadOptions", "STRIDED_SLICE": "StridedSliceOptions",
    "SLICE": "SliceOptions", "SPLIT": "SplitOptions", "SPLIT_V": "SplitVOptions",
    "PACK": "PackOptions", "UNPACK": "UnpackOptions", "GATHER": "GatherOptions",
    "TILE": "TileOptions", "MEAN": "ReducerOptions", "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions", "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "SOFTMAX": "SoftmaxOptions", "LOG_SOFTMAX": "LogSoftmaxOptions",
    "LEAKY_RELU": "LeakyReluOptions", "GELU": "GeluOptions", "HARD_SWISH": "HardSwishOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "DEPTH_TO_SPACE": "DepthToSpaceOptions", "SPACE_TO_DEPTH": "SpaceToDepthOptions",
    "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions", "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions",
    "CAST": "CastOptions", "ARG_MAX": "ArgMaxOptions", "ARG_MIN": "ArgMinOptions",
    "LOGICAL_AND": "LogicalAndOptions", "LOGICAL_OR": "LogicalOrOptions",
    "LOGICAL_NOT": "LogicalNotOptions", "EQUAL": "EqualOptions", "NOT_EQUAL": "NotEqualOptions",
    "LESS": "LessOptions", "LESS_EQUAL": "LessEqualOptions", "GREATER": "GreaterOptions",
    "GREATER_EQUAL": "GreaterEqualOptions", "SELECT": "SelectOptions",
    "SELECT_V2": "SelectV2Options", "LSTM": "LSTMOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "DEQUANTIZE": "DequantizeOptions", "QUANTIZE": "QuantizeOptions",
    "DENSIFY": "DensifyOptions", "EXP": "ExpOptions", "ABS": "AbsOptions", "NEG": "NegOptions",
    "SQUARE": "SquareOptions", "COS": "CosOptions", "L2_NORMALIZATION": "L2NormOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "FLOOR_DIV": "FloorDivOptions", "FLOOR_MOD": "FloorModOptions", "ADD_N": "AddNOptions",
    "REVERSE_V2": "ReverseV2Options", "CUMSUM": "CumsumOptions", "ONE_HOT": "OneHotOptions",
    "RANK": "RankOptions", "SHAPE": "ShapeOptions", "FILL": "FillOptions",
    "ZEROS_LIKE": "ZerosLikeOptions", "BROADCAST_TO": "BroadcastToOptions",
    "GATHER_ND": "GatherNdOptions", "TOPK_V2": "TopKV2Options",
    "WHILE": "WhileOptions", "IF": "IfOptions", "CALL_ONCE": "CallOnceOptions",
    "VAR_HANDLE": "VarHandleOptions", "READ_VARIABLE": "ReadVariableOptions",
    "ASSIGN_VARIABLE": "AssignVariableOptions", "HASHTABLE": "HashtableOptions",
    "HASHTABLE_FIND": "HashtableFindOptions", "HASHTABLE_IMPORT": "HashtableImportOptions",
    "HASHTABLE_SIZE": "HashtableSizeOptions", "RANGE": "RangeOptions", "WHERE": "WhereOptions",
    "UNIQUE": "UniqueOptions", "SCATTER_ND": "ScatterNdOptions", "SEGMENT_SUM": "SegmentSumOptions",
    "UNSORTED_SEGMENT_SUM": "UnsortedSegmentSumOptions", "UNSORTED_SEGMENT_PROD": "UnsortedSegmentProdOptions",
    "UNSORTED_SEGMENT_MAX": "UnsortedSegmentMaxOptions", "UNSORTED_SEGMENT_MIN": "UnsortedSegmentMinOptions",
    "MATRIX_DIAG": "MatrixDiagOptions", "MATRIX_SET_DIAG": "MatrixSetDiagOptions",
    "REVERSE_SEQUENCE": "ReverseSequenceOptions", "BUCKETIZE": "BucketizeOptions",
    "CONV_3D": "Conv3DOptions", "CONV_3D_TRANSPOSE": "Conv3DOptions", "RFFT2D": "Rfft2dOptions",
    "RANDOM_UNIFORM": "RandomOptions", "RANDOM_STANDARD_NORMAL": "RandomOptions",
    "MULTINOMIAL": "RandomOptions", "SVDF": "SVDFOptions", "RNN": "RNNOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions",
    "EMBEDDING_LOOKUP_SPARSE": "EmbeddingLookupSparseOptions", "LSH_PROJECTION": "LSHProjectionOptions",
    "SKIP_GRAM": "SkipGramOptions", "FAKE_QUANT": "FakeQuantOptions", "SPARSE_TO_DENSE": "SparseToDenseOptions",
    "NON_MAX_SUPPRESSION_V4": "NonMaxSuppressionV4Options", "NON_MAX_SUPPRESSION_V5": "NonMaxSuppressionV5Options",
    "BITCAST": "BitcastOptions", "BITWISE_XOR": "BitwiseXorOptions", "RIGHT_SHIFT": "RightShiftOptions",
    "ATAN2": "ATan2Options", "BROADCAST_ARGS": None, "REDUCE_ALL": "ReducerOptions",
    "DYNAMIC_UPDATE_SLICE": "DynamicUpdateSliceOptions", "SIN": None,
    "STABLEHLO_PAD": "StablehloPadOptions", "STABLEHLO_COMPOSITE": "StableHLOCompositeOptions",
    "STABLEHLO_GATHER": "StablehloGatherOptions", "STABLEHLO_SCATTER": "StablehloScatterOptions",
    "STABLEHLO_REDUCE_WINDOW": "StablehloReduceWindowOptions", "REDUCE_WINDOW": "ReduceWindowOptions",
    "STABLEHLO_RNG_BIT_GENERATOR": "StablehloRngBitGeneratorOptions", "DILATE": None,
    "STABLEHLO_CASE": "StablehloCaseOptions",
}
OPTIONS_TABLE: dict[str, str] = {k: v for k, v in _ALL_OPTIONS_TABLES.items() if v is not None}

ENUMS: dict[str, dict[str, int]] = {
    "padding": {"SAME": 0, "VALID": 1},
    "fused_activation_function": {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3,
                                  "TANH": 4, "SIGN_BIT": 5},
    "mode": {"REFLECT": 0, "SYMMETRIC": 1},
    "weights_format": {"DEFAULT": 0, "SHUFFLED4x16INT8": 1},
    "kernel_type": {"FULL": 0, "BASIC": 1},
}
for _k in ("in_data_type", "out_data_type", "output_type", "quantized_bias_type", "out_type", "idx_out_type",
           "key_dtype", "value_dtype", "index_out_type"):
    ENUMS[_k] = dtypes.TYPE_CODES


def _type_code(dtype: Any) -> int:
    """TFLite type code of a numpy dtype or type name; bytes/str dtypes are STRING."""
    if isinstance(dtype, str) and dtype.upper() in dtypes.TYPE_CODES:
        return dtypes.TYPE_CODES[dtype.upper()]
    if np.dtype(dtype).kind in "SUO":
        return dtypes.TYPE_CODES["STRING"]
    return dtypes.type_code(dtype)


def _packed(name: str, data: Any, code: int) -> bytes:
    """The packed buffer of an INT4/INT2/UINT4 constant (ValueError for values the type cannot hold)."""
    arr = np.asarray(data)
    type_name = dtypes.TYPE_NAMES[code]
    if arr.size and arr.dtype.kind not in "iub":
        raise ValueError(f"{type_name} constant '{name}' needs integer values, got {arr.dtype}")
    lo, hi = dtypes.PACKED_RANGES[code]
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        raise ValueError(f"{type_name} constant '{name}' has values outside [{lo}, {hi}]")
    return dtypes.pack(arr, code)


def _camel(key: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in key.split("_"))


def _table_module(name: str):
    return importlib.import_module("tflite." + name)


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]
    type: int
    buffer: int
    quant: tuple | None
    shape_signature: tuple[int, ...] | None
    is_variable: bool
    sparsity: dict | None


@dataclass
class _Op:
    code: int
    custom: str | None
    version: int
    inputs: list[int]
    outputs: list[int]
    options_table: str | None
    options: dict[str, Any]
    custom_options: bytes
    intermediates: list[int] = field(default_factory=list)


@dataclass
class ModelBuilder:
    """Accumulates tensors, buffers and operators, then serializes a TFLite model."""

    description: str = "acelera ModelBuilder"
    tensors: list[_Tensor] = field(default_factory=list)
    buffers: list[bytes] = field(default_factory=lambda: [b""])
    ops: list[_Op] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    signatures: list[tuple[str, dict[str, int], dict[str, int], int]] = field(default_factory=list)
    metadata: list[tuple[str, int]] = field(default_factory=list)  # (name, buffer index)
    name: str = "main"
    index: int = 0
    subgraphs: list["ModelBuilder"] = field(default_factory=list)  # subgraphs 1.. (on the root)

    def add_subgraph(self, name: str) -> "ModelBuilder":
        """A builder for a new subgraph of this model (shares its buffers); `.index` is its index."""
        child = ModelBuilder(buffers=self.buffers, name=name, index=len(self.subgraphs) + 1)
        self.subgraphs.append(child)
        return child

    def add_tensor(self, name: str, shape: Sequence[int], dtype: Any, quant: tuple | None = None,
                   *, shape_signature: Sequence[int] | None = None, is_variable: bool = False) -> int:
        """Add a non-constant tensor and return its index."""
        self.tensors.append(_Tensor(name, tuple(int(d) for d in shape), _type_code(dtype), 0,
                                    quant, tuple(shape_signature) if shape_signature else None,
                                    is_variable, None))
        return len(self.tensors) - 1

    def add_input(self, name: str, shape: Sequence[int], dtype: Any, quant: tuple | None = None,
                  **kw) -> int:
        """Add a graph input tensor."""
        t = self.add_tensor(name, shape, dtype, quant, **kw)
        self.inputs.append(t)
        return t

    def add_constant(self, name: str, data: np.ndarray, quant: tuple | None = None, *,
                     dtype: Any = None, sparsity: dict | None = None, shape: Sequence[int] | None = None) -> int:
        """Add a constant tensor backed by a buffer holding `data`; with dtype "INT4", "INT2" or
        "UINT4" the (integer, in-range) values are packed as LiteRT stores them."""
        if _type_code(dtype if dtype is not None else np.asarray(data).dtype) == dtypes.TYPE_CODES["STRING"]:
            arr = np.asarray(data, dtype=object)
            raw, code = encode_strings(arr), dtypes.TYPE_CODES["STRING"]
        elif dtype is not None and _type_code(dtype) in dtypes.PACKED_BITS:
            code = _type_code(dtype)
            arr, raw = np.asarray(data), _packed(name, data, code)
        else:
            arr = np.array(data if dtype is None else np.asarray(data, dtype=dtype), order="C")
            raw, code = arr.tobytes(), dtypes.type_code(arr.dtype)
        self.buffers.append(raw)
        self.tensors.append(_Tensor(name, tuple(shape if shape is not None else arr.shape),
                                    code, len(self.buffers) - 1, quant,
                                    None, False, sparsity))
        return len(self.tensors) - 1

    def add_operator(self, op: str, inputs: Sequence[int], outputs: Sequence[int], *,
                     version: int = 1, custom_code: str | None = None,
                     custom_options: bytes = b"", options_table: str | None = None,
                     intermediates: Sequence[int] = (), **options: Any) -> int:
        """Add a node; `op` is a builtin name, or "CUSTOM" with `custom_code`; `options_table`
        names the schema's options table where OPTIONS_TABLE does not know the op;
        `intermediates` lists the node's intermediate tensors (quantized LSTMs)."""
        code = BUILTIN_CODES[op]
        table = options_table or OPTIONS_TABLE.get(op)
        if options and table is None:
            raise ValueError(f"{op} takes no builtin options, got {sorted(options)}")
        self.ops.append(_Op(code, custom_code, version, list(inputs), list(outputs), table,
                            options, custom_options, list(intermediates)))
        return len(self.ops) - 1

    def mark_outputs(self, *tensors: int) -> None:
        self.outputs.extend(tensors)

    def add_signature(self, key: str, inputs: dict[str, int], outputs: dict[str, int],
                      subgraph: int = 0) -> None:
        """A signature over tensors of subgraph `subgraph` (add it on the root builder)."""
        self.signatures.append((key, dict(inputs), dict(outputs), subgraph))

    def add_metadata(self, name: str, data: bytes) -> None:
        self.buffers.append(bytes(data))
        self.metadata.append((name, len(self.buffers) - 1))

    # --- serialization -------------------------------------------------------------------
    def build(self) -> bytes:
        """Serialize to .tflite bytes (this builder is subgraph 0, its add_subgraph children follow)."""
        b = flatbuffers.Builder(1024)
        graphs = [self] + self.subgraphs
        codes: list[tuple[int, str | None, int]] = []
        for g in graphs:
            for op in g.ops:
                key = (op.code, op.custom, op.version)
                if key not in codes:
                    codes.append(key)

        buffers = [self._buffer(b, data) for data in self.buffers]
        subgraph_offsets = [g._subgraph(b, codes) for g in graphs]

        C = _table_module("OperatorCode")
        code_offsets = []
        for code, custom, version in codes:
            cc = b.CreateString(custom) if custom else None
            C.Start(b)
            C.AddDeprecatedBuiltinCode(b, min(code, 127))
            C.AddBuiltinCode(b, code)
            C.AddVersion(b, version)
            if cc is not None:
                C.AddCustomCode(b, cc)
            code_offsets.append(C.End(b))

        sig_offsets = [self._signature(b, *s) for s in self.signatures]
        md_offsets = []
        MD = _table_module("Metadata")
        for name_, buf in self.metadata:
            n = b.CreateString(name_)
            MD.Start(b)
            MD.AddName(b, n)
            MD.AddBuffer(b, buf)
            md_offsets.append(MD.End(b))

        Mo = _table_module("Model")
        codes_vec = self._offsets(b, Mo.StartOperatorCodesVector, code_offsets)
        sub_vec = self._offsets(b, Mo.StartSubgraphsVector, subgraph_offsets)
        buf_vec = self._offsets(b, Mo.StartBuffersVector, buffers)
        sig_vec = self._offsets(b, Mo.StartSignatureDefsVector, sig_offsets) if sig_offsets else None
        md_vec = self._offsets(b, Mo.StartMetadataVector, md_offsets) if md_offsets else None
        desc = b.CreateString(self.description)
        Mo.Start(b)
        Mo.AddVersion(b, 3)
        Mo.AddOperatorCodes(b, codes_vec)
        Mo.AddSubgraphs(b, sub_vec)
        Mo.AddDescription(b, desc)
        Mo.AddBuffers(b, buf_vec)
        if sig_vec is not None:
            Mo.AddSignatureDefs(b, sig_vec)
        if md_vec is not None:
            Mo.AddMetadata(b, md_vec)
        b.Finish(Mo.End(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def _subgraph(self, b, codes: list) -> int:
        tensors = [self._tensor(b, t) for t in self.tensors]
        operators = [self._operator(b, op, codes.index((op.code, op.custom, op.version))) for op in self.ops]
        M = _table_module("SubGraph")
        t_vec = self._offsets(b, M.StartTensorsVector, tensors)
        o_vec = self._offsets(b, M.StartOperatorsVector, operators)
        in_vec = self._ints(b, M.StartInputsVector, self.inputs)
        out_vec = self._ints(b, M.StartOutputsVector, self.outputs)
        name = b.CreateString(self.name)
        M.Start(b)
        M.AddTensors(b, t_vec)
        M.AddInputs(b, in_vec)
        M.AddOutputs(b, out_vec)
        M.AddOperators(b, o_vec)
        M.AddName(b, name)
        return M.End(b)

    @staticmethod
    def _offsets(b, start, items: list[int]) -> int:
        start(b, len(items))
        for off in reversed(items):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    @staticmethod
    def _ints(b, start, items: Sequence[int], kind: str = "int32") -> int:
        start(b, len(items))
        prepend = {"int32": b.PrependInt32, "float32": b.PrependFloat32, "int64": b.PrependInt64}[kind]
        for v in reversed(list(items)):
            prepend(v)
        return b.EndVector()

    @staticmethod
    def _buffer(b, data: bytes) -> int:
        B = _table_module("Buffer")
        vec = None
        if data:
            b.StartVector(1, len(data), 16)
            b.head = b.head - len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            vec = b.EndVector()
        B.Start(b)
        if vec is not None:
            B.AddData(b, vec)
        return B.End(b)

    def _tensor(self, b, t: _Tensor) -> int:
        T = _table_module("Tensor")
        name = b.CreateString(t.name)
        shape = self._ints(b, T.StartShapeVector, t.shape)
        sig = self._ints(b, T.StartShapeSignatureVector, t.shape_signature) if t.shape_signature else None
        quant = self._quant(b, t.quant) if t.quant is not None else None
        sparsity = self._sparsity(b, t.sparsity) if t.sparsity else None
        T.Start(b)
        T.AddShape(b, shape)
        T.AddType(b, t.type)
        T.AddBuffer(b, t.buffer)
        T.AddName(b, name)
        if quant is not None:
            T.AddQuantization(b, quant)
        if sig is not None:
            T.AddShapeSignature(b, sig)
        if t.is_variable:
            T.AddIsVariable(b, True)
        if sparsity is not None:
            T.AddSparsity(b, sparsity)
        return T.End(b)

    def _quant(self, b, quant: tuple) -> int:
        Q = _table_module("QuantizationParameters")
        scale, zp = np.atleast_1d(np.asarray(quant[0], np.float32)), np.atleast_1d(np.asarray(quant[1], np.int64))
        axis = int(quant[2]) if len(quant) > 2 else 0
        s_vec = self._ints(b, Q.StartScaleVector, scale.tolist(), "float32")
        z_vec = self._ints(b, Q.StartZeroPointVector, zp.tolist(), "int64")
        Q.Start(b)
        Q.AddScale(b, s_vec)
        Q.AddZeroPoint(b, z_vec)
        Q.AddQuantizedDimension(b, axis)
        if len(quant) > 3:  # a QuantizationDetails union type without its table (loader tests)
            Q.AddDetailsType(b, int(quant[3]))
        return Q.End(b)

    def _sparsity(self, b, sp: dict) -> int:
        S = _table_module("SparsityParameters")
        D = _table_module("DimensionMetadata")
        V = _table_module("Int32Vector")
        dims = []
        for fmt, dense_size, segments, indices in sp["dim_metadata"]:
            seg = idx = None
            if fmt == 1:
                vecs = []
                for values in (segments, indices):
                    v = self._ints(b, V.StartValuesVector, [int(x) for x in values])
                    V.Start(b)
                    V.AddValues(b, v)
                    vecs.append(V.End(b))
                seg, idx = vecs
            D.Start(b)
            D.AddFormat(b, fmt)
            D.AddDenseSize(b, dense_size)
            if seg is not None:
                D.AddArraySegmentsType(b, 1)
                D.AddArraySegments(b, seg)
                D.AddArrayIndicesType(b, 1)
                D.AddArrayIndices(b, idx)
            dims.append(D.End(b))
        order = self._ints(b, S.StartTraversalOrderVector, sp["traversal_order"])
        bmap = self._ints(b, S.StartBlockMapVector, sp.get("block_map", ()))
        dvec = self._offsets(b, S.StartDimMetadataVector, dims)
        S.Start(b)
        S.AddTraversalOrder(b, order)
        S.AddBlockMap(b, bmap)
        S.AddDimMetadata(b, dvec)
        return S.End(b)

    def _operator(self, b, op: _Op, code_index: int) -> int:
        O = _table_module("Operator")
        opts = self._options(b, op) if op.options_table else None
        custom = None
        if op.custom_options:
            custom = b.CreateByteVector(op.custom_options)
        ins = self._ints(b, O.StartInputsVector, op.inputs)
        outs = self._ints(b, O.StartOutputsVector, op.outputs)
        inter = self._ints(b, O.StartIntermediatesVector, op.intermediates) if op.intermediates else None
        O.Start(b)
        O.AddOpcodeIndex(b, code_index)
        O.AddInputs(b, ins)
        O.AddOutputs(b, outs)
        if inter is not None:
            O.AddIntermediates(b, inter)
        if opts is not None and hasattr(_table_module("BuiltinOptions").BuiltinOptions, op.options_table or ""):
            O.AddBuiltinOptionsType(b, opts[0])
            O.AddBuiltinOptions(b, opts[1])
        elif opts is not None:
            O.AddBuiltinOptions2Type(b, opts[0])
            O.AddBuiltinOptions2(b, opts[1])
        if custom is not None:
            O.AddCustomOptions(b, custom)
        return O.End(b)

    def _options(self, b, op: _Op) -> tuple[int, int]:
        name = op.options_table
        assert name is not None  # _operator calls this only for ops with an options table
        if name == "StablehloCaseOptions":  # newer than the schema bindings: one [int] field
            vec = self._ints(b, lambda b_, n: b_.StartVector(4, n, 4), op.options.get("branch_subgraph_indices", ()))
            b.StartObject(1)
            b.PrependUOffsetTRelativeSlot(0, vec, 0)
            return CASE_OPTIONS, b.EndObject()
        mod = _table_module(name)
        union = _table_module("BuiltinOptions").BuiltinOptions
        if not hasattr(union, name):
            union = _table_module("BuiltinOptions2").BuiltinOptions2
        kind = "int64" if name.startswith("Stablehlo") else "int32"
        vectors = {}
        for key, val in op.options.items():
            if isinstance(val, (list, tuple, np.ndarray)):
                vectors[key] = self._ints(b, getattr(mod, f"Start{_camel(key)}Vector"), [int(v) for v in val], kind)
            elif isinstance(val, str) and key not in ENUMS:
                vectors[key] = b.CreateString(val)
            elif isinstance(val, (bytes, bytearray)):
                vectors[key] = b.CreateByteVector(bytes(val))
        mod.Start(b)
        for key, val in op.options.items():
            adder = getattr(mod, f"Add{_camel(key)}", None)
            if adder is None:
                raise ValueError(f"{name} has no field '{key}'")
            if key in vectors:
                val = vectors[key]
            elif isinstance(val, str):
                val = ENUMS[key][val]
            adder(b, val)
        return getattr(union, name), mod.End(b)

    def _signature(self, b, key: str, inputs: dict[str, int], outputs: dict[str, int], subgraph: int = 0) -> int:
        S = _table_module("SignatureDef")
        TM = _table_module("TensorMap")
        maps = []
        for d in (inputs, outputs):
            offs = []
            for n, idx in d.items():
                s = b.CreateString(n)
                TM.Start(b)
                TM.AddName(b, s)
                TM.AddTensorIndex(b, idx)
                offs.append(TM.End(b))
            maps.append(offs)
        in_vec = self._offsets(b, S.StartInputsVector, maps[0])
        out_vec = self._offsets(b, S.StartOutputsVector, maps[1])
        k = b.CreateString(key)
        S.Start(b)
        S.AddInputs(b, in_vec)
        S.AddOutputs(b, out_vec)
        S.AddSignatureKey(b, k)
        S.AddSubgraphIndex(b, subgraph)
        return S.End(b)


@dataclass
class In:
    """A graph input of a single-op model."""

    shape: Sequence[int]
    dtype: Any = np.float32
    quant: tuple | None = None


@dataclass
class Const:
    """A constant input of a single-op model."""

    data: Any
    quant: tuple | None = None
    dtype: Any = None
    sparsity: dict | None = None
    shape: Sequence[int] | None = None


@dataclass
class Out:
    """An output of a single-op model."""

    shape: Sequence[int]
    dtype: Any = np.float32
    quant: tuple | None = None


def single_op_model(op: str, inputs: Sequence[In | Const | None], outputs: Sequence[Out], *,
                    version: int = 1, custom_code: str | None = None, custom_options: bytes = b"",
                    **options: Any) -> bytes:
    """A model with one node; `None` in `inputs` is an absent optional input (-1)."""
    b = ModelBuilder(description=f"single {custom_code or op}")
    idx = []
    for k, spec in enumerate(inputs):
        if spec is None:
            idx.append(-1)
        elif isinstance(spec, Const):
            idx.append(b.add_constant(f"c{k}", spec.data, spec.quant, dtype=spec.dtype,
                                      sparsity=spec.sparsity, shape=spec.shape))
        else:
            idx.append(b.add_input(f"in{k}", spec.shape, spec.dtype, spec.quant))
    outs = [b.add_tensor(f"out{k}", o.shape, o.dtype, o.quant) for k, o in enumerate(outputs)]
    b.add_operator(op, idx, outs, version=version, custom_code=custom_code,
                   custom_options=custom_options, **options)
    b.mark_outputs(*outs)
    return b.build()
