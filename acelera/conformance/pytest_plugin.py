"""pytest plugin: run a delegate's conformance certification as parametrized tests.

    pytest --acelera-delegate NAME [--acelera-delegate OTHER] [--acelera-models DIR]
           [--acelera-seed N] [--acelera-shard i/n] [--acelera-tolerances FILE]
           [--acelera-report DIR]

Each case of the certification becomes one test item, `test_conformance[NAME:CASE-ID]`
(e.g. `test_conformance[example:op/CONV_2D/v1/FLOAT32/k3s1_same]`), so `-k`, `-x`,
`--lf` and JUnit output work as usual. Failing cases fail with the suite's errors; cases
that are not covered or not applicable are skipped with the reason; an unavailable delegate
yields one skipped item saying why. With `--acelera-report DIR` the certificate (JSON, JUnit,
Markdown, HTML) of each delegate is written there at the end of the session, built from the
cases that ran.

Which registry: the installed plugins (`acelera.registrar.registry.get_registry()`), unless
a conftest.py implements the `pytest_acelera_registry(config)` hook and returns another
Registry (a plugin's own test suite can register its module without installing it).

Spreading a certification over workers and hosts (pytest-xdist): every case is an
independent item, so `-n N` runs a delegate's cases on N local workers; each worker sends its
case results to the controller, which writes one merged certificate per delegate (the
terminal summary and `--acelera-report` are the controller's). Items carry
`xdist_group(<delegate>)`, so `--dist loadgroup` keeps each delegate on one worker (one
device per delegate), while the default `--dist load` splits a delegate's cases over all
workers. Remote hosts join with xdist's `--tx`, e.g.

    pytest --acelera-delegate gpu-opencl --acelera-report certs \
        --tx ssh=lab-a//python=/opt/acelera/.venv/bin/python --tx ssh=lab-b//python=... \
        --dist load

with acelera installed on each host (same version: the controller refuses results from a
worker whose acelera version differs) and the models at the same path (or
`--acelera-models` pointing at a shared directory).

The plugin is registered through the `pytest11` entry point; nothing is imported from
acelera until `--acelera-delegate` is given.
"""
from __future__ import annotations

import pytest


class _Hooks:
    @pytest.hookspec(firstresult=True)
    def pytest_acelera_registry(self, config):
        """Return the acelera Registry to certify delegates from (default: the installed plugins)."""


def pytest_addhooks(pluginmanager) -> None:
    pluginmanager.add_hookspecs(_Hooks)


def pytest_addoption(parser) -> None:
    group = parser.getgroup("acelera", "acelera delegate conformance")
    group.addoption("--acelera-delegate", action="append", default=[], metavar="NAME",
                    help="certify this delegate: one test per conformance case (repeatable)")
    group.addoption("--acelera-models", default=None, metavar="DIR",
                    help="models for model cases (default: $ACELERA_MODELS or ../shared/models)")
    group.addoption("--acelera-seed", type=int, default=0, metavar="N", help="seed of the case data (default 0)")
    group.addoption("--acelera-shard", default="0/1", metavar="i/n", help="run shard i of n of the case list")
    group.addoption("--acelera-tolerances", default=None, metavar="FILE", help="TOML tolerance overrides")
    group.addoption("--acelera-report", default=None, metavar="DIR",
                    help="write each delegate's certificate (JSON, JUnit, Markdown, HTML) under DIR/<name>/")


class ConformanceFailure(AssertionError):
    """A conformance case failed."""


def _skip(msg: str) -> None:
    """pytest.skip, reported at the item (not at this file's line)."""
    try:
        raise pytest.skip.Exception(msg, _use_item_location=True)
    except TypeError:  # pragma: no cover - pytest < 7
        pytest.skip(msg)


class CaseItem(pytest.Item):
    """One conformance case of one delegate."""

    def __init__(self, *, run, case, **kw):
        super().__init__(**kw)
        self.run_ = run
        self.case = case
        self.add_marker(pytest.mark.acelera_conformance)
        self.add_marker(pytest.mark.xdist_group(run.name))

    def runtest(self) -> None:
        if self.case is None:
            _skip(f"{self.run_.name} is unavailable: {self.run_.availability.reason}")
        result = self.run_.run_case(self.case)
        if _is_worker(self.config):  # which host and worker ran it, for a certificate merged over many
            import platform

            workerinput = self.config.workerinput  # type: ignore[attr-defined]  # set by pytest-xdist on its workers
            result.details["worker"] = f"{platform.node()}/{workerinput.get('workerid', '?')}"
        self.config.stash.setdefault(_RESULTS, {}).setdefault(self.run_.name, []).append(result)
        self.user_properties.append(("status", result.status))
        if result.status == "fail":
            raise ConformanceFailure("; ".join(result.errors) or "failed")
        if result.status in ("not-covered", "skip"):
            _skip(f"{result.status}: {'; '.join(result.errors)}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ConformanceFailure):
            return f"{self.case.id} ({self.case.describe()}):\n  {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return f"acelera-conformance[{self.run_.name}]", 0, f"acelera conformance {self.name}"


_RESULTS = pytest.StashKey[dict]()
_RUNS = pytest.StashKey[dict]()


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "acelera_conformance: a generated acelera delegate conformance case")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    names = config.getoption("acelera_delegate")
    if not names:
        return
    from acelera.conformance.suite import Certification
    from acelera.registrar.registry import get_registry

    registry = config.hook.pytest_acelera_registry(config=config) or get_registry()
    runs = config.stash.setdefault(_RUNS, {})
    from acelera.core.errors import AceleraError

    for name in dict.fromkeys(names):
        try:
            run = Certification(registry, name, models_dir=config.getoption("acelera_models"),
                                seed=config.getoption("acelera_seed"), shard=config.getoption("acelera_shard"),
                                tolerances=config.getoption("acelera_tolerances"))
        except (AceleraError, ValueError) as e:
            raise pytest.UsageError(f"--acelera-delegate {name}: {e}") from None
        runs[name] = run
        if not run.availability.ok:
            items.append(_item(session, name, "unavailable", run, None))
            continue
        for case in run.cases:
            items.append(_item(session, name, case.id, run, case))


def _item(session, name: str, case_id: str, run, case) -> CaseItem:
    test = f"test_conformance[{name}:{case_id}]"
    nodeid = f"acelera-conformance::{test}"
    if getattr(session.config.option, "loadgroup", False):
        nodeid += f"@{name}"  # xdist's loadgroup suffix: its own hook has run before these items exist
    return CaseItem.from_parent(session, name=test, nodeid=nodeid, run=run, case=case)


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _controller_runs(config) -> dict:
    """The controller of an xdist run collects nothing: it builds the runs to certify from."""
    runs = config.stash.get(_RUNS, None)
    if runs is None and config.getoption("acelera_delegate"):
        from acelera.conformance.suite import Certification
        from acelera.registrar.registry import get_registry

        registry = config.hook.pytest_acelera_registry(config=config) or get_registry()
        runs = config.stash[_RUNS] = {
            name: Certification(registry, name, models_dir=config.getoption("acelera_models"),
                                seed=config.getoption("acelera_seed"), shard=config.getoption("acelera_shard"),
                                tolerances=config.getoption("acelera_tolerances"))
            for name in dict.fromkeys(config.getoption("acelera_delegate"))}
    return runs or {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist controller: take the case results a worker sends back."""
    sent = getattr(node, "workeroutput", {}).get("acelera_results")
    if not sent:
        return
    import acelera
    from acelera.conformance.certificate import CaseResult

    if sent.get("version") != acelera.__version__:
        raise pytest.UsageError(f"acelera conformance: worker {getattr(node, 'gateway', node)} runs acelera "
                                f"{sent.get('version')}, the controller {acelera.__version__}")
    results = node.config.stash.setdefault(_RESULTS, {})
    for name, rows in sent["results"].items():
        results.setdefault(name, []).extend(CaseResult.from_dict(r) for r in rows)


def _ordered(run, rows: list) -> list:
    order = {c.id: k for k, c in enumerate(run.cases)}
    return sorted(rows, key=lambda r: order.get(r.id, len(order)))


def pytest_sessionfinish(session, exitstatus) -> None:
    config = session.config
    results = config.stash.get(_RESULTS, {})
    if _is_worker(config):
        if results:
            import acelera

            config.workeroutput["acelera_results"] = {
                "version": acelera.__version__,
                "results": {name: [r.to_dict() for r in rows] for name, rows in results.items()}}
        return
    out = config.getoption("acelera_report", None)
    runs = _controller_runs(config) if out else {}
    if not out or not runs:
        return
    from pathlib import Path

    from acelera.conformance import report

    for name, run in runs.items():
        cert = run.certificate(_ordered(run, results.get(name, [])))
        report.write_all(cert, Path(out) / name)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _is_worker(config):
        return
    runs = _controller_runs(config)
    if not runs:
        return
    results = config.stash.get(_RESULTS, {})
    from acelera.conformance import report

    terminalreporter.section("acelera conformance")
    for name, run in runs.items():
        cert = run.certificate(_ordered(run, results.get(name, [])))
        for line in report.summary_lines(cert):
            terminalreporter.write_line(line)
