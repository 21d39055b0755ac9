"""Flags, config precedence, plugin discovery, broken plugins, ranking and building delegates."""
import types

import pytest

from acelera import AceleraError
from acelera.registrar import hookimpl
from acelera.registrar.config import ConfigError, apply_config
from acelera.registrar.flags import Flag, FlagError, FlagSet
from acelera.registrar.registry import Registry, RegistryError, get_registry

FIRST_PARTY = {"xnnpack-cpu", "gpu-opencl", "gpu-gl", "nnapi", "hexagon", "coreml"}


from cli_flags import UsageError, parse_cli  # noqa: E402
from plugin_helpers import EP, Echo, plugin  # noqa: E402,F401


def test_first_party_plugins_are_registered_through_entry_points():
    reg = get_registry(refresh=True)
    assert FIRST_PARTY <= set(reg.specs)
    assert not reg.broken
    assert reg.plugin_of("gpu-opencl").distribution == "acelera"
    assert reg.flagset.flags["use_gpu"].default is False
    assert reg.flagset.flags["gpu_precision_loss_allowed"].default is True


def test_allowlist_env(monkeypatch):
    monkeypatch.setenv("ACELERA_PLUGINS", "nnapi")
    assert set(Registry().specs) == {"nnapi"}
    monkeypatch.setenv("ACELERA_PLUGINS", "")
    assert Registry().specs == {}


def test_broken_plugins_are_isolated():
    def bad_hook_module():
        mod = types.SimpleNamespace(__name__="bad_hook")

        @hookimpl
        def register_delegates(register):
            raise RuntimeError("kaboom")
        mod.register_delegates = register_delegates
        return mod

    reg = Registry([EP("good", plugin("good")), EP("noimport", ImportError("No module named 'cuda'")),
                    EP("badhook", bad_hook_module()), EP("notspec", _returns_junk())])
    assert set(reg.specs) == {"good"}
    assert "failed to import: ImportError: No module named 'cuda'" in reg.broken["noimport"]
    assert "kaboom" in reg.broken["badhook"]
    assert "DelegateSpec" in reg.broken["notspec"]


def _returns_junk():
    mod = types.SimpleNamespace(__name__="junk")

    @hookimpl
    def register_delegates(register):
        register("not a spec")
    mod.register_delegates = register_delegates
    return mod


def test_flag_conflict_names_both_plugins():
    a = plugin("a", flags=(Flag("shared_level", int, 1, "", "a"),))
    b = plugin("b", flags=(Flag("shared_level", int, 2, "", "b"),))
    c = plugin("c", flags=(Flag("shared_level", int, 1, "", "c"),))
    reg = Registry([EP("a", a), EP("b", b), EP("c", c)])
    assert set(reg.specs) == {"a", "c"}
    assert "--shared_level is declared by a" in reg.broken["b"] and "differently by b" in reg.broken["b"]
    assert reg.flagset.owners["shared_level"] == ["a", "c"]


def test_flag_syntax_variants():
    """The command line's spellings, through the path users hit (tests/cli_flags.py)."""
    fs = FlagSet([Flag("use_gpu", bool, False), Flag("num_threads", int, -1), Flag("gpu_backend", str, "")])
    p = parse_cli(fs, ["--use_gpu", "--num_threads", "4", "--gpu-backend=cl"])
    assert p.values == {"use_gpu": True, "num_threads": 4, "gpu_backend": "cl"}
    p = parse_cli(fs, ["--use_gpu=0", "--num_threads=2"])
    assert p.values == {"use_gpu": False, "num_threads": 2}
    p = parse_cli(fs, ["--use_gpu", "false"])
    assert p.values["use_gpu"] is False
    for text, value in (("true", True), ("false", False), ("1", True), ("0", False), ("TRUE", True)):
        assert parse_cli(fs, [f"--use_gpu={text}"]).values["use_gpu"] is value
        assert parse_cli(fs, ["--use-gpu", text]).values["use_gpu"] is value
    assert parse_cli(fs, ["--num_threads=3", "--use_gpu"]).values["use_gpu"] is True  # bare, last
    assert parse_cli(fs, ["--use_gpu", "--num_threads=3"]).values["use_gpu"] is True  # bare, before a flag
    assert parse_cli(fs, []).values == {} and parse_cli(fs, []).get("num_threads") == -1
    with pytest.raises(UsageError) as e:
        parse_cli(fs, ["--num_thread=2"])
    assert e.value.format_message() == "No such option: --num_thread (Possible options: --num_threads)"
    with pytest.raises(UsageError, match="No such option: --gpu_backed"):
        parse_cli(fs, ["--gpu_backed", "cl"])
    with pytest.raises(FlagError, match="--use_gpu: expected true/false/1/0, got 'yes'"):
        parse_cli(fs, ["--use_gpu=yes"])
    with pytest.raises(FlagError, match="--num_threads: expected an integer"):
        parse_cli(fs, ["--num_threads=two"])
    with pytest.raises(UsageError, match="'--num_threads' requires an argument"):
        parse_cli(fs, ["--num_threads"])
    assert fs.normalize_argv(["--use-gpu", "--num_threads", "3", "pos"]) == ["--use_gpu=true", "--num_threads=3", "pos"]


def test_a_repeated_flag_keeps_its_last_value_and_position():
    fs = FlagSet([Flag("use_gpu", bool, False), Flag("num_threads", int, -1)])
    p = parse_cli(fs, ["--use_gpu=true", "--num_threads=2", "--use-gpu=false", "--num_threads", "5"])
    assert p.values == {"use_gpu": False, "num_threads": 5}
    assert p.positions["num_threads"] > p.positions["use_gpu"] > 0


def test_rank_follows_command_line_order_and_fallback():
    reg = Registry([EP("p", plugin("p")), EP("q", plugin("q"))])
    assert [s.name for s in reg.enabled(parse_cli(reg.flagset, ["--use_q", "--use_p"]))] == ["q", "p"]
    assert [s.name for s in reg.enabled(parse_cli(reg.flagset, ["--use_p=true", "--use_q=true"]))] == ["p", "q"]
    ds = reg.build(parse_cli(reg.flagset, ["--use_q", "--use_p"]))
    assert [d.name for d in ds] == ["q", "p"]


def test_gpu_backend_fallback_rules():
    gpu_flags = (Flag("gpu_backend", str, "", "", "gpu"), Flag("use_gpu", bool, False, "", "gpu"))
    cl = plugin("cl", flags=gpu_flags, available=False, enabled_by=("use_gpu",),
                wants=lambda o: o["gpu_backend"] in ("", "cl"))
    gl = plugin("gl", flags=gpu_flags, enabled_by=("use_gpu",), wants=lambda o: o["gpu_backend"] in ("", "gl"),
                fallback_for="cl")
    reg = Registry([EP("cl", cl), EP("gl", gl)])
    assert not reg.broken
    with pytest.warns(UserWarning, match="falling back to gl"):
        assert [s.name for s in reg.enabled(parse_cli(reg.flagset, ["--use_gpu"]))] == ["gl"]
    with pytest.raises(RegistryError, match="cl is unavailable: no device"):
        reg.build(parse_cli(reg.flagset, ["--use_gpu", "--gpu_backend=cl"]))


def test_load_delegate_options_and_errors():
    reg = Registry([EP("p", plugin("p", flags=(Flag("p_level", int, 3, "", "p"),)))])
    d = reg.create("p", {"p_level": "7", "max_delegated_partitions": 2})
    assert d.options["p_level"] == 7 and d.options["use_p"] is True and d.max_delegated_partitions == 2
    with pytest.raises(RegistryError, match="unknown option 'p_levle' \\(did you mean --p_level\\?\\)"):
        reg.create("p", {"p_levle": 1})
    with pytest.raises(RegistryError, match="no delegate named 'zz'"):
        reg.create("zz")
    reg2 = Registry([EP("u", plugin("u", available=False))])
    with pytest.raises(RegistryError, match="u is unavailable: no device"):
        reg2.create("u")


def test_config_precedence(tmp_path):
    fs = FlagSet([Flag("num_threads", int, -1), Flag("use_gpu", bool, False), Flag("gpu_backend", str, "")])
    cfg = tmp_path / "acelera.toml"
    cfg.write_text('num_threads = 4\nuse_gpu = true\n')
    (tmp_path / "pyproject.toml").write_text('[tool.acelera]\nnum_threads = 2\ngpu_backend = "gl"\n')
    p = apply_config(parse_cli(fs, ["--num_threads=8"]), fs, cfg, cwd=tmp_path)
    assert p.get("num_threads") == 8 and p.get("use_gpu") is True and p.get("gpu_backend") == "gl"
    assert p.sources["use_gpu"] == str(cfg)
    p = apply_config(parse_cli(fs, []), fs, None, cwd=tmp_path)
    assert p.get("num_threads") == 2 and p.get("use_gpu") is False


@pytest.mark.parametrize("text, message", [
    ("num_thread = 4", "unknown key 'num_thread' \\(did you mean --num_threads\\?\\)"),
    ('num_threads = "4"', "'num_threads' must be a int"),
    ("use_gpu = 1", "'use_gpu' must be a bool"),
    ("num_threads = ", "invalid TOML"),
])
def test_config_errors_name_the_file(tmp_path, text, message):
    fs = FlagSet([Flag("num_threads", int, -1), Flag("use_gpu", bool, False)])
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message) as e:
        apply_config(parse_cli(fs, []), fs, cfg, cwd=tmp_path)
    assert str(cfg) in str(e.value)


def test_errors_are_acelera_errors():
    assert issubclass(FlagError, AceleraError) and issubclass(RegistryError, AceleraError)
