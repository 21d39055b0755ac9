"""Conformance case generators of FAKE_QUANT, LOCAL_RESPONSE_NORMALIZATION, CONV_3D,
CONV_3D_TRANSPOSE and NON_MAX_SUPPRESSION_V4 / V5.

Generators as described in generators_kit.py (the contract, `DTYPES`, the tensor helpers);
generators_more.py imports this module to register them.
"""
from __future__ import annotations

import numpy as np

from acelera.conformance.generators_kit import FLOAT, _gen, _out_int
from acelera.conformance.templates import OpTemplate, T, _int, _out_size


# --- quantization, normalization, convolution ------------------------------------------------
@_gen("FAKE_QUANT", dtypes=FLOAT)
def fake_quant(op: str) -> list[OpTemplate]:
    def tpl(label, shape, lo, hi, bits):
        return OpTemplate(op, (T(shape, domain=(-4, 4)),), (T(shape),),
                          {"min": lo, "max": hi, "num_bits": bits, "narrow_range": False}, label)
    return [tpl("8bit_symmetric", (2, 3, 4), -1.0, 1.0, 8), tpl("8bit_relu6", (1, 4, 4, 3), 0.0, 6.0, 8),
            tpl("4bit_asymmetric", (3, 5), -3.2, 2.0, 4)]


@_gen("LOCAL_RESPONSE_NORMALIZATION", dtypes=FLOAT)
def local_response_normalization(op: str) -> list[OpTemplate]:
    def tpl(label, shape, radius, bias, alpha, beta):
        return OpTemplate(op, (T(shape, domain=(-2, 2)),), (T(shape),),
                          {"radius": radius, "bias": bias, "alpha": alpha, "beta": beta}, label)
    return [tpl("radius2", (1, 4, 4, 6), 2, 1.0, 0.5, 0.75), tpl("radius5_wide", (1, 2, 3, 16), 5, 2.0, 0.1, 0.5),
            tpl("radius0", (2, 3, 3, 4), 0, 0.5, 1.0, 1.0)]


@_gen("CONV_3D", dtypes=FLOAT)
def conv_3d(op: str) -> list[OpTemplate]:
    def tpl(label, dhw, cin, cout, k, s, padding, act="NONE", dil=(1, 1, 1), bias=True):
        out = tuple(_out_size(n, kk, ss, padding, dd) for n, kk, ss, dd in zip(dhw, k, s, dil))
        ins = (T((1, *dhw, cin), domain=(-2, 2)), T((*k, cin, cout), role="weights", const=True),
               T((cout,), role="bias", const=True, domain=(-0.5, 0.5)) if bias else None)
        opts = {"padding": padding, "stride_d": s[0], "stride_h": s[1], "stride_w": s[2],
                "dilation_d_factor": dil[0], "dilation_h_factor": dil[1], "dilation_w_factor": dil[2],
                "fused_activation_function": act}
        return OpTemplate(op, ins, (T((1, *out, cout)),), opts, label)
    return [tpl("k3_same", (4, 5, 5), 2, 3, (3, 3, 3), (1, 1, 1), "SAME"),
            tpl("k2_s2_valid_relu", (4, 6, 6), 3, 4, (2, 2, 2), (2, 2, 2), "VALID", "RELU", bias=False),
            tpl("dilated_relu6", (5, 5, 5), 2, 2, (2, 2, 2), (1, 1, 1), "SAME", "RELU6", dil=(2, 1, 2))]


@_gen("CONV_3D_TRANSPOSE", dtypes=FLOAT)
def conv_3d_transpose(op: str) -> list[OpTemplate]:
    def tpl(label, dhw, cin, cout, k, s, padding, act="NONE", bias=False):
        out = tuple(n * ss if padding == "SAME" else (n - 1) * ss + kk for n, kk, ss in zip(dhw, k, s))
        ins = (_int([1, *out, cout]), T((*k, cout, cin), role="weights", const=True),
               T((1, *dhw, cin), domain=(-2, 2)))
        if bias:
            ins += (T((cout,), role="bias", const=True, domain=(-0.5, 0.5)),)
        opts = {"padding": padding, "stride_d": s[0], "stride_h": s[1], "stride_w": s[2],
                "dilation_d_factor": 1, "dilation_h_factor": 1, "dilation_w_factor": 1,
                "fused_activation_function": act}
        return OpTemplate(op, ins, (T((1, *out, cout)),), opts, label)
    return [tpl("k3_s2_same", (2, 3, 3), 2, 3, (3, 3, 3), (2, 2, 2), "SAME"),
            tpl("k2_s1_valid_bias_relu", (3, 2, 4), 3, 2, (2, 2, 2), (1, 1, 1), "VALID", "RELU", bias=True)]


# --- detection ---------------------------------------------------------------------------------
@_gen("NON_MAX_SUPPRESSION_V4", dtypes=FLOAT)
def non_max_suppression_v4(op: str) -> list[OpTemplate]:
    def tpl(label, n, max_out, iou, score):
        ins = (T((n, 4), domain=(0, 1)), T((n,), domain=(0, 1)), _int(max_out),
               T((), const=True, value=np.float32(iou)), T((), const=True, value=np.float32(score)))
        return OpTemplate(op, ins, (_out_int((max_out,)), _out_int(())), label=label)
    return [tpl("iou0.5", 10, 5, 0.5, 0.0), tpl("score_threshold", 8, 6, 0.3, 0.4)]


@_gen("NON_MAX_SUPPRESSION_V5", dtypes=FLOAT)
def non_max_suppression_v5(op: str) -> list[OpTemplate]:
    def tpl(label, n, max_out, iou, score, sigma):
        ins = (T((n, 4), domain=(0, 1)), T((n,), domain=(0, 1)), _int(max_out),
               T((), const=True, value=np.float32(iou)), T((), const=True, value=np.float32(score)),
               T((), const=True, value=np.float32(sigma)))
        return OpTemplate(op, ins, (_out_int((max_out,)), T((max_out,)), _out_int(())), label=label)
    return [tpl("hard", 10, 5, 0.5, 0.0, 0.0), tpl("soft_sigma0.5", 8, 6, 0.6, 0.1, 0.5)]
