"""`acelera analyze --svg/--dot/--html`: the graph laid out by Graphviz, coloured by delegate.

Top to bottom; each delegated partition is a cluster; nodes carry their whole op name and
index; constant inputs and constant-folded nodes (fp16 weights' DEQUANTIZE, ...) are folded
into their consumer's label instead of drawn as boxes; edges have arrowheads; the legend
sits in its own cluster above the graph. `dot` comes from the Debian `graphviz` package
and is driven through the `graphviz` Python package (the setup installs both).
"""
from __future__ import annotations

import html
import shutil
from typing import Any

from acelera.core.errors import AceleraError

PALETTE = ["#8ecae6", "#ffb703", "#90be6d", "#f4978e", "#cdb4db", "#a8dadc", "#ff9da7", "#c9ada7"]
CPU_COLOUR = "#ffffff"


class GraphPictureError(AceleraError):
    """Graphviz is missing or failed to lay out the graph."""


def _q(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot_source(interp: Any, scenario: Any) -> str:
    """The DOT text of the main subgraph as `scenario` places it."""
    sg = interp.model.main
    rep = scenario.report
    folded = set(rep.folded)
    colours = {d["name"]: PALETTE[k % len(PALETTE)] for k, d in enumerate(scenario.delegates)}
    producer = {t: i for i, op in enumerate(sg.operators) for t in op.outputs}
    lines = ["digraph acelera {", "  rankdir=TB; nodesep=0.25; ranksep=0.35; newrank=true;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, margin="0.08,0.03"];',
             '  edge [color="#555555", arrowsize=0.6];',
             f"  label={_q(str(interp.model.source))}; labelloc=t; fontname=Helvetica; fontsize=12;"]

    def consts_of(i: int) -> list[str]:
        """Constant inputs of node i, and folded producers, as label lines."""
        out = []
        for t in sg.operators[i].inputs:
            if t < 0:
                continue
            p = producer.get(t)
            if p is not None and p in folded:
                src = sg.operators[p]
                out.append(f"{src.name}({sg.tensors[src.inputs[0]].type_name}) {list(sg.tensors[t].shape)}")
            elif sg.tensors[t].is_constant:
                out.append(f"{sg.tensors[t].type_name} {list(sg.tensors[t].shape)}")
        return out

    def node_line(i: int) -> str:
        op = sg.operators[i]
        d = rep.node_delegate.get(i)
        fill = colours.get(d, CPU_COLOUR) if d else CPU_COLOUR
        extra = consts_of(i)
        label = f"{i}: {op.name} v{op.version}" + "".join(f"\\n+ {html.escape(c)}" for c in extra[:3])
        if len(extra) > 3:
            label += f"\\n+ {len(extra) - 3} more constant(s)"
        tip = f"node {i} {op.name} v{op.version} -> {d or 'CPU'}"
        reasons = "; ".join(f"{dn}: {r}" for dn, r in rep.rejections.get(i, []))
        if not d and reasons:
            tip += f" ({reasons})"
        return f"  n{i} [label={_q(label)}, fillcolor={_q(fill)}, tooltip={_q(tip)}];"

    in_part: set[int] = set()
    for k, (name, part) in enumerate(rep.partitions):
        members = [n for n in part.nodes if n not in folded]
        in_part.update(members)
        lines.append(f"  subgraph cluster_p{k} {{")
        lines.append(f"    label={_q(f'{name} partition {k}: {len(members)} node(s)')}; style=dashed; "
                     f"color={_q(colours.get(name, '#333333'))}; fontsize=10;")
        lines += ["  " + node_line(n) for n in members]
        lines.append("  }")
    for i in sg.execution_order:
        if i not in folded and i not in in_part:
            lines.append(node_line(i))
    for t in sg.inputs:
        lines.append(f"  t{t} [label={_q(f'input {sg.tensors[t].name} {list(sg.tensors[t].shape)}')}, "
                     f"shape=ellipse, fillcolor=\"#f8f8f8\"];")
    for t in sg.outputs:
        lines.append(f"  o{t} [label={_q(f'output {sg.tensors[t].name} {list(sg.tensors[t].shape)}')}, "
                     f"shape=ellipse, fillcolor=\"#f8f8f8\"];")
    graph_inputs = set(sg.inputs)
    for i in sg.execution_order:
        if i in folded:
            continue
        for t in sg.operators[i].inputs:
            p = producer.get(t)
            if p is not None and p not in folded:
                lines.append(f"  n{p} -> n{i};")
            elif t in graph_inputs:
                lines.append(f"  t{t} -> n{i};")
    for t in sg.outputs:
        p = producer.get(t)
        if p is not None and p not in folded:
            lines.append(f"  n{p} -> o{t};")
    legend = [(d["name"] + (" (emulated)" if d.get("backend") == "emulated" else ""), colours[d["name"]])
              for d in scenario.delegates] + [("CPU reference", CPU_COLOUR)]
    lines.append("  subgraph cluster_legend {")
    lines.append('    label="legend (constants and folded nodes are listed under their consumer)"; '
                 'fontsize=10; style=solid; color="#999999";')
    for k, (name, colour) in enumerate(legend):
        lines.append(f"    l{k} [label={_q(name)}, fillcolor={_q(colour)}];")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def render(dot: str, fmt: str = "svg") -> str:
    """Lay `dot` out with Graphviz's dot; the SVG text (GraphPictureError when dot is missing)."""
    try:
        import graphviz
    except ImportError:
        raise GraphPictureError("drawing the graph needs the 'graphviz' Python package (bash scripts/setup "
                                "installs it)") from None
    if shutil.which("dot") is None:
        raise GraphPictureError("drawing the graph needs Graphviz's 'dot' (apt-get install graphviz; "
                                "bash scripts/setup installs it); --dot writes the DOT text without it")
    try:
        return graphviz.Source(dot).pipe(format=fmt, engine="dot").decode("utf-8")
    except Exception as e:  # noqa: BLE001  (graphviz reports layout failures as CalledProcessError)
        raise GraphPictureError(f"Graphviz failed to lay out the graph: {str(e).splitlines()[0][:200]}") from None


def html_page(title: str, svg_text: str, text_lines: list[str]) -> str:
    """A self-contained HTML page: the picture inline and the analysis text below it."""
    body = svg_text[svg_text.find("<svg"):]
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(title) + "</title>"
            "<style>body{font-family:Helvetica,sans-serif;margin:1em}pre{font-size:12px}"
            "svg{max-width:100%;height:auto}</style></head><body>\n<h1>" + html.escape(title) + "</h1>\n"
            + body + "\n<pre>" + html.escape("\n".join(text_lines)) + "</pre>\n</body></html>\n")
