"""Libraries that two or more delegate plugins share; no plugin lives here.

- `tables`: compact op-table rows for the first-party plugins' specs;
- `emulation`: the DeviceRunner seam and the host-emulated runners (nnapi, hexagon, coreml);
- `gpu`: TFLite's GPU delegate minus the device API: its rules, the partition compiler, the
  kernels in OpenCL C and GLSL, the cache (gpu-opencl, gpu-gl).

Modules here import only `acelera.core` (and `acelera.registrar` where they must: flags, the
registry error); never `acelera.plugins` or `acelera.cli`.
"""
