"""LiteRT's SignatureRunner: one signature of a model called with keyword inputs
(tflite/python/interpreter.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from acelera.core.errors import InterpreterError

if TYPE_CHECKING:
    from acelera.core.interpreter import Interpreter


class SignatureRunner:
    """Calls one signature with keyword inputs and returns a dict of outputs, like LiteRT's."""

    def __init__(self, interpreter: Interpreter | None = None, signature_key: str | None = None):
        if not interpreter:
            raise InterpreterError("None interpreter provided.")
        if not signature_key:
            raise InterpreterError("None signature_key provided.")
        sigs = {s.key: s for s in interpreter.model.signature_defs}
        if signature_key not in sigs:
            raise InterpreterError(f'Invalid signature_key provided: "{signature_key}".')
        self._sig = sigs[signature_key]
        self._signature_key = signature_key
        self._interpreter = interpreter
        self._inputs = dict(self._sig.inputs)
        self._outputs = dict(self._sig.outputs)
        self._subgraph_index = self._sig.subgraph_index
        self._rt = interpreter._runtime(self._subgraph_index)

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        """Resize the inputs to the given arrays, allocate, set, invoke and return the outputs."""
        if len(kwargs) != len(self._inputs):
            raise InterpreterError(f"Invalid number of inputs provided for running a SignatureDef, "
                                   f"expected {len(self._inputs)} vs provided {len(kwargs)}")
        for name, value in kwargs.items():
            if name not in self._inputs:
                raise InterpreterError(f"Invalid Input name ({name}) for SignatureDef")
            self._rt.resize(self._inputs[name], np.array(value.shape, dtype=np.int32), strict=False)
        self._rt.allocate()
        for name, value in kwargs.items():
            self._rt.set(self._inputs[name], value)
        self._interpreter._run(self._rt.ex)
        return {name: self._rt.get(i) for name, i in self._outputs.items()}

    def get_input_details(self) -> dict[str, dict[str, Any]]:
        return {n: self._rt.details(i) for n, i in self._inputs.items()}

    def get_output_details(self) -> dict[str, dict[str, Any]]:
        return {n: self._rt.details(i) for n, i in self._outputs.items()}

    def allocate_tensors(self) -> None:
        self._rt.allocate()

    def reset_all_variables(self) -> None:
        """The interpreter's reset_all_variables() (resource variables included)."""
        self._interpreter.reset_all_variables()
