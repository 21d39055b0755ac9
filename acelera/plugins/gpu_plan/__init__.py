"""Backend-neutral parts of TFLite's GPU delegate, shared by gpu-opencl and gpu-gl.

- `compiler` (with `ops_conv`, `ops_elementwise`, `ops_layout`): a partition -> a `Plan`
  (`plan`) of PHWC4 buffers (`layout`) and kernel launches;
- `params`: the parameter-block layout and op codes every kernel/shader reads;
- `boundary`: the host-side conversions at a partition's inputs and outputs (PHWC4 packing,
  runtime weight packing, (de)quantization), a mixin of both backends' kernels;
- `delegate`: node support, the partition round and TFLite's GPU log lines;
- `cache`: the serialization cache (plan + program binary; used by gpu-opencl).

Nothing here touches OpenCL or GL; the backends (gpu_opencl, gpu_gl) import from here, not
from each other's modules (gpu-gl reads only gpu-opencl's op-table rows, from its package).
"""
