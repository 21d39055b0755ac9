"""xnnpack-cpu with num_threads > 1: the same results as with one thread.

The int8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED steps run their parallel kernels (bands
of output rows or channels on numba's threads) when the delegate's num_threads allows: every output is computed by the
same arithmetic whichever band holds it, so the results are bit-exact with the 1-thread run
(and with the reference kernels). Float steps stay within float tolerance (BLAS may split a
GEMM between its threads). Invokes started on several threads at once stay correct: one of
them runs the parallel kernels, the others the serial ones (threads.py).
"""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from xnnpack_int8_models import conv_model, dw_model, fc_model
from xnnpack_testing import run

from acelera import Interpreter, load_delegate
from acelera.plugins.xnnpack_cpu import int8_conv, jit, program, threads

SHARED = ["mobilenet_v2_96_f32", "face_detection_short_range", "face_landmark", "selfie_segmentation", "hand_recrop"]
SHARED_INT8 = ["mobilenet_v2_96_int8", "face_detection_short_range_int8", "face_landmark_int8", "hand_recrop_int8"]


@pytest.fixture(autouse=True)
def numba_kernels(monkeypatch):
    monkeypatch.setattr(jit, "AVAILABLE", True)  # numba is a dependency; ACELERA_XNNPACK_NUMBA=0 must not hide a bug


@pytest.fixture
def parallel_calls(monkeypatch):
    """Counts the parallel kernel calls (numba_threads() > 1 as a step asks) of the interpreters
    prepared while the test runs."""
    calls = [0]
    real = threads.numba_threads

    def counting() -> int:
        n = real()
        calls[0] += n > 1
        return n
    monkeypatch.setattr(threads, "numba_threads", counting)
    return calls


def interp(model: bytes, num_threads: int) -> Interpreter:
    it = Interpreter(model_content=model,
                     experimental_delegates=[load_delegate("xnnpack-cpu", {"num_threads": num_threads})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a node the delegate fails to prepare fails the test
        it.allocate_tensors()
    return it


def inputs(it: Interpreter, seed: int) -> list[tuple[int, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for det in it.get_input_details():
        dt = np.dtype(det["dtype"])
        if np.issubdtype(dt, np.floating):
            x = rng.uniform(-1, 1, det["shape"]).astype(dt)
        else:
            x = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, det["shape"]).astype(dt)
        out.append((det["index"], x))
    return out


def outputs(it: Interpreter, feed: list[tuple[int, np.ndarray]]) -> list[np.ndarray]:
    for i, x in feed:
        it.set_tensor(i, x)
    it.invoke()
    return [it.get_tensor(o["index"]).copy() for o in it.get_output_details()]


def assert_same(got: list[np.ndarray], want: list[np.ndarray], exact: bool) -> None:
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            tol = 1e-4 * np.maximum(1.0, np.abs(w.astype(np.float64)))
            assert np.all(np.abs(g.astype(np.float64) - w) <= tol), float(np.max(np.abs(g.astype(np.float64) - w)))


def two_vs_one(model: bytes, exact: bool, seeds=(0, 1)) -> None:
    one, two = interp(model, 1), interp(model, 2)
    for seed in seeds:
        feed = inputs(one, seed)
        want = outputs(one, feed)
        assert_same(outputs(two, feed), want, exact)
        assert_same(outputs(two, feed), want, exact)  # again: the parallel kernels keep no state
    assert threads.numba_threads() == 1  # restored after the invoke


# --- the shared models ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", SHARED_INT8)
def test_int8_models_two_threads_bit_exact(models_dir, name, parallel_calls):
    two_vs_one((models_dir / f"{name}.tflite").read_bytes(), exact=True)
    if threads.NUMBA_MAX > 1:
        assert parallel_calls[0] > 0  # MobileNet-sized int8 models have steps over PARALLEL_MACS


@pytest.mark.parametrize("name", SHARED)
def test_float_models_two_threads_within_tolerance(models_dir, name):
    two_vs_one((models_dir / f"{name}.tflite").read_bytes(), exact=False, seeds=(0,))


# --- odd shapes: every step parallel, bands of uneven or no rows ----------------------------------

ODD = {
    "conv_3x3_s2_odd": conv_model((1, 19, 23, 13), 37, 3, 3, stride=2),
    "conv_batch3_valid": conv_model((3, 11, 7, 5), 9, 3, 3, padding="VALID", act="RELU6"),
    "conv_1x1_one_row": conv_model((1, 1, 29, 17), 33, 1, 1),
    "conv_5x5_dilated": conv_model((2, 13, 9, 6), 11, 5, 5, dilation=2),
    "conv_single_pixel": conv_model((1, 1, 1, 24), 40, 1, 1),
    "dw_3x3_s2_odd": dw_model((1, 21, 17, 29), 3, stride=2),
    "dw_3x3_batch2": dw_model((2, 9, 11, 48), 3, act="RELU"),
    "dw_5x5_mult2": dw_model((1, 13, 10, 7), 5, mult=2),
    "dw_one_row": dw_model((1, 1, 31, 19), 3),
    "dw_dilated_valid": dw_model((3, 12, 12, 5), 3, dilation=2, padding="VALID"),
    "fc_one_row_odd": fc_model(1, 77, 133),
    "fc_batch5_per_tensor": fc_model(5, 40, 70, per_channel=False, act="RELU"),
    "fc_batch9_no_bias": fc_model(9, 130, 47, bias=False),
    "fc_one_block": fc_model(3, 20, 9),  # one block of NR channels: nothing to split, serial
}
SERIAL = {"fc_one_block"}


def every_step_parallel(monkeypatch) -> None:
    """Every int8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED step runs its parallel kernel
    (threads permitting), however small."""
    monkeypatch.setattr(int8_conv, "PARALLEL_MACS", 0)
    monkeypatch.setattr(program, "_big", lambda s, tensors: s.gemm_mnk > 0)


@pytest.mark.parametrize("case", sorted(ODD))
@pytest.mark.parametrize("num_threads", [2, 3])
def test_odd_shapes_parallel_bit_exact(monkeypatch, parallel_calls, case, num_threads):
    every_step_parallel(monkeypatch)
    model = ODD[case]
    for seed in (0, 1):
        want, one, _, _ = run(model, seed, num_threads=1)
        _, got, _, _ = run(model, seed, num_threads=num_threads)
        assert_same(one, want, exact=True)
        assert_same(got, want, exact=True)
    if threads.NUMBA_MAX > 1:
        assert (parallel_calls[0] > 0) == (case not in SERIAL)


# --- threads --------------------------------------------------------------------------------------

def test_threading_layer_is_chosen_explicitly():
    import os

    layer = threads.threading_layer()
    if not os.environ.get("NUMBA_THREADING_LAYER"):
        assert layer in threads.LAYER_PRIORITY[:2]


def test_concurrent_invokes_stay_exact(monkeypatch):
    """Interpreters with num_threads=2 invoked on several threads at once: one runs the parallel
    kernels, the others the serial ones (workqueue would abort on a concurrent launch)."""
    every_step_parallel(monkeypatch)
    model = conv_model((1, 24, 24, 16), 32, 3, 3)
    ref = interp(model, 1)
    feed = inputs(ref, 3)
    want = outputs(ref, feed)
    its = [interp(model, 2) for _ in range(3)]
    errors: list[BaseException] = []
    seen: list[int] = []

    def work(it):
        try:
            for _ in range(30):
                seen.append(threads.numba_threads())
                assert_same(outputs(it, feed), want, exact=True)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(it,)) for it in its]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
    assert set(seen) == {1}  # outside an invoke, on every thread


def test_thread_limit_runs_serial_while_another_invoke_holds_the_threads():
    lim = threads.ThreadLimit(2, big_gemm=True)
    seen: list[int] = []
    lim.run([lambda: seen.append(threads.numba_threads())])
    assert seen == [min(2, threads.NUMBA_MAX)]
    assert threads._gate.acquire(blocking=False)
    try:
        lim.run([lambda: seen.append(threads.numba_threads())])
    finally:
        threads._gate.release()
    assert seen[-1] == 1 and threads.numba_threads() == 1


def test_thread_limit_keeps_to_the_faster_way():
    lim = threads.ThreadLimit(2, big_gemm=True)
    lim.invokes = 3  # past the compiling invokes
    lim._timed(True, 1e-3)
    lim._timed(False, 5e-4)
    assert not lim.parallel  # a loaded machine: one thread was faster
    for _ in range(8):
        lim._timed(True, 1e-4)
    assert lim.parallel
    ways = []
    for _ in range(2 * lim.PROBE):
        lim.run([lambda: ways.append(threads.numba_threads())])
    assert ways.count(1) >= 1 and ways.count(min(2, threads.NUMBA_MAX)) >= lim.PROBE  # probes the other way
