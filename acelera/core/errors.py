"""The error hierarchy: every user-facing failure is an AceleraError with a one-line message."""


class AceleraError(Exception):
    """Base class of every error acelera reports to a user."""


class ModelError(AceleraError):
    """A .tflite file is truncated, corrupt, hostile or inconsistent."""


class UnsupportedOpError(AceleraError):
    """A node uses an op, version or dtype combination no kernel implements."""


class InterpreterError(AceleraError):
    """The Interpreter API was used wrongly (bad index, dtype, shape or call order)."""
