"""The gate's one verdict: the run's own, wherever the run decided one.

The run decides its verdict in its report (report.json's ``verdict.outcome``: passed, regressed, inconclusive,
interrupted), and says it in the job summary. The gate says the same - in its last line, its manifest and its exit
status - rather than reading pytest's exit status alone: a run whose bot crashed half-way stops early (pytest's
status 2) with a verdict of regressed, and the gate said "no verdict" beside a job summary that said regressed.
Where the run decided nothing (it ended before its report: a usage error, a crash), the gate says so everywhere,
the job summary included, and exits 2.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import NamedTuple

#: the run's outcomes, as the report says them, and the gate's exit status for each (an inconclusive run fails
#: only where the thresholds say so: pytest's own status says which)
EXIT = {"passed": 0, "regressed": 1, "interrupted": 2}


class GateVerdict(NamedTuple):
    #: passed, regressed, inconclusive or interrupted (the run's), or "no verdict (...)"
    outcome: str
    #: the gate's exit status: 0 green, 1 red (or inconclusive where it fails the run), 2 no verdict
    status: int
    #: whether the run decided it (its report says it)
    decided: bool


def gate_verdict(report: Path, pytest_status: int) -> GateVerdict:
    """The verdict of the run whose report is ``report`` and whose pytest ended with ``pytest_status``."""
    outcome = _reported(report)
    if outcome is None:
        why = ("the base's suite collected no case" if pytest_status == 5 else
               f"the run ended before its report (pytest status {pytest_status})")
        return GateVerdict(f"no verdict ({why})", 2, False)
    if outcome in ("passed", "inconclusive") and pytest_status not in (0, 1):
        # a green or open verdict beside a pytest that did not finish: never a pass
        return GateVerdict(f"no verdict (the report says {outcome}, but pytest ended with status {pytest_status})", 2,
                           False)
    if outcome == "passed" and pytest_status != 0:
        return GateVerdict("no verdict (the report says passed, but pytest failed: a case outside the verdict?)", 2,
                           False)
    return GateVerdict(outcome, EXIT.get(outcome, pytest_status), True)  # inconclusive: pytest's 0 or 1 says


def _reported(report: Path) -> str | None:
    try:
        outcome = json.loads(report.read_text(encoding="utf-8"))["verdict"]["outcome"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return outcome if outcome in (*EXIT, "inconclusive") else None


def say_undecided(verdict: GateVerdict) -> None:
    """Where the run decided nothing, the job summary says so too (the run wrote none of its own)."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if verdict.decided or not summary:
        return
    with contextlib.suppress(OSError), open(summary, "a", encoding="utf-8") as handle:
        handle.write(f"\n## personalens gate: {verdict.outcome}\n\nThe run decided no verdict: the pull request is "
                     "neither passed nor failed by it. The gate's log says why.\n")
