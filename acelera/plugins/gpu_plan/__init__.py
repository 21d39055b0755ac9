"""Backend-neutral parts of TFLite's GPU delegate, shared by gpu-opencl and gpu-gl.

- `compiler` (with `ops_conv`, `ops_elementwise`, `ops_layout`, `ops_logical`, `ops_lstm`): a
  partition -> a `Plan` (`plan`) of PHWC4 buffers (`layout`) and kernel launches;
- `optable`: the ops the compiler implements (what both backends declare);
- `params`: the parameter-block layout and op codes every kernel/shader reads;
- `boundary`: the host-side conversions at a partition's inputs and outputs (PHWC4 packing,
  runtime weight packing, (de)quantization), a mixin of both backends' kernels;
- `delegate`: node support, the partition round and TFLite's GPU log lines;
- `cache`: the serialization cache (plan + program binaries; used by gpu-opencl and gpu-gl);
- `half_floor`: the accuracy floor of half storage (benchmarks and tests of fp16 error).

Nothing here touches OpenCL or GL; the backends (gpu_opencl, gpu_gl) import from here, not
from each other's modules.
"""
