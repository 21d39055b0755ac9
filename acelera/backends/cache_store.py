"""The on-disk caches of the delegates: one file format, one partition fingerprint, and the rules
for trusting a cache directory and the files in it.

Used by the GPU delegates' serialization cache (acelera/backends/gpu/cache.py: one file per
partition in `--delegate_serialize_dir`) and xnnpack-cpu's weight cache
(acelera/plugins/xnnpack_cpu/weight_cache.py: one file, `--xnnpack_weight_cache_file_path`).

Trust (POSIX). A cache holds data that is run without being recomputed (packed weights,
compiled plans, program binaries), so, as ssh refuses a key file others can write:

- the directory (the serialize directory, or the one holding the weight-cache file) must be
  owned by this user (or root) and not writable by group or others; otherwise the cache is not
  used at all, with a CacheWarning saying why and what to do, and the delegate runs uncached;
- an entry is opened relative to the opened directory, without following a symbolic link and
  without blocking (O_NOFOLLOW | O_NONBLOCK), and is used only when fstat says it is a regular
  file owned by this user (or root), not writable by group or others, and at most
  MAX_ENTRY_BYTES long: a FIFO, device, socket or symlink is refused, never read;
- a file is MAGIC | u64 header length | JSON header | payload (64-byte aligned arrays) |
  SHA-256 of everything before it. The digest is checked before anything else is read, and
  each entry also stores the digest of the partition's constant data (`Fingerprint.consts`),
  compared with the partition being prepared. Arrays are plain numbers (bool, int, uint,
  float) read with np.frombuffer: nothing in a file is executed or unpickled.

Writes go to a temporary file created O_EXCL (mode 0600) in the directory, fsynced and renamed
over the entry; a directory the cache creates is mode 0700.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from acelera.core.files import DATA_MAX_BYTES, format_size, kind_of

MAGIC = b"ACCACHE\x02"
FORMAT = 2
ALIGN = 64
#: the largest cache file read (the largest data file any acelera tool reads)
MAX_ENTRY_BYTES = DATA_MAX_BYTES

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FD = os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd


class CacheWarning(UserWarning):
    """A delegate cache (or one of its entries) could not be used; the delegate rebuilds what it
    needs, or runs without the cache."""


class EntryError(Exception):
    """A cache file is truncated, corrupt, or refused (message: what is wrong with it)."""


class UnsafeError(EntryError):
    """A cache file is not trusted (see the module docstring)."""


class UnsafeDirectory(UnsafeError):
    """A cache directory is not trusted: the cache is not used at all."""


# --- fingerprint -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fingerprint:
    """A partition's identity: `ident` digests its structure (nodes, ops, versions, options,
    custom options, tensor types, shapes and quantization parameters, boundary); `consts`
    digests its constant data; `const_bytes` is that data's size."""

    ident: str
    consts: str
    const_bytes: int


def _feed(h, v: Any) -> None:
    """Hash `v` unambiguously (type-tagged, length-prefixed; arrays by dtype, shape and bytes)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        h.update(f"{type(v).__name__}:{v!r};".encode())
    elif isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        h.update(b"bytes:%d:" % len(b) + b)
    elif isinstance(v, (np.ndarray, np.generic)):
        a = np.ascontiguousarray(v)
        h.update(f"nd:{a.dtype.str}:{a.shape}:".encode())
        h.update(a.reshape(-1).data.cast("B") if a.dtype.kind != "O" else repr(a.tolist()).encode())
    elif isinstance(v, Mapping):
        h.update(b"map:%d:" % len(v))
        for k in sorted(v, key=repr):
            _feed(h, k)
            _feed(h, v[k])
    elif isinstance(v, (list, tuple)):
        h.update(b"seq:%d:" % len(v))
        for x in v:
            _feed(h, x)
    else:
        h.update(f"{type(v).__name__}:{v!r};".encode())


def _tensor(h, t) -> None:
    if t is None:
        h.update(b"-;")
        return
    q = t.quantization
    _feed(h, [t.index, t.type_name, tuple(t.shape), tuple(t.shape_signature), bool(t.is_variable),
              q.scale, q.zero_point, int(q.quantized_dimension), t.sparsity is not None])


def fingerprint(partition) -> Fingerprint:
    """The fingerprint of a delegate Partition, the same for every delegate cache."""
    ident = hashlib.sha256(b"acelera-partition-1;")
    _feed(ident, [tuple(partition.nodes), tuple(partition.inputs), tuple(partition.outputs)])
    consts: dict[int, np.ndarray] = {}
    for n in partition.nodes:
        ctx = partition.contexts[n]
        op = ctx.op
        _feed(ident, [n, op.op, op.name, op.builtin_code, op.version, op.custom_code, bytes(op.custom_options),
                      dict(op.options), tuple(op.inputs), tuple(op.outputs), tuple(op.intermediates)])
        for t in list(ctx.inputs) + list(ctx.outputs):
            _tensor(ident, t)
            if t is not None and t.index not in consts:
                v = partition.constants.get(t.index)
                if v is None and t.is_constant:
                    v = t.data
                if v is not None:
                    consts[t.index] = np.asarray(v)
    digest = hashlib.sha256(b"acelera-constants-1;")
    total = 0
    for i in sorted(consts):
        _feed(digest, i)
        _feed(digest, consts[i])
        total += consts[i].nbytes
    return Fingerprint(ident.hexdigest(), digest.hexdigest(), total)


def key_text(parts: Mapping[str, Any]) -> str:
    """Canonical JSON of a cache key's parts (what an entry stores and is compared with)."""
    return json.dumps({"format": FORMAT, **parts}, sort_keys=True, default=str, separators=(",", ":"))


def key_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- file format -------------------------------------------------------------------------------

@dataclass
class Entry:
    """One cached item: the constant-data digest it was made from, and its arrays."""

    consts: str
    arrays: dict[str, np.ndarray]


def encode(meta: Mapping[str, Any], entries: Mapping[str, Entry]) -> bytes:
    """A cache file holding `entries` (key text -> Entry) and `meta` (JSON data)."""
    index, chunks, off = {}, [], 0
    for key, e in entries.items():
        rows = []
        for name, a in e.arrays.items():
            a = np.ascontiguousarray(a)
            _check_dtype(a.dtype)
            pad = (-off) % ALIGN
            if pad:
                chunks.append(b"\0" * pad)
                off += pad
            raw = a.tobytes()
            rows.append([name, a.dtype.str, list(a.shape), off, len(raw)])
            chunks.append(raw)
            off += len(raw)
        index[key] = {"consts": e.consts, "arrays": rows}
    header = json.dumps({"format": FORMAT, "meta": dict(meta), "payload_bytes": off, "entries": index},
                        separators=(",", ":")).encode()
    body = MAGIC + struct.pack("<Q", len(header)) + header + b"".join(chunks)
    return body + hashlib.sha256(body).digest()


def _check_dtype(dt: np.dtype) -> np.dtype:
    if dt.kind not in "biuf" or dt.fields is not None or dt.subdtype is not None:
        raise EntryError(f"corrupt (array type {dt.str} is not a plain number type)")
    return dt


def decode(data: bytearray) -> tuple[dict, dict[str, Entry]]:
    """(meta, entries) of a cache file's bytes; EntryError ("truncated ..." / "corrupt ...").
    The arrays are views of `data`."""
    n = len(data)
    if bytes(data[:len(MAGIC)]) != MAGIC[:n]:
        raise EntryError("corrupt (not an acelera cache file, or one of an older format)")
    if n < len(MAGIC) + 8 + 32:
        raise EntryError(f"truncated ({n} bytes)")
    (hlen,) = struct.unpack_from("<Q", data, len(MAGIC))
    start = len(MAGIC) + 8
    if start + hlen + 32 > n:
        raise EntryError(f"truncated (header of {hlen} bytes, file of {n})")
    try:
        header = json.loads(bytes(data[start:start + hlen]))
        payload = int(header["payload_bytes"])
        entries = header["entries"]
        meta = header.get("meta", {})
        if header.get("format") != FORMAT or not isinstance(entries, dict) or not isinstance(meta, dict):
            raise TypeError("format")
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise EntryError(f"corrupt (unreadable header: {type(e).__name__})") from None
    end = start + hlen + payload
    if payload < 0 or end + 32 > n:
        raise EntryError(f"truncated ({n} of {end + 32} bytes)")
    if end + 32 < n:
        raise EntryError(f"corrupt ({n - end - 32} unexpected trailing bytes)")
    if hashlib.sha256(memoryview(data)[:end]).digest() != bytes(data[end:end + 32]):
        raise EntryError("corrupt (checksum mismatch: the file was changed after it was written)")
    base = start + hlen
    out: dict[str, Entry] = {}
    try:
        for key, ent in entries.items():
            arrays = {}
            for name, dt, shape, off, nb in ent["arrays"]:
                dt = _check_dtype(np.dtype(dt))
                if not all(isinstance(d, int) and d >= 0 for d in shape) or not isinstance(name, str):
                    raise EntryError(f"corrupt (entry {name!r} has a bad shape)")
                count = int(np.prod(shape, dtype=object))
                if count * dt.itemsize != nb or off < 0 or off + nb > payload:
                    raise EntryError(f"corrupt (entry {name!r} out of bounds)")
                arrays[name] = np.frombuffer(data, dt, count, base + off).reshape(shape)
            out[key] = Entry(str(ent["consts"]), arrays)
    except (ValueError, TypeError, KeyError) as e:
        raise EntryError(f"corrupt (bad entry: {type(e).__name__})") from None
    return meta, out


# --- trusted directory and files ---------------------------------------------------------------

def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0) if hasattr(os, "geteuid") else True


def stat_problem(st: os.stat_result, is_dir: bool) -> str | None:
    """Why a cache directory / file with this stat is not trusted (None when it is)."""
    if is_dir and not stat.S_ISDIR(st.st_mode):
        return f"it is {kind_of(st.st_mode)}, not a directory"
    if not is_dir and not stat.S_ISREG(st.st_mode):
        return f"it is {kind_of(st.st_mode)}, not a regular file"
    if not _trusted_owner(st.st_uid):
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}) or root"
    if hasattr(os, "geteuid") and st.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if st.st_mode & bit)
        return f"it is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _reason(e: OSError) -> str:
    if e.errno in (errno.ELOOP, errno.EMLINK) and _NOFOLLOW:
        return "it is a symbolic link (not followed)"
    return e.strerror or str(e)


class CacheDir:
    """A cache directory, opened and checked for each read or write (the path may change between
    uses); the files in it are named, never paths. With `create`, a write makes a missing
    directory (mode 0700)."""

    def __init__(self, path: str | os.PathLike, create: bool = True):
        self.path = os.fspath(path) or "."
        self.create = create

    def _open(self, create: bool = False) -> int:
        """An fd of the trusted directory; UnsafeDirectory when it is not trusted, OSError when
        it cannot be opened (FileNotFoundError: missing and not `create`)."""
        if create and not os.path.isdir(self.path):
            os.makedirs(self.path, mode=0o700, exist_ok=True)
        fd = os.open(self.path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            problem = stat_problem(os.fstat(fd), True)
        except OSError:
            os.close(fd)
            raise
        if problem is not None:
            os.close(fd)
            raise UnsafeDirectory(problem)
        return fd

    def _at(self, fd: int, name: str) -> tuple[str, dict]:
        return (name, {"dir_fd": fd}) if _DIR_FD else (os.path.join(self.path, name), {})

    def read(self, name: str, limit: int | None = None) -> bytearray | None:
        """The bytes of entry `name` (None when there is none); UnsafeDirectory for an untrusted
        directory, UnsafeError for an untrusted file (a symlink, FIFO, device, someone else's or a group/world-writable
        file, or one over `limit` bytes), OSError when it cannot be read."""
        limit = MAX_ENTRY_BYTES if limit is None else limit
        try:
            dfd = self._open()
        except FileNotFoundError:
            return None
        try:
            path, at = self._at(dfd, name)
            try:
                fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, **at)
            except FileNotFoundError:
                return None
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.EMLINK) and _NOFOLLOW:
                    raise UnsafeError(_reason(e)) from None
                raise
        finally:
            os.close(dfd)
        try:
            st = os.fstat(fd)
            problem = stat_problem(st, False)
            if problem is None and st.st_size > limit:
                problem = f"it is {format_size(st.st_size)}, over the {format_size(limit)} limit"
            if problem is not None:
                raise UnsafeError(problem)
            data = bytearray(st.st_size)
            view, got = memoryview(data), 0
            while got < st.st_size:
                k = os.readv(fd, [view[got:]]) if hasattr(os, "readv") else _read_into(fd, view[got:])
                if k == 0:
                    break
                got += k
            view.release()
            if got != st.st_size or os.read(fd, 1):
                raise EntryError("truncated or growing (it changed while being read)")
            return data
        finally:
            os.close(fd)

    def write(self, name: str, data: bytes | Iterable[bytes]) -> None:
        """Write entry `name` atomically (0600 temporary file, fsync, rename); UnsafeDirectory
        for an untrusted directory, OSError when it cannot be written."""
        dfd = self._open(create=self.create)
        tmp = f".tmp-{secrets.token_hex(8)}"
        path, at = self._at(dfd, tmp)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, **at)
            try:
                os.fchmod(fd, 0o600)
                for chunk in ([data] if isinstance(data, (bytes, bytearray)) else data):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            target, _ = self._at(dfd, name)
            if _DIR_FD:
                os.replace(tmp, target, src_dir_fd=dfd, dst_dir_fd=dfd)
            else:
                os.replace(path, target)
            try:
                os.fsync(dfd)  # make the rename durable
            except OSError:
                pass
        except BaseException:
            try:
                os.unlink(path, **at)
            except OSError:
                pass
            raise
        finally:
            os.close(dfd)


def _read_into(fd: int, view: memoryview) -> int:
    chunk = os.read(fd, min(len(view), 1 << 24))
    view[:len(chunk)] = chunk
    return len(chunk)


def read_file(path: str | os.PathLike, limit: int | None = None) -> tuple[dict, dict[str, Entry]]:
    """(meta, entries) of the cache file at `path`, with the same checks as the delegates
    (for tools and tests); EntryError / OSError otherwise."""
    path = os.fspath(path)
    data = CacheDir(os.path.dirname(path)).read(os.path.basename(path), limit)
    if data is None:
        raise FileNotFoundError(errno.ENOENT, "no such cache file", path)
    return decode(data)


def write_file(path: str | os.PathLike, meta: Mapping[str, Any], entries: Mapping[str, Entry]) -> None:
    """Write a cache file at `path` (as the delegates do)."""
    path = os.fspath(path)
    CacheDir(os.path.dirname(path)).write(os.path.basename(path), encode(meta, entries))
