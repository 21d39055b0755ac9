"""The LiteRT op-coverage table (acelera.core.litert_ops), `acelera ops` and docs/ops.md."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from acelera.cli.app import main
from acelera.core import litert_ops as L
from acelera.core.dtypes import TYPE_NAMES
from acelera.core.kernels.registry import KernelSpec, registered
from acelera.core.opcodes import BUILTIN_CODES

DOCS = Path(__file__).resolve().parents[1] / "docs" / "ops.md"
# LiteRT builtins newer than the op codes of the `tflite` schema bindings acelera loads with
NEWER_THAN_SCHEMA = {"STABLEHLO_CASE"}


def test_docs_ops_md_is_current():
    want = L.markdown()
    have = DOCS.read_text() if DOCS.exists() else ""
    if have != want:
        old, new = have.splitlines(), want.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        pytest.fail(f"docs/ops.md differs from what the code generates (first at line {first + 1}): "
                    "run `acelera ops --markdown > docs/ops.md`")


# --- the table itself ----------------------------------------------------------------------

def test_table_lists_litert_builtin_and_custom_ops_once():
    names = [op.name for op in L.BUILTIN_OPS + L.CUSTOM_OPS]
    assert len(names) == len(set(names)) == len(L.OPS)
    assert len(L.BUILTIN_OPS) == 172 and len(L.CUSTOM_OPS) == 5
    assert not any(op.custom for op in L.BUILTIN_OPS) and all(op.custom for op in L.CUSTOM_OPS)
    assert {op.name for op in L.BUILTIN_OPS} - set(BUILTIN_CODES) <= NEWER_THAN_SCHEMA
    assert not {op.name for op in L.CUSTOM_OPS} & set(BUILTIN_CODES)


def test_table_versions_dtypes_and_sources_are_well_formed():
    for op in L.OPS.values():
        assert 1 <= op.min_version <= op.max_version, op
        assert len(op.dtypes) == len(set(op.dtypes)) and set(op.dtypes) <= set(L.SCHEMA_TYPES), op
        assert op.source.endswith((".cc", ".h")) and op.main >= 0, op
    assert L.OPS["BROADCAST_TO"].versions == range(2, 5)  # v1 was rolled back in LiteRT
    assert L.OPS["CALL_ONCE"].dtypes == ()
    assert set(L.SIZED) < set(L.BYTES) < set(L.ANY) == set(L.SCHEMA_TYPES)


def test_schema_types_agree_with_the_loader():
    assert len(L.SCHEMA_TYPES) == len(set(L.SCHEMA_TYPES)) == 23
    for code, name in TYPE_NAMES.items():
        assert L.SCHEMA_TYPES[code] == name


def test_registered_kernels_declare_schema_type_names():
    for name, spec in registered().items():
        assert set(spec.dtypes) <= set(L.SCHEMA_TYPES), (name, spec.dtypes)


# --- coverage() --------------------------------------------------------------------------------

def test_coverage_rows_follow_the_registry():
    reg = registered()
    loadable = set(TYPE_NAMES.values())
    rows = list(L.coverage())
    assert [r.op for r in rows] == [op.name for op in L.BUILTIN_OPS + L.CUSTOM_OPS]
    for r in rows:
        spec = reg.get(r.op)
        assert (r.status == L.MISSING) == (spec is None), r
        if spec is None:
            assert r.acelera_max_version is None and r.supported_versions == 0
            continue
        assert r.acelera_max_version == spec.max_version and r.acelera_dtypes == tuple(spec.dtypes)
        full = spec.max_version >= r.max_version and set(r.litert_dtypes) <= set(spec.dtypes) & loadable
        assert (r.status == L.SUPPORTED) == full, r
        assert (r.missing == "") == full, r
        assert r.supported_versions == min(spec.max_version, r.max_version) - r.min_version + 1
    s = L.summary(rows)
    assert s["ops"] == len(rows) == s[L.SUPPORTED] + s[L.PARTIAL] + s[L.MISSING]
    assert s["pairs"] == sum(len(op.versions) for op in L.OPS.values())
    assert 0 <= s["pairs_supported"] <= s["pairs"]
    assert L.acelera_only() == sorted(set(reg) - set(L.OPS))


def test_every_litert_op_is_supported():
    """No partial or missing rows: every version and every dtype (the packed INT2/UINT4 types and
    FLOAT8 included) of every op LiteRT registers."""
    rows = list(L.coverage())
    s = L.summary(rows)
    gaps = [(r.op, r.missing) for r in rows if r.status != L.SUPPORTED]
    assert s[L.PARTIAL] == 0 and s[L.MISSING] == 0 and s["pairs_supported"] == s["pairs"], gaps


def test_new_versions_are_covered():
    rows = {r.op: r for r in L.coverage()}
    for op in ("SOFTMAX", "CONCATENATION", "ADD", "MUL", "PAD", "PADV2", "SPLIT", "SPLIT_V", "SQUEEZE", "SIN",
               "COS", "PACK", "UNPACK", "GELU"):
        assert rows[op].acelera_max_version == rows[op].max_version, rows[op]
    for op in ("SOFTMAX", "SIN", "COS", "GELU", "MUL", "ADD"):
        assert "FLOAT16" in rows[op].acelera_dtypes
    assert "STRING" in rows["SQUEEZE"].acelera_dtypes and "COMPLEX64" in rows["MUL"].acelera_dtypes


def _spec(op: str, max_version: int, dtypes: tuple[str, ...]) -> KernelSpec:
    return KernelSpec(op, max_version, lambda node: None, dtypes)


def test_coverage_status_of_a_made_up_registry():
    reg = {
        "ABS": _spec("ABS", 5, ("FLOAT32", "INT8", "INT16", "INT32", "INT64")),  # more than LiteRT: fine
        "RELU": _spec("RELU", 2, ("FLOAT32", "UINT8", "INT8", "INT16")),
        "TANH": _spec("TANH", 3, ("FLOAT32", "INT8")),
        "SPLIT": _spec("SPLIT", 5, ("FLOAT32", "UINT8", "INT8", "INT16", "INT32", "INT64", "FLOAT8_E4M3FN",
                                    "FLOAT8_E5M2")),
        "MEAN": _spec("MEAN", 3, ()),
        "CALL_ONCE": _spec("CALL_ONCE", 1, ()),
        "MyOp": _spec("MyOp", 1, ("FLOAT32",)),
    }
    rows = {r.op: r for r in L.coverage(reg)}
    assert rows["ABS"].status == L.SUPPORTED and rows["CALL_ONCE"].status == L.SUPPORTED
    assert (rows["RELU"].status, rows["RELU"].missing) == (L.PARTIAL, "v3")
    assert rows["TANH"].missing == "dtypes FLOAT16, BFLOAT16, UINT8, INT16"
    assert rows["SPLIT"].status == L.SUPPORTED  # the loader knows the FLOAT8 types
    assert rows["MEAN"].missing == "dtypes not declared"
    assert rows["CONV_2D"].status == L.MISSING and rows["CONV_2D"].missing == "no kernel"
    assert rows["RELU"].supported_versions == 2 and rows["CONV_2D"].supported_versions == 0
    assert L.acelera_only(reg) == ["MyOp"]
    assert L.summary(list(rows.values()))[L.SUPPORTED] == 3
    page = L.markdown(reg)
    assert "| RELU | 1-3 | 2 | partial | v3 |" in page and "`MyOp`" in page
    assert "| CALL_ONCE | 1 | 1 | supported |  | (no input) |" in page


# --- `acelera ops` -----------------------------------------------------------------------------

def run_main(capsys, *args):
    code = main(["ops", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_json_and_missing(capsys):
    code, out, _ = run_main(capsys, "--json")
    assert code == 0
    data = json.loads(out)
    assert len(data["ops"]) == len(L.OPS) and data["summary"] == L.summary(list(L.coverage()))
    assert data["ops"][0]["op"] == "ABS" and isinstance(data["ops"][0]["litert_dtypes"], list)
    code, out, _ = run_main(capsys, "--json", "--missing")
    gaps = json.loads(out)["ops"]
    assert code == 0 and len(gaps) == data["summary"]["partial"] + data["summary"]["missing"]
    assert all(r["status"] != "supported" for r in gaps)


def test_cli_table_and_markdown(capsys):
    code, out, _ = run_main(capsys)
    assert code == 0 and "LiteRT (op, version) pairs supported" in out and "CONV_2D" in out
    code, out, _ = run_main(capsys, "--markdown")
    assert code == 0 and out == L.markdown()
    code, _, err = run_main(capsys, "--markdown", "--json")
    assert code == 2 and err.startswith("error:") and "--markdown" in err
