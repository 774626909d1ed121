"""The runs of a results file: each run's information (:class:`~.rows.RunInfo`: its id, assistant, models, record
mode and identity) held once, as the run's record - a line of its own, ``{"run": {...}}``, written before the run's
first row (:func:`~.rows.run_line`) - and every row naming its run by ``run_id``.

One rule for every reader (:func:`~.files.load_rows`, :func:`~.files.read_rows`, :class:`~.source.RowSource`): a
record is a run's when it has ``run`` and no ``scenario_id`` (:func:`is_run_record`). A row of this version takes the
run its ``run_id`` names - one object per run, shared by all its rows; a row of an older version (schema 1, which
repeated the run's fields) keeps the run those fields state. A row naming a run the file does not hold, and a run id
held twice with different information, are one line naming the file and the place: a row is never read without the
identity that produced it, nor with another run's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from pydantic import ValidationError

from ..errors import UsageError, dotted
from .rows import ResultRow, RunInfo, run_line


def is_run_record(record: Any) -> bool:
    """Whether a record (a line's JSON value) is a run's rather than a row's."""
    return isinstance(record, dict) and "run" in record and "scenario_id" not in record


class Runs:
    """The runs a results file holds, by run id, and each row joined to its own."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = path, what
        self.held: dict[str, RunInfo] = {}

    def _error(self, where: str, text: str) -> UsageError:
        return UsageError(f"{self.what} {self.path}: {where}: {text}")

    def hold(self, record: Mapping[str, Any], where: str) -> RunInfo:
        """A run record's run (``where``: its place in the file, for a message); a UsageError when it is not a run's
        information, or its id is already held with other information."""
        try:
            run = RunInfo.model_validate(record["run"])
        except ValidationError as exc:
            first = exc.errors()[0]
            raise self._error(where, f"run.{dotted(first['loc'])}: {first['msg']}") from None
        before = self.held.setdefault(run.run_id, run)
        if before != run:
            field = next(name for name in RunInfo.model_fields if getattr(before, name) != getattr(run, name))
            raise self._error(where, f"run {run.run_id!r} is held twice, with different information (field {field}):"
                                     " rows of one run id were produced differently")
        return before

    def hold_all(self, records: Iterable[Any], where: str) -> None:
        """Each run of a report's ``runs`` list."""
        for number, record in enumerate(records, start=1):
            self.hold({"run": record}, f"{where} {number}")

    def join(self, row: ResultRow, where: str) -> ResultRow:
        """The row with its run: the one its ``run_id`` names, unless it states its own (an older row) or names none
        (a row built without a run). A UsageError when the file holds no run of that id."""
        if row.run is not None or not row.run_id:
            return row
        run = self.held.get(row.run_id)
        if run is None:
            raise self._error(where, f"run_id {row.run_id!r} names no run record of the file (its run's information "
                                     "is held once, in a line {\"run\": ...} before the run's rows)")
        row.run = run
        return row


def row_run(row: ResultRow) -> RunInfo | None:
    """The run a row's record is written with: its run, or a run of its ``run_id`` alone (a row built without its
    run's information: a file never names a run it does not hold); None for a row of no run."""
    if row.run is not None:
        return row.run
    return RunInfo(run_id=row.run_id) if row.run_id else None


def run_lines(rows: Iterable[ResultRow]) -> list[str]:
    """The run record of each run the rows name (:func:`row_run`), once each, in the order the runs first appear; a
    ValueError when two rows of one run id hold different runs."""
    seen: dict[str, RunInfo] = {}
    for row in rows:
        run = row_run(row)
        if run is None:
            continue
        before = seen.setdefault(run.run_id, run)
        if before is not run and before != run:
            raise ValueError(f"two rows of run {row.run_id!r} hold different runs")
    return [run_line(run) for run in seen.values()]
