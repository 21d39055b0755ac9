"""Reading and checking the files a user names: regular files only, with a size cap.

A FIFO would block a plain `open()`/`read()` forever and /dev/zero would be read until memory
runs out, so every path a tool takes from its user goes through here first: the path is
stat'ed before it is opened (opening a device can have side effects), opened without
blocking, and the opened descriptor is stat'ed again (the path may have changed in between).
Failures are one-line errors naming the path and the reason.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from acelera.core.errors import AceleraError, ModelError

#: the largest .tflite file a tool accepts (FlatBuffers cannot address more)
MODEL_MAX_BYTES = 2 << 30
#: the largest TOML configuration (--config, pyproject.toml, --tolerances)
CONFIG_MAX_BYTES = 1 << 20
#: the largest other input file (labels, ground truth, input tensor data)
DATA_MAX_BYTES = 2 << 30

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)


class FileError(AceleraError, ValueError):
    """A file a user named is missing, not a regular file, too large or unreadable."""


def kind_of(mode: int) -> str:
    """What a stat mode says the path is, in words."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "an unknown kind of file"


def format_size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _reason(e: OSError) -> str:
    return e.strerror or errno.errorcode.get(e.errno or 0, "") or str(e)


def _check_stat(st: os.stat_result, limit: int) -> str | None:
    """Why a file with this stat cannot be read (None when it can)."""
    if not stat.S_ISREG(st.st_mode):
        return f"{kind_of(st.st_mode)}, not a regular file"
    if st.st_size > limit:
        return f"{format_size(st.st_size)}, over the {format_size(limit)} limit"
    return None


def regular_file_problem(path: str | os.PathLike, limit: int) -> str | None:
    """Why `path` cannot be read as a regular file of at most `limit` bytes, or None when it
    can: it is stat'ed (following symbolic links), never opened."""
    try:
        st = os.stat(path)
    except OSError as e:
        return _reason(e)
    except ValueError as e:  # an embedded NUL byte
        return str(e)
    return _check_stat(st, limit)


def check_regular_file(path: str | os.PathLike, limit: int, what: str = "file",
                       error: type[AceleraError] = FileError) -> Path:
    """`path` as a Path when it is an existing regular file of at most `limit` bytes, else
    `error` with a one-line message: "cannot read {what} 'PATH': REASON"."""
    problem = regular_file_problem(path, limit)
    if problem is not None:
        raise error(f"cannot read {what} '{os.fspath(path)}': {problem}")
    return Path(path)


def check_model_path(path: str | os.PathLike, flag: str | None = None) -> str:
    """Check a model path before it is handed to the model loader: it exists, is a regular file
    and is at most MODEL_MAX_BYTES. Returns the path as a string; a ModelError otherwise
    ("--graph: cannot read model file 'PATH': a FIFO (named pipe), not a regular file")."""
    problem = regular_file_problem(path, MODEL_MAX_BYTES)
    if problem is not None:
        prefix = f"--{flag}: " if flag else ""
        raise ModelError(f"{prefix}cannot read model file '{os.fspath(path)}': {problem}")
    return os.fspath(path)


def read_regular_file(path: str | os.PathLike, limit: int, what: str = "file",
                      error: type[AceleraError] = FileError) -> bytes:
    """The bytes of the regular file `path` (at most `limit` of them), never blocking on a FIFO
    nor reading a device: `error` with "cannot read {what} 'PATH': REASON" otherwise."""
    where = f"cannot read {what} '{os.fspath(path)}'"
    problem = regular_file_problem(path, limit)
    if problem is not None:
        raise error(f"{where}: {problem}")
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC | _BINARY)
    except OSError as e:
        raise error(f"{where}: {_reason(e)}") from None
    try:
        problem = _check_stat(os.fstat(fd), limit)
        if problem is not None:
            raise error(f"{where}: {problem}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise error(f"{where}: it grew past the {format_size(limit)} limit while being read")
        return b"".join(chunks)
    except OSError as e:
        raise error(f"{where}: {_reason(e)}") from None
    finally:
        os.close(fd)


def output_path_problem(path: str | os.PathLike) -> str | None:
    """Why a tool cannot write a file at `path` (None when it can try): an existing path must be
    a regular file or a character device such as /dev/null; a new one needs an existing
    directory to be created in. A FIFO is refused: opening it would wait for a reader."""
    text = os.fspath(path)
    if text == "":
        return "the path is empty"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(text))
        if not os.path.isdir(parent):
            return f"its directory {parent} does not exist"
        return None
    except OSError as e:
        return _reason(e)
    except ValueError as e:
        return str(e)
    if stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return None
    return f"{kind_of(st.st_mode)}, not a regular file"


def check_output_path(path: str | os.PathLike, what: str = "output file",
                      error: type[AceleraError] = FileError) -> Path:
    """`path` as a Path when a file may be written there, else `error` naming the path."""
    problem = output_path_problem(path)
    if problem is not None:
        raise error(f"cannot write {what} '{os.fspath(path)}': {problem}")
    return Path(path)


def write_text_file(path: str | os.PathLike, text: str, what: str = "output file",
                    error: type[AceleraError] = FileError) -> None:
    """Write `text` (UTF-8) to `path` after check_output_path, without blocking on a FIFO that
    appears in between."""
    check_output_path(path, what, error)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | _NONBLOCK | _CLOEXEC | _BINARY, 0o666)
    except OSError as e:
        raise error(f"cannot write {what} '{os.fspath(path)}': {_reason(e)}") from None
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise error(f"cannot write {what} '{os.fspath(path)}': {kind_of(st.st_mode)}, not a regular file")
        if stat.S_ISREG(st.st_mode):
            os.ftruncate(fd, 0)
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as e:
        raise error(f"cannot write {what} '{os.fspath(path)}': {_reason(e)}") from None
    finally:
        os.close(fd)


def directory_problem(path: str | os.PathLike, may_be_missing: bool = False) -> str | None:
    """Why `path` cannot be used as a directory (None when it can): it must be one, or, with
    `may_be_missing`, not exist yet (the tool creates it)."""
    try:
        st = os.stat(path)
    except FileNotFoundError as e:
        return None if may_be_missing else _reason(e)
    except OSError as e:
        return _reason(e)
    except ValueError as e:
        return str(e)
    if not stat.S_ISDIR(st.st_mode):
        return f"{kind_of(st.st_mode)}, not a directory"
    return None


def check_directory(path: str | os.PathLike, what: str = "directory", may_be_missing: bool = False,
                    error: type[AceleraError] = FileError) -> Path:
    """`path` as a Path when it is an existing directory (or, with `may_be_missing`, does not
    exist yet), else `error` naming the path."""
    problem = directory_problem(path, may_be_missing)
    if problem is not None:
        raise error(f"cannot use {what} '{os.fspath(path)}': {problem}")
    return Path(path)
