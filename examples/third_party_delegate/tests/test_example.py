"""The example plugin is installed, selected by its flag, and agrees with the CPU reference."""
import numpy as np

import acelera
from acelera.core.builder import In, Out, single_op_model
from acelera.registrar.registry import get_registry


def test_registered():
    assert "example" in get_registry().specs


def test_runs_and_matches_reference():
    model = single_op_model("ADD", [In((1, 4)), In((1, 4))], [Out((1, 4))], fused_activation_function="RELU")
    x = np.array([[-2, -1, 1, 2]], np.float32)
    outs = []
    for delegates in ([], [acelera.load_delegate("example")]):
        it = acelera.Interpreter(model_content=model, experimental_delegates=delegates)
        it.allocate_tensors()
        it.set_tensor(0, x)
        it.set_tensor(1, x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    assert it.delegation.nodes_of("example") == [0]
    np.testing.assert_array_equal(outs[0], outs[1])
