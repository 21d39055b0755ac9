"""A compiled partition: device buffers, kernel launches and the boundary conversions.

A Plan is plain data (numpy arrays, strings, ints), so it can be written to and read from
the serialization cache without pickle: `to_files` gives a JSON header and a dict of arrays
for `np.savez`, `from_files` rebuilds it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Buffer:
    name: str
    nbytes: int
    #: initial content (constants, packed weights, tables, PADV2 fills); None = zeros
    data: np.ndarray | None = None


@dataclass
class Launch:
    kernel: str
    n: int  # work items
    args: tuple  # 4 buffer names (a, b, c, dst); None where unused
    params: np.ndarray  # int32 parameter block
    node: int = -1


@dataclass
class Port:
    """A partition input or output: its tensor, buffer, logical shape, dtype and quantization."""

    tensor: int
    buffer: str | None  # None: a constant input the kernel does not take at invoke
    shape: tuple[int, ...]
    dtype: str
    scale: float = 0.0
    zero_point: int = 0
    #: position among the partition's inputs (inputs only)
    index: int = -1
    #: how the host packs it: "" = the PHWC4 layout, else a weights packer (ops_conv.PACKERS)
    pack: str = ""
    pack_arg: int = 0
    #: the buffer holds float32 although the plan stores half (bool/int32 tensors, outputs kept
    #: in full precision, float32 copies of inputs read exactly); the host packs/reads float32
    float_storage: bool = False
    #: per-channel quantization of a runtime weights input: scales, zero points, axis
    channel_quant: tuple = ()


@dataclass
class Plan:
    half: bool
    buffers: dict[str, Buffer] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    inputs: list[Port] = field(default_factory=list)
    outputs: list[Port] = field(default_factory=list)

    # --- serialization ---------------------------------------------------------------------
    def to_files(self) -> tuple[str, dict[str, np.ndarray]]:
        arrays: dict[str, np.ndarray] = {}
        bufs = []
        for i, b in enumerate(self.buffers.values()):
            key = None
            if b.data is not None:
                key = f"b{i}"
                arrays[key] = b.data
            bufs.append([b.name, b.nbytes, key])
        launches = []
        for i, l in enumerate(self.launches):
            arrays[f"p{i}"] = l.params
            launches.append([l.kernel, l.n, list(l.args), l.node])
        port = lambda p: [p.tensor, p.buffer, list(p.shape), p.dtype, p.scale, p.zero_point,  # noqa: E731
                          p.index, p.pack, p.pack_arg, p.float_storage, list(p.channel_quant)]
        header = {"half": self.half, "buffers": bufs, "launches": launches,
                  "inputs": [port(p) for p in self.inputs], "outputs": [port(p) for p in self.outputs]}
        return json.dumps(header), arrays

    @classmethod
    def from_files(cls, header: str, arrays) -> "Plan":
        h = json.loads(header)
        plan = cls(bool(h["half"]))
        for name, nbytes, key in h["buffers"]:
            plan.buffers[name] = Buffer(name, int(nbytes), None if key is None else np.asarray(arrays[key]))
        for i, (kernel, n, args, node) in enumerate(h["launches"]):
            plan.launches.append(Launch(kernel, int(n), tuple(args), np.asarray(arrays[f"p{i}"], np.int32), int(node)))
        mk = lambda v: Port(int(v[0]), v[1], tuple(v[2]), v[3], float(v[4]), int(v[5]),  # noqa: E731
                            int(v[6]), v[7], int(v[8]), bool(v[9]), tuple(v[10]))
        plan.inputs = [mk(v) for v in h["inputs"]]
        plan.outputs = [mk(v) for v in h["outputs"]]
        return plan
