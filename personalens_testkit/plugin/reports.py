"""What pytest keeps of each case's report until the session ends, in the controlling process (registered there
by :mod:`.configure`). Hooks: ``pytest_runtest_logreport`` (last, after the terminal reporter kept the report),
``pytest_xdist_node_collection_finished`` (first, before xdist's scheduler keeps the worker's node ids).

pytest's terminal reporter keeps every report of the session (set-up, call and tear-down of every case) to
count them at the end: about 3 KB a case, 370 MB in a 122,133-case run. Of a suite case that passed it keeps
a stand-in with what the summary reads (the outcome and the duration): 0.1 KB. Failures, skips and
expected failures stay whole (the summary shows them), and so does everything when the user asked for the
reports of passes (``-rp``, ``-rP``, ``-rA``) or for ``--durations``.

Each xdist worker sends the node ids it collected, every list its own strings, and xdist's scheduler keeps
each one: about 0.13 KB a case a worker, 250 MB in a 122,133-case ``-n 16`` run. A worker's list equal to the
first one (the rule: xdist refuses to run unequal ones) is made of the first one's strings before it is kept.
"""

from __future__ import annotations

from typing import Any

import pytest


class PassedCase:
    """A passed suite case's report as pytest's summary reads it after the case: it counts it. (Not slotted:
    other plugins' summaries read a report's ``__dict__``.)"""

    nodeid = ""  # read only by the summary of passes (-rp, -rP, -rA), which keeps the reports whole
    when = "call"
    outcome = "passed"
    passed, failed, skipped = True, False, False
    count_towards_summary = True
    longrepr = None
    sections: tuple[Any, ...] = ()
    user_properties: tuple[Any, ...] = ()

    def __init__(self, report: pytest.TestReport) -> None:
        self.duration = report.duration


class KeptReports:
    """Registered in the controlling process (see the module's text)."""

    def __init__(self, config: pytest.Config, marker: str) -> None:
        self.config = config
        self.marker = marker
        chars = getattr(config.option, "reportchars", "") or ""
        self.keep_whole = bool(set(chars) & set("pPA")) or getattr(config.option, "durations", None) is not None
        self.first_ids: list[str] | None = None

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.first_ids is None:
            self.first_ids = ids
        elif ids == self.first_ids:
            ids[:] = self.first_ids  # the same ids, the first list's strings: this list's own are let go

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.keep_whole or not report.passed or self.marker not in report.keywords:
            return
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        kept = getattr(reporter, "stats", {}).get("passed" if report.when == "call" else "")
        if kept and kept[-1] is report:  # the terminal reporter has just kept it: counted, nothing more
            if report.when == "call":
                kept[-1] = PassedCase(report)
            else:
                kept.pop()
