"""A process's transcripts file: every case it ran, one after another.

Every process of a run (each xdist worker, or the one pytest process) appends the transcript of each case it ran to
one file of its own, ``transcripts/<worker>.txt`` (``main.txt`` without xdist): one write a case, through a file
opened once for appending - creating a file a case cost a replay more than anything else it does beyond reading its
cassettes (issue 48). Each case's transcript opens with a line naming the case and how many lines follow
(:data:`HEAD`); a row's ``transcript_path`` is where that line is, ``path:line``, as editors and terminals open it
(:class:`TranscriptAt`, read back by :func:`read_transcript`). A transcript is complete or not referenced: a row is
written after its transcript, a write that fails (a full disk) is cut back off the file, and one cut short by a
killed process is never named by a row.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from .errors import StorageError
from .files import FILE_MODE

#: the line that opens a case's transcript in a transcripts file: the case and the number of its lines that follow
HEAD = "=== {case} ({lines} lines) ==="
_HEAD = re.compile(r"=== (?P<case>.*) \((?P<lines>\d+) lines\) ===")


@dataclass(frozen=True)
class TranscriptAt:
    """Where a case's transcript is: its transcripts file and the line (from 1) of its :data:`HEAD`."""

    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class TranscriptFile:
    """A process's transcripts file, appended to a case at a time (by any of its threads: ``--concurrency``'s lanes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd: int | None = None
        #: the file's size and lines so far (what this process wrote, after what was there when it opened it)
        self._size = 0
        self._lines = 0

    def append(self, case: str, text: str) -> TranscriptAt:
        """Append a case's transcript (a blank line after it); where it is. Raises StorageError (nothing of it left
        in the file)."""
        body = text if text.endswith("\n") else text + "\n"
        lines = body.count("\n")
        data = f"{HEAD.format(case=case, lines=lines)}\n{body}\n".encode("utf-8")
        with self._lock:
            try:
                fd = self._open()
                written = 0
                try:
                    while written < len(data):
                        written += os.write(fd, data[written:])
                except OSError:
                    os.ftruncate(fd, self._size)  # a transcript is whole or absent
                    raise
            except OSError as exc:
                raise StorageError(self.path, exc) from exc
            at = TranscriptAt(self.path, self._lines + 1)
            self._size += len(data)
            self._lines += lines + 2
            return at

    def _open(self) -> int:
        if self._fd is None:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
            except FileNotFoundError:  # no folder yet
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
            try:
                self._size, self._lines = _ends(self.path)  # a worker restarted by xdist appends after its earlier self
                if self._size and not _ends_a_line(self.path, self._size):  # cut short by a killed process: unnamed
                    os.write(fd, b"\n")
                    self._size, self._lines = self._size + 1, self._lines + 1
            except OSError:
                os.close(fd)  # the next transcript opens it again
                raise
            self._fd = fd
        return self._fd

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _ends(path: Path) -> tuple[int, int]:
    """A file's size and number of line feeds."""
    size = lines = 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            size, lines = size + len(chunk), lines + chunk.count(b"\n")
    return size, lines


def _ends_a_line(path: Path, size: int) -> bool:
    with open(path, "rb") as handle:
        handle.seek(size - 1)
        return handle.read(1) == b"\n"


def read_transcript(at: str | TranscriptAt) -> str:
    """A case's transcript from where a row says it is (``path:line``). Raises ValueError naming the place when no
    transcript opens there."""
    path, _, line = str(at).rpartition(":")
    if not line.isdigit() or not path:
        raise ValueError(f"{at}: not a transcript's place (expected path:line)")
    with open(path, "rb") as handle:  # by bytes: a line a killed process cut mid-character is never decoded
        for number, text in enumerate(handle, start=1):
            if number == int(line):
                head = _HEAD.fullmatch(text.rstrip(b"\n").decode("utf-8", "replace"))
                if head is None:
                    break
                return b"".join(next(handle, b"") for _ in range(int(head["lines"]))).decode("utf-8")
    raise ValueError(f"{at}: no transcript opens at this line")
