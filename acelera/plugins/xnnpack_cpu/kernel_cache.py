"""Keeps numba's on-disk cache of this package's kernels consistent with their sources.

numba reuses a cached function while the file it is defined in keeps its timestamp, even when
a function it calls, defined in another module, has changed. This package's kernels call across
modules (jit_native.run_native calls the kernels of every jit_*.py module; qjit.py calls
qjit_ir.py), so a digest of all kernel sources is kept beside the cache (``__pycache__``, where
numba puts it for a source checkout): when it differs, the package's cache files are dropped
before any kernel is loaded. With NUMBA_CACHE_DIR set, numba keeps the cache elsewhere and this
does nothing.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SOURCES = ("jit*.py", "qjit*.py", "native_records.py", "int8_*.py")
STAMP = "acelera-kernels.sha256"
_checked: set[Path] = set()  # packages checked by this process


def sources_digest(package: Path = PACKAGE) -> str:
    h = hashlib.sha256()
    for path in sorted({p for pattern in SOURCES for p in package.glob(pattern)}):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def drop_stale_cache(package: Path = PACKAGE) -> bool:
    """Delete the package's numba cache files when the kernel sources changed since they were
    written; True when it did. Once per process; never raises (an unwritable cache is numba's
    business)."""
    if package in _checked:
        return False
    _checked.add(package)
    if os.environ.get("NUMBA_CACHE_DIR"):
        return False
    cache = package / "__pycache__"
    try:
        digest = sources_digest(package)
        stamp = cache / STAMP
        if stamp.is_file() and stamp.read_text().strip() == digest:
            return False
        for f in list(cache.glob("*.nbi")) + list(cache.glob("*.nbc")):
            f.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest + "\n")
        return True
    except OSError:
        return False
