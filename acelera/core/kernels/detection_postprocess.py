"""TFLite_Detection_PostProcess: the SSD box decoder + non-max suppression custom op.

Semantics follow LiteRT's tflite/kernels/detection_postprocess.cc with one thread:

- Inputs: box encodings [1, num_boxes, >=4] (float32, or uint8 with uint8 anchors), class
  predictions [1, num_boxes, num_classes (+1 background)] (float32 or uint8), anchors
  [num_boxes, 4] as (y, x, h, w).
- Boxes are decoded in double precision and stored as float32 (ymin, xmin, ymax, xmax).
- Fast NMS (default): per anchor the top `max_classes_per_detection` classes; one NMS over the
  anchors' best scores. Regular NMS (`use_regular_nms`): NMS per class (at most
  `detections_per_class` each), merged by score, the best `max_detections` kept.
- Outputs (all float32): boxes [1, D, 4], classes [1, D], scores [1, D], count [1], with
  D = max_detections * max_classes_per_detection.

Custom options are a FlexBuffer map (max_detections, max_classes_per_detection,
detections_per_class (default 100), use_regular_nms (default false), nms_score_threshold,
nms_iou_threshold, num_classes, y_scale, x_scale, h_scale, w_scale); a missing key reads as 0
like LiteRT's flexbuffers accessors.

Differences from LiteRT: entries LiteRT leaves unwritten (fast NMS, past `count`, or past the
classes an anchor has) are zeros here; ties between equal class scores with
max_classes_per_detection > 1 are broken by the lower class index (LiteRT's std::partial_sort
leaves that order unspecified).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from acelera.core.errors import KernelError
from acelera.core.kernels.common import scale_zp
from acelera.core.kernels.registry import NodeContext, register

F32 = np.float32
DEFAULT_DETECTIONS_PER_CLASS = 100

#: option name -> (kind, default when absent)
OPTIONS: dict[str, tuple[type, Any]] = {
    "max_detections": (int, 0),
    "max_classes_per_detection": (int, 0),
    "detections_per_class": (int, DEFAULT_DETECTIONS_PER_CLASS),
    "use_regular_nms": (bool, False),
    "nms_score_threshold": (float, 0.0),
    "nms_iou_threshold": (float, 0.0),
    "num_classes": (int, 0),
    "y_scale": (float, 0.0),
    "x_scale": (float, 0.0),
    "h_scale": (float, 0.0),
    "w_scale": (float, 0.0),
}


def parse_options(data: bytes) -> dict[str, Any]:
    """The op's FlexBuffer options as Python values (floats rounded to float32 like LiteRT)."""
    from flatbuffers import flexbuffers

    try:
        raw = flexbuffers.Loads(bytes(data)) if data else {}
    except Exception as e:  # malformed buffers raise anything from IndexError to struct.error
        raise ValueError(f"custom options are not a valid FlexBuffer: {type(e).__name__}: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"custom options must be a FlexBuffer map, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    for key, (kind, default) in OPTIONS.items():
        v = raw.get(key)
        if v is None:
            out[key] = default
        elif kind is bool:
            out[key] = bool(v)
        elif kind is int:
            out[key] = int(np.int32(int(v)))  # AsInt32 truncates
        else:
            out[key] = float(F32(v))
    return out


def _dequantize_boxes(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """LiteRT's Dequantizer: (float(x) - zero_point) * scale, in float32."""
    return (q.astype(F32) - F32(zp)) * F32(scale)


def decode_boxes(enc: np.ndarray, anchors: np.ndarray, scales: tuple[float, float, float, float]) -> np.ndarray:
    """(num_boxes, 4) float32 (y, x, h, w) encodings + anchors -> (ymin, xmin, ymax, xmax) float32."""
    e = enc.astype(np.float64)
    a = anchors.astype(np.float64)
    ys, xs, hs, ws = (float(s) for s in scales)
    with np.errstate(all="ignore"):
        yc = (e[:, 0] / ys * a[:, 2] + a[:, 0]).astype(F32)
        xc = (e[:, 1] / xs * a[:, 3] + a[:, 1]).astype(F32)
        hh = (0.5 * np.exp(e[:, 2] / hs) * a[:, 2]).astype(F32)
        hw = (0.5 * np.exp(e[:, 3] / ws) * a[:, 3]).astype(F32)
        return np.stack([yc - hh, xc - hw, yc + hh, xc + hw], axis=1).astype(F32)


def _iou_one_to_many(boxes: np.ndarray, i: int, others: np.ndarray) -> np.ndarray:
    """ComputeIntersectionOverUnion(boxes, i, j) for every j in `others`, in float32."""
    bi = boxes[i]
    bj = boxes[others]
    area_i = (bi[2] - bi[0]) * (bi[3] - bi[1])
    area_j = (bj[:, 2] - bj[:, 0]) * (bj[:, 3] - bj[:, 1])
    iy = np.maximum(np.minimum(bi[2], bj[:, 2]) - np.maximum(bi[0], bj[:, 0]), F32(0))
    ix = np.maximum(np.minimum(bi[3], bj[:, 3]) - np.maximum(bi[1], bj[:, 1]), F32(0))
    inter = iy * ix
    with np.errstate(all="ignore"):
        iou = inter / ((area_i + area_j) - inter)
    return np.where((area_i <= 0) | (area_j <= 0), F32(0), iou).astype(F32)


def nms_single_class(boxes: np.ndarray, scores: np.ndarray, max_detections: int,
                     score_threshold: float, iou_threshold: float, floor: float | None = None) -> list[int]:
    """NonMaxSuppressionSingleClassHelper: selected box indices, best score first.

    With `floor`, selection stops at the first candidate scoring <= floor: the caller would
    discard it and every later one (a shortcut that leaves the result unchanged)."""
    if max_detections < 0:
        raise KernelError(f"max_detections must be >= 0, got {max_detections}")
    if not (0.0 < iou_threshold <= 1.0):
        raise KernelError(f"nms_iou_threshold must be in (0, 1], got {iou_threshold}")
    if np.any((boxes[:, 0] > boxes[:, 2]) | (boxes[:, 1] > boxes[:, 3])):
        raise KernelError("decoded boxes are invalid (ymin > ymax or xmin > xmax)")
    keep = np.flatnonzero(scores >= F32(score_threshold))
    order = keep[np.argsort(-scores[keep], kind="stable")]  # DecreasingArgSort: stable
    n = order.size
    output_size = min(n, max_detections)
    active = np.ones(n, bool)
    num_active = n
    selected: list[int] = []
    for i in range(n):
        if num_active == 0 or len(selected) >= output_size:
            break
        if not active[i]:
            continue
        if floor is not None and scores[order[i]] <= floor:
            break
        selected.append(int(order[i]))
        active[i] = False
        num_active -= 1
        rest = np.flatnonzero(active[i + 1:]) + i + 1
        if rest.size:
            drop = rest[_iou_one_to_many(boxes, int(order[i]), order[rest]) > F32(iou_threshold)]
            active[drop] = False
            num_active -= drop.size
    return selected


def _fast_nms(boxes, scores, o, num_classes, label_offset):
    mcpd = o["max_classes_per_detection"]
    if mcpd <= 0:
        raise KernelError(f"max_classes_per_detection must be > 0, got {mcpd}")
    per_anchor = min(mcpd, num_classes)
    cls_scores = scores[:, label_offset:label_offset + num_classes]
    if per_anchor == 1:
        top = np.argmax(cls_scores, axis=1)[:, None]  # ArgMaxVector: the first maximum
    else:
        top = np.argsort(-cls_scores, axis=1, kind="stable")[:, :per_anchor]
    max_scores = cls_scores[np.arange(cls_scores.shape[0]), top[:, 0]]
    selected = nms_single_class(boxes, max_scores, o["max_detections"], o["nms_score_threshold"],
                                o["nms_iou_threshold"])
    d = o["max_detections"] * mcpd
    out_boxes = np.zeros((d, 4), F32)
    out_classes = np.zeros(d, F32)
    out_scores = np.zeros(d, F32)
    for k, anchor in enumerate(selected):
        rows = mcpd * k + np.arange(per_anchor)
        out_boxes[rows] = boxes[anchor]
        out_classes[rows] = top[anchor]
        out_scores[rows] = cls_scores[anchor, top[anchor]]
    return out_boxes, out_classes, out_scores, len(selected)


def _regular_nms(boxes, scores, o, num_classes, label_offset):
    max_det = o["max_detections"]
    per_class = min(o["detections_per_class"], max_det)
    if per_class <= 0:
        raise KernelError(f"min(detections_per_class, max_detections) must be > 0, got {per_class}")
    ncwb = scores.shape[1]
    kept: list[tuple[float, int]] = []  # (score, anchor * ncwb + class column), best first
    for col in range(num_classes):
        class_scores = scores[:, col + label_offset]
        # once `kept` is full, a new entry must beat its last score to enter (the merge is stable)
        floor = kept[-1][0] if len(kept) >= max_det else None
        sel = nms_single_class(boxes, class_scores, per_class, o["nms_score_threshold"], o["nms_iou_threshold"],
                               floor)
        if not sel:
            continue
        new = [(float(class_scores[s]), s * ncwb + col + label_offset) for s in sel]
        # std::inplace_merge is stable: earlier entries stay first among equal scores
        kept = sorted(kept + new, key=lambda t: -t[0])[:max_det]
    out_boxes = np.zeros((max_det, 4), F32)
    out_classes = np.zeros(max_det, F32)
    out_scores = np.zeros(max_det, F32)
    for k, (score, index) in enumerate(kept):
        anchor = index // ncwb
        out_boxes[k] = boxes[anchor]
        out_classes[k] = index - anchor * ncwb - label_offset
        out_scores[k] = score
    return out_boxes, out_classes, out_scores, len(kept)


@register("TFLite_Detection_PostProcess", max_version=1, dtypes=("FLOAT32", "UINT8"))
def detection_postprocess(node: NodeContext):
    if len(node.inputs) != 3 or len(node.outputs) != 4:
        raise node.unsupported(f"expects 3 inputs and 4 outputs, got {len(node.inputs)} and {len(node.outputs)}")
    try:
        o = parse_options(node.op.custom_options)
    except ValueError as e:
        raise node.unsupported(str(e)) from None
    enc_t, cls_t, anc_t = node.inputs
    if enc_t is None or cls_t is None or anc_t is None:
        raise node.unsupported("all 3 inputs are required")
    if len(enc_t.shape) != 3 or len(cls_t.shape) != 3 or len(anc_t.shape) != 2:
        raise node.unsupported(f"expects box encodings and class predictions of rank 3 and anchors of rank 2, "
                               f"got shapes {list(enc_t.shape)}, {list(cls_t.shape)}, {list(anc_t.shape)}")
    for t in node.outputs:
        if t.dtype != np.float32:
            raise node.unsupported(f"outputs must be float32, got {t.type_name}")
    if enc_t.dtype == np.uint8:
        if anc_t.dtype != np.uint8:
            raise node.unsupported(f"uint8 box encodings need uint8 anchors, got {anc_t.type_name}")
    elif enc_t.dtype == np.float32:
        if anc_t.dtype != np.float32:
            raise node.unsupported(f"float32 box encodings need float32 anchors, got {anc_t.type_name}")
    else:
        raise node.unsupported(f"box encodings of type {enc_t.type_name} are not supported (float32, uint8)")
    if cls_t.dtype not in (np.float32, np.uint8):
        raise node.unsupported(f"class predictions of type {cls_t.type_name} are not supported (float32, uint8)")
    batch, num_boxes, enc_len = enc_t.shape
    if batch != 1 or cls_t.shape[0] != 1:
        raise node.unsupported(f"batch size must be 1, got {batch}")
    if enc_len < 4:
        raise node.unsupported(f"box encodings need at least 4 values per box, got {enc_len}")
    if cls_t.shape[1] != num_boxes:
        raise node.unsupported(f"class predictions have {cls_t.shape[1]} boxes, box encodings {num_boxes}")
    if anc_t.shape[1] != 4 or anc_t.shape[0] < num_boxes:
        raise node.unsupported(f"anchors must have shape [>= {num_boxes}, 4], got {list(anc_t.shape)}")
    num_classes = o["num_classes"]
    ncwb = cls_t.shape[2]
    label_offset = ncwb - num_classes
    if label_offset not in (0, 1):
        raise node.unsupported(f"class predictions have {ncwb} columns for num_classes={num_classes} "
                               f"(expected num_classes or num_classes + 1)")
    scales = (o["y_scale"], o["x_scale"], o["h_scale"], o["w_scale"])
    enc_q = scale_zp(enc_t) if enc_t.dtype == np.uint8 else None
    anc_q = scale_zp(anc_t) if enc_t.dtype == np.uint8 else None
    cls_q = scale_zp(cls_t) if cls_t.dtype == np.uint8 else None
    nms = _regular_nms if o["use_regular_nms"] else _fast_nms

    def run(box_encodings, class_predictions, anchors):
        enc = box_encodings[0, :, :4]
        anc = anchors[:num_boxes]
        if enc_q is not None:
            enc = _dequantize_boxes(enc, *enc_q)
            anc = _dequantize_boxes(anc, *anc_q)
        boxes = decode_boxes(enc, anc, scales)
        scores = class_predictions[0]
        if cls_q is not None:  # optimized_ops::Dequantize: float(double(scale) * (q - zero_point))
            scores = (cls_q[0] * (scores.astype(np.float64) - cls_q[1])).astype(F32)
        out_boxes, out_classes, out_scores, count = nms(boxes, scores.astype(F32, copy=False), o,
                                                        num_classes, label_offset)
        return (out_boxes[None], out_classes[None], out_scores[None], np.array([count], F32))
    return run
