"""Elementwise kernels: `unary` (codes U_*, `unary_op` in common), `binary` with broadcasting
(codes B_*) and `where` (SELECT / SELECT_V2). Geometry: UNARY_*, BINARY_*, WHERE_* in params.

Each reads its operands through a per-operand float32 flag (``*_F32``): bool and int32 tensors
and exact copies of inputs hold float32 even in a half plan (`Compiler.operand`); bools are
0.0 / 1.0.
"""
from __future__ import annotations

from acelera.backends.gpu.kernels.common import Kernel, glsl_exact_loads

# --- unary: over every vector of a tensor --------------------------------------------------------

UNARY_OPENCL = r"""
__kernel void unary(KARGS) {
  int i = get_global_id(0);
  if (i >= p[P_N]) return;
  int s = (i / p[UNARY_HW]) % p[P_OS];
  float4 v = unary_op(ld4x(a, i, p[UNARY_A_F32]), p[UNARY_CODE], PF(UNARY_LO), PF(UNARY_HI));
  store4(epilogue(v, p), i, s, dst, p);
}
"""

UNARY_GLSL = glsl_exact_loads() + r"""
void main() {
  int i = gid();
  if (i >= P(P_N)) return;
  int s = (i / P(UNARY_HW)) % P(P_OS);
  store4(epilogue(unary_op(LDX4_a(i, P(UNARY_A_F32) != 0), P(UNARY_CODE), PF(UNARY_LO), PF(UNARY_HI))), i, s);
}
"""

# --- binary: floor division and modulo as TFLite computes them, binary_op, the kernel ------------

BINARY_OPENCL = r"""
/* TFLite's floor(x / y) (a double quotient there): the exact remainder fma(-q, y, x) must have
   y's sign and be smaller than |y|, which fixes a quotient an approximate division put off. */
inline float4 floor_div(float4 x, float4 y) {
  float4 q = floor(x / y);
  float4 r = fma(-q, y, x);
  int4 pos = isgreater(y, (float4)(0.0f)), neg = isless(y, (float4)(0.0f));
  q = select(q, q - 1.0f, (pos & isless(r, (float4)(0.0f))) | (neg & isgreater(r, (float4)(0.0f))));
  return select(q, q + 1.0f, (pos & isgreaterequal(r, y)) | (neg & islessequal(r, y)));
}

/* TFLite's FloorMod: fmod (exact), moved to the divisor's sign. */
inline float4 floor_mod(float4 x, float4 y) {
  float4 m = fmod(x, y);
  return select(m, m + y, isnotequal(m, (float4)(0.0f)) & (isless(y, (float4)(0.0f)) ^ isless(m, (float4)(0.0f))));
}

inline float4 binary_op(float4 x, float4 y, int code) {
  switch (code) {
    case B_ADD: return x + y;
    case B_SUB: return x - y;
    case B_MUL: return x * y;
    case B_DIV: return x / y;
    case B_MAX: return max_ab(x, y);
    case B_MIN: return min_ab(x, y);
    case B_PRELU: return select(x * y, x, isgreaterequal(x, (float4)(0.0f)));
    case B_SQDIFF: return (x - y) * (x - y);
    case B_POW: return pow(x, y);
    case B_FLOOR_DIV: return floor_div(x, y);
    case B_FLOOR_MOD: return floor_mod(x, y);
    case B_EQUAL: return as01(isequal(x, y));
    case B_NOT_EQUAL: return as01(isnotequal(x, y));
    case B_LESS: return as01(isless(x, y));
    case B_LESS_EQUAL: return as01(islessequal(x, y));
    case B_GREATER: return as01(isgreater(x, y));
    case B_GREATER_EQUAL: return as01(isgreaterequal(x, y));
    case B_AND: return as01(isnotequal(x, (float4)(0.0f)) & isnotequal(y, (float4)(0.0f)));
  }
  return x;
}

__kernel void binary(KARGS) {
  int i = get_global_id(0);
  if (i >= p[P_N]) return;
  int H = p[BINARY_H], W = p[BINARY_W], S = p[BINARY_S];
  int w = i % W; int t = i / W;
  int h = t % H; t /= H;
  int s = t % S; int bb = t / S;
  int ia = bb * p[BINARY_A_STRIDES] + s * p[BINARY_A_STRIDES + 1]
         + h * p[BINARY_A_STRIDES + 2] + w * p[BINARY_A_STRIDES + 3];
  int ib = bb * p[BINARY_B_STRIDES] + s * p[BINARY_B_STRIDES + 1]
         + h * p[BINARY_B_STRIDES + 2] + w * p[BINARY_B_STRIDES + 3];
  float4 x = p[BINARY_A_SPLAT] ? (float4)(ld1x(a, ia * 4, p[BINARY_A_F32])) : ld4x(a, ia, p[BINARY_A_F32]);
  float4 y = p[BINARY_B_SPLAT] ? (float4)(ld1x(b, ib * 4, p[BINARY_B_F32])) : ld4x(b, ib, p[BINARY_B_F32]);
  store4(epilogue(binary_op(x, y, p[BINARY_CODE]), p), i, s, dst, p);
}
"""

BINARY_GLSL = glsl_exact_loads() + r"""
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
/* TFLite's FloorMod: the truncated remainder (no fmod in GLSL: x - y trunc(x / y); C's fmod(x, +-inf)
   is x for a finite x) moved to the divisor's sign */
vec4 floor_mod(vec4 x, vec4 y) {
  vec4 m = mix(x - y * trunc(x / y), x, bvec4(uvec4(isinf(y)) & uvec4(not(isinf(x)))));
  uvec4 moved = uvec4(lessThan(y, vec4(0.0))) ^ uvec4(lessThan(m, vec4(0.0)));
  return mix(m, m + y, bvec4(uvec4(notEqual(m, vec4(0.0))) & moved));
}
/* C's pow (GLSL's pow is undefined for x < 0, and for x == 0 with y <= 0): pow(|x|, y), negated
   for a negative base (or -0) and an odd integer power, NaN for a negative finite base and a
   non-integer finite power or a NaN operand; pow(x, 0) = pow(1, y) = pow(-1, +-inf) = 1,
   pow(+-0, y) = +-0 / +-inf, pow(+-inf, y) = +-0 / +-inf, pow(x, +-inf) = 0 / inf by |x| < 1 */
vec4 cpow(vec4 x, vec4 y) {
  vec4 r = pow(abs(x), y);
  float inf = uintBitsToFloat(0x7F800000u);
  for (int k = 0; k < 4; k++) {
    float a = x[k], e = y[k];
    bool neg = (floatBitsToUint(a) >> 31) != 0u, odd = !isinf(e) && e == floor(e) && mod(e, 2.0) == 1.0;
    if (e == 0.0 || a == 1.0) r[k] = 1.0;
    else if (isnan(a) || isnan(e)) r[k] = uintBitsToFloat(0x7FC00000u);
    else if (isinf(e)) r[k] = abs(a) == 1.0 ? 1.0 : ((abs(a) < 1.0) == (e > 0.0) ? 0.0 : inf);
    else if (a == 0.0 || isinf(a)) r[k] = (e > 0.0) == isinf(a) ? inf : 0.0;
    else if (a < 0.0 && e != floor(e)) r[k] = uintBitsToFloat(0x7FC00000u);
    if (neg && odd && !isnan(r[k])) r[k] = -r[k];
  }
  return r;
}
vec4 binary_op(vec4 x, vec4 y, int code) {
  switch (code) {
    case B_ADD: return x + y;
    case B_SUB: return x - y;
    case B_MUL: return x * y;
    case B_DIV: return x / y;
    case B_MAX: return max_ab(x, y);
    case B_MIN: return min_ab(x, y);
    case B_PRELU: return mix(x * y, x, greaterThanEqual(x, vec4(0.0)));
    case B_SQDIFF: return (x - y) * (x - y);
    case B_POW: return cpow(x, y);
    case B_FLOOR_DIV: return floor_div(x, y);
    case B_FLOOR_MOD: return floor_mod(x, y);
    case B_EQUAL: return as01(equal(x, y));
    case B_NOT_EQUAL: return as01(notEqual(x, y));
    case B_LESS: return as01(lessThan(x, y));
    case B_LESS_EQUAL: return as01(lessThanEqual(x, y));
    case B_GREATER: return as01(greaterThan(x, y));
    case B_GREATER_EQUAL: return as01(greaterThanEqual(x, y));
    case B_AND: return as01(bvec4(uvec4(notEqual(x, vec4(0.0))) & uvec4(notEqual(y, vec4(0.0)))));
  }
  return x;
}

void main() {
  int i = gid();
  if (i >= P(P_N)) return;
  int H = P(BINARY_H), W = P(BINARY_W), S = P(BINARY_S);
  int w = i % W; int t = i / W;
  int h = t % H; t /= H;
  int s = t % S; int bb = t / S;
  int ia = bb * P(BINARY_A_STRIDES) + s * P(BINARY_A_STRIDES + 1)
         + h * P(BINARY_A_STRIDES + 2) + w * P(BINARY_A_STRIDES + 3);
  int ib = bb * P(BINARY_B_STRIDES) + s * P(BINARY_B_STRIDES + 1)
         + h * P(BINARY_B_STRIDES + 2) + w * P(BINARY_B_STRIDES + 3);
  bool fa = P(BINARY_A_F32) != 0, fb = P(BINARY_B_F32) != 0;
  vec4 x = P(BINARY_A_SPLAT) != 0 ? vec4(LDX1_a(ia * 4, fa)) : LDX4_a(ia, fa);
  vec4 y = P(BINARY_B_SPLAT) != 0 ? vec4(LDX1_b(ib * 4, fb)) : LDX4_b(ib, fb);
  store4(epilogue(binary_op(x, y, P(BINARY_CODE))), i, s);
}
"""

# --- where: dst = a != 0 ? b : c, each operand broadcast through its own strides -------------------

WHERE_OPENCL = r"""
/* Operand k (0 condition, 1 if, 2 else) at an output position: a vector, or one scalar splat. */
inline float4 ld_bcast(__global const STYPE *t, __constant int *p, int k, int bb, int s, int h, int w) {
  int o = WHERE_STRIDES + 4 * k;
  int idx = bb * p[o] + s * p[o + 1] + h * p[o + 2] + w * p[o + 3];
  return p[WHERE_SPLAT + k] ? (float4)(ld1x(t, idx, p[WHERE_F32 + k])) : ld4x(t, idx, p[WHERE_F32 + k]);
}

__kernel void where(KARGS) {
  int i = get_global_id(0);
  if (i >= p[P_N]) return;
  int H = p[WHERE_H], W = p[WHERE_W], S = p[WHERE_S];
  int w = i % W; int t = i / W;
  int h = t % H; t /= H;
  int s = t % S; int bb = t / S;
  float4 cnd = ld_bcast(a, p, 0, bb, s, h, w);
  float4 x = ld_bcast(b, p, 1, bb, s, h, w), y = ld_bcast(c, p, 2, bb, s, h, w);
  store4(epilogue(select(y, x, isnotequal(cnd, (float4)(0.0f))), p), i, s, dst, p);
}
"""

WHERE_GLSL = glsl_exact_loads() + r"""
int bidx(int k, int bb, int s, int h, int w) {
  int o = WHERE_STRIDES + 4 * k;
  return bb * P(o) + s * P(o + 1) + h * P(o + 2) + w * P(o + 3);
}
void main() {
  int i = gid();
  if (i >= P(P_N)) return;
  int H = P(WHERE_H), W = P(WHERE_W), S = P(WHERE_S);
  int w = i % W; int t = i / W;
  int h = t % H; t /= H;
  int s = t % S; int bb = t / S;
  int ia = bidx(0, bb, s, h, w), ib = bidx(1, bb, s, h, w), ic = bidx(2, bb, s, h, w);
  bool fa = P(WHERE_F32) != 0, fb = P(WHERE_F32 + 1) != 0, fc = P(WHERE_F32 + 2) != 0;
  vec4 cnd = P(WHERE_SPLAT) != 0 ? vec4(LDX1_a(ia, fa)) : LDX4_a(ia, fa);
  vec4 x = P(WHERE_SPLAT + 1) != 0 ? vec4(LDX1_b(ib, fb)) : LDX4_b(ib, fb);
  vec4 y = P(WHERE_SPLAT + 2) != 0 ? vec4(LDX1_c(ic, fc)) : LDX4_c(ic, fc);
  store4(epilogue(mix(y, x, notEqual(cnd, vec4(0.0)))), i, s);
}
"""

KERNELS = (
    Kernel("unary", UNARY_OPENCL, UNARY_GLSL),
    Kernel("binary", BINARY_OPENCL, BINARY_GLSL),
    Kernel("where", WHERE_OPENCL, WHERE_GLSL),
)
