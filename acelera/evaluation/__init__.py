"""Task-based evaluation, like TFLite's evaluation tools, with any delegate.

- `run_image_classification(registry, parsed, log)`: top-1..top-10 accuracy (ILSVRC-style).
- `run_object_detection(registry, parsed, log)`: COCO mAP over IoU 0.5:0.95 for SSD-style models.

`EVAL_IC_FLAGS` / `EVAL_OD_FLAGS` are the tools' own flags (TFLite's names) as
(name, type, default, help); every registrar flag is accepted besides. Images are decoded with
Pillow and the mAP comes from pycocotools (the `eval` extra).
"""
from acelera.evaluation.classification import EVAL_IC_FLAGS, run_image_classification
from acelera.evaluation.common import EvaluationError
from acelera.evaluation.detection import EVAL_OD_FLAGS, run_object_detection

__all__ = ["EVAL_IC_FLAGS", "EVAL_OD_FLAGS", "EvaluationError", "run_image_classification", "run_object_detection"]
