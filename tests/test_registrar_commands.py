"""The command API plugins share with the CLI (acelera.registrar.commands): a plugin's command
with its own flags, run through `acelera`'s main(), and the root group's per-app normalizer."""
from __future__ import annotations

import inspect
import sys
import types
import warnings

import pytest
import typer
from plugin_helpers import EP, plugin
from typer.testing import CliRunner

from acelera.cli.app import build_app, main, one_line_warnings, tool_logging
from acelera.cli.options import AceleraGroup
from acelera.registrar import hookimpl
from acelera.registrar.commands import declared_flags, make_command, parsed_from
from acelera.registrar.flags import Flag, FlagSet
from acelera.registrar.registry import Registry

NPU_FLAGS = FlagSet([Flag("npu_level", int, 1, "how hard to try", "my-npu", "My NPU", minimum=0, maximum=9),
                     Flag("npu_fast", bool, False, "skip checks", "my-npu", "My NPU"),
                     Flag("npu_mode", str, "auto", "mode", "my-npu", "My NPU", ("auto", "fixed"))])


def npu_tool_plugin():
    """A third-party plugin adding `npu-tool MODEL` with flags no delegate declares."""
    mod = types.SimpleNamespace(__name__="npu_tool")

    @hookimpl
    def register_delegates(register):
        pass

    @hookimpl
    def register_commands(app):
        def run(ctx, raw, model):
            parsed = parsed_from(ctx, raw, NPU_FLAGS)
            if parsed.get("npu_fast"):
                warnings.warn("fast mode skips the checks", UserWarning, stacklevel=1)
            order = sorted(parsed.positions, key=parsed.positions.get)
            print(f"{model}: {parsed.options()} set={order}")

        app.command("npu-tool", help="The plugin's tool.")(make_command("npu-tool", "", run, NPU_FLAGS.flags.values(), [
            inspect.Parameter("model", inspect.Parameter.KEYWORD_ONLY, annotation=str)]))
    mod.register_delegates = register_delegates
    mod.register_commands = register_commands
    return mod


def registry():
    return Registry([EP("npu_tool", npu_tool_plugin()), EP("p", plugin("p"))])


def test_a_plugin_command_takes_every_spelling_of_its_flags(capsys):
    with pytest.warns(UserWarning, match="fast mode"):
        assert main(["npu-tool", "m.tflite", "--npu-fast", "--npu_level", "3", "--npu_mode=fixed"],
                    registry=registry()) == 0
    out = capsys.readouterr().out
    assert "m.tflite: {'npu_level': 3, 'npu_fast': True, 'npu_mode': 'fixed'} set=['npu_fast', 'npu_level', 'npu_mode']" \
        in out
    assert main(["npu-tool", "m.tflite", "--npu_level=2", "--npu_fast", "0"], registry=registry()) == 0
    assert "{'npu_level': 2, 'npu_fast': False, 'npu_mode': 'auto'} set=['npu_level', 'npu_fast']" in \
        capsys.readouterr().out


def test_a_plugin_commands_bad_values_are_one_line_usage_errors(capsys):
    for argv, message in ((["--npu_level=12"], "error: --npu_level: 12 is out of range (allowed: [0, 9])"),
                          (["--npu_mode=turbo"], "error: --npu_mode: 'turbo' is not one of 'auto', 'fixed'"),
                          (["--npu_fast=yes"], "error: --npu_fast: expected true/false/1/0, got 'yes'"),
                          (["--npu_levle=1"], "error: No such option: --npu_levle (Possible options: --npu_level")):
        code = main(["npu-tool", "m.tflite", *argv], registry=registry())
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert code in (1, 2)


def test_a_plugin_commands_flags_have_their_own_help_panel():
    res = CliRunner().invoke(build_app(registry()), ["npu-tool", "--help"], terminal_width=200)
    assert res.exit_code == 0
    assert "My NPU" in res.output and "--npu_level" in res.output and "int32 in [0, 9], default: '1'" in res.output


def test_each_built_group_normalizes_its_own_commands_flags():
    with_tool = typer.main.get_command(build_app(registry()))
    without = typer.main.get_command(build_app(Registry([EP("p", plugin("p"))])))
    assert isinstance(with_tool, AceleraGroup) and isinstance(without, AceleraGroup)
    assert "npu_level" in with_tool.normalizer.flags and "npu_level" not in without.normalizer.flags
    assert "use_p" in with_tool.normalizer.flags and "graph" in with_tool.normalizer.flags  # delegate, tool flags
    assert "normalizer" not in vars(AceleraGroup)  # nothing shared between apps
    assert {f.name for f in declared_flags(with_tool.commands["npu-tool"])} == set(NPU_FLAGS.flags)


def test_make_command_lists_extra_parameters_then_one_text_option_per_flag():
    fn = make_command("x-tool", "doc", lambda ctx, raw, model: (model, raw), NPU_FLAGS.flags.values(),
                      [inspect.Parameter("model", inspect.Parameter.KEYWORD_ONLY, annotation=str)])
    names = list(inspect.signature(fn).parameters)
    assert names == ["ctx", "model", "npu_level", "npu_fast", "npu_mode"]
    assert fn.__name__ == "x_tool" and fn.__doc__ == "doc"
    assert fn(None, model="m", npu_level="3", npu_fast=None, npu_mode=None) == \
        ("m", {"npu_level": "3", "npu_fast": None, "npu_mode": None})


def test_warnings_are_one_line_only_while_main_runs(monkeypatch, capsys):
    before = warnings.formatwarning

    def show(message, category, filename, lineno, file=None, line=None):  # what Python's default does
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
    monkeypatch.setattr(warnings, "showwarning", show)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["npu-tool", "m.tflite", "--npu_fast"], registry=registry()) == 0
    assert capsys.readouterr().err == "WARNING: fast mode skips the checks\n"
    assert warnings.formatwarning is before
    with one_line_warnings():
        assert warnings.formatwarning("x", UserWarning, "f.py", 1) == "WARNING: x\n"
    assert warnings.formatwarning is before
    assert main(["npu-tool", "m.tflite", "--npu_level=99"], registry=registry()) == 2  # an error path restores too
    assert warnings.formatwarning is before


def test_tool_logging_only_while_main_runs(capsys):
    import logging

    logger = logging.getLogger("acelera")
    level, handlers = logger.level, list(logger.handlers)
    app_registry = registry()
    assert main(["npu-tool", "m.tflite"], registry=app_registry) == 0
    assert logger.level == level and logger.handlers == handlers
    assert main(["npu-tool", "m.tflite", "--npu_level=99"], registry=app_registry) == 2  # error path too
    assert logger.level == level and logger.handlers == handlers
    with tool_logging():
        assert logger.level == logging.INFO
        logger.info("took 3 nodes")
    assert capsys.readouterr().out.endswith("INFO: took 3 nodes\n")
    assert logger.level == level and logger.handlers == handlers
