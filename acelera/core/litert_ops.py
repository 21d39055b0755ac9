"""The ops LiteRT's BuiltinOpResolver registers, and how acelera's CPU kernels cover them.

The table mirrors tflite/core/kernels/register.cc (every AddBuiltin with its min/max version and
every AddCustom) of google-ai-edge/LiteRT. Each row names the TFLite types LiteRT's kernel
accepts for its main input (the data input its Prepare/Eval type switch dispatches on; `main`
is its index) as read from the kernel source named in `source` (tflite/kernels/). Types a kernel
only takes in a TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS build (the FLOAT8 ones) are listed too, as
are the packed sub-byte types (INT4, INT2, UINT4) where the kernel handles them.

`coverage()` compares the table with acelera's kernel registry: each op is supported (every
LiteRT version and dtype), partial (what is missing is spelled out) or missing.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass

# TensorType of the TFLite schema (tflite/converter/schema/schema.fbs), in enum order.
SCHEMA_TYPES = ("FLOAT32", "FLOAT16", "INT32", "UINT8", "INT64", "STRING", "BOOL", "INT16", "COMPLEX64",
                "INT8", "FLOAT64", "COMPLEX128", "UINT64", "RESOURCE", "VARIANT", "UINT32", "UINT16", "INT4",
                "BFLOAT16", "INT2", "UINT4", "FLOAT8_E4M3FN", "FLOAT8_E5M2")

F32, F16, BF16, F64 = "FLOAT32", "FLOAT16", "BFLOAT16", "FLOAT64"
I8, I16, I32, I64, U8, U16, U32, U64 = "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"
BOOL, STR, C64, C128, RES, I4, I2, U4 = "BOOL", "STRING", "COMPLEX64", "COMPLEX128", "RESOURCE", "INT4", "INT2", "UINT4"
F8 = ("FLOAT8_E4M3FN", "FLOAT8_E5M2")

ANY = SCHEMA_TYPES  # the kernel never looks at the type (reshapes, control flow)
# kernels that switch on TfLiteTypeGetSizeBits: 8, 16, 32 and 64-bit elements
SIZED = (U8, I8, *F8, U16, I16, F16, BF16, F32, I32, U32, I64, U64, F64, C64, BOOL)
SIZED32 = tuple(t for t in SIZED if t not in (I64, U64, F64, C64))
# kernels that move whole bytes (TfLiteTypeGetSize != 0)
BYTES = SIZED + (C128,)
QUANT = (F32, U8, I8, I16)  # float32 and the three quantized types
REDUCE = (F32, I32, I64, U8, I8, I16)
HLO_NUMERIC = (F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, BOOL)


@dataclass(frozen=True)
class LiteRTOp:
    """One op LiteRT's BuiltinOpResolver registers."""

    name: str
    min_version: int
    max_version: int
    dtypes: tuple[str, ...]
    source: str
    main: int = 0
    custom: bool = False

    @property
    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)


def _b(name: str, versions: int | tuple[int, int], dtypes, source: str, main: int = 0) -> LiteRTOp:
    lo, hi = (1, versions) if isinstance(versions, int) else versions
    return LiteRTOp(name, lo, hi, tuple(dict.fromkeys(dtypes)), source, main)


def _c(name: str, dtypes, source: str) -> LiteRTOp:
    return LiteRTOp(name, 1, 1, tuple(dtypes), source, 0, custom=True)


BUILTIN_OPS: tuple[LiteRTOp, ...] = (
    _b("ABS", 5, (F32, I8, I16, I32), "elementwise.cc"),
    _b("HARD_SWISH", 1, (F32, U8, I8), "activations.cc"),
    _b("RELU", 3, QUANT, "activations.cc"),
    _b("RELU_N1_TO_1", 1, (F32, U8, I8), "activations.cc"),
    _b("RELU_0_TO_1", 1, (F32, U8, I8), "activations.cc"),
    _b("RELU6", 3, QUANT, "activations.cc"),
    _b("TANH", 3, (F32, F16, BF16, U8, I8, I16), "activations.cc"),
    _b("LOGISTIC", 3, (F32, F16, BF16, U8, I8, I16), "activations.cc"),
    _b("AVERAGE_POOL_2D", 3, QUANT, "pooling.cc"),
    _b("MAX_POOL_2D", 3, QUANT, "pooling.cc"),
    _b("L2_POOL_2D", 1, (F32,), "pooling.cc"),
    _b("CONV_2D", 8, QUANT, "conv.cc"),
    _b("DEPTHWISE_CONV_2D", 7, QUANT, "depthwise_conv.cc"),
    _b("SVDF", 4, (F32, I8), "svdf.cc"),
    _b("RNN", 3, (F32,), "basic_rnn.cc"),
    _b("BIDIRECTIONAL_SEQUENCE_RNN", 3, (F32,), "bidirectional_sequence_rnn.cc"),
    _b("UNIDIRECTIONAL_SEQUENCE_RNN", 3, (F32,), "unidirectional_sequence_rnn.cc"),
    # INT4/INT2 tables dequantize (EvalHybrid); a packed table of the output's type, UINT4 too,
    # is copied row by row (EvalSimple)
    _b("EMBEDDING_LOOKUP", 5, BYTES + (I4, I2, U4), "embedding_lookup.cc", main=1),
    _b("EMBEDDING_LOOKUP_SPARSE", 1, (F32,), "embedding_lookup_sparse.cc", main=4),
    _b("FULLY_CONNECTED", 14, QUANT, "fully_connected.cc"),
    _b("LSH_PROJECTION", 1, BYTES, "lsh_projection.cc", main=1),
    _b("HASHTABLE_LOOKUP", 1, BYTES + (STR,), "hashtable_lookup.cc", main=2),
    _b("SOFTMAX", 4, (F32, F16, U8, I8, I16), "activations.cc"),
    _b("CONCATENATION", 7, (F32, F16, BF16, U8, I8, I16, I32, I64, BOOL, U32, I4, *F8), "concatenation.cc"),
    _b("ADD", 6, (F32, F16, I32, I64, U8, I8, I16), "add.cc"),
    _b("SPACE_TO_BATCH_ND", 4, SIZED, "space_to_batch_nd.cc"),
    _b("BATCH_TO_SPACE_ND", 4, SIZED, "batch_to_space_nd.cc"),
    _b("MUL", 8, (F32, F16, I32, U32, I64, I16, U8, I8, C64), "mul.cc"),
    _b("L2_NORMALIZATION", 2, (F32, U8, I8), "l2norm.cc"),
    _b("LOCAL_RESPONSE_NORMALIZATION", 1, (F32,), "local_response_norm.cc"),
    _b("LSTM", 4, (F32, I8), "lstm.cc"),
    _b("BIDIRECTIONAL_SEQUENCE_LSTM", 3, (F32,), "bidirectional_sequence_lstm.cc"),
    _b("UNIDIRECTIONAL_SEQUENCE_LSTM", 4, (F32, I8), "unidirectional_sequence_lstm.cc"),
    _b("PAD", 6, (F32, F16, BF16, *F8, U8, I8, I16, I32, I64, BOOL), "pad.cc"),
    _b("PADV2", 6, (F32, F16, BF16, *F8, U8, I8, I16, I32, I64, BOOL), "pad.cc"),
    _b("RESHAPE", 1, ANY, "reshape.cc"),
    _b("RESIZE_BILINEAR", 4, QUANT, "resize_bilinear.cc"),
    _b("RESIZE_NEAREST_NEIGHBOR", 4, SIZED32, "resize_nearest_neighbor.cc"),
    _b("SKIP_GRAM", 1, (STR,), "skip_gram.cc"),
    _b("SPACE_TO_DEPTH", 2, (F32, U8, I8, I32, I64), "space_to_depth.cc"),
    _b("DEPTH_TO_SPACE", 2, (F32, U8, I8, I32, I64), "depth_to_space.cc"),
    _b("GATHER", 8, (F32, F16, BF16, *F8, U8, I4, I8, I16, I64, I32, BOOL, STR), "gather.cc"),
    _b("TRANSPOSE", 9, SIZED + (I4, U4), "transpose.cc"),
    _b("MEAN", 3, REDUCE, "reduce.cc"),
    _b("DIV", 2, (F32, I32, U8, I8, I16), "div.cc"),
    _b("SUB", 5, (F32, I32, I64, U8, I8, I16), "sub.cc"),
    _b("SPLIT", 5, (F32, U8, I8, I16, I32, I64, *F8), "split.cc", main=1),
    _b("SPLIT_V", 3, (F32, U8, I8, I16, I32, I64, *F8), "split_v.cc"),
    _b("SQUEEZE", 2, ANY, "squeeze.cc"),
    _b("STRIDED_SLICE", 8, SIZED + (STR,), "strided_slice.cc"),
    _b("EXP", 2, (F32, I8, I16), "exp.cc"),
    _b("TOPK_V2", 3, (F32, U8, I8, I16, I32, I64), "topk_v2.cc"),
    _b("LOG", 2, (F32, I8, I16), "elementwise.cc"),
    _b("LOG_SOFTMAX", 2, (F32, U8, I8), "activations.cc"),
    _b("CAST", 9, (I64, I32, U32, I16, U16, U8, I8, F16, BF16, *F8, F32, F64, BOOL, C64, I4, I2, U4), "cast.cc"),
    _b("DEQUANTIZE", 9, (I2, I4, U4, U8, I8, I16, F16, *F8), "dequantize.cc"),
    _b("PRELU", 1, QUANT, "activations.cc"),
    _b("MAXIMUM", 4, (F32, U8, I8, I32, I64, I16, F16, BF16), "maximum_minimum.cc"),
    _b("MINIMUM", 4, (F32, U8, I8, I32, I64, I16, F16, BF16), "maximum_minimum.cc"),
    _b("ARG_MAX", 3, (F32, U8, I8, I32, BOOL), "arg_min_max.cc"),
    _b("ARG_MIN", 3, (F32, U8, I8, I32, BOOL), "arg_min_max.cc"),
    _b("GREATER", 2, (F32, F16, BF16, I16, I32, I64, U8, I8), "comparisons.cc"),
    _b("GREATER_EQUAL", 3, (F32, F16, I16, I32, I64, U8, I8), "comparisons.cc"),
    _b("LESS", 3, (F32, F16, BF16, I16, I32, I64, U8, I8), "comparisons.cc"),
    _b("LESS_EQUAL", 2, (F32, F16, I16, I32, I64, U8, I8), "comparisons.cc"),
    _b("FLOOR", 1, (F32, F16, BF16), "floor.cc"),
    _b("CEIL", 1, (F32,), "ceil.cc"),
    _b("ROUND", 1, (F32, F16, BF16), "round.cc"),
    _b("NEG", 1, (I64, I32, F32, I8, I16, F16, BF16), "neg.cc"),
    _b("SELECT", 4, SIZED, "select.cc", main=1),
    _b("SELECT_V2", 2, SIZED, "select.cc", main=1),
    _b("SLICE", 8, SIZED + (STR, I4), "slice.cc"),
    _b("SIN", 2, (F32, F16), "elementwise.cc"),
    _b("COS", 2, (F32, F16), "elementwise.cc"),
    _b("TRANSPOSE_CONV", 5, QUANT, "transpose_conv.cc", main=2),
    _b("TILE", 3, SIZED + (STR,), "tile.cc"),
    _b("SUM", 2, REDUCE + (BOOL,), "reduce.cc"),
    _b("REDUCE_PROD", 2, REDUCE + (BOOL,), "reduce.cc"),
    _b("REDUCE_MAX", 3, REDUCE + (BOOL,), "reduce.cc"),
    _b("REDUCE_MIN", 3, REDUCE + (BOOL,), "reduce.cc"),
    _b("REDUCE_ANY", 1, (BOOL,), "reduce.cc"),
    _b("REDUCE_ALL", 1, (BOOL,), "reduce.cc"),
    _b("EXPAND_DIMS", 1, ANY, "expand_dims.cc"),
    _b("SPARSE_TO_DENSE", 3, (I32, I64, I8, U8, F32), "sparse_to_dense.cc", main=2),
    _b("EQUAL", 5, (BOOL, F32, F16, I16, I32, I64, U8, I8, STR), "comparisons.cc"),
    _b("NOT_EQUAL", 4, (BOOL, F32, F16, I16, I32, I64, U8, I8, STR), "comparisons.cc"),
    _b("SQRT", 2, (F32, I8, I16), "elementwise.cc"),
    _b("RSQRT", 3, (F32, I8, I16), "elementwise.cc"),
    _b("SHAPE", 1, ANY, "shape.cc"),
    _b("RANK", 1, ANY, "rank.cc"),
    _b("POW", 1, (I32, F32), "pow.cc"),
    _b("FAKE_QUANT", 2, (F32,), "fake_quant.cc"),
    _b("PACK", 5, (I32, F32, *F8, U8, U32, I8, I16, I64), "pack.cc"),
    _b("ONE_HOT", 1, (I32, I64), "one_hot.cc"),
    _b("LOGICAL_OR", 1, (BOOL,), "logical.cc"),
    _b("LOGICAL_AND", 1, (BOOL,), "logical.cc"),
    _b("LOGICAL_NOT", 1, (BOOL,), "elementwise.cc"),
    _b("UNPACK", 6, (I32, F32, F16, BF16, *F8, U8, I8, I16, BOOL), "unpack.cc"),
    _b("FLOOR_DIV", 3, (F32, I32, I16, I8), "floor_div.cc"),
    _b("SQUARE", 1, (F32,), "elementwise.cc"),
    _b("ZEROS_LIKE", 1, (I64, I32, F32), "zeros_like.cc"),
    _b("FLOOR_MOD", 2, (I8, I16, I32, F32, I64), "floor_mod.cc"),
    _b("RANGE", 2, (I32, I64, F32), "range.cc"),
    _b("LEAKY_RELU", 2, QUANT, "activations.cc"),
    _b("SQUARED_DIFFERENCE", 2, (F32, I32, I8), "squared_difference.cc"),
    _b("FILL", 5, SIZED + (STR,), "fill.cc", main=1),
    _b("MIRROR_PAD", 3, SIZED, "mirror_pad.cc"),
    _b("UNIQUE", 1, (I8, I16, I32, I64, F32, U8), "unique.cc"),
    _b("REVERSE_V2", 4, (I32, F32, U8, I8, I16, I64, BOOL, F16, BF16, *F8), "reverse.cc"),
    _b("ADD_N", 1, (F32, I32), "add_n.cc"),
    _b("GATHER_ND", 6, (BF16, *F8, F16, F32, U8, I8, I16, I64, I32, STR, BOOL), "gather_nd.cc"),
    _b("WHERE", 2, (BOOL, F32, I64, I32, I8, U8, U32), "where.cc"),
    _b("ELU", 1, (F32, I8), "activations.cc"),
    _b("REVERSE_SEQUENCE", 1, (I32, F32, U8, I16, I64), "reverse_sequence.cc"),
    _b("MATRIX_DIAG", 1, (I64, I32, I16, I8, U8, F32), "matrix_diag.cc"),
    _b("QUANTIZE", 6, (F32, I16, I32, I8, U8), "quantize.cc"),
    _b("MATRIX_SET_DIAG", 1, (I64, I32, I16, I8, U8, F32), "matrix_set_diag.cc"),
    _b("IF", 1, (BOOL,), "if.cc"),
    _b("WHILE", 1, ANY, "while.cc"),
    _b("NON_MAX_SUPPRESSION_V4", 1, (F32,), "non_max_suppression.cc"),
    _b("NON_MAX_SUPPRESSION_V5", 1, (F32,), "non_max_suppression.cc"),
    _b("SCATTER_ND", 1, (F32, U8, BOOL, I8, I64, I32), "scatter_nd.cc", main=1),
    _b("DENSIFY", 1, (F32, F16, I8), "densify.cc"),
    _b("SEGMENT_SUM", 1, (I32, F32), "segment_sum.cc"),
    _b("BATCH_MATMUL", 4, (F32, I8, I16), "batch_matmul.cc"),
    _b("CUMSUM", 1, (I32, F32, I64), "cumsum.cc"),
    # version 1 was rolled back and its op code reassigned (register.cc)
    _b("BROADCAST_TO", (2, 4), BYTES, "broadcast_to.cc"),
    _b("CALL_ONCE", 1, (), "call_once.cc"),
    _b("RFFT2D", 1, (F32,), "rfft2d.cc"),
    _b("CONV_3D", 1, (F32,), "conv3d.cc"),
    _b("IMAG", 1, (C64, C128), "complex_support.cc"),
    _b("REAL", 1, (C64, C128), "complex_support.cc"),
    _b("COMPLEX_ABS", 1, (C64, C128), "complex_support.cc"),
    _b("BROADCAST_ARGS", 1, (I32, I64), "broadcast_args.cc"),
    _b("HASHTABLE", 1, (RES,), "hashtable.cc"),
    _b("HASHTABLE_FIND", 1, (RES,), "hashtable_find.cc"),
    _b("HASHTABLE_IMPORT", 1, (RES,), "hashtable_import.cc"),
    _b("HASHTABLE_SIZE", 1, (RES,), "hashtable_size.cc"),
    _b("CONV_3D_TRANSPOSE", 1, (F32,), "conv3d_transpose.cc", main=2),
    _b("VAR_HANDLE", 1, (RES,), "var_handle.cc"),
    _b("READ_VARIABLE", 1, (RES,), "read_variable.cc"),
    _b("ASSIGN_VARIABLE", 1, (RES,), "assign_variable.cc"),
    _b("MULTINOMIAL", 1, (F32,), "random_ops.cc"),
    _b("RANDOM_STANDARD_NORMAL", 1, (I32,), "random_ops.cc"),
    _b("BUCKETIZE", 1, (I32, F32, I64, F64), "bucketize.cc"),
    _b("RANDOM_UNIFORM", 1, (I32,), "random_ops.cc"),
    _b("GELU", 3, (F32, F16, U8, I8, I16), "activations.cc"),
    _b("DYNAMIC_UPDATE_SLICE", 6, BYTES + (I4,), "dynamic_update_slice.cc"),
    _b("UNSORTED_SEGMENT_PROD", 1, (I32, F32), "unsorted_segment.cc"),
    _b("UNSORTED_SEGMENT_MAX", 1, (I32, F32), "unsorted_segment.cc"),
    _b("UNSORTED_SEGMENT_MIN", 1, (I32, F32), "unsorted_segment.cc"),
    _b("UNSORTED_SEGMENT_SUM", 1, (I32, F32), "unsorted_segment.cc"),
    _b("ATAN2", 1, (F32, F64, BF16, F16), "atan2.cc"),
    _b("SIGN", 2, (F32, F64, I32), "sign.cc"),
    _b("BITCAST", 1, BYTES, "bitcast.cc"),
    _b("BITWISE_XOR", 1, (U8, I8, U16, I16, U32, I32), "bitwise_xor.cc"),
    _b("RIGHT_SHIFT", 1, (U8, I8, U16, I16, U32, I32), "right_shift.cc"),
    _b("STABLEHLO_SCATTER", 1, HLO_NUMERIC, "stablehlo_scatter.cc"),
    _b("DILATE", 1, BYTES, "dilate.cc"),
    _b("STABLEHLO_RNG_BIT_GENERATOR", 1, (U64,), "rng_bit_generator.cc"),
    _b("REDUCE_WINDOW", 1, (BOOL, I8, I16, I32, I64, U8, F32, F64), "stablehlo_reduce_window.cc"),
    _b("STABLEHLO_REDUCE_WINDOW", 1, (BOOL, I8, I16, I32, I64, U8, F32, F64), "stablehlo_reduce_window.cc"),
    _b("STABLEHLO_GATHER", 1, SIZED, "stablehlo_gather.cc"),
    _b("STABLEHLO_ADD", 1, HLO_NUMERIC, "stablehlo_elementwise.h"),
    _b("STABLEHLO_AND", 1, (I8, I16, I32, I64, U8, U16, U32, U64, BOOL), "stablehlo_elementwise.h"),
    _b("STABLEHLO_MULTIPLY", 1, HLO_NUMERIC, "stablehlo_elementwise.h"),
    _b("STABLEHLO_MAXIMUM", 1, HLO_NUMERIC, "stablehlo_elementwise.h"),
    _b("STABLEHLO_MINIMUM", 1, HLO_NUMERIC, "stablehlo_elementwise.h"),
    _b("STABLEHLO_SHIFT_LEFT", 1, (I8, I16, I32), "stablehlo_shift_left.cc"),
    _b("STABLEHLO_PAD", 1, BYTES, "stablehlo_pad.cc"),
    _b("STABLEHLO_COMPOSITE", 1, ANY, "stablehlo_composite.cc"),
    _b("STABLEHLO_CASE", 1, (I32,), "stablehlo_case.cc"),
)

CUSTOM_OPS: tuple[LiteRTOp, ...] = (
    _c("NumericVerify", (U8, I8, I16, F16), "numeric_verify.cc"),
    _c("Mfcc", (F32,), "mfcc.cc"),
    _c("AudioSpectrogram", (F32,), "audio_spectrogram.cc"),
    _c("TFLite_Detection_PostProcess", (F32, U8), "detection_postprocess.cc"),
    _c("aeq.hadamard_rotation", (F32, I32), "hadamard_rotation.cc"),
)

OPS: Mapping[str, LiteRTOp] = {op.name: op for op in BUILTIN_OPS + CUSTOM_OPS}

SUPPORTED, PARTIAL, MISSING = "supported", "partial", "missing"


@dataclass(frozen=True)
class CoverageRow:
    """One LiteRT op next to acelera's kernel for it (acelera_max_version None: no kernel)."""

    op: str
    custom: bool
    min_version: int
    max_version: int
    acelera_max_version: int | None
    litert_dtypes: tuple[str, ...]
    acelera_dtypes: tuple[str, ...]
    status: str
    missing: str  # what acelera lacks, "" when supported

    @property
    def litert_versions(self) -> str:
        return str(self.max_version) if self.min_version == self.max_version == 1 else \
            f"{self.min_version}-{self.max_version}"

    @property
    def supported_versions(self) -> int:
        """How many of LiteRT's versions of the op acelera's kernel accepts."""
        if self.acelera_max_version is None:
            return 0
        return max(0, min(self.acelera_max_version, self.max_version) - self.min_version + 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["litert_dtypes"], d["acelera_dtypes"] = list(self.litert_dtypes), list(self.acelera_dtypes)
        return d


def _registry() -> Mapping:
    from acelera.core.kernels.registry import registered

    return registered()


def _loadable_types() -> frozenset[str]:
    from acelera.core.dtypes import TYPE_NAMES

    return frozenset(TYPE_NAMES.values())


def _row(op: LiteRTOp, spec, loadable: frozenset[str]) -> CoverageRow:
    if spec is None:
        return CoverageRow(op.name, op.custom, op.min_version, op.max_version, None, op.dtypes, (),
                           MISSING, "no kernel")
    gaps = []
    if spec.max_version < op.max_version:
        first = max(spec.max_version + 1, op.min_version)
        gaps.append(f"v{first}" if first == op.max_version else f"v{first}-{op.max_version}")
    declared = tuple(spec.dtypes)
    if op.dtypes and not declared:
        gaps.append("dtypes not declared")
    else:
        lacking = [t for t in op.dtypes if t not in declared or t not in loadable]
        kernel = [t for t in lacking if t in loadable]
        loader = [t for t in lacking if t not in loadable]
        if kernel:
            gaps.append("dtypes " + ", ".join(kernel))
        if loader:
            gaps.append("types the loader lacks " + ", ".join(loader))
    return CoverageRow(op.name, op.custom, op.min_version, op.max_version, spec.max_version, op.dtypes,
                       declared, PARTIAL if gaps else SUPPORTED, "; ".join(gaps))


def coverage(registry: Mapping | None = None) -> Iterator[CoverageRow]:
    """Every LiteRT op (builtins in register.cc order, then the custom ops) against acelera's
    kernel registry (acelera.core.kernels.registry.registered() unless `registry` is given)."""
    reg = _registry() if registry is None else registry
    loadable = _loadable_types()
    for op in BUILTIN_OPS + CUSTOM_OPS:
        yield _row(op, reg.get(op.name), loadable)


def acelera_only(registry: Mapping | None = None) -> list[str]:
    """Kernels acelera registers for ops LiteRT's BuiltinOpResolver does not."""
    reg = _registry() if registry is None else registry
    return sorted(name for name in reg if name not in OPS)


def summary(rows: list[CoverageRow]) -> dict[str, int]:
    """Counts over coverage rows: (op, version) pairs and ops by status."""
    return {
        "pairs": sum(r.max_version - r.min_version + 1 for r in rows),
        "pairs_supported": sum(r.supported_versions for r in rows),
        "ops": len(rows),
        SUPPORTED: sum(r.status == SUPPORTED for r in rows),
        PARTIAL: sum(r.status == PARTIAL for r in rows),
        MISSING: sum(r.status == MISSING for r in rows),
    }


def markdown(registry: Mapping | None = None) -> str:
    """docs/ops.md: the coverage table as a Markdown page."""
    reg = _registry() if registry is None else registry
    rows = list(coverage(reg))
    s = summary(rows)
    lines = [
        "# LiteRT op coverage",
        "",
        "<!-- generated by `acelera ops --markdown > docs/ops.md`; do not edit -->",
        "",
        (f"acelera's CPU kernels support **{s['pairs_supported']} of {s['pairs']}** LiteRT (op, version) "
         f"pairs. Of the {s['ops']} ops LiteRT's BuiltinOpResolver registers "
         f"({len(BUILTIN_OPS)} builtin, {len(CUSTOM_OPS)} custom), {s[SUPPORTED]} are supported with "
         f"every version and dtype, {s[PARTIAL]} partially and {s[MISSING]} are missing."),
        "",
        ("LiteRT's side mirrors `tflite/core/kernels/register.cc` and, for the dtypes of each op's main "
         "input, the kernel's Prepare/Eval type checks (FLOAT8 types count where a "
         "`TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS` build accepts them). acelera's side is its kernel "
         "registry: each kernel's max version and declared dtypes. A dtype acelera's model loader "
         "does not know counts as missing."),
        "",
        "| op | LiteRT versions | acelera max | status | missing | LiteRT dtypes |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        name = f"{r.op} (custom)" if r.custom else r.op
        mx = "-" if r.acelera_max_version is None else str(r.acelera_max_version)
        lines.append(f"| {name} | {r.litert_versions} | {mx} | {r.status} | {r.missing or ''} | "
                     f"{_dtype_text(r.litert_dtypes)} |")
    extra = acelera_only(reg)
    if extra:
        names = ", ".join(f"`{n}`" for n in extra)
        lines += ["", f"Kernels acelera registers for ops outside LiteRT's BuiltinOpResolver: {names}."]
    return "\n".join(lines) + "\n"


def _dtype_text(dtypes: tuple[str, ...]) -> str:
    if tuple(dtypes) == ANY:
        return "any"
    return ", ".join(dtypes) if dtypes else "(no input)"
