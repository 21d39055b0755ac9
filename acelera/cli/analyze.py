"""`acelera analyze`: which delegate takes each node and why the others refuse (the picture:
graph_picture.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acelera.core.executor import Executor
from acelera.core.interpreter import Interpreter
from acelera.core.partition import DelegationReport, apply_delegates
from acelera.registrar.flags import ParsedFlags
from acelera.registrar.registry import Registry


@dataclass
class Scenario:
    delegates: list[dict[str, Any]]
    report: DelegationReport


def plan(model_path: str, registry: Registry, parsed: ParsedFlags) -> tuple[Interpreter, list[Scenario]]:
    """Plan delegation without preparing anything: the enabled delegates together, or, when the
    flags enable none, every installed delegate on its own."""
    interp = Interpreter(model_path=model_path)
    ex: Executor = interp._rt.ex
    options = parsed.options()
    enabled = registry.enabled(parsed)
    groups = [enabled] if enabled else [[s] for s in registry.specs.values()]
    scenarios = []
    for specs in groups:
        delegates, info = [], []
        for spec in specs:
            avail = registry.availability(spec.name)
            d = registry._create(spec, options) if avail.ok else registry.planner(spec.name, options)
            delegates.append(d)
            info.append({"name": spec.name, "backend": spec.backend, "available": avail.ok,
                         "reason": avail.reason, "planned_from": "delegate" if avail.ok else "op table",
                         "limits": list(d.partition_limits())})
        report = apply_delegates(ex, delegates, dry_run=True)
        scenarios.append(Scenario(info, report))
    return interp, scenarios


def to_json(interp: Interpreter, scenarios: list[Scenario]) -> dict[str, Any]:
    sg = interp.model.main
    out: dict[str, Any] = {"model": interp.model.source, "nodes": len(sg.operators), "scenarios": []}
    for sc in scenarios:
        rep = sc.report
        nodes = []
        for i, op in enumerate(sg.operators):
            nodes.append({
                "index": i, "op": op.name, "builtin_code": op.builtin_code, "version": op.version,
                "delegate": rep.node_delegate.get(i), "folded": i in rep.folded,
                "rejections": [{"delegate": d, "reason": r} for d, r in rep.rejections.get(i, [])],
            })
        out["scenarios"].append({
            "delegates": sc.delegates,
            "partitions": [{"delegate": d, "nodes": list(p.nodes), "inputs": list(p.inputs),
                            "outputs": list(p.outputs)} for d, p in rep.partitions],
            "nodes": nodes,
            "summary": {d["name"]: len(rep.nodes_of(d["name"])) for d in sc.delegates} | {
                "cpu": sum(1 for n in nodes if n["delegate"] is None and not n["folded"]),
                "folded": len(rep.folded)},
        })
    return out


def text_lines(interp: Interpreter, scenarios: list[Scenario]) -> list[str]:
    sg = interp.model.main
    lines = [f"Model: {interp.model.source} ({len(sg.operators)} nodes)"]
    for sc in scenarios:
        rep = sc.report
        for d in sc.delegates:
            name = d["name"]
            status = "available" if d["available"] else f"unavailable here: {d['reason']}; planned from its op table"
            folded = set(rep.folded)
            taken = [n for n in rep.nodes_of(name) if n not in folded]
            claimed = [n for n in rep.nodes_of(name) if n in folded]
            parts = rep.partitions_of(name)
            lines.append("")
            lines.append(f"{name} ({d['backend']}, {status})")
            live = len(sg.operators) - len(folded)
            lines.append(f"  {len(taken)} of {live} nodes in {len(parts)} partition(s) ({len(folded)} more folded "
                         f"at prepare); limits: max partitions {d['limits'][0] or 'unlimited'}, "
                         f"min nodes {d['limits'][1] or 'none'}")
            if claimed:
                lines.append(f"  {len(claimed)} folded constant node(s) count as {name}'s, as TFLite's GPU delegate "
                             f"takes fp16 weights' DEQUANTIZE nodes with the graph")
            for k, p in enumerate(parts):
                lines.append(f"  partition {k}: {len(p.nodes)} nodes {_ranges(p.nodes)}")
            seen = set()
            for i in sorted(rep.rejections):
                for dn, reason in rep.rejections[i]:
                    if dn == name and reason not in seen:
                        seen.add(reason)
                        lines.append(f"  WARNING: op code #{sg.operators[i].builtin_code} cannot be handled by "
                                     f"this delegate: {reason} (first at node {i})")
        cpu = [i for i in range(len(sg.operators)) if i not in rep.node_delegate and i not in rep.folded]
        lines.append(f"  CPU reference: {len(cpu)} node(s) {_ranges(cpu)}; constant-folded at prepare: "
                     f"{len(rep.folded)} node(s) {_ranges(rep.folded)}")
        lines.append("  nodes:")
        for i, op in enumerate(sg.operators):
            where = rep.node_delegate.get(i)
            if i in rep.folded:
                where = "folded (constant, computed once at prepare" + (f"; counted as {where}'s)" if where else ")")
            elif where is None:
                where = "CPU"
                reasons = "; ".join(f"{d}: {r}" for d, r in rep.rejections.get(i, []))
                where += f" ({reasons})" if reasons else ""
            lines.append(f"    {i:4d} {op.name} v{op.version} -> {where}")
    return lines


def _ranges(nodes) -> str:
    nodes = sorted(nodes)
    if not nodes:
        return "[]"
    out, start, prev = [], nodes[0], nodes[0]
    for n in nodes[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return "[" + ", ".join(out) + "]"
