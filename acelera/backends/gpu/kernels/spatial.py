"""Kernels over the spatial plane: `pool` (max / average) and `resize` (bilinear / nearest).
Geometry: POOL_*, RESIZE_* in params.

Max pooling is LiteRT's std::max(acc, v) from the lowest float (`max_ab(v, acc)`): a NaN tap is
skipped, an all-NaN or all -inf window gives the lowest float.

`resize` reads per-axis tables from `c`: int y0[OH], y1[OH], x0[OW], x1[OW], then float fy[OH],
fx[OW] (ops/elementwise.py: resize).
"""
from __future__ import annotations

from acelera.backends.gpu.kernels.common import Kernel

POOL_OPENCL = r"""
__kernel void pool(KARGS) {
  int i = get_global_id(0);
  if (i >= p[P_N]) return;
  int IH = p[POOL_IH], IW = p[POOL_IW], S = p[POOL_S], OH = p[POOL_OH], OW = p[POOL_OW];
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int s = t % S; int bb = t / S;
  int y0 = oy * p[POOL_SH] - p[POOL_PT], x0 = ox * p[POOL_SW] - p[POOL_PL];
  int avg = p[POOL_AVG];
  float4 acc = avg ? (float4)(0.0f) : (float4)(-FLT_MAX);
  int n = 0;
  for (int ky = 0; ky < p[POOL_KH]; ky++) {
    int y = y0 + ky;
    if (y < 0 || y >= IH) continue;
    for (int kx = 0; kx < p[POOL_KW]; kx++) {
      int x = x0 + kx;
      if (x < 0 || x >= IW) continue;
      float4 v = LD4(a, ((bb * S + s) * IH + y) * IW + x);
      acc = avg ? acc + v : max_ab(v, acc);
      n++;
    }
  }
  if (avg) acc = acc / (float)max(n, 1);
  store4(epilogue(acc, p), i, s, dst, p);
}
"""

POOL_GLSL = r"""
void main() {
  int i = gid();
  if (i >= P(P_N)) return;
  int IH = P(POOL_IH), IW = P(POOL_IW), S = P(POOL_S), OH = P(POOL_OH), OW = P(POOL_OW);
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int s = t % S; int bb = t / S;
  int y0 = oy * P(POOL_SH) - P(POOL_PT), x0 = ox * P(POOL_SW) - P(POOL_PL);
  bool avg = P(POOL_AVG) != 0;
  vec4 acc = avg ? vec4(0.0) : vec4(-FLT_MAX);
  int n = 0;
  for (int ky = 0; ky < P(POOL_KH); ky++) {
    int y = y0 + ky;
    if (y < 0 || y >= IH) continue;
    for (int kx = 0; kx < P(POOL_KW); kx++) {
      int x = x0 + kx;
      if (x < 0 || x >= IW) continue;
      vec4 v = LD4_a(((bb * S + s) * IH + y) * IW + x);
      acc = avg ? acc + v : max_ab(v, acc);
      n++;
    }
  }
  if (avg) acc = acc / float(max(n, 1));
  store4(epilogue(acc), i, s);
}
"""

RESIZE_OPENCL = r"""
__kernel void resize(KARGS) {
  int i = get_global_id(0);
  if (i >= p[P_N]) return;
  int IH = p[RESIZE_IH], IW = p[RESIZE_IW], S = p[RESIZE_S], OH = p[RESIZE_OH], OW = p[RESIZE_OW];
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int s = t % S; int bb = t / S;
  __global const int *ti = (__global const int *)c;
  __global const float *tf = (__global const float *)(ti + 2 * OH + 2 * OW);
  int ya = ti[oy], yb = ti[OH + oy], xa = ti[2 * OH + ox], xb = ti[2 * OH + OW + ox];
  int base = (bb * S + s) * IH;
  float4 r;
  if (p[RESIZE_NEAREST]) {
    r = LD4(a, (base + ya) * IW + xa);
  } else {
    float dy = tf[oy], dx = tf[OH + ox];
    float4 v00 = LD4(a, (base + ya) * IW + xa), v10 = LD4(a, (base + yb) * IW + xa);
    float4 v01 = LD4(a, (base + ya) * IW + xb), v11 = LD4(a, (base + yb) * IW + xb);
    r = v00 * ((1.0f - dy) * (1.0f - dx)) + v10 * (dy * (1.0f - dx)) +
        v01 * ((1.0f - dy) * dx) + v11 * (dy * dx);
  }
  store4(epilogue(r, p), i, s, dst, p);
}
"""

RESIZE_GLSL = r"""
void main() {
  int i = gid();
  if (i >= P(P_N)) return;
  int IH = P(RESIZE_IH), IW = P(RESIZE_IW), S = P(RESIZE_S), OH = P(RESIZE_OH), OW = P(RESIZE_OW);
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int s = t % S; int bb = t / S;
  int ya = CI(oy), yb = CI(OH + oy), xa = CI(2 * OH + ox), xb = CI(2 * OH + OW + ox);
  int base = (bb * S + s) * IH;
  vec4 r;
  if (P(RESIZE_NEAREST) != 0) {
    r = LD4_a((base + ya) * IW + xa);
  } else {
    int f = 2 * OH + 2 * OW;
    float dy = CF(f + oy), dx = CF(f + OH + ox);
    vec4 v00 = LD4_a((base + ya) * IW + xa), v10 = LD4_a((base + yb) * IW + xa);
    vec4 v01 = LD4_a((base + ya) * IW + xb), v11 = LD4_a((base + yb) * IW + xb);
    r = v00 * ((1.0 - dy) * (1.0 - dx)) + v10 * (dy * (1.0 - dx)) + v01 * ((1.0 - dy) * dx) + v11 * (dy * dx);
  }
  store4(epilogue(r), i, s);
}
"""

KERNELS = (
    Kernel("pool", POOL_OPENCL, POOL_GLSL),
    Kernel("resize", RESIZE_OPENCL, RESIZE_GLSL),
)
