"""xnnpack-cpu drops numba's cached kernels when any kernel source changed (kernel_cache.py):
numba alone would keep a cached caller whose callee, in another module, was edited."""
from __future__ import annotations

from acelera.plugins.xnnpack_cpu import kernel_cache


def _package(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "jit_native.py").write_text("def run_native(): pass\n")
    (pkg / "jit_gemm.py").write_text("def gemm(): return 1\n")
    (pkg / "other.py").write_text("x = 1\n")
    return pkg


def _cached(pkg):
    for name in ("jit_native.run_native-1.py311.nbi", "jit_native.run_native-1.py311.1.nbc"):
        (pkg / "__pycache__" / name).write_bytes(b"compiled")


def _check(pkg, monkeypatch) -> bool:
    monkeypatch.setattr(kernel_cache, "_checked", set())  # as a new process
    return kernel_cache.drop_stale_cache(pkg)


def test_cache_kept_while_sources_are_unchanged_and_dropped_when_a_callee_changes(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    pkg = _package(tmp_path)
    _cached(pkg)
    assert _check(pkg, monkeypatch)  # no stamp yet: whatever is cached cannot be trusted
    assert not list((pkg / "__pycache__").glob("*.nb[ic]"))
    _cached(pkg)
    assert not _check(pkg, monkeypatch)
    assert len(list((pkg / "__pycache__").glob("*.nb[ic]"))) == 2
    (pkg / "other.py").write_text("x = 2\n")  # not a kernel source
    assert not _check(pkg, monkeypatch)
    (pkg / "jit_gemm.py").write_text("def gemm(): return 2\n")  # the callee changes
    assert _check(pkg, monkeypatch)
    assert not list((pkg / "__pycache__").glob("*.nb[ic]"))


def test_checked_once_per_process_and_not_with_a_cache_dir_of_its_own(tmp_path, monkeypatch):
    pkg = _package(tmp_path)
    monkeypatch.setattr(kernel_cache, "_checked", set())
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    _cached(pkg)
    assert not kernel_cache.drop_stale_cache(pkg)
    assert len(list((pkg / "__pycache__").glob("*.nb[ic]"))) == 2
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert not kernel_cache.drop_stale_cache(pkg)  # this process already looked
