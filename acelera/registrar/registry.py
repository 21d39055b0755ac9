"""Plugin discovery through entry points, broken-plugin isolation, availability and building.

Every plugin, first-party or not, is a module registered under the entry-point group
`acelera.delegates`; its `register_delegates(register)` hook declares DelegateSpecs.
`ACELERA_PLUGINS` (comma-separated entry-point or distribution names) restricts which load;
an empty value loads none. A plugin that fails to import, raises in its hook (anything short of
KeyboardInterrupt, `sys.exit()` included), or declares something inconsistent (including a flag
that conflicts with another plugin's, or a delegate name another plugin registered) is recorded in
`broken` with the reason, and the others keep working.

Delegate names are unique. acelera's own plugins (distribution `acelera`) load first, so no
other plugin can take their names; among the others the first registration wins and the second
is refused naming both distributions. A registry discovering the installed plugins also reserves
FIRST_PARTY_DELEGATES when ACELERA_PLUGINS leaves acelera's own plugins out (a registry given
its entry points, as tests build them, reserves only the names its first-party plugins declare).

Availability probes run in a daemon thread with a time limit (ACELERA_PROBE_TIMEOUT seconds,
default 20): a probe that does not return in time leaves its delegate unavailable, and is not
started again while it still runs.
"""
from __future__ import annotations

import math
import os
import threading
import traceback
import warnings
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Iterable, Mapping

import pluggy

from acelera.core.delegate import Delegate, Support
from acelera.core.errors import AceleraError
from acelera.registrar import hookspecs
from acelera.registrar.flags import FlagSet, ParsedFlags
from acelera.registrar.spec import COMMON_FLAGS, DelegateSpec

GROUP = "acelera.delegates"
#: the distribution of acelera's own plugins
FIRST_PARTY_DISTRIBUTION = "acelera"
#: the delegate names acelera's own plugins declare: no other distribution may register them
FIRST_PARTY_DELEGATES = frozenset({"xnnpack-cpu", "gpu-opencl", "gpu-gl", "nnapi", "hexagon", "coreml",
                                   "litert-external", "litert-xnnpack"})
PROBE_TIMEOUT_ENV = "ACELERA_PROBE_TIMEOUT"
DEFAULT_PROBE_TIMEOUT = 20.0


class RegistryError(AceleraError):
    """A delegate cannot be found, is unavailable, or failed to build."""


class DelegateLoadError(RegistryError, ValueError):
    """load_delegate could not load a delegate (a missing or invalid native library, no such
    plugin): a ValueError naming the path, as LiteRT's load_delegate raises."""


#: TFLite's flag for a native delegate library; the delegate it enables hosts shared libraries.
LIBRARY_FLAG = "external_delegate_path"
LIBRARY_OPTIONS_FLAG = "external_delegate_options"


@dataclass(frozen=True)
class PluginInfo:
    name: str  # entry-point name
    module: str
    distribution: str
    version: str
    delegates: tuple[str, ...]


def _summary(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    if isinstance(e, SystemExit):
        return f"called sys.exit({e.code!r}){where}"
    text = str(e)
    return f"{type(e).__name__}: {text}{where}" if text else f"{type(e).__name__}{where}"


def _fatal(e: BaseException) -> bool:
    """Whether a plugin's exception must reach the user: only Ctrl-C (KeyboardInterrupt) does;
    SystemExit, GeneratorExit and every Exception mark the plugin broken instead."""
    return isinstance(e, KeyboardInterrupt)


def probe_timeout() -> float:
    """Seconds a probe may take: ACELERA_PROBE_TIMEOUT, or 20 (a bad value warns, 20 is used)."""
    text = os.environ.get(PROBE_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_PROBE_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > 86400:
        warnings.warn(f"{PROBE_TIMEOUT_ENV}={text!r} is not a number of seconds in (0, 86400]; "
                      f"using {DEFAULT_PROBE_TIMEOUT:g}", stacklevel=3)
        return DEFAULT_PROBE_TIMEOUT
    return value


#: probes still running after their time limit, by id() of the probe (the running thread keeps
#: the probe alive, so the id is not reused meanwhile): never started twice at once
_stuck_probes: dict[int, threading.Thread] = {}
_stuck_lock = threading.Lock()


def run_probe(name: str, probe: Any, timeout: float | None = None) -> Support:
    """A delegate's availability probe with a time limit: its Support, or an unavailable Support
    when it raises (anything short of KeyboardInterrupt) or does not return within `timeout`
    seconds (then it keeps running in a daemon thread, and is not started again meanwhile)."""
    timeout = probe_timeout() if timeout is None else timeout
    with _stuck_lock:
        stuck = _stuck_probes.get(id(probe))
        if stuck is not None and stuck.is_alive():
            return Support(False, f"probe did not return within {timeout:g} s (an earlier call is still running)")
        _stuck_probes.pop(id(probe), None)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            s = probe()
            box["support"] = s if isinstance(s, Support) else Support(bool(s), "" if s else "probe said no")
        except BaseException as e:  # noqa: BLE001  (a probe never takes the host down)
            box["error"] = e

    thread = threading.Thread(target=target, name=f"acelera-probe-{name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        with _stuck_lock:
            _stuck_probes[id(probe)] = thread
        return Support(False, f"probe did not return within {timeout:g} s")
    if "error" in box:
        e = box["error"]
        if _fatal(e):
            raise e
        return Support(False, f"availability probe raised {_summary(e)}")
    return box["support"]


class Registry:
    """The installed delegate plugins and the flags they declare."""

    def __init__(self, entry_points: Iterable[Any] | None = None, allow: str | None = None):
        self.pm = pluggy.PluginManager("acelera")
        self.pm.add_hookspecs(hookspecs)
        self.specs: dict[str, DelegateSpec] = {}
        self.broken: dict[str, str] = {}
        self.plugins: dict[str, PluginInfo] = {}
        self.flagset = FlagSet(COMMON_FLAGS)
        self._availability: dict[str, Support] = {}
        if allow is None:
            allow = os.environ.get("ACELERA_PLUGINS")
        #: names no plugin outside distribution `acelera` may register, loaded or not
        self.reserved: frozenset[str] = FIRST_PARTY_DELEGATES if entry_points is None else frozenset()
        eps = list(entry_points if entry_points is not None else metadata.entry_points(group=GROUP))
        # acelera's own plugins first: their delegate names cannot be taken by a later plugin
        eps.sort(key=lambda ep: _distribution(ep)[0] != FIRST_PARTY_DISTRIBUTION)
        for ep in eps:
            dist, version = _distribution(ep)
            if allow is not None and ep.name not in _split(allow) and dist not in _split(allow):
                continue
            self.load_plugin(ep.name, ep.load, dist, version)

    def load_plugin(self, name: str, loader, distribution: str = "?", version: str = "?") -> None:
        """Import one plugin and collect its specs; failures mark it broken."""
        if name in self.plugins or name in self.broken:
            taken = self.plugins[name].distribution if name in self.plugins else "a broken plugin"
            key = f"{name} ({distribution})"
            self.broken[key] = f"entry point name '{name}' is already used by {taken}; refused from {distribution}"
            return
        try:
            module = loader()
            self.pm.register(module, name=name)
        except BaseException as e:  # noqa: BLE001  (sys.exit() in a plugin breaks only that plugin)
            if _fatal(e):
                raise
            self.broken[name] = f"failed to import: {_summary(e)}"
            return
        declared: list[DelegateSpec] = []
        try:
            for impl in self.pm.hook.register_delegates.get_hookimpls():
                if impl.plugin_name == name:
                    impl.function(register=declared.append)
            seen: set[str] = set()
            for spec in declared:
                if not isinstance(spec, DelegateSpec):
                    raise TypeError(f"register() takes DelegateSpec objects, got {type(spec).__name__}")
                spec.validate()
                self._check_name(spec.name, distribution, version)
                if spec.name in seen:
                    raise ValueError(f"delegate name '{spec.name}' is registered twice by {distribution}")
                seen.add(spec.name)
            self.flagset.check_compatible(f for s in declared for f in s.flags)
        except BaseException as e:  # noqa: BLE001
            if _fatal(e):
                raise
            self.pm.unregister(name=name)
            self.broken[name] = f"failed to declare itself: {e if isinstance(e, AceleraError) else _summary(e)}"
            return
        for spec in declared:
            self.specs[spec.name] = spec
            for f in spec.flags:
                self.flagset.add(f)
        self.plugins[name] = PluginInfo(name, getattr(module, "__name__", "?"), distribution, version,
                                        tuple(s.name for s in declared))

    def _check_name(self, delegate: str, distribution: str, version: str) -> None:
        """Refuse a delegate name already registered, or reserved for acelera's own plugins."""
        owner = self.plugin_of(delegate)
        if owner is not None:
            raise RegistryError(f"delegate name '{delegate}' is already registered by {owner.distribution} "
                                f"{owner.version} (plugin {owner.name}); {distribution} {version} cannot "
                                f"register it too")
        if delegate in self.specs:
            raise RegistryError(f"delegate name '{delegate}' is already registered; {distribution} {version} "
                                f"cannot register it too")
        if delegate in self.reserved and distribution != FIRST_PARTY_DISTRIBUTION:
            raise RegistryError(f"delegate name '{delegate}' belongs to {FIRST_PARTY_DISTRIBUTION}'s own "
                                f"plugins; {distribution} {version} cannot register it")

    # --- queries -------------------------------------------------------------------------
    def spec(self, name: str) -> DelegateSpec:
        if name not in self.specs:
            known = ", ".join(sorted(self.specs)) or "none"
            hint = f"; broken plugins: {', '.join(sorted(self.broken))}" if self.broken else ""
            raise RegistryError(f"no delegate named '{name}' (installed: {known}{hint})")
        return self.specs[name]

    def availability(self, name: str) -> Support:
        """The plugin's availability probe, run once per process with a time limit (run_probe);
        exceptions and a probe that does not return in time count as unavailable."""
        if name not in self._availability:
            spec = self.spec(name)
            self._availability[name] = run_probe(name, spec.probe)
        return self._availability[name]

    def plugin_of(self, delegate: str) -> PluginInfo | None:
        return next((p for p in self.plugins.values() if delegate in p.delegates), None)

    # --- building ------------------------------------------------------------------------
    def enabled(self, parsed: ParsedFlags) -> list[DelegateSpec]:
        """Specs the flags enable, in the order their enabling flags appear (ties stable)."""
        options = parsed.options()
        ranked = []
        for order, spec in enumerate(self.specs.values()):
            flags_on = [f for f in spec.enabled_by if _enables(options.get(f))]
            if flags_on and spec.wants(options):
                rank = min(parsed.positions.get(f, 0) for f in flags_on)
                ranked.append((rank, order, spec))
        ranked.sort(key=lambda r: (r[0], r[1]))
        chosen = [s for _, _, s in ranked]
        names = {s.name for s in chosen}
        result = []
        for spec in chosen:
            primary = spec.fallback_for
            if primary is not None and primary in names and self.availability(primary).ok:
                continue  # the primary runs; the fallback is not needed
            if spec.fallback_for is None and not self.availability(spec.name).ok and any(
                    s.fallback_for == spec.name for s in chosen):
                warnings.warn(f"{spec.name} is unavailable ({self.availability(spec.name).reason}); "
                              f"falling back to {next(s.name for s in chosen if s.fallback_for == spec.name)}",
                              stacklevel=2)
                continue
            result.append(spec)
        return result

    def build(self, parsed: ParsedFlags) -> list[Delegate]:
        """Create the delegates the flags ask for, in rank order."""
        options = parsed.options()
        chosen = self.enabled(parsed)
        self._warn_unused_flags(parsed, options, {s.name for s in chosen})
        return [self._create(spec, options) for spec in chosen]

    def _warn_unused_flags(self, parsed: ParsedFlags, options: Mapping[str, Any], chosen: set[str]) -> None:
        """A delegate's own flags set while it is not enabled do nothing: say so, as TFLite's NNAPI
        provider does ("--use_nnapi=true is needed ...")."""
        for spec in self.specs.values():
            if spec.name in chosen or any(_enables(options.get(f)) for f in spec.enabled_by):
                continue
            unused = [f.name for f in spec.flags
                      if f.owner == spec.name and f.name not in spec.enabled_by and parsed.is_set(f.name)]
            if unused and spec.enabled_by:
                first = spec.enabled_by[0]
                needed = f"--{first}=true" if parsed.flags[first].type is bool else f"--{first}"
                warnings.warn(f"{', '.join('--' + n for n in unused)} set but {spec.name} is not enabled: "
                              f"{needed} is needed", stacklevel=3)

    def create(self, name: str, options: Mapping[str, Any] | None = None) -> Delegate:
        """One delegate by name with options keyed by flag name (acelera.load_delegate)."""
        spec = self.spec(name)
        known = {f.name: f for f in spec.flags} | {f.name: f for f in COMMON_FLAGS}
        values = {n: f.default for n, f in known.items()}
        for key, value in (options or {}).items():
            if key not in known:
                close = FlagSet(known.values()).suggest(key)
                raise RegistryError(f"{name}: unknown option '{key}'{close}")
            values[key] = known[key].parse(value, where=f"option of {name}")
        for e in spec.enabled_by:
            if known[e].type is bool:
                values[e] = True
        return self._create(spec, values)

    def load_library(self, path: str, options: Mapping[str, Any] | None = None) -> Delegate:
        """A delegate hosting the native library at `path` with the library's own `options`, by
        the plugin whose delegate --external_delegate_path enables (DelegateLoadError if none can)."""
        spec = next((s for s in self.specs.values() if LIBRARY_FLAG in s.enabled_by), None)
        where = f"Failed to load delegate from {path}"
        if spec is None:
            broken = f" (broken plugins: {', '.join(sorted(self.broken))})" if self.broken else ""
            raise DelegateLoadError(f"{where}: no installed plugin hosts native delegates; "
                                    f"install acelera[litert]{broken}")
        avail = self.availability(spec.name)
        if not avail.ok:
            raise DelegateLoadError(f"{where}: {spec.name} is unavailable: {avail.reason}")
        known = {f.name: f for f in spec.flags} | {f.name: f for f in COMMON_FLAGS}
        values: dict[str, Any] = {n: f.default for n, f in known.items()}
        values[LIBRARY_FLAG] = path
        values[LIBRARY_OPTIONS_FLAG] = {str(k): str(v) for k, v in (options or {}).items()}
        return self._create(spec, values)

    def _create(self, spec: DelegateSpec, options: Mapping[str, Any]) -> Delegate:
        avail = self.availability(spec.name)
        if not avail.ok:
            raise RegistryError(f"{spec.name} is unavailable: {avail.reason}")
        try:
            d = spec.factory(options)
        except AceleraError:
            raise
        except BaseException as e:  # noqa: BLE001  (sys.exit() in a factory is its failure, not the host's)
            if _fatal(e):
                raise
            raise RegistryError(f"{spec.name}: failed to create the delegate: {_summary(e)}") from None
        if not isinstance(d, Delegate):
            raise RegistryError(f"{spec.name}: factory returned {type(d).__name__}, not a Delegate")
        d.max_delegated_partitions, d.min_nodes_per_partition = spec.partition_limits(options)
        d.backend = spec.backend
        d.fp16_weights_aware = d.fp16_weights_aware or spec.fp16_weights_aware
        return d

    def planner(self, name: str, options: Mapping[str, Any]) -> Delegate:
        """A delegate that only answers support questions from the declared table (for analyze)."""
        spec = self.spec(name)
        d = TableDelegate(*spec.partition_limits(options))
        d.name, d.backend, d.op_table = spec.name, spec.backend, spec.op_table
        d.fp16_weights_aware = spec.fp16_weights_aware
        return d


class TableDelegate(Delegate):
    """Plans from a spec's op table without a device: used to analyze unavailable delegates."""

    def prepare(self, partition):
        raise RegistryError(f"{self.name} can only plan here: it is not available")


def _enables(value: Any) -> bool:
    """An enabling flag is on: a bool flag set true, or a string flag (a library path) set."""
    return value is True or (isinstance(value, str) and value != "")


def _distribution(ep: Any) -> tuple[str, str]:
    """(name, version) of the distribution an entry point comes from ('?' when unknown)."""
    dist = getattr(ep, "dist", None)
    return (getattr(dist, "name", None) or "?", getattr(dist, "version", None) or "?")


def _split(text: str) -> set[str]:
    return {p.strip() for p in text.split(",") if p.strip()}


_default: Registry | None = None


def get_registry(refresh: bool = False) -> Registry:
    """The process-wide registry of installed plugins."""
    global _default
    if _default is None or refresh:
        _default = Registry()
    return _default


def looks_like_library(name: str) -> bool:
    """Whether load_delegate's argument names a shared library rather than a plugin."""
    base = os.path.basename(name)
    return (os.sep in name or (os.altsep is not None and os.altsep in name)
            or base.endswith((".so", ".dylib", ".dll")) or ".so." in base)


def load_delegate(name: str | os.PathLike, options: Mapping[str, Any] | None = None) -> Delegate:
    """LiteRT's load_delegate: a plugin's delegate name (options keyed by its flag names), or the
    path of a native TFLite delegate library (options are the library's own, as LiteRT passes
    them), hosted by the plugin that --external_delegate_path enables. A library or name that
    cannot be loaded raises DelegateLoadError, a ValueError naming it."""
    reg = get_registry()
    text = os.fspath(name)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    if text in reg.specs:
        return reg.create(text, options)
    if not looks_like_library(text) and not os.path.exists(text):
        known = ", ".join(sorted(reg.specs)) or "none"
        raise DelegateLoadError(f"Failed to load delegate from {text}: neither an installed delegate ({known}) "
                                f"nor a shared library path")
    return reg.load_library(text, options)

