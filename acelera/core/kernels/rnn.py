"""Recurrent kernels: RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN and SVDF, in
float32, in LiteRT's hybrid form (int8 or uint8 weights on float32 activations) and, for SVDF,
full-integer int8; plus the hybrid arithmetic the LSTM kernels share.

Mirrors tflite/kernels/basic_rnn.cc, unidirectional_sequence_rnn.cc,
bidirectional_sequence_rnn.cc, svdf.cc, internal/kernel_utils.cc (RnnBatchStep),
internal/reference/svdf.h and the tensor_utils that LiteRT's x86 wheel runs: SSE4.1 builds route
through optimized/sse_tensor_utils.cc and the NEON_2_SSE build of optimized/neon_tensor_utils.cc,
whose hybrid arithmetic differs from reference/portable_tensor_utils.cc and is reproduced here:

- Activations are quantized one batch row at a time (BatchQuantizeFloats). Symmetric: scale
  range/127, values rounded and clamped to [-127, 127]. Asymmetric: the range (min(0, min),
  max(0, max)) is subtracted in float32, the zero point nudged in double, the inverse scale is
  1.0 / scale in double. In both, the first multiple of 8 values of a row round as
  trunc(v * inv +- 0.5) in float32 (NEON RoundToNearest), the rest with std::round.
- The int8 dot products over the first multiple of 16 columns use _mm_sign_epi8 /
  _mm_maddubs_epi16, so a weight of -128 times a negative activation comes out negated.
- uint8 weights are read as int8 bytes (GetTensorData<int8_t>), with the weight scale only.
- Results accumulate in float32 as result += float(dot) * (row scale * weight scale).

LiteRT behaviours reproduced: BIDIRECTIONAL_SEQUENCE_RNN's time-major hybrid kernel runs both
directions max_time times over (an extra outer loop), keeping the hidden states; its aux input is
addressed with the input's row size (time-major, and batch-major hybrid); batch-major runs feed
the backward cell the input even when aux_input replaces it; integer SVDF never applies its
(required) RELU. Cases where LiteRT reads or writes outside a buffer or dereferences a null
pointer (an aux input too small for those offsets, symmetric hybrid time-major merged outputs with
more than one batch row) are refused.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from acelera.core.kernels.common import NONE, apply_float_activation, check_type, scale_zp
from acelera.core.kernels.registry import NodeContext, register
from acelera.core.model import Tensor
from acelera.core.quant import multiply_by_quantized_multiplier, quantize_multiplier, round_half_away, wrap_int32

F32 = np.float32
HYBRID_WEIGHTS = ("INT8", "UINT8")
MAX_STEPS = 1 << 22  # time steps one invoke of the quadratic bidirectional kernel may take


def fused_activation(options) -> int:
    """The fused activation as LiteRT's ConvertActivation reads it (unknown values are NONE)."""
    act = int(options.get("fused_activation_function", NONE))
    return act if 0 <= act <= 5 else NONE


# --- hybrid arithmetic -------------------------------------------------------------------------

def _round_neon(p: np.ndarray) -> np.ndarray:
    """NEON_2_SSE RoundToNearest: trunc(p + 0.5) (p - 0.5 below zero) in float32."""
    half = np.where(p < 0, F32(-0.5), F32(0.5))
    return np.trunc(p + half)


def _round_rows(p: np.ndarray) -> np.ndarray:
    """Rounding of a [rows, n] float32 block as the NEON quantizers do it per row."""
    n8 = p.shape[1] // 8 * 8
    out = np.empty(p.shape, np.float64)
    out[:, :n8] = _round_neon(p[:, :n8])
    out[:, n8:] = round_half_away(p[:, n8:])
    return out


def quantize_rows(x: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """BatchQuantizeFloats of a [rows, n] float32 block: (int8 values as float64, float32 scale
    per row, int zero point per row or None when symmetric)."""
    x = np.asarray(x, F32)
    rows = x.shape[0]
    if x.shape[1] == 0:
        return np.zeros(x.shape), np.ones(rows, F32), (np.zeros(rows, np.int64) if asymmetric else None)
    lo, hi = x.min(axis=1), x.max(axis=1)
    if not asymmetric:
        rng = np.maximum(np.abs(lo), np.abs(hi))
        zero = rng == 0
        safe = np.where(zero, F32(1), rng)
        sf = np.where(zero, F32(1), safe / F32(127)).astype(F32)
        inv = (F32(127) / safe).astype(F32)
        q = np.clip(_round_rows(x * inv[:, None]), -127, 127)
        q[zero] = 0
        return q, sf, None
    rmin = np.minimum(F32(0), lo)
    rmax = np.maximum(F32(0), hi)
    zero = rmin == rmax
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = (rmax - rmin).astype(F32).astype(np.float64) / 255.0
        scale = np.where(zero, 1.0, scale)
        from_min = -128.0 - rmin / scale
        from_max = 127.0 - rmax / scale
        err_min = 128.0 + np.abs(rmin / scale)
        err_max = 127.0 + np.abs(rmax / scale)
    zp_d = np.where(err_min < err_max, from_min, from_max)
    zp = np.where(zp_d <= -128, -128, np.where(zp_d >= 127, 127, round_half_away(np.clip(zp_d, -128, 127))))
    zp = np.where(zero, 0, zp).astype(np.int64)
    sf = np.where(zero, F32(1), scale.astype(F32)).astype(F32)
    inv = np.where(sf == 0, 0.0, 1.0 / np.where(sf == 0, F32(1), sf).astype(np.float64)).astype(F32)
    q = np.clip(_round_rows(x * inv[:, None]) + zp[:, None], -128, 127)
    q[zero] = 0
    return q, sf, zp


class QuantWeights:
    """A hybrid kernel's int8 weight matrix [rows, cols] (uint8 bytes read as int8), its scale,
    row sums (asymmetric inputs) and the -128 entries LiteRT's x86 dot product mishandles."""

    def __init__(self, w: np.ndarray, scale: float):
        w8 = np.ascontiguousarray(w).view(np.int8) if w.dtype == np.uint8 else np.asarray(w, np.int8)
        w8 = w8.reshape(w8.shape[0], -1)
        self.rows, self.cols = w8.shape
        self.w = w8.astype(np.float64)
        self.scale = F32(scale)
        self.row_sums = w8.sum(axis=1, dtype=np.int64).astype(np.float64)
        self.block = self.cols & ~15
        flip = w8[:, :self.block] == -128
        self.flip = flip.astype(np.float64) if flip.any() else None

    def dot(self, q: np.ndarray, zp: np.ndarray | None) -> np.ndarray:
        """Exact int32 dot products [rows_of_q, self.rows] of quantized rows q (as float64)."""
        d = q @ self.w.T
        if self.flip is not None:
            head = q[:, :self.block]
            d -= 256.0 * (np.where(head < 0, -head, 0.0) @ self.flip.T)
        if zp is not None:
            d -= zp[:, None].astype(np.float64) * self.row_sums[None, :]
        return wrap_int32(d.astype(np.int64)) if np.abs(d).max(initial=0) >= 2 ** 31 else d


def hybrid_accumulate(acc: np.ndarray, x: np.ndarray, weights: QuantWeights, asymmetric: bool,
                      quantized: tuple | None = None) -> None:
    """acc [rows, weights.rows] += W * x, LiteRT's hybrid MatrixBatchVectorMultiplyAccumulate of
    the quantized rows of x (float32 multiply, then float32 add). `quantized` reuses a
    quantize_rows result."""
    q, sf, zp = quantized if quantized is not None else quantize_rows(x, asymmetric)
    s = (sf * weights.scale).astype(F32)
    acc += weights.dot(q, zp).astype(F32) * s[:, None]


class Cached:
    """A value derived from some kernel arguments, rebuilt only when those arrays change."""

    def __init__(self, build: Callable):
        self.build = build
        self.arrays: tuple = ()
        self.value = None

    def get(self, *arrays):
        if len(arrays) != len(self.arrays) or any(a is not b for a, b in zip(arrays, self.arrays)):
            self.value = self.build(*arrays)
            self.arrays = arrays
        return self.value


def _is_hybrid(node: NodeContext, inp: Tensor, weights: Tensor) -> bool:
    """LiteRT's IsHybridOp: float32 input with int8/uint8 weights; other weight types but float32
    are refused (LiteRT's Eval fails on them)."""
    check_type(node, inp, ("FLOAT32",))
    check_type(node, weights, ("FLOAT32",) + HYBRID_WEIGHTS, "weights")
    return weights.type_name in HYBRID_WEIGHTS


def _require(node: NodeContext, i: int, what: str) -> Tensor:
    t = node.input(i)
    if t is None:
        raise node.unsupported(f"missing {what}")
    return t


def _shape(node: NodeContext, t: Tensor, shape: Sequence[int], what: str) -> None:
    if tuple(t.shape) != tuple(shape):
        raise node.unsupported(f"{what} must have shape {list(shape)}, got {list(t.shape)}")


def _state(node: NodeContext, i: int, shape: Sequence[int], dtype: str, what: str) -> Tensor:
    t = _require(node, i, what)
    if not t.is_variable:
        raise node.unsupported(f"{what} must be a variable tensor")
    check_type(node, t, (dtype,), what)
    _shape(node, t, shape, what)
    return t


# --- RNN cells -----------------------------------------------------------------------------

class _Cell:
    """One RNN direction: input (and optional aux) weights, recurrent weights, bias, activation;
    float or hybrid."""

    def __init__(self, node: NodeContext, w: int, r: int, b: int, aux_w: int | None, hybrid: bool,
                 n_input: int, units: int):
        self.idx = (w, r, b, aux_w)
        self.hybrid = hybrid
        self.act = fused_activation(node.options)
        self.asymmetric = bool(node.options.get("asymmetric_quantize_inputs", False))
        wt = _require(node, w, "input weights")
        rt = _require(node, r, "recurrent weights")
        bt = _require(node, b, "bias")
        at = _require(node, aux_w, "aux weights") if aux_w is not None else None
        others = [(rt, "recurrent weights")] + ([(at, "aux weights")] if at is not None else [])
        for t, what in others:
            if t.type != wt.type:
                raise node.unsupported(f"{what} type {t.type_name} differs from the input weights' {wt.type_name}")
        _shape(node, wt, (units, n_input), "input weights")
        _shape(node, rt, (units, units), "recurrent weights")
        _shape(node, bt, (units,), "bias")
        check_type(node, bt, ("FLOAT32",), "bias")
        self.units = units
        self.scales = tuple(scale_zp(t)[0] if t is not None else 0.0 for t in (wt, rt, at))
        self.weights = Cached(self._build)

    def _build(self, w, r, aux_w):
        if self.hybrid:
            qs = [None if a is None else QuantWeights(a, s) for a, s in zip((w, r, aux_w), self.scales)]
            return tuple(qs)
        return tuple(None if a is None else np.ascontiguousarray(np.asarray(a, F32).T) for a in (w, r, aux_w))

    def bind(self, args):
        """The cell's weights and bias for one invoke."""
        w, r, b, aux_w = (args[i] if i is not None else None for i in self.idx)
        return self.weights.get(w, r, aux_w), np.asarray(b, F32)

    def step(self, bound, x: np.ndarray, aux: np.ndarray | None, h: np.ndarray) -> np.ndarray:
        """RnnBatchStep for a [rows, n] block: the new hidden state [rows, units]."""
        (w, r, aw), bias = bound
        out = np.empty((x.shape[0], self.units), F32)
        out[...] = bias
        if self.hybrid:
            if np.any(x):
                hybrid_accumulate(out, x, w, self.asymmetric)
            if aux is not None and aw is not None and np.any(aux):
                hybrid_accumulate(out, aux, aw, self.asymmetric)
            if np.any(h):
                hybrid_accumulate(out, h, r, self.asymmetric)
        else:
            out += x @ w
            if aux is not None and aw is not None:
                out += aux @ aw
            out += h @ r
        return apply_float_activation(out, self.act)


def _sequence_dims(node: NodeContext, inp: Tensor) -> tuple[bool, int, int, int]:
    if len(inp.shape) != 3:
        raise node.unsupported(f"input must be 3-D, got shape {list(inp.shape)}")
    time_major = bool(node.options.get("time_major", False))
    t, b = (inp.shape[0], inp.shape[1]) if time_major else (inp.shape[1], inp.shape[0])
    return time_major, t, b, inp.shape[2]


def _float_out(node: NodeContext, k: int = 0) -> None:
    if k >= len(node.outputs):
        raise node.unsupported(f"missing output {k}")
    check_type(node, node.outputs[k], ("FLOAT32",), "output")


@register("RNN", max_version=3, dtypes=("FLOAT32",))
def rnn(node: NodeContext):
    if len(node.inputs) != 5 or len(node.outputs) != 1:
        raise node.unsupported("RNN takes 5 inputs and 1 output")
    inp = _require(node, 0, "input")
    wt = _require(node, 1, "input weights")
    hybrid = _is_hybrid(node, inp, wt)
    if len(inp.shape) != 2 or len(wt.shape) != 2:
        raise node.unsupported("input and weights must be 2-D")
    batch, n_input = inp.shape
    units = wt.shape[0]
    cell = _Cell(node, 1, 2, 3, None, hybrid, n_input, units)
    _state(node, 4, (batch, units), "FLOAT32", "hidden state")
    _float_out(node)

    def run(x, w, r, b, h_state):
        h = cell.step(cell.bind((x, w, r, b, h_state)), np.asarray(x, F32), None, np.asarray(h_state, F32))
        h_state[...] = h
        return h.copy()
    return run


@register("UNIDIRECTIONAL_SEQUENCE_RNN", max_version=3, dtypes=("FLOAT32",))
def unidirectional_sequence_rnn(node: NodeContext):
    if len(node.inputs) != 5 or len(node.outputs) != 1:
        raise node.unsupported("UNIDIRECTIONAL_SEQUENCE_RNN takes 5 inputs and 1 output")
    inp = _require(node, 0, "input")
    wt = _require(node, 1, "input weights")
    hybrid = _is_hybrid(node, inp, wt)
    time_major, n_time, batch, n_input = _sequence_dims(node, inp)
    if len(wt.shape) != 2:
        raise node.unsupported("input weights must be 2-D")
    units = wt.shape[0]
    cell = _Cell(node, 1, 2, 3, None, hybrid, n_input, units)
    _state(node, 4, (batch, units), "FLOAT32", "hidden state")
    _float_out(node)

    def run(x, w, r, b, h_state):
        xs = np.asarray(x, F32)
        xs = xs if time_major else xs.transpose(1, 0, 2)
        bound = cell.bind((x, w, r, b, h_state))
        h = np.asarray(h_state, F32)
        out = np.empty((n_time, batch, units), F32)
        for t in range(n_time):
            h = out[t] = cell.step(bound, xs[t], None, h)
        h_state[...] = h
        return out if time_major else np.ascontiguousarray(out.transpose(1, 0, 2))
    return run


# --- BIDIRECTIONAL_SEQUENCE_RNN --------------------------------------------------------------

def _aux_reader(n_time: int, batch: int, n_input: int, aux_size: int, mode: str) -> Callable | None:
    """Reads the aux rows of step t from the flat aux buffer the way LiteRT addresses them:
    "exact" [time, batch] rows; "time" rows of step t at t * n_input * batch (time-major);
    "batch" row (b, t) at (b * n_time + t) * n_input (batch-major hybrid). None where some read
    falls outside the buffer."""
    total = n_time * batch * aux_size
    if mode == "time":
        if n_time and (n_time - 1) * n_input * batch + batch * aux_size > total:
            return None
        return lambda flat, t: flat[t * n_input * batch:t * n_input * batch + batch * aux_size].reshape(batch, aux_size)
    if mode == "batch":
        if batch and n_time and (batch * n_time - 1) * n_input + aux_size > total:
            return None
        base = np.arange(batch)[:, None] * n_time * n_input + np.arange(aux_size)[None, :]
        return lambda flat, t: flat[base + t * n_input]
    return lambda flat, t: flat.reshape(batch, n_time, aux_size)[:, t]


@register("BIDIRECTIONAL_SEQUENCE_RNN", max_version=3, dtypes=("FLOAT32",))
def bidirectional_sequence_rnn(node: NodeContext):
    opts = node.options
    merge = bool(opts.get("merge_outputs", False))
    if len(node.inputs) != 12:
        raise node.unsupported(f"BIDIRECTIONAL_SEQUENCE_RNN takes 12 inputs, got {len(node.inputs)}")
    if len(node.outputs) != (1 if merge else 2):
        raise node.unsupported(f"expected {1 if merge else 2} outputs with merge_outputs={merge}")
    inp = _require(node, 0, "input")
    fw_w, bw_w = _require(node, 1, "forward weights"), _require(node, 5, "backward weights")
    hybrid = _is_hybrid(node, inp, fw_w)
    if bw_w.type != fw_w.type:
        raise node.unsupported("forward and backward weights must have the same type")
    time_major, n_time, batch, n_input = _sequence_dims(node, inp)
    if len(fw_w.shape) != 2 or len(bw_w.shape) != 2:
        raise node.unsupported("weights must be 2-D")
    fw_units, bw_units = fw_w.shape[0], bw_w.shape[0]
    aux = node.input(9)
    fw_aux_w, bw_aux_w = node.input(10), node.input(11)
    if (fw_aux_w is None) != (bw_aux_w is None):
        raise node.unsupported("aux weights must be given for both directions or neither")
    has_aux_weights = fw_aux_w is not None
    aux_size = 0
    if has_aux_weights:
        assert fw_aux_w is not None and bw_aux_w is not None
        if aux is None:
            raise node.unsupported("aux weights need an aux input")
        check_type(node, aux, ("FLOAT32",), "aux input")
        if len(aux.shape) != 3 or tuple(aux.shape[:2]) != tuple(inp.shape[:2]):
            raise node.unsupported("aux input must be 3-D with the input's first two dimensions")
        aux_size = aux.shape[2]
        _shape(node, fw_aux_w, (fw_units, aux_size), "forward aux weights")
        _shape(node, bw_aux_w, (bw_units, aux_size), "backward aux weights")
    elif aux is not None:
        check_type(node, aux, ("FLOAT32",), "aux input")
        _shape(node, aux, inp.shape, "aux input (the backward cell's input)")
    fw = _Cell(node, 1, 2, 3, 10 if has_aux_weights else None, hybrid, n_input, fw_units)
    bw = _Cell(node, 5, 6, 7, 11 if has_aux_weights else None, hybrid, n_input, bw_units)
    _state(node, 4, (batch, fw_units), "FLOAT32", "forward hidden state")
    _state(node, 8, (batch, bw_units), "FLOAT32", "backward hidden state")
    for k in range(len(node.outputs)):
        _float_out(node, k)
    if hybrid and merge and time_major and batch > 1 and not fw.asymmetric:
        raise node.unsupported("symmetric hybrid time-major merged outputs with batch > 1 "
                               "(LiteRT dereferences a null zero-point array)")
    read_aux = None
    if has_aux_weights:
        mode = "time" if time_major else ("batch" if hybrid else "exact")
        read_aux = _aux_reader(n_time, batch, n_input, aux_size, mode)
        if read_aux is None:
            raise node.unsupported("aux input smaller than LiteRT's offsets into it (they use the "
                                   "input's row size)")
    bw_from_aux = aux is not None and not has_aux_weights and time_major
    repeats = n_time if hybrid and time_major else 1
    if repeats * n_time > MAX_STEPS:
        raise node.unsupported(f"max_time {n_time}: LiteRT's time-major hybrid kernel runs max_time^2 steps")

    def run(*args):
        x, fw_h, bw_h, aux_x = np.asarray(args[0], F32), args[4], args[8], args[9]
        xs = x if time_major else x.transpose(1, 0, 2)
        bw_xs = xs
        if bw_from_aux:
            bw_xs = np.asarray(aux_x, F32)
        aux_flat = np.asarray(aux_x, F32).reshape(-1) if read_aux is not None else None
        fwb, bwb = fw.bind(args), bw.bind(args)
        h_fw, h_bw = np.asarray(fw_h, F32), np.asarray(bw_h, F32)
        out_fw = np.empty((n_time, batch, fw_units), F32)
        out_bw = np.empty((n_time, batch, bw_units), F32)
        for _ in range(repeats):
            for t in range(n_time):
                a = read_aux(aux_flat, t) if read_aux is not None else None
                h_fw = out_fw[t] = fw.step(fwb, xs[t], a, h_fw)
            for t in range(n_time - 1, -1, -1):
                a = read_aux(aux_flat, t) if read_aux is not None else None
                h_bw = out_bw[t] = bw.step(bwb, bw_xs[t], a, h_bw)
        fw_h[...] = h_fw
        bw_h[...] = h_bw
        if merge:
            out_fw = np.concatenate([out_fw, out_bw], axis=2)
        outs = (out_fw,) if merge else (out_fw, out_bw)
        if not time_major:
            outs = tuple(np.ascontiguousarray(o.transpose(1, 0, 2)) for o in outs)
        return outs if not merge else outs[0]
    return run


# --- SVDF --------------------------------------------------------------------------------------

def _svdf_time(state: np.ndarray, weights_time: np.ndarray, units: int, rank: int) -> np.ndarray:
    """matmul(state, weights_time) per filter, then the sum over each unit's rank filters."""
    scratch = np.einsum("bfm,fm->bf", state, weights_time, dtype=state.dtype)
    return scratch.reshape(state.shape[0], units, rank).sum(axis=2, dtype=state.dtype)


@register("SVDF", max_version=4, dtypes=("FLOAT32", "INT8"))
def svdf(node: NodeContext):
    if len(node.inputs) != 5 or len(node.outputs) != 1:
        raise node.unsupported("SVDF takes 5 inputs and 1 output")
    inp = _require(node, 0, "input")
    wf = _require(node, 1, "feature weights")
    wt = _require(node, 2, "time weights")
    bias = node.input(3)
    check_type(node, inp, ("FLOAT32", "INT8"))
    opts = node.options
    rank = int(opts.get("rank", 0))
    if len(inp.shape) != 2 or len(wf.shape) != 2 or len(wt.shape) != 2:
        raise node.unsupported("input, feature weights and time weights must be 2-D")
    batch, n_input = inp.shape
    filters, memory = wf.shape[0], wt.shape[1]
    if rank <= 0 or filters % rank:
        raise node.unsupported(f"rank {rank} must be positive and divide the {filters} filters")
    units = filters // rank
    if wf.shape[1] != n_input or wt.shape[0] != filters:
        raise node.unsupported("feature weights must be [filters, input_size] and time weights [filters, memory]")
    if batch * filters * memory == 0:
        raise node.unsupported("empty batch, filters or memory")
    if bias is not None:
        _shape(node, bias, (units,), "bias")
    integer = inp.type_name == "INT8"
    act = fused_activation(opts)
    asymmetric = bool(opts.get("asymmetric_quantize_inputs", False))
    out = node.outputs[0]
    if integer:
        check_type(node, wf, ("INT8",), "feature weights")
        check_type(node, wt, ("INT16",), "time weights")
        if bias is not None:
            check_type(node, bias, ("INT32",), "bias")
        state_t = _state(node, 4, (batch, memory * filters), "INT16", "state")
        check_type(node, out, ("INT8",), "output")
        if act != 1:
            raise node.unsupported("integer SVDF supports only the RELU activation")
        for t, what in ((inp, "input"), (wf, "feature weights"), (state_t, "state"), (wt, "time weights"),
                        (out, "output")):
            if not t.quantized:
                raise node.unsupported(f"integer SVDF needs a quantized {what}")
        s_in, zp_in = scale_zp(inp)
        s_state = scale_zp(state_t)[0]
        s_out, zp_out = scale_zp(out)
        m1 = quantize_multiplier(float(F32(F32(s_in) * F32(scale_zp(wf)[0])) / F32(s_state)))
        m2 = quantize_multiplier(float(F32(F32(s_state) * F32(scale_zp(wt)[0])) / F32(s_out)))

        def run_int(x, w_f, w_t, b, state):
            s = np.array(state, np.int16).reshape(-1)
            s[:-1] = s[1:].copy()
            s3 = s.reshape(batch, filters, memory)
            xq = np.asarray(x, np.int64) - zp_in
            feat = wrap_int32(xq @ np.asarray(w_f, np.int64).T)
            s3[:, :, -1] = np.clip(multiply_by_quantized_multiplier(feat, *m1), -32768, 32767)
            prod = s3.astype(np.int64) * np.asarray(w_t, np.int64).reshape(filters, memory)[None]
            acc = wrap_int32(wrap_int32(prod.sum(axis=2)).reshape(batch, units, rank).sum(axis=2))
            if b is not None:
                acc = wrap_int32(acc + np.asarray(b, np.int64))
            res = multiply_by_quantized_multiplier(acc, *m2) + zp_out
            state[...] = s.reshape(state.shape)
            return np.clip(res, -128, 127).astype(np.int8)
        return run_int

    hybrid = _is_hybrid(node, inp, wf)
    check_type(node, wt, HYBRID_WEIGHTS if hybrid else ("FLOAT32",), "time weights")
    if bias is not None:
        check_type(node, bias, ("FLOAT32",), "bias")
    _state(node, 4, (batch, memory * filters), "FLOAT32", "state")
    check_type(node, out, ("FLOAT32",), "output")
    scales = (scale_zp(wf)[0], scale_zp(wt)[0])

    def build(w_f, w_t):
        if not hybrid:
            return np.ascontiguousarray(np.asarray(w_f, F32).T), np.asarray(w_t, F32).reshape(filters, memory)
        w_t8 = np.ascontiguousarray(w_t).view(np.int8).reshape(filters, memory)
        return QuantWeights(w_f, scales[0]), (w_t8.astype(F32) * F32(scales[1])).astype(F32)
    weights = Cached(build)

    def run(x, w_f, w_t, b, state):
        feature, time_w = weights.get(w_f, w_t)
        x = np.asarray(x, F32)
        s = np.array(state, F32).reshape(-1)
        s[:-1] = s[1:].copy()
        s3 = s.reshape(batch, filters, memory)
        if hybrid:
            feat = np.zeros((batch, filters), F32)
            if np.any(x):
                hybrid_accumulate(feat, x, feature, asymmetric)
        else:
            feat = x @ feature
        s3[:, :, -1] = feat
        state[...] = s.reshape(state.shape)
        res = _svdf_time(s3, time_w, units, rank)
        if b is not None:
            res += np.asarray(b, F32)
        return apply_float_activation(res, act)
    return run
