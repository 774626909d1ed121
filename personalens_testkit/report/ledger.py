"""The call ledger: calls and tokens per role (user agent, assistant, judge), in total and per case."""

from __future__ import annotations

from functools import partial
from typing import Any, Iterable

from pydantic import BaseModel

from ..callsite import ROLES
from ..results.rows import ResultRow

COUNTED = ("calls", "replayed", "retries", "prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")

#: calls and tokens of one role: calls (of them replayed from cassettes), retries, prompt and completion tokens, cache tokens
RoleLedger = dict[str, int]


class Ledger(BaseModel):
    total: dict[str, RoleLedger]
    #: each case's own calls and tokens (a report of a finished run writes it from the results file, row by row,
    #: without holding it: :func:`~.outputs.report_json`)
    per_scenario: dict[str, dict[str, RoleLedger]] = {}


def role_ledger(calls: Iterable[Any], book: dict[str, RoleLedger] | None = None) -> dict[str, RoleLedger]:
    """Calls and tokens per role of some calls (CallRow objects, or their JSON objects as a results line holds
    them), added to ``book``: every role of ours, then any other in the order it first called."""
    book = book if book is not None else {role: dict.fromkeys(COUNTED, 0) for role in ROLES}
    for call in calls:
        get = call.get if isinstance(call, dict) else partial(getattr, call)
        entry = book.setdefault(get("role"), dict.fromkeys(COUNTED, 0))
        entry["calls"] += 1
        entry["replayed"] += 1 if get("replayed") else 0
        entry["retries"] += (get("attempts") or 1) - 1
        entry["prompt_tokens"] += get("prompt_tokens") or 0
        entry["completion_tokens"] += get("completion_tokens") or 0
        entry["cache_read_tokens"] += get("cache_read_tokens") or 0
        entry["cache_write_tokens"] += get("cache_write_tokens") or 0
    return book


class LedgerTally:
    """The run's calls and tokens per role, added up one row at a time (nothing kept of the rows)."""

    def __init__(self) -> None:
        self.total = role_ledger(())

    def add(self, row: Any) -> None:
        role_ledger(row.calls, self.total)

    def result(self) -> Ledger:
        return Ledger(total=self.total)


def ledger(rows: Iterable[ResultRow]) -> Ledger:
    """Calls and tokens per role, in total and per scenario."""
    tally = LedgerTally()
    per_scenario: dict[str, dict[str, RoleLedger]] = {}
    for row in rows:
        tally.add(row)
        per_scenario[row.case_id] = role_ledger(row.calls)
    return Ledger(total=tally.total, per_scenario=per_scenario)
