"""Plugin isolation (issue 14): a plugin that calls sys.exit(), hangs in its probe or takes
another plugin's delegate name breaks only itself; `acelera delegates list` keeps working."""
import importlib
import json
import sys
import threading
import time
import types
import warnings

import pytest
from plugin_helpers import EP, plugin

from acelera.cli.app import main
from acelera.core.delegate import Support
from acelera.registrar import hookimpl
from acelera.registrar.registry import (
    DEFAULT_PROBE_TIMEOUT,
    FIRST_PARTY_DELEGATES,
    PROBE_TIMEOUT_ENV,
    Registry,
    get_registry,
    probe_timeout,
    run_probe,
)


class ModuleEP(EP):
    """An entry point that really imports a module (from a file written by the test)."""

    def __init__(self, name, module, dist="fake-dist"):
        super().__init__(name, None, dist)
        self.module = module

    def load(self):
        return importlib.import_module(self.module)


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name, text):
        (tmp_path / f"{name}.py").write_text(text)
        sys.modules.pop(name, None)
        return name
    yield write


def hook_plugin(name, register_delegates=None, register_commands=None):
    mod = types.SimpleNamespace(__name__=f"plug_{name}")
    if register_delegates is not None:
        mod.register_delegates = hookimpl(register_delegates)
    if register_commands is not None:
        mod.register_commands = hookimpl(register_commands)
    return mod


def exiting_probe_plugin(name):
    mod = plugin(name)
    spec = None

    def grab(s):
        nonlocal spec
        spec = s
    mod.register_delegates(register=grab)
    from dataclasses import replace
    bad = replace(spec, probe=lambda: sys.exit("probe gives up"))
    mod.register_delegates = hookimpl(lambda register: register(bad))
    return mod


def list_json(capsys, reg):
    code = main(["delegates", "list", "--json"], registry=reg)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


# --- sys.exit() -----------------------------------------------------------------------------------
def test_sys_exit_at_import_marks_the_plugin_broken(plugin_dir, capsys):
    plugin_dir("exits_at_import", "import sys\nsys.exit(3)\n")
    reg = Registry([ModuleEP("exiter", "exits_at_import"), EP("good", plugin("good"))])
    assert "good" in reg.specs
    assert reg.broken["exiter"].startswith("failed to import: called sys.exit(3) at exits_at_import.py:2")
    data = list_json(capsys, reg)
    assert [d["name"] for d in data["delegates"]] == ["good"] and "exiter" in data["broken"]


def test_sys_exit_in_register_delegates(capsys):
    def register_delegates(register):
        sys.exit(0)
    reg = Registry([EP("quitter", hook_plugin("quitter", register_delegates)), EP("good", plugin("good"))])
    assert reg.broken["quitter"].startswith("failed to declare itself: called sys.exit(0)")
    assert "quitter" not in reg.pm.list_name_plugin() and "good" in reg.specs
    assert "good" in [d["name"] for d in list_json(capsys, reg)["delegates"]]


def test_sys_exit_in_the_probe_is_unavailable(capsys):
    reg = Registry([EP("bad-probe", exiting_probe_plugin("bad-probe")), EP("good", plugin("good"))])
    avail = reg.availability("bad-probe")
    assert not avail.ok and avail.reason.startswith("availability probe raised called sys.exit('probe gives up')")
    rows = {d["name"]: d for d in list_json(capsys, reg)["delegates"]}
    assert rows["good"]["available"] and not rows["bad-probe"]["available"]


def test_sys_exit_in_register_commands(capsys):
    def register_commands(app):
        sys.exit(5)
    mod = hook_plugin("cmds", lambda register: None, register_commands)
    reg = Registry([EP("cmds", mod), EP("good", plugin("good"))])
    data = list_json(capsys, reg)
    assert data["broken"]["cmds"] == "register_commands failed: called sys.exit(5)"
    code = main(["delegates", "list"], registry=reg)  # the table too
    out = capsys.readouterr().out
    assert code == 0 and "BROKEN" in out and "good" in out


def test_sys_exit_in_the_factory_is_a_registry_error(capsys, tmp_path):
    mod = plugin("dies")
    spec = []
    mod.register_delegates(register=spec.append)
    from dataclasses import replace
    bad = replace(spec[0], factory=lambda options: sys.exit(9))
    reg = Registry([EP("dies", hook_plugin("dies", lambda register: register(bad)))])
    from acelera.samples import tiny_cnn
    model = tmp_path / "m.tflite"
    model.write_bytes(tiny_cnn())
    code = main(["benchmark", f"--graph={model}", "--use_dies", "--num_runs=1"], registry=reg)
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: dies: failed to create the delegate: called sys.exit(9) at ")
    assert err.count("\n") == 1


def test_keyboard_interrupt_still_stops_the_host(plugin_dir):
    plugin_dir("interrupts", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        Registry([ModuleEP("ctrl_c", "interrupts")])


def test_other_base_exceptions_are_contained():
    class Weird(BaseException):
        pass

    def register_delegates(register):
        raise Weird("odd")
    reg = Registry([EP("weird", hook_plugin("weird", register_delegates))])
    assert reg.broken["weird"].startswith("failed to declare itself: Weird: odd")


# --- probes with a time limit ---------------------------------------------------------------------
@pytest.fixture
def hanging_probe():
    release = threading.Event()
    calls = []

    def probe():
        calls.append(1)
        release.wait()
        return Support(True)
    probe.calls = calls
    yield probe
    release.set()


def probe_threads():
    return [t for t in threading.enumerate() if t.name.startswith("acelera-probe-")]


def test_a_hanging_probe_times_out(monkeypatch, hanging_probe, capsys):
    monkeypatch.setenv(PROBE_TIMEOUT_ENV, "0.3")
    from dataclasses import replace
    mod = plugin("hangs")
    spec = []
    mod.register_delegates(register=spec.append)
    hung = replace(spec[0], probe=hanging_probe)
    reg = Registry([EP("hangs", hook_plugin("hangs", lambda register: register(hung))), EP("good", plugin("good"))])
    t0 = time.monotonic()
    avail = reg.availability("hangs")
    assert time.monotonic() - t0 < 5
    assert not avail.ok and avail.reason == "probe did not return within 0.3 s"
    assert reg.availability("hangs") is avail  # cached: not probed again
    assert len(hanging_probe.calls) == 1
    # a second registry in the same process does not start the stuck probe again
    again = Registry([EP("hangs", hook_plugin("hangs", lambda register: register(hung)))])
    t0 = time.monotonic()
    second = again.availability("hangs")
    assert time.monotonic() - t0 < 0.25
    assert not second.ok and "still running" in second.reason and len(hanging_probe.calls) == 1
    # the CLI lists it as unavailable and finishes
    rows = {d["name"]: d for d in list_json(capsys, reg)["delegates"]}
    assert rows["good"]["available"] and rows["hangs"]["reason"] == "probe did not return within 0.3 s"


def test_run_probe_passes_results_through():
    assert run_probe("ok", lambda: Support(True, "fine"), timeout=5) == Support(True, "fine")
    assert run_probe("truthy", lambda: 1, timeout=5).ok
    assert run_probe("falsy", lambda: 0, timeout=5) == Support(False, "probe said no")
    s = run_probe("raises", lambda: 1 / 0, timeout=5)
    assert not s.ok and s.reason.startswith("availability probe raised ZeroDivisionError: division by zero")
    assert not any(t.is_alive() and t.name in ("acelera-probe-ok", "acelera-probe-raises") for t in probe_threads())


def test_probe_timeout_setting(monkeypatch):
    monkeypatch.delenv(PROBE_TIMEOUT_ENV, raising=False)
    assert probe_timeout() == DEFAULT_PROBE_TIMEOUT == 20
    monkeypatch.setenv(PROBE_TIMEOUT_ENV, "2.5")
    assert probe_timeout() == 2.5
    for bad in ("soon", "nan", "inf", "-1", "0"):
        monkeypatch.setenv(PROBE_TIMEOUT_ENV, bad)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert probe_timeout() == 20
        assert PROBE_TIMEOUT_ENV in str(caught[0].message)


def test_slow_but_finishing_probe_is_available(monkeypatch):
    monkeypatch.setenv(PROBE_TIMEOUT_ENV, "10")
    s = run_probe("slow", lambda: time.sleep(0.2) or Support(True))
    assert s.ok


# --- unique delegate names ------------------------------------------------------------------------
def test_third_party_cannot_take_a_first_party_name():
    evil = EP("evil", plugin("xnnpack-cpu"), dist="evil-dist")
    mine = EP("xnnpack_cpu", plugin("xnnpack-cpu"), dist="acelera")
    reg = Registry([evil, mine])  # the third-party plugin comes first in entry-point order
    assert reg.plugin_of("xnnpack-cpu").distribution == "acelera"
    assert "xnnpack_cpu" not in reg.broken
    reason = reg.broken["evil"]
    assert "delegate name 'xnnpack-cpu' is already registered by acelera" in reason and "evil-dist" in reason


def test_first_party_names_are_reserved_even_when_not_loaded(monkeypatch):
    from importlib import metadata

    from acelera.registrar import registry as registry_module
    real = list(metadata.entry_points(group=registry_module.GROUP))
    evil = EP("evil", plugin("gpu-opencl"), dist="evil-dist")
    monkeypatch.setattr(registry_module, "metadata", types.SimpleNamespace(entry_points=lambda group: [evil] + real))
    reg = Registry(allow="evil")  # discovers the installed plugins, loads only the impostor
    assert "gpu-opencl" not in reg.specs and not reg.plugins
    assert reg.broken["evil"] == ("failed to declare itself: delegate name 'gpu-opencl' belongs to acelera's own "
                                  "plugins; evil-dist 9.9 cannot register it")
    # a registry given its entry points reserves what its first-party plugins declare
    assert "gpu-opencl" in Registry([evil]).specs


def test_second_third_party_registration_is_refused_naming_both():
    reg = Registry([EP("first", plugin("npu"), dist="npu-one"), EP("second", plugin("npu"), dist="npu-two")])
    assert reg.plugin_of("npu").distribution == "npu-one"
    assert reg.broken["second"] == ("failed to declare itself: delegate name 'npu' is already registered by "
                                    "npu-one 9.9 (plugin first); npu-two 9.9 cannot register it too")


def test_a_plugin_declaring_one_name_twice_is_refused():
    spec = []
    plugin("twice").register_delegates(register=spec.append)
    reg = Registry([EP("twice", hook_plugin("twice", lambda register: (register(spec[0]), register(spec[0]))))])
    assert "twice" not in reg.specs and "registered twice by fake-dist" in reg.broken["twice"]


def test_entry_point_name_clash_keeps_the_first():
    reg = Registry([EP("same", plugin("one"), dist="d1"), EP("same", plugin("two"), dist="d2")])
    assert "one" in reg.specs and "two" not in reg.specs
    assert reg.broken["same (d2)"] == "entry point name 'same' is already used by d1; refused from d2"


def test_real_first_party_plugins_win_against_an_impostor():
    from importlib import metadata

    from acelera.registrar.registry import GROUP
    real = list(metadata.entry_points(group=GROUP))
    reg = Registry([EP("impostor", plugin("xnnpack-cpu"), dist="impostor")] + real)
    assert reg.plugin_of("xnnpack-cpu").module == "acelera.plugins.xnnpack_cpu"
    assert "already registered by acelera" in reg.broken["impostor"]


def test_every_first_party_delegate_name_is_reserved():
    first_party = {d for p in get_registry().plugins.values() if p.distribution == "acelera" for d in p.delegates}
    assert first_party and first_party <= FIRST_PARTY_DELEGATES


# --- end to end: installed plugins, the real `acelera delegates list` -------------------------------
HANGING_PLUGIN = '''
import threading
from acelera.core.delegate import OpSupport, OpTable, Support
from acelera.registrar import hookimpl
from acelera.registrar.spec import DelegateSpec


def probe():
    threading.Event().wait()


@hookimpl
def register_delegates(register):
    table = OpTable.of([OpSupport("ADD", 1)], NAME)
    register(DelegateSpec(NAME, "test", "1.0", (), (), table, frozenset({"float32"}), "cpu", probe,
                          lambda options: None))
'''


def installed(site, dist, module, text):
    (site / f"{module}.py").write_text(text)
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[acelera.delegates]\n{module} = {module}\n")


def test_installed_misbehaving_plugins_do_not_break_delegates_list(tmp_path):
    import os
    import subprocess
    site = tmp_path / "site"
    site.mkdir()
    installed(site, "exits-at-import", "exits_at_import", "import sys\nsys.exit(7)\n")
    installed(site, "hangs-in-probe", "hangs_in_probe", "NAME = 'hangs'\n" + HANGING_PLUGIN)
    installed(site, "takes-a-name", "takes_a_name", "NAME = 'xnnpack-cpu'\n" + HANGING_PLUGIN)
    env = dict(os.environ, PYTHONPATH=str(site), **{PROBE_TIMEOUT_ENV: "1"})
    env.pop("ACELERA_PLUGINS", None)
    res = subprocess.run([sys.executable, "-m", "acelera", "delegates", "list", "--json"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    rows = {d["name"]: d for d in data["delegates"]}
    assert rows["hangs"]["reason"] == "probe did not return within 1 s" and not rows["hangs"]["available"]
    assert rows["xnnpack-cpu"]["plugin"] == "acelera"
    assert data["broken"]["exits_at_import"].startswith("failed to import: called sys.exit(7)")
    assert "already registered by acelera" in data["broken"]["takes_a_name"]
    assert "takes-a-name 1.0 cannot register it too" in data["broken"]["takes_a_name"]
    # ACELERA_PLUGINS leaving acelera's own plugins out does not free their names
    res = subprocess.run([sys.executable, "-m", "acelera", "delegates", "list", "--json"], capture_output=True,
                         text=True, env=dict(env, ACELERA_PLUGINS="takes-a-name"), timeout=120)
    data = json.loads(res.stdout)
    assert res.returncode == 0 and data["delegates"] == []
    assert "belongs to acelera's own plugins" in data["broken"]["takes_a_name"]


def test_doctor_reports_a_crashing_delegate_and_goes_on():
    from dataclasses import replace

    from plugin_helpers import Echo

    from acelera.cli.doctor import run_doctor

    class Crashes(Echo):
        def prepare(self, partition):
            sys.exit(4)

    spec = []
    plugin("crashy", ops=("CONV_2D", "ADD", "RELU")).register_delegates(register=spec.append)

    def factory(options):
        d = Crashes()
        d.name, d.op_table = "crashy", spec[0].op_table
        return d
    crashy = replace(spec[0], factory=factory)
    reg = Registry([EP("crashy", hook_plugin("crashy", lambda register: register(crashy))), EP("good", plugin("good"))])
    lines = []
    assert run_doctor(reg, lines.append) == 1
    assert "FAIL  crashy (cpu): the delegate crashed: called sys.exit(4)" in lines
    assert any(line.startswith("PASS  good (cpu)") for line in lines)
