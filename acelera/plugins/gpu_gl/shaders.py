"""GLSL ES 3.1 compute shaders of the gpu-gl kernels, one shader per kernel name.

They run the Plans that the shared partition compiler builds (`acelera.plugins.gpu_plan.
compiler`): the same kernel names, the same buffers in PHWC4 layout, the same int32
parameter block (``p[0..13]`` epilogue, slice mask, work-item count, float32-output flag;
``p[16..]`` geometry; see `gpu_plan.params`). Each shader is the OpenCL kernel of the same
name written in GLSL:

- buffers ``a``, ``b``, ``c`` (inputs), ``dst`` (output) are SSBOs of ``uint`` at bindings
  0..3; the parameter block is a std140 uniform block at binding 0 (ES 3.1 guarantees only 4
  SSBOs per compute shader);
- with half storage (``HALF``) a vec4 is two uints read with ``unpackHalf2x16`` and written with
  ``packHalf2x16``; a single half (``copy_map``) is written with ``atomicAnd``/``atomicOr`` on
  its 16 bits so neighbours written by other invocations are kept; arithmetic is float32;
- float8 accumulators of the register-blocked kernels are two vec4 (``lo``/``hi``) and the
  4 weight rows of a step a mat4.

The sources start with ``#version 310 es``; `version_line()` is swapped for ``#version 430``
where a desktop driver refuses the ES line (the bodies are ES-compatible).
"""
from __future__ import annotations

from acelera.plugins.gpu_plan.params import ACC_CHUNK, CONV_BLOCKS, DW_BLOCK

LOCAL_SIZE = 64
P_WORDS = 64  # parameter block: ivec4[16]

VERSION_ES = "#version 310 es"
VERSION_DESKTOP = "#version 430"


def _loads(buf: str, half: bool) -> str:
    if half:
        return (f"vec4 LD4_{buf}(int i) {{ return vec4(unpackHalf2x16({buf}[2 * i]), unpackHalf2x16({buf}[2 * i + 1])); }}\n"
                f"float LD1_{buf}(int i) {{ vec2 v = unpackHalf2x16({buf}[i >> 1]); return (i & 1) == 1 ? v.y : v.x; }}\n")
    return (f"vec4 LD4_{buf}(int i) {{ int j = 4 * i; return uintBitsToFloat(uvec4({buf}[j], {buf}[j + 1], "
            f"{buf}[j + 2], {buf}[j + 3])); }}\n"
            f"float LD1_{buf}(int i) {{ return uintBitsToFloat({buf}[i]); }}\n")


HEADER = r"""
precision highp float;
precision highp int;
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BA { uint a[]; };
layout(std430, binding = 1) readonly buffer BB { uint b[]; };
layout(std430, binding = 2) readonly buffer BC { uint c[]; };
layout(std430, binding = 3) buffer BD { uint dst[]; };
layout(std140, binding = 0) uniform BP { ivec4 pv[16]; };
#define FLT_MAX 3.402823466e+38
int P(int i) { return pv[i >> 2][i & 3]; }
float PF(int i) { return intBitsToFloat(P(i)); }
int CI(int j) { return int(c[j]); }
float CF(int j) { return uintBitsToFloat(c[j]); }
int gid() { return int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u); }
vec4 rnd(vec4 x) { return sign(x) * floor(abs(x) + 0.5); }
vec4 as01(bvec4 m) { return mix(vec4(0.0), vec4(1.0), m); }
/* GELU 0.5 x erfc(-x / sqrt 2) as max(x, 0) - 0.5 |x| erfc(|x| / sqrt 2), erfc by Abramowitz &
   Stegun 7.1.26 (GLSL has no erf; absolute error < 1.5e-7), as the CPU reference computes it */
vec4 gelu_erf(vec4 x) {
  vec4 ax = abs(x), z = ax * 0.70710678;
  vec4 t = 1.0 / (1.0 + 0.3275911 * z);
  vec4 p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return max(x, 0.0) - 0.5 * ax * p * exp(-z * z);
}
/* float -> int32 as LiteRT casts: truncate, saturate (2^31 stands for INT32_MAX), NaN -> max */
vec4 to_int32(vec4 v) {
  vec4 t = clamp(trunc(v), -2147483648.0, 2147483648.0);
  return mix(t, vec4(2147483648.0), isnan(v));
}
/* x - q y with q y exact as a sum p + e (Dekker's product: ES 3.1 has no fma), so its sign is
   exact when q is within one of x / y */
vec4 remainder_of(vec4 x, vec4 q, vec4 y) {
  vec4 cq = 4097.0 * q, cy = 4097.0 * y;
  vec4 qh = cq - (cq - q), yh = cy - (cy - y);
  vec4 ql = q - qh, yl = y - yh;
  vec4 p = q * y;
  vec4 e = ((qh * yh - p) + qh * yl + ql * yh) + ql * yl;
  return (x - p) - e;
}
/* TFLite's floor of the (double) quotient: floor(x / y) fixed by the sign of the remainder */
vec4 floor_div(vec4 x, vec4 y) {
  vec4 q = floor(x / y);
  vec4 r = remainder_of(x, q, y);
  uvec4 p = uvec4(greaterThan(y, vec4(0.0))), n = uvec4(lessThan(y, vec4(0.0)));
  q = mix(q, q - 1.0, bvec4(p & uvec4(lessThan(r, vec4(0.0))) | n & uvec4(greaterThan(r, vec4(0.0)))));
  return mix(q, q + 1.0, bvec4(p & uvec4(greaterThanEqual(r, y)) | n & uvec4(lessThanEqual(r, y))));
}
/* TFLite's FloorMod: the truncated remainder (no fmod in GLSL: x - y trunc(x / y)) moved to the
   divisor's sign */
vec4 floor_mod(vec4 x, vec4 y) {
  vec4 m = x - y * trunc(x / y);
  uvec4 moved = uvec4(lessThan(y, vec4(0.0))) ^ uvec4(lessThan(m, vec4(0.0)));
  return mix(m, m + y, bvec4(uvec4(notEqual(m, vec4(0.0))) & moved));
}

vec4 unary_op(vec4 v, int code, float lo, float hi) {
  switch (code) {
    case 0: return min(max(v, vec4(lo)), vec4(hi));
    case 1: return mix(tanh(clamp(v, -10.0, 10.0)), v, isnan(v));
    case 2: return 1.0 / (1.0 + exp(-v));
    case 3: return v * clamp(v + 3.0, 0.0, 6.0) / 6.0;
    case 4: return mix(v * lo, v, greaterThanEqual(v, vec4(0.0)));
    case 5: return exp(v);
    case 6: return abs(v);
    case 7: return -v;
    case 8: return sqrt(v);
    case 9: return inversesqrt(v);
    case 10: return log(v);
    case 11: return sin(v);
    case 12: return cos(v);
    case 13: return v * v;
    case 14: return floor(v);
    case 15: return mix(exp(v) - 1.0, v, greaterThan(v, vec4(0.0)));
    case 16: return mix(sign(v), v, isnan(v));
    case 17: return ceil(v);
    case 18: return rnd(v / lo) * lo;
    case 19: return gelu_erf(v);
    case 20: return 0.5 * v * (1.0 + tanh(clamp(0.7978845608 * (v + 0.044715 * v * v * v), -10.0, 10.0)));
    case 21: return to_int32(v);
    case 22: return as01(notEqual(v, vec4(0.0)));
  }
  return v;
}

vec4 epilogue(vec4 v) {
  if (P(0) >= 0) v = unary_op(v, P(0), PF(1), PF(2));
  if (P(3) >= 0) v = unary_op(v, P(3), PF(4), PF(5));
  float s = PF(6);
  if (s > 0.0) {
    float zp = PF(7);
    vec4 q = clamp(rnd(v / s) + zp, PF(8), PF(9));
    v = (q - zp) * s;
  }
  return v;
}
"""

STORE_HALF = r"""
void ST4(vec4 v, int i) {
  if (P(13) != 0) { int j = 4 * i; dst[j] = floatBitsToUint(v.x); dst[j + 1] = floatBitsToUint(v.y);
                    dst[j + 2] = floatBitsToUint(v.z); dst[j + 3] = floatBitsToUint(v.w); }
  else { dst[2 * i] = packHalf2x16(v.xy); dst[2 * i + 1] = packHalf2x16(v.zw); }
}
void ST1(float v, int d) {
  if (P(13) != 0) { dst[d] = floatBitsToUint(v); return; }
  uint sh = uint(d & 1) * 16u;
  uint bits = (packHalf2x16(vec2(v, 0.0)) & 0xFFFFu) << sh;
  atomicAnd(dst[d >> 1], ~(0xFFFFu << sh));
  atomicOr(dst[d >> 1], bits);
}
"""

STORE_FLOAT = r"""
void ST4(vec4 v, int i) {
  int j = 4 * i; dst[j] = floatBitsToUint(v.x); dst[j + 1] = floatBitsToUint(v.y);
  dst[j + 2] = floatBitsToUint(v.z); dst[j + 3] = floatBitsToUint(v.w);
}
void ST1(float v, int d) { dst[d] = floatBitsToUint(v); }
"""

STORE4 = r"""
/* store an output vector of slice s, zeroing the lanes past the last channel */
void store4(vec4 v, int idx, int s) {
  if (s == P(10) - 1) {
    int r = P(11);
    if (r < 4) v.w = 0.0;
    if (r < 3) v.z = 0.0;
    if (r < 2) v.y = 0.0;
  }
  ST4(v, idx);
}
float ld_chan(int bb, int ch, int y, int x, int S, int H, int W) {
  return LD1_a((((bb * S + (ch >> 2)) * H + y) * W + x) * 4 + (ch & 3));
}
"""

KERNELS: dict[str, str] = {}


_BINARY_OPS = r"""
/* C's pow (GLSL's pow is undefined for x < 0, and for x == 0 with y <= 0): pow(|x|, y), negated
   for a negative base (or -0) and an odd integer power, NaN for a negative base and a
   non-integer power or a NaN operand; pow(x, 0) = pow(1, y) = 1, pow(+-0, y) = +-0 / +-inf */
vec4 cpow(vec4 x, vec4 y) {
  vec4 r = pow(abs(x), y);
  for (int k = 0; k < 4; k++) {
    float a = x[k], e = y[k];
    bool neg = (floatBitsToUint(a) >> 31) != 0u, odd = e == floor(e) && mod(e, 2.0) == 1.0;
    if (e == 0.0 || a == 1.0) r[k] = 1.0;
    else if (isnan(a) || isnan(e) || (a < 0.0 && e != floor(e))) r[k] = uintBitsToFloat(0x7FC00000u);
    else if (a == 0.0) r[k] = e > 0.0 ? 0.0 : uintBitsToFloat(0x7F800000u);
    if (neg && odd && !isnan(r[k])) r[k] = -r[k];
  }
  return r;
}
vec4 binary_op(vec4 x, vec4 y, int code) {
  switch (code) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 3: return x / y;
    case 4: return max(x, y);
    case 5: return min(x, y);
    case 6: return mix(x * y, x, greaterThanEqual(x, vec4(0.0)));
    case 7: return (x - y) * (x - y);
    case 8: return cpow(x, y);
    case 9: return floor_div(x, y);
    case 10: return floor_mod(x, y);
    case 11: return as01(equal(x, y));
    case 12: return as01(notEqual(x, y));
    case 13: return as01(lessThan(x, y));
    case 14: return as01(lessThanEqual(x, y));
    case 15: return as01(greaterThan(x, y));
    case 16: return as01(greaterThanEqual(x, y));
    case 17: return as01(bvec4(uvec4(notEqual(x, vec4(0.0))) & uvec4(notEqual(y, vec4(0.0)))));
  }
  return x;
}
"""

KERNELS["copy_map"] = r"""
void main() {
  int j = gid();
  if (j >= P(12)) return;
  int d = CI(2 * j), sidx = CI(2 * j + 1);
  ST1(epilogue(vec4(LD1_a(sidx))).x, d);
}
"""

KERNELS["copy_vec"] = r"""
void main() {
  int j = gid();
  if (j >= P(12)) return;
  int d = CI(2 * j);
  store4(epilogue(LD4_a(CI(2 * j + 1))), d, (d / P(16)) % P(10));
}
"""

KERNELS["pool"] = r"""
void main() {
  int i = gid();
  if (i >= P(12)) return;
  int IH = P(16), IW = P(17), S = P(18), OH = P(20), OW = P(21);
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int s = t % S; int bb = t / S;
  int y0 = oy * P(24) - P(26), x0 = ox * P(25) - P(27);
  bool avg = P(28) != 0;
  vec4 acc = avg ? vec4(0.0) : vec4(-FLT_MAX);
  int n = 0;
  for (int ky = 0; ky < P(22); ky++) {
    int y = y0 + ky;
    if (y < 0 || y >= IH) continue;
    for (int kx = 0; kx < P(23); kx++) {
      int x = x0 + kx;
      if (x < 0 || x >= IW) continue;
      vec4 v = LD4_a(((bb * S + s) * IH + y) * IW + x);
      acc = avg ? acc + v : max(acc, v);
      n++;
    }
  }
  if (avg) acc = acc / float(max(n, 1));
  store4(epilogue(acc), i, s);
}
"""

KERNELS["resize"] = r"""
void main() {
  int i = gid();
  if (i >= P(12)) return;
  int IH = P(16), IW = P(17), S = P(18), OH = P(20), OW = P(21);
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int s = t % S; int bb = t / S;
  int ya = CI(oy), yb = CI(OH + oy), xa = CI(2 * OH + ox), xb = CI(2 * OH + OW + ox);
  int base = (bb * S + s) * IH;
  vec4 r;
  if (P(22) != 0) {
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

KERNELS["softmax"] = r"""
void main() {
  int i = gid();
  if (i >= P(12)) return;
  int HW = P(16), S = P(17), C = P(18);
  float beta = PF(19);
  int bb = i / HW, hw = i % HW;
  int base = bb * S * HW + hw;
  float m = -FLT_MAX;
  for (int s = 0; s < S; s++) {
    vec4 v = LD4_a(base + s * HW);
    int r = C - 4 * s;
    m = max(m, v.x);
    if (r > 1) m = max(m, v.y);
    if (r > 2) m = max(m, v.z);
    if (r > 3) m = max(m, v.w);
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

KERNELS["reduce"] = r"""
float red1(float acc, float v, int code) {
  if (code == 2) return max(acc, v);
  if (code == 3) return min(acc, v);
  if (code == 4) return acc * v;
  return acc + v;
}
vec4 red4(vec4 acc, vec4 v, int code) {
  if (code == 2) return max(acc, v);
  if (code == 3) return min(acc, v);
  if (code == 4) return acc * v;
  return acc + v;
}
void main() {
  int i = gid();
  if (i >= P(12)) return;
  int IH = P(16), IW = P(17), IS = P(18), IB = P(19), IC = P(20);
  int OH = P(21), OW = P(22), OS = P(23);
  int code = P(28);
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int os = t % OS; int ob = t / OS;
  int b0 = P(24) != 0 ? 0 : ob, b1 = P(24) != 0 ? IB : ob + 1;
  int h0 = P(25) != 0 ? 0 : oy, h1 = P(25) != 0 ? IH : oy + 1;
  int w0 = P(26) != 0 ? 0 : ox, w1 = P(26) != 0 ? IW : ox + 1;
  float init = code == 2 ? -FLT_MAX : code == 3 ? FLT_MAX : code == 4 ? 1.0 : 0.0;
  vec4 acc = vec4(init);
  if (P(27) != 0) {
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
  if (code == 1) acc *= PF(29);
  store4(epilogue(acc), i, os);
}
"""


def _mad8(xb: int, ind: str) -> list[str]:
    """acc_x (lo/hi: 8 output channels) += the 4 input lanes of v_x times the 8-wide weight rows
    at vector offset wo (a row = 8 weights = two vec4)."""
    out = [f"{ind}{{ int q = 2 * wo;",
           f"{ind}  mat4 wl = mat4(LD4_b(q), LD4_b(q + 2), LD4_b(q + 4), LD4_b(q + 6));",
           f"{ind}  mat4 wh = mat4(LD4_b(q + 1), LD4_b(q + 3), LD4_b(q + 5), LD4_b(q + 7));"]
    for x in range(xb):
        out.append(f"{ind}  plo{x} += wl * v{x}; phi{x} += wh * v{x};")
    out.append(f"{ind}}}")
    return out


def _store8(xb: int, index: str, cond: str) -> list[str]:
    out = []
    for part, sel in ((0, "lo"), (1, "hi")):
        out += [f"  {{ int os = 2 * g + {part};", "    if (os < OS) {", "      vec4 bias = LD4_c(os);"]
        for x in range(xb):
            out.append(f"      if ({cond.format(x=x)}) store4(epilogue({sel}{x} + bias), {index.format(x=x)}, os);")
        out += ["    }", "  }"]
    return out


def _acc8(xb: int, ind: str = "  ", prefix: str = "") -> list[str]:
    return [f"{ind}vec4 {prefix}lo{x} = vec4(0.0), {prefix}hi{x} = vec4(0.0);" for x in range(xb)]


def _fold8(xb: int, ind: str) -> list[str]:
    """Add the partial sums (see gpu_opencl.source: two-level dot products) to the totals."""
    return [f"{ind}lo{x} += plo{x}; hi{x} += phi{x};" for x in range(xb)]


def _conv(xb: int, pointwise: bool) -> str:
    X = range(xb)
    lines = ["void main() {", "  int gi = gid();", "  if (gi >= P(12)) return;",
             "  int IH = P(16), IW = P(17), IS = P(18), OH = P(19), OW = P(20), OS = P(21);",
             "  int KH = P(22), KW = P(23), SH = P(24), SW = P(25), PT = P(26), PL = P(27);",
             "  int DH = P(28), DW = P(29), NXB = P(30), B = P(31);",
             "  int xblk = gi % NXB; int t = gi / NXB;", "  int oy = t % OH; t /= OH;",
             "  int bb = t % B; int g = t / B;", f"  int ox0 = xblk * {xb};"]
    lines += _acc8(xb)
    lines.append("  int plane = IH * IW;")
    if pointwise:
        lines += [f"  int ix{x} = min(ox0 + {x}, OW - 1);" for x in X]
        lines += ["  int sbase = bb * IS * plane + oy * IW;", "  int wo = g * IS * 4;",
                  f"  for (int s0 = 0; s0 < IS; s0 += {ACC_CHUNK}) {{"]
        lines += _acc8(xb, "    ", "p")
        lines += [f"    for (int s = s0; s < min(s0 + {ACC_CHUNK}, IS); s++) {{", "      int so = sbase + s * plane;"]
        lines += [f"      vec4 v{x} = LD4_a(so + ix{x});" for x in X]
        lines += _mad8(xb, "      ")
        lines += ["      wo += 4;", "    }"] + _fold8(xb, "    ") + ["  }"]
    else:
        lines += ["  for (int ky = 0; ky < KH; ky++) {", "    int iy = oy * SH - PT + ky * DH;",
                  "    if (iy < 0 || iy >= IH) continue;", "    int sbase = bb * IS * plane + iy * IW;"]
        lines += _acc8(xb, "    ", "p")
        lines += ["    for (int kx = 0; kx < KW; kx++) {"]
        for x in X:
            lines += [f"      int ix{x} = (ox0 + {x}) * SW - PL + kx * DW;",
                      f"      bool ok{x} = ix{x} >= 0 && ix{x} < IW;",
                      f"      ix{x} = clamp(ix{x}, 0, IW - 1);"]
        lines += ["      int wo = ((g * KH + ky) * KW + kx) * IS * 4;", "      for (int s = 0; s < IS; s++) {",
                  "        int so = sbase + s * plane;"]
        lines += [f"        vec4 v{x} = ok{x} ? LD4_a(so + ix{x}) : vec4(0.0);" for x in X]
        lines += _mad8(xb, "        ")
        lines += ["        wo += 4;", "      }", "    }"] + _fold8(xb, "    ") + ["  }"]
    lines += _store8(xb, "((bb * OS + os) * OH + oy) * OW + ox0 + {x}", "ox0 + {x} < OW")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _depthwise(xb: int) -> str:
    X = range(xb)
    lines = ["void main() {", "  int gi = gid();", "  if (gi >= P(12)) return;",
             "  int IH = P(16), IW = P(17), IS = P(18), OH = P(19), OW = P(20), OS = P(21);",
             "  int KH = P(22), KW = P(23), SH = P(24), SW = P(25), PT = P(26), PL = P(27);",
             "  int DH = P(28), DW = P(29), NXB = P(30), B = P(31), M = P(32);",
             "  int xblk = gi % NXB; int t = gi / NXB;", "  int oy = t % OH; t /= OH;",
             "  int bb = t % B; int os = t / B;", f"  int ox0 = xblk * {xb};",
             "  int ch0 = min(4 * os / M, P(33) - 1), ch1 = min((4 * os + 1) / M, P(33) - 1);",
             "  int ch2 = min((4 * os + 2) / M, P(33) - 1), ch3 = min((4 * os + 3) / M, P(33) - 1);"]
    lines += [f"  vec4 acc{x} = vec4(0.0);" for x in X]
    lines += ["  for (int ky = 0; ky < KH; ky++) {", "    int iy = oy * SH - PT + ky * DH;",
              "    if (iy < 0 || iy >= IH) continue;", "    for (int kx = 0; kx < KW; kx++) {",
              "      vec4 w = LD4_b((os * KH + ky) * KW + kx);"]
    for x in X:
        lines += [f"      int ix{x} = (ox0 + {x}) * SW - PL + kx * DW;",
                  f"      if (ix{x} >= 0 && ix{x} < IW) {{", "        vec4 v;",
                  f"        if (M == 1) v = LD4_a(((bb * IS + os) * IH + iy) * IW + ix{x});",
                  f"        else v = vec4(ld_chan(bb, ch0, iy, ix{x}, IS, IH, IW), ld_chan(bb, ch1, iy, ix{x}, IS, IH, IW), "
                  f"ld_chan(bb, ch2, iy, ix{x}, IS, IH, IW), ld_chan(bb, ch3, iy, ix{x}, IS, IH, IW));",
                  f"        acc{x} += v * w;", "      }"]
    lines += ["    }", "  }", "  vec4 bias = LD4_c(os);", "  int obase = ((bb * OS + os) * OH + oy) * OW;"]
    lines += [f"  if (ox0 + {x} < OW) store4(epilogue(acc{x} + bias), obase + ox0 + {x}, os);" for x in X]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _depthwise3x3(stride: int, xb: int) -> str:
    win = (xb - 1) * stride + 3
    lines = ["void main() {", "  int gi = gid();", "  if (gi >= P(12)) return;",
             "  int IH = P(16), IW = P(17), IS = P(18), OH = P(19), OW = P(20), OS = P(21);",
             "  int PT = P(26), PL = P(27), NXB = P(30), B = P(31);",
             "  int xblk = gi % NXB; int t = gi / NXB;", "  int oy = t % OH; t /= OH;",
             "  int bb = t % B; int os = t / B;", f"  int ix0 = xblk * {xb * stride} - PL;"]
    lines += [f"  vec4 acc{x} = vec4(0.0);" for x in range(xb)]
    lines += ["  for (int ky = 0; ky < 3; ky++) {", f"    int iy = oy * {stride} - PT + ky;",
              "    if (iy < 0 || iy >= IH) continue;", "    int row = ((bb * IS + os) * IH + iy) * IW;",
              "    int wb = (os * 3 + ky) * 3;",
              "    vec4 w0 = LD4_b(wb), w1 = LD4_b(wb + 1), w2 = LD4_b(wb + 2);"]
    for i in range(win):
        lines.append(f"    vec4 r{i} = (ix0 + {i} >= 0 && ix0 + {i} < IW) ? LD4_a(row + clamp(ix0 + {i}, 0, IW - 1)) : vec4(0.0);")
    for x in range(xb):
        o = x * stride
        lines.append(f"    acc{x} += r{o} * w0 + r{o + 1} * w1 + r{o + 2} * w2;")
    lines += ["  }", "  vec4 bias = LD4_c(os);", "  int obase = ((bb * OS + os) * OH + oy) * OW;",
              f"  int ox0 = xblk * {xb};"]
    lines += [f"  if (ox0 + {x} < OW) store4(epilogue(acc{x} + bias), obase + ox0 + {x}, os);" for x in range(xb)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _fc() -> str:
    lines = ["void main() {", "  int gi = gid();", "  if (gi >= P(12)) return;", "  int KS = P(16), OS = P(17);",
             "  int g = gi % P(23), n = gi / P(23);", "  int ib = n * P(19);"]
    lines += _acc8(1)
    lines += ["  int wo = g * KS * 4;", f"  for (int k0 = 0; k0 < KS; k0 += {ACC_CHUNK}) {{"]
    lines += _acc8(1, "    ", "p")
    lines += [f"    for (int k = k0; k < min(k0 + {ACC_CHUNK}, KS); k++) {{", "      vec4 v0 = LD4_a(ib + k * P(20));"]
    lines += _mad8(1, "      ")
    lines += ["      wo += 4;", "    }"] + _fold8(1, "    ") + ["  }"]
    lines += _store8(1, "n * P(21) + os * P(22)", "true")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _tconv() -> str:
    lines = ["void main() {", "  int gi = gid();", "  if (gi >= P(12)) return;",
             "  int IH = P(16), IW = P(17), IS = P(18), OH = P(19), OW = P(20), OS = P(21);",
             "  int KH = P(22), KW = P(23), SH = P(24), SW = P(25), PT = P(26), PL = P(27);",
             "  int B = P(29);", "  int ox = gi % OW; int t = gi / OW;", "  int oy = t % OH; t /= OH;",
             "  int bb = t % B; int g = t / B;"]
    lines += _acc8(1)
    lines += ["  int plane = IH * IW;", "  int yy = oy + PT, xx = ox + PL;",
              "  for (int ky = yy % SH; ky < KH; ky += SH) {", "    int iy = (yy - ky) / SH;",
              "    if (iy < 0 || iy >= IH) continue;", "    for (int kx = xx % SW; kx < KW; kx += SW) {",
              "      int ix = (xx - kx) / SW;", "      if (ix < 0 || ix >= IW) continue;",
              "      int wo = ((g * KH + ky) * KW + kx) * IS * 4;", "      int so = bb * IS * plane + iy * IW + ix;"]
    lines += _acc8(1, "      ", "p")
    lines += ["      for (int s = 0; s < IS; s++) {", "        vec4 v0 = LD4_a(so + s * plane);"]
    lines += _mad8(1, "        ")
    lines += ["        wo += 4;", "      }"] + _fold8(1, "      ") + ["    }", "  }"]
    lines += _store8(1, "((bb * OS + os) * OH + oy) * OW + ox", "true")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _exact_loads() -> str:
    """Loads of operands that may hold float32 in a half plan (the `unary`, `binary` and `where`
    kernels' per-operand flags): LDX4_a(i, f32), LDX1_a(i, f32), for a, b and c."""
    out = []
    for t in "abc":
        out.append(f"vec4 LDX4_{t}(int i, bool f) {{ if (!f) return LD4_{t}(i); int j = 4 * i; "
                   f"return uintBitsToFloat(uvec4({t}[j], {t}[j + 1], {t}[j + 2], {t}[j + 3])); }}\n"
                   f"float LDX1_{t}(int i, bool f) {{ return f ? uintBitsToFloat({t}[i]) : LD1_{t}(i); }}\n")
    return "".join(out)


KERNELS["unary"] = _exact_loads() + r"""
void main() {
  int i = gid();
  if (i >= P(12)) return;
  int s = (i / P(16)) % P(10);
  store4(epilogue(unary_op(LDX4_a(i, P(20) != 0), P(17), PF(18), PF(19))), i, s);
}
"""

KERNELS["binary"] = _exact_loads() + _BINARY_OPS + r"""
void main() {
  int i = gid();
  if (i >= P(12)) return;
  int H = P(16), W = P(17), S = P(18);
  int w = i % W; int t = i / W;
  int h = t % H; t /= H;
  int s = t % S; int bb = t / S;
  int ia = bb * P(20) + s * P(21) + h * P(22) + w * P(23);
  int ib = bb * P(24) + s * P(25) + h * P(26) + w * P(27);
  bool fa = P(31) != 0, fb = P(32) != 0;
  vec4 x = P(28) != 0 ? vec4(LDX1_a(ia * 4, fa)) : LDX4_a(ia, fa);
  vec4 y = P(29) != 0 ? vec4(LDX1_b(ib * 4, fb)) : LDX4_b(ib, fb);
  store4(epilogue(binary_op(x, y, P(30))), i, s);
}
"""

KERNELS["where"] = _exact_loads() + r"""
int bidx(int k, int bb, int s, int h, int w) {
  int o = 20 + 4 * k;
  return bb * P(o) + s * P(o + 1) + h * P(o + 2) + w * P(o + 3);
}
void main() {
  int i = gid();
  if (i >= P(12)) return;
  int H = P(16), W = P(17), S = P(18);
  int w = i % W; int t = i / W;
  int h = t % H; t /= H;
  int s = t % S; int bb = t / S;
  int ia = bidx(0, bb, s, h, w), ib = bidx(1, bb, s, h, w), ic = bidx(2, bb, s, h, w);
  bool fa = P(35) != 0, fb = P(36) != 0, fc = P(37) != 0;
  vec4 cnd = P(32) != 0 ? vec4(LDX1_a(ia, fa)) : LDX4_a(ia, fa);
  vec4 x = P(33) != 0 ? vec4(LDX1_b(ib, fb)) : LDX4_b(ib, fb);
  vec4 y = P(34) != 0 ? vec4(LDX1_c(ic, fc)) : LDX4_c(ic, fc);
  store4(epilogue(mix(y, x, notEqual(cnd, vec4(0.0)))), i, s);
}
"""

KERNELS["lstm_cell"] = r"""
void main() {
  int j = gid();
  if (j >= P(12)) return;
  int S = P(16);
  int s = j % S, g0 = (j / S) * 4 * S + s;
  vec4 ig = 1.0 / (1.0 + exp(-LD4_a(g0)));
  vec4 f = 1.0 / (1.0 + exp(-LD4_a(g0 + 2 * S)));
  vec4 st = ig * tanh(clamp(LD4_a(g0 + S), -10.0, 10.0)) + f * LD4_b(j);
  if (P(17) != 0) st = tanh(clamp(st, -10.0, 10.0)) / (1.0 + exp(-LD4_a(g0 + 3 * S)));
  store4(epilogue(st), j, s);
}
"""


for _xb in CONV_BLOCKS:
    KERNELS[f"conv2d_x{_xb}"] = _conv(_xb, False)
    KERNELS[f"conv2d_1x1_x{_xb}"] = _conv(_xb, True)
KERNELS["depthwise"] = _depthwise(DW_BLOCK)
KERNELS["depthwise3x3_s1"] = _depthwise3x3(1, DW_BLOCK)
KERNELS["depthwise3x3_s2"] = _depthwise3x3(2, DW_BLOCK)
KERNELS["fully_connected"] = _fc()
KERNELS["transpose_conv"] = _tconv()


def shader_source(kernel: str, half: bool, version: str = VERSION_ES) -> str:
    """The whole compute shader of `kernel` for half or float32 storage."""
    body = KERNELS.get(kernel)
    if body is None:
        raise KeyError(f"gpu-gl has no shader '{kernel}'")
    loads = "".join(_loads(buf, half) for buf in ("a", "b", "c"))
    return "\n".join([version, HEADER, loads, STORE_HALF if half else STORE_FLOAT, STORE4, body])


def all_sources() -> str:
    """Every shader body (part of the serialization key)."""
    return HEADER + STORE_HALF + STORE_FLOAT + STORE4 + "".join(KERNELS[k] for k in sorted(KERNELS))
