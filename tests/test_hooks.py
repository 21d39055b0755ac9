"""Meta-tests in datasette's style: every hook is tested and documented with its signature."""
import types
from pathlib import Path

import pytest
from plugin_helpers import EP, plugin

from acelera.cli.app import main
from acelera.registrar import hookimpl, hookspecs
from acelera.registrar.registry import Registry

HOOKS = [n for n in dir(hookspecs) if n.startswith("register_")]
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_tested(hook):
    assert f"def test_hook_{hook}" in Path(__file__).read_text()


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented(hook):
    import inspect
    args = ", ".join(inspect.signature(getattr(hookspecs, hook)).parameters)
    assert f"`{hook}({args})`" in (ROOT / "CONTRIBUTING.md").read_text()


def test_hook_register_delegates():
    reg = Registry([EP("p", plugin("p"))])
    assert "p" in reg.specs and reg.plugins["p"].delegates == ("p",)


def test_hook_register_commands(capsys):
    mod = types.SimpleNamespace(__name__="cmds")

    @hookimpl
    def register_delegates(register):
        pass

    @hookimpl
    def register_commands(app):
        @app.command("hello")
        def hello():
            print("hello from a plugin")
    mod.register_delegates = register_delegates
    mod.register_commands = register_commands
    reg = Registry([EP("cmds", mod)])
    assert main(["hello"], registry=reg) == 0
    assert "hello from a plugin" in capsys.readouterr().out
