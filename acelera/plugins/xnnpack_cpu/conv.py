"""Convolution steps: CONV_2D / FULLY_CONNECTED as blocked im2col + BLAS GEMM + fused epilogue,
small dense chains as one numba call, DEPTHWISE_CONV_2D over a packed, zero-bordered input."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acelera.core.kernels.conv import Geometry
from acelera.core.kernels.registry import NodeContext
from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.spec import F32, HSWISH, PRELU, Act, Spec, act_numpy, clamp_fn, epilogue, f32c, seq, tile_row

# --- convolution, fully connected -------------------------------------------------------------

def conv_geometry(ctx: NodeContext) -> Geometry:
    o = ctx.options
    w = ctx.inputs[1].shape
    return Geometry.make(ctx.inputs[0].shape, int(w[1]), int(w[2]), int(o.get("padding", 0) or 0),
                         int(o.get("stride_h", 1) or 1), int(o.get("stride_w", 1) or 1),
                         int(o.get("dilation_h_factor", 1) or 1), int(o.get("dilation_w_factor", 1) or 1))


BLOCK_BYTES = 96 << 10  # per-block working set target: im2col rows + outputs stay in L2
MAX_BLOCKS = 16


def row_blocks(rows: int, row_bytes: int) -> int:
    """Rows per block so that one block's working set is about BLOCK_BYTES."""
    if rows * row_bytes <= 2 * BLOCK_BYTES:
        return rows
    rb = max(1, BLOCK_BYTES // max(row_bytes, 1))
    return max(rb, -(-rows // MAX_BLOCKS))


def gemm_spec(label, nodes, x_tid, out_tid, res_tid, kind, geom: Geometry | None, m: int, k: int, n_out: int,
              pack, act1: Act, act2: Act, cres: int, full_res: bool) -> Spec:
    """CONV_2D (kind 'conv') or FULLY_CONNECTED ('fc') with its fused bias, activations and
    residual add. pack() returns {'w': (K, N) float32, 'b': (N,), 'alpha': (N,) or absent}.

    Large convolutions run in blocks of output rows (im2col, GEMM and epilogue of a block
    while it is in cache); the im2col and accumulator scratch only hold one block."""
    pointwise = kind == "fc" or (geom.pointwise and geom.sh == 1 and geom.sw == 1)
    ow = geom.ow if geom is not None else 1
    rows = m // ow
    numba_ok = jit.AVAILABLE and (pointwise or not geom.pointwise)
    row_bytes = ow * 4 * ((0 if pointwise else k) + n_out * (2 if res_tid is not None else 1))
    rb = row_blocks(rows, row_bytes) if numba_ok else rows
    scratch = []
    if not pointwise:
        scratch.append(((rb * ow, k), F32))  # im2col / strided gather, one block
    if res_tid is not None:
        scratch.append(((rb * ow, n_out), F32))  # accumulator when the output overwrites the residual
    if act2.kind in (PRELU, HSWISH) and not jit.AVAILABLE:
        scratch.append(((m, n_out), F32))
    ins = (x_tid,) + ((res_tid,) if res_tid is not None else ())
    inplace = {out_tid: res_tid} if res_tid is not None and full_res else {}

    def build(a, s, _private, p):
        x, out = a[x_tid], a[out_tid]
        out2 = out.reshape(m, n_out)
        si = 0
        cols_s = None
        if not pointwise:
            cols_s = s[si]
            si += 1
        res2 = a[res_tid].reshape(m, cres) if res_tid is not None else None
        onto = res2 is not None and np.shares_memory(res2, out2)
        acc_s = s[si] if res_tid is not None else None
        si += 1 if res_tid is not None else 0
        tmp = s[si] if act2.kind in (PRELU, HSWISH) and not jit.AVAILABLE else None
        w = p["w"]
        act2p = Act(act2.lo, act2.hi, act2.kind, p.get("alpha"))
        calls = []
        for r0 in range(0, rows, rb):
            r1 = min(rows, r0 + rb)
            p0, p1 = r0 * ow, r1 * ow
            if pointwise:
                cols, gather = x.reshape(m, k)[p0:p1], None
            elif rb == rows:
                cols, gather = cols_s, _gather(x, cols_s, geom)
            else:
                cols = cols_s[:p1 - p0]
                gather = _gather_rows(x, cols, geom, r0, r1)
            ob = out2[p0:p1]
            acc = acc_s[:p1 - p0] if onto else ob
            rsb = None if res2 is None else res2[p0:p1]
            epi = epilogue(acc, ob, p["b"], act1, rsb, act2p, tmp, ow)
            calls.append((gather, cols, acc, epi))
        mm = np.matmul
        if len(calls) == 1:
            gather, cols, acc, epi = calls[0]
            if gather is None:
                def run():
                    mm(cols, w, out=acc)
                    epi()
            else:
                def run():
                    gather()
                    mm(cols, w, out=acc)
                    epi()
            return run

        def run_blocks():
            for gather, cols, acc, epi in calls:
                if gather is not None:
                    gather()
                mm(cols, w, out=acc)
                epi()
        return run_blocks
    return Spec(label, nodes, ins, (out_tid,), build, pack, tuple(scratch), inplace=inplace, gemm_mnk=m * k * n_out)


def fc_chain_spec(label, nodes, x_tid, out_tid, m: int, k0: int, width: int, pack, mnk: int) -> Spec:
    """Small FULLY_CONNECTED layers in one numba call (jit.fc_chain)."""
    def build(a, s, _p, p):
        x = a[x_tid].reshape(m, k0)
        out = a[out_tid]
        return jit.bind(jit.fc_chain, x, p["params"], p["meta"], s[0], out)
    return Spec(label, nodes, (x_tid,), (out_tid,), build, pack, scratch=(((2, m * width), F32),), gemm_mnk=mnk)


def _gather_rows(x: np.ndarray, cols: np.ndarray, g: Geometry, r0: int, r1: int):
    return jit.bind(jit.im2col, x.reshape(-1), g.h, g.w, g.c, cols.reshape(-1), g.kh, g.kw, g.sh, g.sw,
                    g.dh, g.dw, g.pt, g.pl, g.oh, g.ow, r0, r1)


def _gather(x: np.ndarray, cols: np.ndarray, g: Geometry):
    """The closure that fills `cols` (M, KH*KW*C) from x (NHWC) for geometry g."""
    if g.pointwise:  # 1x1 with a stride: a strided copy
        src = x[:, ::g.sh, ::g.sw, :][:, :g.oh, :g.ow, :]
        dst = cols.reshape(g.n, g.oh, g.ow, g.c)
        return lambda: np.copyto(dst, src)
    if jit.AVAILABLE:
        return _gather_rows(x, cols, g, 0, g.n * g.oh)
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


def dw_pack(w: np.ndarray, b: np.ndarray | None, alpha: np.ndarray | None, g: Geometry, r16) -> dict:
    """Taps tiled to a block of pixels: wt (KH*KW, block*C), bias and alpha likewise, so one
    tap is a contiguous multiply over each block of an output row."""
    c = g.c
    k = dw_block(g)
    taps = r16(np.asarray(w, F32).reshape(g.kh * g.kw, 1, c))
    out = {"wt": np.ascontiguousarray(np.broadcast_to(taps, (g.kh * g.kw, k, c)).reshape(g.kh * g.kw, k * c)),
           "bt": tile_row(r16(b) if b is not None else np.zeros(c, F32), k)}
    if alpha is not None:
        out["at"] = tile_row(r16(alpha), k)
    return out


def dw_spec(label, nodes, x_tid, out_tid, g: Geometry, pack, act: Act, act2: Act) -> Spec:
    """DEPTHWISE_CONV_2D (depth multiplier 1) with bias, clamp `act` and activation `act2`."""
    lay = DwLayout.make(g)
    row = g.ow * g.c
    scratch = () if jit.AVAILABLE else (((g.n, g.oh, row), F32),)
    if jit.AVAILABLE and g.kh == g.kw == 1 and g.sh == g.sw == 1 and g.pt == g.pl == 0 and (g.oh, g.ow) == (g.h, g.w):
        def build_1x1(a, _s, _private, p):  # a per-channel scale: no padded copy
            x, out = a[x_tid].reshape(g.n * g.h, row), a[out_tid].reshape(g.n * g.h, row)
            at = p.get("at")
            return jit.bind(jit.dw_1x1, x, p["wt"][0], p["bt"], f32c(act.lo), f32c(act.hi),
                            at if at is not None else np.zeros(p["wt"].shape[1], F32), act2.kind, f32c(act2.lo),
                            f32c(act2.hi), out)
        return Spec(label, nodes, (x_tid,), (out_tid,), build_1x1, pack)  # no in-place: aliasing defeats SIMD

    def build(a, s, private, p):
        x, out = a[x_tid], a[out_tid]
        pbuf = private[0]
        out3 = out.reshape(g.n, g.oh, row)
        wt, bt = p["wt"], p["bt"]
        at = p.get("at")
        lo, hi = f32c(act.lo), f32c(act.hi)
        if jit.AVAILABLE:
            return jit.bind(jit.dw_taps9 if wt.shape[0] == 9 else jit.dw_taps, x.reshape(g.n, g.h, g.w * g.c),
                            g.c, pbuf, g.pt, g.pl, g.sw, wt, bt, lay.phase, lay.rowoff, lay.coloff, g.sh, lo, hi,
                            at if at is not None else np.zeros(wt.shape[1], F32), act2.kind, f32c(act2.lo),
                            f32c(act2.hi), out3)
        return _dw_numpy(x, out3, pbuf, lay, wt, bt, act, Act(act2.lo, act2.hi, act2.kind, at), s[0])
    return Spec(label, nodes, (x_tid,), (out_tid,), build, pack, scratch, private=((lay.shape, F32),))


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
