"""--xnnpack_weight_cache_file_path: packed weights persisted between runs.

One file holds the packed constants of a model's partitions, each entry keyed by a fingerprint
of the partition (its ops, options, shapes and constant bytes) and the plugin and layout
versions. As with XNNPACK, a cache file belongs to one model: a file whose entries do not
match is stale. A stale, truncated or corrupt file is reported with a WeightCacheWarning and
rebuilt. Writes are atomic (temporary file in the same directory, fsync, rename) and the file
is private to the user (mode 0600).

Layout: MAGIC | u64 header length | JSON header | payload (64-byte aligned arrays) | SHA-256
of everything before it.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import warnings
from pathlib import Path
from typing import Callable

import numpy as np

MAGIC = b"ACXNNWC\x01"
FORMAT = 1
ALIGN = 64


class WeightCacheWarning(UserWarning):
    """The weight cache file could not be used as it was and is being rebuilt."""


class CacheFileError(Exception):
    pass


def fingerprint(partition, consts: dict, extra: str) -> str:
    """A stable key for the packed weights of a partition."""
    h = hashlib.blake2b(digest_size=20)
    h.update(extra.encode())
    for n in partition.nodes:
        ctx = partition.contexts[n]
        h.update(f"|{ctx.op.name}:{ctx.op.version}:{sorted((k, repr(v)) for k, v in ctx.options.items())}".encode())
        for t in list(ctx.inputs) + list(ctx.outputs):
            if t is None:
                h.update(b"-")
                continue
            h.update(f"{t.type_name}{tuple(t.shape)}".encode())
            v = consts.get(t.index)
            if v is not None:
                a = np.ascontiguousarray(v)
                h.update(str(a.dtype).encode())
                h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def _encode(entries: dict[str, dict[str, np.ndarray]], meta: dict) -> bytes:
    index, chunks, off = {}, [], 0
    for key, arrays in entries.items():
        rows = []
        for name, a in arrays.items():
            a = np.ascontiguousarray(a)
            pad = (-off) % ALIGN
            if pad:
                chunks.append(b"\0" * pad)
                off += pad
            raw = a.tobytes()
            rows.append([name, a.dtype.str, list(a.shape), off, len(raw)])
            chunks.append(raw)
            off += len(raw)
        index[key] = rows
    header = json.dumps({**meta, "format": FORMAT, "payload_bytes": off, "entries": index},
                        separators=(",", ":")).encode()
    body = MAGIC + struct.pack("<Q", len(header)) + header + b"".join(chunks)
    return body + hashlib.sha256(body).digest()


def _decode(data: bytearray) -> tuple[dict, dict[str, dict[str, np.ndarray]]]:
    if len(data) < len(MAGIC) + 8 + 32:
        raise CacheFileError(f"truncated ({len(data)} bytes)")
    if bytes(data[:len(MAGIC)]) != MAGIC:
        raise CacheFileError("corrupt (not an acelera xnnpack weight cache)")
    (hlen,) = struct.unpack_from("<Q", data, len(MAGIC))
    start = len(MAGIC) + 8
    if start + hlen + 32 > len(data):
        raise CacheFileError(f"truncated (header of {hlen} bytes, file of {len(data)})")
    try:
        header = json.loads(bytes(data[start:start + hlen]))
        payload = int(header["payload_bytes"])
        entries = header["entries"]
    except (ValueError, KeyError, TypeError) as e:
        raise CacheFileError(f"corrupt (unreadable header: {type(e).__name__})") from None
    end = start + hlen + payload
    if end + 32 > len(data):
        raise CacheFileError(f"truncated ({len(data)} of {end + 32} bytes)")
    if end + 32 < len(data):
        raise CacheFileError(f"corrupt ({len(data) - end - 32} unexpected trailing bytes)")
    if hashlib.sha256(memoryview(data)[:end]).digest() != bytes(data[end:end + 32]):
        raise CacheFileError("corrupt (checksum mismatch)")
    base = start + hlen
    out: dict[str, dict[str, np.ndarray]] = {}
    try:
        for key, rows in entries.items():
            arrays = {}
            for name, dt, shape, off, nb in rows:
                dt = np.dtype(dt)
                count = int(np.prod(shape, dtype=np.int64))
                if count * dt.itemsize != nb or off < 0 or off + nb > payload:
                    raise CacheFileError(f"corrupt (entry {name} out of bounds)")
                arrays[name] = np.frombuffer(data, dt, count, base + off).reshape(shape)
            out[key] = arrays
    except (ValueError, TypeError) as e:
        raise CacheFileError(f"corrupt (bad entry: {type(e).__name__})") from None
    return header, out


class WeightCache:
    """The packed weights of one delegate instance, backed by a file."""

    def __init__(self, path: str | os.PathLike, version: str):
        self.path = Path(path)
        self.version = version
        self.entries: dict[str, dict[str, np.ndarray]] | None = None
        self.owned = False  # the file now holds what this instance wrote
        self.hits = self.misses = 0

    def warn(self, why: str) -> None:
        warnings.warn(f"xnnpack weight cache {self.path}: {why}; rebuilding it", WeightCacheWarning, stacklevel=4)

    def _load(self) -> None:
        if self.entries is not None:
            return
        self.entries = {}
        try:
            data = bytearray(self.path.read_bytes())
        except FileNotFoundError:
            self.owned = True  # nothing to be stale against
            return
        except OSError as e:
            self.warn(f"cannot be read ({e.strerror or e})")
            self.owned = True
            return
        try:
            header, entries = _decode(data)
        except CacheFileError as e:
            self.warn(str(e))
            self.owned = True
            return
        if header.get("plugin") != self.version:
            self.warn(f"stale (written by xnnpack-cpu {header.get('plugin')}, this is {self.version})")
            self.owned = True
            return
        self.entries = entries

    def packed(self, key: str, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The packed arrays for `key`, from the file when it has them, else computed and saved."""
        self._load()
        got = self.entries.get(key)
        if got is not None:
            self.hits += 1
            return got
        self.misses += 1
        if not self.owned:
            if self.entries:
                self.warn("stale (it holds packed weights of a different model)")
            self.entries = {}
            self.owned = True
        value = compute()
        self.entries[key] = value
        try:
            self.write()
        except OSError as e:
            warnings.warn(f"xnnpack weight cache {self.path}: cannot be written ({e.strerror or e}); "
                          f"continuing without it", WeightCacheWarning, stacklevel=3)
        return value

    def write(self) -> None:
        data = _encode(self.entries or {}, {"plugin": self.version})
        directory = self.path.parent if str(self.path.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        try:  # make the rename durable
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass
