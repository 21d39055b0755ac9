"""The serialization cache (`--delegate_serialize_dir` + `--delegate_serialize_token`) of the GPU
delegates (gpu-opencl, gpu-gl).

Like TFLite's GPU delegate (tflite/delegates/serialization.cc), one file per delegated
partition, `<dir>/<token>_<digest>.bin`, holding what initialization would otherwise
compute: the compiled partition plan (packed weights, tables, launches) and the device's
program binaries: one (`binary`, gpu-opencl's whole program) and/or several named ones
(`binaries`, gpu-gl's one linked program per shader). The key covers the token, the
partition (acelera.backends.cache_store.fingerprint: nodes, ops, options, custom options,
tensor shapes, types and quantization, constant contents), the options that change the
compiled result, the device and driver strings, the kernel source and the plugin version; the
file stores that full key and the digest of the partition's constant data and is only used
when both match.

Files, trust and integrity are acelera.backends.cache_store's (shared with xnnpack-cpu's
weight cache): a directory others can write, or that belongs to someone else, is not used
(one CacheWarning, the delegate runs uncached); an entry that is not a regular file of this
user (a symlink, FIFO, device), is too large, fails its SHA-256, cannot be read or does not
match is reported (a CacheWarning) and rebuilt.
"""
from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from acelera.backends.cache_store import (
    CacheDir,
    CacheWarning,
    Entry,
    EntryError,
    UnsafeDirectory,
    UnsafeError,
    decode,
    encode,
    key_digest,
    key_text,
)
from acelera.backends.gpu.plan import Plan

__all__ = ["CacheEntry", "CacheWarning", "SerializationCache"]

_NAMED = "__bin__"  # prefix of the named binaries' arrays


@dataclass
class CacheEntry:
    plan: Plan
    binary: bytes = b""
    #: named program binaries (gpu-gl: shader name -> binary)
    binaries: dict[str, bytes] = field(default_factory=dict)


class SerializationCache:
    def __init__(self, directory: str, token: str, owner: str = "gpu-opencl"):
        self.dir = directory
        self.token = token
        self.owner = owner  # the delegate named in warnings
        self.files = CacheDir(directory)
        #: why the directory is not used (set, and warned about, once)
        self.refused: str | None = None

    def key(self, parts: dict) -> tuple[str, str]:
        """(canonical key text, file path)."""
        text = key_text({"token": self.token, **parts})
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.token)[:64] or "token"
        return text, os.path.join(self.dir, f"{safe}_{key_digest(text)[:20]}.bin")

    def _refuse(self, why: str, stacklevel: int) -> None:
        if self.refused is None:
            self.refused = why
            warnings.warn(f"{self.owner}: not using the serialization cache directory {self.dir}: {why}; "
                          "running without the cache (use a directory only you can write: chmod 700)",
                          CacheWarning, stacklevel=stacklevel + 1)

    def load_entry(self, key: str, path: str, consts: str = "", stacklevel: int = 3) -> CacheEntry | None:
        """The entry at `path` made for `key` from constant data with digest `consts`, or None
        (a miss, an untrusted directory, or a bad entry that was reported)."""
        who = self.owner
        if self.refused is not None:
            return None

        def bad(why: str) -> CacheEntry | None:
            warnings.warn(f"{who}: cache entry {path} {why}; rebuilding", CacheWarning, stacklevel=stacklevel + 1)
            return None
        try:
            raw = self.files.read(os.path.basename(path))
        except UnsafeDirectory as e:
            self._refuse(str(e), stacklevel)
            return None
        except UnsafeError as e:
            return bad(f"is refused ({e})")
        except (OSError, EntryError) as e:
            return bad(f"cannot be read ({getattr(e, 'strerror', None) or e})")
        if raw is None:
            return None
        try:
            _, entries = decode(raw)
            if len(entries) != 1:
                raise EntryError(f"corrupt ({len(entries)} entries)")
            (stored_key, entry), = entries.items()
        except EntryError as e:
            return bad(f"is {e}")
        if stored_key != key:
            return bad("was made for another partition, options or device")
        if entry.consts != consts:
            return bad("was made for other constant data (weights)")
        try:
            arrays = dict(entry.arrays)
            header = arrays.pop("__plan__").tobytes().decode()
            binary = arrays.pop("__binary__").tobytes()
            named = {k[len(_NAMED):]: arrays.pop(k).tobytes() for k in list(arrays) if k.startswith(_NAMED)}
            return CacheEntry(Plan.from_files(header, arrays), binary, named)
        except Exception as e:  # noqa: BLE001  (a plan that does not parse is rebuilt)
            return bad(f"is corrupt ({type(e).__name__}: {e})")

    def store(self, key: str, path: str, plan: Plan, binary: bytes = b"",
              binaries: dict[str, bytes] | None = None, consts: str = "") -> bool:
        """Write the entry atomically; False (and a CacheWarning) when it cannot be written."""
        if self.refused is not None:
            return False
        header, arrays = plan.to_files()
        arrays = dict(arrays)
        arrays["__plan__"] = np.frombuffer(header.encode(), np.uint8)
        arrays["__binary__"] = np.frombuffer(binary, np.uint8)
        for name, blob in (binaries or {}).items():
            arrays[_NAMED + name] = np.frombuffer(blob, np.uint8)
        try:
            self.files.write(os.path.basename(path), encode({"delegate": self.owner}, {key: Entry(consts, arrays)}))
            return True
        except UnsafeDirectory as e:
            self._refuse(str(e), 2)
        except (OSError, EntryError) as e:
            warnings.warn(f"{self.owner}: cannot write cache entry {path} ({getattr(e, 'strerror', None) or e})",
                          CacheWarning, stacklevel=3)
        return False
