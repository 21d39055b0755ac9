"""pluggy hook specifications for acelera plugins (group `acelera.delegates`)."""
import pluggy

hookspec = pluggy.HookspecMarker("acelera")
hookimpl = pluggy.HookimplMarker("acelera")


@hookspec
def register_delegates(register):
    """Register delegate specs by calling register(spec) once per DelegateSpec."""


@hookspec
def register_commands(app):
    """Add extra commands to the acelera typer app.

    A command with TFLite-style flags builds its function with
    `acelera.registrar.commands.make_command` and reads the values with `parsed_from`; a plugin
    never needs (and must not import) `acelera.cli`."""
