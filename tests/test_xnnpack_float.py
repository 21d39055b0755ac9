"""xnnpack-cpu float32 fast paths against acelera's reference kernels (BUILTIN_REF): native
steps (depthwise rows, small-M GEMM, padded im2col, element-wise, copies), their split across
two threads, the residual chains of resnet_mini, per-step profiling and the packed layout mark.

The reference is an Interpreter with OpResolverType.BUILTIN_REF: AUTO would apply xnnpack-cpu
itself as the default delegate."""
import os
import warnings

import numpy as np
import pytest

from acelera import Interpreter, load_delegate
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.interpreter import OpResolverType
from acelera.plugins.xnnpack_cpu import jit
from acelera.plugins.xnnpack_cpu.program import PACK_LAYOUT, CompiledPartition

F32 = np.float32
ZOO = os.path.join(os.path.dirname(__file__), "models", "zoo")
pytestmark = pytest.mark.requires(jit.AVAILABLE, "numba is not installed")


def compare(model: bytes, threads: int = 1, rel: float = 1e-5, seed: int = 0, inputs=None, invokes: int = 2,
            **options):
    """Run `model` on the reference kernels and on xnnpack-cpu (every node delegated, no
    fallback warning); outputs agree within rel * max(1, |reference|). Returns the delegate."""
    rng = np.random.default_rng(seed)
    ref = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    d = load_delegate("xnnpack-cpu", {"num_threads": threads, **options})
    it = Interpreter(model_content=model, experimental_delegates=[d], num_threads=threads,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        it.allocate_tensors()
    assert len(it.delegation.nodes_of("xnnpack-cpu")) == len(it.model.main.operators), it.delegation.rejections
    for k, det in enumerate(ref.get_input_details()):
        x = inputs[k] if inputs is not None else rng.uniform(-2, 2, det["shape"]).astype(det["dtype"])
        ref.set_tensor(det["index"], x)
        it.set_tensor(det["index"], x)
    ref.invoke()
    for _ in range(invokes):  # buffers are reused: a second invoke gives the same answer
        it.invoke()
        for o in ref.get_output_details():
            want, got = ref.get_tensor(o["index"]), it.get_tensor(o["index"])
            assert got.dtype == want.dtype and got.shape == want.shape
            finite = np.abs(want[np.isfinite(want)])
            bound = rel * max(1.0, float(np.max(finite, initial=0)))
            np.testing.assert_allclose(got, want, rtol=0, atol=bound, equal_nan=True)
    return d


def w(*shape, seed=1, scale=0.3):
    return np.random.default_rng(seed).normal(0, scale, shape).astype(F32)


def dw_model(h, wd, c, k, stride, padding="SAME", dil=1, act="NONE", n=1, tail=None, mult=1):
    b = ModelBuilder()
    x = b.add_input("x", (n, h, wd, c), F32)
    c *= mult  # output channels
    oh = -(-h // stride) if padding == "SAME" else (h - (k - 1) * dil - 1) // stride + 1
    ow = -(-wd // stride) if padding == "SAME" else (wd - (k - 1) * dil - 1) // stride + 1
    y = b.add_tensor("y", (n, oh, ow, c), F32)
    b.add_operator("DEPTHWISE_CONV_2D", [x, b.add_constant("w", w(1, k, k, c)), b.add_constant("b", w(c, seed=2))],
                   [y], padding=padding, stride_h=stride, stride_w=stride, depth_multiplier=mult,
                   dilation_h_factor=dil, dilation_w_factor=dil, fused_activation_function=act)
    if tail == "PRELU":
        z = b.add_tensor("z", (n, oh, ow, c), F32)
        b.add_operator("PRELU", [y, b.add_constant("a", np.linspace(-0.5, 0.5, c).astype(F32).reshape(1, 1, c))], [z])
        y = z
    elif tail is not None:
        z = b.add_tensor("z", (n, oh, ow, c), F32)
        b.add_operator(tail, [y], [z])
        y = z
    b.mark_outputs(y)
    return b.build()


# --- depthwise convolution (jit.dw_rows) ------------------------------------------------------------

@pytest.mark.parametrize("h, wd, c, k, stride, padding, dil, act, n, tail", [
    (9, 11, 16, 3, 1, "SAME", 1, "RELU6", 1, None),
    (12, 10, 3, 3, 2, "SAME", 1, "NONE", 1, None),
    (11, 13, 28, 3, 2, "VALID", 1, "RELU", 1, None),
    (10, 10, 8, 5, 2, "SAME", 1, "NONE", 2, None),
    (12, 12, 24, 3, 1, "SAME", 2, "RELU_N1_TO_1", 1, "PRELU"),
    (7, 9, 40, 3, 1, "SAME", 1, "NONE", 1, "HARD_SWISH"),
    (6, 6, 300, 3, 1, "SAME", 1, "RELU6", 1, None),  # wider than a weight block: one pixel per block
    (5, 7, 5, 1, 2, "VALID", 1, "NONE", 1, None),
])
def test_depthwise_matches_the_reference(h, wd, c, k, stride, padding, dil, act, n, tail):
    compare(dw_model(h, wd, c, k, stride, padding, dil, act, n, tail))


@pytest.mark.parametrize("h, wd, c, mult, k, stride, padding, act, tail", [
    (32, 32, 3, 2, 3, 1, "SAME", "NONE", None),  # sepconv_net's first layer
    (6, 6, 24, 2, 3, 1, "VALID", "RELU", None),
    (9, 7, 4, 3, 3, 2, "SAME", "RELU6", "HARD_SWISH"),
    (5, 5, 1, 8, 1, 1, "VALID", "NONE", None),  # 1x1: a per-channel scale of the repeated input
])
def test_depthwise_with_a_depth_multiplier_is_native(h, wd, c, mult, k, stride, padding, act, tail):
    d = compare(dw_model(h, wd, c, k, stride, padding, act=act, tail=tail, mult=mult))
    assert _python_steps(d) == []


@pytest.fixture
def split_steps(monkeypatch):
    """Big numba steps in two halves on two threads (program.SPLIT_STEPS, off by default)."""
    from acelera.plugins.xnnpack_cpu import program

    monkeypatch.setattr(program, "SPLIT_STEPS", True)


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_split_across_two_threads(stride, split_steps):
    model = dw_model(64, 64, 32, 3, stride, act="RELU6")  # 64*64*32*9 multiply-adds: split in two halves
    d = compare(model, threads=2)
    assert d.kernels[0].parallel
    compare(model, threads=1)


# --- convolution and fully connected --------------------------------------------------------------------

def conv_model(h, wd, cin, cout, k, stride, padding="SAME", dil=1, act="NONE", n=1):
    oh = -(-h // stride) if padding == "SAME" else (h - (k - 1) * dil - 1) // stride + 1
    ow = -(-wd // stride) if padding == "SAME" else (wd - (k - 1) * dil - 1) // stride + 1
    return single_op_model("CONV_2D", [In((n, h, wd, cin)), Const(w(cout, k, k, cin)), Const(w(cout, seed=3))],
                           [Out((n, oh, ow, cout))], padding=padding, stride_h=stride, stride_w=stride,
                           dilation_h_factor=dil, dilation_w_factor=dil, fused_activation_function=act)


@pytest.mark.parametrize("h, wd, cin, cout, k, stride, padding, dil, act, n", [
    (32, 32, 3, 16, 3, 1, "SAME", 1, "RELU", 1),  # a first layer: runs of 9 values copied as 16
    (33, 31, 3, 32, 3, 2, "SAME", 1, "RELU6", 1),
    (29, 29, 3, 24, 5, 2, "SAME", 1, "NONE", 2),
    (20, 18, 6, 8, 3, 1, "VALID", 2, "RELU_N1_TO_1", 1),  # dilated: one run per tap
    (16, 16, 24, 40, 3, 1, "SAME", 1, "NONE", 1),  # runs longer than 16 values
    (3, 3, 64, 96, 3, 1, "SAME", 1, "RELU6", 1),  # 9 output pixels: jit.gemm_small after im2col
    (90, 90, 4, 8, 3, 1, "SAME", 1, "NONE", 1),  # blocks of output rows
])
def test_conv_matches_the_reference(h, wd, cin, cout, k, stride, padding, dil, act, n):
    compare(conv_model(h, wd, cin, cout, k, stride, padding, dil, act, n), rel=2e-5)


@pytest.mark.parametrize("m, k, n, act", [(1, 300, 250, "NONE"), (5, 640, 96, "RELU"), (12, 200, 37, "RELU6"),
                                         (13, 300, 64, "NONE")])
def test_fully_connected_few_rows(m, k, n, act):
    model = single_op_model("FULLY_CONNECTED", [In((m, k)), Const(w(n, k)), Const(w(n, seed=4))], [Out((m, n))],
                            fused_activation_function=act)
    compare(model, rel=2e-5)


def _python_steps(d) -> list:
    """The steps of the delegate's partitions that are Python closures, not native runs."""
    return [f for k in d.kernels for f in k.steps if getattr(f, "__qualname__", "") != "bind.<locals>.<lambda>"]


@pytest.mark.parametrize("blas", [True, False])
@pytest.mark.parametrize("h, cin, cout, k, stride, act", [
    (8, 16, 8, 3, 1, "RELU"),  # densenet_mini's 3x3 convolutions
    (8, 16, 16, 1, 1, "NONE"),  # pointwise, past the fc_chain bound
    (16, 3, 16, 3, 2, "RELU6"),
    (4, 64, 64, 1, 1, "RELU6"),  # 16 rows: no longer gemm_small
])
def test_gemms_call_blas_from_the_native_run(monkeypatch, blas, h, cin, cout, k, stride, act):
    """With numpy's BLAS reachable (jit.blas_sgemm) a convolution is one native run (OP_SGEMM
    records call cblas_sgemm); without it the GEMMs are np.matmul closures, jit.gemm_small or
    jit.fc_chain as before. Same results."""
    if not blas:
        monkeypatch.setattr(jit, "blas_sgemm", lambda: 0)
    else:
        assert jit.blas_sgemm() != 0  # numpy's wheels ship an ILP64 OpenBLAS
    d = compare(conv_model(h, h, cin, cout, k, stride, act=act), rel=2e-5)
    if blas:
        assert _python_steps(d) == []


def pointwise_chain(hw, cin, cout, act2):
    """1x1 CONV_2D on a small map + residual ADD + activation, the late layers of MobileNets."""
    b = ModelBuilder()
    x = b.add_input("x", (1, hw, hw, cin), F32)
    r = b.add_input("r", (1, hw, hw, cout), F32)
    y = b.add_tensor("y", (1, hw, hw, cout), F32)
    b.add_operator("CONV_2D", [x, b.add_constant("w", w(cout, 1, 1, cin)), b.add_constant("b", w(cout, seed=5))], [y],
                   padding="VALID", stride_h=1, stride_w=1, fused_activation_function="NONE")
    s = b.add_tensor("s", (1, hw, hw, cout), F32)
    b.add_operator("ADD", [y, r], [s], fused_activation_function="RELU6" if act2 == "RELU6" else "NONE")
    if act2 == "PRELU":
        z = b.add_tensor("z", (1, hw, hw, cout), F32)
        b.add_operator("PRELU", [s, b.add_constant("a", np.linspace(0, 0.3, cout).astype(F32).reshape(1, 1, cout))],
                       [z])
        s = z
    b.mark_outputs(s)
    return b.build()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("act2", ["RELU6", "PRELU"])
def test_small_gemm_with_residual_and_activation(threads, act2, split_steps):
    d = compare(pointwise_chain(3, 960, 320, act2), threads=threads, rel=2e-5)
    assert len(d.kernels[0].labels) == 1  # conv, add and activation in one step


# --- element-wise and data movement -------------------------------------------------------------------

BIN_OPS = ["ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"]


@pytest.mark.parametrize("op", BIN_OPS)
@pytest.mark.parametrize("b_shape", [(1, 5, 6, 7), (1, 1, 1, 7), (7,), (1,), "const_chan", "vector_first"])
def test_binary_ops_match_the_reference(op, b_shape):
    opts = {} if op in ("MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE") else {"fused_activation_function": "RELU6"}
    if b_shape == "const_chan":
        ins = [In((1, 5, 6, 7)), Const(w(7, seed=6) + F32(1.5))]
    elif b_shape == "vector_first":
        ins = [In((1, 1, 1, 7)), In((1, 5, 6, 7))]
    else:
        ins = [In((1, 5, 6, 7)), In(b_shape)]
    compare(single_op_model(op, ins, [Out((1, 5, 6, 7))], **opts))


def test_binary_nan_inf_and_division_by_zero():
    """NaN passes as in LiteRT (MAXIMUM/MINIMUM: a > b ? a : b); infinities stay infinite where
    the reference's open activation clamps them to +-FLT_MAX, as XNNPACK's do."""
    a = np.array([[1.0, -1.0, 0.0, np.nan, np.inf, 2.0, -np.inf, 3.0]], F32)
    b = np.array([[0.0, 0.0, 0.0, 1.0, 1.0, np.nan, 2.0, np.inf]], F32)
    big = np.finfo(F32).max
    for op in ("DIV", "MAXIMUM", "MINIMUM", "SUB"):
        opts = {"fused_activation_function": "NONE"} if op in ("DIV", "SUB") else {}
        model = single_op_model(op, [In((1, 8)), In((1, 8))], [Out((1, 8))], **opts)
        for x, y in ((a, b), (b, a)):
            ref = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
            it = Interpreter(model_content=model, experimental_delegates=[load_delegate("xnnpack-cpu", {})])
            outs = []
            for i in (ref, it):
                i.allocate_tensors()
                i.set_tensor(i.get_input_details()[0]["index"], x)
                i.set_tensor(i.get_input_details()[1]["index"], y)
                i.invoke()
                outs.append(i.get_tensor(i.get_output_details()[0]["index"]))
            want, got = outs
            with np.errstate(invalid="ignore"):
                want = np.where(np.abs(want) == big, np.sign(want) * np.inf, want)
            np.testing.assert_array_equal(got, want)


def test_elementwise_chain_runs_in_place():
    b = ModelBuilder()
    x = b.add_input("x", (1, 8, 8, 16), F32)
    t = x
    for i, (op, c) in enumerate([("MUL", w(16, seed=7)), ("ADD", w(16, seed=8)), ("MUL", w(1, 1, 1, 16, seed=9))]):
        o = b.add_tensor(f"t{i}", (1, 8, 8, 16), F32)
        b.add_operator(op, [t, b.add_constant(f"c{i}", c)], [o], fused_activation_function="RELU" if i == 1 else "NONE")
        t = o
    b.mark_outputs(t)
    compare(b.build())


@pytest.mark.parametrize("axis, shapes", [(-1, [(1, 4, 5, 3), (1, 4, 5, 6)]), (1, [(1, 2, 5, 3), (1, 4, 5, 3)]),
                                          (0, [(1, 4, 2), (2, 4, 2)])])
def test_concatenation_matches_the_reference(axis, shapes):
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    const = np.full(shapes[-1], 0.5, F32)
    compare(single_op_model("CONCATENATION", [In(s) for s in shapes] + [Const(const)],
                            [Out(tuple(out[:axis] + [out[axis] + shapes[-1][axis]] + out[axis + 1:]) if axis != -1
                                 else tuple(out[:-1] + [out[-1] + shapes[-1][-1]]))],
                            axis=axis, fused_activation_function="RELU"))


@pytest.mark.parametrize("pads", [[[0, 0], [1, 2], [0, 1], [0, 4]], [[0, 0], [0, 0], [0, 0], [2, 3]],
                                  [[1, 0], [0, 0], [2, 2], [0, 0]]])
def test_pad_matches_the_reference(pads):
    pads = np.array(pads, np.int32)
    shape = (1, 4, 5, 3)
    out = tuple(int(s + a + b) for s, (a, b) in zip(shape, pads))
    compare(single_op_model("PAD", [In(shape), Const(pads)], [Out(out)]))


# --- models ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["resnet_mini_float32", "resnet_mini_fp16"])
def test_resnet_mini_residual_chains_are_delegated(name):
    """Two convolutions feeding one ADD: the first chain to reach the ADD takes it (the other
    convolution used to take it too and the build failed with a KeyError)."""
    with open(os.path.join(ZOO, f"{name}.tflite"), "rb") as f:
        model = f.read()
    d = compare(model, rel=1e-5)
    labels = d.kernels[0].labels
    assert sum("+ADD" in lab for lab in labels) == 3, labels


@pytest.mark.parametrize("name", ["efficientnet_b0_float32", "mobilenet_v3_small_float32", "densenet_mini_float32",
                                  "unet_mini_float32", "sepconv_net_float32"])
@pytest.mark.parametrize("threads", [1, 2])
def test_zoo_float_models_match_the_reference(name, threads):
    path = os.path.join(ZOO, f"{name}.tflite")
    rng = np.random.default_rng(0)
    ref = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    it = Interpreter(model_path=path, experimental_delegates=[load_delegate("xnnpack-cpu", {"num_threads": threads})],
                     num_threads=threads, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    assert it.delegation.nodes_of("xnnpack-cpu")
    for det in ref.get_input_details():
        x = rng.uniform(-1, 1, det["shape"]).astype(det["dtype"])
        ref.set_tensor(det["index"], x)
        it.set_tensor(det["index"], x)
    ref.invoke()
    it.invoke()
    for o in ref.get_output_details():
        want, got = ref.get_tensor(o["index"]), it.get_tensor(o["index"])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(1.0, float(np.max(np.abs(want)))))


# --- profiling, packed layout, float16 -------------------------------------------------------------------

def test_profiling_times_every_step():
    d = compare(dw_model(16, 16, 8, 3, 1, act="RELU6"), invokes=1)
    k = d.kernels[0]
    k.set_profiling(True)
    for _ in range(3):
        k.invoke(np.ones((1, 16, 16, 8), F32))
    prof = k.profile()
    assert [lab for lab, _ in prof] == k.labels and k.profiled_invokes == 3
    assert all(t > 0 for _, t in prof)
    k.set_profiling(False)
    k.invoke(np.ones((1, 16, 16, 8), F32))
    assert k.profiled_invokes == 0


def test_weights_packed_for_another_layout_are_packed_again():
    model = conv_model(8, 8, 4, 8, 3, 1)
    good = {}

    def stale(compute):  # a weight cache entry written by another layout
        flat = compute()
        good.update(flat)
        flat = dict(flat)
        flat["layout"] = np.array((PACK_LAYOUT[0] - 1, int(jit.AVAILABLE)), np.int64)
        for key in flat:
            if key.endswith("/w"):
                flat[key] = np.zeros_like(flat[key])
        return flat
    d = load_delegate("xnnpack-cpu", {})
    it = Interpreter(model_content=model, experimental_delegates=[d])
    it.allocate_tensors()
    part = d.kernels[0].partition
    k = CompiledPartition(part, packed_cache=stale)
    fresh = CompiledPartition(part)
    x = np.random.default_rng(0).normal(size=(1, 8, 8, 4)).astype(F32)
    np.testing.assert_array_equal(k.invoke(x)[0], fresh.invoke(x)[0])
    assert np.any(k.invoke(x)[0] != 0)


def test_force_fp16_with_native_steps_stays_close():
    model = dw_model(12, 12, 16, 3, 2, act="RELU6")
    ref = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    it = Interpreter(model_content=model, experimental_delegates=[load_delegate("xnnpack-cpu", {"xnnpack_force_fp16": True})])
    it.allocate_tensors()
    x = np.random.default_rng(0).uniform(-2, 2, (1, 12, 12, 16)).astype(F32)
    for i in (ref, it):
        i.set_tensor(i.get_input_details()[0]["index"], x)
        i.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    got = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-2 * max(1.0, float(np.max(np.abs(want)))))


@pytest.mark.parametrize("stride, act", [(1, "RELU6"), (2, "RELU"), (1, "NONE")])
@pytest.mark.parametrize("threads", [1, 2])
def test_expand_conv_bias_and_clamp_move_into_the_depthwise_step(stride, act, threads, split_steps):
    """CONV_2D (1x1) -> DEPTHWISE_CONV_2D: the convolution writes its bare product and the
    depthwise step adds the bias and clamp as it copies its input (no pass over the tensor)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 40, 40, 16), F32)
    e = b.add_tensor("e", (1, 40, 40, 64), F32)
    b.add_operator("CONV_2D", [x, b.add_constant("w", w(64, 1, 1, 16)), b.add_constant("b", w(64, seed=2) + F32(0.5))],
                   [e], padding="VALID", stride_h=1, stride_w=1, fused_activation_function=act)
    oh = 40 // stride
    y = b.add_tensor("y", (1, oh, oh, 64), F32)
    b.add_operator("DEPTHWISE_CONV_2D", [e, b.add_constant("dw", w(1, 3, 3, 64, seed=3)),
                                         b.add_constant("db", w(64, seed=4))], [y], padding="SAME",
                   stride_h=stride, stride_w=stride, depth_multiplier=1, fused_activation_function="RELU6")
    b.mark_outputs(y)
    d = compare(b.build(), threads=threads, rel=2e-5)
    spec = d.kernels[0].specs[1]
    assert d.kernels[0].specs[0].label.startswith("CONV_2D") and "pbt" in spec.pack()


@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1", "HARD_SWISH", "LOGISTIC", "TANH", "ABS"])
@pytest.mark.parametrize("shape", [(1, 5, 6, 7), (1, 40, 40, 8)])  # LOGISTIC: numba up to 4096 values, numpy above
def test_unary_ops_match_the_reference(op, shape):
    compare(single_op_model(op, [In(shape)], [Out(shape)]))
    x = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0, -3.0, 7.5]], F32)
    compare(single_op_model(op, [In((1, 8))], [Out((1, 8))]), inputs=[x])


@pytest.mark.parametrize("order", ["x_first", "sigmoid_first"])
def test_swish_is_one_step(order):
    """CONV_2D -> LOGISTIC and MUL(x, LOGISTIC(x)): x * sigmoid(x) in one native pass."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 20, 20, 24), F32)
    c = b.add_tensor("c", (1, 20, 20, 24), F32)
    b.add_operator("CONV_2D", [x, b.add_constant("w", w(24, 1, 1, 24, scale=2.0)), b.add_constant("b", w(24, seed=2))],
                   [c], padding="VALID", stride_h=1, stride_w=1, fused_activation_function="NONE")
    s = b.add_tensor("s", (1, 20, 20, 24), F32)
    b.add_operator("LOGISTIC", [c], [s])
    y = b.add_tensor("y", (1, 20, 20, 24), F32)
    b.add_operator("MUL", [c, s] if order == "x_first" else [s, c], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    d = compare(b.build(), rel=2e-5)
    assert d.kernels[0].labels[-1].startswith("LOGISTIC+MUL")
    model = single_op_model("LOGISTIC", [In((1, 12))], [Out((1, 12))])
    x = np.array([[np.nan, np.inf, -np.inf, 0.0, 88.5, -88.5, 87.0, -87.0, 200.0, -200.0, 1e-8, -3.5]], F32)
    compare(model, inputs=[x])


def layer_norm_model(shape, residual_reader=False, eps=1e-3):
    """The converter's LayerNorm graph (MEAN, NEG, SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, MUL
    gamma, MUL, ADD beta, MUL, ADD) over the last axis of a RELU'd input; with residual_reader
    the variance is also a model output, which must keep the nodes apart."""
    c = shape[-1]
    b = ModelBuilder()
    x0 = b.add_input("x0", shape, F32)
    x = b.add_tensor("x", shape, F32)
    b.add_operator("RELU", [x0], [x])
    red = shape[:-1] + (1,)
    axis = b.add_constant("axis", np.array([-1], np.int32))

    def t(name, sh=shape):
        return b.add_tensor(name, sh, F32)
    m, nm, sq, v, ve, r = t("m", red), t("nm", red), t("sq"), t("v", red), t("ve", red), t("r", red)
    g, tt, bb, xg, y = t("g"), t("t"), t("b"), t("xg"), t("y")
    gsh = (1,) * (len(shape) - 1) + (c,)
    b.add_operator("MEAN", [x, axis], [m], keep_dims=True)
    b.add_operator("NEG", [m], [nm])
    b.add_operator("SQUARED_DIFFERENCE", [x, m], [sq])
    b.add_operator("MEAN", [sq, axis], [v], keep_dims=True)
    b.add_operator("ADD", [v, b.add_constant("eps", np.array(eps, F32))], [ve], fused_activation_function="NONE")
    b.add_operator("RSQRT", [ve], [r])
    b.add_operator("MUL", [r, b.add_constant("gamma", w(*gsh, seed=3) + F32(1))], [g], fused_activation_function="NONE")
    b.add_operator("MUL", [nm, g], [tt], fused_activation_function="NONE")
    b.add_operator("ADD", [tt, b.add_constant("beta", w(*gsh, seed=4))], [bb], fused_activation_function="NONE")
    b.add_operator("MUL", [x, g], [xg], fused_activation_function="NONE")
    b.add_operator("ADD", [xg, bb], [y], fused_activation_function="NONE")
    b.mark_outputs(*((y, v) if residual_reader else (y,)))
    return b.build()


@pytest.mark.parametrize("shape, apart", [((1, 16, 32), False), ((2, 3, 5, 24), False), ((4, 7), False),
                                          ((1, 16, 32), True)])
def test_layer_norm_subgraph_is_one_native_step(shape, apart):
    d = compare(layer_norm_model(shape, residual_reader=apart))
    (k,) = d.kernels
    fused = [lab for lab in k.labels if lab.startswith("MEAN+NEG+SQUARED_DIFFERENCE")]
    assert len(fused) == (0 if apart else 1), k.labels


@pytest.mark.parametrize("begin, end, bmask, emask, shape, out", [
    ((0, 0), (3, 4), 0, 0, (6, 4), (3, 4)),  # leading rows: one contiguous run
    ((0, 1), (6, 3), 0, 0, (6, 4), (6, 2)),  # a column band: runs of 2, stride 4
    ((1, 0, 2), (2, 5, 7), 1, 0, (2, 6, 8), (2, 5, 5)),  # begin mask, runs over two axes
    ((0, 0, 0, 1), (1, 5, 7, 3), 0, 4, (1, 6, 7, 4), (1, 5, 7, 2)),  # end mask
])
def test_strided_slice_between_native_steps_is_a_copy(begin, end, bmask, emask, shape, out):
    """A STRIDED_SLICE with constant parameters between two element-wise steps is an OP_COPY
    record, so the partition is one native call (no reference call splitting it); the scalar
    broadcasts around it fill their tile once per call for the tensor's size only."""
    b = ModelBuilder()
    x = b.add_input("x", shape, F32)
    a = b.add_tensor("a", shape, F32)
    b.add_operator("ADD", [x, b.add_constant("one", np.array(1.5, F32))], [a], fused_activation_function="NONE")
    s = b.add_tensor("s", out, F32)
    k = len(shape)
    b.add_operator("STRIDED_SLICE", [a, b.add_constant("b", np.array(begin, np.int32)),
                                     b.add_constant("e", np.array(end, np.int32)),
                                     b.add_constant("s", np.ones(k, np.int32))], [s],
                   begin_mask=bmask, end_mask=emask)
    y = b.add_tensor("y", out, F32)
    b.add_operator("MUL", [s, b.add_constant("two", np.array(-2.0, F32))], [y], fused_activation_function="RELU")
    b.mark_outputs(y, a)
    d = compare(b.build())
    (kern,) = d.kernels
    assert len(kern.steps) == 1, kern.labels


def test_copy_groups_cover_every_position():
    from acelera.plugins.xnnpack_cpu.ops import copy_groups

    x = np.arange(2 * 6 * 8).reshape(2, 6, 8)
    for sl in (np.s_[::2], np.s_[:, 1:3], np.s_[..., 3:5], np.s_[::-1], np.s_[:, ::-1, ::2], np.s_[1:, 2:, 1:7:3]):
        pos = x[sl].reshape(-1)
        got = np.empty_like(pos)
        for s0, d0, run, reps, sst in copy_groups(pos):
            assert sst >= 0
            for r in range(reps):
                got[d0 + r * run:d0 + (r + 1) * run] = np.arange(s0 + r * sst, s0 + r * sst + run)
        np.testing.assert_array_equal(got, pos)
