"""acelera: run TensorFlow Lite models through pluggable hardware delegates."""
from acelera.core.errors import AceleraError, ModelError

__version__ = "0.1.0"


def _default_delegate(name: str, num_threads: int):
    """The registrar's delegate `name` with `num_threads`, or None when it is not available."""
    from acelera.registrar.registry import get_registry

    reg = get_registry()
    if name in reg.specs and reg.availability(name).ok:
        return reg.create(name, {"num_threads": num_threads})
    return None


def _foreign_delegate(d):
    """A LiteRT Delegate object hosted by the litert plugin."""
    from acelera.plugins.litert import wrap_litert_delegate

    return wrap_litert_delegate(d)


def _install_hosts() -> None:
    from acelera.core import hosts

    hosts.default_delegate = _default_delegate
    hosts.foreign_delegate = _foreign_delegate


_install_hosts()


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
