"""numpy's own BLAS sgemm called from numba: a GEMM record of a native run (OP_SGEMM) calls
cblas_sgemm directly instead of returning to Python for np.matmul (a Python call and numpy's
dispatch per GEMM, which cost more than the product on small convolutions).

The function is found in the OpenBLAS that numpy loaded (the same library np.matmul uses, so
threadpoolctl's limits apply to it too); its address travels in the record as an integer and
the call is made through that pointer (an intrinsic), so the kernels stay cacheable. Only
64-bit-integer (ILP64) builds are used (numpy's wheels ship one); anywhere else `address()`
is 0 and the steps keep np.matmul. Imported only when numba is available (jit.AVAILABLE)."""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from acelera.plugins.xnnpack_cpu.jit_helpers import _jit

#: ILP64 cblas_sgemm names, as numpy's OpenBLAS wheels (scipy-openblas64) and ILP64 builds name them
_SYMBOLS = ("scipy_cblas_sgemm64_", "cblas_sgemm64_")
_ROW_MAJOR, _NO_TRANS = 101, 111
_found: list[int] = []


def _libraries() -> list[str]:
    paths: list[str] = []
    try:
        from threadpoolctl import threadpool_info

        paths += [str(i["filepath"]) for i in threadpool_info()
                  if i.get("internal_api") == "openblas" and i.get("filepath")]
    except Exception:  # pragma: no cover - threadpoolctl is a dependency
        pass
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    return paths + sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so")))


def address() -> int:
    """The address of numpy's ILP64 cblas_sgemm, or 0 where there is none."""
    if not _found:
        addr = 0
        if os.environ.get("ACELERA_XNNPACK_NATIVE_BLAS", "1").strip() != "0":
            for path in _libraries():
                try:
                    lib = ctypes.CDLL(path)
                except OSError:
                    continue
                for name in _SYMBOLS:
                    fn = getattr(lib, name, None)
                    if fn is not None:
                        addr = ctypes.cast(fn, ctypes.c_void_p).value or 0
                        break
                if addr:
                    break
        _found.append(addr)
    return _found[0]


@intrinsic
def _cblas_sgemm(typingctx, fptr, m, n, k, a, lda, b, ldb, c, ldc):
    """cblas_sgemm(RowMajor, NoTrans, NoTrans, m, n, k, 1, a, lda, b, ldb, 0, c, ldc) through the
    function pointer fptr (int64; a, b, c are data addresses)."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.uintp, types.int64, types.uintp,
                     types.int64, types.uintp, types.int64)

    def codegen(context, builder, signature, args):
        i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
        ptr = ir.IntType(8).as_pointer()
        # the order and transpose arguments are C enums (int); sizes and strides blasint (int64)
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64])
        fp, mm, nn, kk, pa, la, pb, lb, pc, lc = args
        fn = builder.inttoptr(fp, fnty.as_pointer())
        builder.call(fn, [ir.Constant(i32, _ROW_MAJOR), ir.Constant(i32, _NO_TRANS), ir.Constant(i32, _NO_TRANS),
                          mm, nn, kk, ir.Constant(f32, 1.0), builder.inttoptr(pa, ptr), la,
                          builder.inttoptr(pb, ptr), lb, ir.Constant(f32, 0.0), builder.inttoptr(pc, ptr), lc])
        return context.get_dummy_value()
    return sig, codegen


@_jit
def sgemm(fptr, x, w, out):
    """out (M, N) = x (M, K) @ w (K, N), all C-contiguous float32, by numpy's BLAS."""
    m, k = x.shape
    n = w.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[:] = 0
        return
    _cblas_sgemm(fptr, m, n, k, x.ctypes.data, k, w.ctypes.data, n, out.ctypes.data, n)
