"""The packed sub-byte types INT2 and UINT4 (and INT4 where they share code), and FLOAT8 in the
embedding lookups, against LiteRT's reference kernels.

* Packing: LiteRT's dense layout (4 INT2 or 2 INT4/UINT4 values per byte, low bits first), a
  hypothesis round trip, the loader (unpacked constants, truncated/oversized buffers, zero points
  outside the type) and the builder (values the type cannot hold).
* CAST from/to INT2 and UINT4, DEQUANTIZE of INT2/UINT4 (per tensor and per channel), QUANTIZE
  float32 -> INT4/UINT4, TRANSPOSE of UINT4, RESHAPE/SQUEEZE/EXPAND_DIMS/SHAPE/RANK/WHILE/
  STABLEHLO_COMPOSITE carrying INT2/UINT4, EMBEDDING_LOOKUP over INT2 tables (hybrid float32/
  float16, per-tensor and per-row scales) and same-type INT2/INT4/UINT4/FLOAT8 tables,
  HASHTABLE_LOOKUP and LSH_PROJECTION of FLOAT8.

LiteRT's Python API (ai-edge-litert 2.3.0) packs UINT4/INT4 inputs and unpacks INT2/UINT4/INT4
outputs, so those cross it as one value per byte like acelera holds them; it has no numpy type
for INT2 inputs, so INT2 goes in as packed constants. FLOAT8 crosses it as int8 bytes. The wheel
is built without TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS, so CAST between the packed types and
FLOAT8 is checked against numpy and ml_dtypes (the test asserts LiteRT refuses it). With rows of
a packed EMBEDDING_LOOKUP table that do not start on a byte boundary LiteRT reads the wrong bits;
there acelera is checked against numpy and LiteRT only on the byte-aligned rows.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from flatbuffers import flexbuffers
from helpers import allocate_error, invoke_error, litert_fails, rng_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import run_acelera, run_litert

from acelera.core import dtypes
from acelera.core import litert_ops as L
from acelera.core.builder import Const, In, ModelBuilder, Out, single_op_model
from acelera.core.errors import ModelError, UnsupportedOpError
from acelera.core.interpreter import Interpreter
from acelera.core.model import load_model

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F8 = ("FLOAT8_E4M3FN", "FLOAT8_E5M2")
ML_F8 = {"FLOAT8_E4M3FN": ml_dtypes.float8_e4m3fn, "FLOAT8_E5M2": ml_dtypes.float8_e5m2}
PACKED = ("INT4", "INT2", "UINT4")
RANGE = {"INT4": (-8, 7), "INT2": (-2, 1), "UINT4": (0, 15)}
HELD = {"INT4": np.int8, "INT2": np.int8, "UINT4": np.uint8}  # how acelera (and LiteRT's API) hold them


# --- harness -------------------------------------------------------------------------------------

def to_litert(x: np.ndarray, dtype) -> np.ndarray:
    """An input as LiteRT's Python API takes it (FLOAT8 bit patterns as int8 bytes)."""
    x, dt = np.asarray(x), np.dtype(dtype)
    if x.dtype != dt and x.dtype.itemsize == dt.itemsize and x.dtype.kind in "ui" and dt.kind in "ui":
        return x.view(dt)
    return np.asarray(x, dt)


def litert(model: bytes, inputs, reference: bool | str = True) -> list[np.ndarray]:
    return run_litert(model, inputs, reference, convert=to_litert)


def declared(model: bytes) -> list[np.dtype]:
    sg = load_model(model).main
    return [sg.tensors[i].dtype for i in sg.outputs]


def same_bits(got: np.ndarray, want: np.ndarray, dtype: np.dtype, k: int = 0) -> None:
    assert got.dtype == dtype, f"output {k}: dtype {got.dtype}, the model declares {dtype}"
    want = np.asarray(want)
    assert got.shape == want.shape, f"output {k}: shape {got.shape} != {want.shape}"
    if want.dtype != dtype and want.dtype.itemsize == dtype.itemsize and want.dtype.kind in "ui":
        want = want.view(dtype)  # FLOAT8 bytes LiteRT hands back as int8
    want = np.asarray(want, dtype)
    g, w = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert g.tobytes() == w.tobytes(), f"output {k}: {g.reshape(-1)[:16]} != {w.reshape(-1)[:16]}"


def exact(model: bytes, inputs, reference: bool | str = True) -> list[np.ndarray]:
    """acelera's outputs have the declared dtypes and LiteRT's exact bits."""
    want = litert(model, inputs, reference)
    got = run_acelera(model, inputs)
    assert len(got) == len(want)
    for k, (g, w, dt) in enumerate(zip(got, want, declared(model))):
        same_bits(g, w, dt, k)
    return got


def acelera_only(model: bytes, inputs, expected) -> list[np.ndarray]:
    """acelera's outputs against independently computed numpy values (LiteRT cannot run it)."""
    got = run_acelera(model, inputs)
    for k, (g, w, dt) in enumerate(zip(got, expected, declared(model))):
        same_bits(g, w, dt, k)
    return got


def values(type_name: str, shape, rng: np.random.Generator) -> np.ndarray:
    lo, hi = RANGE[type_name]
    return rng.integers(lo, hi + 1, size=shape).astype(HELD[type_name])


def const_model(op: str, x: np.ndarray, type_name: str, out_shape, out_dtype, *, quant=None, out_quant=None,
                extra=(), version: int = 1, **options) -> bytes:
    """A single-op model whose input 0 is a packed constant of `type_name` holding `x`."""
    return single_op_model(op, [Const(x, quant, dtype=type_name), *extra], [Out(out_shape, out_dtype, out_quant)],
                           version=version, **options)


# --- packing -------------------------------------------------------------------------------------

def test_packing_is_litert_layout():
    # the examples of portable_tensor_utils.h: INT4 {0x12, 0x34} <-> {2, 1, 4, 3};
    # INT2 {0, 1, 0, 2 (= -2)} -> 0x84; INT2 0x12 -> {-2, 0, 1, 0} (sign-extended)
    assert dtypes.pack(np.array([2, 1, 4, 3]), 17) == b"\x12\x34"
    assert dtypes.unpack(b"\x12\x34", 17, 4).tolist() == [2, 1, 4, 3]
    assert dtypes.pack(np.array([0, 1, 0, -2]), 19) == b"\x84"
    assert dtypes.unpack(b"\x12", 19, 4).tolist() == [-2, 0, 1, 0]
    assert dtypes.unpack(b"\xff", 20, 2).tolist() == [15, 15] and dtypes.unpack(b"\xff", 17, 2).tolist() == [-1, -1]
    # the last byte is padded with zero bits; odd counts read only the low bits of it
    assert dtypes.pack(np.array([-1, -1, -1, -1, 1]), 19) == b"\xff\x01"
    assert dtypes.pack(np.array([15, 15, 3]), 20) == b"\xff\x03"
    assert [dtypes.packed_size(c, n) for c in (17, 19, 20) for n in (0, 1, 4, 5)] == [0, 1, 2, 3, 0, 1, 1, 2,
                                                                                    0, 1, 2, 3]


@SETTINGS
@given(data=st.data(), type_name=st.sampled_from(PACKED))
def test_pack_unpack_round_trip(data, type_name):
    code = dtypes.TYPE_CODES[type_name]
    lo, hi = RANGE[type_name]
    vals = np.array(data.draw(st.lists(st.integers(lo, hi), max_size=41)), HELD[type_name])
    raw = dtypes.pack(vals, code)
    assert len(raw) == dtypes.packed_size(code, vals.size)
    back = dtypes.unpack(raw, code, vals.size)
    assert back.dtype == HELD[type_name]
    np.testing.assert_array_equal(back, vals)
    # through a model file: the loader unpacks the builder's constant
    shape = (vals.size,) if vals.size % 3 else (vals.size // 3, 3)
    b = ModelBuilder()
    c = b.add_constant("c", vals.reshape(shape), dtype=type_name)
    b.mark_outputs(c)
    t = load_model(b.build()).main.tensors[0]
    assert t.type_name == type_name and t.dtype == HELD[type_name] and t.shape == shape
    np.testing.assert_array_equal(t.data, vals.reshape(shape))


def model_with_buffer(type_name: str, shape, raw: bytes, quant=None) -> bytes:
    b = ModelBuilder()
    c = b.add_constant("weights", np.zeros(shape, HELD[type_name]), quant, dtype=type_name)
    b.buffers[b.tensors[c].buffer] = raw
    b.mark_outputs(c)
    return b.build()


@pytest.mark.parametrize("type_name", PACKED)
def test_loader_refuses_a_packed_buffer_of_the_wrong_size(type_name):
    code = dtypes.TYPE_CODES[type_name]
    need = dtypes.packed_size(code, 10)  # 3 bytes of INT2, 5 of INT4/UINT4
    load_model(model_with_buffer(type_name, (2, 5), b"\x01" * need))
    for size in (need - 1, need + 1, 10):
        if size == need:
            continue
        with pytest.raises(ModelError, match=rf"tensor 0 \('weights'\).*{size} bytes.*{type_name}.*packs into {need}"):
            load_model(model_with_buffer(type_name, (2, 5), b"\x01" * size))


@pytest.mark.parametrize("type_name,zp", [("INT2", 2), ("INT2", -3), ("UINT4", 16), ("UINT4", -1)])
def test_loader_refuses_zero_points_outside_the_type(type_name, zp):
    with pytest.raises(ModelError, match=f"zero point {zp} is outside {type_name}"):
        load_model(model_with_buffer(type_name, (4,), b"\x00" * dtypes.packed_size(dtypes.TYPE_CODES[type_name], 4),
                                     (0.5, zp)))


def test_loader_refuses_sparse_packed_constants():
    b = ModelBuilder()
    sp = {"traversal_order": [0], "dim_metadata": [(0, 4, None, None)]}
    c = b.add_constant("w", np.zeros(4, np.int8), dtype="INT2", sparsity=sp)
    b.mark_outputs(c)
    with pytest.raises(ModelError, match="sparse INT2"):
        load_model(b.build())


@pytest.mark.parametrize("details,what", [(2, "blockwise"), (3, "multi-axis")])
def test_loader_refuses_quantization_it_cannot_read(details, what):
    """Blockwise (INT2/INT4 tables) and multi-axis quantization: refused by name, never read
    as unquantized values."""
    b = ModelBuilder()
    c = b.add_constant("w", np.zeros((2, 4), np.int8), quant=(0.5, 0, 0, details), dtype="INT4")
    b.mark_outputs(c)
    with pytest.raises(ModelError, match=f"tensor 0: {what}.*not supported"):
        load_model(b.build())


@pytest.mark.parametrize("type_name,bad", [("INT2", 2), ("INT2", -3), ("UINT4", 16), ("UINT4", -1), ("INT4", 8)])
def test_builder_refuses_values_the_type_cannot_hold(type_name, bad):
    with pytest.raises(ValueError, match=rf"outside \[{RANGE[type_name][0]}, {RANGE[type_name][1]}\]"):
        ModelBuilder().add_constant("c", np.array([0, bad]), dtype=type_name)
    with pytest.raises(ValueError, match="integer values"):
        ModelBuilder().add_constant("c", np.array([0.5]), dtype=type_name)


# --- CAST ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("type_name", ["INT2", "UINT4"])
def test_cast_packed_to_float32(type_name):
    rng = rng_of(1)
    for shape in [(7,), (3, 5), (2, 2, 4)]:
        x = values(type_name, shape, rng)
        got = exact(const_model("CAST", x, type_name, shape, np.float32, version=8), [])
        np.testing.assert_array_equal(got[0], x.astype(np.float32))
    x = values("UINT4", (3, 5), rng)  # UINT4 also crosses LiteRT's API as a graph input
    m = single_op_model("CAST", [In(x.shape, "UINT4")], [Out(x.shape, np.float32)], version=8)
    np.testing.assert_array_equal(exact(m, [x])[0], x.astype(np.float32))


SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.0, -1.0, 1.5, -1.5,
                    -2.0, -2.5, 2.0, 7.9, 8.0, 14.99, 15.0, 15.5, 16.0, -8.0, -8.5, 1e30, -1e30, 3.4e38], np.float32)


@pytest.mark.parametrize("type_name", PACKED)
def test_cast_float32_to_packed(type_name):
    rng = rng_of(2)
    x = np.concatenate([SPECIAL, rng.uniform(-20, 20, 37).astype(np.float32)])
    m = single_op_model("CAST", [In(x.shape, np.float32)], [Out(x.shape, type_name)], version=8)
    got = exact(m, [x])[0]
    lo, hi = RANGE[type_name]
    want = np.trunc(np.where(np.isnan(x), hi, np.clip(x, lo, hi))).astype(HELD[type_name])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("type_name", ["INT2", "UINT4"])
@pytest.mark.parametrize("f8", F8)
def test_cast_between_packed_and_float8(type_name, f8):
    """Only LiteRT's TFLITE_ENABLE_EXTRA_REFERENCE_KERNELS build has these: numpy/ml_dtypes."""
    lo, hi = RANGE[type_name]
    x = np.arange(lo, hi + 1).astype(HELD[type_name])
    m = const_model("CAST", x, type_name, x.shape, f8, version=9)
    assert litert_fails(m, [], run=litert)
    acelera_only(m, [], [x.astype(np.float32).astype(ML_F8[f8]).view(np.uint8)])
    codes = np.arange(256, dtype=np.uint8)
    m = single_op_model("CAST", [In(codes.shape, f8)], [Out(codes.shape, type_name)], version=9)
    assert litert_fails(m, [codes], run=litert)
    wide = codes.view(ML_F8[f8]).astype(np.float32)
    acelera_only(m, [codes], [np.trunc(np.where(np.isnan(wide), hi, np.clip(wide, lo, hi))).astype(HELD[type_name])])


@pytest.mark.parametrize("src,dst", [("INT2", np.int32), ("UINT4", np.uint8), ("INT2", "INT2"), ("UINT4", "INT4"),
                                     ("UINT4", np.float16)])
def test_cast_packed_refuses_other_destinations(src, dst):
    x = values(src, (4,), rng_of(3))
    m = const_model("CAST", x, src, x.shape, dst, version=8)
    assert litert_fails(m, [], run=litert)
    assert "can only be cast to FLOAT32 or FLOAT8" in str(allocate_error(m, UnsupportedOpError))


@pytest.mark.parametrize("src,dst", [(np.int32, "INT2"), (np.float16, "UINT4"), (np.uint8, "UINT4")])
def test_cast_to_packed_refuses_other_sources(src, dst):
    m = single_op_model("CAST", [In((4,), src)], [Out((4,), dst)], version=8)
    assert litert_fails(m, [np.zeros(4, src)], run=litert)
    assert "can be cast to" in str(allocate_error(m, UnsupportedOpError))


# --- DEQUANTIZE / QUANTIZE -----------------------------------------------------------------------

DEQUANTIZE_VERSION = {"INT2": 7, "UINT4": 8}


@SETTINGS
@given(data=st.data(), type_name=st.sampled_from(["INT2", "UINT4"]), per_channel=st.booleans())
def test_dequantize_packed(data, type_name, per_channel):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple))
    rng = rng_of(data.draw(st.integers(0, 2**31)))
    x = values(type_name, shape, rng)
    lo, hi = RANGE[type_name]
    if per_channel:
        axis = data.draw(st.integers(0, len(shape) - 1))
        n = shape[axis]
        scale = rng.uniform(1e-3, 3, n).astype(np.float32)
        zp = rng.integers(lo, hi + 1, n)
        quant = (scale, zp, axis)
        bshape = [1] * len(shape)
        bshape[axis] = n
        zpb = zp.reshape(bshape)
        want = ((x.astype(np.float32) - zpb.astype(np.float32)) * scale.reshape(bshape)).astype(np.float32)
    else:
        scale, zp = float(np.float32(rng.uniform(1e-3, 3))), int(rng.integers(lo, hi + 1))
        quant = (scale, zp)
        want = (np.float64(np.float32(scale)) * (x.astype(np.float64) - zp)).astype(np.float32)
    m = const_model("DEQUANTIZE", x, type_name, shape, np.float32, quant=quant, version=DEQUANTIZE_VERSION[type_name])
    got = exact(m, [])[0]
    np.testing.assert_array_equal(got, want)


def test_dequantize_uint4_graph_input():
    x = values("UINT4", (4, 6), rng_of(4))
    m = single_op_model("DEQUANTIZE", [In(x.shape, "UINT4", (0.37, 9))], [Out(x.shape, np.float32)], version=8)
    exact(m, [x])


@pytest.mark.parametrize("bad", [16, 20, 255])
def test_set_tensor_refuses_uint4_values_out_of_range(bad):
    """LiteRT: "Values for UINT4 input must be between 0 and 15"; acelera the same, by name."""
    m = single_op_model("DEQUANTIZE", [In((2,), "UINT4", (0.5, 0))], [Out((2,), np.float32)], version=8)
    x = np.array([3, bad], np.uint8)
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    theirs = LiteRT(model_content=m)
    theirs.allocate_tensors()
    with pytest.raises(ValueError, match="between 0 and 15"):
        theirs.set_tensor(theirs.get_input_details()[0]["index"], x)
    ours = Interpreter(model_content=m)
    ours.allocate_tensors()
    with pytest.raises(ValueError, match="UINT4 input must be between 0 and 15"):
        ours.set_tensor(ours.get_input_details()[0]["index"], x)
    ours.set_tensor(ours.get_input_details()[0]["index"], np.array([0, 15], np.uint8))


@pytest.mark.parametrize("type_name,zp", [("INT4", 0), ("INT4", -3), ("INT4", 5), ("UINT4", 0), ("UINT4", 1),
                                          ("UINT4", 9)])
def test_quantize_float32_to_4bit(type_name, zp):
    """Out-of-range and NaN inputs included (LiteRT's int32 conversion of them, then the clamp)."""
    lo, hi = RANGE[type_name]
    rng = rng_of(5)
    x = np.concatenate([SPECIAL, rng.uniform(-9, 9, 40).astype(np.float32), np.float32([0.25, 0.75, -0.25, 1.25])])
    version = 4 if type_name == "INT4" else 5
    m = single_op_model("QUANTIZE", [In(x.shape, np.float32)], [Out(x.shape, type_name, (0.5, zp))], version=version)
    got = exact(m, [x])[0]
    finite = np.abs(x) < 2**30
    r = np.trunc(x[finite] / np.float32(0.5) + np.copysign(np.float32(0.5), x[finite]))  # round half away
    np.testing.assert_array_equal(got[finite], np.clip(r + zp, lo, hi).astype(HELD[type_name]))


@pytest.mark.parametrize("type_name", ["INT4", "UINT4"])
def test_quantize_to_4bit_refuses_per_channel_and_quantized_inputs(type_name):
    version = 4 if type_name == "INT4" else 5
    m = single_op_model("QUANTIZE", [In((2, 3), np.float32)],
                        [Out((2, 3), type_name, (np.array([0.5, 0.25], np.float32), np.zeros(2, np.int64), 0))],
                        version=version)
    assert litert_fails(m, [np.zeros((2, 3), np.float32)], run=litert)
    assert "per-channel" in str(allocate_error(m, UnsupportedOpError))
    m = single_op_model("QUANTIZE", [In((3,), np.int8, (0.5, 0))], [Out((3,), type_name, (0.5, 0))], version=version)
    assert litert_fails(m, [np.zeros(3, np.int8)], run=litert)
    allocate_error(m, UnsupportedOpError)


def test_dequantize_refuses_per_channel_mismatch():
    x = values("INT2", (2, 3), rng_of(6))
    m = const_model("DEQUANTIZE", x, "INT2", x.shape, np.float32,
                    quant=(np.array([0.5, 0.25, 1.0], np.float32), np.zeros(3, np.int64), 0), version=7)
    with pytest.raises(ModelError, match="per-channel quantization with 3 scales"):
        Interpreter(model_content=m)


# --- TRANSPOSE and the ops that ignore the type ---------------------------------------------------

@SETTINGS
@given(data=st.data())
def test_transpose_uint4(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=5).map(tuple))
    perm = data.draw(st.permutations(range(len(shape))))
    perm = [p - len(shape) if data.draw(st.booleans()) else p for p in perm]
    x = values("UINT4", shape, rng_of(data.draw(st.integers(0, 2**31))))
    out_shape = tuple(shape[p] for p in perm)
    # TRANSPOSE 9 (float16) is not in BUILTIN_REF: 7 is the int4 version
    m = single_op_model("TRANSPOSE", [In(shape, "UINT4"), Const(np.array(perm, np.int32))],
                        [Out(out_shape, "UINT4")], version=7)
    got = exact(m, [x])[0]
    np.testing.assert_array_equal(got, x.transpose(perm))


def test_transpose_refuses_int2():
    x = values("INT2", (2, 4), rng_of(7))
    m = const_model("TRANSPOSE", x, "INT2", (4, 2), "INT2", extra=[Const(np.array([1, 0], np.int32))], version=7)
    assert litert_fails(m, [], run=litert)
    assert "INT2" in str(allocate_error(m, UnsupportedOpError))


def shape_models(type_name: str, x_spec, shape):
    """RESHAPE, SQUEEZE, EXPAND_DIMS, SHAPE and RANK of one input (`shape` is (1, a, b))."""
    flat = (int(np.prod(shape)),)
    return [
        single_op_model("RESHAPE", [x_spec, Const(np.array([-1], np.int32))], [Out(flat, type_name)]),
        single_op_model("RESHAPE", [x_spec], [Out(flat, type_name)], new_shape=[flat[0]]),
        single_op_model("SQUEEZE", [x_spec], [Out(shape[1:], type_name)], squeeze_dims=[0]),
        single_op_model("EXPAND_DIMS", [x_spec, Const(np.array([-1], np.int32))], [Out(shape + (1,), type_name)]),
        single_op_model("SHAPE", [x_spec], [Out((3,), np.int32)], out_type="INT32"),
        single_op_model("RANK", [x_spec], [Out((), np.int32)]),
    ]


@pytest.mark.parametrize("type_name", ["INT2", "UINT4"])
def test_shape_ops_carry_packed_values(type_name):
    shape = (1, 3, 5)
    x = values(type_name, shape, rng_of(8))
    # INT2 only as a constant (LiteRT's API takes no INT2 input), UINT4 both ways
    specs = [(Const(x, dtype=type_name), [])] + ([(In(shape, type_name), [x])] if type_name == "UINT4" else [])
    for spec, ins in specs:
        reshaped, from_option, squeezed, expanded, dims, rank = (exact(m, ins)[0]
                                                                 for m in shape_models(type_name, spec, shape))
        np.testing.assert_array_equal(reshaped, x.reshape(-1))
        np.testing.assert_array_equal(from_option, x.reshape(-1))
        np.testing.assert_array_equal(squeezed, x[0])
        np.testing.assert_array_equal(expanded, x[..., None])
        assert dims.tolist() == list(shape) and int(rank) == 3


def while_identity_model(type_name: str, x: np.ndarray) -> bytes:
    """while i < 3: i += 1 (a packed constant rides along unchanged); outputs i and the values
    through CAST to float32."""
    b = ModelBuilder()
    i = b.add_input("i", (), np.int32)
    c = b.add_constant("c", x, dtype=type_name)
    outs = [b.add_tensor("oi", (), np.int32), b.add_tensor("oc", x.shape, type_name)]
    cond, body = b.add_subgraph("cond"), b.add_subgraph("body")
    b.add_operator("WHILE", [i, c], outs, cond_subgraph_index=cond.index, body_subgraph_index=body.index)
    f = b.add_tensor("f", x.shape, np.float32)
    b.add_operator("CAST", [outs[1]], [f], version=8)
    b.mark_outputs(outs[0], outs[1], f)
    ci = [cond.add_input("ci", (), np.int32), cond.add_input("cc", x.shape, type_name)]
    three = cond.add_constant("three", np.array(3, np.int32))
    less = cond.add_tensor("less", (), np.bool_)
    cond.add_operator("LESS", [ci[0], three], [less])
    cond.mark_outputs(less)
    bi = [body.add_input("bi", (), np.int32), body.add_input("bc", x.shape, type_name)]
    one = body.add_constant("one", np.array(1, np.int32))
    i2 = body.add_tensor("i2", (), np.int32)
    body.add_operator("ADD", [bi[0], one], [i2])
    body.mark_outputs(i2, bi[1])
    return b.build()


@pytest.mark.parametrize("type_name", ["INT2", "UINT4"])
def test_while_carries_packed_values(type_name):
    x = values(type_name, (2, 5), rng_of(9))
    got = exact(while_identity_model(type_name, x), [np.array(0, np.int32)])
    assert int(got[0]) == 3
    np.testing.assert_array_equal(got[1], x)
    np.testing.assert_array_equal(got[2], x.astype(np.float32))


@pytest.mark.parametrize("type_name", ["INT2", "UINT4"])
def test_stablehlo_composite_carries_packed_values(type_name):
    x = values(type_name, (2, 3), rng_of(10))
    b = ModelBuilder()
    c = b.add_constant("c", x, dtype=type_name)
    z = b.add_tensor("z", (6,), type_name)
    dec = b.add_subgraph("decomposition")
    b.add_operator("STABLEHLO_COMPOSITE", [c], [z], name="my.flatten", decomposition_subgraph_index=dec.index,
                   composite_attributes=flexbuffers.Dumps({}))
    b.mark_outputs(z)
    dx = dec.add_input("x", (2, 3), type_name)
    o = dec.add_tensor("o", (6,), type_name)
    dec.add_operator("RESHAPE", [dx], [o], new_shape=[6])
    dec.mark_outputs(o)
    got = exact(b.build(), [], reference="builtin")  # BUILTIN_REF has no STABLEHLO_COMPOSITE
    np.testing.assert_array_equal(got[0], x.reshape(-1))


@pytest.mark.parametrize("op,type_name", [("ADD", "INT2"), ("MUL", "UINT4"), ("RELU", "INT2"), ("TANH", "UINT4"),
                                          ("SUM", "INT2"), ("EQUAL", "UINT4"), ("MAXIMUM", "INT2")])
def test_packed_types_do_not_pass_for_int8_or_uint8(op, type_name):
    """INT2 (held as int8) and UINT4 (held as uint8) are refused where LiteRT's kernel refuses
    them, not taken for INT8/UINT8."""
    q = (0.5, 0)
    x = In((2, 2), type_name, q)
    if op == "SUM":
        m = single_op_model(op, [x, Const(np.array([0], np.int32))], [Out((2,), type_name, q)])
    elif op in ("RELU", "TANH"):
        m = single_op_model(op, [x], [Out((2, 2), type_name, q)])
    else:
        out = Out((2, 2), np.bool_) if op == "EQUAL" else Out((2, 2), type_name, q)
        m = single_op_model(op, [x, x], [out])
    if type_name == "UINT4":
        assert litert_fails(m, [np.zeros((2, 2), np.uint8)] * 2, run=litert)
    allocate_error(m, UnsupportedOpError)


@pytest.mark.parametrize("op", ["TILE", "RESIZE_NEAREST_NEIGHBOR", "SPACE_TO_BATCH_ND", "SELECT_V2", "PRELU"])
@pytest.mark.parametrize("type_name", ["INT2", "UINT4"])
def test_data_movement_refuses_packed_types(op, type_name):
    """Ops that move any 8/16/32-bit element refuse the packed types as LiteRT does (checked
    against LiteRT for UINT4, which its Python API accepts as an input)."""
    x = In((1, 2, 2, 1), type_name)
    if op == "TILE":
        m = single_op_model(op, [x, Const(np.array([1, 2, 1, 1], np.int32))], [Out((1, 4, 2, 1), type_name)])
    elif op == "RESIZE_NEAREST_NEIGHBOR":
        m = single_op_model(op, [x, Const(np.array([4, 4], np.int32))], [Out((1, 4, 4, 1), type_name)])
    elif op == "SPACE_TO_BATCH_ND":
        m = single_op_model(op, [x, Const(np.array([1, 1], np.int32)), Const(np.zeros((2, 2), np.int32))],
                            [Out((1, 2, 2, 1), type_name)])
    elif op == "SELECT_V2":
        m = single_op_model(op, [In((1, 2, 2, 1), np.bool_), x, x], [Out((1, 2, 2, 1), type_name)])
    else:
        m = single_op_model(op, [x, Const(np.zeros((1, 1, 1), np.int8), dtype=type_name)],
                            [Out((1, 2, 2, 1), type_name)])
    allocate_error(m, UnsupportedOpError)


# --- EMBEDDING_LOOKUP ----------------------------------------------------------------------------

def lookup_model(table: np.ndarray, type_name: str, quant, out_dtype, n_ids: int, version: int = 5) -> bytes:
    return single_op_model("EMBEDDING_LOOKUP", [In((n_ids,), np.int32), Const(table, quant, dtype=type_name)],
                           [Out((n_ids,) + table.shape[1:], out_dtype)], version=version)


def hybrid_want(table: np.ndarray, ids: np.ndarray, scale, out_dtype, shift: int) -> np.ndarray:
    """LiteRT's Unpack2Bit/Unpack4Bit: (v * shift) as float times float32(scale / shift)."""
    s = np.asarray(scale, np.float32) / np.float32(shift)
    s = s[ids].reshape((-1,) + (1,) * (table.ndim - 1)) if s.size > 1 else s.reshape(())
    return ((table[ids].astype(np.float32) * np.float32(shift)) * s).astype(out_dtype)


@pytest.mark.parametrize("out_dtype", [np.float32, np.float16])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("cols", [(8,), (4,), (2, 6)])
def test_embedding_lookup_int2_hybrid(out_dtype, per_channel, cols):
    rng = rng_of(11)
    rows = 5
    table = values("INT2", (rows,) + cols, rng)
    if per_channel:
        scale = rng.uniform(1e-3, 4, rows).astype(np.float32)
        quant = (scale, np.zeros(rows, np.int64), 0)
    else:
        scale = np.float32(0.37)
        quant = (float(scale), 0)
    ids = np.array([4, 0, 2, 2, 1, 3], np.int32)
    got = exact(lookup_model(table, "INT2", quant, out_dtype, ids.size), [ids])[0]
    np.testing.assert_array_equal(got, hybrid_want(table, ids, scale, out_dtype, 64))
    np.testing.assert_allclose(got.astype(np.float64), table[ids] * (scale[ids].reshape(-1, *[1] * len(cols))
                                                                     if per_channel else scale), rtol=1e-3)


def test_embedding_lookup_int2_rows_off_byte_boundaries():
    """With 5 INT2 values per row LiteRT starts row r at byte 5r // 4 (reading the wrong bits for
    rows not starting on a byte boundary); acelera dequantizes each row's own values."""
    table = values("INT2", (8, 5), rng_of(12))
    ids = np.array([0, 1, 2, 3, 4, 5, 6, 7, 4, 0], np.int32)
    m = lookup_model(table, "INT2", (0.5, 0), np.float32, ids.size)
    got = acelera_only(m, [ids], [table[ids].astype(np.float32) * np.float32(0.5)])[0]
    want = litert(m, [ids])[0]
    aligned = ids % 4 == 0  # 5 * id divisible by 4
    np.testing.assert_array_equal(got[aligned], want[aligned])


@pytest.mark.parametrize("type_name", PACKED)
def test_embedding_lookup_same_type_packed(type_name):
    cols = {"INT2": (8,), "INT4": (2, 3), "UINT4": (6,)}[type_name]
    table = values(type_name, (4,) + cols, rng_of(13))
    ids = np.array([3, 1, 1, 0, 2], np.int32)
    got = exact(lookup_model(table, type_name, None, type_name, ids.size), [ids])[0]
    np.testing.assert_array_equal(got, table[ids])


def test_embedding_lookup_same_type_packed_rows_off_byte_boundaries():
    table = values("INT2", (4, 3), rng_of(14))
    ids = np.array([3, 1, 0], np.int32)
    acelera_only(lookup_model(table, "INT2", None, "INT2", ids.size), [ids], [table[ids]])


@pytest.mark.parametrize("f8", F8)
def test_embedding_lookup_float8(f8):
    rng = rng_of(15)
    table = rng.integers(0, 256, (5, 2, 3), dtype=np.uint8)
    ids = np.array([4, 0, 3, 3], np.int32)
    for spec, ins in ((Const(table, dtype=np.uint8), [ids]), (In(table.shape, f8), [ids, table])):
        if isinstance(spec, Const):
            b = ModelBuilder()
            i = b.add_input("ids", ids.shape, np.int32)
            t = b.add_constant("table", table)
            b.tensors[t].type = dtypes.TYPE_CODES[f8]
            o = b.add_tensor("out", (4, 2, 3), f8)
            b.add_operator("EMBEDDING_LOOKUP", [i, t], [o], version=5)
            b.mark_outputs(o)
            m = b.build()
        else:
            m = single_op_model("EMBEDDING_LOOKUP", [In(ids.shape, np.int32), spec], [Out((4, 2, 3), f8)], version=5)
        got = exact(m, ins)[0]
        np.testing.assert_array_equal(got, table[ids])


@pytest.mark.parametrize("case", ["int2_zero_point", "uint4_hybrid", "float8_hybrid", "int2_to_int8",
                                  "int2_per_channel_axis"])
def test_embedding_lookup_refusals(case):
    table = values("INT2", (4, 4), rng_of(16))
    if case == "int2_zero_point":
        m = lookup_model(table, "INT2", (0.5, 1), np.float32, 2)
    elif case == "uint4_hybrid":
        m = lookup_model(values("UINT4", (4, 4), rng_of(16)), "UINT4", (0.5, 0), np.float32, 2)
    elif case == "float8_hybrid":
        m = single_op_model("EMBEDDING_LOOKUP", [In((2,), np.int32), In((4, 4), "FLOAT8_E4M3FN", (0.5, 0))],
                            [Out((2, 4), np.float32)], version=5)
    elif case == "int2_to_int8":
        m = lookup_model(table, "INT2", None, np.int8, 2)
    else:
        m = lookup_model(values("INT2", (4, 4), rng_of(16)), "INT2",
                         (np.ones(4, np.float32), np.zeros(4, np.int64), 1), np.float32, 2)
    allocate_error(m, UnsupportedOpError)
    if case in ("int2_zero_point", "int2_per_channel_axis"):
        assert litert_fails(m, [np.zeros(2, np.int32)], run=litert)


@pytest.mark.parametrize("bad", [4, -1])
def test_embedding_lookup_int2_bad_index_fails_at_invoke(bad):
    m = lookup_model(values("INT2", (4, 4), rng_of(17)), "INT2", (0.5, 0), np.float32, 2)
    ins = [np.array([0, bad], np.int32)]
    assert litert_fails(m, ins, run=litert)
    assert "out of bounds" in str(invoke_error(m, ins))


# --- HASHTABLE_LOOKUP / LSH_PROJECTION of FLOAT8 -------------------------------------------------

@pytest.mark.parametrize("f8", F8)
def test_hashtable_lookup_float8(f8):
    rng = rng_of(18)
    keys = np.array([-5, 2, 7, 11, 40], np.int32)
    vals = rng.integers(0, 256, (5, 3), dtype=np.uint8)
    look = np.array([7, 3, -5, 40, 41, 2], np.int32)
    m = single_op_model("HASHTABLE_LOOKUP", [In(look.shape, np.int32), In(keys.shape, np.int32), In(vals.shape, f8)],
                        [Out((6, 3), f8), Out((6,), np.uint8)])
    out, hits = exact(m, [look, keys, vals])
    assert hits.tolist() == [1, 0, 1, 1, 0, 1]
    np.testing.assert_array_equal(out[[0, 2, 3, 5]], vals[[2, 0, 4, 1]])
    assert not out[[1, 4]].any()


@pytest.mark.parametrize("f8", F8)
@pytest.mark.parametrize("kind,weighted", [(1, False), (2, False), (2, True), (1, True)])
def test_lsh_projection_float8(f8, kind, weighted):
    rng = rng_of(19)
    seeds = rng.standard_normal((4, 3)).astype(np.float32)
    x = rng.integers(0, 256, (6, 2), dtype=np.uint8)
    ins = [In(seeds.shape, np.float32), In(x.shape, f8)]
    vals = [seeds, x]
    if weighted:
        ins.append(In((6,), np.float32))
        vals.append(rng.standard_normal(6).astype(np.float32))
    out = (4,) if kind == 1 else (12,)
    m = single_op_model("LSH_PROJECTION", ins, [Out(out, np.int32)], type=kind)
    exact(m, vals)


# --- coverage ------------------------------------------------------------------------------------

def test_coverage_has_no_partial_rows():
    rows = {r.op: r for r in L.coverage()}
    for op in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "SHAPE", "RANK", "WHILE", "STABLEHLO_COMPOSITE", "CAST",
               "DEQUANTIZE", "TRANSPOSE", "EMBEDDING_LOOKUP", "LSH_PROJECTION", "HASHTABLE_LOOKUP"):
        assert rows[op].status == L.SUPPORTED, rows[op]
    assert {"INT2", "UINT4"} <= set(rows["CAST"].acelera_dtypes) and "INT2" in rows["EMBEDDING_LOOKUP"].acelera_dtypes
    s = L.summary(list(rows.values()))
    assert s[L.PARTIAL] == 0 and s[L.MISSING] == 0 and s["pairs_supported"] == s["pairs"]
