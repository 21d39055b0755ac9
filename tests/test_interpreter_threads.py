"""One Interpreter shared by threads: refused with a clear error, never a silent mix-up."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from acelera.core.builder import ModelBuilder
from acelera.core.interpreter import Interpreter, OpResolverType
from acelera.core.thread_guard import ConcurrentUseError


def _model() -> bytes:
    """y = x * 2 + 1 over a few hundred elements, through 40 nodes (a window for races)."""
    b = ModelBuilder()
    t = b.add_input("x", (1, 256), np.float32)
    two = b.add_constant("two", np.full((1, 256), 2, np.float32))
    one = b.add_constant("one", np.ones((1, 256), np.float32))
    zero = b.add_constant("zero", np.zeros((1, 256), np.float32))
    t2 = b.add_tensor("t2", (1, 256), np.float32)
    b.add_operator("MUL", [t, two], [t2], fused_activation_function="NONE")
    t = t2
    for i in range(38):
        nxt = b.add_tensor(f"a{i}", (1, 256), np.float32)
        b.add_operator("ADD", [t, zero], [nxt], fused_activation_function="NONE")
        t = nxt
    y = b.add_tensor("y", (1, 256), np.float32)
    b.add_operator("ADD", [t, one], [y], fused_activation_function="NONE")
    b.mark_outputs(y)
    return b.build()


def _interp() -> Interpreter:
    it = Interpreter(model_content=_model(), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def _work(it: Interpreter, seed: int, n: int, outcomes: list) -> None:
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    for k in range(n):
        x = np.full((1, 256), seed * 1000 + k, np.float32)
        try:
            it.set_tensor(i, x)
            it.invoke()
            y = it.get_tensor(o)
        except ConcurrentUseError as e:
            outcomes.append(("refused", str(e)))
            continue
        outcomes.append(("ok",) if np.array_equal(y, x * 2 + 1) else ("wrong",))


def test_one_interpreter_in_two_threads_never_returns_a_mixed_result():
    it = _interp()
    outcomes: list = []
    threads = [threading.Thread(target=_work, args=(it, s, 200, outcomes)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    kinds = [o[0] for o in outcomes]
    assert len(kinds) == 400
    assert kinds.count("wrong") == 0
    refused = [o[1] for o in outcomes if o[0] == "refused"]
    assert all("one Interpreter per thread" in m for m in refused)


def test_two_interpreters_in_two_threads_stay_correct():
    outcomes: list = []
    threads = [threading.Thread(target=_work, args=(_interp(), s, 100, outcomes)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [o[0] for o in outcomes] == ["ok"] * 200


def test_sequential_use_from_a_thread_pool_works():
    it = _interp()
    lock = threading.Lock()
    outcomes: list = []

    def task(s: int) -> None:
        with lock:
            _work(it, s, 1, outcomes)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(task, range(40)))
    assert [o[0] for o in outcomes] == ["ok"] * 40


def test_a_thread_that_set_inputs_owns_the_interpreter_until_it_reads():
    it = _interp()
    i = it.get_input_details()[0]["index"]
    it.set_tensor(i, np.ones((1, 256), np.float32))
    err: list = []

    def other() -> None:
        try:
            it.set_tensor(i, np.zeros((1, 256), np.float32))
        except ConcurrentUseError as e:
            err.append(str(e))
    t = threading.Thread(target=other, name="intruder")
    t.start()
    t.join()
    assert err and "'intruder'" in err[0] and "'MainThread'" in err[0]
    it.invoke()
    it.get_tensor(it.get_output_details()[0]["index"])  # read: the turn ends
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(err) == 1  # the second thread may now use it
