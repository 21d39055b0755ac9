"""Conformance case generators of the newer ops (acelera/conformance/generators_more.py).

Every (op, dtype, variant) a generator there builds must run on the CPU reference through the
suite's own path (build_graph, then suite._checked_reference: the case is produced and covered),
must carry the case dtype as the data type an op table checks, and must give LiteRT's results on
the same model bytes, which proves the generated models are valid TFLite. LiteRT runs its
BUILTIN_REF kernels, except where that resolver lacks the op (SEGMENT_SUM, STABLEHLO_AND,
STABLEHLO_SHIFT_LEFT, aeq.hadamard_rotation) or the version (RANGE v2, UNIDIRECTIONAL_SEQUENCE_LSTM v4): those cases run
in its builtin resolver. Floats agree within 1e-4 of max(1, |ref|), everything else exactly, at
the max version with the suite's case seeds and (hypothesis) at any version with any seed.
A delegate that is the CPU reference, declaring every covered op over its whole version range
and dtypes, then certifies with every declared combination covered and passed.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import run_litert
from plugin_helpers import make_plugin

from acelera.conformance import cases as C
from acelera.conformance import suite
from acelera.conformance.generators_more import DTYPES, NOT_GENERATED
from acelera.core.delegate import OpSupport, data_type
from acelera.core.executor import Executor
from acelera.core.kernels.registry import registered
from acelera.core.model import load_model
from acelera.registrar.registry import Registry

OPS = sorted(DTYPES)
#: the highest version LiteRT's BUILTIN_REF resolver registers, where it is below acelera's (0: absent)
REF_MAX_VERSION = {"SEGMENT_SUM": 0, "STABLEHLO_AND": 0, "STABLEHLO_SHIFT_LEFT": 0, "aeq.hadamard_rotation": 0,
                   "RANGE": 1, "UNIDIRECTIONAL_SEQUENCE_LSTM": 3}
#: the lowest version LiteRT registers, where it is not 1
MIN_VERSION = {"BROADCAST_TO": 2}


def _applies(tpl: C.OpTemplate, dtype: str, version: int) -> bool:
    return (tpl.dtypes is None or dtype in tpl.dtypes) and tpl.min_version <= version


def _assert_same(got: list[np.ndarray], want: list[np.ndarray], case: str) -> None:
    assert len(got) == len(want), case
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (case, k, g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind == "f":
            special = ~np.isfinite(w)  # NaN and inf (bit moves such as BITCAST make them): exact
            np.testing.assert_array_equal(g[special], w[special], err_msg=f"{case} output {k}: non-finite values")
            g, w = np.where(special, 0, g), np.where(special, 0, w)
            bound = 1e-4 * max(1.0, float(np.max(np.abs(w), initial=0.0)))
            err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)), initial=0.0))
            assert err <= bound, f"{case} output {k}: max abs error {err} > {bound}"
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{case} output {k}")


def test_every_kernel_has_a_generator_or_a_reason():
    ops = registered()
    missing = sorted(op for op in ops if C.templates_for(op) is None and op not in NOT_GENERATED)
    assert missing == []
    assert sorted(set(NOT_GENERATED) & set(C.GENERATORS)) == []


def test_case_dtypes_are_kernel_dtypes():
    ops = registered()
    for op, dtypes in DTYPES.items():
        assert dtypes and set(dtypes) <= set(ops[op].dtypes), op
        assert set(dtypes) <= set(C.NP), op


@pytest.mark.parametrize("op", OPS)
def test_cases_run_on_the_reference_and_match_litert(op):
    version = registered()[op].max_version
    litert = True if version <= REF_MAX_VERSION.get(op, version) else "builtin"
    for dtype in DTYPES[op]:
        variants = [t for t in C.templates_for(op) if _applies(t, dtype, version)]
        assert 1 <= len(variants) <= 3, (op, dtype, len(variants))
        for tpl in variants:
            case = f"op/{op}/v{version}/{dtype}/{tpl.label}"
            built = C.build_graph([tpl], dtype, version, np.random.default_rng(C.case_seed(0, case)))
            ctx = Executor(load_model(built.model).main).node_context(0)
            assert data_type(ctx) == dtype, case
            ref, _, _ = suite._checked_reference(built)
            _assert_same(ref, run_litert(built.model, built.inputs, litert), case)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(OPS), st.integers(0, 2**63 - 1), st.data())
def test_any_case_seed_and_version_matches_litert(op, seed, data):
    """The suite draws each case's values from a seed of its id: any seed, at any registered version."""
    version = data.draw(st.integers(MIN_VERSION.get(op, 1), registered()[op].max_version))
    dtype = data.draw(st.sampled_from(DTYPES[op]))
    variants = [t for t in C.templates_for(op) if _applies(t, dtype, version)]
    assert variants, (op, version, dtype)
    tpl = data.draw(st.sampled_from(variants))
    case = f"op/{op}/v{version}/{dtype}/{tpl.label} seed {seed}"
    built = C.build_graph([tpl], dtype, version, np.random.default_rng(seed))
    ref, _, _ = suite._checked_reference(built)
    litert = True if version <= REF_MAX_VERSION.get(op, version) else "builtin"
    _assert_same(ref, run_litert(built.model, built.inputs, litert), case)


def test_states_are_variable_tensors_and_int_outputs_unquantized():
    rnn = next(t for t in C.templates_for("RNN"))
    built = C.build_graph([rnn], "FLOAT32", 1, np.random.default_rng(0))
    sg = load_model(built.model).main
    state = sg.tensors[sg.operators[0].inputs[4]]
    assert state.is_variable and sg.operators[0].inputs[4] not in sg.inputs
    assert len(built.inputs) == 1

    lookup = C.templates_for("HASHTABLE_LOOKUP")[0]
    sg = load_model(C.build_graph([lookup], "INT8", 1, np.random.default_rng(0)).model).main
    values, hits = (sg.tensors[i] for i in sg.operators[0].outputs)
    table = sg.tensors[sg.operators[0].inputs[2]]
    assert hits.type_name == "UINT8" and not hits.quantization.is_set
    assert values.type_name == "INT8" and values.quantization.is_set
    assert float(values.quantization.scale[0]) == float(table.quantization.scale[0])


def test_a_reference_delegate_certifies_every_version_and_dtype(tmp_path):
    ops = registered()
    rows = [OpSupport(op, ops[op].max_version, frozenset(DTYPES[op]), min_version=MIN_VERSION.get(op, 1))
            for op in OPS]
    reg = Registry(entry_points=[make_plugin("newer", rows, precision="exact")], allow=None)
    cert = suite.certify(reg, "newer", models_dir=tmp_path)
    assert cert.verdict == "PASS", cert.verdict_reasons
    assert cert.coverage["combinations_not_covered"] == 0, cert.coverage["not_covered"]
    assert cert.coverage["ops_passed"] == len(OPS)
    op_cases = [c for c in cert.cases if c.kind == "op"]
    assert op_cases and all(c.status == "pass" for c in op_cases)
