"""`acelera eval image-classification`: TFLite's imagenet_image_classification task.

Images of `--ground_truth_images_path` are evaluated in path order against the lines of
`--ground_truth_labels` (one label per image, in the same order), optionally minus the
1-based image numbers in `--denylist_file_path`, the first `--num_images` of them (0: all).
Each image is centre-cropped (0.875, square), resized to the model input and normalized (see
`acelera.evaluation.images`), run through the test interpreter (the delegates the flags ask
for), and scored top-1..top-10 by comparing label strings as TFLite does. With
`--compare_to_reference` the CPU reference interpreter runs the same inputs, and its accuracy
is printed beside the delegate's, with how often the two top-1 predictions agree.

Output: run_eval.cc's lines (`Num evaluation runs`, latencies, `Top-1 Accuracy: 0.733333`
... `Top-10 Accuracy`), then the delegation summary. `--output_file_path` gets JSON with the
EvaluationStageMetrics field names (TFLite writes a binary proto).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

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
from acelera.evaluation.metrics import TOP_K, TopKAccuracy

__all__ = ["EVAL_IC_FLAGS", "ClassificationResult", "evaluate_classification", "classification_lines",
           "classification_json", "run_image_classification", "apply_denylist"]

#: (name, type, default, help): TFLite's flags for the task, plus --compare_to_reference.
EVAL_IC_FLAGS: list[tuple[str, type, Any, str]] = [
    ("model_file", str, "", "Path to the .tflite image classification model (required)"),
    ("ground_truth_images_path", str, "",
     "Directory of ground truth images, evaluated in alphabetical order of file name (required)"),
    ("ground_truth_labels", str, "",
     "File of ground truth labels, one per line, in the order of the images (required)"),
    ("model_output_labels", str, "",
     "File of the labels of the model's output, one per line in output order (required)"),
    ("denylist_file_path", str, "",
     "Optional file of 1-based image numbers to skip, one per line"),
    ("num_images", int, 0, "Number of images to evaluate; 0 evaluates all"),
    ("output_file_path", str, "", "If set, the final metrics are written there as JSON"),
    ("num_interpreter_threads", int, 1,
     "Threads for the test interpreter (overrides --num_threads); the reference uses 1"),
    ("delegate", str, "", "Delegate for the test interpreter: one of TFLite's nnapi, gpu, hexagon, xnnpack, "
                          "coreml, or any installed delegate's name"),
    ("compare_to_reference", bool, False,
     "Also evaluate on the CPU reference (1 thread, no delegate) and print its accuracy beside"),
]


@dataclass
class ClassificationResult:
    num_runs: int
    preprocessing: RunningStat
    inference: RunningStat
    accuracies: list[float]
    delegation: Delegation
    input_description: str = ""
    reference_accuracies: list[float] | None = None
    reference_inference: RunningStat | None = None
    #: images whose test and reference top-1 predictions are the same label
    top1_agreement: int = 0
    #: per image (file, ground truth, predicted top-1 label[, reference top-1 label])
    predictions: list[tuple[str, ...]] = field(default_factory=list)


def apply_denylist(items: Sequence[Any], path: str) -> list[Any]:
    """`items` without the 1-based positions listed in the file at `path` (TFLite's denylist)."""
    if not path:
        return list(items)
    drop = set()
    for n, line in enumerate(read_lines(path, "denylist_file_path"), 1):
        if not line:
            continue
        try:
            k = int(line)
        except ValueError:
            raise EvaluationError(f"--denylist_file_path: line {n} of {path} is not an image number: '{line}'") from None
        if not 1 <= k <= len(items):
            raise EvaluationError(f"--denylist_file_path: line {n} of {path}: image {k} is out of range "
                                  f"(1..{len(items)})")
        drop.add(k - 1)
    return [x for i, x in enumerate(items) if i not in drop]


def _check_output(it: Any, labels: Sequence[str], labels_file: str, model_file: str) -> dict:
    outs = it.get_output_details()
    if len(outs) != 1:
        raise EvaluationError(f"{model_file}: an image classification model must have 1 output, "
                              f"this one has {len(outs)}")
    d = outs[0]
    n = int(np.prod(d["shape"]))
    dt = np.dtype(d["dtype"])
    if dt not in (np.float32, np.uint8, np.int8):
        raise EvaluationError(f"{model_file}: output type {dt} is not supported (float32, uint8, int8)")
    if len(labels) < n:
        raise EvaluationError(f"--model_output_labels: {labels_file} has {len(labels)} labels, fewer than the "
                              f"{n} classes of the model's output")
    if len(labels) > n:
        raise EvaluationError(f"--model_output_labels: {labels_file} has {len(labels)} labels but the model's "
                              f"output has {n} classes")
    return d


def evaluate_classification(interpreters: Any, images: Sequence[str], truths: Sequence[str],
                            model_labels: Sequence[str], *, model_file: str = "the model",
                            labels_file: str = "the labels file", show_progress: bool | None = None
                            ) -> ClassificationResult:
    """Run every image through the test (and reference) interpreter and count top-K hits."""
    if len(images) != len(truths):
        raise ValueError("one ground truth label per image is required")
    test, ref = interpreters.test, interpreters.reference
    spec = InputSpec.of(test, model_file)
    out = _check_output(test, model_labels, labels_file, model_file)
    in_index = test.get_input_details()[0]["index"]
    topk = TopKAccuracy(model_labels, TOP_K)
    ref_topk = TopKAccuracy(model_labels, TOP_K) if ref is not None else None
    pre, inf, ref_inf = RunningStat(), RunningStat(), RunningStat()
    agree = 0
    predictions = []
    with progress(len(images), "image-classification", show_progress) as advance:
        for path, truth in zip(images, truths):
            t0 = time.perf_counter_ns()
            x, _ = preprocess(path, spec, crop=True)
            pre.update((time.perf_counter_ns() - t0) // 1000)
            test.set_tensor(in_index, x)
            t0 = time.perf_counter_ns()
            test.invoke()
            inf.update((time.perf_counter_ns() - t0) // 1000)
            scores = test.get_tensor(out["index"])
            topk.update(scores, truth)
            pred = model_labels[int(np.argsort(-scores.reshape(-1).astype(np.float64), kind="stable")[0])]
            row: tuple[str, ...] = (path, truth, pred)
            if ref is not None:
                ref.set_tensor(in_index, x)
                t0 = time.perf_counter_ns()
                ref.invoke()
                ref_inf.update((time.perf_counter_ns() - t0) // 1000)
                rscores = ref.get_tensor(out["index"])
                assert ref_topk is not None  # made with the reference interpreter
                ref_topk.update(rscores, truth)
                rpred = model_labels[int(np.argsort(-rscores.reshape(-1).astype(np.float64), kind="stable")[0])]
                agree += rpred == pred
                row += (rpred,)
            predictions.append(row)
            advance()
    return ClassificationResult(
        num_runs=topk.num_runs, preprocessing=pre, inference=inf, accuracies=topk.accuracies,
        delegation=interpreters.delegation, input_description=spec.describe(),
        reference_accuracies=ref_topk.accuracies if ref_topk else None,
        reference_inference=ref_inf if ref is not None else None, top1_agreement=agree, predictions=predictions)


def classification_lines(r: ClassificationResult) -> list[str]:
    """run_eval.cc's summary (reference values beside when compared), then the delegation summary."""
    lines = [f"Num evaluation runs: {r.num_runs}", latency_line("Preprocessing", r.preprocessing),
             latency_line("Inference", r.inference)]
    if r.reference_inference is not None:
        lines.append(latency_line("Reference inference", r.reference_inference))
    for k, acc in enumerate(r.accuracies):
        line = f"Top-{k + 1} Accuracy: {cpp_float(acc)}"
        if r.reference_accuracies is not None:
            line += f"  (CPU reference: {cpp_float(r.reference_accuracies[k])})"
        lines.append(line)
    if r.reference_accuracies is not None and r.num_runs:
        lines.append(f"Top-1 agreement with the CPU reference: {cpp_float(r.top1_agreement / r.num_runs)} "
                     f"({r.top1_agreement} of {r.num_runs} images)")
    if r.input_description:
        lines.append(f"Input normalization: {r.input_description}")
    return lines + r.delegation.lines()


def classification_json(r: ClassificationResult) -> dict[str, Any]:
    """EvaluationStageMetrics field names, plus the reference, delegation and predictions."""
    out: dict[str, Any] = {
        "num_runs": r.num_runs,
        "process_metrics": {"image_classification_metrics": {
            "pre_processing_latency": latency_json(r.preprocessing),
            "inference_latency": latency_json(r.inference),
            "topk_accuracy_metrics": {"topk_accuracies": r.accuracies},
        }},
    }
    if r.reference_accuracies is not None:
        assert r.reference_inference is not None  # both come from the reference run
        out["reference"] = {"inference_latency": latency_json(r.reference_inference),
                            "topk_accuracy_metrics": {"topk_accuracies": r.reference_accuracies},
                            "top1_agreement": r.top1_agreement}
    out["input_normalization"] = r.input_description
    out["delegation"] = r.delegation.to_json()
    keys = ("image", "ground_truth", "top1") + (("reference_top1",) if r.reference_accuracies is not None else ())
    out["predictions"] = [dict(zip(keys, row)) for row in r.predictions]
    return out


def run_image_classification(registry: Any, parsed: Any, log: Callable[[str], Any] = print) -> int:
    """The command: read the flags and files, build the delegates, evaluate, log, write JSON; 0."""
    flag = Flags(parsed, EVAL_IC_FLAGS)
    model_file = flag("model_file")
    if not model_file:
        raise EvaluationError("--model_file is required: the path of the .tflite model to evaluate")
    images_dir = flag("ground_truth_images_path")
    images = list_images(images_dir)
    gt_file = flag("ground_truth_labels")
    truths = read_lines(gt_file, "ground_truth_labels")
    if len(truths) != len(images):
        raise EvaluationError(f"--ground_truth_labels: {gt_file} has {len(truths)} labels but {images_dir} "
                              f"has {len(images)} images; one label per image, in file-name order")
    pairs = apply_denylist(list(zip(images, truths)), flag("denylist_file_path"))
    num = int(flag("num_images"))
    if num < 0:
        raise EvaluationError(f"--num_images must be >= 0 (0 evaluates all), got {num}")
    if num > 0:
        pairs = pairs[:num]
    if not pairs:
        raise EvaluationError("no images left to evaluate after the denylist")
    labels_file = flag("model_output_labels")
    model_labels = read_lines(labels_file, "model_output_labels")
    known = set(model_labels)
    for path, truth in pairs:
        if truth not in known:
            lineno = truths.index(truth) + 1
            raise EvaluationError(f"--ground_truth_labels: label '{truth}' (line {lineno} of {gt_file}, for "
                                  f"{path}) is not among the labels of --model_output_labels {labels_file}")
    its = open_interpreters(registry, parsed, model_file, int(flag("num_interpreter_threads")),
                            bool(flag("compare_to_reference")))
    result = evaluate_classification(its, [p for p, _ in pairs], [t for _, t in pairs], model_labels,
                                     model_file=model_file, labels_file=labels_file)
    for line in classification_lines(result):
        log(line)
    out = flag("output_file_path")
    if out:
        write_json(out, classification_json(result))
    return 0
