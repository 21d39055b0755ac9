"""LSTM (full and basic kernels), UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM:
float32, hybrid (int8 / uint8 weights on float32 activations) and full-integer.

Follows tflite/kernels/lstm.cc, unidirectional_sequence_lstm.cc, bidirectional_sequence_lstm.cc
and lstm_eval.cc (EvalFloat, EvalHybrid, EvalInteger8x8_16). The registrations and the dispatch
live here; the arithmetic in the sibling modules:

- lstm_spec: tensor indices, options, the per-direction shape and type checks (Spec).
- lstm_float: the float full kernel (EvalFloat), with a fast step loop for the common forms; with
  a NONE cell activation ApplyActivationToVector writes nothing, so the cell gate keeps whatever
  its scratch buffer holds (all-zero input blocks are skipped) and the output uses the cell gate
  instead of the cell state.
- lstm_hybrid: the float / hybrid step the hybrid and bidirectional kernels run (LiteRT's
  per-row activation quantization and int8 dot products, the arithmetic of rnn.py).
- lstm_integer: the 8x8_16 integer step (5 intermediate tensors), and a whole-sequence loop
  for cells without layer norm, peephole or projection (IntegerSequence).
- lstm_fixedpoint: gemmlowp int16 logistic / tanh tables, the integer layer norm.
- lstm_basic: the 5-input basic cell (float32, or uint8 / int16 with 4 state integer bits).

The output_state and cell_state inputs are graph variables: the kernel reads the stored arrays
and writes the new state into them in place (the one in-place write kernels may do).
"""
from __future__ import annotations

import numpy as np

from acelera.core.kernels import sequence_native
from acelera.core.kernels.common import check_type
from acelera.core.kernels.lstm_basic import basic_lstm
from acelera.core.kernels.lstm_float import FullLstm
from acelera.core.kernels.lstm_hybrid import FloatOrHybridCell
from acelera.core.kernels.lstm_integer import IntegerCell, IntegerSequence, NativeSequence
from acelera.core.kernels.lstm_spec import BIDI_BW, BIDI_FW, CELL_STATE, I2O, INPUT, LN_F, OUT_STATE, SEQ_LAYOUT, Spec
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.model import Tensor

_basic_lstm = basic_lstm  # the name the GPU backends' docs cite


def _run_direction(cell, p, xs, auxs, h, c, forward: bool, time_major: bool, out: np.ndarray):
    """Steps one direction through the [time, batch, ...] sequence, writing its outputs."""
    steps = range(xs.shape[0]) if forward else range(xs.shape[0] - 1, -1, -1)
    for t in steps:
        h, c = cell.step(p, xs[t], None if auxs is None else auxs[t], h, c, time_major)
        out[t] = h
    return h, c


def _mode(node: NodeContext, inp: Tensor, w_out: Tensor | None) -> str:
    """float, hybrid or integer, as LiteRT's Eval dispatches on the weight and input types."""
    if w_out is None:
        raise node.unsupported("missing input_to_output_weights")
    check_type(node, inp, ("FLOAT32", "INT8"))
    if inp.type_name == "INT8":
        check_type(node, w_out, ("INT8",), "weights")
        return "integer"
    check_type(node, w_out, ("FLOAT32", "INT8", "UINT8"), "weights")
    return "float" if w_out.type_name == "FLOAT32" else "hybrid"


class _QuantizedLstm:
    """Hybrid and integer LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM (lstm_eval.cc EvalHybrid and
    EvalInteger8x8_16)."""

    def __init__(self, node: NodeContext, mode: str, sequence: bool):
        n_in = len(node.inputs)
        if n_in not in (20, 24):
            raise node.unsupported(f"the full LSTM kernel expects 20 or 24 inputs, got {n_in}")
        if len(node.outputs) != 1:
            raise node.unsupported(f"the full LSTM kernel has 1 output, got {len(node.outputs)}")
        inp = node.input(INPUT)
        assert inp is not None  # lstm / unidirectional_sequence_lstm refused a missing input
        shape = tuple(inp.shape)
        if sequence:
            if len(shape) != 3:
                raise node.unsupported(f"input must be 3-D, got shape {list(shape)}")
            self.time_major = bool(node.options.get("time_major", False))
            n_time, n_batch = (shape[0], shape[1]) if self.time_major else (shape[1], shape[0])
        else:
            if len(shape) != 2:
                raise node.unsupported(f"input must be 2-D, got shape {list(shape)}")
            self.time_major = True
            n_time, n_batch = 1, shape[0]
        self.n_time, self.n_batch, self.sequence = n_time, n_batch, sequence
        self.fast: IntegerSequence | None = None
        use_ln = n_in == 24 and node.input(LN_F) is not None
        self.spec = Spec(node, SEQ_LAYOUT, mode, shape[-1], n_batch, sequence=sequence, use_ln=use_ln)
        out = node.outputs[0]
        self.cell: IntegerCell | FloatOrHybridCell
        self.dtypes: tuple[type, type, type]
        if mode == "integer":
            check_type(node, out, ("INT8",), "output")
            self.cell = IntegerCell(node, self.spec, inp, out)
            self.dtypes = (np.int64, np.int64, np.int8)
        else:
            check_type(node, out, ("FLOAT32",), "output")
            self.cell = FloatOrHybridCell(node, self.spec)
            self.dtypes = (np.float32, np.float32, np.float32)
        self.out_shape = shape[:-1] + (self.spec.n_output,)
        self.native: NativeSequence | None = None
        if isinstance(self.cell, IntegerCell) and NativeSequence.applies(self.cell):  # mode == "integer"
            kernels = sequence_native.kernels()
            if kernels is not None:
                self.native = NativeSequence(kernels["lstm_int8"], self.cell, n_time, n_batch, self.time_major,
                                             self.out_shape)
        if isinstance(self.cell, IntegerCell) and self.cell.fast and self.native is None:
            self.fast = IntegerSequence(self.cell, n_time, n_batch, self.time_major, self.out_shape)

    def __call__(self, *args):
        spec = self.spec
        nb, nt = self.n_batch, self.n_time
        if self.native is not None:
            return self.native(args)
        if self.fast is not None:
            out = self.fast(args)
            if out is not None:
                return out
        x = np.asarray(args[INPUT])
        xs = x.reshape(nt, nb, -1) if self.time_major else x.reshape(nb, nt, -1).transpose(1, 0, 2)
        xs = xs.astype(self.dtypes[0])
        h_state, c_state = args[OUT_STATE], args[CELL_STATE]
        h = np.asarray(h_state).reshape(nb, spec.n_output).astype(self.dtypes[0])
        c = np.asarray(c_state).reshape(nb, spec.n_cell).astype(self.dtypes[1])
        out = np.empty((nt, nb, spec.n_output), self.dtypes[0])
        h, c = _run_direction(self.cell, self.cell.bind(args), xs, None, h, c, True, self.time_major, out)
        h_state[...] = h.reshape(h_state.shape)
        c_state[...] = c.reshape(c_state.shape)
        if not self.time_major:
            out = out.transpose(1, 0, 2)
        return np.ascontiguousarray(out).reshape(self.out_shape).astype(self.dtypes[2])



@register("LSTM", max_version=4, dtypes=("FLOAT32", "INT8", "UINT8"))
def lstm(node: NodeContext):
    if not node.options:
        raise node.unsupported("LSTM needs its LSTMOptions (LiteRT's parser refuses the node)")
    kernel_type = node.options.get("kernel_type", 0)
    if kernel_type not in (0, 1):
        raise node.unsupported(f"unknown LSTM kernel type {kernel_type}")
    if kernel_type == 1:
        return basic_lstm(node)
    inp = node.input(INPUT)
    if len(node.inputs) < 5 or inp is None:
        raise node.unsupported("the full LSTM kernel expects 20 or 24 inputs")
    mode = _mode(node, inp, node.input(I2O))
    if mode == "float":
        return FullLstm(node, sequence=False)
    return _QuantizedLstm(node, mode, sequence=False)


@register("UNIDIRECTIONAL_SEQUENCE_LSTM", max_version=4, dtypes=("FLOAT32", "INT8"))
def unidirectional_sequence_lstm(node: NodeContext):
    inp = node.input(INPUT)
    if len(node.inputs) < 5 or inp is None:
        raise node.unsupported("the full LSTM kernel expects 20 or 24 inputs")
    mode = _mode(node, inp, node.input(I2O))
    if mode == "float":
        return FullLstm(node, sequence=True)
    return _QuantizedLstm(node, mode, sequence=True)


@register("BIDIRECTIONAL_SEQUENCE_LSTM", max_version=3, dtypes=("FLOAT32",))
def bidirectional_sequence_lstm(node: NodeContext):
    """bidirectional_sequence_lstm.cc: a forward and a backward float or hybrid LSTM (no layer
    norm) over the same input, or the backward one over aux_input when aux_input comes without
    aux weights; with aux weights both cells also see aux_input."""
    opts = node.options
    merge = bool(opts.get("merge_outputs", False))
    if len(node.inputs) != 48:
        raise node.unsupported(f"BIDIRECTIONAL_SEQUENCE_LSTM takes 48 inputs, got {len(node.inputs)}")
    if len(node.outputs) != (1 if merge else 2):
        raise node.unsupported(f"expected {1 if merge else 2} outputs with merge_outputs={merge}")
    inp = node.input(INPUT)
    if inp is None:
        raise node.unsupported("missing input")
    check_type(node, inp, ("FLOAT32",))
    fw_out = node.input(BIDI_FW.w[3])
    mode = _mode(node, inp, fw_out)
    assert fw_out is not None  # _mode refused a missing one
    bw_out = node.input(BIDI_BW.w[3])
    if bw_out is None or bw_out.type != fw_out.type:
        raise node.unsupported("backward weights must have the forward weights' type")
    if len(inp.shape) != 3:
        raise node.unsupported(f"input must be 3-D, got shape {list(inp.shape)}")
    time_major = bool(opts.get("time_major", False))
    n_time, n_batch = (inp.shape[0], inp.shape[1]) if time_major else (inp.shape[1], inp.shape[0])
    n_input = inp.shape[2]
    aux = node.input(39)
    assert BIDI_FW.aux_w is not None and BIDI_BW.aux_w is not None
    has_aux_w = any(node.input(i) is not None for i in BIDI_FW.aux_w[1:] + BIDI_BW.aux_w[1:])
    if has_aux_w and not all(node.input(i) is not None for i in BIDI_FW.aux_w[1:] + BIDI_BW.aux_w[1:]):
        raise node.unsupported("aux weights must be all present or all absent")
    aux_size = None
    if aux is not None:
        check_type(node, aux, ("FLOAT32",), "aux input")
        if len(aux.shape) != 3 or tuple(aux.shape[:2]) != tuple(inp.shape[:2]):
            raise node.unsupported("aux input must be 3-D with the input's first two dimensions")
        if has_aux_w:
            aux_size = aux.shape[2]
        elif aux.shape[2] != n_input:
            raise node.unsupported("an aux input without aux weights must have the input's shape")
    elif has_aux_w:
        raise node.unsupported("aux weights need an aux input")
    fw = Spec(node, BIDI_FW, mode, n_input, n_batch, sequence=True, use_ln=False, aux_size=aux_size)
    bw = Spec(node, BIDI_BW, mode, n_input, n_batch, sequence=True, use_ln=False, aux_size=aux_size)
    if (fw.n_cell, fw.n_output) != (bw.n_cell, bw.n_output):
        raise node.unsupported("forward and backward cells must have the same n_cell and n_output")
    if any(fw.diag.values()) or any(bw.diag.values()):
        raise node.unsupported("diagonal recurrent weights are not supported")
    for k in range(len(node.outputs)):
        check_type(node, node.outputs[k], ("FLOAT32",), "output")
    if merge and not time_major and n_batch > 1:
        raise node.unsupported("batch-major merged outputs with batch > 1 (LiteRT indexes the "
                               "state tensors past their end)")
    cells = (FloatOrHybridCell(node, fw), FloatOrHybridCell(node, bw))
    bw_from_aux = aux is not None and not has_aux_w
    n_out = fw.n_output

    def run(*args):
        x = np.asarray(args[INPUT], np.float32)

        def seq(a):
            return a if time_major else a.transpose(1, 0, 2)
        xs = seq(x)
        aux_x = None if args[39] is None else seq(np.asarray(args[39], np.float32))
        aux_for_cells = aux_x if aux_size is not None else None
        outs = np.empty((n_time, n_batch, 2 * n_out), np.float32)
        for cell, spec, forward, src in ((cells[0], fw, True, xs), (cells[1], bw, False, aux_x if bw_from_aux else xs)):
            L = spec.layout
            h_state, c_state = args[L.h], args[L.c]
            h = np.asarray(h_state, np.float32).reshape(n_batch, n_out)
            c = np.asarray(c_state, np.float32).reshape(n_batch, spec.n_cell)
            view = outs[:, :, :n_out] if forward else outs[:, :, n_out:]
            h, c = _run_direction(cell, cell.bind(args), src, aux_for_cells, h, c, forward, time_major, view)
            h_state[...] = h.reshape(h_state.shape)
            c_state[...] = c.reshape(c_state.shape)
        res = (outs,) if merge else (outs[:, :, :n_out], outs[:, :, n_out:])
        res = tuple(np.ascontiguousarray(seq(r)) for r in res)
        return res[0] if merge else res
    return run
