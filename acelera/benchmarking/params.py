"""benchmark_model's flags: `BenchmarkParams` with TFLite's defaults, their help, types and ranges."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from acelera.registrar.flags import INT32_MAX, INT32_MIN
from acelera.registrar.spec import MAX_THREADS

MEMORY_CHECK_INTERVAL_MS = 50
OP_PROFILING_OUTPUT_MODES = ("stdout", "csv", "proto")


@dataclass
class BenchmarkParams:
    """benchmark_model's flags that apply to acelera, with TFLite's defaults."""

    graph: str = ""
    num_runs: int = 50
    min_secs: float = 1.0
    max_secs: float = 150.0
    run_delay: float = -1.0
    run_frequency: float = -1.0
    num_threads: int = -1
    benchmark_name: str = ""
    output_prefix: str = ""
    warmup_runs: int = 1
    warmup_min_secs: float = 0.5
    verbose: bool = False
    dry_run: bool = False
    report_peak_memory_footprint: bool = False
    memory_footprint_check_interval_ms: int = MEMORY_CHECK_INTERVAL_MS
    input_layer: str = ""
    input_layer_shape: str = ""
    input_layer_value_range: str = ""
    input_layer_value_files: str = ""
    require_full_delegation: bool = False
    enable_op_profiling: bool = False
    op_profiling_output_mode: str = "stdout"
    op_profiling_output_file: str = ""
    output_filepath: str = ""
    result_file_path: str = ""


_HELP: dict[str, str] = {
    "graph": "graph file name",
    "num_runs": "expected number of runs, see also min_secs, max_secs",
    "min_secs": "minimum number of seconds to rerun for, potentially making the actual number of "
                "runs to be greater than num_runs",
    "max_secs": "maximum number of seconds to rerun for, potentially making the actual number of "
                "runs to be less than num_runs. Note if --max-secs is exceeded in the middle of a "
                "run, the benchmark will continue to the end of the run but will not start the next run.",
    "run_delay": "delay between runs in seconds",
    "run_frequency": "Execute at a fixed frequency, instead of a fixed delay. Note if the targeted "
                     "rate per second cannot be reached, the benchmark would start the next run "
                     "immediately, trying its best to catch up. If set, this will override run_delay.",
    "num_threads": "number of threads",
    "benchmark_name": "benchmark name",
    "output_prefix": "benchmark output prefix",
    "warmup_runs": "minimum number of runs performed on initialization, to allow performance "
                   "characteristics to settle, see also warmup_min_secs",
    "warmup_min_secs": "minimum number of seconds to rerun for, potentially making the actual "
                       "number of warm-up runs to be greater than warmup_runs",
    "verbose": "Whether to log parameters whose values are not set. By default, only log those "
               "parameters that are set by parsing their values from the commandline flags.",
    "dry_run": "Whether to run the tool just with simply loading the model, allocating tensors "
               "etc. but without actually invoking any op kernels.",
    "report_peak_memory_footprint": "Report the peak memory footprint by periodically checking the "
                                    "memory footprint. Internally, a separate thread will be spawned "
                                    "for this periodic check. Therefore, the performance benchmark "
                                    "result could be affected.",
    "memory_footprint_check_interval_ms": "The interval in millisecond between two consecutive memory "
                                          "footprint checks. This is only used when "
                                          "--report_peak_memory_footprint is set to true.",
    "input_layer": "input layer names",
    "input_layer_shape": "input layer shape",
    "input_layer_value_range": "A map-like string representing value range for *integer* input "
                               "layers. Each item is separated by ':', and the item value consists "
                               "of input layer name and integer-only range values (both low and high "
                               "are inclusive) separated by ',', e.g. input1,1,2:input2,0,254",
    "input_layer_value_files": "A map-like string representing value file. Each item is separated "
                               "by ',', and the item value consists of input layer name and value "
                               "file path separated by ':', e.g. input1:file_path1,input2:file_path2. "
                               "In case the input layer name contains ':' e.g. \"input:0\", escape it "
                               "with \"::\". If the input_name appears both in input_layer_value_range "
                               "and input_layer_value_files, input_layer_value_range of the input_name "
                               "will be ignored. The file format is binary and it should be array "
                               "format or null separated strings format.",
    "require_full_delegation": "require delegate to run the entire graph",
    "enable_op_profiling": "enable op profiling",
    "op_profiling_output_mode": "Output mode for op profiling results. Supported values are: "
                                "'stdout' and 'csv' ('proto' is not supported by acelera).",
    "op_profiling_output_file": "Output file for op profiling results.",
    "output_filepath": "File path to export outputs layer as binary data.",
    "result_file_path": "Path to save the benchmark result (JSON with the BenchmarkResult proto's "
                        "field names).",
}

_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}


def field_type(f: dataclasses.Field) -> type:
    """The python type of a BenchmarkParams field (its annotation is a string under postponed evaluation)."""
    return _TYPES[f.type] if isinstance(f.type, str) else f.type  # type: ignore[return-value]


#: (name, python type, default, help) for every flag, in BenchmarkParams order.
BENCHMARK_FLAGS: list[tuple[str, type, Any, str]] = [
    (f.name, field_type(f), f.default, _HELP[f.name]) for f in dataclasses.fields(BenchmarkParams)
]

#: a year of seconds: the longest duration a seconds flag may ask for
MAX_SECONDS = 365 * 24 * 3600

#: inclusive (minimum, maximum) of every numeric flag; negative seconds mean "none" as in TFLite
#: (dry runs set -1), and a run frequency <= 0 means "use --run_delay"
BENCHMARK_RANGES: dict[str, tuple[int | float, int | float]] = {
    "num_runs": (0, INT32_MAX),
    "min_secs": (-1.0, MAX_SECONDS),
    "max_secs": (0.0, MAX_SECONDS),
    "run_delay": (-1.0, MAX_SECONDS),
    "run_frequency": (-1.0, 1e6),
    "num_threads": (-1, MAX_THREADS),
    "warmup_runs": (0, INT32_MAX),
    "warmup_min_secs": (-1.0, MAX_SECONDS),
    # <= 0 warns and uses the default, as benchmark_model does
    "memory_footprint_check_interval_ms": (INT32_MIN, INT32_MAX),
}

#: flags naming files the benchmark writes
OUTPUT_PATH_FLAGS = ("op_profiling_output_file", "result_file_path", "output_filepath")
