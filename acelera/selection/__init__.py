"""Which delegate configuration should a model use on this machine? (`acelera select`)

LiteRT's acceleration service (the mini-benchmark) answers this on Android; `select()` answers
it wherever acelera runs. It tries every configuration of the available delegates that could
apply to the model, in this order (so that a time budget cuts the least likely first):

0. the CPU reference kernels, no delegate (the baseline);
1. each non-emulated delegate alone with its defaults;
2. variants: CPU delegates at num_threads 1, 2 and the machine's core count; delegates that
   declare `gpu_precision_loss_allowed` with it false (their default is true);
3. stacks: each accelerator (a non-CPU delegate) with `xnnpack-cpu` taking the nodes it leaves
   (skipped, with the reason, when the accelerator takes every node or fails alone);
4. the same three steps for emulated delegates (nnapi, hexagon, coreml here), which may win only
   with `allow_emulated=True`: their latency is this machine's emulation, not the device's.

A configuration is a set of flag values, the very ones `--config` reads: its delegates are
built with `Registry.build` from those flags, so what `to_toml()` writes reproduces what was
measured. Each one is
- checked for accuracy against the CPU reference with the inference_diff engine (`diff()`, a
  few runs of random inputs, fixed seed) and judged with the conformance suite's *model-case*
  tolerance of the loosest precision among the delegates that took nodes (tolerances.py):
  float outputs need max|err| <= tol.allowed(max|ref|), quantized outputs are counted in steps
  (and on their average, where the tolerance bounds it); no float64 floor is measured here;
- timed: init (building the delegates, the Interpreter and allocate_tensors(), in this process
  after the accuracy check has built it once, so one-time imports and JIT compilation are not
  counted), and warm latency (latency.measure_latency: the median of N invokes after W);
- for delegates that write a serialization cache (`delegate_serialize_dir` + `_token`, in a
  temporary directory), init again from a filled cache;
- described: which delegate took how many nodes in how many partitions, what stayed on the CPU.

Passing configurations are ranked by median latency (then init time).

The package: candidates.py (which configurations apply, in order), measure.py (accuracy and
latency of one), report.py (the ranked table; TOML, Python, JSON), search.py (`select()`),
trial.py (the rows and statuses), formatting.py.
"""
from __future__ import annotations

from acelera.selection.candidates import plan, thread_counts
from acelera.selection.measure import judge, model_token
from acelera.selection.report import Selection, accuracy_text
from acelera.selection.search import select
from acelera.selection.trial import (
    DEFAULT_ACCURACY_RUNS,
    DEFAULT_TIME_BUDGET,
    ERROR,
    FAIL,
    LEFTOVER_DELEGATE,
    LOOSENESS,
    MAX_WARNINGS,
    NOT_TRIED,
    PASS,
    PRECISION_FLAG,
    SKIPPED,
    Configuration,
    SelectionError,
    Trial,
)

__all__ = [
    "DEFAULT_ACCURACY_RUNS",
    "DEFAULT_TIME_BUDGET",
    "ERROR",
    "FAIL",
    "LEFTOVER_DELEGATE",
    "LOOSENESS",
    "MAX_WARNINGS",
    "NOT_TRIED",
    "PASS",
    "PRECISION_FLAG",
    "SKIPPED",
    "Configuration",
    "Selection",
    "SelectionError",
    "Trial",
    "accuracy_text",
    "judge",
    "model_token",
    "plan",
    "select",
    "thread_counts",
]
