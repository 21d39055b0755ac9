"""Native TFLite delegates hosted through LiteRT, as acelera delegates.

A `Source` says how LiteRT runs a standalone model: with the TfLiteDelegate of a native
library (`NativeLibrary`, loaded by ai_edge_litert's `load_delegate`), with a LiteRT
`Delegate` object the user made (`WrappedDelegate`), or with LiteRT's own built-in XNNPACK
(`BuiltinXnnpack`: its default op resolver, which applies XNNPACK at allocation).

`LiteRTHostDelegate` asks LiteRT about every node: the node alone is written as a standalone
model, LiteRT builds it with the source applied, and the node counts as supported only when
LiteRT replaced it by a delegate kernel (bridge.delegated_nodes); otherwise the reason says
the delegate left it to LiteRT's CPU kernels (or why LiteRT could not build it). A partition
becomes one LiteRT interpreter over the partition written as a model; if the native delegate
does not take every node of it there, preparing fails and the nodes run on acelera's CPU
kernels, so reports never count a node as delegated that LiteRT ran on its CPU.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from acelera.core.delegate import Delegate, DelegateKernel, OpTable, Partition, Support
from acelera.core.errors import AceleraError
from acelera.core.kernels.registry import NodeContext
from acelera.plugins.litert import bridge


class LiteRTError(AceleraError):
    """LiteRT could not build or run a hosted partition."""


def _litert():
    from ai_edge_litert import interpreter

    return interpreter


class NativeOpTable(OpTable):
    """The op table of a hosted native delegate: empty, because the library declares nothing;
    what it takes is asked of LiteRT node by node. `discovered` tells the conformance suite to
    build the declaration from the delegate's answers."""

    discovered = True


def native_table(name: str) -> NativeOpTable:
    return NativeOpTable({}, name)


# --- sources -------------------------------------------------------------------------------------
class Source:
    """How LiteRT runs a hosted model."""

    label = "LiteRT"
    resolver = "BUILTIN_WITHOUT_DEFAULT_DELEGATES"

    def delegates(self) -> list[Any]:
        """LiteRT Delegate objects to apply to one interpreter."""
        return []

    def describe(self) -> str:
        return self.label


def parse_options(text: str | Mapping[str, Any] | None) -> dict[str, str]:
    """TFLite's --external_delegate_options 'key1:value1;key2:value2' (or a mapping) as a dict;
    a value may itself contain ':' (only the first one splits)."""
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return {str(k): str(v) for k, v in text.items()}
    out: dict[str, str] = {}
    for part in str(text).split(";"):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"malformed external delegate option '{part}' (expected key:value)")
        out[key.strip()] = value.strip()
    return out


def load_library_delegate(path: str, options: Mapping[str, str]) -> Any:
    """ai_edge_litert's load_delegate(path, options), with every failure as a ValueError that
    names the path (LiteRT itself raises OSError or AttributeError for some of them)."""
    from acelera.registrar.registry import DelegateLoadError

    where = f"Failed to load delegate from {path}"
    if os.sep in path and not os.path.exists(path):
        raise DelegateLoadError(f"{where}: no such file")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        msg = str(e)
        raise DelegateLoadError(f"{where}: {msg[len(path) + 2:] if msg.startswith(path + ': ') else msg}") from None
    missing = [s for s in ("tflite_plugin_create_delegate", "tflite_plugin_destroy_delegate") if not hasattr(lib, s)]
    if missing:
        raise DelegateLoadError(f"{where}: not a TFLite external delegate (it does not export {', '.join(missing)})")
    try:
        return _litert().load_delegate(path, dict(options))
    except Exception as e:
        detail = str(e).replace(where, "").strip() or type(e).__name__
        raise DelegateLoadError(f"{where}: {' '.join(detail.split())}") from None


class NativeLibrary(Source):
    """A native delegate library (TFLite's external delegate ABI) with its options. One
    TfLiteDelegate is created here and applied to every interpreter of this delegate."""

    def __init__(self, path: str, options: Mapping[str, str] | None = None):
        self.path = os.fspath(path)
        self.options = dict(options or {})
        self.label = f"the native delegate {os.path.basename(self.path)}"
        self._delegate = load_library_delegate(self.path, self.options)

    def delegates(self) -> list[Any]:
        return [self._delegate]

    def describe(self) -> str:
        opts = ";".join(f"{k}:{v}" for k, v in self.options.items())
        return f"{self.path}" + (f" [{opts}]" if opts else "")


class WrappedDelegate(Source):
    """A LiteRT `Delegate` object (from ai_edge_litert.interpreter.load_delegate)."""

    def __init__(self, delegate: Any):
        self._delegate = delegate
        lib = getattr(delegate, "_library", None)
        self.path = getattr(lib, "_name", None) or "?"
        self.label = f"the native delegate {os.path.basename(self.path)}"

    def delegates(self) -> list[Any]:
        return [self._delegate]

    def describe(self) -> str:
        return f"{self.path} (LiteRT Delegate object)"


class BuiltinXnnpack(Source):
    """LiteRT's own XNNPACK: its default op resolver applies XNNPACK when tensors are allocated."""

    label = "LiteRT's XNNPACK"
    resolver = "AUTO"
    #: XNNPACK's int8 kernels requantize in float: LiteRT's optimized int8 results, not its
    #: reference kernels' (see conformance/tolerances.py, optimized)
    precision = {"float": "float32", "integer": "optimized"}
    #: FLOAT16 activations are computed in float16, which a float32 certification cannot judge
    discover_dtypes = ("FLOAT32", "INT8", "UINT8", "INT16", "INT32")

    def describe(self) -> str:
        import ai_edge_litert

        return f"XNNPACK built into ai-edge-litert {getattr(ai_edge_litert, '__version__', '')}".strip()


# --- running a hosted model ---------------------------------------------------------------------
def _interpreter(source: Source, content: bytes, num_threads: int | None):
    L = _litert()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = L.Interpreter(model_content=content, experimental_delegates=source.delegates() or None,
                           num_threads=num_threads,
                           experimental_op_resolver_type=getattr(L.OpResolverType, source.resolver))
    it.allocate_tensors()
    return it


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _topological(ops: Sequence[Any]) -> list[int]:
    """Node indices of `ops` in an order where producers come first (index order among ready ones)."""
    producer = {t: op.index for op in ops for t in op.outputs}
    done: set[int] = set()
    order: list[int] = []
    pending = list(ops)
    while pending:
        for op in pending:
            if all(t not in producer or producer[t] in done for t in op.inputs if t >= 0):
                order.append(op.index)
                done.add(op.index)
                pending.remove(op)
                break
        else:
            raise LiteRTError("the partition's nodes form a cycle")
    return order


class LiteRTKernel(DelegateKernel):
    """A partition run by one LiteRT interpreter with the source applied."""

    def __init__(self, partition: Partition, interp: Any, written: bridge.Written):
        super().__init__(partition)
        self.interp = interp
        self.written = written
        self.constant = [t in partition.constants for t in partition.inputs]
        self.in_index = [written.tensor_map.get(t) for t in partition.inputs]
        self.out_index = [written.tensor_map[t] for t in partition.outputs]
        shapes = {d["index"]: tuple(int(v) for v in d["shape"]) for d in interp.get_input_details()}
        self.in_shape = [shapes.get(i) for i in self.in_index]

    def invoke(self, *inputs: np.ndarray) -> Sequence[np.ndarray]:
        it = self.interp
        try:
            resized = False
            for k, (x, const, idx) in enumerate(zip(inputs, self.constant, self.in_index)):
                if const or idx is None:
                    continue
                if self.in_shape[k] != tuple(np.shape(x)):
                    it.resize_tensor_input(idx, list(np.shape(x)))
                    self.in_shape[k] = tuple(np.shape(x))
                    resized = True
            if resized:
                it.allocate_tensors()
            for x, const, idx in zip(inputs, self.constant, self.in_index):
                if not const and idx is not None:
                    it.set_tensor(idx, np.ascontiguousarray(x))
            it.invoke()
            return tuple(np.asarray(it.get_tensor(i)) for i in self.out_index)
        except AceleraError:
            raise
        except Exception as e:
            from acelera.core.errors import KernelError

            raise KernelError(f"LiteRT failed to run the partition: {_one_line(e)}") from None


class LiteRTHostDelegate(Delegate):
    """An acelera delegate whose partitions run in LiteRT with a native delegate applied."""

    def __init__(self, name: str, source: Source | None, backend: str = "hardware",
                 num_threads: int | None = None, max_delegated_partitions: int = 0,
                 min_nodes_per_partition: int = 0, missing: str = ""):
        super().__init__(max_delegated_partitions, min_nodes_per_partition)
        self.name = name
        self.backend = backend
        self.source = source
        self.num_threads = num_threads if num_threads and num_threads > 0 else None
        self.op_table = native_table(name)
        self.fp16_weights_aware = True
        #: why this delegate has nothing to run ('' when it has a source)
        self.unavailable_reason = missing if source is None else ""
        self._verdicts: dict[bytes, Support] = {}
        self.precision = dict(getattr(source, "precision", None) or {"float": "float32", "integer": "integer"})
        #: case dtypes the conformance suite may discover this delegate's ops at
        self.discover_dtypes = tuple(getattr(source, "discover_dtypes", None) or
                                     ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT32"))

    def describe(self) -> str:
        where = self.source.describe() if self.source is not None else "no library"
        return f"{self.name} ({self.backend}, through LiteRT: {where})"

    # --- support ---------------------------------------------------------------------------
    def is_node_supported(self, node: NodeContext) -> Support:
        op = node.op
        name = f"{op.name} v{op.version}"
        if self.source is None:
            return Support(False, f"{name}: {self.unavailable_reason}", "delegate")
        why = bridge.unhostable(op, [*node.inputs, *node.outputs]) or _no_reference(op)
        if why:
            return Support(False, f"{name}: not hosted through LiteRT: {why}", "constraint")
        tensors = {}
        constants = {}
        for i, t in zip(op.inputs, node.inputs):
            if t is None:
                continue
            tensors[i] = t
            if t.is_constant:
                data = np.asarray(t.data)
                # fp16 weights seen through a folded DEQUANTIZE (fp16_weights_aware): their value
                if t.type_name == "FLOAT16" and op.op != "DEQUANTIZE":
                    data = data.astype(np.float32)
                constants[i] = data
        for i, t in zip(op.outputs, node.outputs):
            tensors[i] = t
        if any(i not in tensors for i in op.intermediates):
            return Support(False, f"{name}: not hosted through LiteRT: intermediate tensors", "constraint")
        try:
            written = bridge.write_graph([op], tensors, list(op.outputs), constants)
        except bridge.WriteError as e:
            return Support(False, f"{name}: cannot be written as a standalone model for LiteRT: {e}", "constraint")
        key = hashlib.sha1(written.content).digest()
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._ask_litert(name, written.content, [written.tensor_map[t] for t in written.outputs])
            self._verdicts[key] = verdict
        return verdict

    def takes_model(self, content: bytes, name: str = "node 0") -> Support:
        """Whether LiteRT delegates node 0 of `content`, a standalone single-node model (how the
        conformance suite discovers what a native delegate takes)."""
        if self.source is None:
            return Support(False, f"{name}: {self.unavailable_reason}", "delegate")
        key = hashlib.sha1(content).digest()
        if key not in self._verdicts:
            self._verdicts[key] = self._ask_litert(name, content, None)
        return self._verdicts[key]

    def _ask_litert(self, name: str, content: bytes, outputs: Sequence[int] | None) -> Support:
        assert self.source is not None, "callers answer for a delegate without a library themselves"
        try:
            it = _interpreter(self.source, content, self.num_threads)
        except Exception as e:
            return Support(False, f"{name}: LiteRT cannot build the node with {self.source.label}: {_one_line(e)}",
                           "delegate")
        if outputs is None:
            outputs = [int(d["index"]) for d in it.get_output_details()]
        if 0 in bridge.delegated_nodes(it._interpreter, 1, outputs):
            return Support(True)
        return Support(False, f"{name}: {self.source.label} left the node to LiteRT's CPU kernels", "delegate")

    # --- partitions ------------------------------------------------------------------------
    def prepare(self, partition: Partition) -> DelegateKernel:
        if self.source is None:
            raise LiteRTError(self.unavailable_reason)
        order = _topological([partition.contexts[n].op for n in sorted(partition.nodes)])
        ops = [partition.contexts[n].op for n in order]
        tensors: dict[int, Any] = {}
        for n in order:
            ctx = partition.contexts[n]
            for i, t in zip(ctx.op.inputs, ctx.inputs):
                if t is not None:
                    tensors[i] = t
            for i, t in zip(ctx.op.outputs, ctx.outputs):
                tensors[i] = t
        constants = {t: v for t, v in partition.constants.items()}
        inputs = [t for t in partition.inputs if t not in constants]
        try:
            written = bridge.write_graph(ops, tensors, list(partition.outputs), constants, inputs)
        except bridge.WriteError as e:
            raise LiteRTError(f"cannot write the partition as a standalone model: {e}") from None
        try:
            it = _interpreter(self.source, written.content, self.num_threads)
        except Exception as e:
            raise LiteRTError(f"LiteRT cannot build the partition with {self.source.label}: {_one_line(e)}") from None
        outputs = [written.tensor_map[t] for t in written.outputs]
        taken = bridge.delegated_nodes(it._interpreter, len(ops), outputs)
        if len(taken) != len(ops):
            left = [order[k] for k in range(len(ops)) if k not in taken]
            raise LiteRTError(f"{self.source.label} took {len(taken)} of the partition's {len(ops)} nodes in LiteRT "
                              f"and left nodes {left} to LiteRT's CPU kernels")
        return LiteRTKernel(partition, it, written)


def _no_reference(op) -> str:
    """Why a node must stay off LiteRT: acelera has no reference kernel for its op version, so a
    partition that fails to prepare could not fall back and results could not be compared."""
    from acelera.core.errors import UnsupportedOpError
    from acelera.core.kernels.registry import lookup

    try:
        lookup(op)
    except UnsupportedOpError as e:
        return f"acelera's CPU reference cannot run it ({e})"
    return ""
