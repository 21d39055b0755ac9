"""gpu-opencl: TFLite's GPU delegate on OpenCL (issue #6).

Real OpenCL kernels through pyopencl on any OpenCL platform (PoCL on a machine without a
GPU). The op table below lists only what this backend implements and its tests cover; the
rows carry TFLite's GPU constraints (acelera.backends.gpu.rules) plus this backend's own.
"""
from __future__ import annotations

from acelera.backends.gpu.optable import EXTRA, OPS, REPLACE
from acelera.backends.gpu.rules import GPU_FLAGS, GROUP, gpu_table, wants_backend
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

VERSION = "0.2.0"

DEVICE_FLAG = Flag("gpu_opencl_device", str, "",
                   "OpenCL device for gpu-opencl: 'P:D' platform:device indices or a name substring; "
                   "empty = the first device that builds and runs a probe kernel, a GPU first",
                   "gpu-opencl", GROUP)

OP_TABLE = gpu_table("gpu-opencl", OPS, EXTRA, REPLACE)


def probe():
    from acelera.plugins.gpu_opencl.device import probe as _probe

    return _probe()


def create(options):
    from acelera.plugins.gpu_opencl.delegate import GpuOpenCLDelegate
    from acelera.plugins.gpu_opencl.device import DeviceError, open_device
    from acelera.registrar.registry import RegistryError

    try:
        dev = open_device(options.get("gpu_opencl_device", ""))
    except DeviceError as e:
        raise RegistryError(f"gpu-opencl: {e}") from None
    return GpuOpenCLDelegate(options, dev, OP_TABLE, VERSION)


SPEC = DelegateSpec(
    name="gpu-opencl", summary="GPU delegate, OpenCL backend (PoCL on CPU-only machines)", version=VERSION,
    flags=GPU_FLAGS + (DEVICE_FLAG,), enabled_by=("use_gpu",), op_table=OP_TABLE,
    # Quantized models run in TFLite's float view: each op within one step of the integer
    # kernels; whole models against the float-view answer on its floor ("float-view" precision).
    model_types=frozenset({"float32", "float16", "dynamic-range", "full-integer"}), backend="hardware",
    default_max_partitions=1, probe=probe, factory=create, wants=wants_backend("cl"),
    precision="float16", fp16_weights_aware=True,
    notes="fp16 storage (vload_half/vstore_half) with float32 arithmetic when precision loss is allowed; "
          "quantized models run in float with quantization simulators (TFLite's float view): each op within "
          "one step of the integer kernels, whole int8 models within 4x the integer reference's own distance "
          "from the exact float-view answer; "
          "--gpu_inference_for_sustained_speed is accepted and has no effect")


@hookimpl
def register_delegates(register):
    register(SPEC)
