"""`analyze --svg/--dot/--html`: a Graphviz layout readable on a 210-node model."""
from __future__ import annotations

import re
from pathlib import Path

from acelera.cli.app import main

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"


def test_face_landmark_picture_is_laid_out_top_to_bottom_and_readable(tmp_path, capsys):
    svg, dot, page = tmp_path / "g.svg", tmp_path / "g.dot", tmp_path / "g.html"
    code = main(["analyze", str(SHARED / "face_landmark.tflite"), "--use_gpu", f"--svg={svg}", f"--dot={dot}",
                 f"--html={page}"])
    out = capsys.readouterr().out
    assert code == 0 and "graph SVG written to" in out
    text = svg.read_text()
    w, h = (int(v) for v in re.search(r'<svg width="(\d+)pt" height="(\d+)pt"', text).groups())
    assert w * 4 / 3 <= 4000 and h > w  # pt -> px at 96 dpi; top to bottom
    d = dot.read_text()
    assert "rankdir=TB" in d and "subgraph cluster_p0" in d and "cluster_legend" in d
    boxes = re.findall(r"^\s+n(\d+) \[label=", d, re.M)
    assert len(boxes) == 97  # the 113 folded DEQUANTIZE nodes are in their consumers' labels, not boxes
    assert "+ DEQUANTIZE(FLOAT16)" in d
    assert "DEPTHWISE_CONV_2D v1" in text  # whole op names
    assert text.count("<polygon") > 97  # arrowheads (and boxes)
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "gpu-opencl" in html


def test_missing_dot_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on PATH
    code = main(["analyze", str(SHARED / "sine_float.tflite"), f"--svg={tmp_path / 'g.svg'}"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: drawing the graph needs Graphviz's 'dot'")
    code = main(["analyze", str(SHARED / "sine_float.tflite"), f"--dot={tmp_path / 'g.dot'}"])
    assert code == 0 and (tmp_path / "g.dot").read_text().startswith("digraph")
