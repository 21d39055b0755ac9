"""The basic LSTM cell (LSTM kernel_type BASIC, ops/lstm.py): `a` holds the gates [input, cell,
forget, output] of each row (4 * S slices), `b` the previous state (S slices). Geometry:
LSTM_S, LSTM_ACTIV (0: write the new state, 1: the new activation, recomputing the state)."""
from __future__ import annotations

from acelera.backends.gpu.kernels.common import Kernel

LSTM_CELL_OPENCL = r"""
__kernel void lstm_cell(KARGS) {
  int j = get_global_id(0);
  if (j >= p[P_N]) return;
  int S = p[LSTM_S];
  int s = j % S, g0 = (j / S) * 4 * S + s;
  float4 ig = 1.0f / (1.0f + exp(-LD4(a, g0)));
  float4 f = 1.0f / (1.0f + exp(-LD4(a, g0 + 2 * S)));
  float4 st = ig * tanh(LD4(a, g0 + S)) + f * LD4(b, j);
  if (p[LSTM_ACTIV]) st = tanh(st) / (1.0f + exp(-LD4(a, g0 + 3 * S)));
  store4(epilogue(st, p), j, s, dst, p);
}
"""

LSTM_CELL_GLSL = r"""
void main() {
  int j = gid();
  if (j >= P(P_N)) return;
  int S = P(LSTM_S);
  int s = j % S, g0 = (j / S) * 4 * S + s;
  vec4 ig = 1.0 / (1.0 + exp(-LD4_a(g0)));
  vec4 f = 1.0 / (1.0 + exp(-LD4_a(g0 + 2 * S)));
  vec4 st = ig * ntanh(LD4_a(g0 + S)) + f * LD4_b(j);
  if (P(LSTM_ACTIV) != 0) st = ntanh(st) / (1.0 + exp(-LD4_a(g0 + 3 * S)));
  store4(epilogue(st), j, s);
}
"""

KERNELS = (Kernel("lstm_cell", LSTM_CELL_OPENCL, LSTM_CELL_GLSL),)
