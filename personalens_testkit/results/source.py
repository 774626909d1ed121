"""The rows of a finished run, read from its results file without holding them: the end of a run keeps one
:class:`~.digest.RowDigest` a case, and the outputs that show whole rows (report.json's rows, the HTML's
dialogues, the recorded results) read them again from the file, one at a time.

Which lines are the run's rows is decided once, by the rule of :func:`~.files.read_rows`: only the lines the
run's writer wrote (when its digests are given), a torn last line skipped, each row joined to its run's record
(:mod:`.runs`), and one row per case - the newest,
in the order the cases first appear (:func:`~.files.dedupe_rows`). Memory: a file offset and a length per case (16 bytes).
"""

from __future__ import annotations

import errno
import json
from array import array
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from pydantic import ValidationError

from ..data.models import case_id
from ..errors import StorageError
from .digest import RowDigest
from .fields import field_reader
from .files import canonical_case, finished_instant, line_digest
from .rows import ResultRow, RunInfo
from .runs import Runs, is_run_record


#: what decides a row's place among the run's rows: its case and when it finished (and a run's record: its run)
_PLACING = field_reader(("scenario_id", "repeat", "finished_at", "run"))


def _placing(data: bytes) -> dict[str, Any]:
    """The fields of :data:`_PLACING` that a line this run wrote holds, as ``json.loads`` reads them: read without
    making the rest of the row (dialogue, calls) into objects - a fifth of the time. Any line it cannot read is read
    by ``json.loads`` (which says why it is broken)."""
    try:
        return _PLACING.validate_json(data)
    except ValidationError:
        return json.loads(data)  # type: ignore[no-any-return]


class RowSource:
    """One row per case of a results file (see the module's text), as lines, rows or digests, as often as asked."""

    def __init__(self, path: Path, *, written: set[bytes] | None = None) -> None:
        self.path = path
        self.written = written
        #: the runs of the rows (the file's run records)
        self.runs = Runs(path, "results")
        #: where each case's row starts in the file and how long it is, in the order the cases first appear
        self.starts, self.lengths = array("q"), array("q")
        for start, length in self._spans():
            self.starts.append(start)
            self.lengths.append(length)

    def __len__(self) -> int:
        return len(self.starts)

    def _spans(self) -> Iterator[tuple[int, int]]:
        best: dict[str, tuple[tuple[float, int], tuple[int, int]]] = {}
        with open(self.path, "rb") as handle:
            offset = 0
            for position, data in enumerate(handle):
                start, offset = offset, offset + len(data)
                if not data.strip():
                    continue
                whole = data.endswith(b"\n")
                if self.written is not None and line_digest(data) not in self.written:
                    continue
                try:
                    record = _placing(data) if self.written is not None else json.loads(data)
                except ValueError:
                    if whole:
                        raise  # as read_rows: a broken whole line of this run's own file is not skipped silently
                    continue  # the torn last line of a killed run
                if is_run_record(record):
                    self.runs.hold(record, f"line {position + 1}")
                    continue
                key = canonical_case(case_id(record["scenario_id"], record.get("repeat") or 1))
                rank = (finished_instant(record.get("finished_at")), position)
                if key not in best or rank > best[key][0]:
                    best[key] = (rank, (start, len(data)))
        return (span for _, span in best.values())

    def lines(self, positions: Sequence[int] | None = None) -> Iterator[str]:
        """Each case's row as the JSON line the file holds (without its line break); with ``positions``, only the
        rows at those indices, in that order. A line that is no longer one the run wrote (something rewrote the file
        since) stops the reading: an output never shows another row."""
        chosen = range(len(self.starts)) if positions is None else positions
        with open(self.path, "rb") as handle:
            for index in chosen:
                start, length = self.starts[index], self.lengths[index]
                handle.seek(start)
                data = handle.read(length)
                if self.written is not None and line_digest(data) not in self.written:
                    changed = "the results file changed while its rows were read for the report"
                    raise StorageError(self.path, OSError(errno.EIO, changed))
                yield data.decode("utf-8").rstrip("\n")

    def rows(self, positions: Sequence[int] | None = None) -> Iterator[ResultRow]:
        """Each case's row (see :meth:`lines`), joined to its run."""
        for index, line in zip(range(len(self.starts)) if positions is None else positions, self.lines(positions)):
            yield self.runs.join(ResultRow.model_validate_json(line), f"row {index + 1}")

    def run_records(self) -> list[RunInfo]:
        """The runs of the rows, once each (what a report's ``runs`` holds beside its rows)."""
        return list(self.runs.held.values())

    def digests(self, *feeds: Callable[[ResultRow], object]) -> list[RowDigest]:
        """Every case's digest; each whole row is handed to ``feeds`` on the way (running totals), in order."""
        found, shared = [], {}  # equal values kept once among this run's digests
        for row in self.rows():
            for feed in feeds:
                feed(row)
            found.append(RowDigest(row, shared))
        return found
