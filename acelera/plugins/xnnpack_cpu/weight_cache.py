"""--xnnpack_weight_cache_file_path: packed weights persisted between runs.

One file holds the packed constants of a model's partitions, each entry keyed by the shared
partition fingerprint (acelera.backends.cache_store.fingerprint: ops, versions, options,
custom options, tensor shapes, types and quantization, constant bytes; the same one the GPU
serialization cache uses) with the layout version and fp16 mode, and storing the digest of
the partition's constant data. As with XNNPACK, a cache file belongs to one model: a file
whose entries do not match is stale. A stale, truncated, corrupt or refused file is reported
with a WeightCacheWarning and rebuilt.

The file format and the trust rules are cache_store's: a cache file in a directory others can
write (or that belongs to someone else) is not used at all (one warning; the delegate packs
its weights as without a cache); a symlink, FIFO, device, someone else's file or one over
the size cap is refused without being read; the file's SHA-256 is checked before use. Writes
are atomic (temporary file in the same directory, fsync, rename) and the file is private to
the user (mode 0600).
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from acelera.backends.cache_store import (
    CacheDir,
    CacheWarning,
    Entry,
    EntryError,
    Fingerprint,
    UnsafeDirectory,
    UnsafeError,
    decode,
    encode,
    key_digest,
    key_text,
)

DELEGATE = "xnnpack-cpu"
#: kept for callers of the former module: a damaged file
CacheFileError = EntryError


class WeightCacheWarning(CacheWarning):
    """The weight cache file could not be used as it was and is being rebuilt (or, in an
    untrusted directory, is not used)."""


def cache_key(fp: Fingerprint, extra: str) -> str:
    """The key of a partition's packed weights: its fingerprint plus `extra` (layout, modes)."""
    return key_digest(key_text({"delegate": DELEGATE, "partition": fp.ident, "consts": fp.consts, "extra": extra}))


class WeightCache:
    """The packed weights of one delegate instance, backed by a file."""

    def __init__(self, path: str | os.PathLike, version: str):
        self.path = Path(path)
        self.version = version
        self.files = CacheDir(self.path.parent, create=False)
        self.entries: dict[str, Entry] | None = None
        self.owned = False  # the file now holds what this instance wrote
        #: why the file's directory is not used (warned once); the weights are packed uncached
        self.refused: str | None = None
        self.hits = self.misses = 0

    def warn(self, why: str) -> None:
        warnings.warn(f"xnnpack weight cache {self.path}: {why}; rebuilding it", WeightCacheWarning, stacklevel=4)

    def _refuse(self, why: str) -> None:
        self.refused = why
        warnings.warn(f"xnnpack weight cache {self.path}: not used, its directory {self.files.path}: {why}; "
                      "continuing without it (keep the cache file in a directory only you can write: chmod 700)",
                      WeightCacheWarning, stacklevel=4)

    def _load(self) -> None:
        if self.entries is not None:
            return
        self.entries = {}
        self.owned = True  # unless a valid file of this version is read below
        try:
            data = self.files.read(self.path.name)
        except UnsafeDirectory as e:
            self._refuse(str(e))
            return
        except UnsafeError as e:
            self.warn(f"refused ({e})")
            return
        except (OSError, EntryError) as e:
            self.warn(f"cannot be read ({getattr(e, 'strerror', None) or e})")
            return
        if data is None:
            return  # nothing to be stale against
        try:
            meta, entries = decode(data)
        except EntryError as e:
            self.warn(str(e))
            return
        if meta.get("delegate") != DELEGATE or meta.get("plugin") != self.version:
            self.warn(f"stale (written by {meta.get('delegate') or 'another program'} {meta.get('plugin')}, "
                      f"this is {DELEGATE} {self.version})")
            return
        self.entries = entries
        self.owned = False

    def packed(self, key: str, compute: Callable[[], dict[str, np.ndarray]], consts: str = "") -> dict[str, np.ndarray]:
        """The packed arrays for `key` (made from constant data with digest `consts`), from the
        file when it has them, else computed and saved."""
        self._load()
        if self.refused is not None:
            self.misses += 1
            return compute()
        assert self.entries is not None  # set by _load
        got = self.entries.get(key)
        if got is not None and got.consts == consts:
            self.hits += 1
            return got.arrays
        self.misses += 1
        if not self.owned:
            if self.entries:
                self.warn("stale (it holds packed weights of a different model)")
            self.entries = {}
            self.owned = True
        value = compute()
        self.entries[key] = Entry(consts, value)
        try:
            self.write()
        except UnsafeDirectory as e:
            self._refuse(str(e))
        except (OSError, EntryError) as e:
            warnings.warn(f"xnnpack weight cache {self.path}: cannot be written ({getattr(e, 'strerror', None) or e}); "
                          f"continuing without it", WeightCacheWarning, stacklevel=3)
        return value

    def write(self) -> None:
        self.files.write(self.path.name, encode({"delegate": DELEGATE, "plugin": self.version}, self.entries or {}))
