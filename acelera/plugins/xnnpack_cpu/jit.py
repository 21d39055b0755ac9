"""Optional numba kernels for the loops numpy cannot fuse: depthwise convolution rows, im2col,
few-row GEMMs with their epilogue, GEMM epilogues (bias + activation + residual), pooling,
element-wise ops, copies and LOGISTIC/swish. Their numpy twins are in conv.py, ops.py and
spec.py; `AVAILABLE` says whether these are used (numba importable, not disabled with
``ACELERA_XNNPACK_NUMBA=0``).

Steps call them through `Native` records (native_records.py): a run of records is one call of
`run_native` (jit_native.py) on the partition's arena, so a chain of numba steps costs one
Python call. The kernels live in jit_gemm.py, jit_depthwise.py, jit_pool.py,
jit_elementwise.py and jit_nd.py (broadcasting binary ops, unary ops, GELU, SOFTMAX, MEAN over
contiguous axes, TRANSPOSE, small BATCH_MATMUL, LayerNorm) and jit_blas.py (numpy's BLAS
sgemm called from the native run) (helpers in jit_helpers.py); this
module re-exports them, as None when numba is not used (every caller tests `AVAILABLE` first).

Arrays are C-contiguous float32. Inner loops index slices with the bare loop variable so numba
can drop its negative-index checks and LLVM vectorizes them. Compiled code is cached on disk
(``cache=True``): only the first process on a machine pays the compile time (about 40 s of CPU
for run_native and everything it calls). numba checks only the stamp of the file a cached
function is defined in, and run_native (jit_native.py) calls the kernels of the other modules:
kernel_cache.py drops the package's cache when any kernel source changed.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from acelera.plugins.xnnpack_cpu.native_records import (
    OP_ACT,
    OP_BINARY,
    OP_BINARY_ND,
    OP_BMM,
    OP_COPY,
    OP_DW,
    OP_DW_1X1,
    OP_EPILOGUE,
    OP_EPILOGUE_ONTO,
    OP_EPILOGUE_PARTIAL,
    OP_FC_CHAIN,
    OP_GEMM,
    OP_IM2COL_PADDED,
    OP_LAYER_NORM,
    OP_MEAN_HW,
    OP_MEAN_MID,
    OP_MEAN_ND,
    OP_POOL_AVG,
    OP_POOL_MAX,
    OP_RESIZE,
    OP_SGEMM,
    OP_SIGMOID,
    OP_SOFTMAX,
    OP_TRANSPOSE,
    OP_UNARY,
    Native,
    Par,
    encode,
)

AVAILABLE = False
REASON = "numba is not installed"
if os.environ.get("ACELERA_XNNPACK_NUMBA", "1").strip().lower() in ("0", "false", "no", "off"):
    REASON = "disabled by ACELERA_XNNPACK_NUMBA=0"
else:
    try:
        import numba as _nb
        AVAILABLE = True
        REASON = f"numba {_nb.__version__}"
    except Exception as e:  # pragma: no cover - depends on the environment
        REASON = f"numba unavailable: {type(e).__name__}: {e}"


def blas_sgemm() -> int:
    """The address of numpy's BLAS sgemm for OP_SGEMM records (jit_blas.py); 0 without numba
    or without an ILP64 OpenBLAS (the GEMMs then call np.matmul)."""
    if not AVAILABLE:
        return 0
    from acelera.plugins.xnnpack_cpu.jit_blas import address

    return address()


def bind(kernel: Any, *args: Any) -> Callable[[], Any]:
    """A zero-argument callable running `kernel(*args)`. The overload for these argument types
    is compiled (or loaded from the cache) now and called directly, skipping numba's
    per-call type dispatch (about half the cost of a small call)."""
    try:
        import numba

        entry = kernel.compile(tuple(numba.typeof(a) for a in args))
    except Exception:  # pragma: no cover - fall back to the dispatcher
        entry = kernel
    return lambda: entry(*args)


__all__ = [
    "AVAILABLE", "REASON", "bind", "blas_sgemm", "Native", "Par", "encode",
    "OP_EPILOGUE", "OP_EPILOGUE_ONTO", "OP_EPILOGUE_PARTIAL", "OP_DW_1X1", "OP_DW", "OP_POOL_MAX", "OP_POOL_AVG",
    "OP_FC_CHAIN", "OP_RESIZE", "OP_MEAN_HW", "OP_ACT", "OP_SOFTMAX", "OP_GEMM", "OP_COPY", "OP_BINARY",
    "OP_IM2COL_PADDED", "OP_SIGMOID", "OP_BINARY_ND", "OP_UNARY", "OP_MEAN_MID", "OP_TRANSPOSE", "OP_BMM",
    "OP_LAYER_NORM", "OP_MEAN_ND", "OP_SGEMM",
    "epilogue", "epilogue_onto", "epilogue_partial", "dw_1x1", "pool_max", "pool_avg", "fc_chain",
    "resize_bilinear", "mean_hw", "act_flat", "dw_rows", "gemm_small", "binary", "copy_runs",
    "im2col_padded", "sigmoid", "run_native", "run_native2",
]

# The type checker is shown the numba branch: the names are None only when AVAILABLE is False,
# and no caller uses them then.
if TYPE_CHECKING or AVAILABLE:
    from acelera.plugins.xnnpack_cpu.jit_depthwise import dw_1x1, dw_rows
    from acelera.plugins.xnnpack_cpu.jit_elementwise import act_flat, binary, copy_runs, sigmoid
    from acelera.plugins.xnnpack_cpu.jit_gemm import (
        epilogue,
        epilogue_onto,
        epilogue_partial,
        fc_chain,
        gemm_small,
        im2col_padded,
    )
    from acelera.plugins.xnnpack_cpu.jit_native import run_native, run_native2
    from acelera.plugins.xnnpack_cpu.jit_pool import mean_hw, pool_avg, pool_max, resize_bilinear
else:  # pragma: no cover - exercised with ACELERA_XNNPACK_NUMBA=0
    epilogue = epilogue_onto = epilogue_partial = dw_1x1 = pool_max = pool_avg = fc_chain = resize_bilinear = None
    mean_hw = act_flat = dw_rows = gemm_small = binary = copy_runs = im2col_padded = None
    sigmoid = run_native = run_native2 = None
