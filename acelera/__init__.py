"""acelera: run TensorFlow Lite models through pluggable hardware delegates."""
from acelera.core.errors import AceleraError, ModelError

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "Interpreter":
        from acelera.core.interpreter import Interpreter

        return Interpreter
    raise AttributeError(name)


def load_delegate(name: str, options: dict | None = None):
    """LiteRT's load_delegate, taking a plugin's delegate name (e.g. "gpu-opencl") instead of a
    library path; option keys are the plugin's flag names."""
    from acelera.registrar.registry import load_delegate as _load

    return _load(name, options)


__all__ = ["load_delegate", "AceleraError", "ModelError", "Interpreter", "__version__"]
