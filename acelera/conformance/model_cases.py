"""Model cases: a real model through the inference_diff engine, its float outputs judged on
the model's numerical floor (floor.py), the outputs of a quantized model run in the float view
on the float-view floor (float_view.py), its latency measured warm (latency.py).
`ModelCases` is mixed into suite.Certification."""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from acelera.conformance import cases as C
from acelera.conformance.certificate import CaseResult
from acelera.conformance.running import (
    _average_ok,
    _feed,
    _interpreter,
    _invoke,
    _model_input,
    _numeric,
    _Warnings,
)
from acelera.core.delegate import Delegate
from acelera.core.errors import AceleraError
from acelera.core.model import load_model

if TYPE_CHECKING:
    from acelera.conformance.tolerances import Tolerance, Tolerances

MODEL_RUNS = 2  # inference_diff runs per model case (1 invocation each)


def _local_diff(model: bytes | str, d: Delegate, seed: int):
    """inference_diff's measurement for models whose input types it refuses (int16 inputs):
    MODEL_RUNS runs of uniformly random inputs over each input type's range."""
    from acelera.conformance.inference_diff import (
        DiffResult,
        LatencyStats,
        OutputDiff,
        RunningStat,
        bounded_inputs,
    )

    test, ref = _interpreter(model, [d]), _interpreter(model)
    test.allocate_tensors()
    ref.allocate_tensors()
    rng = np.random.default_rng(seed)
    bounds, notes = bounded_inputs(test)
    outs = test.get_output_details()
    errs = [RunningStat() for _ in outs]
    max_err, max_ref = [0.0] * len(outs), [0.0] * len(outs)
    lat_t, lat_r = RunningStat(), RunningStat()
    for _ in range(MODEL_RUNS):
        inputs = []
        for k, det in enumerate(test.get_input_details()):
            dt = np.dtype(det["dtype"])
            shape = tuple(int(x) for x in det["shape"])
            if k in bounds:
                inputs.append(rng.integers(bounds[k][0], bounds[k][1], shape).astype(dt))
            elif dt.kind == "f":
                inputs.append(rng.uniform(-1, 1, shape).astype(dt))
            elif dt.kind in "iu":
                info = np.iinfo(dt)
                inputs.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dt))
            else:
                inputs.append(np.zeros(shape, dt))
        _feed(test, inputs)
        _feed(ref, inputs)
        lat_t.update(_invoke(test))
        lat_r.update(_invoke(ref))
        for k, det in enumerate(outs):
            t = test.get_tensor(det["index"]).astype(np.float64)
            r = ref.get_tensor(det["index"]).astype(np.float64)
            a = np.abs(t - r)
            errs[k].update(float(a.mean()) if a.size else 0.0)
            if a.size:
                max_err[k] = max(max_err[k], float(a.max()))
                max_ref[k] = max(max_ref[k], float(np.abs(r).max()))
    od = [OutputDiff.of(k, int(det["index"]), det["name"], np.dtype(det["dtype"]).name, errs[k], max_err[k], max_ref[k])
          for k, det in enumerate(outs)]
    return DiffResult(MODEL_RUNS, LatencyStats.of(lat_r), LatencyStats.of(lat_t), od, test.delegation,
                      [(d.name, d.backend)], [(i, op.name) for i, op in enumerate(test.model.main.operators)],
                      input_notes=notes)



def _judge_float_view(entry: dict[str, Any], fo, quantum: float, tol) -> tuple[bool, str]:
    """One output of a float-view model case, judged against the float-view answer (in steps of
    `quantum`): its largest error within max(the precision's bound, floor_k x floor), then its
    average error within max(avg_steps, floor_k x average floor) (tolerances.py)."""
    bound = tol.allowed(fo.max_abs, quantum)
    allowed = tol.allowed(fo.max_abs, quantum, fo.floor)
    allowed_steps = math.floor(allowed / quantum + 1e-9)
    steps = fo.error / quantum
    steps = round(steps) if abs(steps - round(steps)) < 1e-3 else steps  # on the grid: whole steps
    floor_steps = fo.floor / quantum
    parts = {name: [round(v / quantum, 6) for v in p] for name, p in fo.parts.items()}
    entry.update(max_steps=steps, allowed_steps=allowed_steps, max_abs_error=fo.error, judged_against="float view",
                 floor=fo.floor, floor_steps=floor_steps, floor_of=max(parts, key=lambda n: parts[n][0], default=""),
                 floors_steps=parts, error_vs_reference=fo.error_vs_reference,
                 steps_vs_reference=fo.error_vs_reference / quantum, max_abs_reference=fo.max_abs,
                 allowed=allowed, precision_bound=bound, quantum=quantum)
    if steps > allowed_steps:
        return False, (f"{steps:g} quantization steps off the float-view answer (allowed {allowed_steps}: max of "
                       f"{bound / quantum:g} and {tol.floor_k:g} x floor {floor_steps:g})")
    if tol.avg_steps is None:
        return True, ""
    avg, avg_floor = fo.avg_error / quantum, fo.avg_floor / quantum
    avg_allowed = max(tol.avg_steps, tol.floor_k * avg_floor)
    entry.update(avg_steps=avg, avg_floor_steps=avg_floor, allowed_avg_steps=avg_allowed)
    return avg <= avg_allowed, (f"average error {avg:.3g} quantization steps off the float-view answer (allowed "
                                f"{avg_allowed:.3g}: max of {tol.avg_steps:g} and {tol.floor_k:g} x average floor "
                                f"{avg_floor:.3g})")


class ModelCases:
    """The model-case methods of a Certification."""

    if TYPE_CHECKING:  # what they use of the Certification they are mixed into
        seed: int
        tolerances: Tolerances

        @property
        def delegate(self) -> Delegate: ...
        def precision(self, numeric: str) -> str: ...
        def tolerance(self, numeric: str, kind: str, op: str | None = None) -> tuple[str, Tolerance]: ...

    def _run_model(self, case: C.Case, res: CaseResult) -> None:
        from acelera.conformance.inference_diff import diff

        model = _model_input(case.model)
        numeric = _numeric(None, case.model_type)
        res.details["model_type"] = case.model_type
        res.dtype = case.model_type
        from acelera.conformance.inference_diff import InferenceDiffError

        d = self.delegate
        seed = C.case_seed(self.seed, case.id) % (2 ** 32)
        try:
            with _Warnings() as w:
                result = diff(model, [d], num_runs=MODEL_RUNS, num_threads=1, invocations_per_run=1, seed=seed)
        except InferenceDiffError as e:
            # input types inference_diff does not generate (int16): the same comparison, locally
            res.details["engine"] = f"local comparison ({e})"
            with _Warnings() as w:
                result = _local_diff(model, d, seed)
        except AceleraError:
            try:
                _interpreter(model).allocate_tensors()
            except AceleraError as e2:
                if C.reference_gap(e2):
                    raise C.NotCovered(f"the CPU reference cannot run the model: {e2}") from None
                raise C.ReferenceFailure(f"the CPU reference fails on the model: {e2}") from None
            raise
        m = load_model(model)
        sg = m.main
        rep = result.delegation
        taken = rep.nodes_of(d.name)
        res.details.update({
            "nodes": len(sg.operators), "delegated_nodes": len(taken), "partitions": len(rep.partitions_of(d.name)),
            "runs": result.num_runs,
        })
        if w.delegation():
            res.details["warnings"] = w.delegation()
        self._model_latency(model, d, res)
        precision, tol = self.tolerance(numeric, "model")
        res.precision = precision
        res.details["tolerance"] = asdict(tol)
        floors = None
        if numeric == "float" and precision in ("float32", "float16") and tol.floor_k and any(
                sg.tensors[od.tensor].dtype.kind == "f" for od in result.output_errors):
            from acelera.conformance.floor import measure, to_details

            floors = measure(model, m, d, seed=seed, runs=MODEL_RUNS, half=precision == "float16")
            res.details["floor"] = to_details(floors)
        elif numeric == "integer" and precision == "float-view" and tol.floor_k:
            floors = self._float_view_floor(model, m, d, seed, res)
        float_view = floors is not None and floors.answer == "float view"
        producers = {t: op for op in sg.operators for t in op.outputs}
        per_output = []
        for od in result.output_errors:
            t = sg.tensors[od.tensor]
            q = t.quantization
            entry: dict[str, Any] = {"name": od.name, "avg_error": od.avg_value, "std_dev": od.std_deviation}
            if float_view and t.dtype.kind in "iu" and q.is_set and q.scale.size == 1 and float(q.scale[0]) > 0:
                assert floors is not None  # float_view implies it
                ok, msg = _judge_float_view(entry, floors.outputs[od.index], float(q.scale[0]), tol)
            elif t.dtype.kind in "iu" and q.is_set and q.scale.size == 1 and float(q.scale[0]) > 0:
                scale, zp = float(q.scale[0]), int(q.zero_point[0]) if q.zero_point.size else 0
                steps = od.max_abs_error
                max_ref = (od.max_abs_reference + abs(zp)) * scale
                allowed = tol.allowed(max_ref, scale)
                allowed_steps = math.floor(allowed / scale + 1e-9)
                ok = steps <= allowed_steps
                entry.update(max_steps=steps, allowed_steps=allowed_steps, max_abs_error=steps * scale)
                msg = f"{steps:g} quantization steps off (allowed {allowed_steps})"
                if ok and tol.avg_steps is not None:
                    ok, msg = _average_ok(entry, od.avg_value, tol.avg_steps)
            elif t.dtype.kind == "f":
                quantum = 0.0
                p = producers.get(od.tensor)
                if p is not None and p.op == "DEQUANTIZE" and p.inputs:
                    qi = sg.tensors[p.inputs[0]].quantization
                    quantum = float(np.max(qi.scale)) if qi.is_set else 0.0
                if float_view and quantum:
                    assert floors is not None  # float_view implies it
                    ok, msg = _judge_float_view(entry, floors.outputs[od.index], quantum, tol)
                elif floors is not None:
                    fo = floors.outputs[od.index]
                    bound = tol.allowed(fo.max_abs, quantum or None)
                    allowed = tol.allowed(fo.max_abs, quantum or None, fo.floor)
                    ok = fo.error <= allowed
                    entry.update(max_abs_error=fo.error, judged_against=floors.answer, floor=fo.floor,
                                 error_vs_reference=fo.error_vs_reference, max_abs_reference=fo.max_abs,
                                 allowed=allowed, precision_bound=bound)
                    msg = (f"max |error| vs {floors.answer} {fo.error:.6g} > allowed {allowed:.6g} "
                           f"(max of {bound:.3g} and {tol.floor_k:g} x floor {fo.floor:.3g})")
                else:
                    allowed = tol.allowed(od.max_abs_reference, quantum or None)
                    ok = od.max_abs_error <= allowed
                    entry.update(max_abs_error=od.max_abs_error, max_abs_reference=od.max_abs_reference,
                                 allowed=allowed)
                    msg = f"max |error| {od.max_abs_error:.6g} > allowed {allowed:.6g}"
                if ok and quantum and tol.avg_steps is not None and not float_view:
                    ok, msg = _average_ok(entry, od.avg_value / quantum, tol.avg_steps)
            else:
                ok = od.max_abs_error == 0
                entry.update(max_abs_error=od.max_abs_error)
                msg = f"integer output differs by up to {od.max_abs_error:g}"
            entry["ok"] = bool(ok)
            per_output.append(entry)
            if not ok:
                res.errors.append(f"output {od.index} ('{od.name}'): {msg} ({precision} tolerance)")
        res.details["outputs"] = per_output

    def _float_view_floor(self, model: bytes | str, m, d: Delegate, seed: int, res: CaseResult):
        """The float-view measurement (float_view.py), with the half-storage floor for a delegate
        that stores half (float16 precision for float cases); a model whose float-view answer
        the reference kernels cannot compute is not covered: there is nothing to ground it on."""
        from acelera.conformance.float_view import FloatViewError
        from acelera.conformance.float_view import measure as measure_float_view
        from acelera.conformance.floor import to_details

        try:
            floors = measure_float_view(model, m, d, seed=seed, runs=MODEL_RUNS,
                                        half=self.precision("float") == "float16")
        except FloatViewError as e:
            raise C.NotCovered(str(e)) from None
        res.details["floor"] = to_details(floors)
        return floors

    def _model_latency(self, model: bytes | str, d: Delegate, res: CaseResult) -> None:
        """Warm latency of the delegate and of the reference: the median of N invokes after W."""
        from acelera.conformance.inference_diff import bounded_inputs
        from acelera.conformance.latency import measure_latency

        runs, warm = self.tolerances.latency_runs, self.tolerances.latency_warmup
        test, ref = _interpreter(model, [d]), _interpreter(model)
        test.allocate_tensors()
        ref.allocate_tensors()
        bounds, _ = bounded_inputs(test)
        from acelera.conformance.floor import _inputs

        xs = _inputs(np.random.default_rng(0), test, bounds)
        _feed(test, xs)
        _feed(ref, xs)
        t, r = measure_latency(test, runs, warm), measure_latency(ref, runs, warm)
        res.latency_us, res.reference_latency_us = t.median_us, r.median_us
        res.details["latency"] = {"method": t.method, "delegate": t.to_dict(), "reference": r.to_dict()}
