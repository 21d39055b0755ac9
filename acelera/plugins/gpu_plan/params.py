"""The parameter block and op codes shared by the host (the partition compiler) and every
backend's kernels (gpu-opencl's OpenCL C in `gpu_opencl.source`, gpu-gl's GLSL in
`gpu_gl.shaders`).

Each launch gets a small int32 parameter block ``p``: ``p[0..11]`` the epilogue (up to two
activation steps fused into the producing kernel, then an optional quantization simulator) and
the output's slice mask, ``p[12]`` the number of work items, ``p[13]`` set when ``dst`` holds
float32, ``p[16..]`` the op's geometry.

Kernels that read operands which may hold float32 in a half-storage plan (`unary`,
`binary`, `where`: bool and int32 tensors, and float operands of ops whose results jump
at a threshold, read exactly from the host's data) take one flag per such operand in their
geometry; see `Compiler.operand`.
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

# Parameter-block layout shared with the host (compiler.py, ops_*.py).
P_ACT1, P_LO1, P_HI1, P_ACT2, P_LO2, P_HI2, P_QS, P_QZ, P_QMIN, P_QMAX, P_OS, P_OREM, P_N, P_F32OUT = range(14)
P_GEOM = 16

# Unary / activation codes (unary_op in the source).
U_CLAMP, U_TANH, U_SIGMOID, U_HARD_SWISH, U_LEAKY, U_EXP, U_ABS, U_NEG, U_SQRT, U_RSQRT, U_LOG, \
    U_SIN, U_COS, U_SQUARE, U_FLOOR, U_ELU, U_SIGN, U_CEIL, U_SNAP = range(19)
#: GELU (erf form), GELU (tanh approximation), float -> int32 (truncate, saturate, NaN -> max),
#: anything -> bool (!= 0, as 0/1)
U_GELU, U_GELU_TANH, U_TO_INT32, U_TO_BOOL = range(19, 23)
U_NONE = -1

# Binary codes (binary_op in the source).
B_ADD, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_PRELU, B_SQDIFF, B_POW = range(9)
#: floor division / floor modulo (TFLite's float semantics), comparisons and LOGICAL_AND: results
#: of the comparisons and AND are 0.0 / 1.0 (bools inside a partition are floats 0/1)
B_FLOOR_DIV, B_FLOOR_MOD, B_EQUAL, B_NOT_EQUAL, B_LESS, B_LESS_EQUAL, B_GREATER, B_GREATER_EQUAL, \
    B_AND = range(9, 18)

# Reduce codes.
R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD = range(5)
