"""Partitions run by Core ML itself: the DeviceRunner for a Mac with coremltools.

Opt-in: set ACELERA_COREML_NATIVE=1. Each partition is translated as `export.py` does it (an
ML Program, float16 compute precision, the compute units `--coreml_devices` asks for), loaded
by Core ML and run with `MLModel.predict`. Which unit runs each layer is Core ML's choice, as
it is for the real delegate. Core ML only runs on macOS, so this runner is not exercised on the
Linux hosts acelera is tested on; everywhere else the emulated Neural Engine is used.
"""
from __future__ import annotations

import os
import sys
from types import ModuleType

import numpy as np

from acelera.backends.emulation import DeviceRunner
from acelera.core.delegate import DelegateKernel, Partition
from acelera.plugins.coreml.export import CoreMLExportError, partition_program, require_coremltools

ENV = "ACELERA_COREML_NATIVE"


def wanted() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


class CoreMLRunner(DeviceRunner):
    arithmetic = "Core ML's own (float16 compute precision)"

    def __init__(self, devices: str = "all"):
        if sys.platform != "darwin":
            raise CoreMLExportError(f"{ENV}=1 runs partitions through Core ML, which exists only on macOS "
                                    f"(this is {sys.platform}); unset it to use the emulated Neural Engine")
        self.ct: ModuleType = require_coremltools()
        self.devices: str = devices
        self.device = f"Core ML on this Mac ({'Neural Engine' if devices == 'neural_engine' else 'all units'})"

    def describe(self) -> str:
        return f"{self.device}, {self.arithmetic}"

    def compile(self, partition: Partition) -> DelegateKernel:
        ct = self.ct
        names = {t: f"t{t}" for t in (*partition.inputs, *partition.outputs)}
        units = ct.ComputeUnit.CPU_AND_NE if self.devices == "neural_engine" else ct.ComputeUnit.ALL
        model = ct.convert(partition_program(partition, names), convert_to="mlprogram",
                           minimum_deployment_target=ct.target.iOS15, compute_precision=ct.precision.FLOAT16,
                           compute_units=units)
        return _CoreMLKernel(partition, model, names)


class _CoreMLKernel(DelegateKernel):
    def __init__(self, partition: Partition, model, names):
        super().__init__(partition)
        self.model, self.names = model, names
        self.shapes = {t: tuple(tensor.shape) for ctx in partition.contexts.values()
                       for t, tensor in zip(ctx.op.outputs, ctx.outputs)}

    def invoke(self, *inputs: np.ndarray):
        p = self.partition
        feeds = {self.names[t]: np.asarray(x, np.float32) for t, x in zip(p.inputs, inputs) if t not in p.constants}
        out = self.model.predict(feeds)
        return tuple(np.asarray(out[self.names[t]], np.float32).reshape(self.shapes[t]) for t in p.outputs)
