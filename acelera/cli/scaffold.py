"""`acelera new-delegate NAME`: scaffold an installable delegate plugin package.

The generated package is what CONTRIBUTING.md's "Writing a delegate" guide walks through;
`examples/third_party_delegate` is this scaffold's output for the name `example`.
"""
from __future__ import annotations

import re
from pathlib import Path

from acelera.core.errors import AceleraError

PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "acelera-{name}"
version = "0.1.0"
description = "{name}: a delegate plugin for acelera"
requires-python = ">=3.10"
dependencies = ["acelera"]

[project.optional-dependencies]
test = ["pytest"]

[project.entry-points."acelera.delegates"]
{module} = "acelera_{module}"

[tool.setuptools]
py-modules = ["acelera_{module}"]

[tool.pytest.ini_options]
# acelera's pytest plugin turns the conformance suite into one test per case for this delegate
addopts = "--acelera-delegate={name}"
'''

MODULE = '''"""{name}: a delegate plugin for acelera (scaffolded by `acelera new-delegate`).

Replace `{cls}Kernel.invoke` with your device's execution of a partition, and extend
OP_TABLE with every op your device runs: the table drives partitioning, `acelera delegates
show {name}` and the conformance suite, which requires every declared op to pass.
"""
from acelera.core.delegate import Constraint, Delegate, OpSupport, OpTable, Support
from acelera.core.subplan import ReferenceKernel
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

NAME = "{name}"
FLAG = "use_{module}"
F32 = frozenset({{"FLOAT32"}})

OP_TABLE = OpTable.of([
    OpSupport("ADD", max_version=2, dtypes=F32),
    OpSupport("MUL", max_version=2, dtypes=F32),
    OpSupport("RELU", max_version=1, dtypes=F32),
    OpSupport("CONV_2D", max_version=1, dtypes=F32, constraints=(
        Constraint("weights must be constant", lambda node: node.inputs[1].is_constant),
    )),
], NAME)


class {cls}Kernel(ReferenceKernel):
    """Runs one partition. This one uses acelera's reference kernels; put your device here."""


class {cls}Delegate(Delegate):
    name = NAME
    backend = "cpu"
    op_table = OP_TABLE

    def prepare(self, partition):
        return {cls}Kernel(partition)


def available() -> Support:
    """Say whether the device is usable here, and if not, why."""
    return Support(True)


SPEC = DelegateSpec(
    name=NAME,
    summary="{name} delegate",
    version="0.1.0",
    flags=(Flag(FLAG, bool, False, "Enable the {name} delegate", NAME, "{name} delegate"),),
    enabled_by=(FLAG,),
    op_table=OP_TABLE,
    model_types=frozenset({{"float32"}}),
    backend="cpu",
    probe=available,
    factory=lambda options: {cls}Delegate(),
)


@hookimpl
def register_delegates(register):
    register(SPEC)
'''

TEST = '''"""The {name} plugin is installed, selected by its flag, and agrees with the CPU reference."""
import numpy as np

import acelera
from acelera.core.builder import In, Out, single_op_model
from acelera.registrar.registry import get_registry


def test_registered():
    assert "{name}" in get_registry().specs


def test_runs_and_matches_reference():
    model = single_op_model("ADD", [In((1, 4)), In((1, 4))], [Out((1, 4))], fused_activation_function="RELU")
    x = np.array([[-2, -1, 1, 2]], np.float32)
    outs = []
    for delegates in ([], [acelera.load_delegate("{name}")]):
        it = acelera.Interpreter(model_content=model, experimental_delegates=delegates)
        it.allocate_tensors()
        it.set_tensor(0, x)
        it.set_tensor(1, x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    assert it.delegation.nodes_of("{name}") == [0]
    np.testing.assert_array_equal(outs[0], outs[1])
'''

README = '''# acelera-{name}

A delegate plugin for acelera (its CONTRIBUTING.md, "Writing a delegate", is the guide), scaffolded by
`acelera new-delegate {name}`.

```
pip install -e .
acelera delegates list          # {name} is listed
acelera benchmark --help        # shows --{flag}
acelera benchmark --graph=model.tflite --{flag}=true
pytest                          # your tests plus acelera's conformance cases for {name}
acelera conformance --delegate {name} --report report/
```

Edit `acelera_{module}.py`: declare the ops your device runs in `OP_TABLE` and run partitions
in `{cls}Kernel`. See "Writing a delegate" in acelera's CONTRIBUTING.md.
'''


def names(name: str) -> dict[str, str]:
    if not re.fullmatch(r"[a-z][a-z0-9-]*[a-z0-9]", name or ""):
        raise AceleraError(f"new-delegate: '{name}' is not a valid name (lowercase letters, digits and '-')")
    module = name.replace("-", "_")
    cls = "".join(p.capitalize() for p in name.split("-"))
    return {"name": name, "module": module, "cls": cls, "flag": f"use_{module}"}


def files(name: str) -> dict[str, str]:
    n = names(name)
    return {
        "pyproject.toml": PYPROJECT.format(**n),
        f"acelera_{n['module']}.py": MODULE.format(**n),
        f"tests/test_{n['module']}.py": TEST.format(**n),
        "README.md": README.format(**n),
    }


def scaffold(name: str, directory: Path) -> list[Path]:
    """Write the package into `directory` (which must not exist or be empty)."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise AceleraError(f"new-delegate: {directory} exists and is not empty")
    written = []
    for rel, text in files(name).items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
