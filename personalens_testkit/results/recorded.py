"""The result rows of a recording, kept beside its cassettes (``<cassette dir>/<assistant>/results.jsonl.xz``).

A run that records updates them (one row per case, the newest wins); an offline replay of the
same cassettes must reproduce their scores exactly - that is what replay promises.

They are committed with the cassettes, so they keep what a replay compares and what a report or a
``--baseline`` reads - scores, reasons, status, verdict, errors - and the dialogue's messages (a floor missed on a
live judgement is judged again beside the base's dialogue: :mod:`~personalens_testkit.run.confirmation`), and
leave out each row's call list (the run's own results.jsonl keeps it), xz-compressed like the cassettes: about
1.1 KB a scenario. A recording of the older form (``results.jsonl``, whole rows) is still read, and rewritten in
this form by the next recording run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from ..data.models import case_id
from .fields import load_fields
from .files import dedupe_rows, finished_instant, load_rows, newest_per_case, write_rows
from .rows import ResultRow

RESULTS_NAME = "results.jsonl.xz"
#: the recorded results of an older version: whole rows, uncompressed
LEGACY_NAME = "results.jsonl"
#: What a replay must reproduce: the judge's scores and the dialogue's length and ending.
COMPARED = ("scores", "turns", "termination")


def existing(path: Path) -> Path | None:
    """The recorded results file at ``path``, or the older form beside it; None when there is neither."""
    if path.is_file():
        return path
    legacy = path.with_name(LEGACY_NAME)
    return legacy if path.name == RESULTS_NAME and legacy.is_file() else None


def slim(row: ResultRow) -> ResultRow:
    """A row as the recording keeps it: without its call list, and how it differed from an earlier recording (it
    is the recording now)."""
    return row.model_copy(update={"calls": [], "transcript_path": None, "reply_change": None,
                                  "usage": row.usage_by_role() or None})


def load_recorded(path: Path) -> dict[str, ResultRow]:
    """Recorded rows by case id ({} when there is no file)."""
    found = existing(path)
    if found is None:
        return {}
    return {row.case_id: row for row in load_rows(found, what="recorded results")}


def merge_recorded(path: Path, rows: Iterable[ResultRow]) -> int:
    """Put these rows in the recorded results, one per case, the newest (see :func:`~.files.dedupe_rows`: a
    resumed run's kept rows never replace a newer recording); returns how many took their case's place."""
    recorded = load_recorded(path)
    merged = {key: slim(row) for key, row in recorded.items()}
    count = 0
    for row in dedupe_rows(slim(row) for row in rows):  # slim as they come: whole rows are never held together
        before = recorded.get(row.case_id)
        if before is None or finished_instant(row.finished_at) >= finished_instant(before.finished_at):
            merged[row.case_id] = row
            count += 1
    if count:
        write_rows(path, (merged[key] for key in sorted(merged)))
        legacy = path.with_name(LEGACY_NAME)
        if path.name == RESULTS_NAME and legacy.is_file():
            legacy.unlink()  # its rows are in the new file now
    return count


def load_compared(path: Path) -> dict[str, dict[str, Any]]:
    """The compared fields of each recorded row, by case id ({} when there is no file). Only those are
    kept, read without building whole rows: a whole-sample recording is 4,096 rows."""
    found = existing(path)
    if found is None:
        return {}
    def case(record: dict[str, Any]) -> str:
        return case_id(record["scenario_id"], record.get("repeat"))

    records = newest_per_case(load_fields(found, ("repeat", "finished_at", *COMPARED), what="recorded results"),
                              case=case, finished=lambda record: record.get("finished_at"))
    return {case(record): {name: record.get(name) for name in COMPARED} for record in records}


def differences(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """How a replayed case differs from the recorded one, in the compared fields."""
    found = []
    for name in COMPARED:
        before, after = recorded.get(name), now.get(name)
        if isinstance(before, dict) and isinstance(after, dict):
            found += [f"{name}.{k}: recorded {before.get(k)!r}, replayed {after.get(k)!r}"
                      for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
        elif before != after:
            found.append(f"{name}: recorded {before!r}, replayed {after!r}")
    return found
