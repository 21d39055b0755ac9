"""Copies through an index map (the layout ops of ops/layout_ops.py: reshape, concat, pad,
slices, transpose, space/depth): `c` holds (dst, src) pairs.

- `copy_map`: pairs of scalars, one element per work item;
- `copy_vec`: pairs of vectors, when the element map moves aligned vectors (channel padding,
  concat of whole slices, spatial slices); geometry COPY_HW, the destination's H*W (for the
  slice mask).
"""
from __future__ import annotations

from acelera.backends.gpu.kernels.common import Kernel

COPY_MAP_OPENCL = r"""
__kernel void copy_map(KARGS) {
  int j = get_global_id(0);
  if (j >= p[P_N]) return;
  __global const int *m = (__global const int *)c;
  int d = m[2 * j], sidx = m[2 * j + 1];
  float4 v = epilogue((float4)(LD1(a, sidx)), p);
  if (p[P_F32OUT]) ((__global float *)dst)[d] = v.x;
  else ST1(v.x, d, dst);
}
"""

COPY_MAP_GLSL = r"""
void main() {
  int j = gid();
  if (j >= P(P_N)) return;
  int d = CI(2 * j), sidx = CI(2 * j + 1);
  ST1(epilogue(vec4(LD1_a(sidx))).x, d);
}
"""

COPY_VEC_OPENCL = r"""
__kernel void copy_vec(KARGS) {
  int j = get_global_id(0);
  if (j >= p[P_N]) return;
  __global const int *m = (__global const int *)c;
  int d = m[2 * j];
  store4(epilogue(LD4(a, m[2 * j + 1]), p), d, (d / p[COPY_HW]) % p[P_OS], dst, p);
}
"""

COPY_VEC_GLSL = r"""
void main() {
  int j = gid();
  if (j >= P(P_N)) return;
  int d = CI(2 * j);
  store4(epilogue(LD4_a(CI(2 * j + 1))), d, (d / P(COPY_HW)) % P(P_OS));
}
"""

KERNELS = (
    Kernel("copy_map", COPY_MAP_OPENCL, COPY_MAP_GLSL),
    Kernel("copy_vec", COPY_VEC_OPENCL, COPY_VEC_GLSL),
)
