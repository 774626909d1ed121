"""The one reader and the one writer of results files.

- ``results.jsonl``: one row per line, appended as each case ends by :class:`ResultsWriter`
  (only the controlling process writes it), each run's information once, in its run record before
  its first row (:mod:`.runs`); a torn last line left by a killed run is skipped when read.
- ``report.json``: a run report, whose ``rows`` hold the same rows and ``runs`` their runs.
- a JSON list of rows (and run records).

Whatever the file, :func:`load_rows` gives typed :class:`~.rows.ResultRow` objects, one per case (the
newest, :func:`dedupe_rows`), or one line naming the file, the line and the field at fault.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import lzma
import unicodedata
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Sequence, TypeVar

from pydantic import ValidationError

from ..errors import StorageError, UsageError, dotted
from ..files import BoundedReadError, json_lines, read_xz, reserve, write_atomically, write_bytes_atomically
from ..secrets import redact_json
from .identity import identity_difference, identity_value, identity_words, stated_difference
from .rows import ResultRow, RunInfo, run_line
from .runs import Runs, is_run_record, row_run, run_lines


class ResultsWriter:
    """Appends rows to a JSON Lines file; opened lazily, so a run without cases writes nothing.

    Room for the next rows is reserved on disk ahead of them (see :func:`~personalens_testkit.files.reserve`):
    when the disk fills up, the run learns it while it can still write the row of every case it
    has run, and stops before the next case - rows written always equal cases run. A write that
    fails all the same leaves no torn row: the file is cut back to its last whole row.
    """

    #: room kept reserved ahead of the last row: at least this, and four times the largest row so far
    MIN_RESERVE = 1 << 20

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        #: rows written (a run record is no row)
        self.count = 0
        #: the runs whose record this writer wrote
        self.declared: set[str] = set()
        self._largest = 0
        #: where the room reserved so far ends (0: none)
        self._reserved_to = 0
        #: set when the rows written so far are safe but there is no room reserved for another
        self.out_of_room: StorageError | None = None
        #: a digest of each line written: the run's report reads back only these (a line something else appended
        #: to the file - say, a bot under test that found it - is not this run's)
        self.written: set[bytes] = set()

    def open(self) -> None:
        """Create the file (and its folder) and reserve room for the first rows; raises StorageError."""
        if self._file is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab", buffering=0)  # unbuffered: a failed write leaves nothing pending
            self._reserved_to = 0
        except OSError as exc:
            raise StorageError(self.path, exc) from exc
        self._reserve()

    def write(self, row: ResultRow) -> None:
        """A row, after its run's record if this writer has not written it yet."""
        run = row_run(row)
        if run is not None:
            self.declare(run)
        self.write_json(row.model_dump_json())

    def declare(self, run: RunInfo) -> None:
        """The run's record (secrets redacted), unless this writer wrote it already: a row of the run may follow."""
        if run.run_id not in self.declared:
            self._put(redact_json(run_line(run)))
            self.declared.add(run.run_id)

    def write_json(self, line: str) -> None:
        """A row already written as one line of JSON (its run declared: :meth:`declare`). Raises StorageError if it
        cannot be written; sets :attr:`out_of_room` if it was written but no room is left for another (the run must
        stop)."""
        self._put(line)
        self.count += 1

    def _put(self, line: str) -> None:
        self.open()
        assert self._file is not None
        data = (line + "\n").encode("utf-8")
        self.written.add(line_digest(data))
        end = self._file.tell()
        try:
            view = memoryview(data)
            while view:  # a raw write may take part of the data
                written = self._file.write(view)
                if not written:
                    raise OSError(errno.EIO, "the write took nothing")
                view = view[written:]
        except OSError as exc:
            self._cut(end)
            raise StorageError(self.path, exc) from exc
        self._largest = max(self._largest, len(data))
        try:
            self._reserve()
        except StorageError as exc:
            self.out_of_room = exc

    def _reserve(self) -> None:
        """``room`` reserved past the end of the file. Only the part not reserved by the last call is asked for (the
        same blocks: the call fails exactly when the old one, which asked for the whole room again, failed), so
        the system looks at a row's worth of blocks, not at a megabyte's, at every row."""
        assert self._file is not None
        room = max(self.MIN_RESERVE, 4 * self._largest)
        end = self._file.tell()
        start = max(end, self._reserved_to)
        if start >= end + room:
            return
        try:
            reserve(self._file.fileno(), start, end + room - start)
        except OSError as exc:
            raise StorageError(self.path, exc) from exc
        self._reserved_to = end + room

    def _cut(self, end: int) -> None:
        """Drop whatever part of a failed row reached the file."""
        assert self._file is not None
        self._reserved_to = 0  # a cut frees the room reserved past the end too
        with contextlib.suppress(OSError):
            self._file.truncate(end)
            self._file.seek(end)

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def read_rows(path: Path, *, written: set[bytes] | None = None) -> list[ResultRow]:
    """One row per case of a results file this run wrote, the newest (see :func:`dedupe_rows`; a torn last
    line from a crash is skipped), each with its run; with ``written`` (a :class:`ResultsWriter`'s digests), only the
    lines it wrote."""
    runs, rows = Runs(path, "results"), []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(whole_lines(handle), start=1):
            if written is not None and line_digest(line.encode("utf-8")) not in written:
                continue
            record = json.loads(line)
            if is_run_record(record):
                runs.hold(record, f"line {number}")
            else:
                rows.append((f"line {number}", ResultRow.model_validate(record)))
    return dedupe_rows(runs.join(row, where) for where, row in rows)


def line_digest(data: bytes) -> bytes:
    """What :attr:`ResultsWriter.written` keeps of a line it wrote (its bytes, ended by a line break): 16 bytes of
    its SHA-256 (on processors with SHA instructions, 2.5 times cheaper than BLAKE2b; a row is read three times)."""
    return hashlib.sha256(data if data.endswith(b"\n") else data + b"\n").digest()[:16]


def whole_lines(lines: Iterable[str]) -> Iterator[str]:
    """The whole lines of a JSON-lines text: each line ended by a newline, and a last one without it only if it
    is a whole JSON value (a file written without a final newline keeps its last row; a torn one is dropped)."""
    for line in lines:
        if not line.strip():
            continue
        if line.endswith("\n"):
            yield line
            continue
        try:
            json.loads(line)
        except ValueError:
            continue  # the torn last line of a killed run
        except RecursionError:
            pass  # whole or not, nested too deep to read: kept, for its reader to say so (never dropped unseen)
        yield line


def load_rows(path: Path, *, what: str = "results") -> list[ResultRow]:
    """Rows of a report JSON (``report.json``), a results file (``results.jsonl``; a torn last line
    left by a killed run is skipped) or a JSON list of rows, one per case (see :func:`dedupe_rows`);
    a UsageError names what is wrong."""
    records, runs = load_records_and_runs(path, what=what)
    return dedupe_rows(runs.join(_row(row, path, what, number), f"row {number}")
                       for number, row in enumerate(records, start=1))


T = TypeVar("T")


def dedupe_rows(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """One row per case (``case_id``: a scenario's try): a case counted twice - a file concatenated with
    itself, a resumed run's rows joined with the run it resumed - is one case. The newest row wins: the
    later ``finished_at``; on a tie (or a row without one), the later in the sequence. Rows come in the
    order their cases first appear."""
    return newest_per_case(rows, case=lambda row: canonical_case(row.case_id), finished=lambda row: row.finished_at)


def canonical_case(case: str) -> str:
    """A case id as it is compared: Unicode-normalised (NFKC), without zero-width or surrounding space, case-folded
    (``user7-SD-Alarm-task-1``, ``USER7-sd-alarm-task-1 `` and one with a zero-width space are one case)."""
    folded = unicodedata.normalize("NFKC", case)
    return "".join(char for char in folded if unicodedata.category(char) != "Cf").strip().casefold()


def newest_per_case(items: Iterable[T], *, case: Callable[[T], str], finished: Callable[[T], Any]) -> list[T]:
    """The rule of :func:`dedupe_rows` for any record: ``case`` names an item's case, ``finished`` its end."""
    best: dict[str, tuple[tuple[float, int], T]] = {}
    for position, item in enumerate(items):
        key, rank = case(item), (finished_instant(finished(item)), position)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, item)  # a dict keeps a key where it was first put: the case's first place
    return [item for _, item in best.values()]


def finished_instant(value: Any) -> float:
    """A row's ``finished_at`` as seconds since the epoch (a time without a zone: UTC); -inf when there is none
    or it is not an ISO 8601 time, so any row with a time is newer."""
    if not isinstance(value, str) or not value:
        return float("-inf")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return float("-inf")
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def load_records(path: Path, *, what: str = "results", text: str | None = None) -> list[dict[str, Any]]:
    """The records of a report JSON, a JSON-lines file or a JSON list, each an object with a
    ``scenario_id`` (rows, or labels: see ``personalens agreement``), as plain dicts; runs' records are left out
    (:func:`load_records_and_runs` holds them). ``text``: the file's, if read."""
    return load_records_and_runs(path, what=what, text=text)[0]


def load_records_and_runs(path: Path, *, what: str = "results",
                          text: str | None = None) -> tuple[list[dict[str, Any]], Runs]:
    """:func:`load_records`, and the runs the file holds (a report's ``runs``, or the run records among the lines)."""
    data = _load_json(path, what, text)
    runs = Runs(path, what)
    if isinstance(data, dict) and "scenario_id" in data:
        data = [data]  # a file of one record
    if isinstance(data, dict) and isinstance(data.get("runs"), list):
        runs.hold_all(data["runs"], "runs")
    records = data.get("rows") if isinstance(data, dict) else data
    if isinstance(records, list) and isinstance(data, list):
        for number, record in enumerate(records, start=1):
            if is_run_record(record):
                runs.hold(record, f"record {number}")
        records = [record for record in records if not is_run_record(record)]
    if not isinstance(records, list) or not all(isinstance(r, dict) and "scenario_id" in r for r in records):
        raise UsageError(f"{what} {path}: expected a report JSON with rows, or result rows with scenario_id")
    return records, runs


#: The most an xz results file (the recorded results beside the cassettes, about 2 KB a slim row) may
#: decompress to: some 500,000 rows, four times the whole benchmark's 122,808 cases.
MAX_RESULTS_BYTES = 1 << 30


def results_text(path: Path, what: str) -> str:
    """The text of a results file (xz-compressed when its name ends in ``.xz``), or a UsageError naming it."""
    try:
        data = read_xz(path, MAX_RESULTS_BYTES) if path.name.endswith(".xz") else path.read_bytes()
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError, BoundedReadError) as exc:
        raise UsageError(f"{what} {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None


def _load_json(path: Path, what: str, text: str | None = None) -> Any:
    text = results_text(path, what) if text is None else text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass  # JSON lines (or not JSON): read a line at a time below
    except (ValueError, RecursionError) as exc:  # in the first value: an integer of over 4,300 digits, deep nesting
        raise UsageError(f"{what} {path}: not JSON or JSON lines ({exc})") from None
    lines = json_lines(text, keepends=True)
    complete = list(whole_lines(lines)) or [line for line in lines if line.strip()]
    try:
        return [json.loads(line) for line in complete]
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{what} {path}: not JSON or JSON lines ({getattr(exc, 'msg', None) or exc})") from None


def _row(data: dict[str, Any], path: Path, what: str, number: int) -> ResultRow:
    try:
        return ResultRow.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{what} {path}: row {number}: {dotted(first['loc'])}: {first['msg']}") from None


def write_rows(path: Path, rows: Iterable[ResultRow]) -> None:
    """A whole results file at once (merged shards, the recorded results), written atomically, the rows' runs first
    (one record each); xz-compressed when the name ends in ``.xz``."""
    rows = list(rows)
    text = "".join(line + "\n" for line in [*run_lines(rows), *(row.model_dump_json() for row in rows)])
    data = text.encode("utf-8")
    write_bytes_atomically(path, lzma.compress(data, preset=6) if path.name.endswith(".xz") else data)


def check_one_run(sources: Sequence[tuple[str, Sequence[ResultRow]]], *, what: str) -> None:
    """Rows of several files (shards, a run and its resumption) make one report only if they were produced
    alike: every row has the same identity, or none has one (older rows). Else a UsageError naming the two
    files and the first field that differs."""
    first: tuple[str, ResultRow] | None = None
    for name, rows in sources:
        for row in rows:
            if first is None:
                first = (name, row)
                continue
            field = identity_difference(row.identity, first[1].identity)
            if field is None and row.identity is None and first[1].identity is None:
                stated = stated_difference(row, first[1])  # rows of older testkits: what they state of their set-up
                if stated is not None:
                    raise UsageError(f"{what}: {name}: rows were produced with {stated} {getattr(row, stated)!r}, "
                                     f"{first[0]}'s with {getattr(first[1], stated)!r} (field {stated}): rows produced "
                                     "differently are not one run's and make no one report")
            if field is not None:
                raise UsageError(f"{what}: {_identity_clash(field, (name, row), first)} (field {field}): rows produced "
                                 "differently are not one run's and make no one report")


def _identity_clash(field: str, one: tuple[str, ResultRow], other: tuple[str, ResultRow]) -> str:
    if field == "identity":
        bare, dressed = (one, other) if one[1].identity is None else (other, one)
        owner = "other rows do" if bare[0] == dressed[0] else f"{dressed[0]}'s do"
        return f"{bare[0]}: rows carry no identity (written by an older testkit), {owner}"
    owner = "other rows" if one[0] == other[0] else f"{other[0]}'s"
    return (f"{one[0]}: rows were produced by {identity_words(field)} {identity_value(one[1].identity, field)}, "
            f"{owner} by {identity_value(other[1].identity, field)}")
