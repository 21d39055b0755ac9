"""The serialization cache (`--delegate_serialize_dir` + `--delegate_serialize_token`) of the GPU
delegates (gpu-opencl, gpu-gl).

Like TFLite's GPU delegate (tflite/delegates/serialization.cc), one file per delegated
partition, `<dir>/<token>_<fingerprint>.bin`, holding what initialization would otherwise
compute: the compiled partition plan (packed weights, tables, launches) and the device's
program binaries: one (`binary`, gpu-opencl's whole program) and/or several named ones
(`binaries`, gpu-gl's one linked program per shader). The fingerprint covers the token, the
partition (node ids, ops, tensor shapes and types, constant contents), the options that change
the compiled result, the device and driver strings, the kernel source and the plugin version;
the file also stores that full key and is only used when it matches.

Files are written to a temporary file (mode 0600) in the directory, flushed and renamed over
the target; a directory the cache creates is mode 0700. An entry that cannot be read or
does not match is reported (a CacheWarning) and rebuilt. Entries are numpy archives read with
allow_pickle=False: nothing in them is executed.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field

import numpy as np

from acelera.backends.gpu.plan import Plan

FORMAT = 1
_NAMED = "__bin__"  # prefix of the named binaries' arrays


class CacheWarning(UserWarning):
    """A serialization cache entry could not be used or written; it is rebuilt."""


def partition_fingerprint(partition) -> list:
    """The partition's identity: nodes, ops, tensor shapes/types, constant contents."""
    h = hashlib.blake2b(digest_size=16)
    desc = []
    for n in partition.nodes:
        ctx = partition.contexts[n]
        op = ctx.op
        desc.append([n, op.name, op.version, sorted((k, repr(v)) for k, v in op.options.items()),
                     bytes(op.custom_options).hex(),
                     [None if t is None else [t.index, list(t.shape), t.type_name] for t in ctx.inputs],
                     [[t.index, list(t.shape), t.type_name] for t in ctx.outputs]])
        for t in ctx.inputs:
            if t is not None:
                v = partition.constants.get(t.index, t.data)
                if v is not None:
                    h.update(np.ascontiguousarray(v).tobytes())
                if t.quantization.is_set:
                    h.update(np.asarray(t.quantization.scale).tobytes())
                    h.update(np.asarray(t.quantization.zero_point).tobytes())
    return [desc, list(partition.inputs), list(partition.outputs), h.hexdigest()]


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

    def key(self, parts: dict) -> tuple[str, str]:
        """(canonical key text, file path)."""
        text = json.dumps({"format": FORMAT, "token": self.token, **parts}, sort_keys=True, default=str)
        digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.token)[:64] or "token"
        return text, os.path.join(self.dir, f"{safe}_{digest}.bin")

    def load_entry(self, key: str, path: str, stacklevel: int = 3) -> CacheEntry | None:
        """The entry at `path` made for `key`, or None (a miss, or a bad entry that was reported)."""
        who = self.owner
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            warnings.warn(f"{who}: cannot read cache entry {path} ({e}); rebuilding", CacheWarning,
                          stacklevel=stacklevel)
            return None
        if not raw:
            return None
        try:
            with np.load(io.BytesIO(raw), allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            stored_key = bytes(arrays.pop("__key__")).decode()
            header = bytes(arrays.pop("__plan__")).decode()
            binary = bytes(arrays.pop("__binary__"))
            named = {k[len(_NAMED):]: bytes(arrays.pop(k)) for k in list(arrays) if k.startswith(_NAMED)}
            if stored_key != key:
                warnings.warn(f"{who}: cache entry {path} was made for another partition, options or "
                              "device; rebuilding", CacheWarning, stacklevel=stacklevel)
                return None
            return CacheEntry(Plan.from_files(header, arrays), binary, named)
        except Exception as e:
            warnings.warn(f"{who}: cache entry {path} is corrupt ({type(e).__name__}: {e}); rebuilding",
                          CacheWarning, stacklevel=stacklevel)
            return None

    def store(self, key: str, path: str, plan: Plan, binary: bytes = b"",
              binaries: dict[str, bytes] | None = None) -> bool:
        """Write the entry atomically; False (and a CacheWarning) when it cannot be written."""
        header, arrays = plan.to_files()
        arrays = dict(arrays)
        arrays["__key__"] = np.frombuffer(key.encode(), np.uint8)
        arrays["__plan__"] = np.frombuffer(header.encode(), np.uint8)
        arrays["__binary__"] = np.frombuffer(binary, np.uint8)
        for name, blob in (binaries or {}).items():
            arrays[_NAMED + name] = np.frombuffer(blob, np.uint8)
        tmp = None
        try:
            if not os.path.isdir(self.dir):
                os.makedirs(self.dir, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.dir)  # mode 0600
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
            return True
        except OSError as e:
            warnings.warn(f"{self.owner}: cannot write cache entry {path} ({e})", CacheWarning, stacklevel=3)
            if tmp is not None and os.path.exists(tmp):
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            return False
