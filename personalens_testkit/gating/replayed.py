"""Which scenarios a candidate run replayed whole: every try the base's own recording played back - the same
dialogue, scored the same, no model called now - so that its difference from the base is exactly 0, not a draw of
the judge's noise (gating/compare.py scales the changed scenarios' interval by their share)."""

from __future__ import annotations

from typing import Iterable

from ..results.digest import row_calls_split
from ..results.rows import ResultRow


def _try_key(row: ResultRow) -> tuple | None:
    """A scored try as a replay reproduces it - its dialogue and its scores - None when it keeps no dialogue."""
    if not row.scored or row.dialogue_digest is None:
        return None
    return row.dialogue_digest, tuple(row.scores.model_dump().items())


def _played_back(row: ResultRow) -> bool:
    """Every call of the try answered by a cassette (a row that keeps no calls, or called a model now, is a new draw)."""
    split = row_calls_split(row)
    return bool(split) and not any(live for _, _, live in split)


def replayed_whole(base: Iterable[ResultRow], candidate: Iterable[ResultRow]) -> frozenset[str]:
    """The scenarios whose every candidate try is one of the base's tries - the same dialogue, scored the same -
    and not a new draw: played back whole from a cassette, or the very row the base holds (a run compared with
    itself). Their difference is exactly 0."""
    recorded: dict[str, set] = {}
    for row in base:
        key = _try_key(row)
        if key is not None:
            recorded.setdefault(row.scenario_id, set()).update({key, (row.run_id, row.repeat, key)})
    same: dict[str, bool] = {}
    for row in candidate:
        key = _try_key(row)
        held = recorded.get(row.scenario_id, set())
        alike = key is not None and key in held and (_played_back(row) or (row.run_id, row.repeat, key) in held)
        same[row.scenario_id] = same.get(row.scenario_id, True) and alike
    return frozenset(sid for sid, alike in same.items() if alike)
