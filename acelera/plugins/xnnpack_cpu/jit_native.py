"""The numba side of native steps (native_records.py): the decoders of the records and
run_native / run_native2, which run a partition's records in one call. Imported only when
numba is available (jit.AVAILABLE)."""
from __future__ import annotations

from numba import njit, prange

from acelera.plugins.xnnpack_cpu.jit_blas import sgemm
from acelera.plugins.xnnpack_cpu.jit_depthwise import dw_1x1, dw_rows
from acelera.plugins.xnnpack_cpu.jit_elementwise import act_flat, binary, copy_runs, sigmoid
from acelera.plugins.xnnpack_cpu.jit_gemm import epilogue, epilogue_onto, epilogue_partial, fc_chain, gemm_small, im2col_padded
from acelera.plugins.xnnpack_cpu.jit_helpers import _jit
from acelera.plugins.xnnpack_cpu.jit_nd import (
    binary_nd,
    bmm,
    gelu_fast,
    layer_norm,
    mean_mid,
    mean_nd,
    softmax_rows_fast,
    transpose4,
    unary,
)
from acelera.plugins.xnnpack_cpu.jit_pool import mean_hw, pool_avg, pool_max, resize_bilinear
from acelera.plugins.xnnpack_cpu.native_records import (
    OP_ACT,
    OP_BINARY,
    OP_BINARY_ND,
    OP_BMM,
    OP_COPY,
    OP_DW,
    OP_DW_1X1,
    OP_EPILOGUE,
    OP_EPILOGUE_ONTO,
    OP_EPILOGUE_PARTIAL,
    OP_FC_CHAIN,
    OP_GEMM,
    OP_IM2COL_PADDED,
    OP_LAYER_NORM,
    OP_MEAN_HW,
    OP_MEAN_MID,
    OP_MEAN_ND,
    OP_POOL_AVG,
    OP_POOL_MAX,
    OP_RESIZE,
    OP_SGEMM,
    OP_SIGMOID,
    OP_SOFTMAX,
    OP_TRANSPOSE,
    OP_UNARY,
)

# --- decoders of native records (see native_records.encode): each reads its fields with a cursor k

@njit(inline="always", boundscheck=False)
def _r1(A, F, M, k):
    src = A if M[k] == 0 else F
    o = M[k + 1]
    return src[o:o + M[k + 2]], k + 3


@njit(inline="always", boundscheck=False)
def _r2(A, F, M, k):
    src = A if M[k] == 0 else F
    o, d0, d1 = M[k + 1], M[k + 2], M[k + 3]
    return src[o:o + d0 * d1].reshape((d0, d1)), k + 4


@njit(inline="always", boundscheck=False)
def _r3(A, F, M, k):
    src = A if M[k] == 0 else F
    o, d0, d1, d2 = M[k + 1], M[k + 2], M[k + 3], M[k + 4]
    return src[o:o + d0 * d1 * d2].reshape((d0, d1, d2)), k + 5


@njit(inline="always", boundscheck=False)
def _ri(M, k):
    return M[k], k + 1


@njit(inline="always", boundscheck=False)
def _rf(F, M, k):
    return F[M[k]], k + 1


@njit(inline="always", boundscheck=False)
def _rt(M, k):
    s = M[k]
    return M[s:s + M[k + 1]], k + 2


@_jit
def _n_epilogue(A, M, F, k):
    o, k = _r2(A, F, M, k)
    bias, k = _r1(A, F, M, k)
    lo1, k = _rf(F, M, k)
    hi1, k = _rf(F, M, k)
    res, k = _r2(A, F, M, k)
    has_res, k = _ri(M, k)
    alpha, k = _r1(A, F, M, k)
    lo2, k = _rf(F, M, k)
    hi2, k = _rf(F, M, k)
    kind, k = _ri(M, k)
    epilogue(o, bias, lo1, hi1, res, has_res, alpha, lo2, hi2, kind)


@_jit
def _n_epilogue_onto(A, M, F, k):
    acc, k = _r2(A, F, M, k)
    bias, k = _r1(A, F, M, k)
    lo1, k = _rf(F, M, k)
    hi1, k = _rf(F, M, k)
    alpha, k = _r1(A, F, M, k)
    lo2, k = _rf(F, M, k)
    hi2, k = _rf(F, M, k)
    kind, k = _ri(M, k)
    o, k = _r2(A, F, M, k)
    epilogue_onto(acc, bias, lo1, hi1, alpha, lo2, hi2, kind, o)


@_jit
def _n_epilogue_partial(A, M, F, k):
    o, k = _r2(A, F, M, k)
    bias, k = _r1(A, F, M, k)
    lo1, k = _rf(F, M, k)
    hi1, k = _rf(F, M, k)
    res, k = _r2(A, F, M, k)
    ow, k = _ri(M, k)
    alpha, k = _r1(A, F, M, k)
    lo2, k = _rf(F, M, k)
    hi2, k = _rf(F, M, k)
    kind, k = _ri(M, k)
    epilogue_partial(o, bias, lo1, hi1, res, ow, alpha, lo2, hi2, kind)


@_jit
def _n_gemm(A, M, F, k):
    x, k = _r2(A, F, M, k)
    w, k = _r2(A, F, M, k)
    bias, k = _r1(A, F, M, k)
    lo1, k = _rf(F, M, k)
    hi1, k = _rf(F, M, k)
    res, k = _r2(A, F, M, k)
    has_res, k = _ri(M, k)
    alpha, k = _r1(A, F, M, k)
    lo2, k = _rf(F, M, k)
    hi2, k = _rf(F, M, k)
    kind, k = _ri(M, k)
    acc, k = _r2(A, F, M, k)
    out, k = _r2(A, F, M, k)
    n0, k = _ri(M, k)
    n1, k = _ri(M, k)
    gemm_small(x, w, bias, lo1, hi1, res, has_res, alpha, lo2, hi2, kind, acc, out, n0, n1)


@_jit
def _n_sgemm(A, M, F, k):
    fptr, k = _ri(M, k)
    x, k = _r2(A, F, M, k)
    w, k = _r2(A, F, M, k)
    out, k = _r2(A, F, M, k)
    sgemm(fptr, x, w, out)


@_jit
def _n_sigmoid(A, M, F, k):
    x, k = _r1(A, F, M, k)
    out, k = _r1(A, F, M, k)
    swish, k = _ri(M, k)
    scratch, k = _r1(A, F, M, k)
    sigmoid(x, out, swish, scratch)


@_jit
def _n_binary(A, M, F, k):
    x, k = _r1(A, F, M, k)
    y, k = _r1(A, F, M, k)
    out, k = _r1(A, F, M, k)
    op, k = _ri(M, k)
    mode, k = _ri(M, k)
    lo, k = _rf(F, M, k)
    hi, k = _rf(F, M, k)
    tile, k = _r1(A, F, M, k)
    binary(x, y, out, op, mode, lo, hi, tile)


@_jit
def _n_copy(A, M, F, k):
    """Copies of runs: count, then (src run, dst offset in out, run length, repeats, src
    stride, dst stride) each; then clamp bounds and flag. For CONCATENATION and PAD."""
    out, k = _r1(A, F, M, k)
    cnt, k = _ri(M, k)
    k0 = k
    for _ in range(cnt):
        k += 3  # skip the source array's fields to reach the flag position
        k += 5
    lo, k = _rf(F, M, k)
    hi, k = _rf(F, M, k)
    clamp, k = _ri(M, k)
    k = k0
    for _ in range(cnt):
        src, k = _r1(A, F, M, k)
        d0, run, reps, sst, dst_ = M[k], M[k + 1], M[k + 2], M[k + 3], M[k + 4]
        k += 5
        copy_runs(src, out, d0, run, reps, sst, dst_, lo, hi, clamp)


@_jit
def _n_im2col_padded(A, M, F, k):
    xp, k = _r1(A, F, M, k)
    hp, wp, c = M[k], M[k + 1], M[k + 2]
    cols, k = _r1(A, F, M, k + 3)
    im2col_padded(xp, hp, wp, c, cols, M[k], M[k + 1], M[k + 2], M[k + 3], M[k + 4], M[k + 5], M[k + 6],
                  M[k + 7], M[k + 8], M[k + 9])


@_jit
def _n_dw_1x1(A, M, F, k):
    x, k = _r2(A, F, M, k)
    w, k = _r1(A, F, M, k)
    bias, k = _r1(A, F, M, k)
    lo, k = _rf(F, M, k)
    hi, k = _rf(F, M, k)
    alpha, k = _r1(A, F, M, k)
    kind, k = _ri(M, k)
    lo2, k = _rf(F, M, k)
    hi2, k = _rf(F, M, k)
    out, k = _r2(A, F, M, k)
    dw_1x1(x, w, bias, lo, hi, alpha, kind, lo2, hi2, out)


@_jit
def _n_dw(A, M, F, k):
    x, k = _r3(A, F, M, k)
    p, k = _r1(A, F, M, k)
    c, pt, pl, sh, sw, hp, rowlen, last = M[k], M[k + 1], M[k + 2], M[k + 3], M[k + 4], M[k + 5], M[k + 6], \
        M[k + 7]
    taps, k = _rt(M, k + 8)
    wt, k = _r2(A, F, M, k)
    bias_t, k = _r1(A, F, M, k)
    lo, k = _rf(F, M, k)
    hi, k = _rf(F, M, k)
    alpha_t, k = _r1(A, F, M, k)
    kind, k = _ri(M, k)
    lo2, k = _rf(F, M, k)
    hi2, k = _rf(F, M, k)
    pbt, k = _r1(A, F, M, k)
    plo, k = _rf(F, M, k)
    phi, k = _rf(F, M, k)
    pre, k = _ri(M, k)
    out, k = _r3(A, F, M, k)
    oy0, k = _ri(M, k)
    oy1, k = _ri(M, k)
    dw_rows(x, p, c, pt, pl, sh, sw, hp, rowlen, last, taps, wt, bias_t, lo, hi, alpha_t, kind, lo2, hi2, pbt,
            plo, phi, pre, out, oy0, oy1)


@_jit
def _n_pool(A, M, F, k, is_max):
    x, k = _r3(A, F, M, k)
    out, k = _r3(A, F, M, k)
    c, kh, kw, sh, sw, pt, pl = M[k], M[k + 1], M[k + 2], M[k + 3], M[k + 4], M[k + 5], M[k + 6]
    lo, k = _rf(F, M, k + 7)
    hi, k = _rf(F, M, k)
    tmp, k = _r1(A, F, M, k)
    if is_max:
        pool_max(x, out, c, kh, kw, sh, sw, pt, pl, lo, hi, tmp)
    else:
        pool_avg(x, out, c, kh, kw, sh, sw, pt, pl, lo, hi, tmp)


@_jit
def _n_fc_chain(A, M, F, k):
    x, k = _r2(A, F, M, k)
    params, k = _r1(A, F, M, k)
    meta, k = _rt(M, k)
    buf, k = _r2(A, F, M, k)
    out, k = _r1(A, F, M, k)
    fc_chain(x, params, meta.reshape((meta.shape[0] // 6, 6)), buf, out)


@_jit
def _n_resize(A, M, F, k):
    x, k = _r1(A, F, M, k)
    h, w, c = M[k], M[k + 1], M[k + 2]
    out, k = _r1(A, F, M, k + 3)
    oh, ow = M[k], M[k + 1]
    y0, k = _rt(M, k + 2)
    y1, k = _rt(M, k)
    wy0, k = _r1(A, F, M, k)
    wy1, k = _r1(A, F, M, k)
    x0, k = _rt(M, k)
    x1, k = _rt(M, k)
    wx0, k = _r1(A, F, M, k)
    wx1, k = _r1(A, F, M, k)
    tmp, k = _r1(A, F, M, k)
    resize_bilinear(x, h, w, c, out, oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1, tmp)


@_jit
def _n_mean_hw(A, M, F, k):
    x, k = _r1(A, F, M, k)
    h, wc, c = M[k], M[k + 1], M[k + 2]
    out, k = _r1(A, F, M, k + 3)
    lo, k = _rf(F, M, k)
    hi, k = _rf(F, M, k)
    tmp, k = _r1(A, F, M, k)
    mean_hw(x, h, wc, c, out, lo, hi, tmp)


@_jit
def _n_act(A, M, F, k):
    out, k = _r1(A, F, M, k)
    kind, k = _ri(M, k)
    lo, k = _rf(F, M, k)
    hi, k = _rf(F, M, k)
    alpha, k = _r1(A, F, M, k)
    act_flat(out, kind, lo, hi, alpha)


@_jit
def _n_softmax(A, M, F, k):
    x, k = _r2(A, F, M, k)
    out, k = _r2(A, F, M, k)
    scratch, k = _r1(A, F, M, k)
    softmax_rows_fast(x, out, scratch)


@_jit
def _n_binary_nd(A, M, F, k):
    x, k = _r1(A, F, M, k)
    y, k = _r1(A, F, M, k)
    out, k = _r1(A, F, M, k)
    op, k = _ri(M, k)
    lo, k = _rf(F, M, k)
    hi, k = _rf(F, M, k)
    shp, k = _rt(M, k)
    sx, k = _rt(M, k)
    sy, k = _rt(M, k)
    binary_nd(x, y, out, op, lo, hi, shp, sx, sy)


@_jit
def _n_unary(A, M, F, k):
    x, k = _r1(A, F, M, k)
    out, k = _r1(A, F, M, k)
    op, k = _ri(M, k)
    scratch, k = _r1(A, F, M, k)
    if op == 10:
        gelu_fast(x, out, scratch)
    else:
        unary(x, out, op)


@_jit
def _n_mean_mid(A, M, F, k):
    x, k = _r1(A, F, M, k)
    outer, r, inner = M[k], M[k + 1], M[k + 2]
    out, k = _r1(A, F, M, k + 3)
    cnt, k = _rf(F, M, k)
    mean_mid(x, outer, r, inner, out, cnt)


@_jit
def _n_mean_nd(A, M, F, k):
    x, k = _r1(A, F, M, k)
    out, k = _r1(A, F, M, k)
    shp, k = _rt(M, k)
    so, k = _rt(M, k)
    cnt, k = _rf(F, M, k)
    mean_nd(x, out, shp, so, cnt)


@_jit
def _n_transpose(A, M, F, k):
    x, k = _r1(A, F, M, k)
    out, k = _r1(A, F, M, k)
    shp, k = _rt(M, k)
    st, k = _rt(M, k)
    transpose4(x, out, shp, st)


@_jit
def _n_bmm(A, M, F, k):
    x, k = _r1(A, F, M, k)
    y, k = _r1(A, F, M, k)
    out, k = _r1(A, F, M, k)
    d, k = _rt(M, k)
    bmm(x, y, out, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9])


@_jit
def _n_layer_norm(A, M, F, k):
    x, k = _r1(A, F, M, k)
    out, k = _r1(A, F, M, k)
    rows, c = M[k], M[k + 1]
    eps, k = _rf(F, M, k + 2)
    gamma, k = _r1(A, F, M, k)
    beta, k = _r1(A, F, M, k)
    layer_norm(x, out, rows, c, eps, gamma, beta)


@_jit
def run_native(A, M, F):
    """Run the native records of M (see encode) in order."""
    i = 0
    end = M.shape[0]
    while i < end:
        op = M[i + 1]
        j = i + 2
        if op == OP_EPILOGUE:
            _n_epilogue(A, M, F, j)
        elif op == OP_EPILOGUE_ONTO:
            _n_epilogue_onto(A, M, F, j)
        elif op == OP_EPILOGUE_PARTIAL:
            _n_epilogue_partial(A, M, F, j)
        elif op == OP_GEMM:
            _n_gemm(A, M, F, j)
        elif op == OP_SGEMM:
            _n_sgemm(A, M, F, j)
        elif op == OP_BINARY:
            _n_binary(A, M, F, j)
        elif op == OP_COPY:
            _n_copy(A, M, F, j)
        elif op == OP_SIGMOID:
            _n_sigmoid(A, M, F, j)
        elif op == OP_IM2COL_PADDED:
            _n_im2col_padded(A, M, F, j)
        elif op == OP_DW_1X1:
            _n_dw_1x1(A, M, F, j)
        elif op == OP_DW:
            _n_dw(A, M, F, j)
        elif op == OP_POOL_MAX:
            _n_pool(A, M, F, j, True)
        elif op == OP_POOL_AVG:
            _n_pool(A, M, F, j, False)
        elif op == OP_FC_CHAIN:
            _n_fc_chain(A, M, F, j)
        elif op == OP_RESIZE:
            _n_resize(A, M, F, j)
        elif op == OP_MEAN_HW:
            _n_mean_hw(A, M, F, j)
        elif op == OP_ACT:
            _n_act(A, M, F, j)
        elif op == OP_SOFTMAX:
            _n_softmax(A, M, F, j)
        elif op == OP_BINARY_ND:
            _n_binary_nd(A, M, F, j)
        elif op == OP_UNARY:
            _n_unary(A, M, F, j)
        elif op == OP_MEAN_MID:
            _n_mean_mid(A, M, F, j)
        elif op == OP_MEAN_ND:
            _n_mean_nd(A, M, F, j)
        elif op == OP_TRANSPOSE:
            _n_transpose(A, M, F, j)
        elif op == OP_BMM:
            _n_bmm(A, M, F, j)
        elif op == OP_LAYER_NORM:
            _n_layer_norm(A, M, F, j)
        else:
            raise ValueError("unknown native op")
        i += M[i]


@njit(cache=True, nogil=True, parallel=True)
def run_native2(A, M1, F1, M2, F2):
    """Two lists of native records at once, on two of numba's threads (the halves of a
    split step: they write disjoint outputs)."""
    for t in prange(2):
        if t == 0:
            run_native(A, M1, F1)
        else:
            run_native(A, M2, F2)
