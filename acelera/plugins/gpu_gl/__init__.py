"""gpu-gl: TFLite's GPU delegate on OpenGL ES 3.1 compute shaders (issue #7)."""
from acelera.plugins.gpu_common import GPU_FLAGS, gpu_table, wants_backend
from acelera.plugins.tables import not_built, unbuilt_factory
from acelera.registrar import hookimpl
from acelera.registrar.spec import DelegateSpec

SPEC = DelegateSpec(
    name="gpu-gl", summary="GPU delegate, OpenGL compute-shader backend (Mesa llvmpipe without a GPU)",
    version="0.1.0", flags=GPU_FLAGS, enabled_by=("use_gpu",), op_table=gpu_table("gpu-gl"),
    model_types=frozenset({"float32", "float16", "dynamic-range", "full-integer", "qat"}), backend="hardware",
    default_max_partitions=1, probe=not_built(7), factory=unbuilt_factory("gpu-gl"), wants=wants_backend("gl"), fallback_for="gpu-opencl")


@hookimpl
def register_delegates(register):
    register(SPEC)
