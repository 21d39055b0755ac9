"""Reductions: `softmax` over the channels of every pixel, and `reduce` over any of b, h, w, c
(codes R_*; the output keeps reduced dimensions as 1). Geometry: SOFTMAX_*, REDUCE_* in params.

Maxima and minima are LiteRT's `in > acc ? in : acc` (`max_ab(v, acc)`): a NaN input is skipped
by the comparison (the softmax of a row holding NaN is still NaN, through exp).
"""
from __future__ import annotations

from acelera.backends.gpu.kernels.common import Kernel

SOFTMAX_OPENCL = r"""
__kernel void softmax(KARGS) {
  int i = get_global_id(0);
  if (i >= p[P_N]) return;
  int HW = p[SOFTMAX_HW], S = p[SOFTMAX_S], C = p[SOFTMAX_C];
  float beta = PF(SOFTMAX_BETA);
  int bb = i / HW, hw = i % HW;
  int base = bb * S * HW + hw;
  float m = -INFINITY;
  for (int s = 0; s < S; s++) {
    float4 v = LD4(a, base + s * HW);
    int r = C - 4 * s;
    m = max_ab(v.x, m);
    if (r > 1) m = max_ab(v.y, m);
    if (r > 2) m = max_ab(v.z, m);
    if (r > 3) m = max_ab(v.w, m);
  }
  float sum = 0.0f;
  for (int s = 0; s < S; s++) {
    float4 e = exp((LD4(a, base + s * HW) - m) * beta);
    int r = C - 4 * s;
    sum += e.x;
    if (r > 1) sum += e.y;
    if (r > 2) sum += e.z;
    if (r > 3) sum += e.w;
  }
  for (int s = 0; s < S; s++) {
    float4 e = exp((LD4(a, base + s * HW) - m) * beta) / sum;
    store4(epilogue(e, p), base + s * HW, s, dst, p);
  }
}
"""

SOFTMAX_GLSL = r"""
void main() {
  int i = gid();
  if (i >= P(P_N)) return;
  int HW = P(SOFTMAX_HW), S = P(SOFTMAX_S), C = P(SOFTMAX_C);
  float beta = PF(SOFTMAX_BETA);
  int bb = i / HW, hw = i % HW;
  int base = bb * S * HW + hw;
  float m = -FLT_MAX;
  for (int s = 0; s < S; s++) {
    vec4 v = LD4_a(base + s * HW);
    int r = C - 4 * s;
    m = max_ab(v.x, m);
    if (r > 1) m = max_ab(v.y, m);
    if (r > 2) m = max_ab(v.z, m);
    if (r > 3) m = max_ab(v.w, m);
  }
  float sum = 0.0;
  for (int s = 0; s < S; s++) {
    vec4 e = exp((LD4_a(base + s * HW) - m) * beta);
    int r = C - 4 * s;
    sum += e.x;
    if (r > 1) sum += e.y;
    if (r > 2) sum += e.z;
    if (r > 3) sum += e.w;
  }
  for (int s = 0; s < S; s++) {
    vec4 e = exp((LD4_a(base + s * HW) - m) * beta) / sum;
    store4(epilogue(e), base + s * HW, s);
  }
}
"""

REDUCE_OPENCL = r"""
inline float red1(float acc, float v, int code) {
  if (code == R_MAX) return max_ab(v, acc);
  if (code == R_MIN) return min_ab(v, acc);
  if (code == R_PROD) return acc * v;
  return acc + v;
}
inline float4 red4(float4 acc, float4 v, int code) {
  if (code == R_MAX) return max_ab(v, acc);
  if (code == R_MIN) return min_ab(v, acc);
  if (code == R_PROD) return acc * v;
  return acc + v;
}
__kernel void reduce(KARGS) {
  int i = get_global_id(0);
  if (i >= p[P_N]) return;
  int IH = p[REDUCE_IH], IW = p[REDUCE_IW], IS = p[REDUCE_IS], IB = p[REDUCE_IB], IC = p[REDUCE_IC];
  int OH = p[REDUCE_OH], OW = p[REDUCE_OW], OS = p[REDUCE_OS];
  int code = p[REDUCE_CODE];
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int os = t % OS; int ob = t / OS;
  int b0 = p[REDUCE_RB] ? 0 : ob, b1 = p[REDUCE_RB] ? IB : ob + 1;
  int h0 = p[REDUCE_RH] ? 0 : oy, h1 = p[REDUCE_RH] ? IH : oy + 1;
  int w0 = p[REDUCE_RW] ? 0 : ox, w1 = p[REDUCE_RW] ? IW : ox + 1;
  float init = code == R_MAX ? -INFINITY : code == R_MIN ? INFINITY : code == R_PROD ? 1.0f : 0.0f;
  float4 acc = (float4)(init);
  if (p[REDUCE_RC]) {
    float r = init;
    for (int bb = b0; bb < b1; bb++)
      for (int y = h0; y < h1; y++)
        for (int x = w0; x < w1; x++)
          for (int ch = 0; ch < IC; ch++)
            r = red1(r, ld_chan(a, bb, ch, y, x, IS, IH, IW), code);
    acc = (float4)(r, 0.0f, 0.0f, 0.0f);
  } else {
    for (int bb = b0; bb < b1; bb++)
      for (int y = h0; y < h1; y++)
        for (int x = w0; x < w1; x++)
          acc = red4(acc, LD4(a, ((bb * IS + os) * IH + y) * IW + x), code);
  }
  if (code == R_MEAN) acc *= PF(REDUCE_INV_COUNT);
  store4(epilogue(acc, p), i, os, dst, p);
}
"""

REDUCE_GLSL = r"""
float red1(float acc, float v, int code) {
  if (code == R_MAX) return max_ab(v, acc);
  if (code == R_MIN) return min_ab(v, acc);
  if (code == R_PROD) return acc * v;
  return acc + v;
}
vec4 red4(vec4 acc, vec4 v, int code) {
  if (code == R_MAX) return max_ab(v, acc);
  if (code == R_MIN) return min_ab(v, acc);
  if (code == R_PROD) return acc * v;
  return acc + v;
}
void main() {
  int i = gid();
  if (i >= P(P_N)) return;
  int IH = P(REDUCE_IH), IW = P(REDUCE_IW), IS = P(REDUCE_IS), IB = P(REDUCE_IB), IC = P(REDUCE_IC);
  int OH = P(REDUCE_OH), OW = P(REDUCE_OW), OS = P(REDUCE_OS);
  int code = P(REDUCE_CODE);
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int os = t % OS; int ob = t / OS;
  int b0 = P(REDUCE_RB) != 0 ? 0 : ob, b1 = P(REDUCE_RB) != 0 ? IB : ob + 1;
  int h0 = P(REDUCE_RH) != 0 ? 0 : oy, h1 = P(REDUCE_RH) != 0 ? IH : oy + 1;
  int w0 = P(REDUCE_RW) != 0 ? 0 : ox, w1 = P(REDUCE_RW) != 0 ? IW : ox + 1;
  float init = code == R_MAX ? -FLT_MAX : code == R_MIN ? FLT_MAX : code == R_PROD ? 1.0 : 0.0;
  vec4 acc = vec4(init);
  if (P(REDUCE_RC) != 0) {
    float r = init;
    for (int bb = b0; bb < b1; bb++)
      for (int y = h0; y < h1; y++)
        for (int x = w0; x < w1; x++)
          for (int ch = 0; ch < IC; ch++)
            r = red1(r, ld_chan(bb, ch, y, x, IS, IH, IW), code);
    acc = vec4(r, 0.0, 0.0, 0.0);
  } else {
    for (int bb = b0; bb < b1; bb++)
      for (int y = h0; y < h1; y++)
        for (int x = w0; x < w1; x++)
          acc = red4(acc, LD4_a(((bb * IS + os) * IH + y) * IW + x), code);
  }
  if (code == R_MEAN) acc *= PF(REDUCE_INV_COUNT);
  store4(epilogue(acc), i, os);
}
"""

KERNELS = (
    Kernel("softmax", SOFTMAX_OPENCL, SOFTMAX_GLSL),
    Kernel("reduce", REDUCE_OPENCL, REDUCE_GLSL),
)
