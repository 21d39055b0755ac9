"""TFLite's `benchmark_model` as a library: the engine of `acelera benchmark`.

`run_benchmark(params, make_interpreter, log)` (session.py) runs benchmark_model's algorithm and
returns a `BenchmarkResult`. Every line the tool prints goes through `log(line)`; INFO lines carry
no prefix, warnings are prefixed `WARN: ` and errors `ERROR: ` as TFLite's tools logger does.
Numbers are printed the way a C++ ostream prints them (numfmt.py), so the output can be parsed
by scripts written for benchmark_model.

Modules: `params` (the flags, their help and ranges), `validation` (ValidateParams, LogParams),
`inputs` (the --input_layer* flags, input data), `session` (Init and the timed loops),
`delegation` (the delegate lines), `stats` (Stat), `op_profile` (the op profiling tables),
`memory` (footprint and the peak monitor), `results` (BenchmarkResult), `numfmt`, `errors`.

Deliberate differences from TFLite, all supersets of its behaviour:
- `--input_layer_value_range` / `--input_layer_value_files` may name model inputs when
  `--input_layer` is not given (TFLite aborts: the names must be listed in `--input_layer`).
- `--result_file_path` is written as JSON with the BenchmarkResult proto's field names instead
  of a binary proto; `--op_profiling_output_mode=proto` is refused with an error.
- Errors are AceleraError subclasses with one-line messages instead of log lines + status.
"""
from acelera.benchmarking.errors import (
    BenchmarkError,
    BenchmarkParamError,
    BenchmarkRangeError,
    DisallowedCpuFallback,
)
from acelera.benchmarking.inputs import split_name_and_value_file
from acelera.benchmarking.numfmt import fmt_g
from acelera.benchmarking.op_profile import StatsCalculator
from acelera.benchmarking.params import BENCHMARK_FLAGS, BENCHMARK_RANGES, BenchmarkParams
from acelera.benchmarking.results import BenchmarkResult, LatencyMetrics, MemoryMetrics, MiscMetrics
from acelera.benchmarking.session import run_benchmark
from acelera.benchmarking.stats import Stat, format_stat, percentile
from acelera.benchmarking.validation import validate_params

__all__ = [
    "BENCHMARK_FLAGS", "BENCHMARK_RANGES", "BenchmarkError", "BenchmarkParamError", "BenchmarkRangeError",
    "BenchmarkParams", "BenchmarkResult",
    "DisallowedCpuFallback", "LatencyMetrics", "MemoryMetrics", "MiscMetrics", "Stat",
    "StatsCalculator", "run_benchmark", "format_stat", "percentile",
    "fmt_g", "split_name_and_value_file", "validate_params",
]
