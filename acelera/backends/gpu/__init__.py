"""Backend-neutral parts of TFLite's GPU delegate, shared by the gpu-opencl and gpu-gl plugins.

- `rules`: TFLite's GPU delegate rules: flags, op table and constraints, the general tensor
  rules, the precision rule and the log lines after partitioning;
- `optable`: the ops the partition compiler implements (what both backends declare);
- `compiler`: a partition -> a `Plan` (`plan`) of PHWC4 buffers (`layout`) and kernel
  launches; the op handlers are `ops/` (one module per op family, listed in `ops/__init__`),
  the weight packers `packing`;
- `params`: the contract between the compiler and the kernels: parameter-block slots and op
  codes, one table, emitted as named constants into every kernel program;
- `kernels/`: the kernels, one module per family holding the OpenCL C and the GLSL of each
  kernel side by side; `kernels.opencl` assembles gpu-opencl's program, `kernels.glsl`
  gpu-gl's shaders;
- `boundary`: the host-side conversions at a partition's inputs and outputs (PHWC4 packing,
  runtime weight packing, (de)quantization), a mixin of both backends' kernels;
- `delegate`: node support, the partition round and TFLite's GPU log lines;
- `cache`: the serialization cache (plan + program binaries; used by gpu-opencl and gpu-gl);
- `half_floor`: the accuracy floor of half storage (benchmarks and tests of fp16 error).

Nothing here calls OpenCL or GL; the plugins (`acelera.plugins.gpu_opencl`, `gpu_gl`) run the
plans on their device API and import from here, not from each other.
"""
