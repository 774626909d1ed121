"""The result rows of a recording, kept beside its cassettes (``<cassette dir>/<assistant>/results.jsonl``).

A run that records updates them (one row per case, the latest wins); an offline replay of the
same cassettes must reproduce their scores exactly - that is what replay promises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from .files import load_rows, write_rows
from .rows import ResultRow

RESULTS_NAME = "results.jsonl"
#: What a replay must reproduce: the judge's scores and the dialogue's length and ending.
COMPARED = ("scores", "turns", "termination")


def load_recorded(path: Path) -> dict[str, ResultRow]:
    """Recorded rows by case id ({} when there is no file)."""
    if not path.is_file():
        return {}
    return {row.case_id: row for row in load_rows(path, what="recorded results")}


def merge_recorded(path: Path, rows: Iterable[ResultRow]) -> int:
    """Put these rows in the recorded results (replacing a case's older row); returns how many were written."""
    merged = load_recorded(path)
    count = 0
    for row in rows:
        merged[row.case_id] = row
        count += 1
    if count:
        write_rows(path, (merged[key] for key in sorted(merged)))
    return count


def compared(row: ResultRow) -> dict[str, Any]:
    """The fields a replay must reproduce, as plain values."""
    return {"scores": row.scores.model_dump() if row.scores else None, "turns": row.turns,
            "termination": row.termination}


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
