"""The pytest hooks of a live run's progress display (:mod:`~personalens_testkit.run.progress`): the controlling
process shows it, an xdist worker publishes its running cases' turns for it; and the controller's cost estimate
for the cases pytest collected, when its own selection narrowed the run's. Hooks (of :class:`ProgressHooks`,
registered in every process by :mod:`.configure`): ``pytest_configure_node``, ``pytest_collection_finish``,
``pytest_xdist_node_collection_finished``, ``pytest_runtest_logreport``, ``pytest_sessionfinish``."""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from ..callsite import ON_PROGRESS
from ..data.models import case_id
from ..errors import PersonalensError
from ..run.progress import Progress, Publisher, Running, TerminalLines, Ticker, TurnChannel, interval_s
from ..run.state import Run
from ..secrets import redact
from .cases import is_case
from .rows import row_of

#: the workerinput key naming the folder where xdist workers publish their running cases' turns
TURNS_KEY = "personalens_turns"


#: a case's id in a suite test's node id, whatever other parameters pytest joined to it (``-r2``: a second try)
CASE_IN_ID = re.compile(r"(?<=[\[-])user\d+-(?:SD-[A-Za-z]+-task-\d+|MD-task-\d+)(?:-r\d+)?(?=[\]-])")


class ProgressHooks:
    """The progress display of a live run (see :mod:`~personalens_testkit.run.progress`): shown by the controlling
    process; an xdist worker publishes its running cases' turns for it."""

    def __init__(self, run: Run, config: pytest.Config) -> None:
        self.run, self.run_config = run, config
        self.progress: Progress | None = None
        self.reporter: Any = None
        self.loop: Ticker | Publisher | None = None
        self.out: TerminalLines | None = None
        self.channel: TurnChannel | None = None
        self.running = Running()  # an xdist worker's running cases
        self.estimated = False  # the collected cases' estimate is shown once

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: the folder where the workers publish their running cases' turns (a live run's only)."""
        if self.channel is None and self.run.models.live_roles and not node.config.option.collectonly:
            self.channel = TurnChannel.create()
        if self.channel is not None:
            node.workerinput[TURNS_KEY] = str(self.channel.folder)

    def _start(self, config: pytest.Config, total: int) -> None:
        if self.progress is not None or not total or config.option.collectonly or not self.run.models.live_roles:
            return  # a pure replay takes seconds: quiet
        self.reporter = config.pluginmanager.getplugin("terminalreporter")
        if self.reporter is None:
            return
        self.progress = Progress(total, interval_s=interval_s(bool(getattr(self.reporter, "isatty", False))))
        ON_PROGRESS.set(self.progress.running)  # the cases of this process (and their threads) tell it their steps
        with contextlib.suppress(AttributeError, OSError, ValueError):  # none in an in-process run: pytest's writer
            self.out = TerminalLines(config.get_terminal_writer(), sys.stdout)  # now, while capture is suspended
        self.loop = Ticker(self.progress, self.out or self._say, self.channel)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        workerinput = getattr(session.config, "workerinput", None)
        if workerinput is not None and workerinput.get(TURNS_KEY):  # a worker of a live run: publish its turns
            ON_PROGRESS.set(self.running)
            channel = TurnChannel(Path(workerinput[TURNS_KEY]))
            self.loop = Publisher(channel, workerinput.get("workerid", "gw"), self.running)
        elif workerinput is None and not getattr(session.config.option, "numprocesses", None):
            cases = [case for item in session.items if (case := is_case(item))]
            self._estimate_collected(session.config, [case_id(s.scenario_id, r) for s, r in cases])
            self._start(session.config, len(cases))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        cases = [found.group(0) for nodeid in ids if (found := CASE_IN_ID.search(nodeid))]
        self._estimate_collected(self.run_config, cases)
        self._start(self.run_config, len(cases))

    def _estimate_collected(self, config: pytest.Config, cases: list[str]) -> None:
        """The controller, once: the cost estimate again when pytest collected fewer cases than the header's."""
        self.run.collected = len(cases)  # what an interrupted run counts its cases against
        if self.estimated or config.option.collectonly or not cases:  # not a suite run, or -k left no case
            return
        self.estimated = True
        try:
            from ..run.header import collected_cost_lines  # the controller's header: never loaded by a worker

            lines = collected_cost_lines(self.run, cases)
        except PersonalensError as exc:
            lines = [f"no estimate for the collected cases: {exc}"]
        reporter = config.pluginmanager.getplugin("terminalreporter")
        for line in lines if reporter is not None else ():
            reporter.write_line(redact(f"personalens: {line}"))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        carried = row_of(report)
        if carried is not None:
            self.running.finish(report.nodeid)  # an xdist worker's: the case has ended
        if carried is None or self.progress is None:
            return
        text = self.progress.finished(carried["scenario_id"], carried["shown"])
        if text is not None:
            self._say(text)

    def _say(self, text: str) -> None:
        """A line of its own, after whatever pytest wrote on the current one (its progress dots); flushed."""
        writer = self.run_config.get_terminal_writer()
        if getattr(writer, "width_of_current_line", 0):
            self.reporter.write("\n")
        self.reporter.write_line(text)
        self.reporter.flush()

    def pytest_sessionfinish(self) -> None:
        for part in (self.loop, self.out, self.channel):  # the thread first, then what it writes to
            if part is not None:
                part.close()
