"""Trust in the delegates' on-disk caches (acelera/backends/cache_store.py) and the release of
device resources when an Interpreter is closed or dropped.

- A cache directory others can write, or that belongs to someone else, is not used: one
  CacheWarning, the delegate runs uncached (gpu serialization cache and xnnpack weight cache).
- An entry is opened only as a regular file of this user: a FIFO, a symlink (to /dev/zero, or
  to a good entry), a group/world-writable or foreign file, a file over the size cap is
  refused at once (never read, never waited on) and rebuilt.
- An entry whose bytes were changed (weights rewritten, key kept) fails its SHA-256; one made
  from other constant data fails the constant digest: both are rebuilt, outputs exact.
- One fingerprint for every delegate, covering quantization parameters and custom options.
- Interpreter.close() / `with Interpreter(...)` release the delegate kernels' device resources,
  and a dropped interpreter's GL buffers are freed by the kernels' finalizers.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import hashlib
import os
import threading
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
from needs import require

from acelera import Interpreter, load_delegate
from acelera.backends import cache_store
from acelera.backends.cache_store import CacheWarning
from acelera.core.builder import Const, In, Out, single_op_model
from acelera.core.delegate import SUPPORTED, Delegate, DelegateKernel, Partition
from acelera.core.errors import InterpreterStateError
from acelera.core.interpreter import OpResolverType
from acelera.core.kernels.registry import NodeContext
from acelera.core.model import load_model
from acelera.samples import tiny_cnn

RNG = np.random.default_rng(2024)
X = RNG.uniform(-1, 1, (1, 6, 7, 5)).astype(np.float32)
W = RNG.uniform(-1, 1, (6, 3, 3, 5)).astype(np.float32)
B = RNG.uniform(-1, 1, 6).astype(np.float32)
#: one CONV_2D: its partition's plan holds packed weights
CONV = single_op_model("CONV_2D", [In(X.shape), Const(W), Const(B)], [Out((1, 6, 7, 6))], padding="SAME",
                       stride_h=1, stride_w=1, fused_activation_function="NONE")
GPUS = ["gpu-gl", "gpu-opencl"]
#: xnnpack-cpu: a small float CNN (packed GEMM and depthwise weights)
CNN = tiny_cnn(seed=3)


def gpu(name: str):
    """The GPU delegate module's probe must pass here (else skip, or fail under CI=true)."""
    if name == "gpu-gl":
        require(_import_ok("moderngl"), "moderngl is not installed")
        from acelera.plugins.gpu_gl.context import probe
    else:
        require(_import_ok("pyopencl"), "pyopencl is not installed")
        from acelera.plugins.gpu_opencl.device import probe
    s = probe()
    require(s.ok, f"{name} is unavailable here: {s.reason}")


def _import_ok(mod: str) -> bool:
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def run_gpu(name: str, cache, model: bytes = CONV, x: np.ndarray = X, token: str = "tok"):
    """(delegate, output, CacheWarning messages) of one prepare + invoke with the cache in `cache`."""
    d = load_delegate(name, {"delegate_serialize_dir": str(cache), "delegate_serialize_token": token})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with Interpreter(model_content=model, experimental_delegates=[d]) as it:
            it.allocate_tensors()
            assert it.delegation.nodes_of(name) == [0], it.delegation.failures
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            out = it.get_tensor(it.get_output_details()[0]["index"]).copy()
    return d, out, [str(m.message) for m in w if issubclass(m.category, CacheWarning)]


def reference(model: bytes = CONV, x: np.ndarray = X) -> np.ndarray:
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def only_entry(cache) -> str:
    (p,) = [p for p in os.listdir(cache) if not p.startswith(".")]
    return os.path.join(cache, p)


def foreign(path, monkeypatch) -> None:
    """Make `path` belong to another user: chown as root, else pretend to be another user."""
    if os.geteuid() == 0:
        os.chown(path, 4242, 4242)
    else:
        real = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: real + 1)


@contextmanager
def watchdog(fifo: str, seconds: float = 60):
    """Fail (instead of hanging the suite) when the body blocks opening the FIFO `fifo`."""
    done, fired = threading.Event(), []

    def rescue():
        if not done.wait(seconds):
            fired.append(True)
            try:  # a reader blocked in open(): give it a writer, so the test ends and fails
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
    threading.Thread(target=rescue, daemon=True).start()
    try:
        yield
    finally:
        done.set()
    assert not fired, f"blocked on {fifo} for {seconds} s"


# --- untrusted directories --------------------------------------------------------------------

@pytest.mark.parametrize("name", GPUS)
@pytest.mark.parametrize("mode, who", [(0o777, "group and others"), (0o770, "group"), (0o703, "others")])
def test_serialize_dir_writable_by_others_is_not_used(tmp_path, name, mode, who):
    gpu(name)
    cache = tmp_path / "c"
    _, cold, msgs = run_gpu(name, cache)
    assert msgs == []
    os.chmod(cache, mode)
    d, out, msgs = run_gpu(name, cache)
    assert len(msgs) == 1, msgs
    assert f"not using the serialization cache directory {cache}: it is writable by {who} (mode {mode:04o})" in msgs[0]
    assert "running without the cache" in msgs[0]
    assert d.last_prepare == "compiled"  # the good entry in it was not read either
    np.testing.assert_array_equal(out, cold)
    os.chmod(cache, 0o700)
    assert run_gpu(name, cache)[0].last_prepare.startswith("cache")


@pytest.mark.parametrize("name", GPUS)
def test_serialize_dir_of_another_user_is_not_used(tmp_path, name, monkeypatch):
    gpu(name)
    cache = tmp_path / "c"
    _, cold, _ = run_gpu(name, cache)
    foreign(cache, monkeypatch)
    d, out, msgs = run_gpu(name, cache)
    assert len(msgs) == 1 and "it is owned by uid" in msgs[0] and "not by this user" in msgs[0], msgs
    assert d.last_prepare == "compiled"
    np.testing.assert_array_equal(out, cold)


def test_new_serialize_dir_is_private_and_a_refused_one_gets_no_files(tmp_path):
    gpu("gpu-opencl")
    cache = tmp_path / "new"
    run_gpu("gpu-opencl", cache)
    assert os.stat(cache).st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    d, _, msgs = run_gpu("gpu-opencl", shared)
    assert len(msgs) == 1 and os.listdir(shared) == [] and d.cache.refused


def test_xnnpack_cache_in_a_directory_others_can_write_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    wc, msgs, outs = run_xnn(CNN, shared / "w.cache")
    assert len(msgs) == 1 and f"not used, its directory {shared}: it is writable by group and others" in msgs[0]
    assert os.listdir(shared) == [] and (wc.hits, wc.misses) == (0, 1)
    np.testing.assert_allclose(outs, uncached_xnn(CNN), rtol=0, atol=0)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    run_xnn(CNN, mine / "w.cache")
    foreign(mine, monkeypatch)
    wc, msgs, _ = run_xnn(CNN, mine / "w.cache")
    assert len(msgs) == 1 and "it is owned by uid" in msgs[0] and wc.hits == 0


# --- entries: regular files of this user only ---------------------------------------------------

@pytest.mark.parametrize("name", GPUS)
@pytest.mark.parametrize("kind", ["fifo", "symlink-dev-zero", "symlink-good-entry", "world-writable", "foreign",
                                  "too-large"])
def test_entry_that_is_not_a_trusted_regular_file_is_refused(tmp_path, name, kind, monkeypatch):
    gpu(name)
    cache = tmp_path / "c"
    _, cold, _ = run_gpu(name, cache)
    path = only_entry(cache)
    why = {"fifo": "it is a FIFO (named pipe), not a regular file", "symlink-dev-zero": "it is a symbolic link",
           "symlink-good-entry": "it is a symbolic link", "world-writable": "it is writable by group and others",
           "foreign": "it is owned by uid 4242", "too-large": "over the 1 KiB limit"}[kind]
    if kind == "fifo":
        os.unlink(path)
        os.mkfifo(path, 0o600)
    elif kind == "symlink-dev-zero":
        os.unlink(path)
        os.symlink("/dev/zero", path)
    elif kind == "symlink-good-entry":
        os.rename(path, str(cache / "elsewhere.bin"))
        os.symlink(str(cache / "elsewhere.bin"), path)
    elif kind == "world-writable":
        os.chmod(path, 0o666)
    elif kind == "foreign":
        if os.geteuid() != 0:
            pytest.skip("making a file of another user's in a private directory needs root")
        os.chown(path, 4242, 4242)
    else:
        monkeypatch.setattr(cache_store, "MAX_ENTRY_BYTES", 1024)
    with watchdog(path):
        d, out, msgs = run_gpu(name, cache)
    assert len(msgs) == 1 and f"cache entry {path} is refused (" in msgs[0] and why in msgs[0], msgs
    assert msgs[0].endswith("; rebuilding")
    assert d.last_prepare == "compiled"
    np.testing.assert_array_equal(out, cold)
    if kind != "too-large":  # rebuilt as a regular file, used next time
        assert os.path.isfile(path) and not os.path.islink(path)
        assert run_gpu(name, cache)[0].last_prepare.startswith("cache")


def test_sparse_entry_over_the_real_cap_is_refused_without_reading(tmp_path):
    gpu("gpu-opencl")
    cache = tmp_path / "c"
    run_gpu("gpu-opencl", cache)
    path = only_entry(cache)
    os.truncate(path, cache_store.MAX_ENTRY_BYTES + 1)  # sparse: nothing is written
    d, _, msgs = run_gpu("gpu-opencl", cache)
    assert len(msgs) == 1 and "over the 2 GiB limit" in msgs[0] and d.last_prepare == "compiled"


@pytest.mark.parametrize("kind", ["fifo", "symlink-dev-zero", "world-writable"])
def test_xnnpack_cache_file_that_is_not_a_trusted_regular_file_is_refused(tmp_path, kind):
    path = tmp_path / "w.cache"
    run_xnn(CNN, path)
    if kind == "fifo":
        os.unlink(path)
        os.mkfifo(path, 0o600)
    elif kind == "symlink-dev-zero":
        os.unlink(path)
        os.symlink("/dev/zero", path)
    else:
        os.chmod(path, 0o666)
    with watchdog(str(path)):
        wc, msgs, outs = run_xnn(CNN, path)
    assert len(msgs) == 1 and "refused (" in msgs[0] and wc.misses == 1, msgs
    np.testing.assert_array_equal(outs, uncached_xnn(CNN))
    assert path.is_file() and not path.is_symlink()
    assert run_xnn(CNN, path)[0].hits == 1


# --- integrity: the whole entry and the constant data -----------------------------------------

@pytest.mark.parametrize("name", GPUS)
def test_entry_with_rewritten_weights_and_the_old_key_is_rebuilt(tmp_path, name):
    gpu(name)
    cache = tmp_path / "c"
    _, cold, _ = run_gpu(name, cache)
    ref = reference()
    np.testing.assert_allclose(cold, ref, rtol=0, atol=1e-2 * max(1.0, float(np.abs(ref).max())))
    path = only_entry(cache)
    with open(path, "rb") as f:
        raw = f.read()
    _, entries = cache_store.read_file(path)
    (e,) = entries.values()
    # the packed weights: the plan's largest constant buffer; rewrite them in place (the stored
    # key, constant digest and every offset stay as they were)
    name_w = max((k for k in e.arrays if k.startswith("b")), key=lambda k: e.arrays[k].nbytes)
    w = e.arrays[name_w]
    at = raw.find(w.tobytes())
    assert at > 0
    forged = (w.astype(np.float32) * -1.5 + 0.25).astype(w.dtype).tobytes()
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(forged)
    d, out, msgs = run_gpu(name, cache)
    assert len(msgs) == 1 and "checksum mismatch" in msgs[0] and "rebuilding" in msgs[0], msgs
    assert d.last_prepare == "compiled"
    np.testing.assert_array_equal(out, cold)


@pytest.mark.parametrize("name", GPUS)
def test_entry_made_from_other_constant_data_is_rebuilt(tmp_path, name):
    """A sealed entry whose constant digest is not the partition's (made for other weights
    under the same key) is not used."""
    gpu(name)
    cache = tmp_path / "c"
    _, cold, _ = run_gpu(name, cache)
    path = only_entry(cache)
    meta, entries = cache_store.read_file(path)
    ((key, e),) = entries.items()
    cache_store.write_file(path, meta, {key: cache_store.Entry("0" * 64, e.arrays)})
    d, out, msgs = run_gpu(name, cache)
    assert len(msgs) == 1 and "was made for other constant data (weights)" in msgs[0], msgs
    assert d.last_prepare == "compiled"
    np.testing.assert_array_equal(out, cold)


def test_entry_of_the_former_npz_format_is_rebuilt(tmp_path):
    gpu("gpu-opencl")
    cache = tmp_path / "c"
    _, cold, _ = run_gpu("gpu-opencl", cache)
    path = only_entry(cache)
    with open(path, "wb") as f:
        np.savez(f, __key__=np.zeros(3, np.uint8))
    _, out, msgs = run_gpu("gpu-opencl", cache)
    assert len(msgs) == 1 and "not an acelera cache file, or one of an older format" in msgs[0]
    np.testing.assert_array_equal(out, cold)


def test_decode_refuses_object_arrays_and_bad_shapes():
    good = cache_store.encode({"m": 1}, {"k": cache_store.Entry("c", {"a": np.arange(6, dtype=np.int32)})})
    meta, entries = cache_store.decode(bytearray(good))
    assert meta == {"m": 1} and entries["k"].arrays["a"].tolist() == list(range(6))
    with pytest.raises(cache_store.EntryError, match="not a plain number type"):
        cache_store.encode({}, {"k": cache_store.Entry("c", {"a": np.array([object()])})})
    for old, new in ((b'"<i4"', b'"|O"'), (b"[6]", b"[-6]"), (b"[6]", b"[7]")):
        assert old in good
        body = good[:-32].replace(old, new, 1)
        body = body[:8] + (int.from_bytes(body[8:16], "little") + len(new) - len(old)).to_bytes(8, "little") + body[16:]
        with pytest.raises(cache_store.EntryError, match="corrupt"):
            cache_store.decode(bytearray(body + hashlib.sha256(body).digest()))


# --- one fingerprint, one format --------------------------------------------------------------

def whole(model: bytes) -> Partition:
    sg = load_model(model).main
    ctxs = {i: NodeContext(i, op, tuple(sg.tensors[t] if t >= 0 else None for t in op.inputs),
                           tuple(sg.tensors[t] for t in op.outputs)) for i, op in enumerate(sg.operators)}
    return Partition(tuple(range(len(sg.operators))), tuple(sg.inputs), tuple(sg.outputs), ctxs, {})


I8 = np.int8
QW = (np.array([0.01, 0.02, 0.03], np.float32), np.zeros(3, np.int64), 0)


_W8 = np.random.default_rng(5).integers(-127, 128, (3, 1, 1, 4)).astype(I8)


def q8_conv(in_q=(0.05, 3), out_q=(0.08, -2), w_q=QW):
    """An int8 CONV_2D (per-channel weights); the arguments change only quantization parameters."""
    bias_q = (np.asarray(w_q[0]) * in_q[0], np.zeros(3, np.int64), 0)
    return single_op_model("CONV_2D", [In((1, 4, 4, 4), I8, in_q), Const(_W8, w_q), Const(np.zeros(3, np.int32), bias_q)],
                           [Out((1, 4, 4, 3), I8, out_q)], version=3, padding="VALID", stride_h=1, stride_w=1)


def custom(options: bytes) -> bytes:
    return single_op_model("CUSTOM", [In((1, 4, 4, 8))], [Out((1, 4, 4, 8))], custom_code="MyOp",
                           custom_options=options)


def test_fingerprint_covers_quantization_and_custom_options():
    def fp(m):
        return cache_store.fingerprint(whole(m))
    base = fp(q8_conv())
    assert fp(q8_conv()) == base  # deterministic
    variants = {
        "input scale": q8_conv(in_q=(0.06, 3)), "input zero point": q8_conv(in_q=(0.05, 4)),
        "output scale": q8_conv(out_q=(0.09, -2)), "output zero point": q8_conv(out_q=(0.08, -1)),
        "weight scales": q8_conv(w_q=(QW[0] * 2, QW[1], 0)),
    }
    for what, m in variants.items():
        other = fp(m)
        assert other.ident != base.ident and other.consts == base.consts, what  # same constant bytes
    assert fp(custom(b"\x01\x02")).ident != fp(custom(b"\x01\x03")).ident
    assert fp(custom(b"\x01\x02")) == fp(custom(b"\x01\x02"))
    bigger = single_op_model("CONV_2D", [In(X.shape), Const(W * 2), Const(B)], [Out((1, 6, 7, 6))], padding="SAME",
                             stride_h=1, stride_w=1, fused_activation_function="NONE")
    a, b = fp(CONV), fp(bigger)
    assert a.ident == b.ident and a.consts != b.consts and a.const_bytes == W.nbytes + B.nbytes


def test_xnnpack_key_changes_with_quantization_only(tmp_path):
    """Two int8 models that differ only in the output's quantization: the second must not reuse
    the first's packed weights (the former xnnpack fingerprint left quantization out)."""
    path = tmp_path / "w.cache"
    a, b = q8_conv(), q8_conv(out_q=(0.09, -2))
    run_xnn(a, path)
    wc, msgs, outs = run_xnn(b, path, quiet=False)
    assert (wc.hits, wc.misses) == (0, 1)
    assert len(msgs) == 1 and "stale (it holds packed weights of a different model)" in msgs[0]
    np.testing.assert_array_equal(outs, uncached_xnn(b))


def test_xnnpack_weight_cache_uses_the_shared_format_and_fingerprint(tmp_path):
    path = tmp_path / "w.cache"
    run_xnn(CNN, path)
    meta, entries = cache_store.read_file(path)
    assert meta["delegate"] == "xnnpack-cpu" and len(entries) == 1
    (e,) = entries.values()
    sg = load_model(CNN).main
    consts = {t.index: t.data for t in sg.tensors if t.data is not None}
    assert e.consts == cache_store.fingerprint(whole(CNN)).consts and consts


@pytest.mark.parametrize("name", GPUS)
def test_gpu_caches_use_the_shared_format_and_fingerprint(tmp_path, name):
    gpu(name)
    from acelera.plugins.gpu_gl import delegate as gl
    from acelera.plugins.gpu_opencl import delegate as cl

    assert gl.fingerprint is cl.fingerprint is cache_store.fingerprint
    run_gpu(name, tmp_path / "c")
    meta, entries = cache_store.read_file(only_entry(tmp_path / "c"))
    assert meta["delegate"] == name and len(entries) == 1
    (e,) = entries.values()
    assert e.consts == cache_store.fingerprint(whole(CONV)).consts


# --- xnnpack helpers ----------------------------------------------------------------------------

def _inputs(it):
    rng = np.random.default_rng(9)
    for det in it.get_input_details():
        dt = np.dtype(det["dtype"])
        if np.issubdtype(dt, np.floating):
            v = rng.uniform(-1, 1, det["shape"]).astype(dt)
        else:
            v = rng.integers(-100, 100, det["shape"]).astype(dt)
        it.set_tensor(det["index"], v)


def run_xnn(model: bytes, path, quiet: bool = True):
    """(weight cache, WeightCacheWarning messages, first output) of one run with the cache file."""
    from acelera.plugins.xnnpack_cpu.weight_cache import WeightCacheWarning

    d = load_delegate("xnnpack-cpu", {"xnnpack_weight_cache_file_path": str(path)})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        it = Interpreter(model_content=model, experimental_delegates=[d])
        it.allocate_tensors()
    assert it.delegation.nodes_of("xnnpack-cpu"), it.delegation.rejections
    _inputs(it)
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"]).copy()
    return d.weight_cache, [str(m.message) for m in w if issubclass(m.category, WeightCacheWarning)], out


def uncached_xnn(model: bytes) -> np.ndarray:
    it = Interpreter(model_content=model, experimental_delegates=[load_delegate("xnnpack-cpu", {})])
    it.allocate_tensors()
    _inputs(it)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


# --- releasing device resources -----------------------------------------------------------------

def gl_buffers() -> int:
    """How many GL buffer names are alive in gpu-gl's context (glIsBuffer over the first 20000)."""
    from acelera.plugins.gpu_gl.context import open_device

    dev = open_device()
    egl = ctypes.CDLL(ctypes.util.find_library("EGL") or "libEGL.so.1")
    gpa = egl.eglGetProcAddress
    gpa.restype, gpa.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    is_buffer = ctypes.CFUNCTYPE(ctypes.c_ubyte, ctypes.c_uint)(gpa(b"glIsBuffer"))
    return dev.call(lambda: sum(1 for i in range(1, 20000) if is_buffer(i)))


def gpu_interpreter(name: str, model: bytes = CONV) -> Interpreter:
    it = Interpreter(model_content=model, experimental_delegates=[load_delegate(name, {})])
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], X)
    it.invoke()
    return it


def test_gl_buffers_of_dropped_interpreters_are_freed():
    gpu("gpu-gl")
    gc.collect()
    before = gl_buffers()
    it = gpu_interpreter("gpu-gl")
    per = gl_buffers() - before
    assert per > 0
    del it
    for _ in range(5):
        gpu_interpreter("gpu-gl")  # dropped unclosed
    gc.collect()
    assert gl_buffers() == before  # every kernel's buffers deleted by its finalizer (5 * per before)


@pytest.mark.parametrize("name", GPUS)
def test_close_and_context_manager_release_the_kernels(name):
    gpu(name)
    gc.collect()
    base = gl_buffers() if name == "gpu-gl" else 0
    with gpu_interpreter(name) as it:
        (step,) = [s for s in it.execution_plan if s.delegate == name]
        kernel = step.fn.kernel
        first = it.get_tensor(it.get_output_details()[0]["index"]).copy()
        assert kernel.buffers
    assert kernel.closed and not kernel.buffers  # released at the end of the with block, no gc needed
    if name == "gpu-gl":
        assert gl_buffers() == base
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), first)
    with pytest.raises(InterpreterStateError, match="allocate_tensors"):
        it.invoke()
    it.close()  # twice is fine
    it.allocate_tensors()  # new kernels
    it.set_tensor(it.get_input_details()[0]["index"], X)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), first)
    it.close()
    with pytest.raises(Exception, match="closed kernel"):
        kernel.invoke(X)


def test_close_calls_each_delegate_kernel_once_and_reports_errors():
    closed = []

    class Kernel(DelegateKernel):
        def __init__(self, part, fail):
            super().__init__(part)
            self.fail = fail

        def invoke(self, *xs):
            return (xs[0] + 1,)

        def close(self):
            closed.append(self)
            if self.fail:
                raise RuntimeError("device lost")

    class Bare:  # a duck-typed kernel without close()
        def __init__(self, part):
            self.partition = part

        def invoke(self, *xs):
            return (xs[0] + 1,)

    class Fake(Delegate):
        name = "fake"

        def __init__(self, kind):
            super().__init__()
            self.kind = kind

        def is_node_supported(self, node):
            return SUPPORTED

        def prepare(self, part):
            return Bare(part) if self.kind == "bare" else Kernel(part, self.kind == "fail")

    model = single_op_model("RELU", [In((2, 3))], [Out((2, 3))])
    with Interpreter(model_content=model, experimental_delegates=[Fake("ok")]) as it:
        it.allocate_tensors()
    assert len(closed) == 1
    it.close()
    assert len(closed) == 2  # the plan still names it; DelegateKernel.close may be called again
    it = Interpreter(model_content=model, experimental_delegates=[Fake("bare")])
    it.allocate_tensors()
    it.close()
    it = Interpreter(model_content=model, experimental_delegates=[Fake("fail")])
    it.allocate_tensors()
    with pytest.raises(RuntimeError, match="device lost"):
        it.close()
    assert DelegateKernel(Partition((), (), ())).close() is None  # the optional default
