"""The registrar: plugin discovery, declared flags and building the delegates a user asks for."""
from acelera.registrar.hookspecs import hookimpl

__all__ = ["hookimpl"]
