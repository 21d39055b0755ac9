"""The LiteRT Python `Interpreter` API over acelera's executor.

Code written for `ai_edge_litert.interpreter.Interpreter` runs unchanged: the same constructor
arguments, methods, detail dictionaries, and exception types (`ValueError` for a bad model or a
misused call, `RuntimeError` for a call the interpreter's state refuses; every one is also an
`acelera.AceleraError`). Mirrors tflite/python/interpreter.py and
tflite/python/interpreter_wrapper/interpreter_wrapper.cc of google-ai-edge/LiteRT.

Op resolvers (`experimental_op_resolver_type`): `OpResolverType.AUTO` (the default, as in
LiteRT) and `BUILTIN` run acelera's reference kernels with the `xnnpack-cpu` delegate applied
after the user's delegates, when that plugin is installed and available (LiteRT applies its
default XNNPACK delegate the same way, at the first allocate_tensors); `delegation` then names
it. `BUILTIN_REF` and `BUILTIN_WITHOUT_DEFAULT_DELEGATES` run the reference kernels alone (plus
the user's delegates).

Deliberate differences from LiteRT: `reset_all_variables()` also forgets resource variables,
hashtables and CALL_ONCE state (LiteRT keeps resource variables); `InterpreterWithCustomOps`
takes Python registerers (see its docstring), not C++ symbol names; `resize_tensor_input`
refuses tensors that are not graph inputs; an unresolved op is reported at allocate_tensors.
"""
from __future__ import annotations

import enum
import itertools
import os
import warnings
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from acelera.core import dtypes, hosts, memory
from acelera.core.delegate import Delegate
from acelera.core.errors import AceleraError, InterpreterError, InterpreterStateError, ModelError
from acelera.core.executor import DATA_DEPENDENT_SHAPES, Executor, tune_malloc
from acelera.core.kernels.registry import KernelSpec, PrepareFn
from acelera.core.model import (
    MAX_TENSOR_BYTES,
    Model,
    Operator,
    Subgraph,
    Tensor,
    load_model,
)
from acelera.core.opcodes import CUSTOM
from acelera.core.runtime import ModelRuntime
from acelera.core.signature_runner import SignatureRunner
from acelera.core.tensor_details import string_array, tensor_details, type_name
from acelera.core.thread_guard import ThreadGuard
from acelera.core.threads import blas_may_split, blas_threads

__all__ = [
    "Interpreter",
    "InterpreterError",
    "InterpreterStateError",
    "InterpreterWithCustomOps",
    "OpRegistrar",
    "OpResolverType",
    "SignatureRunner",
]

DEFAULT_DELEGATE = "xnnpack-cpu"
_STRING = dtypes.TYPE_CODES["STRING"]
_UNSAFE = ("There is at least 1 reference to internal data\n      in the interpreter in the form of a "
           "numpy array or slice. Be sure to\n      only hold the function returned from tensor() if you "
           "are using raw\n      data access.")


class OpResolverType(enum.Enum):
    """LiteRT's op resolver choice (`experimental_op_resolver_type`).

    * `AUTO` (default) and `BUILTIN`: reference kernels plus the default `xnnpack-cpu` delegate.
    * `BUILTIN_REF`: reference kernels alone (what acelera's tools use as "the CPU reference").
    * `BUILTIN_WITHOUT_DEFAULT_DELEGATES`: the same as BUILTIN_REF (acelera has one kernel set).
    """

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


def _resolver_type(value: Any) -> OpResolverType:
    """acelera's member for `value`; LiteRT's own enum members are accepted by name."""
    if isinstance(value, OpResolverType):
        return value
    if isinstance(value, enum.Enum) and type(value).__name__ == "OpResolverType" \
            and value.name in OpResolverType.__members__:
        return OpResolverType[value.name]
    raise InterpreterError(f"Unrecognized passed in op resolver type: {value}")


class TFLiteMetrics:
    """LiteRT's metrics hook (metrics_portable.TFLiteMetrics): a no-op outside Google."""

    def increase_counter_interpreter_creation(self) -> None:
        pass


class _Held:
    """The base of a numpy view handed out by tensor(): every view or slice made from it keeps
    this object alive, so the interpreter can tell whether any is still held."""

    __slots__ = ("__array_interface__", "__weakref__", "_array")

    def __init__(self, array: np.ndarray):
        self._array = array
        self.__array_interface__ = array.__array_interface__


class _Runtime:
    """Interpreter state for one subgraph: the executor plus set/get with LiteRT's checks."""

    def __init__(self, interp: Interpreter, sg: Subgraph):
        self.interp = interp
        self.sg = sg
        self.ex = Executor(sg, interp._model_runtime)
        self.allocated = False  # invokable: allocated and not resized since
        self.ever_allocated = False  # tensors have buffers (LiteRT's data != nullptr)

    def details(self, i: int) -> dict[str, Any]:
        i = self.check_index(i)
        return tensor_details(self.sg.tensors[i], self.ex.shapes[i])

    def check_index(self, i: Any) -> int:
        n = len(self.sg.tensors)
        try:
            k = int(i)
        except (TypeError, ValueError):
            raise InterpreterError(f"Invalid tensor index {i!r}: not an integer") from None
        if not 0 <= k < n:
            raise InterpreterError(f"Invalid tensor index {k} exceeds max tensor index {n} "
                                   f"(out of range 0..{n - 1})")
        return k

    def allocate(self) -> None:
        if self.allocated:
            return  # LiteRT: nothing to do while the plan is valid (inputs keep their values)
        memory.check(self.sg, self.ex.shapes, self.interp.max_memory_bytes)
        # the shape pass checks every step at the real shapes (executor.prepare, memory.StepBudget)
        self.interp._model_runtime.max_memory_bytes = self.interp.max_memory_bytes
        self.interp._blas_split.clear()
        try:
            self.interp._build_plan(self.ex)
        except MemoryError as e:
            if isinstance(e, AceleraError):
                raise
            raise memory.MemoryBudgetError(f"out of memory while allocating tensors ({e or 'MemoryError'}); "
                                           f"budget {self.interp.max_memory_bytes} bytes") from None
        except ValueError as e:  # numpy: "array is too big", "maximum supported dimension"
            if isinstance(e, AceleraError):
                raise
            raise ModelError(f"cannot allocate tensors: {e}") from None
        for t in self.sg.inputs:
            tensor = self.sg.tensors[t]
            if tensor.type == _STRING and not tensor.is_constant:
                self.ex.values[t] = np.full(self.ex.shapes[t], b"", dtype=object)
        self.allocated = self.ever_allocated = True

    def _require_buffer(self, i: int, what: str) -> None:
        t = self.sg.tensors[i]
        if not self.ever_allocated and not t.is_constant and int(np.prod(self.ex.shapes[i])) != 0:
            raise InterpreterError(what)

    def set(self, i: Any, value: Any) -> None:
        i = self.check_index(i)
        t = self.sg.tensors[i]
        if t.is_constant:
            raise InterpreterError(f"Cannot set tensor: tensor {i} ('{t.name}') is a constant")
        shape = self.ex.shapes[i]
        if t.type == _STRING:
            self._check_type("STRING", value if isinstance(value, np.ndarray) else np.asarray(value), t, i)
            arr = string_array(value, i)
        else:
            arr = np.asarray(value)
            if arr.dtype != t.dtype:
                raise InterpreterError(f"Cannot set tensor: Got value of type {type_name(arr.dtype)} but "
                                       f"expected type {t.type_name} for input {i}, name: {t.name} "
                                       f"(numpy {arr.dtype}, expected {t.dtype})")
        if arr.ndim != len(shape):
            raise InterpreterError(f"Cannot set tensor: Dimension mismatch. Got {arr.ndim} but expected "
                                   f"{len(shape)} for input {i}.")
        for j, (got, want) in enumerate(zip(arr.shape, shape)):
            if got != want:
                raise InterpreterError(f"Cannot set tensor: Dimension mismatch. Got {got} but expected "
                                       f"{want} for dimension {j} of input {i}.")
        packed = dtypes.PACKED_RANGES.get(t.type)
        if packed is not None and arr.size and (arr.min() < packed[0] or arr.max() > packed[1]):
            raise InterpreterError(f"Cannot set tensor: Values for {t.type_name} input must be between {packed[0]} "
                                   f"and {packed[1]} (input {i}, name: {t.name})")
        self._require_buffer(i, "Cannot set tensor: Tensor is unallocated. Try calling allocate_tensors() first")
        # A new array, not a write into the old one: kernels may key caches on array identity
        # (a view from tensor() therefore keeps showing the previous value).
        self.ex.values[i] = np.array(arr, copy=True)

    @staticmethod
    def _check_type(name: str, arr: np.ndarray, t: Tensor, i: int) -> None:
        got = type_name(arr.dtype)
        if got != name:
            raise InterpreterError(f"Cannot set tensor: Got value of type {got} but expected type "
                                   f"{t.type_name} for input {i}, name: {t.name} ")

    def buffer(self, i: Any) -> np.ndarray:
        """The tensor's current value (constants: their buffer, 1-D when sparse, as LiteRT)."""
        i = self.check_index(i)
        t = self.sg.tensors[i]
        if t.is_constant:
            v = self.ex.values[i]
            return t.data if v is None or t.sparsity is not None else v
        self._require_buffer(i, "Tensor data is null. Run allocate_tensors() first")
        v = self.ex.values[i]
        if v is None:
            v = np.full(self.ex.shapes[i], b"", object) if t.type == _STRING else np.zeros(self.ex.shapes[i], t.dtype)
            self.ex.values[i] = v
        return v

    def get(self, i: Any) -> Any:
        v = np.array(self.buffer(i), copy=True)
        if v.ndim == 0 and v.dtype != object:
            return v[()]  # LiteRT returns a numpy scalar for a 0-d tensor (PyArray_Return)
        return v

    def resize(self, i: Any, size: Any, strict: bool) -> None:
        dims = np.array(size, dtype=np.int32)
        if dims.ndim != 1:
            raise InterpreterError(f"Shape should be 1D instead of {dims.ndim}.")
        i = self.check_index(i)
        if i not in self.sg.inputs:
            raise InterpreterError(f"tensor {i} is not an input of the graph; only inputs can be resized")
        new = tuple(int(d) for d in dims)
        if any(d < 0 for d in new):
            raise InterpreterStateError(f"resize_tensor_input: negative dimension in {list(new)}")
        t = self.sg.tensors[i]
        nbytes = int(np.prod(new, dtype=np.float64)) * t.dtype.itemsize
        if nbytes > MAX_TENSOR_BYTES:
            raise InterpreterStateError(f"resize_tensor_input: shape {list(new)} needs {nbytes} bytes (limit "
                                        f"{MAX_TENSOR_BYTES}, set ACELERA_MAX_TENSOR_BYTES to raise it)")
        if strict:
            cur = self.ex.shapes[i]
            sig = t.shape_signature if len(t.shape_signature) == len(cur) else cur
            if len(cur) != len(new):
                raise InterpreterStateError(f"ResizeInputTensorStrict only allows mutating unknown dimensions "
                                            f"identified by -1: tensor {i} has rank {len(cur)}, got {list(new)}")
            for j, (s, d) in enumerate(zip(sig, new)):
                if s != -1 and s != d:
                    raise InterpreterStateError(
                        f"Attempting to resize dimension {j} of tensor {i} with value {s} to {d}. "
                        f"ResizeInputTensorStrict only allows mutating unknown dimensions identified by -1.")
        if new != self.ex.shapes[i]:
            self.ex.shapes[i] = new
            self.allocated = False

    def invoke(self) -> None:
        if not self.allocated:
            raise InterpreterStateError("Invoke called on model that is not ready: call allocate_tensors() first")
        self.interp._run(self.ex)


class Interpreter:
    """Runs a .tflite model on acelera's reference kernels and the delegates given to it, with
    the API of `ai_edge_litert.interpreter.Interpreter` (see the module docstring)."""

    def __init__(self, model_path: str | os.PathLike | None = None, model_content: bytes | None = None,
                 experimental_delegates: Sequence[Any] | None = None, num_threads: int | None = None,
                 experimental_op_resolver_type: Any = OpResolverType.AUTO,
                 experimental_preserve_all_tensors: bool = False,
                 experimental_disable_delegate_clustering: bool = False,
                 experimental_default_delegate_latest_features: bool = False,
                 experimental_compress_quantization_zero_points: bool = False,
                 experimental_disable_delegate_node_fusion: bool = False,
                 experimental_force_delegate_node_profiling: bool = False,
                 max_memory_bytes: int | None = None, fold_constants: bool = True):
        if not hasattr(self, "_custom_op_registerers"):
            self._custom_op_registerers: list[Any] = []
        self._experimental_compress_quantization_zero_points = experimental_compress_quantization_zero_points
        self.op_resolver_type = _resolver_type(experimental_op_resolver_type)
        if num_threads is not None:
            if not isinstance(num_threads, int):
                raise InterpreterError("type of num_threads should be int")
            if num_threads < 1:
                raise InterpreterError("num_threads should >= 1")
        self.num_threads = num_threads
        tune_malloc()  # once per process (executor.tune_malloc)
        #: acelera extension: bytes allocate_tensors() may plan (memory.py); default: half the RAM
        self.max_memory_bytes = (memory.default_budget() if max_memory_bytes is None
                                 else memory.check_budget_value(max_memory_bytes))
        if model_path and not model_content:
            self.model: Model = _load_path(model_path)
        elif model_content and not model_path:
            self.model = _load_bytes(model_content)
        elif not model_content and not model_path:
            raise InterpreterError("`model_path` or `model_content` must be specified. "
                                   "(Exactly one of them is needed.)")
        else:
            raise InterpreterError("Can't both provide `model_path` and `model_content`")
        self._resolver = self._register_custom_ops(self._custom_op_registerers)
        self._model_runtime = ModelRuntime(self.model, self._resolver)
        #: acelera extension: fold shape computations and constant expressions at allocate_tensors
        #: (executor.py); False keeps every node but weight DEQUANTIZE/DENSIFY in the plan, as LiteRT
        self._model_runtime.fold_constants = bool(fold_constants)
        self.delegates: list[Delegate] = [_as_delegate(d) for d in (experimental_delegates or [])]
        self._delegates = list(experimental_delegates or [])  # LiteRT keeps the objects it was given
        self._default: Delegate | None | Literal[False] = None  # the AUTO delegate, once looked up
        self._quiet: set[int] = set()  # executors whose default-delegate fallbacks stay silent
        self.require_full_delegation = False
        #: acelera extension: a delegate partition that raises at invoke runs on the CPU for that
        #: invoke (with a DelegationWarning) instead of failing it, like LiteRT's InvokeWithCPUFallback
        self.delegate_cpu_fallback = False
        self._views: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._runtimes: dict[int, _Runtime] = {0: _Runtime(self, self.model.main)}
        self._signature_defs = self.get_signature_list()
        self._metrics = TFLiteMetrics()
        self._metrics.increase_counter_interpreter_creation()
        self._guard = ThreadGuard()
        #: threads.blas_may_split per executor, at its first invoke after allocate_tensors()
        self._blas_split: dict[int, bool] = {}

    # --- custom ops, delegates and threads -----------------------------------------------
    def _register_custom_ops(self, registerers: Iterable[Any]):
        if not registerers:
            return None
        registrar = OpRegistrar()
        for r in registerers:
            if isinstance(r, str):
                raise InterpreterError(
                    f"Looking up symbol '{r}' failed: acelera takes Python registerers (callables that "
                    f"receive an OpRegistrar and call add_custom/add_builtin), not C++ symbol names")
            if not callable(r):
                raise TypeError(f"custom_op_registerers takes callables, got {type(r).__name__}")
            r(registrar)
        return registrar.resolve

    def _default_delegate(self) -> Delegate | None:
        """The xnnpack-cpu delegate AUTO and BUILTIN add, unless the user passed one already."""
        if self.op_resolver_type not in (OpResolverType.AUTO, OpResolverType.BUILTIN):
            return None
        if any(d.name == DEFAULT_DELEGATE for d in self.delegates):
            return None
        if self._default is None:
            self._default = False
            try:
                make = hosts.default_delegate
                self._default = (make(DEFAULT_DELEGATE, self.num_threads or -1) if make else None) or False
            except Exception:  # noqa: BLE001 (like LiteRT: no default delegate, the reference kernels)
                self._default = False
        return self._default or None

    def _build_plan(self, ex: Executor) -> None:
        from acelera.core.partition import DelegationWarning, apply_delegates

        auto = self._default_delegate()
        delegates = self.delegates + ([auto] if auto is not None else [])
        with warnings.catch_warnings():
            if auto is not None:  # the default delegate falls back silently, as LiteRT's does
                warnings.filterwarnings("ignore", f"{DEFAULT_DELEGATE} delegate failed", DelegationWarning)
            apply_delegates(ex, delegates, self.require_full_delegation,
                            cpu_fallback=self.delegate_cpu_fallback)
        # Its partitions also fall back silently when shapes turn dynamic at invoke.
        quiet = auto is not None and any(s.delegate == DEFAULT_DELEGATE for s in ex.plan) and any(
            op.op in DATA_DEPENDENT_SHAPES for op in ex.sg.operators)
        (self._quiet.add if quiet else self._quiet.discard)(id(ex))

    def _run(self, ex: Executor) -> None:
        if id(ex) in self._quiet:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", f"{DEFAULT_DELEGATE} partition of nodes", UserWarning)
                self._run_threads(ex)
        else:
            self._run_threads(ex)

    def _run_threads(self, ex: Executor) -> None:
        split = self._blas_split.get(id(ex))
        if split is None:
            others = (t.shape for sg in self.model.subgraphs if sg is not ex.sg for t in sg.tensors)
            split = self._blas_split[id(ex)] = blas_may_split(itertools.chain(ex.shapes, others))
        if split:
            with blas_threads(self.num_threads):
                ex.run()
        else:  # no BLAS call here can use a second thread: leave the pools alone (threads.py)
            ex.run()

    def invoke_profiled(self) -> list[float]:
        """invoke(), returning each execution-plan step's wall time in seconds (op profiling)."""
        self._ensure_safe()
        rt = self._rt
        if not rt.allocated:
            rt.invoke()  # raises the usual "not ready" error
        times: list[float] = []

        with blas_threads(self.num_threads):
            times.extend(rt.ex.run_profiled())
        return times

    @property
    def _rt(self) -> _Runtime:
        return self._runtimes[0]

    def _runtime(self, subgraph_index: Any) -> _Runtime:
        n = len(self.model.subgraphs)
        k = int(subgraph_index)
        if not 0 <= k < n:
            raise InterpreterError(f"Invalid subgraph index {k} exceeds max subgraph index {n}")
        if k not in self._runtimes:
            self._runtimes[k] = _Runtime(self, self.model.subgraphs[k])
        return self._runtimes[k]

    # --- held views ----------------------------------------------------------------------
    def _safe_to_run(self) -> bool:
        """True when no numpy view from tensor() (or a slice of one) is alive."""
        return len(self._views) == 0

    def _ensure_safe(self) -> None:
        if not self._safe_to_run():
            raise InterpreterStateError(_UNSAFE)

    # --- LiteRT API ----------------------------------------------------------------------
    def allocate_tensors(self) -> None:
        with self._guard.call("allocate_tensors"):
            self._ensure_safe()
            self._rt.allocate()

    def invoke(self) -> None:
        """Run the primary subgraph (RuntimeError before allocate_tensors, or while a view
        from tensor() is held; ConcurrentUseError when another thread is using this
        interpreter: thread_guard.py)."""
        guard = self._guard
        guard.enter("invoke", invokes=True)
        ok = False
        try:
            if not self._safe_to_run():
                raise InterpreterStateError(_UNSAFE)
            self._rt.invoke()
            ok = True
        finally:
            guard.leave(ok, invokes=True)

    def close(self) -> None:
        """Release the delegates' device resources (buffers, programs) now: `close()` on each
        delegate kernel of the plan that has one. Also `with Interpreter(...) as it:`. Tensor
        values stay readable; invoke() needs allocate_tensors() again, which prepares new
        kernels. Kernels of an interpreter dropped unclosed are released by their finalizers."""
        with self._guard.call("close"):
            errors = []
            for rt in self._runtimes.values():
                rt.allocated = False
                for kernel in _delegate_kernels(rt.ex.plan):
                    try:
                        kernel.close()
                    except Exception as e:  # noqa: BLE001  (close the others, then report)
                        errors.append(e)
            if errors:
                raise errors[0]

    def __enter__(self) -> Interpreter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def reset_all_variables(self) -> None:
        """Reset every variable (state) tensor to its initial value, and forget resource
        variables, hashtables and CALL_ONCE state (LiteRT keeps resource variables; acelera
        resets them)."""
        for rt in self._runtimes.values():
            rt.ex.reset_variables()
        self._model_runtime.reset()

    def num_subgraphs(self) -> int:
        """The number of subgraphs in the model."""
        return len(self.model.subgraphs)

    def _get_tensor_details(self, tensor_index: Any, subgraph_index: Any) -> dict[str, Any]:
        return self._runtime(subgraph_index).details(tensor_index)

    def _get_op_details(self, op_index: Any) -> dict[str, Any]:
        """Index, op name, input/output tensor indices and their dtypes of a primary-subgraph node."""
        ops = self.model.main.operators
        try:
            k = int(op_index)
        except (TypeError, ValueError):
            raise InterpreterError("Invalid node index") from None
        if not 0 <= k < len(ops):
            raise InterpreterError("Invalid node index")
        op = ops[k]

        def types(idx: Sequence[int]) -> list[type]:
            return [self._get_tensor_details(t, 0)["dtype"] for t in idx if t != -1]
        return {
            "index": k,
            "op_name": op.name or "UnknownCustomOp",
            "inputs": np.array(op.inputs, np.int32),
            "outputs": np.array(op.outputs, np.int32),
            "operand_types": types(op.inputs),
            "result_types": types(op.outputs),
        }

    def _get_ops_details(self) -> list[dict[str, Any]]:
        return [self._get_op_details(i) for i in range(len(self.model.main.operators))]

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict[str, Any]]:
        n = len(self.model.subgraphs)
        if not isinstance(subgraph_index, (int, np.integer)) or not 0 <= subgraph_index < n:
            raise InterpreterError(f"subgraph_index is out of range: {subgraph_index} for the model, "
                                   f"which has {n} subgraphs.")
        rt = self._runtime(subgraph_index)
        return [rt.details(i) for i in range(len(rt.sg.tensors))]

    def get_input_details(self) -> list[dict[str, Any]]:
        return [self._rt.details(i) for i in self.model.main.inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        return [self._rt.details(i) for i in self.model.main.outputs]

    def set_tensor(self, tensor_index: int, value: Any) -> None:
        """Copy `value` into a tensor of the primary subgraph (ValueError on a type or shape
        mismatch, or before allocate_tensors). STRING tensors take numpy arrays of str/bytes."""
        guard = self._guard
        guard.enter("set_tensor", opens=True)
        ok = False
        try:
            self._rt.set(tensor_index, value)
            ok = True
        finally:
            guard.leave(ok, opens=True)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> Any:
        """A copy of a tensor's value (a numpy scalar for a 0-d tensor, bytes objects for
        STRING tensors, the compressed buffer of a sparse constant)."""
        guard = self._guard
        guard.enter("get_tensor")
        ok = False
        try:
            rt = self._runtimes[0] if subgraph_index == 0 else self._runtime(subgraph_index)
            value = rt.get(tensor_index)
            ok = True
        finally:
            guard.leave(ok, reads=True)
        return value

    def tensor(self, tensor_index: int) -> Callable[[], np.ndarray]:
        """A function returning a numpy view of the tensor's current buffer (no copy). While
        such a view (or a slice of it) is alive, allocate_tensors() and invoke() raise
        RuntimeError: hold the function, not the array."""
        rt = self._rt

        def view() -> np.ndarray:
            buf = rt.buffer(tensor_index)
            held = _Held(buf)
            self._views.add(held)
            return np.asarray(held)
        return view

    def resize_tensor_input(self, input_index: int, tensor_size: Sequence[int], strict: bool = False) -> None:
        """Resize a graph input; with `strict`, only dimensions that are -1 in its
        shape_signature may change (RuntimeError otherwise). Call allocate_tensors() after."""
        with self._guard.call("resize_tensor_input", opens=True):
            self._ensure_safe()
            self._rt.resize(input_index, tensor_size, strict)

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        return {s.key: {"inputs": list(s.inputs), "outputs": list(s.outputs)} for s in self.model.signature_defs}

    def _get_full_signature_list(self) -> dict[str, dict[str, dict[str, int]]]:
        return {s.key: {"inputs": dict(s.inputs), "outputs": dict(s.outputs)} for s in self.model.signature_defs}

    def get_signature_runner(self, signature_key: str | None = None) -> SignatureRunner:
        if signature_key is None:
            n = len(self._signature_defs)
            if n != 1:
                extra = " (this model has no signatures)" if n == 0 else ""
                raise InterpreterError(f"SignatureDef signature_key is None and model has {n} Signatures{extra}. "
                                       f"None is only allowed when the model has 1 SignatureDef")
            signature_key = next(iter(self._signature_defs))
        return SignatureRunner(interpreter=self, signature_key=signature_key)

    @property
    def experimental_compress_quantization_zero_points(self) -> bool:
        return self._experimental_compress_quantization_zero_points

    @property
    def delegation(self):
        """The DelegationReport of the primary subgraph: which delegate took which node (the
        default xnnpack-cpu of AUTO included), and why the others did not."""
        return self._rt.ex.report

    @property
    def execution_plan(self):
        """The prepared plan of the primary subgraph (steps with the node indices they execute)."""
        return list(self._rt.ex.plan)


class OpRegistrar:
    """What a Python custom-op registerer receives: kernels it adds here serve only the
    interpreter being built, ahead of acelera's own registry.

    `prepare` follows acelera.core.kernels.registry's contract: it receives a NodeContext and
    returns `run(*inputs) -> array | tuple of arrays`.
    """

    def __init__(self) -> None:
        self._custom: dict[str, KernelSpec] = {}
        self._builtin: dict[str, KernelSpec] = {}

    def add_custom(self, name: str, prepare: PrepareFn, max_version: int = 1,
                   dtypes: Sequence[str] = ()) -> None:
        """Register the kernel of custom op `name` (the model's custom_code)."""
        self._custom[name] = KernelSpec(name, max_version, prepare, tuple(dtypes))

    def add_builtin(self, name: str, prepare: PrepareFn, max_version: int = 1,
                    dtypes: Sequence[str] = ()) -> None:
        """Override builtin op `name` (e.g. "ADD") up to `max_version`; newer versions of the
        op keep acelera's kernel."""
        from acelera.core.opcodes import BUILTIN_CODES

        if name not in BUILTIN_CODES or name == CUSTOM:
            raise InterpreterError(f"add_builtin: '{name}' is not a builtin op (use add_custom)")
        self._builtin[name] = KernelSpec(name, max_version, prepare, tuple(dtypes))

    def resolve(self, op: Operator) -> KernelSpec | None:
        spec = self._custom.get(op.name) if op.op == CUSTOM else self._builtin.get(op.op)
        if spec is None or op.version > spec.max_version:
            return None
        return spec


class InterpreterWithCustomOps(Interpreter):
    """An Interpreter with extra kernels registered by `custom_op_registerers`.

    Each registerer is a Python callable taking an `OpRegistrar`:

        def my_ops(r):
            r.add_custom("Double", lambda node: (lambda x: x + x))

        it = InterpreterWithCustomOps(custom_op_registerers=[my_ops], model_path="m.tflite")

    LiteRT's C++ registerer names (strings) raise ValueError: acelera takes Python registerers.
    """

    def __init__(self, custom_op_registerers: Sequence[Any] | None = None, **kwargs: Any):
        self._custom_op_registerers = list(custom_op_registerers or [])
        super().__init__(**kwargs)


def _delegate_kernels(plan: Sequence[Any]) -> list[Any]:
    """The delegate kernels of an execution plan that have a `close()` (DelegateKernel.close)."""
    from acelera.core.partition import _DelegatedStep

    return [s.fn.kernel for s in plan
            if isinstance(s.fn, _DelegatedStep) and callable(getattr(s.fn.kernel, "close", None))]


def _as_delegate(d: Any) -> Delegate:
    """An acelera Delegate, or a LiteRT Delegate (from ai_edge_litert's load_delegate) wrapped
    by the litert plugin."""
    if isinstance(d, Delegate):
        return d
    if hasattr(d, "_get_native_delegate_pointer"):
        try:
            if hosts.foreign_delegate is None:
                raise ImportError("no host installed (acelera.core.hosts)")
            return hosts.foreign_delegate(d)
        except ImportError as e:
            raise InterpreterError(f"a LiteRT Delegate needs acelera's litert plugin "
                                   f"(acelera.plugins.litert), which cannot load: {e}") from None
    raise InterpreterError(f"experimental_delegates takes acelera Delegate objects (see acelera.load_delegate) "
                           f"or LiteRT Delegate objects, got {type(d).__name__}")


_FLATBUFFER_DAMAGE = ("corrupt flatbuffer", "exceeds the file size", "outside the file", "too small")


def _load_bytes(data: Any, name: str | None = None) -> Model:
    """Parse model bytes; damage the flatbuffer verifier would catch gets LiteRT's message."""
    buf = bytes(data)
    invalid = "The model is not a valid Flatbuffer buffer"
    if len(buf) < 8:
        raise ModelError(f"{invalid}: {len(buf)} bytes is too small to hold a model")
    if buf[4:8] != b"TFL3":
        ident = buf[4:8].decode("latin-1")
        raise ModelError(f"{invalid}: Model provided has model identifier '{ident}', should be 'TFL3'")
    try:
        return load_model(buf, name)
    except ModelError as e:
        if any(s in str(e) for s in _FLATBUFFER_DAMAGE):
            raise ModelError(f"{invalid}: {e}") from None
        raise


def _load_path(path: str | os.PathLike) -> Model:
    try:
        data = Path(os.fspath(path)).read_bytes()
    except OSError as e:
        raise ModelError(f"Could not open '{os.fspath(path)}': cannot read model file: {e.strerror or e}") from None
    return _load_bytes(data, os.fspath(path))
