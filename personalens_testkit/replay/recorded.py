"""The result rows of a recording, kept beside its cassettes (``<assistant>/results.jsonl``).

A run that records updates them (one row per scenario, the latest wins); an offline replay
of the same cassettes must reproduce their scores exactly - that is what replay promises.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ..data.models import case_id
from ..files import write_atomically
from .store import assistant_dir

RESULTS_NAME = "results.jsonl"
#: What a replay must reproduce: the judge's scores and the dialogue's length and ending.
COMPARED = ("scores", "turns", "termination")


def recorded_results_path(cassette_dir: Path, assistant: str) -> Path:
    return assistant_dir(cassette_dir, assistant) / RESULTS_NAME


def load_recorded(path: Path) -> dict[str, dict[str, Any]]:
    """Recorded rows by case id ({} when there is no file)."""
    if not path.is_file():
        return {}
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows[case_id(row["scenario_id"], row.get("repeat"))] = row
    return rows


def merge_recorded(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Put these rows in the recorded results (replacing a scenario's older row); returns how many were written."""
    merged = load_recorded(path)
    count = 0
    for row in rows:
        merged[case_id(row["scenario_id"], row.get("repeat"))] = row
        count += 1
    if count:
        text = "".join(json.dumps(merged[key], ensure_ascii=False) + "\n" for key in sorted(merged))
        write_atomically(path, text)
    return count


def differences(recorded: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """How a replayed row differs from the recorded one, in the compared fields."""
    found = []
    for name in COMPARED:
        before, now = recorded.get(name), row.get(name)
        if isinstance(before, dict) and isinstance(now, dict):
            found += [f"{name}.{k}: recorded {before.get(k)!r}, replayed {now.get(k)!r}"
                      for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]
        elif before != now:
            found.append(f"{name}: recorded {before!r}, replayed {now!r}")
    return found
