"""Whole-file writes: a temporary file in the same folder, then renamed into place.

A reader, or a process killed mid-write (``kill -9``), never sees half a file: the rename is
atomic. There is no fsync - it cost about 70 ms a file here, and surviving a power cut is
not a goal of an evaluation run.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The mode a plain ``open(path, "w")`` would give (mkstemp's files are private to the owner).
FILE_MODE = 0o666 & ~_umask()


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Write a whole file or nothing: readers (and a crash) never see half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str) -> None:
    write_bytes_atomically(path, text.encode("utf-8"))
