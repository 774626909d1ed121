"""Whole-file writes, room reserved ahead for a file that grows, and bounded reads of xz files.

A whole file is written to a temporary file in the same folder, then renamed into place: a
reader, or a process killed mid-write (``kill -9``), never sees half a file. There is no
fsync - it cost about 70 ms a file here, and surviving a power cut is not a goal of an
evaluation run. A write that fails (a full disk, a read-only folder) raises
:class:`~personalens_testkit.errors.StorageError` naming the path, and leaves nothing behind.

An xz file of ours (a cassette, recorded results) is read a chunk at a time and decompressed
no further than a limit the caller names (:func:`read_xz`): a few kilobytes that decompress to
gigabytes never reach memory.
"""

from __future__ import annotations

import ctypes
import errno
import lzma
import re
import os
import tempfile
import threading
from typing import Iterable
from pathlib import Path

from .errors import StorageError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The mode a plain ``open(path, "w")`` would give (mkstemp's files are private to the owner).
FILE_MODE = 0o666 & ~_umask()


def write_bytes_atomically(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Write a whole file or nothing: readers (and a crash) never see half of it. ``data``: the bytes, or their
    pieces in order (a big file written without holding it whole)."""
    tmp: str | None = None
    try:
        try:
            fd, tmp = _new_temporary(path)
        except FileNotFoundError:  # no folder yet
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = _new_temporary(path)
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                for piece in data:
                    handle.write(piece)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise StorageError(path, exc) from exc
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


#: what names this process's temporary files apart from those of another process with the same number
_PROCESS_TOKEN = os.urandom(4).hex()


def _new_temporary(path: Path) -> tuple[int, str]:
    """A new file beside ``path`` (open for writing) and its name: named for this process and thread, which write
    one file at a time (mkstemp's random names cost more than the rest of a small file's write); mkstemp's where
    that name is taken (a file left by a process killed mid-write) or too long."""
    name = f"{path.parent}{os.sep}.{path.name}.{os.getpid()}-{_PROCESS_TOKEN}-{threading.get_ident()}.tmp"
    try:
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), name
    except OSError as exc:
        if not isinstance(exc, FileExistsError) and exc.errno != errno.ENAMETOOLONG:
            raise
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")


def write_atomically(path: Path, text: str) -> None:
    write_bytes_atomically(path, text.encode("utf-8"))


def write_chunks_atomically(path: Path, pieces: Iterable[str]) -> None:
    """:func:`write_atomically` of a text given in pieces."""
    write_bytes_atomically(path, (piece.encode("utf-8") for piece in pieces))


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


#: The most memory the xz decoder may take for one file's dictionary: preset 9 (what ``xz -9`` writes) takes 65 MiB,
#: ours (preset 6) 9 MiB; an xz header may ask for up to 4 GiB, allocated before anything is decompressed.
XZ_MEMLIMIT = 128 << 20
_CHUNK = 1 << 20
_XZ_MAGIC = b"\xfd7zXZ\x00"


class BoundedReadError(ValueError):
    """What is wrong with an xz file :func:`read_xz` refused, in a few words (``str()``): empty, not xz,
    truncated, corrupt, too large when decompressed (``too_large``)."""

    def __init__(self, problem: str, *, too_large: bool = False) -> None:
        super().__init__(problem)
        self.too_large = too_large


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """``root`` and everything under it to ``uid``:``gid``, links themselves (never what they point to)."""
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)
    os.chown(root, uid, gid, follow_symlinks=False)


def json_lines(text: str, *, keepends: bool = False) -> list[str]:
    """The lines of a JSON-lines text: ended by a line feed only. ``str.splitlines`` would also end one at U+0085,
    U+2028 or U+2029, which JSON writes as they are inside a string (a bot's reply may hold one): its row would
    read as two broken lines."""
    if keepends:
        return [line for line in re.split(r"(?<=\n)", text) if line]
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n") if text else []


def size_text(size: int) -> str:
    """A limit as a person reads it: ``256 MiB``, or ``1,999 bytes``."""
    return f"{size >> 20:,} MiB" if size >= 1 << 20 and size % (1 << 20) == 0 else f"{size:,} bytes"


def read_xz(path: Path, limit: int, *, memlimit: int | None = None) -> bytearray:
    """The decompressed content of the xz file at ``path``, read and decompressed a chunk (1 MiB) at a time,
    refused (:class:`BoundedReadError`) as soon as it is more than ``limit`` bytes: memory never holds more
    than the limit and a chunk, whatever the file decompresses to, and the decoder no more than ``memlimit``
    (:data:`XZ_MEMLIMIT`). Concatenated xz streams are read as one, and data after the last stream that is
    not xz is ignored, as :func:`lzma.decompress` does. An OSError (no such file, say) passes through."""
    memlimit = XZ_MEMLIMIT if memlimit is None else memlimit
    out = bytearray()
    with open(path, "rb") as handle:
        data = handle.read(_CHUNK)
        if not data:
            raise BoundedReadError("empty (0 bytes)")
        if not data.startswith(_XZ_MAGIC[:len(data)]):
            raise BoundedReadError("not an xz file")
        decompressor = lzma.LZMADecompressor(lzma.FORMAT_XZ, memlimit=memlimit)
        streams = 0  # streams read to their end
        fresh = True  # nothing decompressed yet by this decompressor
        while True:
            try:
                out += decompressor.decompress(data, max_length=min(_CHUNK, limit + 1 - len(out)))
            except lzma.LZMAError as exc:
                if streams and fresh:
                    return out  # after a whole stream, data that is not xz: ignored, as lzma.decompress does
                raise BoundedReadError(_xz_problem(exc, first=fresh, memlimit=memlimit)) from None
            fresh = False
            if len(out) > limit:
                raise BoundedReadError(f"decompresses to more than {size_text(limit)}", too_large=True)
            if decompressor.eof:
                streams += 1
                data = decompressor.unused_data or handle.read(_CHUNK)
                if not data:
                    return out
                decompressor, fresh = lzma.LZMADecompressor(lzma.FORMAT_XZ, memlimit=memlimit), True
            elif decompressor.needs_input:
                data = handle.read(_CHUNK)
                if not data:
                    raise BoundedReadError("truncated: the xz data ends before its stream does")
            else:  # more output is waiting (a chunk of output at a time)
                data = b""


def _xz_problem(exc: lzma.LZMAError, *, first: bool, memlimit: int) -> str:
    text = str(exc)
    if "format not supported" in text.lower() and first:
        return "not an xz file"
    if "memory" in text.lower():
        return f"needs more than {size_text(memlimit)} of memory to decompress"
    return f"corrupt xz data ({text})"
