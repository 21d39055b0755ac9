"""Buffer planning for a compiled partition: every tensor gets a fixed buffer before any step is
built. Lifetimes are known, so buffers are shared (greedy best fit), element-wise steps may
write over an input that dies there, and RESHAPE outputs are views of their input's buffer.
Scratch (per-step temporaries) is one arena slot per request index, shared by all steps."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acelera.plugins.xnnpack_cpu.spec import Spec

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)


@dataclass
class Plan:
    arrays: dict[int, np.ndarray]  # tensor -> storage view
    nbytes: int  # total bytes of planned buffers


def storage_dtype(t, fp16: bool) -> np.dtype:
    dt = np.dtype(t.dtype)
    return F16 if fp16 and dt == F32 else dt


def plan_buffers(specs: list[Spec], tensors: dict, ext_inputs: list[int], outputs: frozenset, fp16: bool) -> Plan:
    """Greedy lifetime-based assignment of byte buffers to tensors (aliases share roots)."""
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
    bufs = [np.empty(max(c, 1), np.uint8) for c in caps]
    arrays: dict[int, np.ndarray] = {}
    priv_bufs = {r: np.zeros(max(nb, 1), np.uint8) for r, nb in private.items()}
    for t, tt in tensors.items():
        r = root(t)
        dt = storage_dtype(tt, fp16)
        n = int(np.prod(tt.shape, dtype=np.int64))
        if r in owner:
            base = bufs[owner[r]]
        elif r in priv_bufs:
            base = priv_bufs[r]
        else:
            continue
        arrays[t] = base[:n * dt.itemsize].view(dt).reshape(tt.shape)
    return Plan(arrays, sum(caps) + sum(private.values()))


class Scratch:
    """Per-step temporaries: request k of every step shares one arena slot."""

    def __init__(self):
        self.sizes: list[int] = []

    def reserve(self, requests) -> None:
        for k, (shape, dt) in enumerate(requests):
            nb = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            if k == len(self.sizes):
                self.sizes.append(nb)
            else:
                self.sizes[k] = max(self.sizes[k], nb)

    def allocate(self) -> None:
        self.slots = [np.empty(max(nb, 1), np.uint8) for nb in self.sizes]

    def views(self, requests) -> list[np.ndarray]:
        out = []
        for k, (shape, dt) in enumerate(requests):
            dt = np.dtype(dt)
            n = int(np.prod(shape, dtype=np.int64))
            out.append(self.slots[k][:n * dt.itemsize].view(dt).reshape(shape))
        return out
