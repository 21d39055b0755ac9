"""Conformance case generators of the recurrent ops (variable state tensors, float32): RNN, SVDF,
the uni- and bidirectional sequence RNNs and LSTMs.

Generators as described in generators_kit.py (the contract, `DTYPES`, the tensor helpers);
generators_more.py imports this module to register them.
"""
from __future__ import annotations

from acelera.conformance.generators_kit import FLOAT, _gen
from acelera.conformance.templates import OpTemplate, T


# --- recurrent (variable state tensors, float32) -------------------------------------------------
def _state(shape: tuple[int, ...]) -> T:
    return T(shape, variable=True)


def _w(shape: tuple[int, ...], scale: float = 0.5) -> T:
    return T(shape, role="weights", const=True, domain=(-scale, scale))


def _b(n: int) -> T:
    return T((n,), role="bias", const=True, domain=(-0.3, 0.3))


@_gen("RNN", dtypes=FLOAT)
def rnn(op: str) -> list[OpTemplate]:
    def tpl(label, batch, n_in, units, act):
        ins = (T((batch, n_in)), _w((units, n_in)), _w((units, units)), _b(units), _state((batch, units)))
        return OpTemplate(op, ins, (T((batch, units)),),
                          {"fused_activation_function": act, "asymmetric_quantize_inputs": False}, label)
    return [tpl("b1_tanh", 1, 5, 4, "TANH"), tpl("b3_relu", 3, 3, 6, "RELU")]


@_gen("UNIDIRECTIONAL_SEQUENCE_RNN", dtypes=FLOAT)
def unidirectional_sequence_rnn(op: str) -> list[OpTemplate]:
    def tpl(label, batch, steps, n_in, units, act, time_major):
        lead = (steps, batch) if time_major else (batch, steps)
        ins = (T(lead + (n_in,)), _w((units, n_in)), _w((units, units)), _b(units), _state((batch, units)))
        return OpTemplate(op, ins, (T(lead + (units,)),), {"fused_activation_function": act,
                                                           "time_major": time_major,
                                                           "asymmetric_quantize_inputs": False}, label)
    return [tpl("batch_major_tanh", 2, 3, 4, 5, "TANH", False), tpl("time_major_relu", 3, 2, 3, 4, "RELU", True)]


@_gen("BIDIRECTIONAL_SEQUENCE_RNN", dtypes=FLOAT)
def bidirectional_sequence_rnn(op: str) -> list[OpTemplate]:
    def tpl(label, batch, steps, n_in, units, time_major, merge):
        lead = (steps, batch) if time_major else (batch, steps)
        direction = (_w((units, n_in)), _w((units, units)), _b(units), _state((batch, units)))
        ins = (T(lead + (n_in,)),) + direction + direction + (None, None, None)
        outs = (T(lead + (2 * units,)),) if merge else (T(lead + (units,)), T(lead + (units,)))
        opts = {"fused_activation_function": "TANH", "time_major": time_major, "merge_outputs": merge,
                "asymmetric_quantize_inputs": False}
        return OpTemplate(op, ins, outs, opts, label)
    return [tpl("batch_major_two_outputs", 2, 3, 4, 3, False, False),
            tpl("time_major_merged", 1, 4, 3, 2, True, True)]


@_gen("SVDF", dtypes=FLOAT)
def svdf(op: str) -> list[OpTemplate]:
    def tpl(label, batch, n_in, units, rank, memory, act, bias=True):
        filters = units * rank
        ins = (T((batch, n_in)), _w((filters, n_in)), _w((filters, memory)), _b(units) if bias else None,
               _state((batch, memory * filters)))
        return OpTemplate(op, ins, (T((batch, units)),), {"rank": rank, "fused_activation_function": act,
                                                          "asymmetric_quantize_inputs": False}, label)
    return [tpl("rank1_relu", 2, 4, 3, 1, 5, "RELU"), tpl("rank2_nobias", 1, 3, 2, 2, 4, "NONE", bias=False)]


def _lstm_direction(n_in: int, n_cell: int, n_out: int, *, cifg: bool = False, peephole: bool = False,
                    proj: bool = False) -> tuple:
    """One direction's 17 LSTM inputs after the input: gate weights, recurrent weights, peepholes,
    gate biases, projection weights and bias (None where absent)."""
    w_in = tuple(None if (cifg and g == 0) else _w((n_cell, n_in)) for g in range(4))
    w_rec = tuple(None if (cifg and g == 0) else _w((n_cell, n_out)) for g in range(4))
    peep = tuple(_w((n_cell,), 0.3) if peephole and not (cifg and g == 0) else None for g in range(3))
    bias = tuple(None if (cifg and g == 0) else _b(n_cell) for g in range(4))
    projection = (_w((n_out, n_cell)), _b(n_out)) if proj else (None, None)
    return w_in + w_rec + peep + bias + projection


@_gen("UNIDIRECTIONAL_SEQUENCE_LSTM", dtypes=FLOAT)
def unidirectional_sequence_lstm(op: str) -> list[OpTemplate]:
    def tpl(label, batch, steps, n_in, n_cell, n_out, time_major, **kw):
        lead = (steps, batch) if time_major else (batch, steps)
        ins = ((T(lead + (n_in,)),) + _lstm_direction(n_in, n_cell, n_out, **kw)
               + (_state((batch, n_out)), _state((batch, n_cell))) + (None,) * 4)
        opts = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0, "time_major": time_major,
                "asymmetric_quantize_inputs": False}
        return OpTemplate(op, ins, (T(lead + (n_out,)),), opts, label)
    return [tpl("basic", 2, 3, 4, 5, 5, False),
            tpl("cifg_peephole_projection_time_major", 1, 4, 3, 4, 2, True, cifg=True, peephole=True, proj=True)]


@_gen("BIDIRECTIONAL_SEQUENCE_LSTM", dtypes=FLOAT)
def bidirectional_sequence_lstm(op: str) -> list[OpTemplate]:
    def tpl(label, batch, steps, n_in, n_cell, n_out, time_major, merge, **kw):
        lead = (steps, batch) if time_major else (batch, steps)
        fw = _lstm_direction(n_in, n_cell, n_out, **kw)
        bw = _lstm_direction(n_in, n_cell, n_out, **kw)
        states = (_state((batch, n_out)), _state((batch, n_cell)), _state((batch, n_out)), _state((batch, n_cell)))
        ins = (T(lead + (n_in,)),) + fw + bw + states + (None,) * 9
        outs = (T(lead + (2 * n_out,)),) if merge else (T(lead + (n_out,)), T(lead + (n_out,)))
        opts = {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0, "merge_outputs": merge,
                "time_major": time_major, "asymmetric_quantize_inputs": False}
        return OpTemplate(op, ins, outs, opts, label)
    return [tpl("two_outputs", 2, 3, 3, 4, 4, False, False),
            tpl("merged_time_major_peephole", 1, 2, 4, 3, 3, True, True, peephole=True)]
