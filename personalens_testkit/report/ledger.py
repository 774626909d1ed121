"""The call ledger: calls and tokens per role (user agent, assistant, judge), in total and per case."""

from __future__ import annotations

import json
import tempfile
from contextlib import suppress
from operator import attrgetter
from typing import IO, Any, Iterable, Iterator

from pydantic import BaseModel, PrivateAttr

from ..callsite import OPTIONAL_ROLES, ROLES
from ..results.rows import ResultRow

COUNTED = ("calls", "replayed", "retries", "prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")

#: calls and tokens of one role: calls (of them replayed from cassettes), retries, prompt and completion tokens, cache tokens
RoleLedger = dict[str, int]


class Ledger(BaseModel):
    total: dict[str, RoleLedger]
    #: each case's own calls and tokens (a report of a finished run writes it from the results file, row by row,
    #: without holding it: :func:`~.outputs.report_json`)
    per_scenario: dict[str, dict[str, RoleLedger]] = {}
    #: ``per_scenario``'s entries as report.json writes them, kept in a file while the rows were added up
    #: (:class:`LedgerTally`), so that report.json does not read every row again for them (None: not kept)
    _spooled: Any = PrivateAttr(default=None)

    def spooled_entries(self) -> Iterator[str] | None:
        """Each case's ``"case": {...}`` entry of the per-case ledger, in the rows' order (None: none kept, or no
        longer: :meth:`close`)."""
        if self._spooled is None or self._spooled.closed:
            return None
        self._spooled.seek(0)
        return (line.decode("utf-8").rstrip("\n") for line in self._spooled)

    def close(self) -> None:
        """Let go of the spooled entries' file (a report drawn again then reads the rows again)."""
        if self._spooled is not None:
            with suppress(OSError):
                self._spooled.close()


#: what a call contributes to its role's ledger, in this order
_FIELDS = ("role", "replayed", "attempts", "prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")
_read = attrgetter(*_FIELDS)


def role_ledger(calls: Iterable[Any], book: dict[str, RoleLedger] | None = None) -> dict[str, RoleLedger]:
    """Calls and tokens per role of some calls (CallRow objects, or their JSON objects as a results line holds
    them), added to ``book``: every role of ours, then any other in the order it first called."""
    book = book if book is not None else {role: dict.fromkeys(COUNTED, 0) for role in ROLES if role not in OPTIONAL_ROLES}
    for call in calls:
        role, replayed, attempts, prompt, completion, cache_read, cache_write = (
            tuple(map(call.get, _FIELDS)) if isinstance(call, dict) else _read(call))
        entry = book.get(role) or book.setdefault(role, dict.fromkeys(COUNTED, 0))
        entry["calls"] += 1
        entry["replayed"] += 1 if replayed else 0
        entry["retries"] += (attempts or 1) - 1
        entry["prompt_tokens"] += prompt or 0
        entry["completion_tokens"] += completion or 0
        entry["cache_read_tokens"] += cache_read or 0
        entry["cache_write_tokens"] += cache_write or 0
    return book


def _added(book: dict[str, RoleLedger], total: dict[str, RoleLedger]) -> None:
    """``book`` (one case's) added to ``total``: as adding the case's calls to it one by one."""
    for role, entry in book.items():
        into = total.get(role) or total.setdefault(role, dict.fromkeys(COUNTED, 0))
        for field, value in entry.items():
            into[field] += value


def case_entry(case: str, book: dict[str, RoleLedger]) -> str:
    """One case's entry of report.json's per-case ledger, as json.dumps writes it inside the ledger's object."""
    return json.dumps(case, ensure_ascii=False) + ": " + json.dumps(book, ensure_ascii=False)


class LedgerTally:
    """The run's calls and tokens per role, added up one row at a time (nothing kept of the rows in memory). With
    ``spool``, each case's own entry is also written to a temporary file, for report.json
    (:meth:`Ledger.spooled_entries`); a temporary folder that cannot take it only means report.json reads the rows
    again."""

    def __init__(self, *, spool: bool = False) -> None:
        self.total = role_ledger(())
        self._spool: IO[bytes] | None = None
        if spool:
            try:
                self._spool = tempfile.TemporaryFile()
            except OSError:
                pass

    def add(self, row: Any) -> None:
        if self._spool is None:
            role_ledger(row.calls, self.total)
            return
        book = role_ledger(row.calls)
        _added(book, self.total)
        try:
            self._spool.write(case_entry(row.case_id, book).encode("utf-8") + b"\n")
        except OSError:
            self._drop_spool()

    def _drop_spool(self) -> None:
        """No spool after all (its folder is full): closed without writing what its buffer holds."""
        assert self._spool is not None
        with suppress(OSError):
            self._spool.close()  # a buffered file's close writes its buffer first: the same error again
        self._spool = None

    def result(self) -> Ledger:
        """The totals; and the spool, every entry written to its file (a spool that cannot be is dropped here)."""
        if self._spool is not None:
            try:
                self._spool.flush()
            except OSError:
                self._drop_spool()
        found = Ledger(total=self.total)
        found._spooled = self._spool
        return found


def ledger(rows: Iterable[ResultRow]) -> Ledger:
    """Calls and tokens per role, in total and per scenario."""
    tally = LedgerTally()
    per_scenario: dict[str, dict[str, RoleLedger]] = {}
    for row in rows:
        tally.add(row)
        per_scenario[row.case_id] = role_ledger(row.calls)
    return Ledger(total=tally.total, per_scenario=per_scenario)
