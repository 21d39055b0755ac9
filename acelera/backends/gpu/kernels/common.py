"""What every GPU kernel shares, in OpenCL C and in GLSL side by side: the `Kernel` pair, the
storage macros / buffer bindings, the unary ops (the epilogue's activation steps and the
`unary` kernel), the epilogue and the output store.

Tensors live in device buffers in TFLite's GPU layout: channels in slices of 4, stored
``[batch][slice][height][width][4]`` (PHWC4), lanes past the last channel kept at zero. Every
kernel reads inputs ``a``, ``b``, ``c`` (data, weights, bias or tables), writes ``dst`` and reads
the parameter block ``p`` (slots and op codes: `acelera.backends.gpu.params`, emitted as
``#define`` lines at the top of every program). Work is a 1-D range; each kernel decodes its
own coordinates. Arithmetic is float32; storage is half or float32.

OpenCL: ``STYPE`` is ``half`` when precision loss is allowed (``vload_half``/``vstore_half``,
present on every device) and ``float`` otherwise (``-DHALF_STORAGE``: `opencl.build_options`).

GLSL ES 3.1: ``a``, ``b``, ``c``, ``dst`` are SSBOs of ``uint`` at bindings 0..3 and the parameter
block a std140 uniform block at binding 0 (ES 3.1 guarantees only 4 SSBOs per compute shader);
with half storage a vec4 is two uints read with ``unpackHalf2x16`` and written with
``packHalf2x16``; a single half (``copy_map``) is written with ``atomicAnd``/``atomicOr`` on its
16 bits so neighbours written by other invocations are kept.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kernel:
    """One kernel in both languages: `opencl` is the helpers it alone uses and its
    ``__kernel void <name>(KARGS)``; `glsl` the helpers and ``void main()`` of its shader (after
    the common header)."""

    name: str
    opencl: str
    glsl: str


# --- storage and helpers -----------------------------------------------------------------------

OPENCL_BASE = r"""
#ifdef HALF_STORAGE
#define STYPE half
#define LD4(p, i) vload_half4((i), (p))
#define ST4(v, i, p) vstore_half4((v), (i), (p))
#define LD1(p, i) vload_half((i), (p))
#define LD8(p, i) vload_half8((i), (p))
#define ST1(v, i, p) vstore_half((v), (i), (p))
#else
#define STYPE float
#define LD4(p, i) vload4((i), (p))
#define ST4(v, i, p) vstore4((v), (i), (p))
#define LD1(p, i) ((p)[(i)])
#define LD8(p, i) vload8((i), (p))
#define ST1(v, i, p) ((p)[(i)] = (v))
#endif
#define PF(i) as_float(p[(i)])
#define LDF4(p, i) vload4((i), (__global const float *)(p))
#define LDF1(p, i) (((__global const float *)(p))[(i)])
#define MAD(x, y, z) fma((x), (y), (z))
#define KARGS __global const STYPE *a, __global const STYPE *b, __global const STYPE *c, \
              __global STYPE *dst, __constant int *p

inline float4 as01(int4 m) { return select((float4)(0.0f), (float4)(1.0f), m); }

/* NaN in, NaN out, as LiteRT's std::min(std::max(x, lo), hi): fmin / fmax / clamp would return
   the bound for a NaN x. max_ab / min_ab are LiteRT's `a > b ? a : b` / `a < b ? a : b` (NaN in
   b passes, NaN in a gives b). Macros: the same text serves float and float4 (OpenCL C has no
   overloading of user functions). */
#define nclamp(x, lo, hi) select(fmin(fmax((x), (lo)), (hi)), (x), isnan(x))
#define max_ab(a, b) select((b), (a), isgreater((a), (b)))
#define min_ab(a, b) select((b), (a), isless((a), (b)))
/* tanh, exactly +-1 beyond |x| = 10 as in float32 C (GELU's 1 + tanh is then exactly 0: NaN at -inf) */
inline float4 tanh_sat(float4 x) { return select(tanh(x), sign(x), isgreater(fabs(x), (float4)(10.0f))); }

/* float -> int32 as LiteRT casts: truncate, saturate (2^31 stands for INT32_MAX: the host
   clamps it), NaN -> INT32_MAX. */
inline float4 to_int32(float4 v) {
  float4 t = clamp(trunc(v), (float4)(-2147483648.0f), (float4)(2147483648.0f));
  return select(t, (float4)(2147483648.0f), isnan(v));
}

/* An operand that holds float32 (f32 set) or the storage type. */
inline float4 ld4x(__global const STYPE *t, int i, int f32) { return f32 ? LDF4(t, i) : LD4(t, i); }
inline float ld1x(__global const STYPE *t, int i, int f32) { return f32 ? LDF1(t, i) : LD1(t, i); }
"""

GLSL_BASE = r"""
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
/* GLSL's min, max and clamp are undefined for NaN: nclamp keeps a NaN x (LiteRT's
   std::min(std::max(x, lo), hi)); max_ab / min_ab are LiteRT's `a > b ? a : b` / `a < b ? a : b`
   (NaN in b passes, NaN in a gives b). The NaN tests are explicit: a compiler may turn the bare
   select into max / min (Mesa does), which drops the NaN of b. */
vec4 nclamp(vec4 x, float lo, float hi) { return mix(clamp(x, lo, hi), x, isnan(x)); }
float nclamp(float x, float lo, float hi) { return isnan(x) ? x : clamp(x, lo, hi); }
bvec4 either_nan(vec4 a, vec4 b) { return bvec4(uvec4(isnan(a)) | uvec4(isnan(b))); }
vec4 max_ab(vec4 a, vec4 b) { return mix(mix(b, a, greaterThan(a, b)), b, either_nan(a, b)); }
vec4 min_ab(vec4 a, vec4 b) { return mix(mix(b, a, lessThan(a, b)), b, either_nan(a, b)); }
float max_ab(float a, float b) { return isnan(a) || isnan(b) ? b : (a > b ? a : b); }
float min_ab(float a, float b) { return isnan(a) || isnan(b) ? b : (a < b ? a : b); }
/* tanh for every float (GLSL's overflows for large |x|): exactly +-1 beyond |x| = 10, as in float32
   C; NaN stays NaN */
vec4 ntanh(vec4 x) {
  return mix(mix(tanh(clamp(x, -10.0, 10.0)), sign(x), greaterThan(abs(x), vec4(10.0))), x, isnan(x));
}
/* GELU 0.5 x erfc(-x / sqrt 2) as max(x, 0) - 0.5 |x| erfc(|x| / sqrt 2), erfc by Abramowitz &
   Stegun 7.1.26 (GLSL has no erf; absolute error < 1.5e-7), as the CPU reference computes it;
   +inf gives +inf, as LiteRT's 0.5 x erfc(-x / sqrt 2) does (not inf - inf) */
vec4 gelu_erf(vec4 x) {
  vec4 ax = abs(x), z = ax * 0.70710678;
  vec4 t = 1.0 / (1.0 + 0.3275911 * z);
  vec4 p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  vec4 r = max_ab(x, vec4(0.0)) - 0.5 * ax * p * exp(-z * z);
  return mix(r, x, bvec4(uvec4(isinf(x)) & uvec4(greaterThan(x, vec4(0.0)))));
}
/* float -> int32 as LiteRT casts: truncate, saturate (2^31 stands for INT32_MAX), NaN -> max */
vec4 to_int32(vec4 v) {
  vec4 t = clamp(trunc(v), -2147483648.0, 2147483648.0);
  return mix(t, vec4(2147483648.0), isnan(v));
}
"""


def glsl_loads(buf: str, half: bool) -> str:
    """LD4_<buf>(vector index) and LD1_<buf>(scalar index) of one input in the storage type."""
    if half:
        return (f"vec4 LD4_{buf}(int i) {{ return vec4(unpackHalf2x16({buf}[2 * i]), unpackHalf2x16({buf}[2 * i + 1])); }}\n"
                f"float LD1_{buf}(int i) {{ vec2 v = unpackHalf2x16({buf}[i >> 1]); return (i & 1) == 1 ? v.y : v.x; }}\n")
    return (f"vec4 LD4_{buf}(int i) {{ int j = 4 * i; return uintBitsToFloat(uvec4({buf}[j], {buf}[j + 1], "
            f"{buf}[j + 2], {buf}[j + 3])); }}\n"
            f"float LD1_{buf}(int i) {{ return uintBitsToFloat({buf}[i]); }}\n")


def glsl_exact_loads() -> str:
    """Loads of operands that may hold float32 in a half plan (the `unary`, `binary` and `where`
    kernels' per-operand flags; OpenCL's ld4x / ld1x): LDX4_a(i, f32), LDX1_a(i, f32), for a, b
    and c."""
    out = []
    for t in "abc":
        out.append(f"vec4 LDX4_{t}(int i, bool f) {{ if (!f) return LD4_{t}(i); int j = 4 * i; "
                   f"return uintBitsToFloat(uvec4({t}[j], {t}[j + 1], {t}[j + 2], {t}[j + 3])); }}\n"
                   f"float LDX1_{t}(int i, bool f) {{ return f ? uintBitsToFloat({t}[i]) : LD1_{t}(i); }}\n")
    return "".join(out)


# --- unary ops (codes U_*) -----------------------------------------------------------------------

OPENCL_UNARY_OP = r"""
inline float4 unary_op(float4 v, int code, float lo, float hi) {
  switch (code) {
    case U_CLAMP: return nclamp(v, lo, hi);
    case U_TANH: return tanh(v);
    case U_SIGMOID: return 1.0f / (1.0f + exp(-v));
    case U_HARD_SWISH: return v * clamp(v + 3.0f, 0.0f, 6.0f) / 6.0f;
    case U_LEAKY: return select(v * lo, v, isgreaterequal(v, (float4)(0.0f)));
    case U_EXP: return exp(v);
    case U_ABS: return fabs(v);
    case U_NEG: return -v;
    case U_SQRT: return sqrt(v);
    case U_RSQRT: return rsqrt(v);
    case U_LOG: return log(v);
    case U_SIN: return sin(v);
    case U_COS: return cos(v);
    case U_SQUARE: return v * v;
    case U_FLOOR: return floor(v);
    case U_ELU: return select(expm1(v), v, isgreater(v, (float4)(0.0f)));
    case U_SIGN: return select(as01(isgreater(v, (float4)(0.0f))) - as01(isless(v, (float4)(0.0f))), v, isnan(v));
    case U_CEIL: return ceil(v);
    case U_SNAP: return round(v / lo) * lo;
    case U_GELU: return 0.5f * v * erfc(-v * M_SQRT1_2_F);
    case U_GELU_TANH: return 0.5f * v * (1.0f + tanh_sat(0.7978845608f * (v + 0.044715f * v * v * v)));
    case U_TO_INT32: return to_int32(v);
    case U_TO_BOOL: return as01(isnotequal(v, (float4)(0.0f)));
  }
  return v;
}
"""

GLSL_UNARY_OP = r"""
vec4 unary_op(vec4 v, int code, float lo, float hi) {
  switch (code) {
    case U_CLAMP: return nclamp(v, lo, hi);
    case U_TANH: return ntanh(v);
    case U_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case U_HARD_SWISH: return v * clamp(v + 3.0, 0.0, 6.0) / 6.0;
    case U_LEAKY: return mix(v * lo, v, greaterThanEqual(v, vec4(0.0)));
    case U_EXP: return exp(v);
    case U_ABS: return abs(v);
    case U_NEG: return -v;
    case U_SQRT: return sqrt(v);
    case U_RSQRT: return inversesqrt(v);
    case U_LOG: return log(v);
    case U_SIN: return sin(v);
    case U_COS: return cos(v);
    case U_SQUARE: return v * v;
    case U_FLOOR: return floor(v);
    case U_ELU: return mix(exp(v) - 1.0, v, greaterThan(v, vec4(0.0)));
    case U_SIGN: return mix(sign(v), v, isnan(v));
    case U_CEIL: return ceil(v);
    case U_SNAP: return rnd(v / lo) * lo;
    case U_GELU: return gelu_erf(v);
    case U_GELU_TANH: return 0.5 * v * (1.0 + ntanh(0.7978845608 * (v + 0.044715 * v * v * v)));
    case U_TO_INT32: return to_int32(v);
    case U_TO_BOOL: return as01(notEqual(v, vec4(0.0)));
  }
  return v;
}
"""

# --- the epilogue: two activation steps, then the quantization simulator ---------------------------

OPENCL_EPILOGUE = r"""
inline float4 epilogue(float4 v, __constant int *p) {
  if (p[P_ACT1] >= 0) v = unary_op(v, p[P_ACT1], PF(P_LO1), PF(P_HI1));
  if (p[P_ACT2] >= 0) v = unary_op(v, p[P_ACT2], PF(P_LO2), PF(P_HI2));
  float s = PF(P_QS);
  if (s > 0.0f) {
    float zp = PF(P_QZ);
    float4 q = clamp(round(v / s) + zp, PF(P_QMIN), PF(P_QMAX));
    v = (q - zp) * s;
  }
  return v;
}
"""

GLSL_EPILOGUE = r"""
vec4 epilogue(vec4 v) {
  if (P(P_ACT1) >= 0) v = unary_op(v, P(P_ACT1), PF(P_LO1), PF(P_HI1));
  if (P(P_ACT2) >= 0) v = unary_op(v, P(P_ACT2), PF(P_LO2), PF(P_HI2));
  float s = PF(P_QS);
  if (s > 0.0) {
    float zp = PF(P_QZ);
    vec4 q = clamp(rnd(v / s) + zp, PF(P_QMIN), PF(P_QMAX));
    v = (q - zp) * s;
  }
  return v;
}
"""

# --- the output store (zeroing lanes past the last channel; float32 when P_F32OUT), ld_chan ---

OPENCL_STORE = r"""
/* Store an output vector of slice s, zeroing the lanes past the last channel. */
inline void store4(float4 v, int idx, int s, __global STYPE *dst, __constant int *p) {
  if (s == p[P_OS] - 1) {
    int r = p[P_OREM];
    if (r < 4) v.w = 0.0f;
    if (r < 3) v.z = 0.0f;
    if (r < 2) v.y = 0.0f;
  }
  if (p[P_F32OUT]) vstore4(v, idx, (__global float *)dst);
  else ST4(v, idx, dst);
}

/* One input channel (scalar) of a PHWC4 tensor. */
inline float ld_chan(__global const STYPE *t, int b, int ch, int y, int x, int S, int H, int W) {
  return LD1(t, (((b * S + (ch >> 2)) * H + y) * W + x) * 4 + (ch & 3));
}
"""

GLSL_STORE_HALF = r"""
void ST4(vec4 v, int i) {
  if (P(P_F32OUT) != 0) { int j = 4 * i; dst[j] = floatBitsToUint(v.x); dst[j + 1] = floatBitsToUint(v.y);
                    dst[j + 2] = floatBitsToUint(v.z); dst[j + 3] = floatBitsToUint(v.w); }
  else { dst[2 * i] = packHalf2x16(v.xy); dst[2 * i + 1] = packHalf2x16(v.zw); }
}
void ST1(float v, int d) {
  if (P(P_F32OUT) != 0) { dst[d] = floatBitsToUint(v); return; }
  uint sh = uint(d & 1) * 16u;
  uint bits = (packHalf2x16(vec2(v, 0.0)) & 0xFFFFu) << sh;
  atomicAnd(dst[d >> 1], ~(0xFFFFu << sh));
  atomicOr(dst[d >> 1], bits);
}
"""

GLSL_STORE_FLOAT = r"""
void ST4(vec4 v, int i) {
  int j = 4 * i; dst[j] = floatBitsToUint(v.x); dst[j + 1] = floatBitsToUint(v.y);
  dst[j + 2] = floatBitsToUint(v.z); dst[j + 3] = floatBitsToUint(v.w);
}
void ST1(float v, int d) { dst[d] = floatBitsToUint(v); }
"""

GLSL_STORE = r"""
/* store an output vector of slice s, zeroing the lanes past the last channel */
void store4(vec4 v, int idx, int s) {
  if (s == P(P_OS) - 1) {
    int r = P(P_OREM);
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

#: what precedes every kernel of the OpenCL program (after the preamble)
OPENCL_HEADER = OPENCL_BASE + OPENCL_UNARY_OP + OPENCL_EPILOGUE + OPENCL_STORE
#: what precedes every GLSL shader's loads and stores (after the version line and the preamble)
GLSL_HEADER = GLSL_BASE + GLSL_UNARY_OP + GLSL_EPILOGUE
