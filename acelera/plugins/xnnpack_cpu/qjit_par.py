"""The parallel twin of qjit.fc_gemm (int8 FULLY_CONNECTED): the output channels are split
into nt[0] bands of whole NR-channel blocks, one per thread (`prange`). Each band runs the same
micro-kernel tiles and the same double-precision requantization on its channels as fc_gemm
does, so the results are bit-exact with it whatever the number of bands. A band gathers the
input rows it needs into its own slice of `abuf`; `cbuf` rows are shared, the bands writing
disjoint columns.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from acelera.plugins.xnnpack_cpu.qjit import _flip, _requant_fc_row
from acelera.plugins.xnnpack_cpu.qjit_ir import KG, MR, MR1, NR, _tile, _tile1

_jit_par = njit(cache=True, nogil=True, boundscheck=False, parallel=True)


@_jit_par
def fc_gemm_par(x, bp, bias, eff, g, out, abuf, cbuf, nt):
    """qjit.fc_gemm on nt[0] bands of output channels (abuf: a gather slice per band)."""
    batch, k, units = g[0], g[1], g[2]
    groups, nb = g[7], g[8]
    ka = KG * groups
    bands = max(1, min(nt[0], nb, abuf.shape[0] // (MR * ka)))
    for band in prange(bands):
        _fc_band(x, bp, bias, eff, g, out, abuf[band * MR * ka:(band + 1) * MR * ka], cbuf,
                 band * nb // bands, (band + 1) * nb // bands, batch, k, units, ka)


@njit(inline="always", nogil=True, boundscheck=False)
def _fc_band(x, bp, bias, eff, g, out, abuf, cbuf, b0, b1, batch, k, units, ka):
    out_zp, qmin, qmax, groups, nb, per = g[4], g[5], g[6], g[7], g[8], g[9] != 0
    cw = nb * NR
    c0 = b0 * NR
    c1 = min(b1 * NR, units)
    rows = MR if batch > 1 else MR1
    xu = x.view(np.uint8)
    for tile in range((batch + rows - 1) // rows):
        m0 = tile * rows
        valid = min(rows, batch - m0)
        direct = ka == k and valid == rows
        if not direct:
            for r in range(valid):
                _flip(x, (m0 + r) * k, abuf, r * ka, k)
        src = xu if direct else abuf
        a0 = m0 * k if direct else 0
        for blk in range(b0, b1):
            wb = blk * groups * KG * NR
            if rows == MR:
                _tile(src, a0, ka, 1 if direct else 0, bp, wb, groups, cbuf, 0, 0, cbuf, blk * NR, cw, 0, 0, 0)
            else:
                _tile1(src, a0, ka, 1 if direct else 0, bp, wb, groups, cbuf, 0, 0, cbuf, blk * NR, cw, 0, 0, 0)
        if c1 > c0:
            for r in range(valid):
                p = m0 + r
                _requant_fc_row(cbuf[r * cw + c0:r * cw + c1], bias[c0:c1], eff[c0:c1] if per else eff, per,
                                out[p * units + c0:p * units + c1], c1 - c0, out_zp, qmin, qmax)
