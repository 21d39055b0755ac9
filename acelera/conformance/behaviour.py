"""Behaviour cases: on a short chain of an op the delegate declares, repeated invokes are
bit-identical, resize then invoke gives the reference result, a failing prepare falls back to
the CPU, a second delegate gets exactly the nodes the partitioning rules give it, and NaN and
+-inf inputs come out where the reference puts them (suite.py describes each).
`BehaviourCases` is mixed into suite.Certification; `special_value_errors` is the NaN / Inf rule."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from acelera.conformance import cases as C
from acelera.conformance.certificate import CaseResult
from acelera.conformance.running import (
    _feed,
    _interpreter,
    _invoke,
    _numeric,
    _out_quant,
    _outputs,
    _reference,
    _refusal_reasons,
    _same,
    _Skip,
    _Warnings,
)
from acelera.core.delegate import Delegate, OpSupport, OpTable
from acelera.core.errors import AceleraError
from acelera.core.executor import Executor
from acelera.core.interpreter import Interpreter
from acelera.core.model import load_model
from acelera.core.partition import select_partitions
from acelera.core.subplan import ReferenceKernel

if TYPE_CHECKING:
    from acelera.registrar.spec import DelegateSpec

CHAIN_OPS = ["RELU", "RELU6", "RELU_N1_TO_1", "TANH", "LOGISTIC", "ABS", "NEG", "HARD_SWISH", "ELU",
             "LEAKY_RELU", "ADD", "MUL", "SUB", "MAXIMUM", "MINIMUM", "CONV_2D", "DEPTHWISE_CONV_2D",
             "AVERAGE_POOL_2D", "MAX_POOL_2D", "PRELU", "SQUARE", "FLOOR", "CEIL", "EXP", "SIN", "COS", "GELU",
             "SQUARED_DIFFERENCE"]


CHAIN_SHAPE = (1, 6, 6, 4)


def chain_template(op: str) -> C.OpTemplate:
    """A shape-preserving single-input variant of `op` on CHAIN_SHAPE (for behaviour graphs)."""
    s = CHAIN_SHAPE
    c = s[-1]
    if op in ("ADD", "MUL", "SUB", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"):
        opts: dict[str, Any] = {"fused_activation_function": "NONE"} if op in C.FUSED_ACT_BINARY else {}
        if op in ("ADD", "SUB"):
            opts["pot_scale_int16"] = False
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)), C.T((c,), const=True, domain=(-1, 1))), (C.T(s),), opts,
                            "chain", same_quant=op in C.SAME_QUANT_BINARY)
    if op == "CONV_2D":
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)), C.T((c, 1, 1, c), role="weights", const=True, axis=0),
                                 C.T((c,), role="bias", const=True, domain=(-0.5, 0.5))), (C.T(s),),
                            C._conv_opts("SAME", 1, 1), "chain")
    if op == "DEPTHWISE_CONV_2D":
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)), C.T((1, 3, 3, c), role="weights", const=True, axis=3),
                                 C.T((c,), role="bias", const=True, domain=(-0.5, 0.5))), (C.T(s),),
                            C._conv_opts("SAME", 1, 1) | {"depth_multiplier": 1}, "chain")
    if op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        opts = {"padding": "SAME", "stride_h": 1, "stride_w": 1, "filter_height": 3, "filter_width": 3,
                "fused_activation_function": "NONE"}
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)),), (C.T(s),), opts, "chain", same_quant=True)
    if op == "PRELU":
        return C.OpTemplate(op, (C.T(s, domain=(-2, 2)), C.T((1, 1, c), role="weights", const=True, domain=(0.05, 0.5))),
                            (C.T(s),), {}, "chain")
    opts = {}
    if op == "LEAKY_RELU":
        opts = {"alpha": 0.2}
    dom = C.UNARY_DOMAIN.get(op, (-2, 2))
    return C.OpTemplate(op, (C.T(s, domain=dom),), (C.T(s, quant=C.UNARY_QUANT.get(op)),), opts, "chain")


FLT_MAX = float(np.finfo(np.float32).max)
#: the largest finite float16: a delegate computing in half overflows to +-inf beyond it
HALF_MAX = 65504.0
#: where the nan-inf case puts its special values in each float input (flat indices, taken modulo
#: the input's size; the first of each kind goes first, so that a 1-element input holds NaN)
SPECIAL_POSITIONS = {"nan": (0, 80), "+inf": (26, 107), "-inf": (49, 130)}


def with_special_values(x: np.ndarray, kinds: tuple[str, ...] = ("nan", "+inf", "-inf"),
                        offset: int = 0) -> tuple[np.ndarray, dict[str, list[int]]]:
    """A copy of float array `x` holding NaN, +inf and -inf (those of `kinds`) at
    SPECIAL_POSITIONS shifted by `offset` (so that two inputs need not hold them at the same
    place), and where each went."""
    y = np.array(x, copy=True)
    flat = y.reshape(-1)
    placed: dict[str, list[int]] = {}
    if y.dtype.kind != "f" or not flat.size:
        return y, placed
    value = {"nan": np.nan, "+inf": np.inf, "-inf": -np.inf}
    taken: set[int] = set()
    for kind in kinds:
        for p in SPECIAL_POSITIONS[kind]:
            k = (p + offset) % flat.size
            if k not in taken:
                taken.add(k)
                flat[k] = value[kind]
                placed.setdefault(kind, []).append(k)
    return y, placed


def special_value_errors(test: np.ndarray, ref: np.ndarray, label: str = "output") -> list[str]:
    """NaN / Inf agreement of a float output with the reference (empty when it agrees).

    NaN exactly where the reference has NaN (in both directions: a delegate must neither turn
    NaN into a plausible number nor make NaN of its own); where the reference is +-inf, the same
    infinity. A saturated value counts as its infinity on either side: LiteRT's float kernels
    clamp to +-FLT_MAX even without a fused activation (CalculateActivationRange), so +-FLT_MAX
    and +-inf are one answer. A delegate's +-inf where the reference is finite beyond the
    float16 range (with the same sign) is the overflow of half arithmetic, not an error.
    """
    t, r = np.asarray(test, np.float64), np.asarray(ref, np.float64)
    if t.shape != r.shape:
        return [f"{label}: shape {list(t.shape)} differs from reference {list(r.shape)}"]
    out = []

    def first(mask: np.ndarray, what: str) -> None:
        k = np.flatnonzero(mask.reshape(-1))
        if k.size:
            i = int(k[0])
            idx = list(np.unravel_index(i, r.shape)) if r.ndim else []
            out.append(f"{label}: {k.size} element(s) {what}, e.g. at {[int(v) for v in idx]}: "
                       f"test {t.reshape(-1)[i].item()!r}, reference {r.reshape(-1)[i].item()!r}")

    nan_t, nan_r = np.isnan(t), np.isnan(r)
    first(nan_r & ~nan_t, "not NaN where the reference is NaN")
    first(nan_t & ~nan_r, "NaN where the reference is not")
    with np.errstate(invalid="ignore"):
        sat_r = np.where(np.abs(r) >= FLT_MAX, np.sign(r), 0.0)
        sat_t = np.where(np.abs(t) >= FLT_MAX, np.sign(t), 0.0)
        first((sat_r != 0) & ~nan_t & (sat_t != sat_r), "not the reference's infinity")
        overflow = (np.abs(r) > HALF_MAX) & (np.sign(r) == np.sign(t))
        first(np.isinf(t) & (sat_r == 0) & ~nan_r & ~overflow, "infinite where the reference is finite")
    return out


class _HelperDelegate(Delegate):
    """A second delegate for the multi-delegate case: takes one op, runs it on the reference."""

    name = "conformance-helper"
    backend = "cpu"

    def __init__(self, op: str, dtype: str):
        super().__init__()
        self.op_table = OpTable.of([OpSupport(op, max_version=1, dtypes=frozenset({dtype}))], self.name)

    def prepare(self, partition):
        return ReferenceKernel(partition)


class _PrepareFails(Delegate):
    """Wraps a delegate so that its prepare fails after the real one has run."""

    def __init__(self, inner: Delegate):
        super().__init__(inner.max_delegated_partitions, inner.min_nodes_per_partition)
        self.inner = inner
        self.name = inner.name
        self.backend = inner.backend
        self.op_table = inner.op_table
        self.fp16_weights_aware = inner.fp16_weights_aware
        self.calls = 0

    def is_node_supported(self, node):
        return self.inner.is_node_supported(node)

    def partition_limits(self):
        return self.inner.partition_limits()

    def prepare(self, partition):
        self.calls += 1
        self.inner.prepare(partition)
        raise RuntimeError("conformance: injected failure at the end of prepare")

    def describe(self) -> str:
        return self.inner.describe()



class BehaviourCases:
    """The behaviour-case methods of a Certification (uses its delegate, table and options)."""

    if TYPE_CHECKING:  # what they use of the Certification they are mixed into
        name: str
        spec: DelegateSpec

        @property
        def table(self) -> OpTable: ...
        @property
        def delegate(self) -> Delegate: ...
        def new_delegate(self) -> Delegate: ...
        def _rng(self, case: C.Case) -> np.random.Generator: ...
        def _compare(self, res: CaseResult, outs, ref, quants, quantum, numeric: str, kind: str,
                     op: str | None) -> None: ...

    def _chain_op(self, exclude_table: OpTable | None = None, dtype: str | None = None):
        """(template, version, dtype) of an op the delegate declares that chains shape-preserving."""
        from acelera.core.kernels.registry import registered

        ref = registered()
        table = exclude_table if exclude_table is not None else self.table
        want_float = C.accepts(self.spec.model_types, "float32") or C.accepts(self.spec.model_types, "float16")
        dtypes = [dtype] if dtype else (["FLOAT32"] if want_float else []) + ["INT8", "UINT8", "INT16", "FLOAT32"]
        for dt in dict.fromkeys(dtypes):
            for op in CHAIN_OPS:
                if op not in ref:
                    continue
                row = table.rows.get(op) if exclude_table is None else None
                if exclude_table is None:
                    if row is None or dt not in row.dtypes:
                        continue
                    v = min(row.max_version, ref[op].max_version)
                    if v < row.min_version:
                        continue
                else:
                    other = table.rows.get(op)
                    if other is not None and dt in other.dtypes:
                        continue
                    v = 1
                tpl = chain_template(op)
                try:  # the reference must run it, and a declared op must pass the table's constraints
                    built = C.build_graph([tpl, tpl], dt, v, np.random.default_rng(0))
                    m = load_model(built.model)
                    ex = Executor(m.main)
                    if exclude_table is None and not all(self.table.check(ex.node_context(i)).ok
                                                         for i in range(2)):
                        continue
                    _reference(built.model, built.inputs)
                except AceleraError:
                    continue
                yield tpl, v, dt

    def _first_chain(self):
        found = next(self._chain_op(), None)
        if found is None:
            raise _Skip("no declared op the suite can chain into a behaviour graph "
                        f"(one of {', '.join(CHAIN_OPS[:8])}, ...)")
        return found

    def _run_length(self, d: Delegate) -> int:
        _, min_nodes = d.partition_limits()
        return max(2, int(min_nodes or 0))

    def _delegated_run(self, res: CaseResult, model: bytes, d: Delegate, expect_all: bool = True) -> Interpreter:
        with _Warnings() as w:
            it = _interpreter(model, [d])
            it.allocate_tensors()
        n = len(it.model.main.operators)
        taken = it.delegation.nodes_of(d.name)
        if expect_all and len(taken) != n:
            why = _refusal_reasons(it.delegation, d.name, n) or "; ".join(w.delegation())
            raise AssertionError(f"not fully delegated ({len(taken)}/{n} nodes): {why}")
        return it

    def _behaviour_repeat(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        d = self.delegate
        m = self._run_length(d)
        rng = self._rng(case)
        built = C.build_graph([tpl] * m, dt, v, rng)
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op} v{v} {dt}"
        ref, ref_us, ref_it = _reference(built.model, built.inputs)
        it = self._delegated_run(res, built.model, d)
        x = built.inputs
        other = [np.flip(a).copy() for a in x]
        _feed(it, x)
        res.latency_us = round(_invoke(it), 1)
        first = _outputs(it)
        _invoke(it)
        second = _outputs(it)
        _feed(it, other)
        _invoke(it)
        _feed(it, x)
        _invoke(it)
        third = _outputs(it)
        for k, (a, b, c) in enumerate(zip(first, second, third)):
            if not _same(a, b):
                res.errors.append(f"output {k}: a second invoke on the same input gave a different result")
            if not _same(a, c):
                res.errors.append(f"output {k}: invoking again after other inputs gave a different result")
        self._compare(res, first, ref, _out_quant(ref_it), built.quantum, _numeric(dt), "model", None)

    def _behaviour_resize(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        d = self.delegate
        m = self._run_length(d)
        built = C.build_graph([tpl] * m, dt, v, self._rng(case), dynamic_batch=True)
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op} v{v} {dt}, batch 1 -> 3"
        # A delegate may decline graphs with a dynamic dimension (NNAPI without
        # allow_dynamic_dimensions): then the CPU fallback must still give the right result.
        it = self._delegated_run(res, built.model, d, expect_all=False)
        n = len(it.model.main.operators)
        res.details["delegated_before"] = f"{len(it.delegation.nodes_of(d.name))}/{n}"
        _feed(it, built.inputs)
        _invoke(it)
        x = built.inputs[0]
        big = np.concatenate([x, np.flip(x, axis=-1), np.flip(x, axis=1) if x.ndim > 2 else x], axis=0)
        ref_it = _interpreter(built.model)
        for interp in (it, ref_it):
            interp.resize_tensor_input(interp.get_input_details()[0]["index"], list(big.shape))
            with _Warnings():
                interp.allocate_tensors()
            interp.set_tensor(interp.get_input_details()[0]["index"], big)
        res.details["delegated_after"] = f"{len(it.delegation.nodes_of(d.name))}/{n}"
        res.latency_us = round(_invoke(it), 1)
        res.reference_latency_us = round(_invoke(ref_it), 1)
        outs, ref = _outputs(it), _outputs(ref_it)
        for k, o in enumerate(outs):
            if o.shape[0] != big.shape[0]:
                res.errors.append(f"output {k} has shape {list(o.shape)} after resizing the batch to {big.shape[0]}")
        if not res.errors:
            self._compare(res, outs, ref, _out_quant(ref_it), built.quantum, _numeric(dt), "model", None)

    def _behaviour_prepare_failure(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        inner = self.new_delegate()
        d = _PrepareFails(inner)
        m = self._run_length(inner)
        built = C.build_graph([tpl] * m, dt, v, self._rng(case))
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op} v{v} {dt}"
        ref, ref_us, _ = _reference(built.model, built.inputs)
        with _Warnings() as w:
            it = _interpreter(built.model, [d])
            it.allocate_tensors()
        if not w.delegation():
            res.errors.append("no DelegationWarning was emitted when prepare failed")
        taken = it.delegation.nodes_of(d.name)
        if taken:
            res.errors.append(f"nodes {taken} stayed on the delegate although its prepare failed")
        if not d.calls:
            res.errors.append("the delegate was never asked to prepare a partition")
        _feed(it, built.inputs)
        res.latency_us = round(_invoke(it), 1)
        for k, (t, r) in enumerate(zip(_outputs(it), ref)):
            if not _same(t, r):
                res.errors.append(f"output {k}: the CPU fallback result differs from the reference")
        res.details["warning"] = (w.delegation() or [""])[0]

    def _behaviour_multi_delegate(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        helper_pick = next(self._chain_op(exclude_table=self.table, dtype=dt), None)
        if helper_pick is None:
            raise _Skip(f"every op the suite can chain is declared by {self.name} for {dt}")
        htpl, hv, _ = helper_pick
        d = self.delegate
        helper = _HelperDelegate(htpl.op, dt)
        m = self._run_length(d)
        nodes = [tpl] * m + [htpl] + [tpl] * m
        versions = [v] * m + [hv] + [v] * m
        built = C.build_graph(nodes, dt, versions, self._rng(case))
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op}, {htpl.op} (second delegate), {m} x {tpl.op}; {dt}"
        ref, ref_us, ref_it = _reference(built.model, built.inputs)
        with _Warnings() as w:
            it = _interpreter(built.model, [d, helper])
            it.allocate_tensors()
        rep = it.delegation
        runs = [list(range(m)), list(range(m + 1, 2 * m + 1))]
        max_p, min_n = d.partition_limits()
        chosen = select_partitions(runs, [1] * (2 * m + 1), max_p, min_n)
        want = {n: d.name for r in chosen for n in r}
        want[m] = helper.name
        got = {n: rep.node_delegate.get(n) for n in range(2 * m + 1)}
        expect = {n: want.get(n) for n in range(2 * m + 1)}
        res.details["expected"] = {str(k): v_ for k, v_ in expect.items()}
        res.details["assignment"] = {str(k): v_ for k, v_ in got.items()}
        if got != expect:
            why = _refusal_reasons(rep, d.name, 2 * m + 1) or "; ".join(w.delegation())
            res.errors.append(f"partitioning with a second delegate: nodes went {got}, expected {expect}"
                              + (f" ({why})" if why else ""))
            return
        _feed(it, built.inputs)
        res.latency_us = round(_invoke(it), 1)
        res.reference_latency_us = round(ref_us, 1)
        self._compare(res, _outputs(it), ref, _out_quant(ref_it), built.quantum, _numeric(dt), "model", None)

    def _behaviour_nan_inf(self, case: C.Case, res: CaseResult) -> None:
        tpl, v, dt = self._first_chain()
        if dt not in C.FLOAT_DTYPES:
            raise _Skip(f"the behaviour graph is {dt}: a quantized tensor holds no NaN or infinity")
        d = self.delegate
        m = self._run_length(d)
        built = C.build_graph([tpl] * m, dt, v, self._rng(case))
        res.op, res.version, res.dtype = tpl.op, v, dt
        res.details["graph"] = f"{m} x {tpl.op} v{v} {dt}"
        special, where = [], {}
        for k, x in enumerate(built.inputs):
            y, placed = with_special_values(x, offset=11 * k)
            special.append(y)
            if placed:
                where[f"input {k}"] = placed
        res.details["special_inputs"] = where
        ref, ref_us, ref_it = _reference(built.model, special)
        res.reference_latency_us = round(ref_us, 1)
        it = self._delegated_run(res, built.model, d)
        _feed(it, special)
        res.latency_us = round(_invoke(it), 1)
        outs = _outputs(it)
        finite_ref, finite_outs = [], []
        for k, (t, r) in enumerate(zip(outs, ref)):
            if r.dtype.kind != "f" or t.shape != r.shape or t.dtype != r.dtype:
                finite_ref.append(r)
                finite_outs.append(t)
                continue
            res.errors += special_value_errors(t, r, f"output {k}")
            with np.errstate(invalid="ignore"):
                odd = ~np.isfinite(r) | ~np.isfinite(t) | (np.abs(r) >= FLT_MAX)
            finite_ref.append(np.where(odd, 0, r).astype(r.dtype))
            finite_outs.append(np.where(odd, 0, t).astype(t.dtype))
        res.details["reference_nan"] = [int(np.isnan(r).sum()) for r in ref if r.dtype.kind == "f"]
        # the finite elements keep the usual accuracy, and NaN leaves nothing behind: the next
        # invoke on finite inputs gives the reference result
        self._compare(res, finite_outs, finite_ref, _out_quant(ref_it), built.quantum, _numeric(dt), "model", None)
        res.details["finite_outputs"] = res.details.pop("outputs", [])
        clean_ref, _, _ = _reference(built.model, built.inputs)
        _feed(it, built.inputs)
        _invoke(it)
        self._compare(res, _outputs(it), clean_ref, _out_quant(ref_it), built.quantum, _numeric(dt), "model", None)
        res.details["outputs_after"] = res.details.pop("outputs", [])
