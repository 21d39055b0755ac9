"""The error hierarchy: every user-facing failure is an AceleraError with a one-line message.

Errors are also the builtin exception LiteRT raises in the same situation (multiple
inheritance), so code written for `ai_edge_litert` catches them unchanged: `except ValueError`
for a bad model or a misused API, `except RuntimeError` for a call the interpreter's state
refuses, and `except acelera.AceleraError` for all of them.
"""


class AceleraError(Exception):
    """Base class of every error acelera reports to a user."""


class ModelError(AceleraError, ValueError):
    """A .tflite file is missing, truncated, corrupt, hostile or inconsistent (LiteRT: ValueError)."""


class UnsupportedOpError(AceleraError, RuntimeError):
    """A node uses an op, version or dtype combination no kernel implements (LiteRT reports an
    unresolved op at allocate_tensors with RuntimeError)."""


class InterpreterError(AceleraError, ValueError):
    """The Interpreter API was used wrongly: bad index, dtype, shape or argument (LiteRT: ValueError)."""


class InterpreterStateError(AceleraError, RuntimeError):
    """The interpreter's state refuses the call: invoke before allocate_tensors, a strict resize
    of a fixed dimension, a numpy view from tensor() still held (LiteRT: RuntimeError)."""


class KernelError(AceleraError, RuntimeError):
    """A kernel failed while preparing or running a node."""
