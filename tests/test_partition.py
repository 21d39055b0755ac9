"""Partitioning: TFLite's epoch algorithm, limits, ordering, several delegates, fallback."""

import numpy as np
import pytest

from acelera import Interpreter, OpResolverType
from acelera.core.builder import ModelBuilder
from acelera.core.delegate import Delegate, OpSupport, OpTable, Partition, Support
from acelera.core.executor import Step
from acelera.core.partition import DelegationError, DelegationWarning, Unit, partition_units, select_partitions
from acelera.core.subplan import ReferenceKernel

REF = OpResolverType.BUILTIN_REF  # the reference kernels, not LiteRT's default XNNPACK


def unit(i, ins, outs):
    return Unit((i,), tuple(ins), tuple(outs), Step(f"n{i}", None, tuple(ins), tuple(outs), (i,)))


def test_epoch_example_from_tflite_header():
    # 0->1->2*->3*, 4 (needs 1) -> 5 (needs 3); {2,3} supported gives {0,1,4},{2,3},{5}
    units = [unit(0, [100], [0]), unit(1, [0], [1]), unit(2, [1], [2]), unit(3, [2], [3]),
             unit(4, [1], [4]), unit(5, [4, 3], [5])]
    sup = [False, False, True, True, False, False]
    subsets = partition_units(units, sup)
    assert subsets == [(False, [0, 1, 4]), (True, [2, 3]), (False, [5])]


def test_non_greedy_preserves_order():
    units = [unit(0, [100], [0]), unit(1, [0], [1]), unit(2, [100], [2]), unit(3, [2, 1], [3])]
    sup = [True, False, True, True]
    assert partition_units(units, sup, greedy=True) == [(True, [0, 2]), (False, [1]), (True, [3])]
    assert partition_units(units, sup, greedy=False) == [(True, [0]), (False, [1]), (True, [2, 3])]


def test_select_partitions_limits_and_stable_ties():
    subsets = [[0], [1, 2], [3, 4], [5, 6, 7]]
    sizes = [1] * 8
    assert select_partitions(subsets, sizes, 0, 0) == [[5, 6, 7], [1, 2], [3, 4], [0]]
    assert select_partitions(subsets, sizes, 2, 0) == [[5, 6, 7], [1, 2]]
    assert select_partitions(subsets, sizes, 0, 2) == [[5, 6, 7], [1, 2], [3, 4]]


def chain(ops):
    """x -> op0 -> op1 -> ... with each op one of ADD (x + 1), MUL (x * 2), RELU."""
    b = ModelBuilder()
    t = b.add_input("x", (2, 3), np.float32)
    one = b.add_constant("one", np.ones((2, 3), np.float32))
    two = b.add_constant("two", np.full((2, 3), 2, np.float32))
    for i, op in enumerate(ops):
        nxt = b.add_tensor(f"t{i}", (2, 3), np.float32)
        if op == "RELU":
            b.add_operator("RELU", [t], [nxt])
        else:
            b.add_operator(op, [t, one if op == "ADD" else two], [nxt], fused_activation_function="NONE")
        t = nxt
    b.mark_outputs(t)
    return b.build()


def expected(ops, x):
    for op in ops:
        x = x + 1 if op == "ADD" else x * 2 if op == "MUL" else np.maximum(x, 0)
    return x


class OnlyDelegate(Delegate):
    """Takes the ops it is told to, runs them on the reference kernels, counts invocations."""

    def __init__(self, name, ops, fail_prepare=False, **kw):
        super().__init__(**kw)
        self.name = name
        self.op_table = OpTable.of([OpSupport(op, 3) for op in ops], name)
        self.fail_prepare = fail_prepare
        self.prepared: list[Partition] = []

    def prepare(self, partition):
        if self.fail_prepare:
            raise RuntimeError("device lost")
        self.prepared.append(partition)
        return ReferenceKernel(partition)


def run(ops, delegates, **kw):
    it = Interpreter(experimental_op_resolver_type=REF, model_content=chain(ops), experimental_delegates=delegates)
    for k, v in kw.items():
        setattr(it, k, v)
    it.allocate_tensors()
    x = np.array([[-3, -1, 0], [1, 2, 5]], np.float32)
    it.set_tensor(0, x)
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]), expected(ops, x))
    return it


def test_delegate_takes_supported_runs_and_reasons():
    ops = ["ADD", "ADD", "RELU", "ADD", "MUL"]
    d = OnlyDelegate("adder", ["ADD"])
    it = run(ops, [d])
    rep = it.delegation
    assert rep.nodes_of("adder") == [0, 1, 3]
    assert [p.nodes for p in d.prepared] == [(0, 1), (3,)]
    assert rep.rejections[2] == [("adder", "RELU: op is not supported by adder")]
    assert [s.delegate for s in it.execution_plan] == ["adder", None, "adder", None]


def test_max_partitions_and_min_nodes():
    ops = ["ADD", "ADD", "RELU", "ADD", "MUL", "ADD", "ADD", "ADD"]
    d = OnlyDelegate("adder", ["ADD"], max_delegated_partitions=1)
    assert run(ops, [d]).delegation.nodes_of("adder") == [5, 6, 7]
    d = OnlyDelegate("adder", ["ADD"], min_nodes_per_partition=2)
    assert run(ops, [d]).delegation.nodes_of("adder") == [0, 1, 5, 6, 7]


def test_version_reason():
    class V1(OnlyDelegate):
        pass
    d = V1("v1", [])
    d.op_table = OpTable.of([OpSupport("ADD", max_version=0)], "v1")
    rep = run(["ADD"], [d]).delegation
    assert rep.rejections[0] == [("v1", "ADD v1: max version supported is 0")]


def test_several_delegates_in_order_each_sees_cpu_nodes():
    ops = ["ADD", "MUL", "ADD", "MUL"]
    first = OnlyDelegate("first", ["MUL"])
    second = OnlyDelegate("second", ["ADD", "MUL"])
    rep = run(ops, [first, second]).delegation
    assert rep.nodes_of("first") == [1, 3]
    assert rep.nodes_of("second") == [0, 2]
    assert all(n in (0, 2) for p in second.prepared for n in p.nodes)


def test_prepare_failure_falls_back_with_warning():
    d = OnlyDelegate("flaky", ["ADD"], fail_prepare=True)
    with pytest.warns(DelegationWarning, match="flaky delegate failed to prepare nodes \\[0, 1\\].*device lost"):
        it = run(["ADD", "ADD"], [d])
    assert it.delegation.nodes_of("flaky") == []
    assert it.delegation.failures[0][0] == "flaky"


def test_require_full_delegation():
    d = OnlyDelegate("flaky", ["ADD"], fail_prepare=True)
    with pytest.raises(DelegationError, match="flaky failed to prepare"):
        run(["ADD"], [d], require_full_delegation=True)
    with pytest.raises(DelegationError, match="Disallowed CPU fallback"):
        run(["ADD", "RELU"], [OnlyDelegate("adder", ["ADD"])], require_full_delegation=True)
    run(["ADD", "ADD"], [OnlyDelegate("adder", ["ADD"])], require_full_delegation=True)


def test_wrong_output_from_kernel_is_undone():
    class Bad(OnlyDelegate):
        def prepare(self, partition):
            k = ReferenceKernel(partition)
            k.invoke = lambda *a: (np.zeros((1,), np.float64),)
            return k
    with pytest.warns(DelegationWarning, match="expected float32"):
        it = run(["ADD"], [Bad("bad", ["ADD"])])
    assert it.delegation.nodes_of("bad") == []


def test_raising_support_check_is_a_rejection():
    class Boom(OnlyDelegate):
        def is_node_supported(self, node):
            raise KeyError("oops")
    rep = run(["ADD"], [Boom("boom", ["ADD"])]).delegation
    assert "raised KeyError" in rep.rejections[0][0][1]


def test_no_cycles_with_interleaved_branches():
    # x -> a(ADD) -> b(RELU) -> c(ADD); x -> d(ADD); c + d -> e(ADD)
    b = ModelBuilder()
    x = b.add_input("x", (4,), np.float32)
    one = b.add_constant("one", np.ones(4, np.float32))
    ta, tb, tc, td, te = (b.add_tensor(n, (4,), np.float32) for n in "abcde")
    b.add_operator("ADD", [x, one], [ta], fused_activation_function="NONE")
    b.add_operator("RELU", [ta], [tb])
    b.add_operator("ADD", [tb, one], [tc], fused_activation_function="NONE")
    b.add_operator("ADD", [x, one], [td], fused_activation_function="NONE")
    b.add_operator("ADD", [tc, td], [te], fused_activation_function="NONE")
    b.mark_outputs(te)
    d = OnlyDelegate("adder", ["ADD"])
    it = Interpreter(experimental_op_resolver_type=REF, model_content=b.build(), experimental_delegates=[d])
    it.allocate_tensors()
    xv = np.array([-2, -1, 0, 3], np.float32)
    it.set_tensor(0, xv)
    it.invoke()
    a = xv + 1
    np.testing.assert_allclose(it.get_tensor(te), np.maximum(a, 0) + 1 + xv + 1)
    parts = [p.nodes for p in d.prepared]
    assert (0, 3) in parts and (2, 4) in parts


def test_support_truthiness():
    assert Support(True) and not Support(False, "x")
