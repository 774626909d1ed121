"""What a reviewer of a pull request reads first: the scenarios that changed.

A scenario changed when the bot's reply differs from the recording (the first differing turn, with the
old and the new reply, is on its row), when its scores differ from the baseline's (``--baseline``), or when
its verdict is a regression or an unexpected pass. For each: the base's and the candidate's scores, the
first differing turn, and how many calls of each role replayed from the cassette and how many ran live.
The job summary (:mod:`.markdown`) and the HTML report (:mod:`.html`) render them.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from pydantic import BaseModel

from ..callsite import ROLES
from ..gating.verdict import RunCheck, RunVerdict
from ..results.digest import row_calls_split
from ..results.rows import ReplyChangeRow, ResultRow
from ..scales import HEADLINE

#: verdicts that make a scenario worth a reviewer's look even when its scores match the base's
NOTABLE = ("regression", "unexpected pass", "reply changed", "inconclusive (user agent)")
#: the order changed scenarios are listed in: what fails the run first
ORDER = {"regression": 0, "reply changed": 1, "not scored": 2, "inconclusive (user agent)": 3, "unexpected pass": 4}


class CallSplit(BaseModel):
    """One role's calls in a case: answered from the cassette, or called live."""

    replayed: int = 0
    live: int = 0


class ScenarioChange(BaseModel):
    case_id: str
    #: the case's verdict in this run (pass, regression, reply changed, ...)
    verdict: str
    #: the base's headline scores (None: no baseline, or the base did not score the case) and the candidate's
    base: Optional[dict[str, Any]] = None
    #: whether the baseline holds the case (scored or not)
    in_base: bool = False
    candidate: Optional[dict[str, Any]] = None
    #: the first turn whose bot reply differs from the recording, with the old and new reply
    reply_change: Optional[ReplyChangeRow] = None
    #: per role (user_agent, assistant, judge): calls replayed and called live
    calls: dict[str, CallSplit] = {}
    #: why it is listed: "reply changed at turn N", "scores changed", the verdict
    why: list[str] = []


def call_split(row: ResultRow) -> dict[str, CallSplit]:
    """Each role's calls in a row (or its digest), replayed and live (roles that made none left out)."""
    split = {role: CallSplit(replayed=replayed, live=live) for role, replayed, live in row_calls_split(row)}
    return {role: split[role] for role in (*ROLES, *sorted(set(split) - set(ROLES))) if role in split}


def headline_scores(row: ResultRow | None) -> dict[str, Any] | None:
    """A row's headline scores (task completion, personalization, naturalness, coherence); None if unscored."""
    if row is None or not row.scored:
        return None
    return {metric: row.score(metric) for metric in HEADLINE}


def _base_rows(baseline: Iterable[ResultRow]) -> dict[str, ResultRow]:
    """The base's rows by case id: a scored row before an unscored one of the same case."""
    found: dict[str, ResultRow] = {}
    for row in baseline:
        if row.case_id not in found or (row.scored and not found[row.case_id].scored):
            found[row.case_id] = row
    return found


def scenario_changes(rows: Sequence[ResultRow], verdict: RunVerdict,
                     baseline: Iterable[ResultRow] | None = None) -> list[ScenarioChange]:
    """The scenarios that changed, what fails the run first (regressions, changed replies), then by case id."""
    base = _base_rows(baseline) if baseline is not None else None
    changes = []
    for row in rows:
        case_verdict = verdict.of(row.case_id, row.status)
        before = None if base is None else headline_scores(base.get(row.case_id))
        after = headline_scores(row)
        why = []
        if row.reply_change is not None:
            why.append(f"reply changed at turn {row.reply_change.turn}")
        if base is not None and row.case_id in base and before != after:
            why.append("scores changed" if before is not None and after is not None else
                       "not scored now" if before is not None else "scored now")
        if case_verdict in NOTABLE and case_verdict != "reply changed":
            why.append(case_verdict)
        if why:
            changes.append(ScenarioChange(case_id=row.case_id, verdict=case_verdict, base=before, candidate=after,
                                          in_base=base is not None and row.case_id in base,
                                          reply_change=row.reply_change, calls=call_split(row), why=why))
    return sorted(changes, key=lambda c: (ORDER.get(c.verdict, len(ORDER)), c.case_id))


def describe_split(calls: dict[str, CallSplit]) -> str:
    """``user agent 1 replayed, 5 live; assistant 3 live; judge 6 live``."""
    parts = []
    for role, split in calls.items():
        counts = [f"{split.replayed} replayed"] if split.replayed else []
        counts += [f"{split.live} live"] if split.live or not split.replayed else []
        parts.append(f"{role.replace('_', ' ')} {', '.join(counts)}")
    return "; ".join(parts) or "no calls"


def describe_score(value: Any) -> str:
    return "-" if value is None else ("yes" if value else "no") if isinstance(value, bool) else f"{value:g}"


def score_pair(change: ScenarioChange, metric: str) -> str:
    """``3 -> 1`` (base -> candidate), or the candidate's score alone when there is no base."""
    after = describe_score((change.candidate or {}).get(metric))
    if not change.in_base:
        return after
    before = describe_score((change.base or {}).get(metric))
    return f"{before} -> {after}"


def check_detail(check: RunCheck) -> str:
    """A check's message without the name it starts with (a table shows the name beside it): a gate's text once."""
    for prefix in (check.name + ": ", check.name.split(" ")[0] + ": "):
        if check.message.startswith(prefix):
            return check.message[len(prefix):]
    return check.message
