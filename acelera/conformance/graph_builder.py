"""Materializing op templates into case models: `build_graph`.

FLOAT32 / FLOAT16 cases keep every float tensor in that type; INT8 / UINT8 / INT16 cases are
quantized the way TFLite's converter does it (per-tensor activation scales from their value
ranges, int16 symmetric; int8 symmetric weights, per-channel along the output axis for
convolutions; uint8 asymmetric weights for UINT8 cases; int32 or int64 biases at
input_scale * weight_scale), with output scales calibrated by running the float32 version of
the same model on the CPU reference, except where the op fixes them; INT32 cases are plain
integers. See cases.py for the whole picture.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from acelera.conformance.templates import (
    NP,
    QRANGE,
    QUANT_DTYPES,
    NotCovered,
    OpTemplate,
    ReferenceFailure,
    T,
    reference_gap,
)
from acelera.core.builder import ModelBuilder


# --- materialization -----------------------------------------------------------------------
@dataclass
class Built:
    """A materialized case model with the inputs to feed it."""

    model: bytes
    inputs: list[np.ndarray]
    #: per graph output: quantization step a float output derives from (0 when none)
    quantum: list[float]


@dataclass
class _Tensor:
    spec: T
    shape: tuple[int, ...]
    node: int
    is_input: bool = False
    is_const: bool = False
    value: np.ndarray | None = None  # float (or int parameter) values
    type: str = "FLOAT32"
    quant: tuple | None = None
    index: int = -1


def _random(rng: np.random.Generator, spec: T, shape: tuple[int, ...]) -> np.ndarray:
    lo, hi = spec.domain
    v = rng.uniform(lo, hi, size=shape)
    if spec.nonzero:
        v = v * rng.choice(np.array([-1.0, 1.0]), size=shape)
    return v.astype(np.float64)


def _act_quant(lo: float, hi: float, dtype: str) -> tuple[float, int]:
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < 1e-6:
        hi = lo + 1e-3
    if dtype == "INT16":
        return float(np.float32(max(-lo, hi) / 32767.0)), 0
    qmin, qmax = QRANGE[dtype]
    scale = float(np.float32((hi - lo) / (qmax - qmin)))
    zp = int(np.clip(round(qmin - lo / scale), qmin, qmax))
    return scale, zp


def _quantize(v: np.ndarray, quant: tuple, dtype: str) -> np.ndarray:
    info = np.iinfo(NP[dtype])
    if len(quant) == 3:
        scales, zps, axis = quant
        shape = [1] * v.ndim
        shape[axis] = -1
        s = np.asarray(scales, np.float64).reshape(shape)
        z = np.asarray(zps, np.float64).reshape(shape)
    else:
        s, z = quant
    q = np.round(v / s) + z
    return np.clip(q, info.min, info.max).astype(NP[dtype])


def _weights_quant(w: np.ndarray, case_dtype: str, axis: int | None) -> tuple[str, tuple]:
    if case_dtype == "UINT8":
        s, z = _act_quant(float(w.min()), float(w.max()), "UINT8")
        return "UINT8", (s, z)
    if axis is not None:
        red = tuple(d for d in range(w.ndim) if d != axis)
        amax = np.max(np.abs(w), axis=red)
        scales = (np.maximum(amax, 1e-6) / 127.0).astype(np.float32)
        return "INT8", (scales, np.zeros(len(scales), np.int64), axis)
    s = float(np.float32(max(float(np.abs(w).max()), 1e-6) / 127.0))
    return "INT8", (s, 0)


def _scale_of(q: tuple | None) -> float:
    if q is None:
        return 0.0
    s = q[0]
    return float(np.max(s)) if np.ndim(s) else float(s)


def _resolve_type(spec: T, case_dtype: str) -> str:
    if spec.dtype is None:
        return case_dtype
    if spec.dtype == "QUANT_SAME":
        return case_dtype if case_dtype in QUANT_DTYPES else "INT8"
    if spec.dtype == "INT8_OR_UINT8":
        return "UINT8" if case_dtype in ("INT8", "FLOAT32", "FLOAT16", "INT16") else "INT8"
    return spec.dtype


def build_graph(nodes: Sequence[OpTemplate], dtype: str, version: int | Sequence[int], rng: np.random.Generator, *,
                links: Mapping[tuple[int, int], tuple[int, int]] | None = None,
                dynamic_batch: bool = False, calibrate: bool = True) -> Built:
    """Materialize `nodes` (a single op, or a chain) for a case dtype and op version(s).

    `links[(node, input position)] = (producer node, output position)` wires tensors between
    nodes; by default node k+1's input 0 is node k's output 0 (a chain). Raises NotCovered when
    the model cannot be built or calibrated.
    """
    if dtype not in NP:
        raise NotCovered(f"the suite does not build {dtype} cases")
    if links is None:
        links = {(k, 0): (k - 1, 0) for k in range(1, len(nodes))}
    versions = [version] * len(nodes) if isinstance(version, int) else list(version)
    tensors: list[_Tensor] = []
    node_in: list[list[int]] = []
    node_out: list[list[int]] = []
    for k, tpl in enumerate(nodes):
        ins = []
        for i, spec in enumerate(tpl.inputs):
            if spec is None:
                ins.append(-1)
            elif (k, i) in links:
                pk, po = links[(k, i)]
                ins.append(node_out[pk][po])
            else:
                tensors.append(_Tensor(spec, tuple(spec.shape), k, is_input=not (spec.const or spec.variable),
                                       is_const=spec.const))
                ins.append(len(tensors) - 1)
        node_in.append(ins)
        outs = []
        for spec in tpl.outputs:
            tensors.append(_Tensor(spec, tuple(spec.shape), k))
            outs.append(len(tensors) - 1)
        node_out.append(outs)
    consumed = {t for ins in node_in for t in ins}
    graph_outputs = [t for outs in node_out for t in outs if t not in consumed] or node_out[-1]

    # values
    for t in tensors:
        if not (t.is_input or t.is_const):
            continue
        if t.spec.value is not None:
            t.value = np.asarray(t.spec.value)
        elif t.spec.role in ("int", "bool"):
            lo, hi = t.spec.domain
            t.value = rng.integers(int(lo), int(hi) + 1, size=t.shape).astype(np.int64)
        else:
            t.value = _random(rng, t.spec, t.shape)

    quantized = dtype in QUANT_DTYPES
    float_values: dict[int, np.ndarray] = {}
    if quantized and calibrate:
        needs = any(not (tensors[o].spec.quant or tensors[o].spec.dtype or nodes[tensors[o].node].same_quant)
                    for outs in node_out for o in outs)
        if needs:
            float_values = _calibrate(nodes, tensors, node_in, node_out, graph_outputs)

    # types and quantization, node by node
    for k, tpl in enumerate(nodes):
        data_q = None
        first_data = None
        for t_idx in node_in[k]:
            if t_idx < 0:
                continue
            t = tensors[t_idx]
            role = t.spec.role
            if t.node != k or (not t.is_input and not t.is_const):  # linked: already typed
                if role == "data" and first_data is None:
                    first_data, data_q = t, t.quant
                continue
            assert t.value is not None  # every graph input and constant got its values above
            if role in ("int", "bool"):
                t.type = t.spec.dtype or ("BOOL" if role == "bool" else "INT32")
                continue
            if role == "weights":
                if quantized:
                    t.type, t.quant = _weights_quant(t.value, dtype, t.spec.axis if dtype != "UINT8" else None)
                else:
                    t.type = _resolve_type(t.spec, dtype)
                continue
            if role == "bias":
                continue  # after the weights
            # data
            t.type = _resolve_type(t.spec, dtype)
            if t.type in QUANT_DTYPES:
                if tpl.same_quant and data_q is not None:
                    t.quant = data_q
                else:
                    if tpl.same_quant:
                        specs = [tensors[j].spec for j in node_in[k] if j >= 0 and tensors[j].spec.role == "data"]
                        lo = min(s.domain[0] if not s.nonzero else -s.domain[1] for s in specs)
                        hi = max(s.domain[1] for s in specs)
                        if t.is_const and t.value is not None:
                            lo, hi = min(lo, float(t.value.min())), max(hi, float(t.value.max()))
                    elif t.is_const:
                        lo, hi = float(t.value.min()), float(t.value.max())
                    else:
                        lo, hi = (-t.spec.domain[1], t.spec.domain[1]) if t.spec.nonzero else t.spec.domain
                    t.quant = _act_quant(lo, hi, t.type)
            if first_data is None:
                first_data, data_q = t, t.quant
        # biases: scale = input scale * weight scale
        w_t = next((tensors[j] for j in node_in[k] if j >= 0 and tensors[j].spec.role == "weights"), None)
        for t_idx in node_in[k]:
            if t_idx < 0 or tensors[t_idx].spec.role != "bias":
                continue
            t = tensors[t_idx]
            if quantized and first_data is not None and first_data.quant is not None and w_t is not None and w_t.quant:
                in_s = first_data.quant[0]
                if len(w_t.quant) == 3:
                    scales = (np.float64(in_s) * np.asarray(w_t.quant[0], np.float64)).astype(np.float32)
                    t.quant = (scales, np.zeros(len(scales), np.int64), 0)
                else:
                    t.quant = (float(np.float32(in_s * w_t.quant[0])), 0)
                t.type = "INT64" if dtype == "INT16" else "INT32"
            elif dtype == "INT32":
                t.type = "INT32"
            else:
                t.type = "FLOAT16" if dtype == "FLOAT16" else "FLOAT32"
        # outputs
        for t_idx in node_out[k]:
            t = tensors[t_idx]
            t.type = _resolve_type(t.spec, dtype)
            if t.type not in QUANT_DTYPES or t.spec.role in ("int", "bool"):
                continue
            if t.spec.quant is not None:
                src = dtype if dtype in t.spec.quant else t.type
                if src not in t.spec.quant:
                    raise NotCovered(f"{tpl.op}: no output quantization defined for {t.type}")
                s, z = t.spec.quant[src]
                if t.type == "INT16" and dtype != "INT16":
                    z = 0
                t.quant = (float(np.float32(s)), int(z))
            elif tpl.same_quant and data_q is not None:
                t.quant = data_q
            elif t_idx in float_values:
                v = float_values[t_idx]
                t.quant = _act_quant(float(np.min(v)) if v.size else 0.0, float(np.max(v)) if v.size else 1.0, t.type)
            else:
                t.quant = _act_quant(-1.0, 1.0, t.type)

    # concrete arrays
    b = ModelBuilder(description="acelera conformance case")
    inputs: list[np.ndarray] = []
    for i, t in enumerate(tensors):
        if t.is_const:
            data = _materialize(t, dtype)
            t.index = b.add_constant(f"c{i}", data, t.quant)
        elif t.is_input:
            sig = (-1,) + tuple(t.shape[1:]) if dynamic_batch and t.shape else None
            t.index = b.add_input(f"in{i}", t.shape, NP[t.type], t.quant, shape_signature=sig)
            inputs.append(_materialize(t, dtype))
        else:
            t.index = b.add_tensor(f"t{i}", t.shape, NP[t.type], t.quant, is_variable=t.spec.variable)
    for k, tpl in enumerate(nodes):
        ins = [tensors[j].index if j >= 0 else -1 for j in node_in[k]]
        outs = [tensors[j].index for j in node_out[k]]
        b.add_operator(tpl.op, ins, outs, version=versions[k], custom_code=tpl.custom_code,
                       custom_options=tpl.custom_options, **dict(tpl.options))
    b.mark_outputs(*[tensors[t].index for t in graph_outputs])
    quantum = []
    for t_idx in graph_outputs:
        t = tensors[t_idx]
        if t.type in ("FLOAT32", "FLOAT16") and quantized:
            k = t.node
            quantum.append(max([_scale_of(tensors[j].quant) for j in node_in[k]
                                if j >= 0 and tensors[j].spec.role == "data"] or [0.0]))
        else:
            quantum.append(0.0)
    try:
        model = b.build()
    except Exception as e:  # an option the schema does not have, a bad value
        raise NotCovered(f"cannot build the model: {type(e).__name__}: {e}") from None
    return Built(model, inputs, quantum)


def _materialize(t: _Tensor, case_dtype: str) -> np.ndarray:
    v = t.value
    if t.spec.role in ("int", "bool"):
        return np.asarray(v, NP[t.type])
    if t.type in QUANT_DTYPES:
        assert t.quant is not None  # build_graph gives every quantized input and constant its parameters
        return _quantize(np.asarray(v, np.float64), t.quant, t.type)
    if t.type in ("INT32", "INT64"):
        if t.quant is not None and t.spec.role == "bias":
            s = np.asarray(t.quant[0], np.float64)
            q = np.round(np.asarray(v, np.float64) / s)
            return np.clip(q, -(2 ** 31), 2 ** 31 - 1).astype(NP[t.type])
        return np.round(np.asarray(v, np.float64) * 10).astype(NP[t.type])
    if t.type == "BOOL":
        return np.asarray(v) > 0
    return np.asarray(v, NP[t.type])


def _calibrate(nodes, tensors: list[_Tensor], node_in, node_out, graph_outputs) -> dict[int, np.ndarray]:
    """Run the float32 version of the graph on the reference; every tensor's float values."""
    from acelera.core.interpreter import Interpreter, OpResolverType

    b = ModelBuilder(description="acelera conformance calibration")
    idx: dict[int, int] = {}
    feeds = []

    def ftype(t: _Tensor) -> Any:
        if t.spec.role in ("int", "bool"):
            return NP[t.spec.dtype or ("BOOL" if t.spec.role == "bool" else "INT32")]
        if t.spec.dtype in ("INT32", "BOOL", "INT64"):
            return NP[t.spec.dtype]
        return np.float32

    for i, t in enumerate(tensors):
        dt = ftype(t)
        if t.is_const:
            idx[i] = b.add_constant(f"c{i}", np.asarray(t.value, dt))
        elif t.is_input:
            idx[i] = b.add_input(f"in{i}", t.shape, dt)
            feeds.append((idx[i], np.asarray(t.value, dt)))
        else:
            idx[i] = b.add_tensor(f"t{i}", t.shape, dt, is_variable=t.spec.variable)
    for k, tpl in enumerate(nodes):
        b.add_operator(tpl.op, [idx[j] if j >= 0 else -1 for j in node_in[k]], [idx[j] for j in node_out[k]],
                       version=1, custom_code=tpl.custom_code, custom_options=tpl.custom_options, **dict(tpl.options))
    b.mark_outputs(*[idx[t] for t in graph_outputs])
    try:
        it = Interpreter(model_content=b.build(), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        for i, v in feeds:
            it.set_tensor(i, v)
        with np.errstate(all="ignore"):
            it.invoke()
        return {i: it.get_tensor(idx[i]) for i, t in enumerate(tensors) if not (t.is_const or t.is_input)}
    except Exception as e:
        if reference_gap(e):
            raise NotCovered(f"cannot calibrate the quantized model: the float32 version does not run on the "
                             f"reference ({e})") from None
        raise ReferenceFailure(f"the CPU reference failed on the float32 calibration model: {e}") from None
