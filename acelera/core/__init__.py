"""Core: model loading, the interpreter, partitioning and the CPU reference kernels."""
