"""The LSTM kernels' shared description of one direction: input tensor indices (of LSTM,
UNIDIRECTIONAL_SEQUENCE_LSTM and both directions of BIDIRECTIONAL_SEQUENCE_LSTM), the options
every variant reads, and Spec, the shapes and types checked as LiteRT's Prepare checks them.

Mirrors tflite/kernels/lstm_shared.h (tensor indices), the CheckInputTensorDimensions /
Prepare functions of lstm.cc, unidirectional_sequence_lstm.cc and bidirectional_sequence_lstm.cc.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acelera.core.kernels.common import check_type
from acelera.core.kernels.registry import NodeContext
from acelera.core.kernels.rnn import fused_activation
from acelera.core.model import Tensor

# Input tensor indices of the full kernel (tflite/kernels/lstm_shared.h).
INPUT = 0
I2I, I2F, I2C, I2O = 1, 2, 3, 4
R2I, R2F, R2C, R2O = 5, 6, 7, 8
C2I, C2F, C2O = 9, 10, 11
BI, BF, BC, BO = 12, 13, 14, 15
PROJ_W, PROJ_B = 16, 17
OUT_STATE, CELL_STATE = 18, 19
LN_I, LN_F, LN_C, LN_O = 20, 21, 22, 23

SIGMOID = 6  # kTfLiteActSigmoid: a fused activation only the LSTMs take


def activation_and_clips(node: NodeContext) -> tuple[int, np.float32, np.float32]:
    """The options every LSTM kernel variant reads: fused activation, cell and projection clips."""
    opts = node.options
    cell_clip = np.float32(opts.get("cell_clip", 0.0))
    proj_clip = np.float32(opts.get("proj_clip", 0.0))
    if not (cell_clip >= 0 and proj_clip >= 0):
        raise node.unsupported("cell_clip and proj_clip must be >= 0")
    return fused_activation(opts), cell_clip, proj_clip


# --- one LSTM direction ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """Input indices of one direction's tensors (gates in the order i, f, c, o)."""

    w: tuple[int, ...]
    r: tuple[int, ...]
    peep: tuple[int, ...]  # i, f, o
    b: tuple[int, ...]
    proj_w: int
    proj_b: int
    h: int
    c: int
    ln: tuple[int, ...] | None = None
    aux_w: tuple[int, ...] | None = None


SEQ_LAYOUT = Layout((I2I, I2F, I2C, I2O), (R2I, R2F, R2C, R2O), (C2I, C2F, C2O), (BI, BF, BC, BO),
                     PROJ_W, PROJ_B, OUT_STATE, CELL_STATE, (LN_I, LN_F, LN_C, LN_O))
BIDI_FW = Layout((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15), 16, 17, 35, 36, None,
                  (40, 41, 42, 43))
BIDI_BW = Layout((18, 19, 20, 21), (22, 23, 24, 25), (26, 27, 28), (29, 30, 31, 32), 33, 34, 37, 38, None,
                  (44, 45, 46, 47))
GATES = "ifco"


class Spec:
    """One direction's shapes, types and options, checked as LiteRT's Prepare does.

    mode is "float", "hybrid" (int8/uint8 weights, float activations) or "integer" (int8
    activations, the 8x8_16 kernel)."""

    def __init__(self, node: NodeContext, layout: Layout, mode: str, n_input: int, n_batch: int,
                 *, sequence: bool, use_ln: bool, aux_size: int | None = None):
        self.layout, self.mode = layout, mode
        opts = node.options
        self.act, self.cell_clip, self.proj_clip = activation_and_clips(node)
        self.asymmetric = bool(opts.get("asymmetric_quantize_inputs", False))
        w_o = node.input(layout.w[3])
        r_o = node.input(layout.r[3])
        if w_o is None or r_o is None:
            raise node.unsupported("missing input_to_output or recurrent_to_output weights")
        if len(w_o.shape) != 2 or w_o.shape[1] != n_input:
            raise node.unsupported(f"input_to_output_weights must be [n_cell, {n_input}]")
        n_cell = w_o.shape[0]
        wtype = {"float": ("FLOAT32",), "hybrid": ("INT8", "UINT8"), "integer": ("INT8",)}[mode]
        self.cifg = node.input(layout.w[0]) is None
        if self.cifg != (node.input(layout.r[0]) is None):
            raise node.unsupported("input gate weights must be all present or all absent (CIFG)")
        self.gates = GATES[1:] if self.cifg else GATES
        self.diag: dict[str, bool] = {}
        n_output = None
        for g in self.gates:
            k = GATES.index(g)
            w, r = node.input(layout.w[k]), node.input(layout.r[k])
            if w is None or r is None:
                raise node.unsupported(f"missing weights of gate {g}")
            if tuple(w.shape) != (n_cell, n_input):
                raise node.unsupported(f"input weights of gate {g} must be [{n_cell}, {n_input}]")
            check_type(node, w, wtype, f"gate {g} input weights")
            if w.type != w_o.type:
                raise node.unsupported("all weights must have the same type")
            if w.sparsity is not None or r.sparsity is not None:
                raise node.unsupported("sparse LSTM weights are not supported")
            diag = len(r.shape) == 1
            if diag and not (sequence and mode != "integer"):
                raise node.unsupported("diagonal recurrent weights need a float or hybrid sequence LSTM")
            if diag:
                check_type(node, r, ("FLOAT32",), f"gate {g} diagonal recurrent weights")
                if r.shape[0] != n_cell:
                    raise node.unsupported(f"diagonal recurrent weights of gate {g} must have {n_cell} entries")
            else:
                if len(r.shape) != 2 or r.shape[0] != n_cell:
                    raise node.unsupported(f"recurrent weights of gate {g} must be [{n_cell}, n_output]")
                if r.type != w_o.type:
                    raise node.unsupported("all weights must have the same type")
            self.diag[g] = diag
        n_output = r_o.shape[0] if self.diag["o"] else r_o.shape[1]
        for g in self.gates:
            r = node.input(layout.r[GATES.index(g)])
            assert r is not None  # checked above
            if not self.diag[g] and r.shape[1] != n_output:
                raise node.unsupported(f"recurrent weights of gate {g} must be [{n_cell}, {n_output}]")
        if any(self.diag.values()) and n_output != n_cell:
            raise node.unsupported("diagonal recurrent weights need n_output == n_cell")
        self.n_cell, self.n_output, self.n_input = n_cell, n_output, n_input
        peep = [node.input(i) for i in layout.peep]
        has = [p is not None for p in peep]
        if not ((has[0] or self.cifg) and has[1] and has[2]) and any(has):
            raise node.unsupported("peephole weights must be all present or all absent")
        self.peephole = has[2]
        peep_type = ("INT16",) if mode == "integer" else wtype
        for p in peep:
            if p is not None:
                if tuple(p.shape) != (n_cell,):
                    raise node.unsupported(f"peephole weights must be [{n_cell}]")
                check_type(node, p, peep_type, "peephole weights")
        bias_type = ("INT32",) if mode == "integer" else ("FLOAT32",)
        if self.cifg and node.input(layout.b[0]) is not None:
            raise node.unsupported("CIFG LSTM must not have an input gate bias")
        for g in self.gates:
            b = node.input(layout.b[GATES.index(g)])
            if b is None or tuple(b.shape) != (n_cell,):
                raise node.unsupported(f"bias of gate {g} must be [{n_cell}]")
            check_type(node, b, bias_type, f"gate {g} bias")
        pw, pb = node.input(layout.proj_w), node.input(layout.proj_b)
        if pw is not None:
            if tuple(pw.shape) != (n_output, n_cell):
                raise node.unsupported(f"projection weights must be [{n_output}, {n_cell}]")
            check_type(node, pw, wtype, "projection weights")
        if pb is not None:
            if pw is None or tuple(pb.shape) != (n_output,):
                raise node.unsupported("projection bias needs projection weights and must be [n_output]")
            check_type(node, pb, bias_type, "projection bias")
        if pw is None and n_output != n_cell:
            raise node.unsupported("without projection n_output must equal n_cell")
        self.use_proj = pw is not None
        self.use_ln = use_ln
        if use_ln and mode == "integer" and n_cell == 0:
            raise node.unsupported("the integer layer norm divides by n_cell = 0")
        if use_ln:
            assert layout.ln is not None  # only the sequence layout has layer norm inputs
            for g in GATES:
                t = node.input(layout.ln[GATES.index(g)])
                if g == "i" and self.cifg:
                    if t is not None:
                        raise node.unsupported("CIFG LSTM must not have input layer norm coefficients")
                    continue
                if t is None or tuple(t.shape) != (n_cell,):
                    raise node.unsupported(f"layer norm coefficients of gate {g} must be [{n_cell}]")
                check_type(node, t, ("INT16",) if mode == "integer" else ("FLOAT32",), "layer norm coefficients")
        self.aux_size = aux_size
        if aux_size is not None:
            assert layout.aux_w is not None  # only the bidirectional layouts have aux inputs
            for g in self.gates:
                t = node.input(layout.aux_w[GATES.index(g)])
                if t is None or tuple(t.shape) != (n_cell, aux_size):
                    raise node.unsupported(f"aux weights of gate {g} must be [{n_cell}, {aux_size}]")
                if t.type != w_o.type:
                    raise node.unsupported("aux weights must have the type of the other weights")
        state_types = ("INT8", "INT16") if mode == "integer" else ("FLOAT32", "FLOAT32")
        for idx, n, what, dtype in ((layout.h, n_output, "output state", state_types[0]),
                                    (layout.c, n_cell, "cell state", state_types[1])):
            t = node.input(idx)
            if t is None or not t.is_variable:
                raise node.unsupported(f"the {what} must be a variable tensor")
            check_type(node, t, (dtype,), what)
            if int(np.prod(t.shape, dtype=np.int64)) != n_batch * n:
                raise node.unsupported(f"the {what} must hold {n_batch * n} values")

    def tensor(self, node: NodeContext, field: str, g: str = "") -> Tensor | None:
        """The tensor of a Layout field (of gate g for the per-gate fields)."""
        idx = getattr(self.layout, field)
        if isinstance(idx, tuple):
            idx = idx["ifo".index(g)] if field == "peep" else idx[GATES.index(g)]
        return node.input(idx)


def args_of(args, indices) -> tuple:
    """The run() arguments at `indices` (None for absent or missing inputs)."""
    return tuple(args[i] if i is not None and i < len(args) else None for i in indices)
