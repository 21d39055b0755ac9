"""The delegation lines benchmark_model logs after Init() ("Explicitly applied ... delegate"), with
acelera's reasons for refused nodes, and the --require_full_delegation check."""
from __future__ import annotations

from acelera.core.partition import DelegationError


def delegate_lines(interp) -> list[str]:
    """The 'Explicitly applied ...' line per delegate, from the final execution plan."""
    plan = interp._rt.ex.plan
    lines = []
    for d in interp.delegates:
        k = sum(1 for s in plan if s.delegate == d.name)
        if k == 1 and len(plan) == 1:
            lines.append(f"Explicitly applied {d.name} delegate, and the model graph will be completely "
                         f"executed by the delegate.")
        elif k > 0:
            lines.append(f"Explicitly applied {d.name} delegate, and the model graph will be partially "
                         f"executed by the delegate w/ {k} delegate kernels.")
        else:
            lines.append(f"Though {d.name} delegate is explicitly applied, the model graph will not be "
                         f"executed by the delegate.")
            why = _refusals(interp, d.name)
            if why:
                lines.append(f"  why: {why}")
    return lines


def _refusals(interp, name: str) -> str:
    """The distinct reasons `name` gave for refusing nodes (acelera's addition to TFLite's line)."""
    rep = interp.delegation
    seen: list[str] = []
    for rs in rep.rejections.values():
        for d, r in rs:
            if d == name and r not in seen:
                seen.append(r)
    for d, _nodes, msg in rep.failures:
        if d == name and msg not in seen:
            seen.append(f"prepare failed: {msg}")
    more = f" (and {len(seen) - 3} more reasons)" if len(seen) > 3 else ""
    return "; ".join(seen[:3]) + more


def check_full_delegation(interp) -> None:
    plan = interp._rt.ex.plan
    cpu = [n for s in plan if s.delegate is None for n in s.nodes]
    if not interp.delegates or cpu or len(plan) != 1:
        what = "no delegate was applied" if not interp.delegates else f"nodes {cpu[:20]} run on the CPU"
        raise DelegationError(f"Disallowed CPU fallback detected: {what}")
