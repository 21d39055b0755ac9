"""The two services the interpreter needs from the layers above core, plugged in from above.

`core` imports nothing above it (tests/test_layering.py), yet LiteRT's Interpreter API needs
two things only the plugin layers know: the default delegate that OpResolverType.AUTO and
BUILTIN add (xnnpack-cpu, built by the registrar), and a host for LiteRT's own Delegate
objects (the litert plugin). `acelera/__init__.py` installs both when the package is imported,
so every import path (`acelera.Interpreter`, `acelera.core.interpreter.Interpreter`) sees them;
left unset, the interpreter runs without a default delegate and refuses LiteRT delegates.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

#: (delegate name, num_threads or -1) -> that delegate, or None where it is not available
default_delegate: Optional[Callable[[str, int], Any]] = None
#: a LiteRT Delegate object -> an acelera Delegate hosting it (raises ImportError without the plugin)
foreign_delegate: Optional[Callable[[Any], Any]] = None
