"""Whole-file writes: a temporary file in the same folder, flushed, then renamed into place."""

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
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str) -> None:
    write_bytes_atomically(path, text.encode("utf-8"))
