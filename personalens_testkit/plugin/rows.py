"""A suite case's row: built in the process that ran the case, from what its fixtures found
(:data:`~.cases.CASE`), and carried on its report - one attribute, :data:`ROW` - to the controlling process,
which writes it (:mod:`.controller`) and shows it (:mod:`.progress`). Hooks: ``pytest_runtest_makereport``,
``pytest_runtest_logreport``."""

from __future__ import annotations

from typing import Any, Generator

import pytest

from ..run.controller import case_row
from ..run.state import expected_of
from ..results.rows import USER_AGENT_VERDICT, CaseVerdict
from .cases import CASE, STATE

#: the attribute of a case's report that carries its row: ``{"row": one line of JSON, "error": its error or None,
#: "scenario_id": ..., "shown": its verdict, else its status}`` (an xdist worker's report travels as JSON)
ROW = "personalens"


def row_of(report: Any) -> dict[str, Any] | None:
    """What a case's report carries (None: not a suite case's row)."""
    carried = getattr(report, ROW, None)
    return carried if isinstance(carried, dict) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    record = item.stash.get(CASE, None)
    if record is None:
        return report
    if report.when == "teardown":
        del item.stash[CASE]  # items live as long as the session: thousands of dialogues would stay in memory
        return report
    if (report.when == "setup" and not report.passed) or report.when == "call":
        voided = record.verdict == USER_AGENT_VERDICT and not record.shortfalls  # skipped, its floors met
        status = "error" if report.when == "setup" else ("passed" if report.passed or voided else "failed")
        run = item.config.stash[STATE]
        verdict: CaseVerdict = record.verdict or ("pass" if report.passed else "regression")
        row = case_row(run, record.evaluation, status, record.shortfalls,
                       expected=str(expected_of(run, record.evaluation.scenario.scenario_id)), verdict=verdict)
        setattr(report, ROW, {"row": row.line, "error": row.error, "scenario_id": row.scenario_id, "shown": row.shown})
        if row.stand_in:
            report.outcome, report.longrepr = "failed", "the result row could not be built (see its error)"
    return report


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every hook has read the case's row: off the report, which pytest keeps all session (rows of dialogue)."""
    report.__dict__.pop(ROW, None)
