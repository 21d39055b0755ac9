"""example: a delegate plugin for acelera (scaffolded by `acelera new-delegate`).

Replace `ExampleKernel.invoke` with your device's execution of a partition, and extend
OP_TABLE with every op your device runs: the table drives partitioning, `acelera delegates
show example` and the conformance suite, which requires every declared op to pass.
"""
from acelera.core.delegate import Constraint, Delegate, OpSupport, OpTable, Support
from acelera.core.subplan import ReferenceKernel
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

NAME = "example"
FLAG = "use_example"
F32 = frozenset({"FLOAT32"})

OP_TABLE = OpTable.of([
    OpSupport("ADD", max_version=2, dtypes=F32),
    OpSupport("MUL", max_version=2, dtypes=F32),
    OpSupport("RELU", max_version=1, dtypes=F32),
    OpSupport("CONV_2D", max_version=1, dtypes=F32, constraints=(
        Constraint("weights must be constant", lambda node: node.inputs[1].is_constant),
    )),
], NAME)


class ExampleKernel(ReferenceKernel):
    """Runs one partition. This one uses acelera's reference kernels; put your device here."""


class ExampleDelegate(Delegate):
    name = NAME
    backend = "cpu"
    op_table = OP_TABLE

    def prepare(self, partition):
        return ExampleKernel(partition)


def available() -> Support:
    """Say whether the device is usable here, and if not, why."""
    return Support(True)


SPEC = DelegateSpec(
    name=NAME,
    summary="example delegate",
    version="0.1.0",
    flags=(Flag(FLAG, bool, False, "Enable the example delegate", NAME, "example delegate"),),
    enabled_by=(FLAG,),
    op_table=OP_TABLE,
    model_types=frozenset({"float32"}),
    backend="cpu",
    probe=available,
    factory=lambda options: ExampleDelegate(),
)


@hookimpl
def register_delegates(register):
    register(SPEC)
