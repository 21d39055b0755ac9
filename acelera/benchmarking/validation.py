"""BenchmarkTfLiteModel::ValidateParams and LogParams: the flags checked (and corrected as TFLite
corrects them) before anything is loaded, then logged."""
from __future__ import annotations

import dataclasses
from typing import Callable

from acelera.benchmarking.errors import BenchmarkParamError, BenchmarkRangeError
from acelera.benchmarking.inputs import parse_input_layers
from acelera.benchmarking.numfmt import fmt_bool, param_str
from acelera.benchmarking.params import (
    BENCHMARK_RANGES,
    MAX_SECONDS,
    MEMORY_CHECK_INTERVAL_MS,
    OP_PROFILING_OUTPUT_MODES,
    OUTPUT_PATH_FLAGS,
    BenchmarkParams,
    field_type,
)
from acelera.core.files import output_path_problem
from acelera.registrar.flags import Flag, FlagValueError

# (flag, description) in BenchmarkModel::LogParams / BenchmarkTfLiteModel::LogParams order.
_LOGGED_PARAMS: tuple[tuple[str, str], ...] = (
    ("num_runs", "Min num runs"),
    ("min_secs", "Min runs duration (seconds)"),
    ("max_secs", "Max runs duration (seconds)"),
    ("run_delay", "Inter-run delay (seconds)"),
    ("run_frequency", "Number of prorated runs per second"),
    ("num_threads", "Num threads"),
    ("benchmark_name", "Benchmark name"),
    ("output_prefix", "Output prefix"),
    ("warmup_runs", "Min warmup runs"),
    ("warmup_min_secs", "Min warmup runs duration (seconds)"),
    ("dry_run", "Run w/o invoking kernels"),
    ("report_peak_memory_footprint", "Report the peak memory footprint"),
    ("memory_footprint_check_interval_ms", "Memory footprint check interval (ms)"),
    ("graph", "Graph"),
    ("input_layer", "Input layers"),
    ("input_layer_shape", "Input shapes"),
    ("input_layer_value_range", "Input value ranges"),
    ("input_layer_value_files", "Input value files"),
    ("require_full_delegation", "Require full delegation"),
    ("enable_op_profiling", "Enable op profiling"),
    ("op_profiling_output_mode", "Op profiling output mode."),
    ("op_profiling_output_file", "Op profiling output file."),
    ("output_filepath", "File path to export outputs layer to"),
    ("result_file_path", "File path to save the benchmark result in binary proto format"),
)


def validate_params(params: BenchmarkParams, log: Callable[[str], None]) -> BenchmarkParams:
    """BenchmarkTfLiteModel::ValidateParams; returns a copy with TFLite's corrections applied."""
    p = dataclasses.replace(params)
    for f in dataclasses.fields(BenchmarkParams):
        v = getattr(p, f.name)
        want = field_type(f)
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            setattr(p, f.name, float(v))
        elif not isinstance(v, want) or (want is int and isinstance(v, bool)):
            raise BenchmarkParamError(f"--{f.name}: expected {want.__name__}, got {v!r}")
        if f.name in BENCHMARK_RANGES:
            low, high = BENCHMARK_RANGES[f.name]
            try:
                Flag(f.name, want, f.default, minimum=low, maximum=high).check_range(getattr(p, f.name))
            except FlagValueError as e:
                raise BenchmarkRangeError(str(e)) from None
    if 0 < p.run_frequency < 1 / MAX_SECONDS:
        raise BenchmarkRangeError(f"--run_frequency: {p.run_frequency:g} is out of range (allowed: [-1, 0] for "
                                  f"none, or [{1 / MAX_SECONDS:.3g}, 1000000]: at least one run a year)")
    for name in OUTPUT_PATH_FLAGS:
        path = getattr(p, name)
        problem = output_path_problem(path) if path else None
        if problem is not None:
            raise BenchmarkParamError(f"--{name}: cannot write '{path}': {problem}")
    if p.report_peak_memory_footprint and p.memory_footprint_check_interval_ms <= 0:
        log(f"WARN: --memory_footprint_check_interval_ms is set to {p.memory_footprint_check_interval_ms} (ms), "
            f"This value is invalid, and it will be set to the default value {MEMORY_CHECK_INTERVAL_MS} (ms).")
        p.memory_footprint_check_interval_ms = MEMORY_CHECK_INTERVAL_MS
    if not p.graph:
        raise BenchmarkParamError("--graph: please specify the name of your TF Lite input file with --graph")
    if p.enable_op_profiling:
        mode = p.op_profiling_output_mode
        if mode not in OP_PROFILING_OUTPUT_MODES:
            raise BenchmarkParamError(f"--op_profiling_output_mode: output mode '{mode}' is not supported. "
                                      f"Supported values are: 'stdout' and 'csv'.")
        if mode == "proto":
            raise BenchmarkParamError("--op_profiling_output_mode: 'proto' is not supported by acelera "
                                      "(it needs TFLite's profiling proto); use 'stdout' or 'csv'")
    parse_input_layers(p)
    return p


def log_params(params: BenchmarkParams, log: Callable[[str], None]) -> None:
    """LogParams: every param when verbose, else those differing from the default (and Graph)."""
    defaults = BenchmarkParams()
    log(f"Log parameter values verbosely: [{fmt_bool(params.verbose)}]")
    for name, desc in _LOGGED_PARAMS:
        v = getattr(params, name)
        if params.verbose or name == "graph" or v != getattr(defaults, name):
            log(f"{desc}: [{param_str(v)}]")
