"""The models LiteRT's Python interpreter tests use, rebuilt with acelera's ModelBuilder.

Upstream (google-ai-edge/LiteRT) builds most of them at test time from TensorFlow graphs or
ships them as binaries; neither TensorFlow nor the binaries are available here, so each
function below writes an equivalent model: same tensor order, names, types, shapes and
quantization wherever a test looks at them. Where each came from is in its docstring.
"""
from __future__ import annotations

import numpy as np

from acelera.core.builder import ModelBuilder

PERMUTATION = np.array([[0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 0]], np.float32)


def permute_float() -> bytes:
    """tflite/python/testdata/permute.pbtxt converted by `tf_to_tflite` (permute_float.tflite):
    `output = MatMul(input[1, 4], Const[4, 4])` with an anti-diagonal permutation matrix, which
    TOCO writes as one FULLY_CONNECTED node with tensors input(0), weights(1), output(2)."""
    b = ModelBuilder(description="TOCO Converted.")
    x = b.add_input("input", (1, 4), np.float32)
    w = b.add_constant("Const", PERMUTATION.T.copy())  # FULLY_CONNECTED weights are [out, in]
    y = b.add_tensor("output", (1, 4), np.float32)
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    return b.build()


def permute_uint8() -> bytes:
    """permute.pbtxt converted with `--inference_type=QUANTIZED_UINT8 --std_dev_values=1
    --mean_values=0 --default_ranges_min=0 --default_ranges_max=255` (permute_uint8.tflite):
    input and output uint8 with (scale 1, zero point 0), the 0/1 weights quantized over
    [0, 1] (scale 1/255, zero point 0)."""
    b = ModelBuilder(description="TOCO Converted.")
    x = b.add_input("input", (1, 4), np.uint8, quant=(1.0, 0))
    w = b.add_constant("Const", (PERMUTATION.T * 255).astype(np.uint8), quant=(1.0 / 255.0, 0))
    y = b.add_tensor("output", (1, 4), np.uint8, quant=(1.0, 0))
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    return b.build()


def gather_string() -> bytes:
    """tflite/python/testdata/gather.pbtxt converted (gather_string.tflite; the binary in
    litert/test/testdata has the same layout): `output = GatherV2(input: string[10],
    indices: int64[3], axis=0)`."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input("input", (10,), np.bytes_)
    i = b.add_input("indices", (3,), np.int64)
    y = b.add_tensor("output", (3,), np.bytes_)
    b.add_operator("GATHER", [x, i], [y], axis=0, batch_dims=0)
    b.mark_outputs(y)
    return b.build()


def gather_string_0d() -> bytes:
    """tflite/python/testdata/gather_0d.pbtxt converted (gather_string_0d.tflite): an unused
    scalar string placeholder `input` (shape []), and `output = GatherV2(input_const:
    string[1] = ["abcd"], indices: int64[3], axis=0)`."""
    b = ModelBuilder(description="TOCO Converted.")
    b.add_input("input", (), np.bytes_)  # never read, as in the original
    c = b.add_constant("input_const", np.array([b"abcd"], object))
    i = b.add_input("indices", (3,), np.int64)
    y = b.add_tensor("output", (3,), np.bytes_)
    b.add_operator("GATHER", [c, i], [y], axis=0, batch_dims=0)
    b.mark_outputs(y)
    return b.build()


def pc_conv(size: int = 8) -> bytes:
    """tflite/python/testdata/pc_conv.bin (TOCO): QUANTIZE -> per-channel int8
    DEPTHWISE_CONV_2D (128 channels, 3x3, stride 2, SAME) -> DEQUANTIZE, with the bias at tensor
    0 and the weights at tensor 1 (128 scales on dimension 3). The original input is 128x128;
    `size` keeps the same graph smaller."""
    rng = np.random.default_rng(0)
    b = ModelBuilder(description="TOCO Converted.")
    scales = rng.uniform(0.001, 0.01, 128).astype(np.float32)
    bias = b.add_constant("Conv/Conv2D_bias", rng.integers(-100, 100, 128).astype(np.int32),
                          quant=(scales * 0.05, np.zeros(128, np.int64), 0))
    w = b.add_constant("Conv/weights", rng.integers(-127, 128, (1, 3, 3, 128)).astype(np.int8),
                       quant=(scales, np.zeros(128, np.int64), 3))
    q_in = b.add_tensor("input_int8", (1, size, size, 1), np.int8, quant=(0.05, 0))
    q_out = b.add_tensor("output_int8", (1, size // 2, size // 2, 128), np.int8, quant=(0.02, -3))
    x = b.add_tensor("input", (1, size, size, 1), np.float32)
    y = b.add_tensor("output", (1, size // 2, size // 2, 128), np.float32)
    b.inputs.append(x)
    b.add_operator("QUANTIZE", [x], [q_in])
    b.add_operator("DEPTHWISE_CONV_2D", [q_in, w, bias], [q_out], version=3, depth_multiplier=128,
                   padding="SAME", stride_h=2, stride_w=2, dilation_h_factor=1, dilation_w_factor=1,
                   fused_activation_function="NONE")
    b.add_operator("DEQUANTIZE", [q_out], [y], version=2)
    b.mark_outputs(y)
    return b.build()


SPARSE_VALUES = np.array([1, 0, 0, 4, 2, 3, 0, 0, 5, 0, 0, 6], np.int8)


def sparse_tensor() -> bytes:
    """tflite/testdata/sparse_tensor.json (sparse_tensor.bin): a 4x4 int8 constant stored
    block-sparse (2x2 blocks, block row 0 has blocks 0 and 1, block row 1 has block 1) that is
    also the graph input, read by the custom op `FakeOp` into `output_tensor`."""
    b = ModelBuilder(description="")
    sparsity = {"traversal_order": (0, 1, 2, 3), "block_map": (0, 1),
                "dim_metadata": [(0, 2, None, None), (1, 0, (0, 2, 3), (0, 1, 1)),
                                 (0, 2, None, None), (0, 2, None, None)]}
    s = b.add_constant("sparse_tensor", SPARSE_VALUES, sparsity=sparsity, shape=(4, 4))
    y = b.add_tensor("output_tensor", (4, 4), np.int8)
    b.inputs.append(s)
    b.add_operator("CUSTOM", [s], [y], custom_code="FakeOp")
    b.mark_outputs(y)
    return b.build()


def double_op() -> bytes:
    """A model with the custom op `Double` that LiteRT's test registerer
    (tflite/python/testdata/test_registerer.cc) defines: `output = input + input`."""
    b = ModelBuilder(description="custom Double")
    x = b.add_input("input", (1, 4), np.float32)
    y = b.add_tensor("output", (1, 4), np.float32)
    b.add_operator("CUSTOM", [x], [y], custom_code="Double")
    b.mark_outputs(y)
    return b.build()


def _binary_subgraph(g: ModelBuilder, prefix: str, op: str, y_value: float, out_name: str) -> tuple[int, int]:
    x = g.add_input(f"{prefix}_x:0", (1,), np.float32)
    c = g.add_constant(f"{prefix}/y", np.array([y_value], np.float32))
    z = g.add_tensor(out_name, (1,), np.float32)
    g.add_operator(op, [x, c], [z], fused_activation_function="NONE")
    g.mark_outputs(z)
    return x, z


def two_signatures() -> bytes:
    """tflite/python/testdata/two_signatures.tflite (a TF module with two functions converted):
    signature `add` on subgraph 0 (`add_x:0` + 2) and `multiply` on subgraph 1
    (`multiply_x:0` * 3), three tensors each."""
    b = ModelBuilder(description="MLIR Converted.")
    x0, z0 = _binary_subgraph(b, "add", "ADD", 2.0, "StatefulPartitionedCall:0")
    g = b.add_subgraph("multiply")
    x1, z1 = _binary_subgraph(g, "multiply", "MUL", 3.0, "StatefulPartitionedCall_1:0")
    b.add_signature("add", {"x": x0}, {"output_0": z0}, 0)
    b.add_signature("multiply", {"x": x1}, {"output_0": z1}, 1)
    return b.build()


def multi_function() -> bytes:
    """lite_v2_test_util's `_getMultiFunctionModel` with its `add` (x + y, y = 2) and `sub`
    (x - z, z = 3) functions converted together (lite_v2_test testConvertMultipleFunctions,
    testMultipleFunctionModel): one signature and one subgraph per function."""
    b = ModelBuilder(description="MLIR Converted.")
    x0, z0 = _binary_subgraph(b, "add", "ADD", 2.0, "StatefulPartitionedCall:0")
    g = b.add_subgraph("sub")
    x1, z1 = _binary_subgraph(g, "sub", "SUB", 3.0, "StatefulPartitionedCall_1:0")
    b.add_signature("add", {"x": x0}, {"output_0": z0}, 0)
    b.add_signature("sub", {"x": x1}, {"output_0": z1}, 1)
    return b.build()


def mul_add() -> bytes:
    """`_getMultiFunctionModel().mul_add(x, y) = x * z + y` (z = 3) saved with the signature
    `mul_add` (lite_v2_test testSignatureDefs / testSignatureDefsWithDefaultValue)."""
    b = ModelBuilder(description="MLIR Converted.")
    y = b.add_input("mul_add_y:0", (1,), np.float32)
    x = b.add_input("mul_add_x:0", (1,), np.float32)
    z = b.add_constant("mul", np.array([3.0], np.float32))
    t = b.add_tensor("mul_1", (1,), np.float32)
    out = b.add_tensor("StatefulPartitionedCall:0", (1,), np.float32)
    b.add_operator("MUL", [x, z], [t], fused_activation_function="NONE")
    b.add_operator("ADD", [t, y], [out], fused_activation_function="NONE")
    b.mark_outputs(out)
    b.add_signature("mul_add", {"x": x, "y": y}, {"output_0": out})
    return b.build()


def add_self(shape: tuple[int, ...], shape_signature: tuple[int, ...] | None = None,
             dtype=np.float32, in_name: str = "Placeholder", out_name: str = "add") -> bytes:
    """`in_tensor + in_tensor` from a placeholder (lite_test testSizeNone,
    testResizeTensorInputStrict, testBatchSizeValid, testScalarValid): one ADD node."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input(in_name, shape, dtype, shape_signature=shape_signature)
    y = b.add_tensor(out_name, shape, dtype, shape_signature=shape_signature)
    b.add_operator("ADD", [x, x], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    if shape_signature is not None:
        b.add_signature("serving_default", {"x": x}, {"output_0": y})
    return b.build()


def string_reshape() -> bytes:
    """lite_test testString: `reshape(placeholder: string[4], [2, 2])`."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input("Placeholder", (4,), np.bytes_)
    s = b.add_constant("Reshape/shape", np.array([2, 2], np.int32))
    y = b.add_tensor("Reshape", (2, 2), np.bytes_)
    b.add_operator("RESHAPE", [x, s], [y])
    b.mark_outputs(y)
    return b.build()


def string_identity() -> bytes:
    """lite_v2_test testStringInput: `f(x) = x` on string[11] with a serving signature; the
    converter writes no node, the input tensor is also the output."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input("x", (11,), np.bytes_)
    b.mark_outputs(x)
    b.add_signature("serving_default", {"x": x}, {"output_0": x})
    return b.build()


def batch_matmul() -> bytes:
    """lite_test testBatchSizeNonZero: `matmul(input1[None, 4], input2[4, 10])`."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input("input1", (1, 4), np.float32, shape_signature=(-1, 4))
    w = b.add_input("input2", (4, 10), np.float32)
    y = b.add_tensor("MatMul", (1, 10), np.float32, shape_signature=(-1, 10))
    b.add_operator("BATCH_MATMUL", [x, w], [y], adj_x=False, adj_y=False)
    b.mark_outputs(y)
    return b.build()


def reshape_to_input_shape() -> bytes:
    """lite_test testResizeWithShape: `reshape([[1, 2], [3, 4]], shape(in_tensor[None, None]))`
    (SHAPE feeding RESHAPE: the output shape follows the resized input)."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input("Placeholder", (1, 1), np.float32, shape_signature=(-1, -1))
    c = b.add_constant("Const", np.array([[1, 2], [3, 4]], np.int32))
    s = b.add_tensor("Shape", (2,), np.int32)
    y = b.add_tensor("Reshape", (1, 1), np.int32, shape_signature=(-1, -1))
    b.add_operator("SHAPE", [x], [s], out_type=2)
    b.add_operator("RESHAPE", [c, s], [y])
    b.mark_outputs(y)
    return b.build()


def pad_intermediate() -> bytes:
    """lite_test testResizingIntermediateDynamicTensor: `pad(input[1, 1], padding[2, 2]) +
    neg(input2[1])`, so the padded intermediate changes shape between invokes."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input("Placeholder", (1, 1), np.float32)
    p = b.add_input("Placeholder_1", (2, 2), np.int32)
    x2 = b.add_input("Placeholder_2", (1,), np.float32)
    n = b.add_tensor("Neg", (1,), np.float32)
    padded = b.add_tensor("Pad", (1, 1), np.float32, shape_signature=(-1, -1))
    y = b.add_tensor("add", (1, 1), np.float32, shape_signature=(-1, -1))
    b.add_operator("NEG", [x2], [n])
    b.add_operator("PAD", [x, p], [padded])
    b.add_operator("ADD", [padded, n], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    return b.build()


def unknown_shape_double() -> bytes:
    """lite_v2_test testUnknownInputShapeModel: `x * 2` on an input of unknown rank (the
    converter writes shape [] with no signature)."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input("x", (), np.float32)
    c = b.add_constant("two", np.array(2.0, np.float32))
    y = b.add_tensor("Identity", (), np.float32)
    b.add_operator("MUL", [x, c], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    b.add_signature("serving_default", {"x": x}, {"output_0": y})
    return b.build()


def variable_assign_add() -> bytes:
    """lite_v2_test_util `_getSimpleModelWithVariables().assign_add` converted with resource
    variables (lite_v2_test testNativeVariablesModel): CALL_ONCE runs an init subgraph that
    assigns zeros[1, 10] to the variable; the main subgraph adds its input to the variable,
    assigns the sum back and returns the variable."""
    b = ModelBuilder(description="MLIR Converted.")
    init = b.add_subgraph("init")
    h0 = init.add_tensor("var_handle_init", (), "RESOURCE")
    zeros = init.add_constant("zeros", np.zeros((1, 10), np.float32))
    init.add_operator("VAR_HANDLE", [], [h0], container="", shared_name="var")
    init.add_operator("ASSIGN_VARIABLE", [h0, zeros], [])

    x = b.add_input("assign_add_x:0", (1, 10), np.float32)
    h = b.add_tensor("var_handle", (), "RESOURCE")
    v = b.add_tensor("ReadVariableOp", (1, 10), np.float32)
    s = b.add_tensor("add", (1, 10), np.float32)
    out = b.add_tensor("Identity", (1, 10), np.float32)
    b.add_operator("CALL_ONCE", [], [], init_subgraph_index=init.index)
    b.add_operator("VAR_HANDLE", [], [h], container="", shared_name="var")
    b.add_operator("READ_VARIABLE", [h], [v])
    b.add_operator("ADD", [v, x], [s], fused_activation_function="NONE")
    b.add_operator("ASSIGN_VARIABLE", [h, s], [])
    b.add_operator("READ_VARIABLE", [h], [out])
    b.mark_outputs(out)
    b.add_signature("serving_default", {"x": x}, {"output_0": out})
    return b.build()


def hashtable_lookup() -> bytes:
    """lite_v2_test testModelWithHashTableInitializer: a string -> int64 table filled by a
    session initializer with {a: 1, b: 2, c: 3} (default -1), looked up with a string input of
    unknown length. CALL_ONCE runs the initializer subgraph (HASHTABLE + HASHTABLE_IMPORT)."""
    b = ModelBuilder(description="MLIR Converted.")
    init = b.add_subgraph("init")
    t0 = init.add_tensor("hash_table_init", (1,), "RESOURCE")
    keys = init.add_constant("keys", np.array([b"a", b"b", b"c"], object))
    vals = init.add_constant("values", np.array([1, 2, 3], np.int64))
    init.add_operator("HASHTABLE", [], [t0], table_id=1, key_dtype=5, value_dtype=4)
    init.add_operator("HASHTABLE_IMPORT", [t0, keys, vals], [])

    x = b.add_input("input", (), np.bytes_, shape_signature=(-1,))
    t = b.add_tensor("hash_table", (1,), "RESOURCE")
    d = b.add_constant("default", np.array(-1, np.int64))
    y = b.add_tensor("output", (), np.int64, shape_signature=(-1,))
    b.add_operator("CALL_ONCE", [], [], init_subgraph_index=init.index)
    b.add_operator("HASHTABLE", [], [t], table_id=1, key_dtype=5, value_dtype=4)
    b.add_operator("HASHTABLE_FIND", [t, x, d], [y])
    b.mark_outputs(y)
    return b.build()


def empty_sum() -> bytes:
    """interpreter_test testEmptyInputTensor: `tf.raw_ops.Sum(input=x[None], axis=[0])` from a
    concrete function (one SUM node, input [1] with signature [-1], scalar output)."""
    b = ModelBuilder(description="MLIR Converted.")
    x = b.add_input("x", (1,), np.float32, shape_signature=(-1,))
    axis = b.add_constant("Sum/reduction_indices", np.array([0], np.int32))
    y = b.add_tensor("Identity", (), np.float32)
    b.add_operator("SUM", [x, axis], [y], keep_dims=False)
    b.mark_outputs(y)
    b.add_signature("serving_default", {"x": x}, {"output_0": y})
    return b.build()


MODELS = {
    "permute_float.tflite": permute_float, "permute_uint8.tflite": permute_uint8,
    "gather_string.tflite": gather_string, "gather_string_0d.tflite": gather_string_0d,
    "pc_conv.bin": pc_conv, "sparse_tensor.bin": sparse_tensor, "two_signatures.tflite": two_signatures,
}
"""The files interpreter_test.py opens by name (testdata/... and ../testdata/sparse_tensor.bin)."""
