"""Builtin operator codes of the TFLite schema, by number and by name."""
from __future__ import annotations

from tflite.utils import BUILTIN_OPCODE2NAME

CUSTOM = "CUSTOM"
# Ops newer than the `tflite` schema bindings on PyPI (2.18), from LiteRT's schema.fbs.
NEWER_OPS = {209: "STABLEHLO_CASE"}
BUILTIN_NAMES: dict[int, str] = {**NEWER_OPS, **dict(BUILTIN_OPCODE2NAME)}
BUILTIN_CODES: dict[str, int] = {v: k for k, v in BUILTIN_NAMES.items()}
