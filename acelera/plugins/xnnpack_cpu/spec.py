"""Steps of a compiled partition: `Spec` (what one fused group of nodes becomes), `Act`
(fused activations) and the GEMM epilogue shared by the step builders.

A `Spec` says which tensors a step reads and writes, what scratch it needs, which constants
it packs once (GEMM-ready filters, tiled depthwise taps: the weight cache stores these), and
how to build it once the planner has given every tensor a fixed buffer: build returns a
zero-argument closure, a `Native` record or a list of both. All views (im2col sources, tap
windows, 2-D GEMM views) are made at build time; numba work is native records, which run
without Python in between (program.py links runs of them into one call).

Builders compute in float32; `program.py` wraps them for float16 storage.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.native_records import OP_COPY, OP_EPILOGUE, OP_EPILOGUE_ONTO, OP_EPILOGUE_PARTIAL, Native

F32 = np.float32
INF = float("inf")
ACT_BOUNDS = {0: (-INF, INF), 1: (0.0, INF), 2: (-1.0, 1.0), 3: (0.0, 6.0)}
EMPTY = np.zeros(1, F32)

#: a step's node indices; a tensor shape; an operand: a planned tensor's id or a constant array
Nodes = tuple[int, ...]
Shape = Sequence[int]
Operand = int | np.ndarray
#: what Spec.build gets: tensor id -> planned buffer, its scratch and private buffers, packed weights
Arena = Mapping[int, np.ndarray]
Bufs = Sequence[np.ndarray]
Packed = Mapping[str, np.ndarray]
#: what Spec.build returns: a callable, a jit.Native call or a list of them (program.py runs them)
Step = Any


@dataclass
class Spec:
    """One step of a compiled partition, before buffers are assigned."""

    label: str
    nodes: tuple[int, ...]
    ins: tuple[int, ...]  # non-constant tensors read
    outs: tuple[int, ...]  # tensors written
    build: Callable[..., Callable[[], None]] | None  # build(a, scratch, private, packed) -> fn
    pack: Callable[[], dict[str, np.ndarray]] | None = None
    scratch: tuple = ()  # ((shape, dtype), ...): shared with other steps, no contents kept
    private: tuple = ()  # ((shape, dtype), ...): zero-initialised, owned by this step
    inplace: dict[int, int] = field(default_factory=dict)  # out tensor -> input it may overwrite
    alias: bool = False  # outs[0] is a reshaped view of ins[0]: no step at all
    private_out: bool = False  # outs[0] gets its own zeroed buffer (PAD borders stay zero)
    float_io: bool = True  # False: runs on the storage type (quantized kernels, data movement)
    gemm_mnk: int = 0  # M*N*K of its GEMM (decides whether thread limits matter)


CLAMP, PRELU, HSWISH, SIGMOID = 0, 1, 2, 3  # activation kinds (jit._act)
KIND_OF_OP = {"PRELU": PRELU, "HARD_SWISH": HSWISH, "LOGISTIC": SIGMOID}


@dataclass
class Act:
    """An activation: clamp(lo, hi), or PRELU (per-channel `alpha`), HARD_SWISH or LOGISTIC."""

    lo: float = -INF
    hi: float = INF
    kind: int = CLAMP
    alpha: np.ndarray | None = None

    @property
    def trivial(self) -> bool:
        return self.kind == CLAMP and self.lo == -INF and self.hi == INF

    def then_clamp(self, lo: float, hi: float) -> "Act | None":
        if self.kind != CLAMP:
            return None
        nlo, nhi = max(self.lo, lo), min(self.hi, hi)
        return Act(nlo, nhi) if nlo <= nhi else None

    def tiled(self, reps: int) -> "Act":
        return Act(self.lo, self.hi, self.kind, None if self.alpha is None else tile_row(self.alpha, reps))


def f32c(v: float) -> np.float32:
    """An activation bound in float32. An open side stays infinite, as XNNPACK's output_min /
    output_max: a finite FLT_MAX bound would turn +-inf results into +-3.4e38 (NaN passes the
    kernels' min(max(x, lo), hi) either way)."""
    if np.isinf(v):
        return F32(v)
    return F32(np.clip(v, -3.4028234663852886e38, 3.4028234663852886e38))


def clamp_fn(out: np.ndarray, lo: float, hi: float):
    """The cheapest in-place clamp of `out` (or None when there is nothing to do)."""
    if lo == -INF and hi == INF:
        return None
    if hi == INF:
        z = F32(lo)
        return lambda: np.maximum(out, z, out=out)
    if lo == -INF:
        z = F32(hi)
        return lambda: np.minimum(out, z, out=out)
    a, b = F32(lo), F32(hi)
    return lambda: np.clip(out, a, b, out=out)


def seq(*fns):
    fns = tuple(f for f in fns if f is not None)
    if not fns:
        return lambda: None
    if len(fns) == 1:
        return fns[0]
    if len(fns) == 2:
        f, g = fns

        def run2():
            f()
            g()
        return run2

    def run():
        for f in fns:
            f()
    return run


def tile_row(v: np.ndarray, reps: int) -> np.ndarray:
    return np.ascontiguousarray(np.tile(np.asarray(v, F32).reshape(-1), reps))


# --- GEMM epilogue -----------------------------------------------------------------------------

def epilogue(acc: np.ndarray, out: np.ndarray, bias: np.ndarray, act1: Act, res: np.ndarray | None,
             act2: Act, scratch: np.ndarray | None, ow: int = 1):
    """A native step (a closure without numba) computing out = act2(clamp1(acc + bias) [+ res])
    on (M, C) arrays. `acc` is
    `out` itself, except when `out` overwrites the residual (then `res` is `out`); `res` may
    have fewer channels than C (a channel-padded residual). act1 is a clamp.

    Without a partial residual the arrays are viewed as rows of `ow` pixels with bias and
    alpha tiled to match, so the loops are long even for few channels."""
    m, c = out.shape
    partial = res is not None and res.shape[1] != c
    onto = res is not None and np.shares_memory(res, out)
    if m % ow == 0:
        rows = m // ow
        acc, out = acc.reshape(rows, ow * c), out.reshape(rows, ow * c)
        if res is not None:
            res = res.reshape(rows, ow * res.shape[1])
        bias = tile_row(bias, ow)
        act2 = act2.tiled(ow)
        if scratch is not None:
            scratch = scratch.reshape(rows, ow * c)
    else:
        ow = 1
    if not jit.AVAILABLE:
        if partial:
            assert res is not None  # a partial residual is a residual
            out3 = out.reshape(-1, c)
            res = res.reshape(-1, res.size // out3.shape[0])
            return seq(_epilogue_numpy(acc, out, bias, act1, None, Act(), scratch, False),
                       lambda: np.add(out3[:, :res.shape[1]], res, out=out3[:, :res.shape[1]]),
                       act_numpy(out, act2, scratch))
        return _epilogue_numpy(acc, out, bias, act1, res, act2, scratch, onto)
    lo1, hi1, lo2, hi2 = f32c(act1.lo), f32c(act1.hi), f32c(act2.lo), f32c(act2.hi)
    al = act2.alpha if act2.alpha is not None else np.zeros(out.shape[1], F32)
    if onto:
        return Native(OP_EPILOGUE_ONTO, acc, bias, lo1, hi1, al, lo2, hi2, act2.kind, out)
    if partial:
        return Native(OP_EPILOGUE_PARTIAL, out, bias, lo1, hi1, res, ow, al, lo2, hi2, act2.kind)
    r = res if res is not None else EMPTY.reshape(1, 1)
    return Native(OP_EPILOGUE, out, bias, lo1, hi1, r, int(res is not None), al, lo2, hi2, act2.kind)


def _epilogue_numpy(acc, out, bias, act1, res, act2, scratch, onto):
    steps = []
    if onto:  # out holds the residual, acc is a scratch accumulator
        steps += [lambda: np.add(acc, bias, out=acc), clamp_fn(acc, act1.lo, act1.hi),
                  lambda: np.add(out, acc, out=out)]
    else:  # acc is out
        if np.any(bias):
            steps.append(lambda: np.add(out, bias, out=out))
        steps.append(clamp_fn(out, act1.lo, act1.hi))
        if res is not None:
            dst = out if res.shape[1] == out.shape[1] else out[:, :res.shape[1]]
            steps.append(lambda: np.add(dst, res, out=dst))
    steps.append(act_numpy(out, act2, scratch))
    return seq(*steps)


def act_numpy(out: np.ndarray, act: Act, scratch: np.ndarray | None):
    """act applied in place to `out` with numpy (the reference kernels' formulas)."""
    if act.kind == PRELU:
        return prelu_numpy(out, out, act.alpha, scratch)
    if act.kind == HSWISH:
        three, six, z = F32(3), F32(6), F32(0)

        def hswish():
            np.add(out, three, out=scratch)
            np.clip(scratch, z, six, out=scratch)
            np.multiply(scratch, out, out=out)
            np.divide(out, six, out=out)
        return hswish
    if act.kind == SIGMOID:
        one = F32(1)

        def sigmoid():
            np.negative(out, out=out)
            np.exp(out, out=out)
            np.add(out, one, out=out)
            np.reciprocal(out, out=out)
        return sigmoid
    return clamp_fn(out, act.lo, act.hi)


def prelu_numpy(x, out, alpha, tmp):
    """out = min(x, 0) * alpha + max(x, 0), the reference kernel's formula."""
    zero = F32(0)

    def run():
        np.minimum(x, zero, out=tmp)
        np.multiply(tmp, alpha, out=tmp)
        np.maximum(x, zero, out=out)
        np.add(out, tmp, out=out)
    return run


# --- copies -------------------------------------------------------------------------------------

def block_copies(src_shape, dst_shape, begin) -> list[tuple[int, int, int, int, int]]:
    """Copy a C-contiguous array of src_shape into one of dst_shape at index `begin` as runs:
    (src offset, dst offset, run, repeats, dst stride) per group, the source contiguous (a
    group's repeats are consecutive runs of it); trailing dimensions copied whole join the run."""
    nd = len(src_shape)
    if nd == 0:
        return [(0, 0, 1, 1, 1)]
    d = nd - 1
    while d > 0 and src_shape[d] == dst_shape[d] and begin[d] == 0:
        d -= 1
    inner = int(np.prod(dst_shape[d + 1:], dtype=np.int64))
    run = int(src_shape[d]) * inner
    if d == 0:
        return [(0, int(begin[0]) * inner, run, 1, run)]
    reps, dstr = int(src_shape[d - 1]), int(dst_shape[d]) * inner
    out = []
    for idx in np.ndindex(*src_shape[:d - 1]):
        src = int(np.ravel_multi_index(idx, src_shape[:d - 1])) * reps * run if idx else 0
        pos = tuple(int(i) + int(b) for i, b in zip(idx, begin)) + (int(begin[d - 1]), int(begin[d]))
        out.append((src, int(np.ravel_multi_index(pos, dst_shape[:d + 1])) * inner, run, reps, dstr))
    return out


#: a PAD or CONCATENATION with more runs than this copies with numpy
MAX_COPY_GROUPS = 4096


def native_copy(out: np.ndarray, parts: list, lo: float, hi: float):
    """A OP_COPY record: parts are (source array, block_copies groups) pairs."""
    args = []
    n = 0
    for src, groups in parts:
        flat = src.reshape(-1)
        for s0, d0, run, reps, dstr in groups:
            args += [flat[s0:s0 + reps * run], d0, run, reps, run, dstr]
            n += 1
    clamp = not (np.isinf(lo) and np.isinf(hi))
    return Native(OP_COPY, out.reshape(-1), n, *args, f32c(lo), f32c(hi), int(clamp))
