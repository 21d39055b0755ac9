"""Builtin operator codes of the TFLite schema, by number and by name."""
from __future__ import annotations

from tflite.utils import BUILTIN_OPCODE2NAME

CUSTOM = "CUSTOM"
BUILTIN_NAMES: dict[int, str] = dict(BUILTIN_OPCODE2NAME)
BUILTIN_CODES: dict[str, int] = {v: k for k, v in BUILTIN_NAMES.items()}
