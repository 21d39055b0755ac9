"""gpu-opencl: TFLite's GPU delegate on OpenCL (issue #6)."""
from acelera.plugins.gpu_common import GPU_FLAGS, gpu_table, wants_backend
from acelera.plugins.tables import not_built, unbuilt_factory
from acelera.registrar import hookimpl
from acelera.registrar.spec import DelegateSpec

SPEC = DelegateSpec(
    name="gpu-opencl", summary="GPU delegate, OpenCL backend (PoCL on CPU-only machines)", version="0.1.0",
    flags=GPU_FLAGS, enabled_by=("use_gpu",), op_table=gpu_table("gpu-opencl"),
    model_types=frozenset({"float32", "float16", "dynamic-range", "full-integer", "qat"}), backend="hardware",
    default_max_partitions=1, probe=not_built(6), factory=unbuilt_factory("gpu-opencl"), wants=wants_backend("cl"))


@hookimpl
def register_delegates(register):
    register(SPEC)
