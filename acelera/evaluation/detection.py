"""`acelera eval object-detection`: TFLite's coco_object_detection task, scored with COCO mAP.

The model is an SSD-style detector ending in TFLite_Detection_PostProcess: one [1, H, W, 3]
input and the outputs boxes [1, N, 4] (top, left, bottom, right, normalized), classes [1, N],
scores [1, N] and count [1] (located through the postprocess node's outputs, else in graph
order). Images of `--ground_truth_images_path` (path order, the first `--num_images`; 0 = all)
are resized to the input (no crop) and normalized like TFLite's tool (see
`acelera.evaluation.images`). A detection's class id is the model's class index plus
`--class_offset` (1: the labels file starts with the background, as TFLite assumes).

Ground truth, matched to images by file name, is either
- `--ground_truth_proto`: TFLite's binary ObjectDetectionGroundTruth proto, as written by
  preprocess_coco_minival.py (normalized boxes; image sizes come from the images), or
- `--ground_truth_json`: a COCO instances JSON (images, annotations with bbox/iscrowd/area,
  categories), e.g. instances_val2017.json.

The metric is COCO's bounding-box mAP from pycocotools: AP per IoU threshold 0.50:0.05:0.95
(area all, 100 detections per image) and their mean, printed as TFLite prints its own
`Average Precision [IOU Threshold=0.5]: ...` / `Overall mAP: ...` lines. pycocotools' numbers
differ slightly from TFLite's own AP implementation (COCO's 101-point interpolation, crowd
handling, at most 100 detections per image), and are the ones papers and model zoos report.
"""
from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence, cast

import numpy as np

from acelera.core.opcodes import CUSTOM
from acelera.evaluation.common import (
    Delegation,
    EvaluationError,
    Flags,
    RunningStat,
    cpp_float,
    latency_json,
    latency_line,
    open_interpreters,
    progress,
    read_lines,
    write_json,
)
from acelera.evaluation.images import InputSpec, list_images, preprocess
from acelera.evaluation.metrics import Detection, ImageTruth, MeanAveragePrecision, coco_map

__all__ = ["EVAL_OD_FLAGS", "POSTPROCESS_OP", "load_ground_truth_proto", "load_ground_truth_json",
           "encode_ground_truth_proto", "DetectionResult", "evaluate_detection", "detection_lines", "detection_json",
           "run_object_detection"]

POSTPROCESS_OP = "TFLite_Detection_PostProcess"

#: (name, type, default, help): TFLite's flags for the task, plus acelera's additions.
EVAL_OD_FLAGS: list[tuple[str, type, Any, str]] = [
    ("model_file", str, "", "Path to the .tflite SSD-style detection model (required)"),
    ("ground_truth_images_path", str, "",
     "Directory of ground truth images, evaluated in alphabetical order of file name (required)"),
    ("ground_truth_proto", str, "",
     "TFLite's binary ObjectDetectionGroundTruth proto (preprocess_coco_minival.py); without ground truth "
     "no mAP is computed"),
    ("ground_truth_json", str, "", "A COCO instances JSON file (e.g. instances_val2017.json), instead of "
                                   "--ground_truth_proto"),
    ("model_output_labels", str, "",
     "File of the model's class labels, one per line, starting with the background (required)"),
    ("num_images", int, 0, "Number of images to evaluate; 0 evaluates all"),
    ("output_file_path", str, "",
     "If set, the final metrics (and per-image predictions with --debug_mode) are written there as JSON"),
    ("num_interpreter_threads", int, 1,
     "Threads for the test interpreter (overrides --num_threads); the reference uses 1"),
    ("delegate", str, "", "Delegate for the test interpreter: one of TFLite's nnapi, gpu, hexagon, xnnpack, "
                          "coreml, or any installed delegate's name"),
    ("debug_mode", bool, False, "Print every image's predictions (and write them to --output_file_path)"),
    ("class_offset", int, 1,
     "Added to the model's class index to get the ground truth class id (1: labels start with background)"),
    ("compare_to_reference", bool, False,
     "Also evaluate on the CPU reference (1 thread, no delegate) and print its mAP beside"),
]


# --- ground truth ----------------------------------------------------------------------------
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message: ints, bytes, or 4/8 raw bytes."""
    pos = 0
    value: int | bytes
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated field")
        yield num, wire, value


def _f32(raw: bytes) -> float:
    return struct.unpack("<f", raw)[0]


def _int(v: int, bits: int) -> int:
    v &= (1 << 64) - 1
    v = v - (1 << 64) if v >> 63 else v
    return int(np.int32(v)) if bits == 32 else v


def _object(buf: bytes) -> tuple[int, tuple[float, float, float, float]]:
    cls, box = 0, [0.0, 0.0, 0.0, 0.0]  # top, bottom, left, right as in the proto
    for num, wire, v in _fields(buf):
        if num == 1 and wire == 0:
            cls = _int(v, 32)
        elif num == 2 and wire == 2:
            for n2, w2, v2 in _fields(v):
                if 1 <= n2 <= 4 and w2 == 5:
                    box[n2 - 1] = _f32(v2)
    top, bottom, left, right = box
    return cls, (top, left, bottom, right)


def load_ground_truth_proto(path: str) -> dict[str, ImageTruth]:
    """TFLite's ObjectDetectionGroundTruth (binary proto) by image file name."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise EvaluationError(f"--ground_truth_proto: cannot read {path}: {e.strerror or e}") from None
    out: dict[str, ImageTruth] = {}
    try:
        for num, wire, v in _fields(data):
            if num != 1 or wire != 2:
                raise ValueError(f"unexpected field {num} (wire type {wire}) at the top level")
            t = ImageTruth(name="", image_id=0)
            for n2, w2, v2 in _fields(v):
                if n2 == 1 and w2 == 2:
                    t.objects.append(_object(v2))
                elif n2 == 2 and w2 == 2:
                    t.name = v2.decode("utf-8")
                elif n2 == 3 and w2 == 0:
                    t.image_id = _int(v2, 64)
            if not t.name:
                raise ValueError(f"detection result {len(out)} has no image_name")
            out[t.name] = t
    except (ValueError, UnicodeDecodeError) as e:
        raise EvaluationError(f"--ground_truth_proto: {path} is not a binary ObjectDetectionGroundTruth proto "
                              f"({e}); text-format protos are not read") from None
    if not out:
        raise EvaluationError(f"--ground_truth_proto: {path} holds no images")
    return out


def encode_ground_truth_proto(truths: Sequence[ImageTruth]) -> bytes:
    """The binary ObjectDetectionGroundTruth proto of `truths` (what preprocess_coco_minival.py writes)."""
    def key(num: int, wire: int) -> bytes:
        return _enc_varint(num << 3 | wire)

    def ld(num: int, payload: bytes) -> bytes:
        return key(num, 2) + _enc_varint(len(payload)) + payload

    out = b""
    for t in truths:
        msg = b""
        for cls, (top, left, bottom, right) in t.objects:
            box = b"".join(key(n, 5) + struct.pack("<f", v) for n, v in ((1, top), (2, bottom), (3, left), (4, right)))
            msg += ld(1, key(1, 0) + _enc_varint(cls & ((1 << 64) - 1)) + ld(2, box))
        msg += ld(2, t.name.encode())
        msg += key(3, 0) + _enc_varint(t.image_id & ((1 << 64) - 1))
        out += ld(1, msg)
    return out


def _enc_varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def load_ground_truth_json(path: str) -> tuple[dict[str, ImageTruth], list[int]]:
    """A COCO instances JSON: ground truth by file name, and the category ids."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise EvaluationError(f"--ground_truth_json: cannot read {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise EvaluationError(f"--ground_truth_json: {path} is not JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise EvaluationError(f"--ground_truth_json: {path} is not a COCO instances file (no 'images' list)")
    by_id: dict[int, ImageTruth] = {}
    out: dict[str, ImageTruth] = {}
    t: ImageTruth | None
    try:
        for im in data["images"]:
            t = ImageTruth(name=os.path.basename(im["file_name"]), image_id=int(im["id"]), width=int(im["width"]),
                           height=int(im["height"]), iscrowd=[], area=[])
            by_id[t.image_id] = t
            out[t.name] = t
        for k, a in enumerate(data.get("annotations", [])):
            t = by_id.get(int(a["image_id"]))
            if t is None:
                raise ValueError(f"annotation {k} refers to image id {a['image_id']}, which is not in 'images'")
            assert t.iscrowd is not None and t.area is not None  # every image above starts with lists
            x, y, w, h = (float(v) for v in a["bbox"])
            t.objects.append((int(a["category_id"]), (y / t.height, x / t.width, (y + h) / t.height,
                                                      (x + w) / t.width)))
            t.iscrowd.append(int(a.get("iscrowd", 0)))
            t.area.append(float(a.get("area", w * h)))
        cats = [int(c["id"]) for c in data.get("categories", [])]
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise EvaluationError(f"--ground_truth_json: {path} is not a valid COCO instances file: {what}") from None
    if not cats:
        cats = sorted({c for t in out.values() for c, _ in t.objects})
    return out, cats


# --- the model's outputs -----------------------------------------------------------------------
def _postprocess_node(model: Any):
    for op in model.main.operators:
        if op.op == CUSTOM and op.custom_code == POSTPROCESS_OP:
            return op
    return None


def output_roles(it: Any, model_file: str) -> list[int]:
    """Tensor indices of (boxes, classes, scores, count) among the model's 4 outputs."""
    outs = it.get_output_details()
    if len(outs) != 4:
        raise EvaluationError(f"{model_file}: an object detection model must have 4 outputs (boxes, classes, "
                              f"scores, count), this one has {len(outs)}")
    indices = [int(d["index"]) for d in outs]
    node = _postprocess_node(it.model)
    if node is not None and sorted(node.outputs) == sorted(indices):
        roles = list(node.outputs)
    else:
        roles = indices
    shapes = {int(d["index"]): [int(s) for s in d["shape"]] for d in outs}
    if len(shapes[roles[0]]) < 2 or shapes[roles[0]][-1] != 4:
        raise EvaluationError(f"{model_file}: the boxes output must have shape [1, N, 4], got {shapes[roles[0]]}")
    return roles


@dataclass
class DetectionResult:
    num_runs: int
    preprocessing: RunningStat
    inference: RunningStat
    delegation: Delegation
    #: per image: (file name, detections)
    predictions: list[tuple[str, list[Detection]]]
    map: MeanAveragePrecision | None = None
    input_description: str = ""
    reference_inference: RunningStat | None = None
    reference_predictions: list[tuple[str, list[Detection]]] | None = None
    reference_map: MeanAveragePrecision | None = None


def _detections(it: Any, roles: Sequence[int], class_offset: int) -> list[Detection]:
    boxes, classes, scores, count = (it.get_tensor(i) for i in roles)
    boxes = boxes.reshape(-1, 4)
    classes, scores = classes.reshape(-1), scores.reshape(-1)
    n = int(count.reshape(-1)[0]) if count.size else 0
    n = max(0, min(n, boxes.shape[0], classes.size, scores.size))
    return [Detection(int(classes[i]) + class_offset, float(scores[i]),
                      cast("tuple[float, float, float, float]", tuple(float(v) for v in boxes[i]))) for i in range(n)]


def evaluate_detection(interpreters: Any, images: Sequence[str], model_labels: Sequence[str], *,
                       truths: dict[str, ImageTruth] | None = None, categories: Sequence[int] | None = None,
                       class_offset: int = 1, model_file: str = "the model", labels_file: str = "the labels file",
                       truth_file: str = "the ground truth", show_progress: bool | None = None) -> DetectionResult:
    """Run every image through the test (and reference) interpreter; COCO mAP when `truths`."""
    test, ref = interpreters.test, interpreters.reference
    spec = InputSpec.of(test, model_file)
    roles = output_roles(test, model_file)
    node = _postprocess_node(test.model)
    if node is not None:
        from acelera.core.kernels.detection_postprocess import parse_options

        try:
            num_classes = parse_options(node.custom_options)["num_classes"]
        except ValueError:
            num_classes = 0
        if num_classes + class_offset > len(model_labels):
            raise EvaluationError(f"--model_output_labels: {labels_file} has {len(model_labels)} labels, fewer "
                                  f"than the model's {num_classes} classes + class offset {class_offset}")
    in_index = test.get_input_details()[0]["index"]
    pre, inf, ref_inf = RunningStat(), RunningStat(), RunningStat()
    preds: list[tuple[str, list[Detection]]] = []
    ref_preds: list[tuple[str, list[Detection]]] = []
    evaluated: list[ImageTruth] = []
    with progress(len(images), "object-detection", show_progress) as advance:
        for k, path in enumerate(images):
            name = os.path.basename(path)
            truth = None
            if truths is not None:
                truth = truths.get(name)
                if truth is None:
                    raise EvaluationError(f"image {path} has no entry in the ground truth {truth_file}")
            t0 = time.perf_counter_ns()
            x, (h, w) = preprocess(path, spec, crop=False)
            pre.update((time.perf_counter_ns() - t0) // 1000)
            test.set_tensor(in_index, x)
            t0 = time.perf_counter_ns()
            test.invoke()
            inf.update((time.perf_counter_ns() - t0) // 1000)
            dets = _detections(test, roles, class_offset)
            for d in dets:
                if not 0 <= d.class_id < len(model_labels):
                    raise EvaluationError(f"--model_output_labels: the model detected class id {d.class_id} in {path}, "
                                          f"but {labels_file} has {len(model_labels)} labels")
            preds.append((name, dets))
            if ref is not None:
                ref.set_tensor(in_index, x)
                t0 = time.perf_counter_ns()
                ref.invoke()
                ref_inf.update((time.perf_counter_ns() - t0) // 1000)
                ref_preds.append((name, _detections(ref, roles, class_offset)))
            if truth is not None:
                evaluated.append(ImageTruth(truth.name, k + 1, truth.width or w, truth.height or h, truth.objects,
                                            truth.iscrowd, truth.area))
            advance()
    result = DetectionResult(len(preds), pre, inf, interpreters.delegation, preds, input_description=spec.describe())
    if ref is not None:
        result.reference_inference, result.reference_predictions = ref_inf, ref_preds
    if truths is not None:
        result.map = coco_map(evaluated, [d for _, d in preds], categories)
        if ref is not None:
            result.reference_map = coco_map(evaluated, [d for _, d in ref_preds], categories)
    return result


def _beside(value: float, ref: float | None) -> str:
    return cpp_float(value) + (f"  (CPU reference: {cpp_float(ref)})" if ref is not None else "")


def detection_lines(r: DetectionResult, debug: bool = False, labels: Sequence[str] = ()) -> list[str]:
    """run_eval.cc's summary (reference values beside when compared), then the delegation summary."""
    lines: list[str] = []
    if debug:
        for name, dets in r.predictions:
            lines.append("======================================================")
            lines.append(f"Image: {name}")
            for i, d in enumerate(dets):
                top, left, bottom, right = d.box
                label = f" ({labels[d.class_id]})" if 0 <= d.class_id < len(labels) else ""
                lines += [f"Object [{i}]", f"  Score: {cpp_float(d.score)}", f"  Class-ID: {d.class_id}{label}",
                          "  Bounding Box:", f"    Normalized Top: {cpp_float(top)}",
                          f"    Normalized Bottom: {cpp_float(bottom)}", f"    Normalized Left: {cpp_float(left)}",
                          f"    Normalized Right: {cpp_float(right)}"]
        lines.append("======================================================")
    lines += [f"Num evaluation runs: {r.num_runs}", latency_line("Preprocessing", r.preprocessing),
              latency_line("Inference", r.inference)]
    if r.reference_inference is not None:
        lines.append(latency_line("Reference inference", r.reference_inference))
    n_det = sum(len(d) for _, d in r.predictions)
    lines.append(f"Detections: {n_det} in {r.num_runs} images")
    if r.map is None:
        lines.append("No ground truth (--ground_truth_proto or --ground_truth_json): mAP not computed")
    else:
        ref = r.reference_map
        for k, (thr, ap) in enumerate(r.map.per_iou):
            lines.append(f"Average Precision [IOU Threshold={cpp_float(thr)}]: "
                         f"{_beside(ap, ref.per_iou[k][1] if ref else None)}")
        lines.append(f"Overall mAP: {_beside(r.map.overall, ref.overall if ref else None)}")
    if r.input_description:
        lines.append(f"Input normalization: {r.input_description}")
    return lines + r.delegation.lines()


def _map_json(m: MeanAveragePrecision) -> dict[str, Any]:
    from acelera.evaluation.metrics import STAT_NAMES

    return {"individual_average_precisions": [{"iou_threshold": t, "average_precision": ap} for t, ap in m.per_iou],
            "overall_mean_average_precision": m.overall,
            "coco_stats": dict(zip(STAT_NAMES, m.stats))}


def _preds_json(preds: Sequence[tuple[str, list[Detection]]]) -> list[dict[str, Any]]:
    return [{"image_name": name, "objects": [
        {"class_id": d.class_id, "score": d.score,
         "bounding_box": dict(zip(("normalized_top", "normalized_left", "normalized_bottom", "normalized_right"),
                                  d.box))} for d in dets]} for name, dets in preds]


def detection_json(r: DetectionResult, debug: bool = False) -> dict[str, Any]:
    """EvaluationStageMetrics field names, plus the reference, delegation and (debug) predictions."""
    metrics: dict[str, Any] = {"pre_processing_latency": latency_json(r.preprocessing),
                               "inference_latency": latency_json(r.inference)}
    if r.map is not None:
        metrics["average_precision_metrics"] = _map_json(r.map)
    out: dict[str, Any] = {"num_runs": r.num_runs, "process_metrics": {"object_detection_metrics": metrics}}
    if r.reference_inference is not None:
        ref: dict[str, Any] = {"inference_latency": latency_json(r.reference_inference)}
        if r.reference_map is not None:
            ref["average_precision_metrics"] = _map_json(r.reference_map)
        if debug:
            ref["predictions"] = _preds_json(r.reference_predictions or [])
        out["reference"] = ref
    out["input_normalization"] = r.input_description
    out["delegation"] = r.delegation.to_json()
    if debug:
        out["predictions"] = _preds_json(r.predictions)
    return out


def run_object_detection(registry: Any, parsed: Any, log: Callable[[str], Any] = print) -> int:
    """The command: read the flags and files, build the delegates, evaluate, log, write JSON; 0."""
    flag = Flags(parsed, EVAL_OD_FLAGS)
    model_file = flag("model_file")
    if not model_file:
        raise EvaluationError("--model_file is required: the path of the .tflite model to evaluate")
    images = list_images(flag("ground_truth_images_path"))
    num = int(flag("num_images"))
    if num < 0:
        raise EvaluationError(f"--num_images must be >= 0 (0 evaluates all), got {num}")
    if num > 0:
        images = images[:num]
    labels_file = flag("model_output_labels")
    labels = read_lines(labels_file, "model_output_labels")
    proto, js = flag("ground_truth_proto"), flag("ground_truth_json")
    if proto and js:
        raise EvaluationError("give one of --ground_truth_proto and --ground_truth_json, not both")
    truths, cats, truth_file = None, None, ""
    if proto:
        truths, truth_file = load_ground_truth_proto(proto), proto
    elif js:
        (truths, cats), truth_file = load_ground_truth_json(js), js
    if truths is not None:
        missing = [p for p in images if os.path.basename(p) not in truths]
        if missing:
            raise EvaluationError(f"{len(missing)} of {len(images)} images have no entry in the ground truth "
                                  f"{truth_file}, e.g. {missing[0]}")
    its = open_interpreters(registry, parsed, model_file, int(flag("num_interpreter_threads")),
                            bool(flag("compare_to_reference")))
    debug = bool(flag("debug_mode"))
    result = evaluate_detection(its, images, labels, truths=truths, categories=cats,
                                class_offset=int(flag("class_offset")), model_file=model_file,
                                labels_file=labels_file, truth_file=truth_file)
    for line in detection_lines(result, debug, labels):
        log(line)
    out = flag("output_file_path")
    if out:
        write_json(out, detection_json(result, debug))
    return 0
