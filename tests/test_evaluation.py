"""Task-based evaluation: image classification top-K and object detection COCO mAP, on data and
models the tests make (Pillow images, label files, ModelBuilder graphs); nothing is downloaded."""
import importlib.util
import json
import types

import flatbuffers
import numpy as np
import pytest
from cli_flags import parse_cli
from flatbuffers import flexbuffers
from needs import require_module
from oracle import run_litert

from acelera.core.builder import In, ModelBuilder, Out, single_op_model
from acelera.core.delegate import Delegate, OpSupport, OpTable, Support
from acelera.core.interpreter import Interpreter
from acelera.core.subplan import ReferenceKernel
from acelera.evaluation import EVAL_IC_FLAGS, EVAL_OD_FLAGS, EvaluationError, run_image_classification, run_object_detection
from acelera.evaluation.common import progress
from acelera.evaluation.detection import encode_ground_truth_proto, load_ground_truth_proto
from acelera.evaluation.images import InputSpec, central_crop, normalization_from_metadata, resize_bilinear
from acelera.evaluation.metrics import ImageTruth, TopKAccuracy
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag, FlagSet
from acelera.registrar.registry import Registry
from acelera.registrar.spec import DelegateSpec

Image = require_module("PIL.Image", "pillow (the test extra) is not installed")
needs_coco = pytest.mark.requires(importlib.util.find_spec("pycocotools") is not None,
                                  "mAP needs pycocotools (the test and eval extras)")

RED, GREEN, BLUE, BLACK, GRAY = (255, 0, 0), (0, 255, 0), (0, 0, 255), (0, 0, 0), (128, 128, 128)


# --- a classifier whose output is a known function of the image ------------------------------
# scores = W . mean(normalized RGB) + b over 12 classes: red, green, blue follow their channel,
# "dark" wins for black images, the 8 "other" classes are far behind (bias -10).
LABELS = ["red", "green", "blue", "dark"] + [f"other{i}" for i in range(8)]


def classifier_weights():
    w = np.zeros((12, 3), np.float32)
    w[0, 0] = w[1, 1] = w[2, 2] = 1.0
    w[3] = -1.0 / 3
    b = np.full(12, -10.0, np.float32)
    b[:3] = 0.0
    b[3] = -0.5
    return w, b


def classifier(input_dtype=np.float32, metadata: bytes | None = None) -> bytes:
    b = ModelBuilder()
    if input_dtype == np.float32:
        x = b.add_input("image", (1, 8, 8, 3), np.float32)
    else:  # real = (q - zp) / 128 ~ [-1, 1] for the pixel codes TFLite feeds quantized inputs
        zp = 128 if input_dtype == np.uint8 else 0
        q = b.add_input("image", (1, 8, 8, 3), input_dtype, (1 / 128, zp))
        x = b.add_tensor("image_f", (1, 8, 8, 3), np.float32)
        b.add_operator("DEQUANTIZE", [q], [x])
    axes = b.add_constant("axes", np.array([1, 2], np.int32))
    m = b.add_tensor("mean", (1, 3), np.float32)
    b.add_operator("MEAN", [x, axes], [m], keep_dims=False)
    w, bias = classifier_weights()
    wt, bt = b.add_constant("w", w), b.add_constant("b", bias)
    y = b.add_tensor("scores", (1, 12), np.float32)
    b.add_operator("FULLY_CONNECTED", [m, wt, bt], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    if metadata is not None:
        b.add_metadata("TFLITE_METADATA", metadata)
    return b.build()


def write_image(path, size, color, fmt=None):
    w, h = size
    Image.new("RGB", (w, h), color).save(path, fmt)
    return path


# (file, colour, ground truth): the model predicts the colour's class; 4 of 6 labels are right,
# one right label is 2nd ("dark" for red: scores red 1, dark -1/6, green -1, blue -1), one 3rd.
IC_DATA = [("a.png", RED, "red"), ("b.png", GREEN, "green"), ("c.jpg", BLUE, "blue"), ("d.png", BLACK, "dark"),
           ("e.png", RED, "dark"), ("f.png", RED, "green")]
IC_EXPECTED = ["0.666667", "0.833333", "1", "1", "1", "1", "1", "1", "1", "1"]


@pytest.fixture
def ic_data(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    for k, (name, color, _) in enumerate(IC_DATA):
        write_image(images / name, (20 + 4 * k, 12 + 2 * k), color, "JPEG" if name.endswith(".jpg") else None)
    gt = tmp_path / "gt.txt"
    gt.write_text("".join(f"{t}\n" for _, _, t in IC_DATA))
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(LABELS) + "\n")
    model = tmp_path / "clf.tflite"
    model.write_bytes(classifier())
    return types.SimpleNamespace(dir=tmp_path, images=images, gt=gt, labels=labels, model=model)


# --- a test delegate and registry ------------------------------------------------------------
class SwapKernel(ReferenceKernel):
    """Runs FULLY_CONNECTED on the reference kernels, then swaps classes 0 and 1 (red, green)."""

    def invoke(self, *inputs):
        (out,) = super().invoke(*inputs)
        out = out.copy()
        out[..., [0, 1]] = out[..., [1, 0]]
        return (out,)


class SwapDelegate(Delegate):
    backend = "emulated"
    name = "swap"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.op_table = OpTable.of([OpSupport("FULLY_CONNECTED", 12, frozenset({"FLOAT32"}))], self.name)

    def prepare(self, partition):
        return SwapKernel(partition)


class EP:
    def __init__(self, name, obj):
        self.name, self._obj = name, obj
        self.dist = types.SimpleNamespace(name="fake", version="1")

    def load(self):
        return self._obj


def swap_registry() -> Registry:
    spec = DelegateSpec("swap", "test", "1", (Flag("use_swap", bool, False, "", "swap"),), ("use_swap",),
                        OpTable.of([OpSupport("FULLY_CONNECTED", 12)], "swap"), frozenset({"float32"}), "emulated",
                        lambda: Support(True), lambda options: SwapDelegate())

    @hookimpl
    def register_delegates(register):
        register(spec)
    return Registry([EP("swap", types.SimpleNamespace(__name__="swap", register_delegates=register_delegates))])


def parse(reg, table, argv):
    own = [Flag(n, t, d, h, "eval") for n, t, d, h in table]
    return parse_cli(FlagSet(list(reg.flagset.flags.values()) + own), argv)


def ic_argv(d, *extra):
    return [f"--model_file={d.model}", f"--ground_truth_images_path={d.images}", f"--ground_truth_labels={d.gt}",
            f"--model_output_labels={d.labels}", *extra]


def run_ic(argv, reg=None):
    reg = reg or Registry([])
    lines = []
    assert run_image_classification(reg, parse(reg, EVAL_IC_FLAGS, argv), log=lines.append) == 0
    return lines


def top_k_lines(lines):
    return [ln.split(": ", 1)[1] for ln in lines if ln.startswith("Top-") and " Accuracy: " in ln]


# --- flags -----------------------------------------------------------------------------------
def test_flag_tables():
    ic = {n: (t, d) for n, t, d, _ in EVAL_IC_FLAGS}
    od = {n: (t, d) for n, t, d, _ in EVAL_OD_FLAGS}
    for table in (ic, od):
        assert table["model_file"] == (str, "") and table["ground_truth_images_path"] == (str, "")
        assert table["model_output_labels"] == (str, "") and table["output_file_path"] == (str, "")
        assert table["num_images"] == (int, 0) and table["compare_to_reference"] == (bool, False)
        assert table["num_interpreter_threads"] == (int, 1) and table["delegate"] == (str, "")
    assert ic["ground_truth_labels"] == (str, "") and ic["denylist_file_path"] == (str, "")
    assert od["ground_truth_proto"] == (str, "") and od["ground_truth_json"] == (str, "")
    assert od["debug_mode"] == (bool, False) and od["class_offset"] == (int, 1)
    # flags both tools share with inference_diff keep one spec (one CLI normalizer)
    from acelera.conformance.inference_diff import INFERENCE_DIFF_FLAGS

    for n, t, d, _ in INFERENCE_DIFF_FLAGS:
        for table in (ic, od):
            assert table.get(n, (t, d)) == (t, d)


# --- image classification --------------------------------------------------------------------
def test_image_classification(ic_data):
    out = ic_data.dir / "m.json"
    lines = run_ic(ic_argv(ic_data, f"--output_file_path={out}"))
    assert lines[0] == "Num evaluation runs: 6"
    assert lines[1].startswith("Preprocessing latency: avg=") and lines[2].startswith("Inference latency: avg=")
    assert lines[3:13] == [f"Top-{k + 1} Accuracy: {v}" for k, v in enumerate(IC_EXPECTED)]
    assert "Input normalization: (pixel - 127.5) / 127.5 (TFLite's default, range [-1, 1])" in lines
    assert "No delegate applied: all 2 node(s) run on the CPU" in lines
    j = json.loads(out.read_text())
    acc = j["process_metrics"]["image_classification_metrics"]["topk_accuracy_metrics"]["topk_accuracies"]
    assert acc[:2] == pytest.approx([4 / 6, 5 / 6]) and j["num_runs"] == 6
    assert [p["top1"] for p in j["predictions"]] == ["red", "green", "blue", "dark", "red", "red"]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_quantized_input(ic_data, dtype):
    ic_data.model.write_bytes(classifier(dtype))
    lines = run_ic(ic_argv(ic_data))
    assert top_k_lines(lines) == IC_EXPECTED
    assert f"Input normalization: {'pixel codes as they are' if dtype == np.uint8 else 'pixel - 128'}" in lines


def test_num_images_and_denylist(ic_data):
    deny = ic_data.dir / "deny.txt"
    deny.write_text("2\n5\n")  # drops b (right) and e (2nd)
    lines = run_ic(ic_argv(ic_data, f"--denylist_file_path={deny}", "--num_images=3"))
    assert lines[0] == "Num evaluation runs: 3"  # a, c, d: all right
    assert top_k_lines(lines)[:2] == ["1", "1"]


def test_delegate_and_compare_to_reference(ic_data):
    """A delegate that swaps red and green: red images become green, green ones red."""
    reg = swap_registry()
    lines = run_ic(ic_argv(ic_data, "--delegate=swap", "--compare_to_reference"), reg)
    assert lines[3].startswith("Reference inference latency: avg=")
    tops = [ln for ln in lines if ln.startswith("Top-") and " Accuracy: " in ln]
    # delegate top-1: c, d right; f ("green" for a red image) right by accident: 3/6
    assert tops[0] == "Top-1 Accuracy: 0.5  (CPU reference: 0.666667)"
    assert tops[1] == "Top-2 Accuracy: 0.666667  (CPU reference: 0.833333)"
    assert "Top-1 agreement with the CPU reference: 0.333333 (2 of 6 images)" in lines
    assert "Delegate swap (emulated): 1 of 2 nodes in 1 partition(s)" in lines
    # the registrar flag works the same
    assert top_k_lines(run_ic(ic_argv(ic_data, "--use_swap"), reg))[0] == "0.5"


def test_top_k_accuracy_counts():
    acc = TopKAccuracy(["a", "b", "c", "a"], k=10)
    assert acc.k == 4
    assert acc.update(np.array([0.1, 0.9, 0.5, 0.9]), "c") == 2  # b, then a (index 3 ties b), then c
    assert acc.update(np.array([0.0, 0.0, 0.0, 1.0]), "a") == 0  # labels compare as strings
    assert acc.update(np.array([1.0, 0.0, 0.0, 0.0]), "zz") is None
    assert acc.accuracies == pytest.approx([1 / 3, 1 / 3, 2 / 3, 2 / 3])


# --- preprocessing ---------------------------------------------------------------------------
def test_central_crop_and_resize_match_tflite():
    img = np.arange(16 * 10 * 3, dtype=np.float32).reshape(10, 16, 3)
    c = central_crop(img)  # 0.875 of 10 rows = 8.75 -> 9, square -> 9x9; offsets 0.5 -> 1, 3.5 -> 4 (C's round)
    assert c.shape == (9, 9, 3) and c[0, 0, 0] == img[1, 4, 0] and c[-1, -1, 0] == img[9, 12, 0]
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (1, 7, 5, 3)).astype(np.float32)
    for h, w in [(4, 3), (9, 11), (7, 5)]:
        m = single_op_model("RESIZE_BILINEAR", [In((1, 7, 5, 3)), In((2,), np.int32)], [Out((1, h, w, 3))],
                            align_corners=False, half_pixel_centers=False)
        (want,) = run_litert(m, [x, np.array([h, w], np.int32)])
        np.testing.assert_allclose(resize_bilinear(x[0], h, w), want[0], rtol=0, atol=1e-4)


def normalization_metadata(mean, std) -> bytes:
    """A TFLITE_METADATA flatbuffer with NormalizationOptions on input 0 (metadata_schema.fbs)."""
    b = flatbuffers.Builder(0)

    def floats(vals):
        b.StartVector(4, len(vals), 4)
        for v in reversed(vals):
            b.PrependFloat32(v)
        return b.EndVector()

    def offsets(vals):
        b.StartVector(4, len(vals), 4)
        for v in reversed(vals):
            b.PrependUOffsetTRelative(v)
        return b.EndVector()

    mean_v, std_v = floats(mean), floats(std)
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, mean_v, 0)
    b.PrependUOffsetTRelativeSlot(1, std_v, 0)
    norm = b.EndObject()
    b.StartObject(2)
    b.PrependUint8Slot(0, 1, 0)  # ProcessUnitOptions.NormalizationOptions
    b.PrependUOffsetTRelativeSlot(1, norm, 0)
    units = offsets([b.EndObject()])
    b.StartObject(7)
    b.PrependUOffsetTRelativeSlot(4, units, 0)  # TensorMetadata.process_units
    inputs = offsets([b.EndObject()])
    b.StartObject(7)
    b.PrependUOffsetTRelativeSlot(2, inputs, 0)  # SubGraphMetadata.input_tensor_metadata
    subgraphs = offsets([b.EndObject()])
    b.StartObject(9)
    b.PrependUOffsetTRelativeSlot(3, subgraphs, 0)  # ModelMetadata.subgraph_metadata
    b.Finish(b.EndObject(), file_identifier=b"M001")
    return bytes(b.Output())


def test_normalization_from_metadata():
    it = Interpreter(model_content=classifier(metadata=normalization_metadata([0.0], [255.0])))
    assert normalization_from_metadata(it.model) == ((0.0,) * 3, (255.0,) * 3)
    spec = InputSpec.of(it)
    assert spec.describe() == "(pixel - 0) / 255 from the model's metadata"
    x = spec.normalize(np.full((8, 8, 3), 51.0, np.float32))
    assert x.shape == (1, 8, 8, 3) and x.dtype == np.float32 and np.allclose(x, 0.2)
    # a quantized input with metadata: normalize, then quantize with the input's scale/zero point
    it = Interpreter(model_content=classifier(np.uint8, normalization_metadata([127.5, 127.5, 127.5], [127.5])))
    spec = InputSpec.of(it)
    assert spec.mean == (127.5,) * 3 and spec.scale == 1 / 128 and spec.zero_point == 128
    q = spec.normalize(np.array([[[0.0, 127.5, 255.0]]], np.float32))
    assert q.dtype == np.uint8 and q.reshape(-1).tolist() == [0, 128, 255]  # -128 + 128, 0 + 128, 128 + 128 (sat.)
    assert normalization_from_metadata(Interpreter(model_content=classifier()).model) is None


# --- bad input -------------------------------------------------------------------------------
def test_unreadable_image_names_the_file(ic_data):
    (ic_data.images / "c.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(EvaluationError, match=r"cannot decode image .*c\.jpg"):
        run_ic(ic_argv(ic_data))


def test_labels_shorter_than_output(ic_data):
    ic_data.labels.write_text("\n".join(LABELS[:10]))
    with pytest.raises(EvaluationError, match=rf"{ic_data.labels} has 10 labels, fewer than the 12 classes"):
        run_ic(ic_argv(ic_data))


def test_mismatched_counts_and_unknown_labels(ic_data):
    ic_data.gt.write_text("red\ngreen\n")
    with pytest.raises(EvaluationError, match=rf"{ic_data.gt} has 2 labels but .* has 6 images"):
        run_ic(ic_argv(ic_data))
    ic_data.gt.write_text("red\ngreen\nblue\ndark\ndark\npurple\n")
    with pytest.raises(EvaluationError, match=rf"label 'purple' \(line 6 of {ic_data.gt}.*f\.png"):
        run_ic(ic_argv(ic_data))


def test_missing_files(ic_data):
    with pytest.raises(EvaluationError, match="--model_file is required"):
        run_ic([])
    with pytest.raises(EvaluationError, match="no such directory: /nonexistent"):
        run_ic([f"--model_file={ic_data.model}", "--ground_truth_images_path=/nonexistent"])
    with pytest.raises(EvaluationError, match="--model_output_labels: no such file: /nope.txt"):
        run_ic(ic_argv(ic_data)[:-1] + ["--model_output_labels=/nope.txt"])
    deny = ic_data.dir / "deny.txt"
    deny.write_text("7\n")
    with pytest.raises(EvaluationError, match=rf"line 1 of {deny}: image 7 is out of range"):
        run_ic(ic_argv(ic_data, f"--denylist_file_path={deny}"))


def test_progress_bar_runs():
    with progress(3, "x", enabled=True) as advance:
        for _ in range(3):
            advance()


# --- object detection ------------------------------------------------------------------------
# An 8x8 image is average-pooled into its 4 quadrants; each quadrant is an anchor whose box is
# the quadrant itself (zero box encodings). Channels are the class predictions: red is the
# background, green class 0, blue class 1 (ids 1 and 2 with class offset 1).
OD_LABELS = ["background", "green", "blue"]
QUADRANTS = [(0.0, 0.0, 0.5, 0.5), (0.0, 0.5, 0.5, 1.0), (0.5, 0.0, 1.0, 0.5), (0.5, 0.5, 1.0, 1.0)]


def detector() -> bytes:
    b = ModelBuilder()
    x = b.add_input("image", (1, 8, 8, 3), np.float32)
    p = b.add_tensor("pooled", (1, 2, 2, 3), np.float32)
    b.add_operator("AVERAGE_POOL_2D", [x], [p], padding="VALID", stride_h=4, stride_w=4, filter_height=4,
                   filter_width=4, fused_activation_function="NONE")
    shape = b.add_constant("shape", np.array([1, 4, 3], np.int32))
    scores = b.add_tensor("class_predictions", (1, 4, 3), np.float32)
    b.add_operator("RESHAPE", [p, shape], [scores], new_shape=[1, 4, 3])
    enc = b.add_constant("box_encodings", np.zeros((1, 4, 4), np.float32))
    anchors = b.add_constant("anchors", np.array([[(t + bo) / 2, (le + r) / 2, bo - t, r - le]
                                                  for t, le, bo, r in QUADRANTS], np.float32))
    outs = [b.add_tensor(n, s, np.float32) for n, s in
            [("boxes", (1, 10, 4)), ("classes", (1, 10)), ("scores", (1, 10)), ("count", (1,))]]
    opts = dict(max_detections=10, max_classes_per_detection=1, nms_score_threshold=0.5, nms_iou_threshold=0.6,
                num_classes=2, y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0)
    b.add_operator("CUSTOM", [enc, scores, anchors], outs, custom_code="TFLite_Detection_PostProcess",
                   custom_options=bytes(flexbuffers.Dumps(opts)))
    b.mark_outputs(*outs)
    return b.build()


def quadrant_image(path, size, colors):
    w, h = size
    img = np.zeros((h, w, 3), np.uint8)
    for (t, le, bo, r), c in zip(QUADRANTS, colors):
        img[int(t * h):int(bo * h), int(le * w):int(r * w)] = c
    Image.fromarray(img).save(path)


# Image a: green top-left, found (IoU 1). Image b: blue bottom-right, found, but its ground truth
# box is narrower (IoU 0.62); a green object in b's grey top-left is missed.
# green: 2 objects, 1 found at every IoU -> AP 51/101 (COCO's 101 recall points);
# blue: AP 1 for IoU thresholds <= 0.6, 0 above. mAP per threshold is their mean.
GREEN_AP = 51 / 101
OD_EXPECTED = [(t, (GREEN_AP + (1.0 if t <= 0.6 else 0.0)) / 2) for t in
               (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)]
OD_TRUTH = [ImageTruth("a.png", 1, objects=[(1, QUADRANTS[0])]),
            ImageTruth("b.png", 2, objects=[(2, (0.5, 0.5, 1.0, 0.5 + 0.5 * 0.62)), (1, QUADRANTS[0])])]


@pytest.fixture
def od_data(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    quadrant_image(images / "a.png", (24, 16), [GREEN, GRAY, BLACK, RED])
    quadrant_image(images / "b.png", (16, 32), [GRAY, BLACK, RED, BLUE])
    proto = tmp_path / "ground_truth.pb"
    proto.write_bytes(encode_ground_truth_proto(OD_TRUTH))
    labels = tmp_path / "labelmap.txt"
    labels.write_text("\n".join(OD_LABELS) + "\n")
    model = tmp_path / "ssd.tflite"
    model.write_bytes(detector())
    return types.SimpleNamespace(dir=tmp_path, images=images, proto=proto, labels=labels, model=model)


def od_argv(d, *extra, truth="proto"):
    gt = [f"--ground_truth_proto={d.proto}"] if truth == "proto" else [f"--ground_truth_json={truth}"] if truth else []
    return [f"--model_file={d.model}", f"--ground_truth_images_path={d.images}", f"--model_output_labels={d.labels}",
            *gt, *extra]


def run_od(argv, reg=None):
    reg = reg or Registry([])
    lines = []
    assert run_object_detection(reg, parse(reg, EVAL_OD_FLAGS, argv), log=lines.append) == 0
    return lines


def ap_lines(lines):
    return [ln for ln in lines if ln.startswith(("Average Precision", "Overall mAP"))]


def expected_ap_lines(ref=False):
    def fmt(v):
        return "%g" % v + (f"  (CPU reference: {'%g' % v})" if ref else "")
    lines = [f"Average Precision [IOU Threshold={'%g' % t}]: {fmt(ap)}" for t, ap in OD_EXPECTED]
    return lines + [f"Overall mAP: {fmt(np.mean([ap for _, ap in OD_EXPECTED]))}"]


@needs_coco
def test_object_detection_map(od_data):
    out = od_data.dir / "m.json"
    lines = run_od(od_argv(od_data, f"--output_file_path={out}"))
    assert lines[0] == "Num evaluation runs: 2"
    assert "Detections: 2 in 2 images" in lines
    assert ap_lines(lines) == expected_ap_lines()
    j = json.loads(out.read_text())
    m = j["process_metrics"]["object_detection_metrics"]["average_precision_metrics"]
    assert m["overall_mean_average_precision"] == pytest.approx(np.mean([ap for _, ap in OD_EXPECTED]))
    assert [a["iou_threshold"] for a in m["individual_average_precisions"]] == [t for t, _ in OD_EXPECTED]
    assert "predictions" not in j


@needs_coco
def test_object_detection_coco_json_and_debug(od_data):
    """The same ground truth as a COCO instances JSON (pixel boxes); --debug_mode prints every detection."""
    sizes = {"a.png": (24, 16), "b.png": (16, 32)}
    coco = {"images": [], "annotations": [], "categories": [{"id": 1, "name": "green"}, {"id": 2, "name": "blue"}]}
    for t in OD_TRUTH:
        w, h = sizes[t.name]
        coco["images"].append({"id": 100 + t.image_id, "file_name": t.name, "width": w, "height": h})
        for cls, (top, left, bottom, right) in t.objects:
            coco["annotations"].append({"id": len(coco["annotations"]) + 1, "image_id": 100 + t.image_id,
                                        "category_id": cls, "iscrowd": 0, "area": (right - left) * w * (bottom - top) * h,
                                        "bbox": [left * w, top * h, (right - left) * w, (bottom - top) * h]})
    path = od_data.dir / "instances.json"
    path.write_text(json.dumps(coco))
    out = od_data.dir / "m.json"
    lines = run_od(od_argv(od_data, "--debug_mode", f"--output_file_path={out}", truth=str(path)))
    assert ap_lines(lines) == expected_ap_lines()
    i = lines.index("Image: a.png")
    assert lines[i + 1:i + 9] == ["Object [0]", "  Score: 1", "  Class-ID: 1 (green)", "  Bounding Box:",
                                  "    Normalized Top: 0", "    Normalized Bottom: 0.5", "    Normalized Left: 0",
                                  "    Normalized Right: 0.5"]
    preds = json.loads(out.read_text())["predictions"]
    assert [(p["image_name"], [o["class_id"] for o in p["objects"]]) for p in preds] == [("a.png", [1]), ("b.png", [2])]


@needs_coco
def test_object_detection_compare_without_truth(od_data):
    lines = run_od(od_argv(od_data, "--compare_to_reference"))
    assert ap_lines(lines) == expected_ap_lines(ref=True)
    lines = run_od(od_argv(od_data, "--num_images=1", truth=None))
    assert "No ground truth (--ground_truth_proto or --ground_truth_json): mAP not computed" in lines
    assert "Detections: 1 in 1 images" in lines and not ap_lines(lines)


def test_ground_truth_proto_round_trip(od_data):
    got = load_ground_truth_proto(str(od_data.proto))
    assert list(got) == ["a.png", "b.png"]
    assert got["b.png"].image_id == 2 and got["b.png"].objects[0][0] == 2
    np.testing.assert_allclose(got["b.png"].objects[0][1], OD_TRUTH[1].objects[0][1], rtol=1e-7)


def test_object_detection_bad_input(od_data):
    (od_data.images / "c.png").write_bytes(b"")
    with pytest.raises(EvaluationError, match=rf"1 of 3 images have no entry in the ground truth {od_data.proto}"):
        run_od(od_argv(od_data))
    (od_data.images / "c.png").unlink()
    od_data.labels.write_text("background\ngreen\n")
    with pytest.raises(EvaluationError, match=rf"{od_data.labels} has 2 labels, fewer than the model's 2 classes"):
        run_od(od_argv(od_data))
    od_data.labels.write_text("\n".join(OD_LABELS))
    od_data.proto.write_bytes(b"\xff\xff\xff")
    with pytest.raises(EvaluationError, match=rf"{od_data.proto} is not a binary ObjectDetectionGroundTruth proto"):
        run_od(od_argv(od_data))
    with pytest.raises(EvaluationError, match="not both"):
        run_od(od_argv(od_data, "--ground_truth_json=x.json"))
