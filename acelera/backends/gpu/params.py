"""The contract between the partition compiler (host) and the kernels of every GPU backend:
the parameter block's slots and the op codes, in one table.

Each launch gets a small int32 parameter block ``p``. Its first slots are the same for every
kernel: the epilogue (up to two activation steps fused into the producing kernel, then an
optional quantization simulator), the output's slice mask, the number of work items and the
float32-output flag. The op's geometry follows from `P_GEOM`, laid out per kernel family below
in the order the host writes it (`Compiler.params(..., geometry)`, the ops/ modules).

The names below are the table. `preamble()` emits every one of them as ``#define NAME value``
at the top of gpu-opencl's program and of every gpu-gl shader, so the kernels read
``p[P_N]``, ``P(CONV_KH)``, ``case B_ADD:`` and never a bare slot number or op code. A name
belongs to the table when it starts with one of `PREFIXES`.

Kernels that read operands which may hold float32 in a half-storage plan (`unary`, `binary`,
`where`: bool and int32 tensors, and float operands of ops whose results jump at a threshold,
read exactly from the host's data) take one flag per such operand in their geometry
(``*_F32``); see `Compiler.operand`.
"""
from __future__ import annotations

#: Register blocks: convolutions compute XB output columns times 2 output slices (one float8
#: accumulator per column) per work item, XB one of CONV_BLOCKS (wide rows take the first);
#: depthwise DW_BLOCK columns of one slice; fully connected and transposed convolutions 2 slices.
CONV_BLOCKS = (8, 2)
DW_BLOCK = 4
#: Dot products are summed in two levels: a partial sum per kernel row, or per ACC_CHUNK input
#: slices, added to the total (float32 error on deep layers down by a third, no measurable cost).
ACC_CHUNK = 8

# --- slots every kernel reads ----------------------------------------------------------------
# two activation steps (unary code, lo, hi as float bits; code U_NONE: no step), the quantization
# simulator (scale, zero point, qmin, qmax as float bits; scale 0: none), the output's slices and
# the channels of its last slice, the work-item count, set when dst holds float32
P_ACT1, P_LO1, P_HI1, P_ACT2, P_LO2, P_HI2, P_QS, P_QZ, P_QMIN, P_QMAX, P_OS, P_OREM, P_N, P_F32OUT = range(14)
P_GEOM = 16

# --- geometry, per kernel family (from P_GEOM, in the host's order) ------------------------------
# unary: H*W, unary code, lo, hi (float bits), a holds float32
UNARY_HW, UNARY_CODE, UNARY_LO, UNARY_HI, UNARY_A_F32 = range(P_GEOM, P_GEOM + 5)
# binary: output H, W, S, B; vector strides (b, s, h, w) of a, then of b; a / b hold one channel
# (splat); binary code; a / b hold float32
BINARY_H, BINARY_W, BINARY_S, BINARY_B = range(P_GEOM, P_GEOM + 4)
BINARY_A_STRIDES, BINARY_B_STRIDES = P_GEOM + 4, P_GEOM + 8
BINARY_A_SPLAT, BINARY_B_SPLAT, BINARY_CODE, BINARY_A_F32, BINARY_B_F32 = range(P_GEOM + 12, P_GEOM + 17)
# where (SELECT): output H, W, S, B; strides (b, s, h, w) of the condition, if and else operands
# (4 each, in vectors, or in scalars for an operand read one value at a time); those 3 flags
# (splat); 3 flags: the operand holds float32
WHERE_H, WHERE_W, WHERE_S, WHERE_B = range(P_GEOM, P_GEOM + 4)
WHERE_STRIDES, WHERE_SPLAT, WHERE_F32 = P_GEOM + 4, P_GEOM + 16, P_GEOM + 19
# lstm_cell: slices of the state; 0: write the new state, 1: the new activation
LSTM_S, LSTM_ACTIV = range(P_GEOM, P_GEOM + 2)
# copy_vec: the destination's H*W (copy_map has no geometry)
COPY_HW = P_GEOM
# pool: input H, W, S, B; output H, W; kernel H, W; strides; pads top, left; 0 max, 1 average
POOL_IH, POOL_IW, POOL_S, POOL_B, POOL_OH, POOL_OW, POOL_KH, POOL_KW, POOL_SH, POOL_SW, POOL_PT, POOL_PL, \
    POOL_AVG = range(P_GEOM, P_GEOM + 13)
# resize: input H, W, S, B; output H, W; 1 nearest, 0 bilinear
RESIZE_IH, RESIZE_IW, RESIZE_S, RESIZE_B, RESIZE_OH, RESIZE_OW, RESIZE_NEAREST = range(P_GEOM, P_GEOM + 7)
# softmax: H*W, slices, channels, beta (float bits)
SOFTMAX_HW, SOFTMAX_S, SOFTMAX_C, SOFTMAX_BETA = range(P_GEOM, P_GEOM + 4)
# reduce: input H, W, S, B, C; output H, W, S; reduce flags b, h, w, c; reduce code; 1/count
REDUCE_IH, REDUCE_IW, REDUCE_IS, REDUCE_IB, REDUCE_IC, REDUCE_OH, REDUCE_OW, REDUCE_OS, REDUCE_RB, REDUCE_RH, \
    REDUCE_RW, REDUCE_RC, REDUCE_CODE, REDUCE_INV_COUNT = range(P_GEOM, P_GEOM + 14)
# conv2d_*, depthwise*: input H, W, S; output H, W, S; kernel H, W; strides; pads top, left;
# dilations; column blocks per row; batch; depthwise only: depth multiplier, input channels
CONV_IH, CONV_IW, CONV_IS, CONV_OH, CONV_OW, CONV_OS, CONV_KH, CONV_KW, CONV_SH, CONV_SW, CONV_PT, CONV_PL, \
    CONV_DH, CONV_DW, CONV_NXB, CONV_B, CONV_M, CONV_IC = range(P_GEOM, P_GEOM + 18)
# transpose_conv: as conv up to the pads, then slice pairs, batch
TCONV_IH, TCONV_IW, TCONV_IS, TCONV_OH, TCONV_OW, TCONV_OS, TCONV_KH, TCONV_KW, TCONV_SH, TCONV_SW, TCONV_PT, \
    TCONV_PL, TCONV_G, TCONV_B = range(P_GEOM, P_GEOM + 14)
# fully_connected: input slices, output slices, rows; input row / slice strides; output row /
# slice strides (in vectors); slice pairs
FC_KS, FC_OS, FC_N, FC_IRS, FC_ISS, FC_ORS, FC_OSS, FC_G = range(P_GEOM, P_GEOM + 8)

# --- op codes ----------------------------------------------------------------------------------
# Unary / activation codes (unary_op: the epilogue's steps and the unary kernel).
U_CLAMP, U_TANH, U_SIGMOID, U_HARD_SWISH, U_LEAKY, U_EXP, U_ABS, U_NEG, U_SQRT, U_RSQRT, U_LOG, \
    U_SIN, U_COS, U_SQUARE, U_FLOOR, U_ELU, U_SIGN, U_CEIL, U_SNAP = range(19)
#: GELU (erf form), GELU (tanh approximation), float -> int32 (truncate, saturate, NaN -> max),
#: anything -> bool (!= 0, as 0/1)
U_GELU, U_GELU_TANH, U_TO_INT32, U_TO_BOOL = range(19, 23)
U_NONE = -1

# Binary codes (binary_op).
B_ADD, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_PRELU, B_SQDIFF, B_POW = range(9)
#: floor division / floor modulo (TFLite's float semantics), comparisons and LOGICAL_AND: results
#: of the comparisons and AND are 0.0 / 1.0 (bools inside a partition are floats 0/1)
B_FLOOR_DIV, B_FLOOR_MOD, B_EQUAL, B_NOT_EQUAL, B_LESS, B_LESS_EQUAL, B_GREATER, B_GREATER_EQUAL, \
    B_AND = range(9, 18)

# Reduce codes (the reduce kernel).
R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD = range(5)

#: the prefixes of the table's names: every int constant of this module starting with one is
#: emitted into the kernels' preamble
PREFIXES = ("P_", "UNARY_", "BINARY_", "WHERE_", "LSTM_", "COPY_", "POOL_", "RESIZE_", "SOFTMAX_", "REDUCE_",
            "CONV_", "TCONV_", "FC_", "U_", "B_", "R_")


def names() -> dict[str, int]:
    """The table: every slot and op-code name with its value, in definition order."""
    return {k: v for k, v in globals().items() if k.startswith(PREFIXES) and type(v) is int}


def preamble() -> str:
    """The table as ``#define NAME value`` lines, for OpenCL C and GLSL alike."""
    return "".join(f"#define {k} {v if v >= 0 else f'({v})'}\n" for k, v in names().items())
