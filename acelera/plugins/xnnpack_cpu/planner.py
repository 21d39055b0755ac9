"""Buffer planning for a compiled partition: every tensor gets a fixed buffer before any step is
built. Lifetimes are known, so buffers are shared (greedy best fit), element-wise steps may
write over an input that dies there, and RESHAPE outputs are views of their input's buffer.
Scratch (per-step temporaries) is one slot per request index, shared by all steps.

Everything lives in one `Arena`: tensor buffers, scratch slots, zero-initialised private
buffers and the packed weights, each 64-byte aligned, so a native step addresses all of it
by float offsets into a single float32 view (jit.run_native)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acelera.plugins.xnnpack_cpu.spec import Spec

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)


ALIGN = 64


class Arena:
    """One zero-initialised byte buffer carved into aligned regions: reserve() every region
    first, allocate() once, then take views of the regions."""

    def __init__(self):
        self.size = 0
        self.buf: np.ndarray | None = None

    def reserve(self, nbytes: int) -> int:
        off = self.size
        self.size += -(-max(int(nbytes), 1) // ALIGN) * ALIGN
        return off

    def allocate(self) -> None:
        raw = np.zeros(self.size + ALIGN, np.uint8)
        start = (-raw.ctypes.data) % ALIGN
        self.buf = raw[start:start + self.size]

    @property
    def data(self) -> np.ndarray:
        """The allocated buffer (views of the regions are taken after allocate())."""
        assert self.buf is not None, "Arena.allocate() has not run"
        return self.buf

    def view(self, off: int, shape, dtype) -> np.ndarray:
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64))
        return self.data[off:off + n * dt.itemsize].view(dt).reshape(shape)

    @property
    def f32(self) -> np.ndarray:
        """The whole arena as float32 (what native steps index)."""
        return self.data.view(np.float32)

    def offset(self, a: np.ndarray) -> int:
        """The float32 offset of a C-contiguous view into the arena."""
        base = self.data.ctypes.data
        addr = a.ctypes.data
        if not (base <= addr and addr + a.nbytes <= base + self.size) or (addr - base) % 4:
            raise ValueError("array is not a view into the arena")
        if not a.flags.c_contiguous:
            raise ValueError("a native step needs a C-contiguous view")
        return (addr - base) // 4


@dataclass
class Plan:
    arrays: dict[int, np.ndarray]  # tensor -> storage view
    nbytes: int  # total bytes of planned buffers


def storage_dtype(t, fp16: bool) -> np.dtype:
    dt = np.dtype(t.dtype)
    return F16 if fp16 and dt == F32 else dt


def plan_buffers(specs: list[Spec], tensors: dict, ext_inputs: list[int], outputs: frozenset, fp16: bool,
                 arena: Arena):
    """Greedy lifetime-based assignment of byte buffers to tensors (aliases share roots).
    Reserves the buffers in `arena`; returns a function giving the Plan once it is allocated."""
    parent: dict[int, int] = {}

    def root(t):
        while parent.get(t, t) != t:
            t = parent[t]
        return t
    for s in specs:
        if s.alias:
            parent[s.outs[0]] = root(s.ins[0])
    INF = len(specs) + 1
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for t in ext_inputs:
        first[root(t)] = -1
    for i, s in enumerate(specs):
        for t in s.outs:
            first.setdefault(root(t), i)
        for t in s.ins + s.outs:
            r = root(t)
            last[r] = max(last.get(r, -1), i)
    for t in outputs:
        last[root(t)] = INF

    def nbytes(t):
        tt = tensors[t]
        return int(np.prod(tt.shape, dtype=np.int64)) * storage_dtype(tt, fp16).itemsize

    caps: list[int] = []
    private: dict[int, int] = {}
    owner: dict[int, int] = {}  # root -> buffer id
    free: list[int] = []

    def take(need: int) -> int:
        fits = [b for b in free if caps[b] >= need]
        if fits:
            b = min(fits, key=lambda b: caps[b])
        elif free:
            b = max(free, key=lambda b: caps[b])
            caps[b] = need
        else:
            caps.append(need)
            return len(caps) - 1
        free.remove(b)
        return b

    for t in ext_inputs:
        r = root(t)
        if r not in owner:
            owner[r] = take(nbytes(r))
    dying: dict[int, list[int]] = {}
    for r, l in last.items():
        dying.setdefault(l, []).append(r)
    for t in ext_inputs:
        if last.get(root(t), -1) == -1:
            free.append(owner[root(t)])
    for i, s in enumerate(specs):
        if s.alias:
            pass
        else:
            for t in s.outs:
                r = root(t)
                if r in owner or r in private:
                    continue
                if s.private_out:
                    private[r] = nbytes(r)
                    continue
                cand = s.inplace.get(t)
                if cand is not None:
                    rc = root(cand)
                    if (rc in owner and last.get(rc) == i and nbytes(rc) == nbytes(r)
                            and storage_dtype(tensors[rc], fp16) == storage_dtype(tensors[r], fp16)):
                        owner[r] = owner[rc]
                        last[rc] = -2  # handed over to r: freed when r dies
                        continue
                owner[r] = take(nbytes(r))
        for r in dying.get(i, ()):
            if last.get(r) == i and r in owner:
                free.append(owner[r])
    buf_off = [arena.reserve(c) for c in caps]
    priv_off = {r: arena.reserve(nb) for r, nb in private.items()}

    def views() -> Plan:
        arrays: dict[int, np.ndarray] = {}
        for t, tt in tensors.items():
            r = root(t)
            if r in owner:
                off = buf_off[owner[r]]
            elif r in priv_off:
                off = priv_off[r]
            else:
                continue
            arrays[t] = arena.view(off, tt.shape, storage_dtype(tt, fp16))
        return Plan(arrays, sum(caps) + sum(private.values()))
    return views


class Scratch:
    """Per-step temporaries: request k of every step shares one arena slot."""

    def __init__(self, arena: Arena):
        self.arena = arena
        self.sizes: list[int] = []

    def reserve(self, requests) -> None:
        for k, (shape, dt) in enumerate(requests):
            nb = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            if k == len(self.sizes):
                self.sizes.append(nb)
            else:
                self.sizes[k] = max(self.sizes[k], nb)

    def place(self) -> None:
        """Reserve the slots in the arena (after every reserve())."""
        self.slots = [self.arena.reserve(nb) for nb in self.sizes]

    def views(self, requests) -> list[np.ndarray]:
        return [self.arena.view(self.slots[k], shape, dt) for k, (shape, dt) in enumerate(requests)]
