"""Task metrics: top-K accuracy (TFLite's TopkAccuracyEvalStage) and COCO mean average
precision (pycocotools' COCOeval, the reference implementation of the COCO metric)."""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from acelera.evaluation.common import EvaluationError

TOP_K = 10
#: COCO's IoU thresholds 0.5:0.05:0.95
IOU_THRESHOLDS: tuple[float, ...] = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))


# --- top-K -----------------------------------------------------------------------------------
def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first; equal scores keep index order (stable)."""
    flat = np.asarray(scores).reshape(-1).astype(np.float64)
    return np.argsort(-flat, kind="stable")[:k]


@dataclass
class TopKAccuracy:
    """Counts of images whose ground-truth label is among the top 1..k predictions.

    Labels are compared as strings, as TFLite does (the prediction's label in the model's label
    list against the image's ground-truth label), so duplicate label names count as one class.
    """

    labels: Sequence[str]
    k: int = TOP_K
    counts: list[int] = field(default_factory=list)
    num_runs: int = 0

    def __post_init__(self):
        self.k = min(self.k, len(self.labels))
        self.counts = [0] * self.k

    def update(self, scores: np.ndarray, truth: str) -> int | None:
        """Add one image; returns the rank (0-based) at which the truth was found, or None."""
        top = top_k_indices(scores, self.k)
        self.num_runs += 1
        for rank, idx in enumerate(top):
            if self.labels[idx] == truth:
                for j in range(rank, self.k):
                    self.counts[j] += 1
                return rank
        return None

    @property
    def accuracies(self) -> list[float]:
        """Top-1..k accuracy as float32 values, like the metrics proto's `topk_accuracies`."""
        if not self.num_runs:
            return [0.0] * self.k
        return [float(np.float32(c) / np.float32(self.num_runs)) for c in self.counts]


# --- COCO mAP --------------------------------------------------------------------------------
@dataclass
class ImageTruth:
    """One image's ground truth: pixel size and objects (class id, normalized box), and
    optionally COCO's `iscrowd`/`area` per object (from an instances JSON)."""

    name: str
    image_id: int
    width: int = 0
    height: int = 0
    #: (class_id, (top, left, bottom, right) normalized)
    objects: list[tuple[int, tuple[float, float, float, float]]] = field(default_factory=list)
    iscrowd: list[int] | None = None
    area: list[float] | None = None


@dataclass
class Detection:
    class_id: int
    score: float
    box: tuple[float, float, float, float]  # (top, left, bottom, right) normalized


@dataclass(frozen=True)
class MeanAveragePrecision:
    """COCOeval's results for bounding boxes: AP per IoU threshold (area all, 100 detections),
    their mean (the COCO mAP, `stats[0]`), and the 12 standard summary numbers."""

    per_iou: tuple[tuple[float, float], ...]
    overall: float
    stats: tuple[float, ...]


def _xywh(box: tuple[float, float, float, float], w: int, h: int) -> list[float]:
    top, left, bottom, right = box
    return [left * w, top * h, (right - left) * w, (bottom - top) * h]


def coco_map(truths: Sequence[ImageTruth], detections: Sequence[Sequence[Detection]],
             categories: Sequence[int] | None = None) -> MeanAveragePrecision:
    """COCO bounding-box mAP of `detections[i]` against `truths[i]` with pycocotools.

    Boxes are denormalized with each image's pixel size. `categories` default to the class ids
    present in the ground truth (COCOeval scores only ground-truth categories; detections of
    other classes are ignored, as in a COCO submission).
    """
    try:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    except ImportError:
        raise EvaluationError("object-detection mAP needs pycocotools: pip install 'acelera[eval]'") from None
    if len(truths) != len(detections):
        raise ValueError("one detection list per image is required")
    images, results = [], []
    annotations: list[dict[str, Any]] = []
    cats = set(categories or ())
    for t, dets in zip(truths, detections):
        images.append({"id": t.image_id, "file_name": t.name, "width": t.width, "height": t.height})
        for k, (cls, box) in enumerate(t.objects):
            xywh = _xywh(box, t.width, t.height)
            area = t.area[k] if t.area is not None else xywh[2] * xywh[3]
            crowd = t.iscrowd[k] if t.iscrowd is not None else 0
            annotations.append({"id": len(annotations) + 1, "image_id": t.image_id, "category_id": int(cls),
                                "bbox": xywh, "area": float(area), "iscrowd": int(crowd)})
            if categories is None:
                cats.add(int(cls))
        for d in dets:
            results.append({"image_id": t.image_id, "category_id": int(d.class_id),
                            "bbox": _xywh(d.box, t.width, t.height), "score": float(d.score)})
    if not annotations:
        raise EvaluationError("the ground truth has no objects in the evaluated images: mAP is undefined")
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        gt = COCO()
        gt.dataset = {"images": images, "annotations": annotations,
                      "categories": [{"id": c, "name": str(c)} for c in sorted(cats)]}
        gt.createIndex()
        if results:
            dt = gt.loadRes(results)
        else:
            dt = COCO()
            dt.dataset = {"images": images, "annotations": [], "categories": gt.dataset["categories"]}
            dt.createIndex()
        ev = COCOeval(gt, dt, "bbox")
        ev.params.imgIds = [t.image_id for t in truths]
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    precision = ev.eval["precision"]  # [T, R, K, A, M]
    per_iou = []
    for ti, thr in enumerate(ev.params.iouThrs):
        p = precision[ti, :, :, 0, -1]
        p = p[p > -1]
        per_iou.append((round(float(thr), 2), float(np.mean(p)) if p.size else -1.0))
    return MeanAveragePrecision(tuple(per_iou), float(ev.stats[0]), tuple(float(s) for s in ev.stats))


STAT_NAMES = (
    "AP @[IoU=0.50:0.95 | area=all | maxDets=100]", "AP @[IoU=0.50 | area=all | maxDets=100]",
    "AP @[IoU=0.75 | area=all | maxDets=100]", "AP @[IoU=0.50:0.95 | area=small | maxDets=100]",
    "AP @[IoU=0.50:0.95 | area=medium | maxDets=100]", "AP @[IoU=0.50:0.95 | area=large | maxDets=100]",
    "AR @[IoU=0.50:0.95 | area=all | maxDets=1]", "AR @[IoU=0.50:0.95 | area=all | maxDets=10]",
    "AR @[IoU=0.50:0.95 | area=all | maxDets=100]", "AR @[IoU=0.50:0.95 | area=small | maxDets=100]",
    "AR @[IoU=0.50:0.95 | area=medium | maxDets=100]", "AR @[IoU=0.50:0.95 | area=large | maxDets=100]",
)
