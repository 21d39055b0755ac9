"""Time the certification of every installed delegate (target: all six first-party plugins
within 10 minutes on a 2-core machine). Usage: python benchmarks/certification_time.py"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import MODELS  # noqa: E402

from acelera.conformance.suite import certify  # noqa: E402
from acelera.registrar.registry import get_registry  # noqa: E402


def main() -> int:
    reg = get_registry()
    total = 0.0
    print(f"{'delegate':14} {'verdict':12} {'cases':>6} {'seconds':>8}")
    for name in sorted(reg.specs):
        t0 = time.perf_counter()
        cert = certify(reg, name, models_dir=MODELS if MODELS.is_dir() else None)
        dt = time.perf_counter() - t0
        total += dt
        d = cert.to_dict()
        print(f"{name:14} {d['verdict']:12} {len(d.get('cases', [])):6d} {dt:8.1f}", flush=True)
    print(f"{'total':14} {'':12} {'':6} {total:8.1f}  (target <= 600 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
