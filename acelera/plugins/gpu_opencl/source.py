"""OpenCL C source of the gpu-opencl kernels, one program for every partition.

Tensors live in device buffers in TFLite's GPU layout: channels in slices of 4, stored
``[batch][slice][height][width][4]`` (PHWC4), lanes past the last channel kept at zero. Every
kernel has the same signature::

    kernel(global const STYPE *a, global const STYPE *b, global const STYPE *c,
           global STYPE *dst, constant int *p)

``a``/``b``/``c`` are the op's inputs (data, weights, bias or tables), ``dst`` its output and
``p`` a small parameter block written once at prepare: ``p[0..11]`` the epilogue (up to two
activation steps fused into the producing kernel, then an optional quantization simulator) and
the output's slice mask, ``p[12]`` the number of work items, ``p[13]`` set when ``dst`` holds
float32 (a partition output kept in full precision by a half-storage plan), ``p[16..]`` the
op's geometry.
Work is a 1-D range (each kernel decodes its own coordinates), so a kernel is specialized by
the driver once for the single work-group size the runtime uses.

``STYPE`` is ``half`` when precision loss is allowed (``vload_half``/``vstore_half``, present
on every device) and ``float`` otherwise; arithmetic is float32 in both cases. ``unary``, ``binary``
and ``where`` take one flag per operand saying it holds float32 even in a half plan
(bool and int32 tensors, exact copies of inputs: gpu_plan.compiler.Compiler.operand); bools are
0.0 / 1.0.

Convolution and fully-connected kernels are register-blocked: a work item computes ``XB``
neighbouring output columns times 2 output slices (8 channels, one float8 accumulator per
column) and reuses every loaded input vector and weight vector across them. Dot products are
summed in two levels (a partial sum per kernel row, or per ACC_CHUNK input slices, added to
the total), which halves float32 rounding error on deep layers at no measurable cost: fp32
inference_diff avg_error on face_landmark drops from 1.6e-5 to 1.0e-5, the level at which
LiteRT's own CPU kernels disagree with each other.
"""
from __future__ import annotations

# Register blocks, parameter-block layout and op codes are backend-neutral: gpu_plan.params.
from acelera.plugins.gpu_plan.params import ACC_CHUNK, CONV_BLOCKS, DW_BLOCK

HEADER = r"""
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

/* float -> int32 as LiteRT casts: truncate, saturate (2^31 stands for INT32_MAX: the host
   clamps it), NaN -> INT32_MAX. */
inline float4 to_int32(float4 v) {
  float4 t = clamp(trunc(v), (float4)(-2147483648.0f), (float4)(2147483648.0f));
  return select(t, (float4)(2147483648.0f), isnan(v));
}

/* An operand that holds float32 (f32 set) or the storage type. */
inline float4 ld4x(__global const STYPE *t, int i, int f32) { return f32 ? LDF4(t, i) : LD4(t, i); }
inline float ld1x(__global const STYPE *t, int i, int f32) { return f32 ? LDF1(t, i) : LD1(t, i); }

inline float4 unary_op(float4 v, int code, float lo, float hi) {
  switch (code) {
    case 0: return fmin(fmax(v, (float4)(lo)), (float4)(hi));
    case 1: return tanh(v);
    case 2: return 1.0f / (1.0f + exp(-v));
    case 3: return v * clamp(v + 3.0f, 0.0f, 6.0f) / 6.0f;
    case 4: return select(v * lo, v, isgreaterequal(v, (float4)(0.0f)));
    case 5: return exp(v);
    case 6: return fabs(v);
    case 7: return -v;
    case 8: return sqrt(v);
    case 9: return rsqrt(v);
    case 10: return log(v);
    case 11: return sin(v);
    case 12: return cos(v);
    case 13: return v * v;
    case 14: return floor(v);
    case 15: return select(expm1(v), v, isgreater(v, (float4)(0.0f)));
    case 16: return select(as01(isgreater(v, (float4)(0.0f))) - as01(isless(v, (float4)(0.0f))), v, isnan(v));
    case 17: return ceil(v);
    case 18: return round(v / lo) * lo;
    case 19: return 0.5f * v * erfc(-v * M_SQRT1_2_F);
    case 20: return 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
    case 21: return to_int32(v);
    case 22: return as01(isnotequal(v, (float4)(0.0f)));
  }
  return v;
}

inline float4 epilogue(float4 v, __constant int *p) {
  if (p[0] >= 0) v = unary_op(v, p[0], PF(1), PF(2));
  if (p[3] >= 0) v = unary_op(v, p[3], PF(4), PF(5));
  float s = PF(6);
  if (s > 0.0f) {
    float zp = PF(7);
    float4 q = clamp(round(v / s) + zp, PF(8), PF(9));
    v = (q - zp) * s;
  }
  return v;
}

/* Store an output vector of slice s, zeroing the lanes past the last channel. */
inline void store4(float4 v, int idx, int s, __global STYPE *dst, __constant int *p) {
  if (s == p[10] - 1) {
    int r = p[11];
    if (r < 4) v.w = 0.0f;
    if (r < 3) v.z = 0.0f;
    if (r < 2) v.y = 0.0f;
  }
  if (p[13]) vstore4(v, idx, (__global float *)dst);
  else ST4(v, idx, dst);
}

/* One input channel (scalar) of a PHWC4 tensor. */
inline float ld_chan(__global const STYPE *t, int b, int ch, int y, int x, int S, int H, int W) {
  return LD1(t, (((b * S + (ch >> 2)) * H + y) * W + x) * 4 + (ch & 3));
}
"""

GENERIC = r"""
/* Elementwise unary op over every vector of a tensor. p16: H*W, p17: code, p18/19: lo/hi,
   p20: set when a holds float32 (an exact operand in a half plan, see gpu_plan.params). */
__kernel void unary(KARGS) {
  int i = get_global_id(0);
  if (i >= p[12]) return;
  int s = (i / p[16]) % p[10];
  float4 v = unary_op(ld4x(a, i, p[20]), p[17], PF(18), PF(19));
  store4(epilogue(v, p), i, s, dst, p);
}

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

/* Binary op with broadcasting. Output H,W,S,B at p16..19; operand strides (b,s,h,w) in
   vectors at p20..23 (a) and p24..27 (b); p28/p29: a/b hold one channel (splat); p30: code;
   p31/p32: a/b hold float32 (exact operands in a half plan). */
inline float4 binary_op(float4 x, float4 y, int code) {
  switch (code) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 3: return x / y;
    case 4: return fmax(x, y);
    case 5: return fmin(x, y);
    case 6: return select(x * y, x, isgreaterequal(x, (float4)(0.0f)));
    case 7: return (x - y) * (x - y);
    case 8: return pow(x, y);
    case 9: return floor_div(x, y);
    case 10: return floor_mod(x, y);
    case 11: return as01(isequal(x, y));
    case 12: return as01(isnotequal(x, y));
    case 13: return as01(isless(x, y));
    case 14: return as01(islessequal(x, y));
    case 15: return as01(isgreater(x, y));
    case 16: return as01(isgreaterequal(x, y));
    case 17: return as01(isnotequal(x, (float4)(0.0f)) & isnotequal(y, (float4)(0.0f)));
  }
  return x;
}

__kernel void binary(KARGS) {
  int i = get_global_id(0);
  if (i >= p[12]) return;
  int H = p[16], W = p[17], S = p[18];
  int w = i % W; int t = i / W;
  int h = t % H; t /= H;
  int s = t % S; int bb = t / S;
  int ia = bb * p[20] + s * p[21] + h * p[22] + w * p[23];
  int ib = bb * p[24] + s * p[25] + h * p[26] + w * p[27];
  float4 x = p[28] ? (float4)(ld1x(a, ia * 4, p[31])) : ld4x(a, ia, p[31]);
  float4 y = p[29] ? (float4)(ld1x(b, ib * 4, p[32])) : ld4x(b, ib, p[32]);
  store4(epilogue(binary_op(x, y, p[30]), p), i, s, dst, p);
}

/* SELECT / SELECT_V2: dst = a != 0 ? b : c. Output H,W,S,B at p16..19; strides (b,s,h,w) of
   a, b, c at p20..23, p24..27, p28..31, in vectors, or in scalars for an operand read one
   value at a time (p32..34 set); p35..37 set where the operand holds float32. */
inline float4 ld_bcast(__global const STYPE *t, __constant int *p, int k, int bb, int s, int h, int w) {
  int o = 20 + 4 * k;
  int idx = bb * p[o] + s * p[o + 1] + h * p[o + 2] + w * p[o + 3];
  return p[32 + k] ? (float4)(ld1x(t, idx, p[35 + k])) : ld4x(t, idx, p[35 + k]);
}

__kernel void where(KARGS) {
  int i = get_global_id(0);
  if (i >= p[12]) return;
  int H = p[16], W = p[17], S = p[18];
  int w = i % W; int t = i / W;
  int h = t % H; t /= H;
  int s = t % S; int bb = t / S;
  float4 cnd = ld_bcast(a, p, 0, bb, s, h, w);
  float4 x = ld_bcast(b, p, 1, bb, s, h, w), y = ld_bcast(c, p, 2, bb, s, h, w);
  store4(epilogue(select(y, x, isnotequal(cnd, (float4)(0.0f))), p), i, s, dst, p);
}

/* Basic LSTM cell (LSTM kernel_type BASIC): a holds the gates [input, cell, forget, output] of
   each row (4 * S slices), b the previous state (S slices); p16 S, p17 0: write the new state,
   1: the new activation (recomputing the state). */
__kernel void lstm_cell(KARGS) {
  int j = get_global_id(0);
  if (j >= p[12]) return;
  int S = p[16];
  int s = j % S, g0 = (j / S) * 4 * S + s;
  float4 ig = 1.0f / (1.0f + exp(-LD4(a, g0)));
  float4 f = 1.0f / (1.0f + exp(-LD4(a, g0 + 2 * S)));
  float4 st = ig * tanh(LD4(a, g0 + S)) + f * LD4(b, j);
  if (p[17]) st = tanh(st) / (1.0f + exp(-LD4(a, g0 + 3 * S)));
  store4(epilogue(st, p), j, s, dst, p);
}

/* Element copy through an index map c = (dst, src) pairs in scalars (reshape, concat, pad,
   slices, transpose, space/depth): p16 number of pairs. */
__kernel void copy_map(KARGS) {
  int j = get_global_id(0);
  if (j >= p[12]) return;
  __global const int *m = (__global const int *)c;
  int d = m[2 * j], sidx = m[2 * j + 1];
  float4 v = epilogue((float4)(LD1(a, sidx)), p);
  if (p[13]) ((__global float *)dst)[d] = v.x;
  else ST1(v.x, d, dst);
}

/* Whole-vector copy through a map c = (dst, src) pairs in vectors, when the element map
   moves aligned vectors (channel padding, concat of whole slices, spatial slices): p16 the
   destination's H*W (for the slice mask). */
__kernel void copy_vec(KARGS) {
  int j = get_global_id(0);
  if (j >= p[12]) return;
  __global const int *m = (__global const int *)c;
  int d = m[2 * j];
  store4(epilogue(LD4(a, m[2 * j + 1]), p), d, (d / p[16]) % p[10], dst, p);
}

/* Max / average pooling. in H,W,S,B p16..19; out H,W p20,21; kernel kh,kw p22,23; strides
   p24,25; pads top,left p26,27; p28: 0 max, 1 average. */
__kernel void pool(KARGS) {
  int i = get_global_id(0);
  if (i >= p[12]) return;
  int IH = p[16], IW = p[17], S = p[18], OH = p[20], OW = p[21];
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int s = t % S; int bb = t / S;
  int y0 = oy * p[24] - p[26], x0 = ox * p[25] - p[27];
  int avg = p[28];
  float4 acc = avg ? (float4)(0.0f) : (float4)(-FLT_MAX);
  int n = 0;
  for (int ky = 0; ky < p[22]; ky++) {
    int y = y0 + ky;
    if (y < 0 || y >= IH) continue;
    for (int kx = 0; kx < p[23]; kx++) {
      int x = x0 + kx;
      if (x < 0 || x >= IW) continue;
      float4 v = LD4(a, ((bb * S + s) * IH + y) * IW + x);
      acc = avg ? acc + v : fmax(acc, v);
      n++;
    }
  }
  if (avg) acc = acc / (float)max(n, 1);
  store4(epilogue(acc, p), i, s, dst, p);
}

/* Bilinear / nearest resize with per-axis tables: c holds int y0[OH], y1[OH], x0[OW], x1[OW]
   then float fy[OH], fx[OW]. in H,W,S,B p16..19; out H,W p20,21; p22: 1 nearest. */
__kernel void resize(KARGS) {
  int i = get_global_id(0);
  if (i >= p[12]) return;
  int IH = p[16], IW = p[17], S = p[18], OH = p[20], OW = p[21];
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int s = t % S; int bb = t / S;
  __global const int *ti = (__global const int *)c;
  __global const float *tf = (__global const float *)(ti + 2 * OH + 2 * OW);
  int ya = ti[oy], yb = ti[OH + oy], xa = ti[2 * OH + ox], xb = ti[2 * OH + OW + ox];
  int base = (bb * S + s) * IH;
  float4 r;
  if (p[22]) {
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

/* Softmax over channels of every pixel. H*W p16, S p17, C p18, beta p19. */
__kernel void softmax(KARGS) {
  int i = get_global_id(0);
  if (i >= p[12]) return;
  int HW = p[16], S = p[17], C = p[18];
  float beta = PF(19);
  int bb = i / HW, hw = i % HW;
  int base = bb * S * HW + hw;
  float m = -INFINITY;
  for (int s = 0; s < S; s++) {
    float4 v = LD4(a, base + s * HW);
    int r = C - 4 * s;
    m = fmax(m, v.x);
    if (r > 1) m = fmax(m, v.y);
    if (r > 2) m = fmax(m, v.z);
    if (r > 3) m = fmax(m, v.w);
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

/* Reduction over any of b,h,w,c (output keeps reduced dims as 1). in H,W,S,B,C p16..20;
   out H,W,S p21..23; reduce flags b,h,w,c p24..27; code p28; 1/count p29. */
inline float red1(float acc, float v, int code) {
  if (code == 2) return fmax(acc, v);
  if (code == 3) return fmin(acc, v);
  if (code == 4) return acc * v;
  return acc + v;
}
inline float4 red4(float4 acc, float4 v, int code) {
  if (code == 2) return fmax(acc, v);
  if (code == 3) return fmin(acc, v);
  if (code == 4) return acc * v;
  return acc + v;
}
__kernel void reduce(KARGS) {
  int i = get_global_id(0);
  if (i >= p[12]) return;
  int IH = p[16], IW = p[17], IS = p[18], IB = p[19], IC = p[20];
  int OH = p[21], OW = p[22], OS = p[23];
  int code = p[28];
  int ox = i % OW; int t = i / OW;
  int oy = t % OH; t /= OH;
  int os = t % OS; int ob = t / OS;
  int b0 = p[24] ? 0 : ob, b1 = p[24] ? IB : ob + 1;
  int h0 = p[25] ? 0 : oy, h1 = p[25] ? IH : oy + 1;
  int w0 = p[26] ? 0 : ox, w1 = p[26] ? IW : ox + 1;
  float init = code == 2 ? -INFINITY : code == 3 ? INFINITY : code == 4 ? 1.0f : 0.0f;
  float4 acc = (float4)(init);
  if (p[27]) {
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
  if (code == 1) acc *= PF(29);
  store4(epilogue(acc, p), i, os, dst, p);
}
"""


def _conv_kernel(name: str, xb: int, pointwise: bool) -> str:
    """A register-blocked convolution: XB columns x 2 output slices (one float8) per work item.

    Geometry p16..: IH IW IS OH OW OS KH KW SH SW PT PL DH DW NXB B. Weights are packed as
    [slice pair][ky][kx][in slice][4 input lanes] of float8 over 8 output channels.
    """
    X = range(xb)
    lines = [f"__kernel void {name}(KARGS) {{",
             "  int gid = get_global_id(0);",
             "  if (gid >= p[12]) return;",
             "  int IH = p[16], IW = p[17], IS = p[18], OH = p[19], OW = p[20], OS = p[21];",
             "  int KH = p[22], KW = p[23], SH = p[24], SW = p[25], PT = p[26], PL = p[27];",
             "  int DH = p[28], DW = p[29], NXB = p[30], B = p[31];",
             "  int xblk = gid % NXB; int t = gid / NXB;",
             "  int oy = t % OH; t /= OH;",
             "  int bb = t % B; int g = t / B;",
             f"  int ox0 = xblk * {xb};"]
    lines += [f"  float8 acc{x} = (float8)(0.0f);" for x in X]
    lines.append("  int plane = IH * IW;")
    if pointwise:
        lines += [f"  int ix{x} = min(ox0 + {x}, OW - 1);" for x in X]
        lines += ["  int sbase = bb * IS * plane + oy * IW;",
                  "  int wo = g * IS * 4;",
                  f"  for (int s0 = 0; s0 < IS; s0 += {ACC_CHUNK}) {{"]
        lines += [f"    float8 pa{x} = (float8)(0.0f);" for x in X]
        lines += [f"    for (int s = s0; s < min(s0 + {ACC_CHUNK}, IS); s++) {{",
                  "      int so = sbase + s * plane;"]
        lines += [f"      float4 v{x} = LD4(a, so + ix{x});" for x in X]
        lines += _fma8(xb, "      ")
        lines += ["      wo += 4;", "    }"]
        lines += [f"    acc{x} += pa{x};" for x in X]
        lines += ["  }"]
    else:
        lines += ["  for (int ky = 0; ky < KH; ky++) {",
                  "    int iy = oy * SH - PT + ky * DH;",
                  "    if (iy < 0 || iy >= IH) continue;",
                  "    int sbase = bb * IS * plane + iy * IW;",
                  ]
        lines += [f"    float8 pa{x} = (float8)(0.0f);" for x in X]
        lines += ["    for (int kx = 0; kx < KW; kx++) {"]
        for x in X:
            lines += [f"      int ix{x} = (ox0 + {x}) * SW - PL + kx * DW;",
                      f"      bool ok{x} = ix{x} >= 0 && ix{x} < IW;",
                      f"      ix{x} = clamp(ix{x}, 0, IW - 1);"]
        lines += ["      int wo = ((g * KH + ky) * KW + kx) * IS * 4;",
                  "      for (int s = 0; s < IS; s++) {",
                  "        int so = sbase + s * plane;"]
        lines += [f"        float4 v{x} = ok{x} ? LD4(a, so + ix{x}) : (float4)(0.0f);" for x in X]
        lines += _fma8(xb, "        ")
        lines += ["        wo += 4;", "      }", "    }"]
        lines += [f"    acc{x} += pa{x};" for x in X]
        lines += ["  }"]
    lines += _store8(xb, "((bb * OS + os) * OH + oy) * OW + ox0 + {x}", "ox0 + {x} < OW")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _fma8(xb: int, ind: str) -> list[str]:
    """pa_x += v_x (4 input lanes) times the 4 float8 weight rows at vector offset wo."""
    out = [f"{ind}{{ float8 w0 = LD8(b, wo), w1 = LD8(b, wo + 1), w2 = LD8(b, wo + 2), w3 = LD8(b, wo + 3);"]
    for x in range(xb):
        out.append(f"{ind}  pa{x} = MAD((float8)(v{x}.x), w0, MAD((float8)(v{x}.y), w1, "
                   f"MAD((float8)(v{x}.z), w2, MAD((float8)(v{x}.w), w3, pa{x}))));")
    out.append(f"{ind}}}")
    return out


def _store8(xb: int, index: str, cond: str) -> list[str]:
    """Store the float8 accumulators (slices 2g and 2g+1) with bias and epilogue."""
    out = []
    for half, sel in ((0, "lo"), (1, "hi")):
        out += [f"  {{ int os = 2 * g + {half};",
                "    if (os < OS) {",
                "      float4 bias = LD4(c, os);"]
        for x in range(xb):
            out.append(f"      if ({cond.format(x=x)}) store4(epilogue(acc{x}.{sel} + bias, p), "
                       f"{index.format(x=x)}, os, dst, p);")
        out += ["    }", "  }"]
    return out


def _depthwise_kernel(xb: int) -> str:
    """Depthwise convolution, XB columns of one slice per work item.

    Geometry p16..: IH IW IS OH OW OS KH KW SH SW PT PL DH DW NXB B, p32 depth multiplier,
    p33 input channels. Weights [slice][ky][kx] float4.
    """
    X = range(xb)
    lines = ["__kernel void depthwise(KARGS) {",
             "  int gid = get_global_id(0);",
             "  if (gid >= p[12]) return;",
             "  int IH = p[16], IW = p[17], IS = p[18], OH = p[19], OW = p[20], OS = p[21];",
             "  int KH = p[22], KW = p[23], SH = p[24], SW = p[25], PT = p[26], PL = p[27];",
             "  int DH = p[28], DW = p[29], NXB = p[30], B = p[31], M = p[32];",
             "  int xblk = gid % NXB; int t = gid / NXB;",
             "  int oy = t % OH; t /= OH;",
             "  int bb = t % B; int os = t / B;",
             f"  int ox0 = xblk * {xb};",
             "  int ch0 = min(4 * os / M, p[33] - 1), ch1 = min((4 * os + 1) / M, p[33] - 1);",
             "  int ch2 = min((4 * os + 2) / M, p[33] - 1), ch3 = min((4 * os + 3) / M, p[33] - 1);"]
    for x in X:
        lines.append(f"  float4 acc{x} = (float4)(0.0f);")
    lines += ["  for (int ky = 0; ky < KH; ky++) {",
              "    int iy = oy * SH - PT + ky * DH;",
              "    if (iy < 0 || iy >= IH) continue;",
              "    for (int kx = 0; kx < KW; kx++) {",
              "      float4 w = LD4(b, (os * KH + ky) * KW + kx);"]
    for x in X:
        lines += [f"      int ix{x} = (ox0 + {x}) * SW - PL + kx * DW;",
                  f"      if (ix{x} >= 0 && ix{x} < IW) {{",
                  "        float4 v;",
                  f"        if (M == 1) v = LD4(a, ((bb * IS + os) * IH + iy) * IW + ix{x});",
                  f"        else v = (float4)(ld_chan(a, bb, ch0, iy, ix{x}, IS, IH, IW), "
                  f"ld_chan(a, bb, ch1, iy, ix{x}, IS, IH, IW), "
                  f"ld_chan(a, bb, ch2, iy, ix{x}, IS, IH, IW), "
                  f"ld_chan(a, bb, ch3, iy, ix{x}, IS, IH, IW));",
                  f"        acc{x} = MAD(v, w, acc{x});",
                  "      }"]
    lines += ["    }", "  }",
              "  float4 bias = LD4(c, os);",
              "  int obase = ((bb * OS + os) * OH + oy) * OW;"]
    for x in X:
        lines.append(f"  if (ox0 + {x} < OW) store4(epilogue(acc{x} + bias, p), obase + ox0 + {x}, os, dst, p);")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _depthwise3x3_kernel(stride: int, xb: int) -> str:
    """Depthwise 3x3 (multiplier 1, dilation 1) at a fixed stride: each input row is loaded
    once into a register window and reused by the 3 taps of XB output columns.

    Same geometry and weights as `depthwise`.
    """
    win = (xb - 1) * stride + 3
    lines = [f"__kernel void depthwise3x3_s{stride}(KARGS) {{",
             "  int gid = get_global_id(0);",
             "  if (gid >= p[12]) return;",
             "  int IH = p[16], IW = p[17], IS = p[18], OH = p[19], OW = p[20], OS = p[21];",
             "  int PT = p[26], PL = p[27], NXB = p[30], B = p[31];",
             "  int xblk = gid % NXB; int t = gid / NXB;",
             "  int oy = t % OH; t /= OH;",
             "  int bb = t % B; int os = t / B;",
             f"  int ix0 = xblk * {xb * stride} - PL;"]
    lines += [f"  float4 acc{x} = (float4)(0.0f);" for x in range(xb)]
    lines += ["  for (int ky = 0; ky < 3; ky++) {",
              f"    int iy = oy * {stride} - PT + ky;",
              "    if (iy < 0 || iy >= IH) continue;",
              "    int row = ((bb * IS + os) * IH + iy) * IW;",
              "    float4 w0 = LD4(b, (os * 3 + ky) * 3), w1 = LD4(b, (os * 3 + ky) * 3 + 1), "
              "w2 = LD4(b, (os * 3 + ky) * 3 + 2);"]
    for i in range(win):
        lines.append(f"    float4 r{i} = (ix0 + {i} >= 0 && ix0 + {i} < IW) ? LD4(a, row + clamp(ix0 + {i}, 0, IW - 1)) "
                     f": (float4)(0.0f);")
    for x in range(xb):
        o = x * stride
        lines.append(f"    acc{x} = MAD(r{o}, w0, MAD(r{o + 1}, w1, MAD(r{o + 2}, w2, acc{x})));")
    lines += ["  }",
              "  float4 bias = LD4(c, os);",
              "  int obase = ((bb * OS + os) * OH + oy) * OW;",
              f"  int ox0 = xblk * {xb};"]
    for x in range(xb):
        lines.append(f"  if (ox0 + {x} < OW) store4(epilogue(acc{x} + bias, p), obase + ox0 + {x}, os, dst, p);")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _fc_kernel() -> str:
    """Fully connected: one row times 2 output slices (a float8) per work item.

    p16 input slices KS, p17 output slices OS, p18 rows N, p19/p20 input row/slice strides,
    p21/p22 output row/slice strides, p23 slice pairs. Weights [pair][in slice][4] float8.
    """
    lines = ["__kernel void fully_connected(KARGS) {",
             "  int gid = get_global_id(0);",
             "  if (gid >= p[12]) return;",
             "  int KS = p[16], OS = p[17];",
             "  int g = gid % p[23], n = gid / p[23];",
             "  int ib = n * p[19];",
             "  float8 acc0 = (float8)(0.0f);",
             "  int wo = g * KS * 4;",
             f"  for (int k0 = 0; k0 < KS; k0 += {ACC_CHUNK}) {{",
             "    float8 pa0 = (float8)(0.0f);",
             f"    for (int k = k0; k < min(k0 + {ACC_CHUNK}, KS); k++) {{",
             "      float4 v0 = LD4(a, ib + k * p[20]);"]
    lines += _fma8(1, "      ")
    lines += ["      wo += 4;", "    }", "    acc0 += pa0;", "  }"]
    lines += _store8(1, "n * p[21] + os * p[22]", "1")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _tconv_kernel() -> str:
    """Transposed convolution as a gather: one output pixel times 2 output slices.

    Geometry p16..: IH IW IS OH OW OS KH KW SH SW PT PL G(slice pairs) B. Weights
    [pair][ky][kx][in slice][4 input lanes] float8.
    """
    lines = ["__kernel void transpose_conv(KARGS) {",
             "  int gid = get_global_id(0);",
             "  if (gid >= p[12]) return;",
             "  int IH = p[16], IW = p[17], IS = p[18], OH = p[19], OW = p[20], OS = p[21];",
             "  int KH = p[22], KW = p[23], SH = p[24], SW = p[25], PT = p[26], PL = p[27];",
             "  int B = p[29];",
             "  int ox = gid % OW; int t = gid / OW;",
             "  int oy = t % OH; t /= OH;",
             "  int bb = t % B; int g = t / B;",
             "  float8 acc0 = (float8)(0.0f);",
             "  int plane = IH * IW;",
             "  int yy = oy + PT, xx = ox + PL;",
             "  for (int ky = yy % SH; ky < KH; ky += SH) {",
             "    int iy = (yy - ky) / SH;",
             "    if (iy < 0 || iy >= IH) continue;",
             "    for (int kx = xx % SW; kx < KW; kx += SW) {",
             "      int ix = (xx - kx) / SW;",
             "      if (ix < 0 || ix >= IW) continue;",
             "      int wo = ((g * KH + ky) * KW + kx) * IS * 4;",
             "      int so = bb * IS * plane + iy * IW + ix;",
             "      float8 pa0 = (float8)(0.0f);",
             "      for (int s = 0; s < IS; s++) {",
             "        float4 v0 = LD4(a, so + s * plane);"]
    lines += _fma8(1, "        ")
    lines += ["        wo += 4;", "      }", "      acc0 += pa0;", "    }", "  }"]
    lines += _store8(1, "((bb * OS + os) * OH + oy) * OW + ox", "1")
    lines.append("}")
    return "\n".join(lines) + "\n"


def program_source() -> str:
    """The whole program: every kernel the partition compiler may launch."""
    parts = [HEADER, GENERIC]
    for xb in CONV_BLOCKS:
        parts += [_conv_kernel(f"conv2d_x{xb}", xb, False), _conv_kernel(f"conv2d_1x1_x{xb}", xb, True)]
    parts += [_depthwise_kernel(DW_BLOCK), _depthwise3x3_kernel(1, DW_BLOCK), _depthwise3x3_kernel(2, DW_BLOCK),
              _fc_kernel(), _tconv_kernel()]
    return "".join(parts)


def build_options(half_storage: bool) -> str:
    return "-DHALF_STORAGE" if half_storage else ""
