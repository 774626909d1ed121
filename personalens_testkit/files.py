"""Whole-file writes, and room reserved ahead for a file that grows.

A whole file is written to a temporary file in the same folder, then renamed into place: a
reader, or a process killed mid-write (``kill -9``), never sees half a file. There is no
fsync - it cost about 70 ms a file here, and surviving a power cut is not a goal of an
evaluation run. A write that fails (a full disk, a read-only folder) raises
:class:`~personalens_testkit.errors.StorageError` naming the path, and leaves nothing behind.
"""

from __future__ import annotations

import ctypes
import errno
import os
import tempfile
from pathlib import Path

from .errors import StorageError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The mode a plain ``open(path, "w")`` would give (mkstemp's files are private to the owner).
FILE_MODE = 0o666 & ~_umask()


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Write a whole file or nothing: readers (and a crash) never see half of it."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise StorageError(path, exc) from exc
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str) -> None:
    write_bytes_atomically(path, text.encode("utf-8"))


_FALLOC_FL_KEEP_SIZE = 1
_libc = None


def reserve(fd: int, offset: int, length: int) -> bool:
    """Reserve disk blocks for ``[offset, offset + length)`` of an open file without changing its size
    (Linux ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``), so later writes there cannot fail for want of
    room. Returns False where the system cannot reserve; raises ``OSError(ENOSPC)`` when there is no room."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        except (OSError, AttributeError):
            _libc = False
    if _libc is False:
        return False
    if _libc.fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(code, os.strerror(code))
