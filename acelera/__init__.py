"""acelera: run TensorFlow Lite models through pluggable hardware delegates."""
from acelera.core.errors import AceleraError, ModelError

__version__ = "0.1.0"


def __getattr__(name: str):
    if name in ("Interpreter", "InterpreterWithCustomOps", "OpResolverType", "SignatureRunner"):
        from acelera.core import interpreter

        return getattr(interpreter, name)
    raise AttributeError(name)


def load_delegate(name: str, options: dict | None = None):
    """LiteRT's load_delegate: a plugin's delegate name (e.g. "gpu-opencl"; option keys are the
    plugin's flag names) or the path of a native TFLite delegate library (e.g. "/path/libfoo.so";
    options are the library's own), hosted through LiteRT by the `litert` plugin. A library or
    name that cannot be loaded raises a ValueError naming it (also an AceleraError)."""
    from acelera.registrar.registry import load_delegate as _load

    return _load(name, options)


__all__ = ["load_delegate", "AceleraError", "ModelError", "Interpreter", "InterpreterWithCustomOps",
           "OpResolverType", "SignatureRunner", "__version__"]
