"""Convolution steps: CONV_2D / FULLY_CONNECTED as blocked im2col + BLAS GEMM + fused epilogue,
small dense chains as one numba call, DEPTHWISE_CONV_2D over a packed, zero-bordered input."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from acelera.core.kernels.conv import Geometry
from acelera.core.kernels.registry import NodeContext
from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.native_records import (
    OP_COPY,
    OP_DW,
    OP_DW_1X1,
    OP_FC_CHAIN,
    OP_GEMM,
    OP_IM2COL_PADDED,
    OP_SGEMM,
    Native,
    Par,
)
from acelera.plugins.xnnpack_cpu.spec import (
    EMPTY,
    F32,
    HSWISH,
    PRELU,
    Act,
    Spec,
    act_numpy,
    block_copies,
    clamp_fn,
    epilogue,
    f32c,
    native_copy,
    seq,
    tile_row,
)

# --- convolution, fully connected -------------------------------------------------------------

def conv_geometry(ctx: NodeContext, channels: int | None = None) -> Geometry:
    """The convolution's geometry; `channels` replaces the input's channel count (a depthwise
    convolution with a depth multiplier seen on its input's channels repeated)."""
    o = ctx.options
    x_t, w_t = ctx.inputs[0], ctx.inputs[1]
    assert x_t is not None and w_t is not None  # the op table takes convolutions with input and filter only
    w = w_t.shape
    shape = tuple(x_t.shape) if channels is None else tuple(x_t.shape[:3]) + (channels,)
    return Geometry.make(shape, int(w[1]), int(w[2]), int(o.get("padding", 0) or 0),
                         int(o.get("stride_h", 1) or 1), int(o.get("stride_w", 1) or 1),
                         int(o.get("dilation_h_factor", 1) or 1), int(o.get("dilation_w_factor", 1) or 1))


#: up to this many GEMM rows (output pixels) a convolution or FULLY_CONNECTED runs on
#: jit.gemm_small with its epilogue fused (BLAS repacks the weights every call); where numpy's
#: BLAS can be called from the native run (jit.blas_sgemm), only single-row ones do: its
#: small-matrix kernels beat gemm_small 2-7x from 4 rows up
SMALL_M = 12
#: a pointwise GEMM of up to this many multiply-adds also runs on jit.gemm_small, whatever M
#: (a BLAS call and a separate epilogue cost more than the product there)
SMALL_MACS = 1 << 15
#: a step of at least this many multiply-adds is split in two halves that two threads run
#: when --num_threads allows (smaller ones cost less than handing half to another thread)
PAR_MACS = 1 << 19
BLOCK_BYTES = 96 << 10  # per-block working set target: im2col rows + outputs stay in L2
MAX_BLOCKS = 16


def row_blocks(rows: int, row_bytes: int) -> int:
    """Rows per block so that one block's working set is about BLOCK_BYTES."""
    if rows * row_bytes <= 2 * BLOCK_BYTES:
        return rows
    rb = max(1, BLOCK_BYTES // max(row_bytes, 1))
    return max(rb, -(-rows // MAX_BLOCKS))


def gemm_spec(label, nodes, x_tid, out_tid, res_tid, kind, geom: Geometry | None, m: int, k: int, n_out: int,
              pack, act1: Act, act2: Act, cres: int, full_res: bool, raw: bool = False) -> Spec:
    """CONV_2D (kind 'conv') or FULLY_CONNECTED ('fc') with its fused bias, activations and
    residual add. pack() returns {'w': (K, N) float32, 'b': (N,), 'alpha': (N,) or absent}.

    Large convolutions run in blocks of output rows (im2col, GEMM and epilogue of a block
    while it is in cache); the im2col and accumulator scratch only hold one block (one per
    half when the step is big enough to be split between two threads: Par). With `raw`
    the output is the bare product: the depthwise conv reading it adds bias and clamp. `geom`
    is None for FULLY_CONNECTED."""
    unpadded_1x1 = geom is not None and geom.pointwise  # any strides
    pointwise = kind == "fc" or (geom is not None and geom.pointwise and geom.sh == 1 and geom.sw == 1)
    ow = geom.ow if geom is not None else 1
    rows = m // ow
    numba_ok = jit.AVAILABLE and (pointwise or not unpadded_1x1)
    sgemm = jit.blas_sgemm()
    small = (jit.AVAILABLE and (m <= SMALL_M or (pointwise and m * k * n_out <= SMALL_MACS))
             and (res_tid is None or cres == n_out) and not raw and (not sgemm or m == 1))
    split = jit.AVAILABLE and small and n_out >= 32 and m * k * n_out >= PAR_MACS  # BLAS splits the others
    row_bytes = ow * 4 * ((0 if pointwise else k) + n_out * (2 if res_tid is not None else 1))
    rb = row_blocks(rows, row_bytes) if numba_ok and not small else rows
    if split and not small:
        rb = min(rb, -(-rows // 2))
    halves = 2 if split and not small else 1
    padded = jit.AVAILABLE and not pointwise and not unpadded_1x1  # im2col from a zero-bordered copy
    scratch: list[tuple[tuple[int, ...], type[np.float32]]] = []
    if not pointwise:  # im2col / strided gather, one block (per half), and the over-copy's slack
        scratch.append(((halves * rb * ow * k + (IM2COL_SLACK if padded else 0),), F32))
    if res_tid is not None:
        scratch.append(((halves * rb * ow, n_out), F32))  # accumulator when the output overwrites the residual
    if act2.kind in (PRELU, HSWISH) and not jit.AVAILABLE:
        scratch.append(((m, n_out), F32))
    ins = (x_tid,) + ((res_tid,) if res_tid is not None else ())
    inplace = {out_tid: res_tid} if res_tid is not None and full_res else {}
    private = (((padded_size(geom) + IM2COL_SLACK,), F32),) if padded and geom is not None else ()

    def build(a, s, private, p):
        x, out = a[x_tid], a[out_tid]
        out2 = out.reshape(m, n_out)
        si = 0
        cols_s = None
        head = []
        if not pointwise:
            cols_s = s[si][:halves * rb * ow * k].reshape(halves * rb * ow, k)
            si += 1
        if padded:
            xp = private[0]
            head.append(pad_into(x, xp, geom))
        res2 = a[res_tid].reshape(m, cres) if res_tid is not None else None
        onto = res2 is not None and np.shares_memory(res2, out2)
        acc_s = s[si] if res_tid is not None else None
        si += 1 if res_tid is not None else 0
        tmp = s[si] if act2.kind in (PRELU, HSWISH) and not jit.AVAILABLE else None
        w = p["w"]
        if small:
            if pointwise:
                cols, gather = x.reshape(m, k), None
            elif padded:
                cols, gather = cols_s, _gather_padded(xp, cols_s, geom, 0, geom.n * geom.oh)
            else:
                cols, gather = cols_s, _gather(x, cols_s, geom)
            al = p.get("alpha")
            args = (OP_GEMM, cols, w, p["b"], f32c(act1.lo), f32c(act1.hi),
                    res2 if res2 is not None else EMPTY.reshape(1, 1), int(res2 is not None),
                    al if al is not None else np.zeros(n_out, F32), f32c(act2.lo), f32c(act2.hi), act2.kind,
                    acc_s[:m] if onto else out2, out2)
            if split:
                h = n_out // 2 // 16 * 16
                step = Par([Native(*args, 0, h)], [Native(*args, h, n_out)])
            else:
                step = Native(*args, 0, n_out)
            return head + ([gather, step] if gather is not None else [step])
        act2p = Act(act2.lo, act2.hi, act2.kind, p.get("alpha"))
        mm = np.matmul
        groups: list[list] = [[] for _ in range(halves)]
        starts = list(range(0, rows, rb))
        for b, r0 in enumerate(starts):
            half = 0 if halves == 1 or b < (len(starts) + 1) // 2 else 1
            r1 = min(rows, r0 + rb)
            p0, p1 = r0 * ow, r1 * ow
            base = half * rb * ow
            if pointwise:
                cols, gather = x.reshape(m, k)[p0:p1], None
            elif padded:
                cols = cols_s[base:base + p1 - p0]
                gather = _gather_padded(xp, cols, geom, r0, r1)
            else:  # numpy, or a strided 1x1 convolution (a strided copy): one block
                cols, gather = cols_s, _gather(x, cols_s, geom)
            ob = out2[p0:p1]
            acc = acc_s[base:base + p1 - p0] if onto else ob
            rsb = None if res2 is None else res2[p0:p1]
            if gather is not None:
                groups[half].append(gather)
            groups[half].append(Native(OP_SGEMM, sgemm, cols, w, acc) if sgemm else _matmul(mm, cols, w, acc))
            if not raw:
                groups[half].append(epilogue(acc, ob, p["b"], act1, rsb, act2p, tmp, ow))
        return head + ([Par(*groups)] if halves == 2 else groups[0])
    return Spec(label, nodes, ins, (out_tid,), build, pack, tuple(scratch), private, inplace=inplace,
                gemm_mnk=m * k * n_out)


def _matmul(mm, a: np.ndarray, b: np.ndarray, out: np.ndarray):
    return lambda: mm(a, b, out=out)


def fc_chain_spec(label, nodes, x_tid, out_tid, m: int, k0: int, width: int, pack, mnk: int) -> Spec:
    """Small FULLY_CONNECTED layers in one numba call (jit.fc_chain)."""
    def build(a, s, _p, p):
        x = a[x_tid].reshape(m, k0)
        out = a[out_tid]
        return Native(OP_FC_CHAIN, x, p["params"], p["meta"], s[0], out.reshape(-1))
    return Spec(label, nodes, (x_tid,), (out_tid,), build, pack, scratch=(((2, m * width), F32),), gemm_mnk=mnk)


IM2COL_SLACK = 16  # floats after the im2col buffer and the padded input (jit.im2col_padded)


def padded_dims(g: Geometry) -> tuple[int, int]:
    """(rows, columns) of the zero-bordered input every tap of geometry g reads in range."""
    hp = max((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1, g.pt + g.h)
    wp = max((g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1, g.pl + g.w)
    return hp, wp


def padded_size(g: Geometry) -> int:
    hp, wp = padded_dims(g)
    return g.n * hp * wp * g.c


def pad_into(x: np.ndarray, xp: np.ndarray, g: Geometry):
    """The native copy of x into the interior of the zero-bordered xp (borders stay zero)."""
    hp, wp = padded_dims(g)
    shape = (g.n, hp, wp, g.c)
    dst = xp[:padded_size(g)].reshape(shape)
    return native_copy(dst, [(x.reshape(g.n, g.h, g.w, g.c), block_copies((g.n, g.h, g.w, g.c), shape,
                                                                              [0, g.pt, g.pl, 0]))],
                       -np.inf, np.inf)


def _gather_padded(xp: np.ndarray, cols: np.ndarray, g: Geometry, r0: int, r1: int):
    hp, wp = padded_dims(g)
    return Native(OP_IM2COL_PADDED, xp, hp, wp, g.c, cols.reshape(-1), g.kh, g.kw, g.sh, g.sw, g.dh, g.dw,
                      g.oh, g.ow, r0, r1)


def _gather(x: np.ndarray, cols: np.ndarray, g: Geometry):
    """The closure that fills `cols` (M, KH*KW*C) from x (NHWC) for geometry g."""
    if g.pointwise:  # 1x1 with a stride: a strided copy
        src = x[:, ::g.sh, ::g.sw, :][:, :g.oh, :g.ow, :]
        dst = cols.reshape(g.n, g.oh, g.ow, g.c)
        return lambda: np.copyto(dst, src)
    # numpy: one copy per tap of the in-range window; padded positions are zeroed per call
    cols6 = cols.reshape(g.n, g.oh, g.ow, g.kh, g.kw, g.c)
    copies, zeros = [], []
    for ky in range(g.kh):
        oy0, oy1 = _valid_range(g.oh, g.sh, ky * g.dh - g.pt, g.h)
        for kx in range(g.kw):
            ox0, ox1 = _valid_range(g.ow, g.sw, kx * g.dw - g.pl, g.w)
            if oy0 > 0 or oy1 < g.oh or ox0 > 0 or ox1 < g.ow:
                zeros.append(cols6[:, :, :, ky, kx, :])
            if oy0 >= oy1 or ox0 >= ox1:
                continue
            iy0 = oy0 * g.sh + ky * g.dh - g.pt
            ix0 = ox0 * g.sw + kx * g.dw - g.pl
            src = x[:, iy0:iy0 + (oy1 - oy0 - 1) * g.sh + 1:g.sh, ix0:ix0 + (ox1 - ox0 - 1) * g.sw + 1:g.sw, :]
            copies.append((cols6[:, oy0:oy1, ox0:ox1, ky, kx, :], src))
    zero = F32(0)

    def run():
        for z in zeros:
            z.fill(zero)
        for d, s_ in copies:
            np.copyto(d, s_)
    return run


def _valid_range(out: int, stride: int, offset: int, size: int) -> tuple[int, int]:
    """Output positions o in [o0, o1) with 0 <= o*stride + offset < size."""
    o0 = max(0, -(offset // stride)) if offset < 0 else 0
    while o0 < out and o0 * stride + offset < 0:
        o0 += 1
    o1 = out
    while o1 > o0 and (o1 - 1) * stride + offset >= size:
        o1 -= 1
    return o0, max(o0, o1)


# --- depthwise convolution --------------------------------------------------------------------

@dataclass(frozen=True)
class DwLayout:
    """The zero-bordered, column-phase-split input of a depthwise conv and its tap table."""

    g: Geometry
    hp: int
    wq: int
    phase: np.ndarray
    rowoff: np.ndarray
    coloff: np.ndarray

    @staticmethod
    def make(g: Geometry) -> "DwLayout":
        hp = max((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1, g.pt + g.h)
        wq = max((g.kw - 1) * g.dw // g.sw + g.ow, (g.pl + g.w - 1) // g.sw + 1)
        taps = [(ky, kx) for ky in range(g.kh) for kx in range(g.kw)]
        phase = np.array([(kx * g.dw) % g.sw for _, kx in taps], np.int64)
        rowoff = np.array([ky * g.dh for ky, _ in taps], np.int64)
        coloff = np.array([(kx * g.dw) // g.sw * g.c for _, kx in taps], np.int64)
        return DwLayout(g, hp, wq, phase, rowoff, coloff)

    @property
    def shape(self):
        return (self.g.n, self.g.sw, self.hp, self.wq * self.g.c)


def dw_block(g: Geometry) -> int:
    """Pixels per weight block: a divisor of OW with block*C <= 256 floats (at least 1)."""
    return max(k for k in range(1, g.ow + 1) if g.ow % k == 0 and (k * g.c <= 256 or k == 1))


def dw_is_scale(g: Geometry) -> bool:
    """A 1x1, stride-1, unpadded depthwise conv: a per-channel scale (jit.dw_1x1)."""
    return (jit.AVAILABLE and g.kh == g.kw == 1 and g.sh == g.sw == 1 and g.pt == g.pl == 0
            and (g.oh, g.ow) == (g.h, g.w))


def dw_pack(w: np.ndarray, b: np.ndarray | None, alpha: np.ndarray | None, g: Geometry, r16,
            pre: tuple | None = None) -> dict:
    """Taps tiled to a block of pixels: wt (KH*KW, block*C), bias and alpha likewise, so one
    tap is a contiguous multiply over each block of an output row; with `pre` (the producing
    convolution's bias and clamp), that bias tiled to an input row (pbt)."""
    c = g.c
    k = dw_block(g)
    taps = r16(np.asarray(w, F32).reshape(g.kh * g.kw, 1, c))
    out = {"wt": np.ascontiguousarray(np.broadcast_to(taps, (g.kh * g.kw, k, c)).reshape(g.kh * g.kw, k * c)),
           "bt": tile_row(r16(b) if b is not None else np.zeros(c, F32), k)}
    if alpha is not None:
        out["at"] = tile_row(r16(alpha), k)
    if pre is not None:
        out["pbt"] = tile_row(np.asarray(pre[0], F32), g.w)
    return out


def dw_spec(label, nodes, x_tid, out_tid, g: Geometry, pack, act: Act, act2: Act, pre: Act | None = None) -> Spec:
    """DEPTHWISE_CONV_2D (depth multiplier 1) with bias, clamp `act` and activation `act2`;
    `pre`: the clamp of the producing convolution, whose bias (packed: pbt) and clamp this
    step applies to its input (the producer then skips its epilogue)."""
    lay = DwLayout.make(g)
    row = g.ow * g.c
    if dw_is_scale(g):
        def build_1x1(a, _s, _private, p):  # a per-channel scale: no padded copy
            x, out = a[x_tid].reshape(g.n * g.h, row), a[out_tid].reshape(g.n * g.h, row)
            at = p.get("at")
            return Native(OP_DW_1X1, x, p["wt"][0], p["bt"], f32c(act.lo), f32c(act.hi),
                              at if at is not None else np.zeros(p["wt"].shape[1], F32), act2.kind, f32c(act2.lo),
                              f32c(act2.hi), out)
        return Spec(label, nodes, (x_tid,), (out_tid,), build_1x1, pack)  # no in-place: aliasing defeats SIMD
    if jit.AVAILABLE:
        rowlen = lay.wq * g.c
        taps = lay.phase * (lay.hp * rowlen) + lay.rowoff * rowlen + lay.coloff

        def build_native(a, _s, private, p):
            x, out = a[x_tid], a[out_tid]
            wt = p["wt"]
            at = p.get("at")
            args = (OP_DW, x.reshape(g.n, g.h, g.w * g.c), private[0].reshape(-1), g.c, g.pt, g.pl,
                    g.sh, g.sw, lay.hp, rowlen, int(lay.rowoff[-1]), taps, wt, p["bt"], f32c(act.lo),
                    f32c(act.hi), at if at is not None else np.zeros(wt.shape[1], F32), act2.kind,
                    f32c(act2.lo), f32c(act2.hi), p["pbt"] if pre is not None else np.zeros(1, F32),
                    f32c(pre.lo if pre is not None else -np.inf), f32c(pre.hi if pre is not None else np.inf),
                    int(pre is not None), out.reshape(g.n, g.oh, row))
            whole = Native(*args, 0, g.oh)
            if g.n != 1 or g.oh * row * g.kh * g.kw < PAR_MACS or g.oh < 2:  # batches share the padded rows
                return whole
            h = g.oh // 2
            return Par([Native(*args, 0, h)], [Native(*args, h, g.oh)], [whole])
        return Spec(label, nodes, (x_tid,), (out_tid,), build_native, pack, private=((lay.shape[1:], F32),))

    def build(a, s, private, p):
        x, out = a[x_tid], a[out_tid]
        out3 = out.reshape(g.n, g.oh, row)
        return _dw_numpy(x, out3, private[0], lay, p["wt"], p["bt"], act, Act(act2.lo, act2.hi, act2.kind, p.get("at")),
                         s[0])
    return Spec(label, nodes, (x_tid,), (out_tid,), build, pack, (((g.n, g.oh, row), F32),),
                private=((lay.shape, F32),))


def dw_multiplier_spec(inner: Spec, x_tid: int, x_shape: tuple[int, ...], mult: int) -> Spec:
    """A depthwise convolution with depth multiplier `mult` as one with multiplier 1 (`inner`,
    built on C*mult channels) on its input with every channel repeated mult times (output
    channel ic*mult + m reads input channel ic): one native copy into a scratch buffer first."""
    n, h, w, c = (int(d) for d in x_shape)
    cout = c * mult
    pix = n * h * w

    def build(a, s, private, p):
        x = a[x_tid].reshape(-1)
        rep = s[0].reshape(-1)
        args: list = []
        for ic in range(c):
            for m in range(mult):
                args += [x[ic:ic + (pix - 1) * c + 1], ic * mult + m, 1, pix, c, cout]
        copy = Native(OP_COPY, rep, c * mult, *args, f32c(-np.inf), f32c(np.inf), 0)
        view = dict(a)
        view[x_tid] = rep.reshape(n, h, w, cout)
        assert inner.build is not None
        built = inner.build(view, s[1:], private, p)
        return [copy] + (list(built) if isinstance(built, (list, tuple)) else [built])
    return replace(inner, build=build, scratch=(((pix * cout,), F32),) + tuple(inner.scratch))


def _dw_numpy(x, out3, pbuf, lay: DwLayout, wt, bt, act: Act, act2: Act, tmp):
    g = lay.g
    c = g.c
    copies = []
    for ph in range(g.sw):
        ix0 = (ph - g.pl) % g.sw
        if ix0 >= g.w:
            continue
        q0 = (ix0 + g.pl) // g.sw
        cnt = len(range(ix0, g.w, g.sw))
        copies.append((pbuf[:, ph, g.pt:g.pt + g.h, q0 * c:(q0 + cnt) * c].reshape(g.n, g.h, cnt, c),
                       x[:, :, ix0::g.sw, :]))
    span = (g.oh - 1) * g.sh + 1
    lb = wt.shape[1]  # weights tiled to blocks of lb values: view rows as (OW*C/lb, lb)
    blocks = (g.n, g.oh, g.ow * c // lb, lb)
    views = [pbuf[:, ph, r:r + span:g.sh, co:co + g.ow * c].reshape(blocks)
             for ph, r, co in zip(lay.phase.tolist(), lay.rowoff.tolist(), lay.coloff.tolist())]
    out3, tmp = out3.reshape(blocks), tmp.reshape(blocks)
    tail = seq(clamp_fn(out3, act.lo, act.hi), act_numpy(out3, act2, tmp))

    def run():
        for d, s_ in copies:
            np.copyto(d, s_)
        np.copyto(out3, bt)
        for v, w in zip(views, wt):
            np.multiply(v, w, out=tmp)
            np.add(out3, tmp, out=out3)
        if tail is not None:
            tail()
    return run
