"""Certificate reports: JSON certificate, JUnit XML, Markdown and HTML summaries, terminal lines.

- `write_json(cert, path)`: the certificate itself (`Certificate.to_dict()`; `load_json` reads
  it back, `suite.merge` combines shards).
- `write_junit(cert, path)`: one <testsuite> per certificate, one <testcase> per case
  (classname `acelera.conformance.<delegate>.<kind>`, name = case id); failures carry the
  errors, not-covered and skipped cases are <skipped/>. Suite properties hold the plugin,
  backend, platform, verdict and coverage.
- `write_markdown(cert, path)` / `write_html(cert, path)`: a summary table per op
  (versions, dtypes, cases passed / failed / not covered), then failures with their errors,
  model and behaviour cases, and the not-covered reasons.
- `summary_lines(cert)`: a few lines for the terminal.
- `write_all(cert, directory)`: all four files (certificate.json, junit.xml, summary.md,
  summary.html).
"""
from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from acelera.conformance.certificate import CaseResult, Certificate

__all__ = ["write_json", "load_json", "write_junit", "write_markdown", "write_html", "summary_lines",
           "write_all", "markdown", "op_rows"]


def _path(path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def write_json(cert: "Certificate", path: str | Path) -> Path:
    p = _path(path)
    p.write_text(json.dumps(cert.to_dict(), indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return p


def load_json(path: str | Path) -> "Certificate":
    from acelera.conformance.certificate import Certificate

    return Certificate.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


# --- JUnit -----------------------------------------------------------------------------------
def _clean(text: str) -> str:
    """Drop characters XML 1.0 cannot hold."""
    return "".join(ch for ch in str(text) if ch in "\t\n\r" or ord(ch) >= 0x20 and ord(ch) not in (0xFFFE, 0xFFFF))


def junit_tree(cert: "Certificate") -> ET.ElementTree:
    suites = ET.Element("testsuites", name="acelera conformance")
    counts = cert.counts or {}
    skipped = counts.get("not-covered", 0) + counts.get("skip", 0)
    suite = ET.SubElement(suites, "testsuite", {
        "name": f"acelera-conformance.{cert.delegate}", "tests": str(len(cert.cases)),
        "failures": str(counts.get("fail", 0)), "errors": "0", "skipped": str(skipped),
        "time": f"{cert.duration_s:.3f}", "timestamp": cert.started or "",
    })
    props = ET.SubElement(suite, "properties")
    cov = cert.coverage or {}
    for k, v in [("delegate", cert.delegate), ("verdict", cert.verdict), ("status", cert.status),
                 ("plugin", cert.plugin.get("name", "")), ("distribution", cert.plugin.get("distribution", "")),
                 ("plugin_version", cert.plugin.get("delegate_version", "")), ("backend", cert.backend),
                 ("platform", cert.platform.get("platform", "")), ("device", cert.device),
                 ("acelera_version", cert.acelera_version), ("seed", cert.seed), ("shard", cert.shard),
                 ("coverage", f"{cov.get('ops_passed', 0)}/{cov.get('ops_declared', 0)} ops")]:
        ET.SubElement(props, "property", name=str(k), value=_clean(str(v)))
    if cert.status != "certified" and not cert.cases:
        tc = ET.SubElement(suite, "testcase", classname=f"acelera.conformance.{cert.delegate}", name="availability")
        el = ET.SubElement(tc, "skipped" if cert.status == "unavailable" else "failure",
                           message=_clean(cert.reason or cert.status))
        el.text = _clean(cert.reason)
        suite.set("tests", "1")
        suite.set("skipped" if cert.status == "unavailable" else "failures", "1")
    for c in cert.cases:
        tc = ET.SubElement(suite, "testcase", classname=f"acelera.conformance.{cert.delegate}.{c.kind}",
                           name=c.id, time=f"{c.seconds:.6f}")
        msg = _clean("; ".join(c.errors)) if c.errors else ""
        if c.status == "fail":
            el = ET.SubElement(tc, "failure", message=msg[:500] or "failed", type="ConformanceFailure")
            el.text = _clean("\n".join(c.errors) + ("\n" + json.dumps(c.details, default=str) if c.details else ""))
        elif c.status in ("not-covered", "skip"):
            ET.SubElement(tc, "skipped", message=_clean(f"{c.status}: {msg}"))
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(cert: "Certificate", path: str | Path) -> Path:
    p = _path(path)
    junit_tree(cert).write(p, encoding="utf-8", xml_declaration=True)
    return p


# --- tables ----------------------------------------------------------------------------------
def op_rows(cert: "Certificate") -> list[dict[str, Any]]:
    """Per declared op: versions, dtypes, case counts by status and the op's coverage status."""
    by_op: dict[str, Counter] = defaultdict(Counter)
    for c in cert.cases:
        if c.kind in ("op", "negative") and c.op:
            by_op[c.op][c.status] += 1
    ops = (cert.coverage or {}).get("ops", {})
    rows = []
    for d in cert.declared:
        n = by_op.get(d["op"], Counter())
        vers = f"{d['min_version']}" if d["min_version"] == d["max_version"] else f"{d['min_version']}-{d['max_version']}"
        rows.append({"op": d["op"], "versions": vers, "dtypes": ", ".join(d["dtypes"]), "pass": n["pass"],
                     "fail": n["fail"], "not_covered": n["not-covered"], "skip": n["skip"],
                     "status": ops.get(d["op"], "not-covered")})
    return rows


def _headline(cert: "Certificate") -> str:
    cov = cert.coverage or {}
    if cert.status == "unavailable":
        return f"{cert.delegate}: UNAVAILABLE ({cert.reason})"
    return (f"{cert.delegate}: {cert.verdict}  ops {cov.get('ops_passed', 0)}/{cov.get('ops_declared', 0)} passed, "
            f"combinations {cov.get('combinations_passed', 0)}/{cov.get('combinations_declared', 0)}"
            + ("  (partial: shard " + cert.shard + ")" if cov.get("partial") else ""))


def summary_lines(cert: "Certificate") -> list[str]:
    """Terminal summary: verdict, coverage, counts, and the first failures."""
    lines = [_headline(cert)]
    if cert.status == "unavailable":
        return lines
    k = cert.counts or {}
    lines.append(f"  cases: {k.get('total', 0)} (of {cert.total_cases}), {k.get('pass', 0)} passed, "
                 f"{k.get('fail', 0)} failed, {k.get('not-covered', 0)} not covered, {k.get('skip', 0)} skipped; "
                 f"{cert.duration_s:.1f}s")
    lines.append(f"  {cert.plugin.get('distribution', '?')} {cert.plugin.get('distribution_version', '?')}, "
                 f"delegate {cert.delegate} {cert.plugin.get('delegate_version', '?')} ({cert.backend}); "
                 f"precision float={cert.precision.get('float')} integer={cert.precision.get('integer')}")
    fails = [c for c in cert.cases if c.status == "fail"]
    for c in fails[:10]:
        lines.append(f"  FAIL {c.id}: {(c.errors or ['failed'])[0]}")
    if len(fails) > 10:
        lines.append(f"  ... {len(fails) - 10} more failures")
    if cert.status == "error":
        lines.append(f"  error: {cert.reason}")
    return lines


def _md_cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown(cert: "Certificate") -> str:
    cov = cert.coverage or {}
    k = cert.counts or {}
    out = [f"# Conformance certificate: {cert.delegate}", "",
           f"**Verdict: {cert.verdict}**" + (f" — {cert.reason}" if cert.reason else ""), "",
           "| | |", "|---|---|",
           f"| plugin | {_md_cell(cert.plugin.get('name', '?'))} ({_md_cell(cert.plugin.get('distribution', '?'))} "
           f"{_md_cell(cert.plugin.get('distribution_version', '?'))}) |",
           f"| delegate version | {_md_cell(cert.plugin.get('delegate_version', '?'))} |",
           f"| backend | {cert.backend} |",
           f"| device | {_md_cell(cert.device)} |",
           f"| platform | {_md_cell(cert.platform.get('platform', ''))}, {_md_cell(cert.platform.get('processor', ''))} |",
           f"| acelera | {cert.acelera_version} |",
           f"| precision | float: {cert.precision.get('float')}, integer: {cert.precision.get('integer')} |",
           f"| model types | {', '.join(cert.model_types)} |",
           f"| seed / shard | {cert.seed} / {cert.shard} |",
           f"| coverage | {cov.get('ops_passed', 0)}/{cov.get('ops_declared', 0)} ops passed; "
           f"{cov.get('combinations_passed', 0)}/{cov.get('combinations_declared', 0)} (op, version, dtype) "
           f"combinations |",
           f"| cases | {k.get('total', 0)}: {k.get('pass', 0)} pass, {k.get('fail', 0)} fail, "
           f"{k.get('not-covered', 0)} not covered, {k.get('skip', 0)} skip |",
           f"| duration | {cert.duration_s:.1f} s |", ""]
    if cert.verdict_reasons:
        out += ["## Verdict reasons", ""] + [f"- {_md_cell(r)}" for r in cert.verdict_reasons] + [""]
    out += ["## Ops", "", "| op | versions | dtypes | pass | fail | not covered | status |",
            "|---|---|---|---:|---:|---:|---|"]
    for r in op_rows(cert):
        out.append(f"| {r['op']} | {r['versions']} | {r['dtypes']} | {r['pass']} | {r['fail']} | "
                   f"{r['not_covered']} | {r['status']} |")
    out.append("")
    fails = [c for c in cert.cases if c.status == "fail"]
    if fails:
        out += ["## Failures", ""]
        for c in fails:
            out.append(f"- `{c.id}`: " + _md_cell("; ".join(c.errors)))
        out.append("")
    for kind, title in (("model", "Models"), ("behaviour", "Behaviour")):
        rows = [c for c in cert.cases if c.kind == kind]
        if rows:
            out += [f"## {title}", ""]
            if kind == "model":
                out += [f"Latency: {latency_method(cert)}. Float outputs of float models are judged against "
                        f"the float64 answer, outputs of quantized models run in the float view against the "
                        f"float-view answer (float64, each op rounded to its grid), with the model's floor "
                        f"beside each error.", ""]
            out += ["| case | status | latency (us) | reference (us) | notes |", "|---|---|---:|---:|---|"]
            for c in rows:
                note = "; ".join(c.errors) if c.errors else _notes(c)
                out.append(f"| {c.id} | {c.status} | {_fmt(c.latency_us)} | {_fmt(c.reference_latency_us)} | "
                           f"{_md_cell(note)} |")
            out.append("")
    reasons = Counter((c.errors or [""])[0] for c in cert.cases if c.status == "not-covered")
    if reasons:
        out += ["## Not covered", ""] + [f"- {n} x {_md_cell(r)}" for r, n in reasons.most_common()] + [""]
    out += ["## Verdict rule", "", cert.verdict_rule, ""]
    return "\n".join(out)


def _notes(c: "CaseResult") -> str:
    d = c.details or {}
    if c.kind == "model" and "nodes" in d:
        bits = [f"{d.get('model_type', '')}; {d.get('delegated_nodes')}/{d.get('nodes')} nodes delegated"]
        for o in d.get("outputs", []):
            if "floor_steps" in o:
                avg = (f"; average {o['avg_steps']:.3g} steps, floor {o['avg_floor_steps']:.3g}, allowed "
                       f"{o['allowed_avg_steps']:.3g}" if "avg_floor_steps" in o else "")
                of = f" ({o['floor_of']})" if len(o.get("floors_steps") or {}) > 1 else ""
                bits.append(f"'{o.get('name')}': error {o['max_steps']:g} steps vs the float view, "
                            f"floor {o['floor_steps']:g}{of}, allowed {o['allowed_steps']:g}{avg}")
            elif "floor" in o:
                bits.append(f"'{o.get('name')}': error {o['max_abs_error']:.3g} vs float64, "
                            f"floor {o['floor']:.3g}, allowed {o['allowed']:.3g}")
        fl = d.get("floor")
        if fl:
            answer = fl.get("answer", "float64")
            bits.append(f"{answer} answer: {fl['float64_nodes']}/{fl['nodes']} nodes in float64, "
                        f"floor of the {fl['floor_of']}")
        lat = (d.get("latency") or {}).get("delegate")
        if lat:
            bits.append(f"latency spread {lat['min_us']:.1f}-{lat['max_us']:.1f} us")
        return "; ".join(bits)
    return str(d.get("graph", ""))


def latency_method(cert: "Certificate") -> str:
    lat = (cert.tolerances or {}).get("latency") if isinstance(cert.tolerances, dict) else None
    if not lat:
        return "one invoke per measurement"
    return f"median of {lat['runs']} invokes after {lat['warmup']} warm-up invokes, 1 thread"


def _fmt(x: Any) -> str:
    return "" if x is None else f"{x:.1f}" if isinstance(x, (int, float)) else str(x)


def write_markdown(cert: "Certificate", path: str | Path) -> Path:
    p = _path(path)
    p.write_text(markdown(cert), encoding="utf-8")
    return p


def write_html(cert: "Certificate", path: str | Path) -> Path:
    """A standalone HTML page with the same content as the Markdown summary."""
    e = html.escape
    cov = cert.coverage or {}
    color = {"PASS": "#1a7f37", "FAIL": "#cf222e"}.get(cert.verdict, "#9a6700")
    rows = "".join(
        f"<tr class='{e(r['status'])}'><td>{e(r['op'])}</td><td>{e(r['versions'])}</td><td>{e(r['dtypes'])}</td>"
        f"<td>{r['pass']}</td><td>{r['fail']}</td><td>{r['not_covered']}</td><td>{e(r['status'])}</td></tr>"
        for r in op_rows(cert))
    fails = "".join(f"<li><code>{e(c.id)}</code>: {e('; '.join(c.errors))}</li>" for c in cert.cases
                    if c.status == "fail")
    other = "".join(
        f"<tr><td>{e(c.id)}</td><td>{e(c.status)}</td><td>{_fmt(c.latency_us)}</td>"
        f"<td>{e('; '.join(c.errors) if c.errors else _notes(c))}</td></tr>"
        for c in cert.cases if c.kind in ("model", "behaviour"))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>acelera conformance: {e(cert.delegate)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px}}tr.fail td{{background:#ffebe9}}
tr.not-covered td{{color:#777}}</style></head><body>
<h1>Conformance certificate: {e(cert.delegate)}</h1>
<p style="font-size:1.4em;color:{color}"><b>{e(cert.verdict)}</b> {e(cert.reason)}</p>
<p>{e(cert.plugin.get('distribution', '?'))} {e(str(cert.plugin.get('distribution_version', '?')))},
delegate version {e(str(cert.plugin.get('delegate_version', '?')))}, backend {e(cert.backend)};
device: {e(cert.device)}; platform: {e(cert.platform.get('platform', ''))}; acelera {e(cert.acelera_version)};
seed {cert.seed}, shard {e(cert.shard)}</p>
<p>Coverage: {cov.get('ops_passed', 0)}/{cov.get('ops_declared', 0)} ops passed,
{cov.get('combinations_passed', 0)}/{cov.get('combinations_declared', 0)} combinations.</p>
<h2>Ops</h2><table><tr><th>op</th><th>versions</th><th>dtypes</th><th>pass</th><th>fail</th>
<th>not covered</th><th>status</th></tr>{rows}</table>
{'<h2>Failures</h2><ul>' + fails + '</ul>' if fails else ''}
{'<h2>Models and behaviour</h2><table><tr><th>case</th><th>status</th><th>latency (us)</th><th>notes</th></tr>' + other + '</table>' if other else ''}
<h2>Verdict rule</h2><p>{e(cert.verdict_rule)}</p>
</body></html>
"""
    p = _path(path)
    p.write_text(page, encoding="utf-8")
    return p


def write_all(cert: "Certificate", directory: str | Path) -> dict[str, Path]:
    d = Path(directory)
    return {"json": write_json(cert, d / "certificate.json"), "junit": write_junit(cert, d / "junit.xml"),
            "markdown": write_markdown(cert, d / "summary.md"), "html": write_html(cert, d / "summary.html")}
