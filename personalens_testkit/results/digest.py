"""A result row as the end of a run keeps it in memory: every field that a figure, a gate, the verdict, the
changed scenarios or a JUnit case reads, and none of the dialogue, its calls or the judge's reasons.

A :class:`RowDigest` answers those reads exactly as its :class:`~.rows.ResultRow` does (the same values, the
same objects for scores), so every aggregate computed from digests is the number computed from the rows, to
the last digit. It weighs about 0.2 KB where its row weighs tens (a 20-turn dialogue and its 47 calls): the
controller of a 122,133-case run holds 122,133 digests, never the rows. What it leaves out - the transcript,
the calls, the reasons - is read again from the results file by the outputs that show it
(:mod:`personalens_testkit.results.source`).

Values that recur from row to row (a score sheet, a model's name, a domain list) are kept once and shared.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from .rows import ReadsScores, ResultRow

#: per role, calls answered by a cassette and called live: ``((role, replayed, live), ...)``
CallSplit = tuple[tuple[str, int, int], ...]
_EMPTY: dict[str, str] = {}


def _once(value: Any, shared: dict[Any, Any]) -> Any:
    """One object for equal values (hashable ones) among the digests that share ``shared``: a tuple kept once,
    however many rows hold it."""
    if value is None:
        return None
    return shared.setdefault(value, value)


def _scores_once(scores: Any, shared: dict[Any, Any]) -> Any:
    if scores is None:
        return None
    return shared.setdefault(("scores", type(scores), tuple(scores.model_dump().items())), scores)


def _text(value: Optional[str]) -> Optional[str]:
    return sys.intern(value) if value else value


def call_split(row: ResultRow) -> CallSplit:
    """Each role's calls in a row, replayed and live, roles in the order they first called."""
    split: dict[str, list[int]] = {}
    for call in row.calls:
        split.setdefault(call.role, [0, 0])[0 if call.replayed else 1] += 1
    return tuple((role, replayed, live) for role, (replayed, live) in split.items())


def _live_judge(row: ResultRow) -> bool:
    return any(call.role == "judge" and not call.replayed for call in row.calls)


#: the fields that recur from row to row, kept once per distinct combination (``facts``)
FACTS = ("run_id", "task_kind", "domains", "assistant", "assistant_model", "user_model", "judge_model", "termination",
         "expected", "verdict")
#: the fields most rows leave empty, kept together (``rare``: None when every one is empty)
RARE = ("error", "partial_scores", "unreadable", "shortfalls", "reply_change", "retest", "preference_leak",
        "analysis_errors", "injection_flags", "turn_personalization", "user_faults", "rerun")
_RARE_EMPTY = (None, None, _EMPTY, (), None, None, None, _EMPTY, (), None, (), None)


def _field(group: str, position: int) -> property:
    if group == "facts":
        return property(lambda self: self.facts[position])
    return property(lambda self: _RARE_EMPTY[position] if self.rare is None else self.rare[position])


class RowDigest(ReadsScores):
    """What is kept of one row (see the module's text). Read it as a ResultRow; it cannot be written back."""

    __slots__ = ("scenario_id", "repeat", "status", "scores", "seconds", "turns", "cassette", "calls_split",
                 "judged_live", "facts", "rare", "dialogue_digest")

    def __init__(self, row: ResultRow, shared: dict[Any, Any] | None = None) -> None:
        """``shared``: where equal values are kept once, for the digests of one run
        (:meth:`~.source.RowSource.digests`); none: nothing is shared."""
        shared = {} if shared is None else shared
        self.scenario_id = row.scenario_id
        self.repeat = row.repeat
        self.status = _text(row.status)
        self.scores = _scores_once(row.scores, shared)
        self.seconds = row.seconds
        self.turns = row.turns
        self.cassette = row.cassette
        self.calls_split = _once(call_split(row), shared)
        self.judged_live = _live_judge(row)
        self.dialogue_digest = row.dialogue_digest
        domains = _once(tuple(_text(d) for d in row.domains), shared)
        facts = (_text(row.run_id), _text(row.task_kind), domains, _text(row.assistant), _text(row.assistant_model),
                 _text(row.user_model), _text(row.judge_model), _text(row.termination), _text(row.expected),
                 _text(row.verdict))
        self.facts = _once(facts, shared)
        rare = (row.error, _scores_once(row.partial_scores, shared), row.unreadable or _EMPTY, tuple(row.shortfalls),
                row.reply_change, row.retest, row.preference_leak, row.analysis_errors or _EMPTY,
                tuple(row.injection_flags),
                _once(tuple(row.turn_personalization), shared) if row.turn_personalization else None,
                tuple(row.user_faults), _rerun(row.rerun))
        self.rare = None if rare == _RARE_EMPTY else rare


def _rerun(rerun: Any) -> Any:
    """``--rerun-user-faults``'s note without the first dialogue's transcript (what the outputs count reads)."""
    if rerun is None or rerun.first is None:
        return rerun
    return rerun.model_copy(update={"first": rerun.first.model_copy(update={"transcript": []})})


for _group, _names in (("facts", FACTS), ("rare", RARE)):
    for _position, _name in enumerate(_names):
        setattr(RowDigest, _name, _field(_group, _position))


def row_calls_split(row: Any) -> CallSplit:
    """A row's or a digest's :data:`CallSplit`."""
    found = getattr(row, "calls_split", None)
    return found if found is not None else call_split(row)


def judged_live(row: Any) -> bool:
    """Whether a judge call of the row (or digest) ran live rather than from a cassette."""
    found = getattr(row, "judged_live", None)
    return found if isinstance(found, bool) else _live_judge(row)
