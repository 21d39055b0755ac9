"""`acelera select`: every applicable configuration tried and judged, the ranking, the winner as a
--config TOML file (round-tripped through `acelera benchmark --config`) and as Python, --json,
and the time budget. Models: acelera's tiny_cnn (float and full-integer) and the shared sine_float."""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from acelera.cli.app import main
from acelera.conformance.cases import accepts
from acelera.registrar.registry import get_registry
from acelera.samples import tiny_cnn
from acelera.selection import LEFTOVER_DELEGATE, PRECISION_FLAG, select, thread_counts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REG = get_registry()


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def models(tmp_path_factory, models_dir) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("select")
    (d / "tiny_float.tflite").write_bytes(tiny_cnn())
    (d / "tiny_int8.tflite").write_bytes(tiny_cnn(quantized=True))
    return {"float32": d / "tiny_float.tflite", "full-integer": d / "tiny_int8.tflite",
            "sine": models_dir / "sine_float.tflite"}


@pytest.fixture(scope="module")
def results(models, tmp_path_factory) -> dict[str, tuple[dict, Path]]:
    """`acelera select MODEL --json --out best.toml` once per model: (the JSON, the TOML file)."""
    import contextlib
    import io

    found = {}
    for kind in ("float32", "full-integer", "sine"):
        toml = tmp_path_factory.mktemp("out") / "best.toml"
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["select", str(models[kind]), "--json", "--out", str(toml), "--runs", "3"]) == 0
        found[kind] = (json.loads(buf.getvalue()), toml)
    return found


def rows_of(data: dict, delegates: tuple[str, ...]) -> list[dict]:
    return [r for r in data["configurations"] if tuple(r["delegates"]) == delegates]


@pytest.mark.parametrize("kind", ["float32", "full-integer"])
def test_the_table_has_every_applicable_configuration(results, kind):
    data = results[kind][0]
    assert data["model_type"] == kind
    (ref,) = rows_of(data, ())
    assert ref["status"] == "pass" and ref["label"] == "reference (no delegate)"
    leftover_ok = LEFTOVER_DELEGATE in REG.specs and REG.availability(LEFTOVER_DELEGATE).ok and accepts(
        REG.spec(LEFTOVER_DELEGATE).model_types, kind)
    for spec in REG.specs.values():
        rows = rows_of(data, (spec.name,))
        assert rows, f"{spec.name} is missing from the table"
        if not REG.availability(spec.name).ok:
            assert rows[0]["status"] == "skipped" and rows[0]["reason"].startswith("unavailable")
            continue
        if not accepts(spec.model_types, kind):
            assert rows[0]["status"] == "skipped" and f"{kind} model" in rows[0]["reason"]
            continue
        if not any(REG.flagset.flags[f].type is bool for f in spec.enabled_by):  # litert-external: needs a .so
            assert rows[0]["status"] == "skipped" and "--external_delegate_path" in rows[0]["reason"]
            continue
        flags = [r["flags"] for r in rows]
        assert any(set(f) <= set(spec.enabled_by) | {"gpu_backend"} for f in flags), f"{spec.name} defaults"
        if spec.backend == "cpu":
            assert sorted(f["num_threads"] for f in flags if "num_threads" in f) == thread_counts()
        if PRECISION_FLAG in {f.name for f in spec.flags}:
            assert {f.get(PRECISION_FLAG, True) for f in flags} == {True, False}
        if spec.backend != "cpu" and leftover_ok:
            (stack,) = rows_of(data, (spec.name, LEFTOVER_DELEGATE))
            assert stack["status"] in ("pass", "skipped", "fail", "error") and (stack["status"] == "pass"
                                                                               or stack["reason"])
        assert all(r["emulated"] == (spec.backend == "emulated") for r in rows)


@pytest.mark.parametrize("kind", ["float32", "full-integer"])
def test_rows_are_judged_timed_and_ranked(results, kind):
    data = results[kind][0]
    passed = [r for r in data["configurations"] if r["status"] == "pass"]
    assert [r["rank"] for r in passed] == list(range(1, len(passed) + 1))
    assert all(r["rank"] is None and r["reason"] for r in data["configurations"] if r["status"] != "pass")
    real = [r for r in passed if not r["emulated"]]
    lat = [r["latency_us"]["median_us"] for r in real]
    assert lat == sorted(lat) and passed[:len(real)] == real  # emulated ones rank after, unless allowed
    assert data["winner"] == passed[0]["label"]
    for r in passed:
        assert r["latency_us"]["runs"] == 3 and r["init_ms"] > 0
        if not r["delegates"]:
            continue
        d = r["delegation"]
        assert sum(x["nodes"] for x in d["delegates"]) + d["cpu_nodes"] + d["folded_nodes"] == d["nodes"] == 7
        assert r["precision"] and r["outputs"] and all(o["ok"] for o in r["outputs"])
        if kind == "full-integer":  # int8 outputs are judged in quantization steps
            assert all("max_steps" in o and o["max_steps"] <= o["allowed_steps"] for o in r["outputs"])
        else:
            assert all(o["max_abs_error"] <= o["allowed"] for o in r["outputs"])


def test_failing_configurations_carry_a_reason(capsys, models, tmp_path):
    strict = tmp_path / "strict.toml"
    strict.write_text("[tolerances.float16.model]\nmax_abs = 0\nrel = 0\nsteps = 0\nfloor_k = 0\n")
    code, out, _ = run_cli(capsys, "select", models["float32"], "--json", "--delegate", "nnapi",
                           "--tolerances", strict, "--allow-emulated", "--runs", "1")
    data = json.loads(out)
    (alone,) = [r for r in rows_of(data, ("nnapi",))]
    assert alone["status"] == "fail" and alone["rank"] is None
    assert alone["reason"].startswith("accuracy (float16 model tolerance): output 0 ('probabilities'): max |error|")
    assert data["winner"] == "reference (no delegate)" and code == 0


def test_a_delegate_that_breaks_is_an_error_row_not_a_crash(monkeypatch, models):
    def boom(options):
        raise RuntimeError("device on fire")

    monkeypatch.setitem(REG.specs, "hexagon", dataclasses.replace(REG.spec("hexagon"), factory=boom))
    sel = select(models["full-integer"], REG, delegates=["hexagon", LEFTOVER_DELEGATE], runs=1, allow_emulated=True)
    rows = {t.config.label: t for t in sel.trials}
    assert rows["hexagon (defaults)"].status == "error"
    assert "device on fire" in rows["hexagon (defaults)"].reason
    assert rows["hexagon + xnnpack-cpu (defaults)"].status == "skipped"
    assert rows["hexagon + xnnpack-cpu (defaults)"].reason.startswith("hexagon fails alone")
    assert sel.winner is not None and "hexagon" not in sel.winner.config.delegates


@pytest.mark.parametrize("kind", ["float32", "full-integer", "sine"])
def test_the_winner_round_trips_through_config(capsys, results, models, kind):
    data, toml = results[kind]
    text = toml.read_text()
    flags = tomllib.loads(text)["tool"]["acelera"]
    code, out, err = run_cli(capsys, "benchmark", "--config", toml, "--graph", models[kind], "--num_runs=2",
                             "--min_secs=0", "--warmup_runs=1", "--warmup_min_secs=0")
    assert code == 0, err
    assert "Inference timings in us" in out
    created = [line.split()[0] for line in out.splitlines() if " delegate created (" in line]
    enabling = {f for spec in REG.specs.values() for f in spec.enabled_by}
    if not set(flags) & enabling:
        assert "No delegate enabled" in out and not created
    else:
        assert created and all(f"--{k}" not in err for k in flags)
    assert text.splitlines()[1].startswith(f"# {data['winner']}: ")
    assert data["toml"] == text and tomllib.loads(data["toml"])["tool"]["acelera"] == flags
    winner = next(r for r in data["configurations"] if r["label"] == data["winner"])
    assert created == winner["delegates"] and flags == winner["flags"]


def test_table_and_python(capsys, models):
    code, out, err = run_cli(capsys, "select", models["sine"], "--runs", "2", "--delegate", "xnnpack-cpu")
    assert code == 0
    assert "acelera select sine_float.tflite (float32 model" in out
    assert "Winner: " in out and "[tool.acelera]" in out and "In Python:" in out
    assert "select [1/" in err  # progress, one line per configuration off a terminal
    python = out.split("In Python:\n", 1)[1]
    assert python.startswith("from acelera import Interpreter, OpResolverType, load_delegate\nit = Interpreter(")
    scope: dict = {}
    exec(python, scope)  # noqa: S102  (the snippet runs as printed)
    it = scope["it"]
    it.allocate_tensors()
    winner = out.split("Winner: ", 1)[1].split(" (", 1)[0]
    taken = set(it.delegation.node_delegate.values())
    assert taken == (set() if winner.startswith("reference") else {winner})


def test_time_budget_is_honoured(capsys, models):
    code, out, err = run_cli(capsys, "select", models["float32"], "--json", "--time-budget", "0")
    data = json.loads(out)
    assert code == 1 and "no configuration passed (time budget of 0 s spent" in err
    assert data["winner"] is None and data["not_tried"]
    assert {r["status"] for r in data["configurations"]} <= {"not tried", "skipped"}
    assert all(r["reason"] == "time budget of 0 s spent" for r in data["configurations"] if r["status"] == "not tried")

    sel = select(models["float32"], REG, time_budget=0.3, runs=2)
    tried = [t for t in sel.trials if t.status not in ("not tried", "skipped") or t.seconds]
    assert sel.not_tried and tried
    assert sum(t.seconds for t in tried[:-1]) < 0.3  # nothing started after the budget was spent


@pytest.mark.parametrize("args, code, text", [
    (["--time-budget", "-1"], 2, "--time-budget"),
    (["--runs", "0"], 2, "--runs"),
    (["--delegate", "nope"], 1, "no delegate named 'nope'"),
])
def test_bad_arguments_are_one_line_errors(capsys, models, args, code, text):
    got, _, err = run_cli(capsys, "select", models["sine"], *args)
    assert got == code and text in err and err.count("\n") == 1
