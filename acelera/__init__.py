"""acelera: run TensorFlow Lite models through pluggable hardware delegates."""
from acelera.core.errors import AceleraError, ModelError

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "Interpreter":
        from acelera.core.interpreter import Interpreter

        return Interpreter
    raise AttributeError(name)


__all__ = ["AceleraError", "ModelError", "Interpreter", "__version__"]
