"""LLVM IR code generation of the int8 kernels (qjit.py): the SIMD choice for the host (`KIND`,
`VL`, `KG`), the tile sizes (`MR`, `NR`), the requantization table (`requant_table`) and its
requantization in vector registers, the GEMM micro-kernel tiles (`_tq*`, `_tile*`) and the
depthwise tap runs (`_dw_run`), as numba intrinsics emitting noinline LLVM functions; plain
numba loops with the same results where the host has no usable SIMD. See qjit.py for the
operand layout."""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from acelera.plugins.xnnpack_cpu.kernel_cache import drop_stale_cache

drop_stale_cache()


def _cpu_features() -> dict[str, bool]:
    """The features numba compiles for: NUMBA_CPU_FEATURES when set (NUMBA_CPU_NAME alone: none
    assumed), else the host's."""
    from numba.core import config

    features = getattr(config, "CPU_FEATURES", None)
    if features:
        return {f[1:]: f[0] == "+" for f in str(features).split(",") if f[:1] in "+-"}
    if getattr(config, "CPU_NAME", None):
        return {}
    try:
        import llvmlite.binding as llb

        return dict(llb.get_host_cpu_features())
    except Exception:  # pragma: no cover - llvmlite always answers on supported hosts
        return {}


def _simd() -> tuple[str, int, int, str]:
    """(kind, int32 lanes, products per lane and group KG, LLVM intrinsic) numba may use."""
    feats = _cpu_features()
    if feats.get("avx512f") and feats.get("avx512bw") and feats.get("avx512vnni"):
        return "vnni", 16, 4, "llvm.x86.avx512.vpdpbusd.512"
    if feats.get("avx512f") and feats.get("avx512bw"):
        return "pmaddwd512", 16, 2, "llvm.x86.avx512.pmaddw.d.512"
    if feats.get("avx2"):
        return "pmaddwd256", 8, 2, "llvm.x86.avx2.pmadd.wd"
    return "portable", 0, 2, ""


KIND, VL, KG, _DOT = _simd()
NV = 2  # vectors per tile row
#: rows of a GEMM tile (output pixels or FULLY_CONNECTED batch rows): 8 with AVX-512's 32
#: vector registers, else 4; MR1 for single rows
MR = 8 if VL == 16 else 4
MR1 = 1
#: output channels of a packed filter block
NR = NV * (VL or 8)

_inline = njit(inline="always", nogil=True, boundscheck=False)


# --- requantization in vector registers ---------------------------------------------------------
# A requantization table is int32 (6, channels, padded to whole vectors): per channel bias,
# multiplier, rounding mask (2**R - 1), half mask, right shift R, left shift (`requant_table`).

_I8, _I16, _I32, _I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
TABLE_ROWS = 6


def requant_table(bias: np.ndarray, multiplier: np.ndarray, shift: np.ndarray, reps: int = 1) -> np.ndarray:
    """The requantization table of `_emit_requant` (bias wrapped to int32), tiled `reps` times and
    padded with zeros to whole vectors."""
    shift = np.asarray(shift, np.int64)
    r = np.maximum(-shift, 0)
    mask = (np.int64(1) << r) - 1
    rows = np.stack([np.asarray(bias, np.int64).astype(np.int32).astype(np.int64),
                     np.asarray(multiplier, np.int64), mask, mask >> 1, r, np.maximum(shift, 0)])
    rows = np.tile(rows, (1, reps))
    width = rows.shape[1] + 2 * (VL or 8)  # slack: whole vectors past the last column
    out = np.zeros((TABLE_ROWS, width), np.int32)
    out[:, :rows.shape[1]] = rows.astype(np.int32)
    return out


def _splat(builder, value, vt):
    undef = ir.Constant(vt, None)
    v = builder.insert_element(undef, value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, undef, ir.Constant(ir.VectorType(_I32, vt.count), [0] * vt.count))


def _emit_requant(builder, acc, tb, zp, lo, hi):
    """<n x i32> accumulators -> <n x i8>: gemmlowp MultiplyByQuantizedMultiplier of
    int32(acc + bias) (SaturatingRoundingDoublingHighMul as floor((a*m + 2**30) / 2**31), the
    reference's form for multipliers that are not INT32_MIN, then RoundingDivideByPOT), clamped
    to [lo, hi] = [qmin - zp, qmax - zp] before adding zp, so nothing wraps.

    The 64-bit products are formed for the even and the odd lanes apart (x86 pmuldq reads the
    low half of each 64-bit lane): floor(p / 2**31) of an even lane is the low half of
    p >> 31, of an odd lane the high half of p << 1."""
    vi32 = acc.type
    n = vi32.count
    vi64 = ir.VectorType(_I64, n // 2)
    a = builder.shl(builder.add(acc, tb[0]), tb[5])  # left shifts are 0..31
    a64, m64 = builder.bitcast(a, vi64), builder.bitcast(tb[1], vi64)
    c32 = ir.Constant(vi64, [32] * (n // 2))
    nudge = ir.Constant(vi64, [1 << 30] * (n // 2))
    even = builder.mul(builder.ashr(builder.shl(a64, c32), c32), builder.ashr(builder.shl(m64, c32), c32))
    odd = builder.mul(builder.ashr(a64, c32), builder.ashr(m64, c32))
    even = builder.bitcast(builder.lshr(builder.add(even, nudge), ir.Constant(vi64, [31] * (n // 2))), vi32)
    odd = builder.bitcast(builder.shl(builder.add(odd, nudge), ir.Constant(vi64, [1] * (n // 2))), vi32)
    t = builder.shuffle_vector(even, odd, ir.Constant(ir.VectorType(_I32, n), [i if i % 2 == 0 else n + i
                                                                              for i in range(n)]))
    rem = builder.and_(t, tb[2])
    thr = builder.add(tb[3], builder.lshr(t, ir.Constant(vi32, [31] * n)))
    r = builder.ashr(t, tb[4])
    r = builder.add(r, builder.zext(builder.icmp_signed(">", rem, thr), vi32))
    r = builder.select(builder.icmp_signed("<", r, lo), lo, r)
    r = builder.select(builder.icmp_signed(">", r, hi), hi, r)
    return builder.trunc(builder.add(r, zp), ir.VectorType(_I8, n))


def _data(context, builder, ty, value, elem=None):
    ptr = cgutils.create_struct_proxy(ty)(context, builder, value=value).data
    return builder.bitcast(ptr, (elem or _I8).as_pointer())


def _table_vectors(builder, tp, t_off, t_stride, col, vi32):
    """The TABLE_ROWS vectors of the table at channel t_off + col."""
    out = []
    for i in range(TABLE_ROWS):
        off = builder.add(builder.add(t_off, builder.mul(t_stride, ir.Constant(_I64, i))), ir.Constant(_I64, col))
        out.append(builder.load(builder.bitcast(builder.gep(tp, [off]), vi32.as_pointer()), align=4))
    return out


# --- the GEMM micro-kernel --------------------------------------------------------------------

def _function(module, name: str, argtys: list, body):
    """The module's noinline function `name` (void, arguments `argtys`), its body built by
    body(builder, args) the first time: call sites stay small and the body is optimized once."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), argtys), name=name)
        fn.linkage = "linkonce_odr"
        fn.attributes.add("noinline")
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        body(builder, list(fn.args))
        builder.ret_void()
    return fn



def _call_codegen(fname: str, argtys: list, body):
    """numba intrinsic codegen calling the LLVM function `fname` (built by `body`) with the
    intrinsic's arguments: arrays as data pointers, scalars cast to the declared int width."""
    def codegen(context, builder, signature, args):
        sa = signature.args
        vals = []
        for i, ty in enumerate(argtys):
            if isinstance(ty, ir.PointerType):
                vals.append(_data(context, builder, sa[i], args[i], ty.pointee))
            else:
                vals.append(context.cast(builder, args[i], sa[i], types.int64 if ty == _I64 else types.int32))
        builder.call(_function(builder.module, fname, argtys, body), vals)
        return context.get_dummy_value()
    return codegen

def _make_tile(rows: int, requant: bool, nv: int = NV):
    """Products of the `rows` input rows of a (uint8 bytes at a_off + r*a_stride; flip != 0:
    int8 bytes, 128 added) with the first nv*VL channels of the packed filter block at b_off,
    over `groups` groups of KG, in int32 lanes that wrap like the C++ accumulator. Without
    `requant` the int32 sums go to out[out_off + r*out_stride + j] (an int32 array),
    j < nv*VL; with it they are requantized with the table columns t_off + j and stored as
    int8."""
    lanes = VL
    vi32 = ir.VectorType(_I32, lanes)
    vi16 = ir.VectorType(_I16, 2 * lanes)
    vi8 = ir.VectorType(_I8, 2 * lanes)
    name, vnni = _DOT, KG == 4
    p8, p32 = _I8.as_pointer(), _I32.as_pointer()
    argtys = [p8, _I64, _I64, _I32, p8, _I64, _I64, p32, _I64, _I64, p8, _I64, _I64, _I32, _I32, _I32]
    fname = f"acelera_qjit_tile_{KIND}_{rows}_{nv}_{int(requant)}"

    def body(builder, args):
        ap, a_off, a_stride, flip, bp, b_off, groups, tp, t_off, t_stride, op, out_off, out_stride = args[:13]
        zp, lo, hi = [_splat(builder, v, vi32) for v in args[13:]]
        if not requant:
            op = builder.bitcast(op, p32)
        flip = builder.select(builder.icmp_signed("!=", flip, ir.Constant(_I32, 0)),
                              ir.Constant(_I32, 0x80808080 - (1 << 32)), ir.Constant(_I32, 0))
        flip2 = builder.trunc(flip, _I16)
        if vnni:
            dot = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vi32, [vi32, vi32, vi32]), name)
        else:
            dot = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vi32, [vi16, vi16]), name)
        zero = ir.Constant(vi32, [0] * lanes)
        accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(nv)] for _ in range(rows)]
        arows = [builder.gep(ap, [builder.add(a_off, builder.mul(a_stride, ir.Constant(_I64, r)))])
                 for r in range(rows)]
        bbase = builder.gep(bp, [b_off])
        with cgutils.for_range(builder, groups) as loop:
            k = loop.index
            ws = []
            for v in range(nv):
                off = builder.add(builder.mul(k, ir.Constant(_I64, KG * NR)), ir.Constant(_I64, KG * lanes * v))
                if vnni:
                    ws.append(builder.load(builder.bitcast(builder.gep(bbase, [off]), vi32.as_pointer()), align=1))
                else:
                    wv = builder.load(builder.bitcast(builder.gep(bbase, [off]), vi8.as_pointer()), align=1)
                    ws.append(builder.sext(wv, vi16))
            koff = builder.mul(k, ir.Constant(_I64, KG))
            for r in range(rows):
                src = builder.gep(arows[r], [koff])
                if vnni:
                    x = builder.xor(builder.load(builder.bitcast(src, p32), align=1), flip)
                else:
                    x2 = builder.xor(builder.load(builder.bitcast(src, _I16.as_pointer()), align=1), flip2)
                    x2 = builder.zext(builder.bitcast(x2, ir.VectorType(_I8, 2)), ir.VectorType(_I16, 2))
                    x = builder.bitcast(x2, _I32)
                xv = _splat(builder, x, vi32)
                for v in range(nv):
                    if vnni:
                        builder.store(builder.call(dot, [builder.load(accs[r][v]), xv, ws[v]]), accs[r][v])
                    else:
                        prod = builder.call(dot, [builder.bitcast(xv, vi16), ws[v]])
                        builder.store(builder.add(builder.load(accs[r][v]), prod), accs[r][v])
        tabs = [_table_vectors(builder, tp, t_off, t_stride, v * lanes, vi32) for v in range(nv)] if requant else []
        for r in range(rows):
            row = builder.gep(op, [builder.add(out_off, builder.mul(out_stride, ir.Constant(_I64, r)))])
            for v in range(nv):
                dst = builder.gep(row, [ir.Constant(_I64, v * lanes)])
                acc = builder.load(accs[r][v])
                if requant:
                    q = _emit_requant(builder, acc, tabs[v], zp, lo, hi)
                    builder.store(q, builder.bitcast(dst, ir.VectorType(_I8, lanes).as_pointer()), align=1)
                else:
                    builder.store(acc, builder.bitcast(dst, vi32.as_pointer()), align=4)

    @intrinsic
    def tile(typingctx, a, a_off, a_stride, flip, b, b_off, groups, tab, t_off, t_stride, out, out_off,
             out_stride, zp, lo, hi):
        sig = types.void(a, a_off, a_stride, flip, b, b_off, groups, tab, t_off, t_stride, out, out_off,
                         out_stride, zp, lo, hi)

        return sig, _call_codegen(fname, argtys, body)
    return tile


def _make_dw_run():
    """Depthwise taps fused with the requantization: for j < 2*VL*nvec,
    out[out_off + j] = requant(sum over t < taps of int16(xp[offs[t] + j] * wt[t*w_stride + j]))
    with table columns j (every product of x - zp and an int8 filter value fits int16; the sum
    is int32)."""
    lanes = 2 * VL
    vi16 = ir.VectorType(_I16, lanes)
    vi32 = ir.VectorType(_I32, lanes)
    hv32 = ir.VectorType(_I32, VL)
    p16, p64, p32, p8 = _I16.as_pointer(), _I64.as_pointer(), _I32.as_pointer(), _I8.as_pointer()
    argtys = [p16, p64, _I64, p16, _I64, p32, _I64, p8, _I64, _I64, _I32, _I32, _I32]
    fname = f"acelera_qjit_dw_{KIND}"

    def body(builder, args):
        xp, op, taps, wp, w_stride, tp, t_stride, outp, out_off, nvec = args[:10]
        zp, lo, hi = [_splat(builder, v, hv32) for v in args[10:]]
        sums = cgutils.alloca_once(builder, vi32)
        halves = [ir.Constant(ir.VectorType(_I32, VL), list(range(h * VL, (h + 1) * VL))) for h in (0, 1)]
        with cgutils.for_range(builder, nvec) as outer:
            base = builder.mul(outer.index, ir.Constant(_I64, lanes))
            builder.store(ir.Constant(vi32, [0] * lanes), sums)
            with cgutils.for_range(builder, taps) as inner:
                t = inner.index
                off = builder.load(builder.gep(op, [t]))
                xv = builder.load(builder.bitcast(builder.gep(xp, [builder.add(off, base)]), vi16.as_pointer()),
                                  align=2)
                woff = builder.add(builder.mul(t, w_stride), base)
                wv = builder.load(builder.bitcast(builder.gep(wp, [woff]), vi16.as_pointer()), align=2)
                builder.store(builder.add(builder.load(sums), builder.sext(builder.mul(xv, wv), vi32)), sums)
            acc = builder.load(sums)
            for h in (0, 1):
                part = builder.shuffle_vector(acc, acc, halves[h])
                col = builder.add(base, ir.Constant(_I64, h * VL))
                q = _emit_requant(builder, part, _table_vectors(builder, tp, col, t_stride, 0, hv32), zp, lo, hi)
                dst = builder.gep(outp, [builder.add(out_off, col)])
                builder.store(q, builder.bitcast(dst, ir.VectorType(_I8, VL).as_pointer()), align=1)

    @intrinsic
    def dw_run(typingctx, xp, offs, taps, wt, w_stride, tab, t_stride, out, out_off, nvec, zp, lo, hi):
        sig = types.void(xp, offs, taps, wt, w_stride, tab, t_stride, out, out_off, nvec, zp, lo, hi)

        return sig, _call_codegen(fname, argtys, body)
    return dw_run


@_inline
def _dw_run_portable(xp, offs, taps, wt, w_stride, tab, t_stride, out, out_off, nvec, zp, lo, hi):
    for j in range(nvec * 16):
        acc = np.int32(0)
        for t in range(taps):
            acc = np.int32(acc + np.int32(np.int16(xp[offs[t] + j] * wt[t * w_stride + j])))
        out[out_off + j] = _requant_scalar(acc, tab, j, t_stride, zp, lo, hi)


@_inline
def _requant_scalar(a, tab, t, t_stride, zp, lo, hi):
    """_emit_requant of one value (the portable kernels)."""
    a = np.int32(np.int64(np.int32(a + tab[t])) << tab[5 * t_stride + t])
    v = np.int64(np.int32((np.int64(a) * tab[t_stride + t] + (1 << 30)) >> 31))
    rem = v & tab[2 * t_stride + t]
    thr = tab[3 * t_stride + t] + (1 if v < 0 else 0)
    v = (v >> tab[4 * t_stride + t]) + (1 if rem > thr else 0)
    return min(max(v, lo), hi) + zp


def _make_tile_portable(rows: int, requant: bool, nv: int = NV):
    cols = nv * (VL or 8)

    @_inline
    def tile(a, a_off, a_stride, flip, b, b_off, groups, tab, t_off, t_stride, out, out_off, out_stride, zp, lo,
             hi):
        add = 128 if flip else 0
        acc = np.zeros(cols, np.int32)
        for r in range(rows):
            acc[:] = 0
            ar = a_off + r * a_stride
            for kk in range(groups):
                wb = b_off + kk * KG * NR
                for t in range(KG):
                    u = np.int32(np.uint8(a[ar + KG * kk + t] + add))
                    for j in range(cols):
                        acc[j] = np.int32(acc[j] + u * np.int32(b[wb + KG * j + t]))
            base = out_off + r * out_stride
            for j in range(cols):
                if requant:
                    out[base + j] = _requant_scalar(acc[j], tab, t_off + j, t_stride, zp, lo, hi)
                else:
                    out[base + j] = acc[j]
    return tile


_make = _make_tile if VL else _make_tile_portable
# GEMM tiles: for CONV_2D requantized, MR or MR1 rows, NR or NR/2 channels (_h); for
# FULLY_CONNECTED the int32 sums of MR or MR1 rows.
_tq, _tq_h, _tq1, _tq1_h = _make(MR, True), _make(MR, True, 1), _make(MR1, True), _make(MR1, True, 1)
_tile, _tile1 = _make(MR, False), _make(MR1, False)
_dw_run = _make_dw_run() if VL else _dw_run_portable
#: int16 values a depthwise tap vector covers (buffers the taps read have this much slack)
TAP_VL = 2 * VL if VL else 16
