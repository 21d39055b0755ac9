"""The NNAPI op table for one target: TFLite's rules (rules.py) plus the target devices' limits.

`build_table(target, devices)` gives an OpTable whose rows check nodes exactly as the delegate
does for that target, so the same table drives partitioning, `acelera delegates show` and the
conformance suite. A row lists the dtypes that are really accepted at that target (TFLite's
types at that level, narrowed to what the target devices compute) and, as constraints, every
rule in force at that level, with the device check last.

Rows exist only for ops acelera has a reference kernel for (the emulated devices execute with
them); the version range is capped at the kernel's highest version for ops whose NNAPI rule
sets no maximum (HARD_SWISH, DEPTH_TO_SPACE, DENSIFY).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from acelera.core.delegate import Constraint, OpSupport, OpTable, Support
from acelera.core.kernels.registry import NodeContext, registered
from acelera.plugins.nnapi.rules import RULES, OpRule, Target

#: the tensor types a row may declare (the conformance suite's case dtypes and BOOL/INT64)
ALL_TYPES = frozenset({"FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT32", "INT64", "BOOL"})


@dataclass(frozen=True)
class DeviceConstraint(Constraint):
    """The target devices' own limits; `explain(node)` says why none of them takes the node."""

    explain: Callable[[NodeContext], Optional[str]] = lambda node: None


@dataclass(frozen=True)
class NnapiOpSupport(OpSupport):
    """An OpSupport row that checks like TFLite's Validate: the type of a given input, level hints."""

    rule: Any = None
    target: Any = None
    nnapi_max: Optional[int] = None
    kernel_max: int = 1

    def check(self, node: NodeContext) -> Support:
        name, v, r, t = node.op.name, node.version, self.rule, self.target
        early = r.accept_early is not None and _safe(lambda: r.accept_early(node, t))
        if early and v > self.kernel_max:
            return Support(False, f"{name} v{v}: NNAPI takes it, but the emulated devices have kernels "
                                  f"up to v{self.kernel_max}", "version")
        if not early:
            if v > self.max_version:
                if self.nnapi_max is None or v <= self.nnapi_max:
                    limit = ("NNAPI sets no version limit" if self.nnapi_max is None
                             else f"NNAPI takes up to v{self.nnapi_max}")
                    return Support(False, f"{name} v{v}: {limit}, but the emulated devices have kernels "
                                          f"up to v{self.max_version}", "version")
                return Support(False, f"{name} v{v}: max version supported is {self.max_version}", "version")
            if v < self.min_version:
                return Support(False, f"{name} v{v}: min version supported is {self.min_version}", "version")
            allowed = r.allowed_types(t.level)
            ty = r.checked_type(node)
            if allowed is not None and ty not in allowed:
                lvl = r.type_level(ty) if ty is not None else None
                if lvl is not None:
                    return Support(False, f"{name}: input type {ty} {t.requires(lvl)}", "input type")
                return Support(False, f"{name}: input type {ty} is not supported by NNAPI "
                                      f"(supported: {', '.join(sorted(allowed)) or 'none'})", "input type")
        for c in self.constraints:
            if early and not isinstance(c, DeviceConstraint):
                continue
            try:
                ok = c.check(node)
            except Exception as e:  # a check that cannot evaluate (missing tensor) rejects
                return Support(False, f"{name}: {c.description} (could not check: {type(e).__name__})", "constraint")
            if not ok:
                why = c.explain(node) if isinstance(c, DeviceConstraint) else None
                return Support(False, f"{name}: {why or c.description}", "device" if why else "constraint")
        return Support(True)


def _safe(fn) -> bool:
    try:
        return bool(fn())
    except Exception:
        return False


def kernel_versions() -> dict[str, int]:
    return {op: spec.max_version for op, spec in registered().items()}


def build_row(rule: OpRule, target: Target, devices=None,
              kernels: Optional[dict[str, int]] = None) -> Optional[NnapiOpSupport]:
    """The row of `rule` at `target`, or None when the op is not available there."""
    kernels = kernel_versions() if kernels is None else kernels
    if rule.op not in kernels or rule.min_level > target.level:
        return None
    nnapi_max = rule.version_limit(target)
    max_version = kernels[rule.op] if nnapi_max is None else min(nnapi_max, kernels[rule.op])
    allowed = rule.allowed_types(target.level)
    dtypes = ALL_TYPES if allowed is None else frozenset(allowed)
    constraints: list[Constraint] = [
        Constraint(c.describe(target), (lambda c: lambda node: c.ok(node, target))(c))  # noqa: B023  (c is bound by the outer lambda)
        for c in rule.checks if c.when(target)]
    if devices is not None:
        dtypes = dtypes & devices.dtypes(rule.op)
        if not dtypes:
            return None
        constraints.append(devices.constraint(rule.op))
    if rule.early_types and dtypes <= rule.early_types:
        # every declared type is accepted before the version check (fp16 DEQUANTIZE on 30+)
        nnapi_max, max_version = None, kernels[rule.op]
    return NnapiOpSupport(rule.op, max_version, dtypes, tuple(constraints), 1, rule=rule, target=target,
                          nnapi_max=nnapi_max, kernel_max=kernels[rule.op])


def build_table(target: Target, devices=None) -> OpTable:
    """Every op NNAPI takes at `target` (narrowed by `devices` when they filter nodes)."""
    kernels = kernel_versions()
    rows = [build_row(r, target, devices, kernels) for r in RULES.values()]
    return OpTable.of([r for r in rows if r is not None], "nnapi")
