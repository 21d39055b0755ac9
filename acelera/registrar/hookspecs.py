"""pluggy hook specifications for acelera plugins (group `acelera.delegates`)."""
import pluggy

hookspec = pluggy.HookspecMarker("acelera")
hookimpl = pluggy.HookimplMarker("acelera")


@hookspec
def register_delegates(register):
    """Register delegate specs by calling register(spec) once per DelegateSpec."""


@hookspec
def register_commands(app):
    """Add extra commands to the acelera typer app."""
