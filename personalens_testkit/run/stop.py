"""Stopping a run early, with one line, keeping every row already written.

Two things stop a run before its last case:

- **a full disk** (``StorageError`` with no space left): every later case would fail the same
  way, so the run stops at the first one;
- **a dead endpoint** (the circuit breaker): ``N`` cases in a row that errored with the same
  cause from the same model or bot (a 401 after a key expired, a server that went away) - the
  rest would only spend their retries and time-outs on it. ``N`` is ``stop_after_errors``
  (default 5; 0 switches the breaker off).

The controlling process decides from the rows as they arrive and raises a :class:`StopSignal`
in the run folder; every process checks it before starting a case (xdist workers would
otherwise run every case already queued to them).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Optional

from ..files import reserve
from ..settings.table import DEFAULT_STOP_AFTER_ERRORS

#: the verdict a run stopped on once it was decided (--stop-when-decided), or None for any other stop
Decision = Optional[Literal["red", "green"]]


class StopSignal:
    """A file in the run folder that says the run must stop, and why. It is made (with room reserved
    for the reason) before any case runs, so raising it works on a full disk too."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".stop"

    def prepare(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as handle:
            with contextlib.suppress(OSError):
                reserve(handle.fileno(), 0, 4096)

    def raise_(self, reason: str, decision: Decision = None) -> None:
        """Stop the run, saying why; ``decision``: the verdict ``--stop-when-decided`` decided (None: another stop)."""
        record = json.dumps({"reason": reason[:3000], "decision": decision}, ensure_ascii=False)
        with contextlib.suppress(OSError):
            with open(self.path, "r+b" if self.path.exists() else "wb") as handle:
                handle.write(record.encode("utf-8")[:4000])
                handle.truncate()  # nothing left of an earlier, longer record

    def read(self) -> tuple[str, Decision] | None:
        """Why the run must stop and the verdict it decided, if it did; None while it may go on (one ``stat``)."""
        try:
            if os.stat(self.path).st_size == 0:
                return None
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if not isinstance(record, dict):  # raised, but not readable (cut short): a stop all the same
            return "the run was told to stop (its stop signal could not be read)", None
        decision = record.get("decision") if record.get("decision") in ("red", "green") else None
        return str(record.get("reason") or "the run was told to stop"), decision

    def reason(self) -> str | None:
        """Why the run must stop, or None while it may go on."""
        found = self.read()
        return found[0] if found is not None else None


@dataclass
class Breaker:
    """Watches the rows in arrival order; says when the run must stop. An error of a role whose calls this run only
    replays (``replayed``: a recorded answer, never a dead endpoint - a batch job's record in error, say) is no sign
    of one: it does not count."""

    limit: int = DEFAULT_STOP_AFTER_ERRORS
    replayed: frozenset[str] = frozenset()
    _key: tuple[str, str, str] | None = None
    _count: int = 0
    tripped: str | None = field(default=None)

    def observe(self, row: Mapping[str, Any]) -> str | None:
        """The reason to stop after this row, or None."""
        error = row.get("error") if row.get("status") == "error" else None
        if not isinstance(error, Mapping):
            self._key, self._count = None, 0
            return None
        if error.get("disk_full"):
            self.tripped = f"no space left on the disk: {error.get('message')}"
            return self.tripped
        cause, endpoint = error.get("cause"), error.get("endpoint")
        if not cause or not endpoint or self.limit <= 0 or str(error.get("source")) in self.replayed:
            self._key, self._count = None, 0
            return None
        key = (str(error.get("source")), str(endpoint), str(cause))
        self._count = self._count + 1 if key == self._key else 1
        self._key = key
        if self._count >= self.limit:
            who = key[0].replace("_", " ")
            self.tripped = (f"{self._count} cases in a row failed with the same error from the {who} "
                            f"({endpoint}): {cause}")
            return self.tripped
        return None

