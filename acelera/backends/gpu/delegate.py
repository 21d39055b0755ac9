"""What the GPU delegates share: node support, the partition round and TFLite's GPU log lines.

A backend subclasses `GpuDelegate`, sets `name`, `logger` (and `log_level`), and implements
`prepare` (calling `_log_for(partition)` first, so the log lines come out once per round).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from acelera.backends.gpu.rules import general_support, gpu_precision, unsupported_message
from acelera.core.delegate import Delegate, OpTable, Partition, Support

if TYPE_CHECKING:
    from acelera.backends.gpu.cache import SerializationCache

TANH = 4
#: ops whose fused_activation_function is their own (cell) activation, which the CPU kernel
#: applies, rather than an epilogue the CPU kernels ignore
OWN_ACTIVATION = ("LSTM",)


class GpuDelegate(Delegate):
    name = "gpu"
    backend = "hardware"
    fp16_weights_aware = True
    #: where TFLite's "Following operations are not supported by GPU delegate" lines go
    logger = logging.getLogger("acelera.gpu")
    log_level = logging.INFO
    op_table: OpTable

    def __init__(self, options, dev, op_table, version: str):
        super().__init__()
        self.options = dict(options)
        self.dev = dev
        self.op_table = op_table
        self.version = version
        self.half = bool(options.get("gpu_precision_loss_allowed", True))
        self.enable_quant = bool(options.get("gpu_experimental_enable_quant", True))
        self.precision = gpu_precision(options)
        self.cache: SerializationCache | None = None  # a backend with program-binary serialization sets its cache
        self._asked: dict[int, str | None] = {}
        self._round: dict[int, str | None] | None = None
        self._logged = False
        #: what the last prepare did: "compiled", "cache" (plan and binary loaded) — for tests/benchmarks
        self.last_prepare = ""

    def describe(self) -> str:
        storage = "fp16 storage, fp32 arithmetic" if self.half else "fp32"
        return f"{self.name} ({self.backend}: {self.dev.label}, {storage})"

    # --- support ---------------------------------------------------------------------------
    def is_node_supported(self, node) -> Support:
        s = general_support(node, self.enable_quant)
        if (s.ok and int(node.options.get("fused_activation_function", 0) or 0) == TANH
                and node.op.name not in OWN_ACTIVATION):
            # TFLite's GPU delegate applies a fused TANH, its CPU kernels ignore it (clamp
            # only): the node stays on the CPU rather than disagree with the reference.
            s = Support(False, f"{node.op.name}: fused activation TANH is not supported by {self.name}",
                        "constraint")
        if s.ok:
            s = self.op_table.check(node)
        self._asked[node.index] = None if s.ok else s.reason
        return s

    def partition_limits(self):
        # Called once every node was asked: close the round, and log now when nothing runs
        # on the GPU (no partition will be prepared to log it).
        self._round, self._asked, self._logged = self._asked, {}, False
        if self._round and all(r is not None for r in self._round.values()):
            self._log(0)
        return super().partition_limits()

    def _log(self, n_gpu: int) -> None:
        if self._logged or not self._round:
            return
        self._logged = True
        msg = unsupported_message([r for r in self._round.values() if r], n_gpu, len(self._round))
        if msg:
            self.logger.log(self.log_level, msg)

    def _log_for(self, partition: Partition) -> None:
        """At the round's first prepare: log with the nodes this partition (or, with several
        partitions allowed, every supported node) runs on the GPU."""
        if self._round is not None and not self._logged:
            supported = sum(1 for r in self._round.values() if r is None)
            self._log(len(partition.nodes) if self.max_delegated_partitions == 1 else supported)
