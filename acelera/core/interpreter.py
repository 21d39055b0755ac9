"""The LiteRT Python `Interpreter` API over acelera's executor.

Code written for `ai_edge_litert.interpreter.Interpreter` runs unchanged. Differences that a
user can observe are deliberate: errors are `AceleraError` subclasses (InterpreterError is also
a ValueError, as LiteRT raises ValueError), and `experimental_op_resolver_type` is accepted but
acelera has a single reference resolver.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from acelera.core.delegate import Delegate
from acelera.core.errors import InterpreterError as _InterpreterError
from acelera.core.executor import Executor
from acelera.core.model import Model, Subgraph, Tensor, load_model
from acelera.core.runtime import ModelRuntime


class InterpreterError(_InterpreterError, ValueError):
    """Misuse of the Interpreter API (LiteRT raises ValueError for these)."""


def tensor_details(t: Tensor, shape: Sequence[int]) -> dict[str, Any]:
    """A tensor's description with LiteRT's keys."""
    q = t.quantization
    per_tensor = q.scale.size == 1
    return {
        "name": t.name,
        "index": t.index,
        "shape": np.array(shape, np.int32),
        "shape_signature": np.array(t.shape_signature if len(t.shape_signature) == len(shape) else shape, np.int32),
        "dtype": t.dtype.type,
        "quantization": (float(q.scale[0]), int(q.zero_point[0])) if per_tensor else (0.0, 0),
        "quantization_parameters": {
            "scales": q.scale.astype(np.float32),
            "zero_points": q.zero_point.astype(np.int32),
            "quantized_dimension": int(q.quantized_dimension),
        },
        "sparsity_parameters": {},
    }


class _BlasThreads:
    """Runs a function with the BLAS/OpenMP pools at n threads.

    threadpoolctl finds the loaded pools once; per call only their cheap get functions run, and
    a pool is set only when it differs. Pools are left at n afterwards (like an interpreter
    owning its thread pool): restoring them on every invoke cost more than small models'
    whole inference."""

    def __init__(self):
        self._libs = None

    def run(self, n: int, fn: Callable[[], None]) -> None:
        if self._libs is None:
            from threadpoolctl import ThreadpoolController

            self._libs = list(ThreadpoolController().lib_controllers)
        for lib in self._libs:
            if lib.get_num_threads() != n:
                lib.set_num_threads(n)
        fn()


_blas_threads = _BlasThreads()


class _Runtime:
    """Interpreter state for one subgraph: the executor plus set/get with LiteRT's checks."""

    def __init__(self, interp: "Interpreter", sg: Subgraph):
        self.interp = interp
        self.sg = sg
        self.ex = Executor(sg, interp._model_runtime)
        self.allocated = False

    def details(self, i: int) -> dict[str, Any]:
        return tensor_details(self.sg.tensors[i], self.ex.shapes[i])

    def check_index(self, i: int) -> int:
        if not isinstance(i, (int, np.integer)) or not 0 <= int(i) < len(self.sg.tensors):
            raise InterpreterError(f"tensor index {i} out of range (0..{len(self.sg.tensors) - 1})")
        return int(i)

    def allocate(self) -> None:
        self.interp._build_plan(self.ex)
        self.allocated = True

    def set(self, i: int, value: Any) -> None:
        i = self.check_index(i)
        t = self.sg.tensors[i]
        if t.is_constant:
            raise InterpreterError(f"Cannot set tensor: tensor {i} ('{t.name}') is a constant")
        arr = np.asarray(value)
        if t.type_name == "STRING" and arr.dtype.kind in "SUO":
            arr = np.vectorize(lambda v: v if isinstance(v, bytes) else str(v).encode(), otypes=[object])(arr) \
                if arr.size else arr.astype(object)
        if arr.dtype != t.dtype:
            raise InterpreterError(f"Cannot set tensor: Got value of type {arr.dtype} but expected type "
                                   f"{t.dtype} for input {i}, name: {t.name}")
        shape = self.ex.shapes[i]
        if arr.shape != shape:
            raise InterpreterError(f"Cannot set tensor: Dimension mismatch. Got shape {list(arr.shape)} but "
                                   f"expected {list(shape)} for input {i}, name: {t.name}")
        self.ex.values[i] = np.array(arr, copy=True)

    def get(self, i: int) -> np.ndarray:
        i = self.check_index(i)
        v = self.ex.values[i]
        if v is None:
            t = self.sg.tensors[i]
            return np.zeros(self.ex.shapes[i], t.dtype)
        return np.array(v, copy=True)

    def resize(self, i: int, size: Sequence[int], strict: bool) -> None:
        i = self.check_index(i)
        if i not in self.sg.inputs:
            raise InterpreterError(f"tensor {i} is not an input of the graph; only inputs can be resized")
        try:
            new = tuple(int(d) for d in size)
        except (TypeError, ValueError):
            raise InterpreterError(f"resize_tensor_input: invalid shape {size!r}") from None
        if any(d < 0 for d in new):
            raise InterpreterError(f"resize_tensor_input: negative dimension in {list(new)}")
        t = self.sg.tensors[i]
        if strict:
            sig = t.shape_signature
            if len(sig) != len(new) or any(s != -1 and s != d for s, d in zip(sig, new)):
                raise InterpreterError(f"ResizeInputTensorStrict only allows mutating unknown dimensions "
                                       f"identified by -1 (signature {list(sig)}, requested {list(new)})")
        if new != self.ex.shapes[i]:
            self.ex.shapes[i] = new
            self.allocated = False

    def invoke(self) -> None:
        if not self.allocated:
            raise InterpreterError("Invoke called on model that is not ready: call allocate_tensors() first")
        self.interp._run(self.ex)


class Interpreter:
    """Runs a .tflite model on acelera's reference kernels and the delegates given to it."""

    def __init__(self, model_path: str | os.PathLike | None = None, model_content: bytes | None = None,
                 experimental_delegates: Sequence[Any] | None = None, num_threads: int | None = None,
                 experimental_op_resolver_type: Any = None, experimental_preserve_all_tensors: bool = False):
        if (model_path is None) == (model_content is None):
            raise InterpreterError("Exactly one of model_path and model_content must be given")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < -1):
            raise InterpreterError(f"num_threads must be an int >= -1, got {num_threads!r}")
        self.model: Model = load_model(model_path if model_path is not None else model_content)
        self._model_runtime = ModelRuntime(self.model)
        self.num_threads = num_threads
        self.delegates = list(experimental_delegates or [])
        for d in self.delegates:
            if not isinstance(d, Delegate):
                raise InterpreterError(f"experimental_delegates takes acelera Delegate objects "
                                       f"(see acelera.load_delegate), got {type(d).__name__}")
        self.require_full_delegation = False
        self._runtimes: dict[int, _Runtime] = {0: _Runtime(self, self.model.main)}

    # --- hooks for delegates and threads -------------------------------------------------
    def _build_plan(self, ex: Executor) -> None:
        from acelera.core.partition import apply_delegates

        apply_delegates(ex, self.delegates, self.require_full_delegation)

    def _run(self, ex: Executor) -> None:
        if self.num_threads is not None and self.num_threads > 0:
            _blas_threads.run(self.num_threads, ex.run)
        else:
            ex.run()

    def invoke_profiled(self) -> list[float]:
        """invoke(), returning each execution-plan step's wall time in seconds (op profiling)."""
        rt = self._rt
        if not rt.allocated:
            rt.invoke()  # raises the usual "not ready" error
        times: list[float] = []
        run = lambda: times.extend(rt.ex.run_profiled())  # noqa: E731
        if self.num_threads is not None and self.num_threads > 0:
            _blas_threads.run(self.num_threads, run)
        else:
            run()
        return times

    @property
    def _rt(self) -> _Runtime:
        return self._runtimes[0]

    # --- LiteRT API ----------------------------------------------------------------------
    def allocate_tensors(self) -> None:
        self._rt.allocate()

    def invoke(self) -> None:
        rt = self._runtimes[0]
        if not rt.allocated:
            rt.invoke()  # raises the usual "not ready" error
        else:
            self._run(rt.ex)

    def reset_all_variables(self) -> None:
        """Reset every variable (state) tensor to its initial value, and forget resource
        variables and CALL_ONCE state (LiteRT keeps resource variables; acelera resets them)."""
        for rt in self._runtimes.values():
            rt.ex.reset_variables()
        self._model_runtime.reset()

    def get_input_details(self) -> list[dict[str, Any]]:
        return [self._rt.details(i) for i in self.model.main.inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        return [self._rt.details(i) for i in self.model.main.outputs]

    def get_tensor_details(self) -> list[dict[str, Any]]:
        return [self._rt.details(i) for i in range(len(self.model.main.tensors))]

    def set_tensor(self, tensor_index: int, value: Any) -> None:
        self._rt.set(tensor_index, value)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        return self._runtime(subgraph_index).get(tensor_index)

    def tensor(self, tensor_index: int) -> Callable[[], np.ndarray]:
        """A function returning a view of the tensor's current buffer (LiteRT's zero-copy accessor)."""
        rt = self._rt
        i = rt.check_index(tensor_index)
        return lambda: rt.ex.values[i] if rt.ex.values[i] is not None else rt.get(i)

    def resize_tensor_input(self, input_index: int, tensor_size: Sequence[int], strict: bool = False) -> None:
        self._rt.resize(input_index, tensor_size, strict)

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        return {s.key: {"inputs": list(s.inputs), "outputs": list(s.outputs)} for s in self.model.signature_defs}

    def get_signature_runner(self, signature_key: str | None = None) -> "SignatureRunner":
        sigs = {s.key: s for s in self.model.signature_defs}
        if not sigs:
            raise InterpreterError("SignatureDef signature_key is None and model has no signatures")
        if signature_key is None:
            if len(sigs) > 1:
                raise InterpreterError(f"SignatureDef signature_key is None and model has {len(sigs)} "
                                       f"signatures: {sorted(sigs)}")
            signature_key = next(iter(sigs))
        if signature_key not in sigs:
            raise InterpreterError(f"Invalid signature_key provided: '{signature_key}'; the model has {sorted(sigs)}")
        return SignatureRunner(self, sigs[signature_key])

    def _runtime(self, subgraph_index: int) -> _Runtime:
        if not 0 <= subgraph_index < len(self.model.subgraphs):
            raise InterpreterError(f"subgraph index {subgraph_index} out of range")
        if subgraph_index not in self._runtimes:
            self._runtimes[subgraph_index] = _Runtime(self, self.model.subgraphs[subgraph_index])
        return self._runtimes[subgraph_index]

    @property
    def delegation(self):
        """The DelegationReport of the main subgraph: which delegate took which node, and why not."""
        return self._rt.ex.report

    @property
    def execution_plan(self):
        """The prepared plan of the main subgraph (steps with the node indices they execute)."""
        return list(self._rt.ex.plan)


class SignatureRunner:
    """Calls one signature with keyword inputs and returns a dict of outputs, like LiteRT's."""

    def __init__(self, interp: Interpreter, sig):
        self._sig = sig
        self._interp = interp
        self._rt = interp._runtime(sig.subgraph_index)

    def reset_all_variables(self) -> None:
        """Reset every variable (state) tensor to its initial value, and forget resource
        variables and CALL_ONCE state (LiteRT keeps resource variables; acelera resets them)."""
        self._interp.reset_all_variables()

    def get_input_details(self) -> dict[str, dict[str, Any]]:
        return {n: self._rt.details(i) for n, i in self._sig.inputs.items()}

    def get_output_details(self) -> dict[str, dict[str, Any]]:
        return {n: self._rt.details(i) for n, i in self._sig.outputs.items()}

    def allocate_tensors(self) -> None:
        self._rt.allocate()

    def __call__(self, **kwargs: Any) -> dict[str, np.ndarray]:
        expected = set(self._sig.inputs)
        if set(kwargs) != expected:
            raise InterpreterError(f"Invalid inputs for signature '{self._sig.key}': expected "
                                   f"{sorted(expected)}, got {sorted(kwargs)}")
        for name, value in kwargs.items():
            i = self._sig.inputs[name]
            arr = np.asarray(value)
            if arr.shape != self._rt.ex.shapes[i]:
                self._rt.resize(i, arr.shape, strict=False)
        if not self._rt.allocated:
            self._rt.allocate()
        for name, value in kwargs.items():
            self._rt.set(self._sig.inputs[name], value)
        self._rt.invoke()
        return {n: self._rt.get(i) for n, i in self._sig.outputs.items()}
