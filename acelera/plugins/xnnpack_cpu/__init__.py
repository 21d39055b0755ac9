"""xnnpack-cpu: the fast CPU delegate (issue #5).

XNNPACK's op table and flags; partitions are compiled into fused steps over packed weights and
preplanned buffers (`program.py`), with optional numba kernels (`jit.py`).
"""
from acelera.core.delegate import Support
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

G = "XNNPACK delegate"
FLAGS = (
    Flag("use_xnnpack", bool, False, "Explicitly apply the XNNPACK delegate", "xnnpack-cpu", G),
    Flag("xnnpack_force_fp16", bool, False, "Compute in float16 even where the model does not ask for it", "xnnpack-cpu", G),
    Flag("xnnpack_weight_cache_file_path", str, "", "File-backed packed-weight cache", "xnnpack-cpu", G),
)


def probe() -> Support:
    """Runs wherever numpy and threadpoolctl import (numba only speeds it up)."""
    try:
        import importlib

        for mod in ("numpy", "threadpoolctl", "acelera.plugins.xnnpack_cpu.delegate"):
            importlib.import_module(mod)
    except Exception as e:
        return Support(False, f"cannot load: {type(e).__name__}: {e}")
    return Support(True)


def create(options):
    from acelera.plugins.xnnpack_cpu.delegate import XnnpackDelegate

    return XnnpackDelegate(options)


def _table():
    from acelera.plugins.xnnpack_cpu.optable import TABLE

    return TABLE


SPEC = DelegateSpec(
    name="xnnpack-cpu", summary="Fast CPU delegate with packed weights and fused kernels", version="0.1.0",
    flags=FLAGS, enabled_by=("use_xnnpack",), op_table=_table(),
    model_types=frozenset({"float32", "float16", "full-integer", "qat"}), backend="cpu",
    probe=probe, factory=create, precision="float32", fp16_weights_aware=True,
    notes="Float32 (float16 with --xnnpack_force_fp16) and signed int8 ops of XNNPACK's table. "
          "Hot loops use numba when it is installed, numpy otherwise.")


@hookimpl
def register_delegates(register):
    register(SPEC)
