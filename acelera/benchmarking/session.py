"""The benchmark run: TFLite's `benchmark_model` step by step (benchmark_model.cc,
benchmark_tflite_model.cc).

`run_benchmark(params, make_interpreter, log)` validates and logs the params, starts the
peak-memory monitor, times `Init()` (load the model, resize inputs, apply delegates, allocate),
prepares random or file-backed inputs, runs the warm-up loop and the regular loop, and reports
through the same listeners in the same order (summary log, op profile, result file, output dump).
"""
from __future__ import annotations

import json
import math
import os
import time
from typing import Any, Callable

import numpy as np

from acelera.benchmarking.delegation import check_full_delegation, delegate_lines
from acelera.benchmarking.errors import BenchmarkParamError
from acelera.benchmarking.inputs import (
    RANDOM_SEED,
    load_tensor_data,
    parse_input_layers,
    random_tensor_data,
    tensor_bytes,
)
from acelera.benchmarking.memory import MemoryUsageMonitor, mem_footprint_kb, memory_supported, rss_stats_mb
from acelera.benchmarking.numfmt import fmt_g
from acelera.benchmarking.op_profile import StatsCalculator, profile_output, step_profile_names
from acelera.benchmarking.params import BenchmarkParams
from acelera.benchmarking.results import BenchmarkResult, make_result
from acelera.benchmarking.stats import Stat
from acelera.benchmarking.validation import log_params, validate_params
from acelera.core.errors import AceleraError

Log = Callable[[str], None]


def _now_us() -> int:
    return time.perf_counter_ns() // 1000


class _Session:
    """Init(), input preparation and single runs of one benchmark."""

    def __init__(self, params: BenchmarkParams, make_interpreter: Callable[[], Any], log: Log):
        self.p = params
        self.make_interpreter = make_interpreter
        self.log = log
        self.interp: Any = None
        self.inputs: list[int] = []
        self.inputs_data: list[np.ndarray] = []
        csv = params.op_profiling_output_mode == "csv"
        self.init_profile = StatsCalculator(csv=csv)
        self.run_profile = StatsCalculator(csv=csv)
        self.profile_names: list[tuple[str, str]] = []
        self.on_run: Callable[[bool, int], None] | None = None  # progress display hook

    def init(self) -> None:
        p, log = self.p, self.log
        infos, self.value_ranges, self.value_files = parse_input_layers(p)
        interp = self.make_interpreter()
        self.interp = interp
        log(f"Loaded model {p.graph}")
        if p.num_threads != -1 and getattr(interp, "num_threads", None) is None:
            interp.num_threads = p.num_threads
        sg = interp.model.main
        self.inputs = list(sg.inputs)
        if infos and len(infos) != len(self.inputs):
            raise BenchmarkParamError(f"--input_layer: inputs mismatch: model inputs #:{len(infos)} "
                                      f"expected: {len(self.inputs)}")
        for info, t in zip(infos, self.inputs):
            tensor = sg.tensors[t]
            if info.name != tensor.name:
                log(f"WARN: Tensor # {t} is named {tensor.name} but flags call it {info.name}")
            if tensor.type_name != "STRING" and len(info.shape) != len(interp._rt.ex.shapes[t]):
                raise BenchmarkParamError(f"--input_layer_shape: input tensor #{t} should have "
                                          f"{len(interp._rt.ex.shapes[t])} dimensions!")
        # Value ranges/files name inputs by --input_layer position, or by tensor name without it.
        names = [info.name for info in infos] if infos else [sg.tensors[t].name for t in self.inputs]
        for flag, table in (("input_layer_value_range", self.value_ranges), ("input_layer_value_files", self.value_files)):
            for name in table:
                if name not in names:
                    raise BenchmarkParamError(f"--{flag}: '{name}' is not an input of the model "
                                              f"(inputs: {', '.join(names)})")
        self.input_names = names
        for name in set(self.value_ranges) & set(self.value_files):
            log(f"WARN: The input_name:{name} appears both in input_layer_value_files and input_layer_value_range. "
                f"The input_layer_value_range of the input_name will be ignored.")
        for info, t in zip(infos, self.inputs):
            if sg.tensors[t].type_name != "STRING":
                interp.resize_tensor_input(t, info.shape)

        if len(interp.delegates) >= 2:
            log(f"Going to apply {len(interp.delegates)} delegates one after another.")
        was_allocated = interp._rt.allocated
        if not was_allocated:
            interp.require_full_delegation = p.require_full_delegation
            m0, t0 = mem_footprint_kb(), _now_us()
            interp.allocate_tensors()
            t1, m1 = _now_us(), mem_footprint_kb()
            self.init_profile.add_run([("AllocateTensors/0", "AllocateTensors", t1 - t0, (m1 - m0) * 1000)])
        for line in delegate_lines(interp):
            log(line)
        if p.require_full_delegation and was_allocated:
            check_full_delegation(interp)
        self.profile_names = step_profile_names(interp)

    def prepare_input_data(self) -> None:
        rng = np.random.default_rng(RANDOM_SEED)
        sg = self.interp.model.main
        self.inputs_data = []
        for name, t in zip(self.input_names, self.inputs):
            tensor = sg.tensors[t]
            shape = self.interp._rt.ex.shapes[t]
            if name in self.value_files:
                data = load_tensor_data(tensor, shape, self.value_files[name])
            else:
                data = random_tensor_data(rng, tensor, shape, self.value_ranges.get(name))
            self.inputs_data.append(data)

    def input_bytes(self) -> int:
        return sum(int(d.nbytes) if d.dtype != object else len(tensor_bytes(d)) for d in self.inputs_data)

    def reset_inputs(self) -> None:
        for t, data in zip(self.inputs, self.inputs_data):
            self.interp.set_tensor(t, data)

    def invoke(self, profiled: bool) -> None:
        if not profiled:
            self.interp.invoke()
            return
        secs = self.interp.invoke_profiled()
        self.run_profile.add_run([(name, type_, int(s * 1e6), 0)
                                  for (name, type_), s in zip(self.profile_names, secs)])

    def run(self, min_num_times: int, min_secs: float, max_secs: float, regular: bool) -> tuple[Stat, BaseException | None]:
        """BenchmarkModel::Run: the timed loop; returns the stats and the first run error."""
        p, log = self.p, self.log
        stats = Stat()
        log(f"Running benchmark for at least {min_num_times} iterations and at least {fmt_g(min_secs)} seconds "
            f"but terminate if exceeding {fmt_g(max_secs)} seconds.")
        now_us = _now_us()
        min_finish_us = now_us + int(np.float32(min_secs) * np.float32(1e6))
        max_finish_us = now_us + int(np.float32(max_secs) * np.float32(1e6))
        sleep_s = p.run_delay
        gap = 1.0 / p.run_frequency if p.run_frequency != 0 else math.inf
        next_finish = now_us * 1e-6 + gap
        error: BaseException | None = None
        run = 0
        profiled = regular and p.enable_op_profiling
        while (run < min_num_times or now_us < min_finish_us) and now_us <= max_finish_us:
            self.reset_inputs()
            start = _now_us()
            try:
                self.invoke(profiled)
            except AceleraError as e:
                if error is None:
                    error = e
                log(f"ERROR: {e}")
            end = _now_us()
            stats.update(end - start)
            if p.run_frequency > 0:
                sleep_s = next_finish - _now_us() * 1e-6
                next_finish += gap
            if sleep_s > 0:
                time.sleep(sleep_s)
            now_us = _now_us()
            run += 1
            if self.on_run is not None:
                self.on_run(regular, run)
            if error is not None and not regular:
                break  # a warm-up failure aborts the benchmark
        log(str(stats))
        log("")  # benchmark_model ends the stat line with std::endl inside the log message
        return stats, error


def _model_size_mb(path: str) -> float:
    try:
        return os.path.getsize(path) / 1e6
    except OSError:
        return -1 / 1e6


def _log_summary(log: Log, startup_latency_us: int, warmup: Stat, inference: Stat, supported: bool,
                 init_mem_kb: int, overall_mem_kb: int, peak_mem_mb: float) -> None:
    """BenchmarkLoggingListener::OnBenchmarkEnd."""
    log(f"Inference timings in us: Init: {startup_latency_us}, First inference: {warmup.first}, "
        f"Warmup (avg): {fmt_g(warmup.avg)}, Inference (avg): {fmt_g(inference.avg)}")
    if not supported:
        return
    log("Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to "
        "the actual memory footprint of the model at runtime. Take the information at your discretion.")
    log(f"Memory footprint delta from the start of the tool (MB): init={fmt_g(init_mem_kb / 1024.0)} "
        f"overall={fmt_g(overall_mem_kb / 1024.0)}")
    if peak_mem_mb > 0:
        log(f"Overall peak memory footprint (MB) via periodic monitoring: {fmt_g(peak_mem_mb)}")
        rss = rss_stats_mb()
        if rss is not None:
            _, r, shared, _ = rss
            log("Memory status at the end of exeution:")
            log(f"- VmRSS              : {r} MB")
            log(f"+ RssAnnon           : {r - shared} MB")
            log(f"+ RssFile + RssShmem : {shared} MB")


def _write_profile(session: _Session, p: BenchmarkParams, log: Log) -> str:
    """ProfilingListener: both profile blocks to --op_profiling_output_file, else to the log."""
    text = profile_output(session.init_profile, session.run_profile)
    if p.op_profiling_output_file:
        try:
            with open(p.op_profiling_output_file, "w") as f:
                f.write(text)
            return text
        except OSError:
            pass  # like TFLite, fall back to the log when the file cannot be opened
    for line in text.split("\n")[:-1]:
        log(line)
    return text


def _save_result(path: str, result: BenchmarkResult, log: Log) -> None:
    """ProtoBenchmarkReporter, writing JSON with the proto's field names."""
    try:
        with open(path, "w") as f:
            log(f"Saving benchmark result to: {path}")
            json.dump(result.to_proto_dict(), f, indent=2)
            f.write("\n")
        log(f"Saved benchmark result to: {path}")
    except OSError:
        log(f"ERROR: Failed to save benchmark result to: {path}")


def _save_outputs(path: str, interp: Any) -> None:
    """OutputSaver: every output tensor's bytes, in output order."""
    try:
        with open(path, "wb") as f:
            for t in interp.model.main.outputs:
                f.write(tensor_bytes(interp.get_tensor(t)))
    except OSError:
        pass  # benchmark_model silently skips an unwritable output file


def run_benchmark(params: BenchmarkParams, make_interpreter: Callable[[], Any],
                  log: Log, on_run: Callable[[bool, int], None] | None = None) -> BenchmarkResult:
    """Run benchmark_model's algorithm on the interpreter `make_interpreter()` returns.

    `make_interpreter` is timed as part of initialization (TFLite's Init loads the model too); it
    may return the Interpreter allocated or not, with its delegates attached. Raises
    BenchmarkParamError for bad flags, DelegationError when --require_full_delegation is not
    met, and the run's AceleraError when a warm-up run fails (immediately) or a regular run
    fails (after the summary has been reported, like benchmark_model's status).
    """
    log("STARTING!")
    p = validate_params(params, log)
    log_params(p, log)

    monitor = MemoryUsageMonitor(p.memory_footprint_check_interval_ms) if p.report_peak_memory_footprint else None
    if monitor is not None:
        monitor.start()
    try:
        model_size_mb = _model_size_mb(p.graph)
        session = _Session(p, make_interpreter, log)
        session.on_run = on_run
        start_mem = mem_footprint_kb()
        t0 = _now_us()
        session.init()
        init_end_mem = mem_footprint_kb()
        startup_latency_us = _now_us() - t0
        init_mem_kb = init_end_mem - start_mem

        if model_size_mb > 0:
            log(f"The input model file size (MB): {fmt_g(model_size_mb)}")
        else:
            log("WARN: Failed to get the input model file size.")
        log(f"Initialized session in {fmt_g(startup_latency_us / 1e3)}ms.")

        session.prepare_input_data()
        input_bytes = session.input_bytes()
        if p.dry_run:
            p.warmup_runs, p.warmup_min_secs, p.num_runs, p.min_secs = 0, -1.0, 0, -1.0

        warmup, err = session.run(p.warmup_runs, p.warmup_min_secs, p.max_secs, regular=False)
        if err is not None:
            raise err
        inference, run_error = session.run(p.num_runs, p.min_secs, p.max_secs, regular=True)
        overall_mem_kb = mem_footprint_kb() - start_mem
    finally:
        if monitor is not None:
            monitor.stop()
    peak_mem_mb = monitor.peak_mem_mb if monitor is not None else -1.0

    supported = memory_supported()
    result = make_result(model_size_mb, startup_latency_us, input_bytes, warmup, inference,
                         init_mem_kb if supported else None, overall_mem_kb if supported else None, peak_mem_mb)
    _log_summary(log, startup_latency_us, warmup, inference, supported, init_mem_kb, overall_mem_kb, peak_mem_mb)
    if p.enable_op_profiling:
        result.op_profile = _write_profile(session, p, log)
    if p.result_file_path:
        _save_result(p.result_file_path, result, log)
    if p.output_filepath:
        _save_outputs(p.output_filepath, session.interp)
    if run_error is not None:
        raise run_error
    return result
