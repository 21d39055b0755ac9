"""The emulated NNAPI delegate: TFLite's option handling and device choice, emulated execution.

How the emulated runtime picks devices (TFLite's `DoPrepare`, `ShouldUseTargetDevices`,
`GetTargetDevices`, `GetTargetFeatureLevel`):

- API level < 27: no NNAPI, the delegate takes nothing.
- API level >= 29 and `--nnapi_accelerator_name=X`: X is the only target (`disable_nnapi_cpu` is
  ignored); an unknown name is an error listing the devices. Naming nnapi-reference is allowed.
- API level >= 29, no name, `--disable_nnapi_cpu=true` (default): every device except
  nnapi-reference is a target.
- Otherwise (API < 29, or `--disable_nnapi_cpu=false` without a name): no targets; the runtime
  spreads the model over all devices, nnapi-reference included, and TFLite validates against
  the API level itself (on 31+ that is below the runtime feature level: a TFLite quirk kept here).
- With targets, the level is the runtime feature level, lowered to the highest feature level
  of the targets. Nodes are then also filtered by the targets' own support (TFLite's
  GetNodesSupportedByAccelerator), except when the only target is nnapi-reference.
- "An accelerator is specified" (MUL v3, quantized AVERAGE_POOL_2D windows over 256) when a
  device other than nnapi-reference is named, or when nnapi-reference is excluded on 29+.

Each delegated node then runs on the device the runtime would place it on (devices.py).
Partitions: NNAPI's own default is 3; the tools' `--max_delegated_partitions` is copied when it
is >= 0, so its default 0 means no limit, as in TFLite's provider; a negative value keeps 3.
NNAPI ignores `--min_nodes_per_partition`, as TFLite's provider does.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from acelera.backends.emulation import DeviceRunner, EmulatedDelegate
from acelera.core.delegate import OpTable, Support
from acelera.core.errors import AceleraError
from acelera.core.kernels.registry import Kernel, NodeContext
from acelera.core.opcodes import CUSTOM
from acelera.plugins.nnapi.devices import CATALOGUE, REFERENCE, Device, DeviceSet
from acelera.plugins.nnapi.rules import RULES, Target
from acelera.plugins.nnapi.sdk import (
    DEFAULT_SDK,
    FL5,
    FL7,
    MIN_SDK,
    NNAPI_1_2,
    NNAPI_1_3,
    level_name,
    nnapi_version,
    runtime_feature_level,
)
from acelera.plugins.nnapi.table import build_table, kernel_versions
from acelera.registrar.flags import FlagError

DEFAULT_MAX_PARTITIONS = 3  # StatefulNnApiDelegate::Options::max_number_delegated_partitions
PREFERENCES = ("undefined", "fast_single_answer", "sustained_speed", "low_power")
PRIORITIES = {"default": "medium", "low": "low", "medium": "medium", "high": "high"}


class NnapiOptionWarning(UserWarning):
    """An NNAPI option value TFLite would warn about (and ignore)."""


@dataclass(frozen=True)
class Config:
    sdk: int
    runtime_level: int
    target: Target
    #: the devices named or left by disable_nnapi_cpu (None: the runtime may use every device)
    targets: Optional[tuple[Device, ...]]
    filter: Optional[DeviceSet]  # targets that filter nodes, or None
    preference: str
    priority: str
    burst: bool
    allow_fp16: bool
    dynamic_dimensions: bool

    @property
    def available(self) -> bool:
        return self.sdk >= MIN_SDK

    @property
    def candidates(self) -> tuple[Device, ...]:
        return self.targets if self.targets is not None else tuple(CATALOGUE.values())


def _choice(value: str, choices, what: str, fallback: str) -> str:
    if value in choices:
        return value
    warnings.warn(f"nnapi: the provided value ({value}) is not a valid nnapi execution {what}; "
                  f"using {fallback}", NnapiOptionWarning, stacklevel=3)
    return fallback


def resolve(options: Mapping[str, Any]) -> Config:
    """The NNAPI configuration TFLite's provider and delegate derive from the flags."""
    sdk = int(options.get("nnapi_android_sdk", DEFAULT_SDK))
    if not 1 <= sdk <= 99:
        raise FlagError(f"--nnapi_android_sdk: expected an Android API level (27 = 8.1 ... 35 = 15), got {sdk}")
    lib = str(options.get("nnapi_support_library_path", "") or "")
    if lib:
        state = "exists" if os.path.exists(lib) else "does not exist"
        raise FlagError(f"--nnapi_support_library_path={lib} ({state}): an NNAPI Support Library is an "
                        "Android shared object, which the emulated NNAPI devices cannot load; "
                        "pick an emulated device with --nnapi_accelerator_name instead")
    name = str(options.get("nnapi_accelerator_name", "") or "")
    if name and name not in CATALOGUE:
        raise FlagError(f"--nnapi_accelerator_name: Could not find the specified NNAPI accelerator: {name}. "
                        f"Must be one of: {{{', '.join(CATALOGUE)}}}.")
    disallow_cpu = True if name else bool(options.get("disable_nnapi_cpu", True))
    rt = runtime_feature_level(sdk)
    use_targets = sdk >= NNAPI_1_2 and (disallow_cpu or bool(name))
    # ShouldUseTargetDevices(exclude_nnapi_reference=true): naming nnapi-reference is not "an accelerator"
    accelerator_specified = name != REFERENCE.name and ((disallow_cpu and sdk >= NNAPI_1_2) or bool(name))
    if name and sdk < NNAPI_1_2:
        warnings.warn(f"nnapi: --nnapi_accelerator_name needs Android 10 (API 29); emulating {sdk}, "
                      f"the runtime chooses the devices", NnapiOptionWarning, stacklevel=2)
    targets: Optional[tuple[Device, ...]] = None
    note = ""
    level = sdk
    if use_targets:
        targets = (CATALOGUE[name],) if name else tuple(d for d in CATALOGUE.values() if d is not REFERENCE)
        devices_level = max(d.level(rt) for d in targets)
        level = devices_level if 0 < devices_level < rt else rt
        if level < rt:
            names = ", ".join(d.name for d in targets)
            note = f"{names} {'caps' if len(targets) == 1 else 'cap'} the target at {level_name(level)}"
    elif sdk >= MIN_SDK and rt != sdk:
        note = f"with no target devices TFLite checks API level {sdk}, not {level_name(rt)}"
    filt = DeviceSet(targets) if targets is not None and accelerator_specified else None
    pref = str(options.get("nnapi_execution_preference", "") or "")
    pref = _choice(pref, PREFERENCES, "preference", "undefined") if pref else "undefined"
    prio = str(options.get("nnapi_execution_priority", "") or "")
    prio = PRIORITIES[_choice(prio, PRIORITIES, "priority", "default")] if prio else "medium"
    burst = bool(options.get("nnapi_use_burst_mode", False)) or (
        targets is not None and FL5 <= level <= FL7)
    return Config(sdk, rt, Target(sdk, level, accelerator_specified, note), targets, filt, pref, prio,
                  burst and sdk >= NNAPI_1_2, bool(options.get("nnapi_allow_fp16", False)),
                  bool(options.get("nnapi_allow_dynamic_dimensions", False)))


class NnapiRunner(DeviceRunner):
    """Compiles a partition the way the NNAPI runtime would: each node on its best device."""

    device = "NNAPI"

    def __init__(self, config: Config):
        self.config = config
        self.runners = {d.name: d.runner(config.allow_fp16) for d in config.candidates}
        self.placements: dict[int, str] = {}

    @property
    def arithmetic(self) -> str:  # type: ignore[override]
        return ", ".join(f"{d.name} {self.runners[d.name].arithmetic}" for d in self.config.candidates)

    def place(self, ctx: NodeContext) -> Device:
        able = [d for d in self.config.candidates if d.why_not(ctx) is None]
        if not able:
            raise AceleraError(f"node {ctx.index} ({ctx.op.name}): no NNAPI device can run it")
        low_power = self.config.preference == "low_power"
        return min(able, key=lambda d: d.cost(ctx, self.config.allow_fp16, low_power))

    def kernel_factory(self, ctx: NodeContext) -> Kernel:
        device = self.place(ctx)
        self.placements[ctx.index] = device.name
        return self.runners[device.name].kernel_factory(ctx)


class NnapiDelegate(EmulatedDelegate):
    """TFLite's NNAPI delegate with its support rules, on emulated NNAPI devices."""

    name = "nnapi"
    fp16_weights_aware = True  # NNAPI partitions with TFLite's FP16GraphPartitionHelper
    op_table: OpTable  # set by __init__
    runner: NnapiRunner

    def __init__(self, options: Optional[Mapping[str, Any]] = None):
        options = dict(options or {})
        self.config = resolve(options)
        raw = options.get("max_delegated_partitions")
        self._raw_max = None if raw is None else int(raw)
        mx = DEFAULT_MAX_PARTITIONS if self._raw_max is None or self._raw_max < 0 else self._raw_max
        super().__init__(NnapiRunner(self.config), max_delegated_partitions=mx)
        self.op_table = build_table(self.config.target, self.config.filter)
        self.precision = self.claimed_precision()

    def claimed_precision(self) -> dict[str, str]:
        """The loosest arithmetic among the devices float and quantized nodes may land on."""
        order = ("exact", "float32", "integer", "float16")
        out = {"float": "float32", "integer": "exact"}
        for d in self.config.candidates:
            p = d.precision(self.config.allow_fp16)
            for k in out:
                if order.index(p[k]) > order.index(out[k]):
                    out[k] = p[k]
        return out

    def partition_limits(self) -> tuple[int, int]:
        mx = self.max_delegated_partitions
        if self._raw_max is not None and self._raw_max < 0:
            mx = DEFAULT_MAX_PARTITIONS
        return mx, 0

    def is_node_supported(self, node: NodeContext) -> Support:
        cfg, name = self.config, node.op.name
        if not cfg.available:
            return Support(False, f"{name}: NNAPI needs Android SDK {MIN_SDK} (emulating {cfg.sdk})", "sdk")
        rule = RULES.get(name)
        if rule is None or node.op.op == CUSTOM:
            return Support(False, f"{name}: op is not supported by NNAPI", "op")
        if rule.min_level > cfg.target.level:
            return Support(False, f"{name} {cfg.target.requires(rule.min_level)}", "sdk")
        if name not in self.op_table.rows:
            if name not in kernel_versions():
                return Support(False, f"{name}: no emulated kernel for this op", "op")
            why = cfg.filter.explain(node) if cfg.filter is not None else None
            return Support(False, f"{name}: {why or 'not supported by the target NNAPI devices'}", "device")
        return self.op_table.check(node)

    def describe(self) -> str:
        cfg = self.config
        if not cfg.available:
            return f"nnapi (emulated): Android SDK {cfg.sdk} has no NNAPI (27+); the delegate takes nothing"
        devices = ", ".join(f"{d.name} ({self.runner.runners[d.name].arithmetic})" for d in cfg.candidates)
        prio = cfg.priority if cfg.sdk >= NNAPI_1_3 else "n/a below Android 11"
        return (f"nnapi (emulated): Android SDK {cfg.sdk} ({nnapi_version(cfg.runtime_level)}), validated at "
                f"{level_name(cfg.target.level)}; devices {devices}; preference {cfg.preference}; "
                f"priority {prio}; burst {'on' if cfg.burst else 'off'}")
