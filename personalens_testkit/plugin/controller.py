"""The controlling process's hooks (registered by :mod:`.configure` in it alone): it writes every row as it
arrives, stops the run when told to (a full disk, a dead endpoint, a budget, a decided verdict), and at the
end aggregates the rows once - report files, gates, baseline - and says the verdict. Hooks:
``pytest_sessionstart``, ``pytest_xdist_make_scheduler``, ``pytest_runtestloop``, ``pytest_runtest_logreport``,
``pytest_sessionfinish``, ``pytest_terminal_summary``. Glue: the work is done by
:class:`~personalens_testkit.run.state.Run` and :class:`~personalens_testkit.run.controller.RunController`."""

from __future__ import annotations

import shutil
from typing import Any, Generator

import pytest

from ..errors import PersonalensError
from ..run.controller import RunController
from ..run.lanes import of_run
from ..run.state import Run
from ..secrets import redact
from .cases import is_case
from .project import asked_for_personalens
from .rows import row_of


class ControllerHooks:
    """Hooks of the controlling process only: it alone writes the results file and reports the run."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.controller = RunController(run)
        self.outcome: Any = None
        self.failures: list[str] = []
        self.session: pytest.Session | None = None
        #: the lanes scheduler of an ``-n N --concurrency K`` run (its queue files are removed at the end)
        self.scheduler: Any = None
        #: --judge-batch submit: what was sent, in lines
        self.batch_lines: list[str] = []

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """With -n and --concurrency K: xdist's load scheduling, each worker's queue deep enough for its K lanes."""
        from .xdist_queue import make_scheduler  # xdist's scheduler module: loaded by an xdist controller only

        self.scheduler = make_scheduler(config, log, of_run(self.run), self.run.run_dir)
        return self.scheduler

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, Any]:
        """Before the first case: the results file exists with room reserved, and the stop signal is ready."""
        if not session.config.option.collectonly and any(is_case(item) for item in session.items):
            try:
                self.controller.start()
            except PersonalensError as exc:
                raise pytest.UsageError(redact(f"personalens: {exc}")) from None
        return (yield)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Write the case's row. A stop it leads to is raised as the run's stop signal, which every process reads
        before each case (pytest_runtest_protocol): no further case starts, and each case under way - in a worker, or
        started ahead - keeps its row. Under xdist, the workers are also told to shut down once their queued cases
        are done (xdist reads their reports until then); in one process pytest's loop is left to the protocol hook,
        which ends it once no case started ahead waits for its row."""
        carried = row_of(report)
        reason = None if carried is None or self.run.writer is None else \
            self.controller.record(carried["row"], carried["error"], report.nodeid)
        if reason is None or self.session is None:
            return
        dsession = self.session.config.pluginmanager.getplugin("dsession")
        if dsession is not None:
            dsession.shouldstop = f"personalens: stopped: {reason}"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Aggregate every worker's rows once: report files, gates, baseline; the verdict fails the run."""
        if self.scheduler is not None:
            shutil.rmtree(self.scheduler.folder, ignore_errors=True)  # the workers' queues: read by the run alone
        # pytest's INTERRUPTED without a stop of ours: Ctrl-C, or another plugin's stop - cases were left unrun
        self.controller.adopt()  # a stop raised by a worker after the last row reached this process
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED and self.controller.stopped is None
        try:
            self.outcome = self.run.finish(stopped=self.controller.stopped, interrupted=interrupted,
                                           decision=self.controller.decision)
            if self.run.settings.judge_batch == "submit" and self.outcome is not None:
                from ..run.batch_judging import submit_at_end  # --judge-batch submit's: loaded when asked for

                run = self.run
                budget = run.runner.budget if run.settings.max_cost is not None else None
                self.batch_lines = submit_at_end(run.settings, run.run_dir, run.run_id, run.models.context,
                                                 run.recording.plan.cassettes, sent=not interrupted and self.controller.stopped is None,
                                                 spent=lambda: budget.read().spent if budget is not None else 0.0)
        except PersonalensError as exc:
            self.failures = [str(exc)]
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if self.outcome is None:
            return
        self.failures += self.outcome.failures + self.outcome.verdict.failures
        if self.controller.decision and session.exitstatus == pytest.ExitCode.INTERRUPTED:  # decided:
            session.exitstatus = pytest.ExitCode.OK  # the verdict says
        nothing_left = session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and bool(self.run.cases.resumed)
        if self.failures and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif nothing_left:  # resuming a complete run: its verdict is the kept rows'
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        outcome = self.outcome
        if outcome is not None or self.controller.stopped is not None:
            # loaded by a run that has a report or stopped early (never by a collection, say)
            from ..report.summary import format_comparison, format_summary, format_verdict, stop_lines
        if outcome is not None:
            terminalreporter.section("personalens")
            for line in format_summary(outcome.report):
                write(line)
            if outcome.report.comparison is not None:
                write("")
                for line in format_comparison(outcome.report.comparison):
                    write(line)
        if outcome is not None:
            for line in format_verdict(outcome.verdict, self.run.writer.path if self.run.writer else None):
                write(line)
        if not self.run.cases.all and self.run.cases.resumed:
            write(f"personalens: every case was already scored in {self.run.settings.resume}: nothing left to run")
        for failure in self.failures:
            write(redact(f"personalens: FAILED {failure}"), red=True, bold=True)
        writer = self.run.writer
        if writer is not None and writer.count:
            write(f"personalens: {writer.count} result rows -> {writer.path}")
        if self.controller.stopped is not None:
            for line, early in stop_lines(self.controller.stopped, outcome.report if outcome else None, writer):
                write(redact(f"personalens: {line}"), red=early, bold=True)
        for kind, path in (outcome.written.items() if outcome is not None else ()):
            write(f"personalens: {kind} report -> {path}")
        if outcome is not None and outcome.recorded_rows:
            write(f"personalens: {outcome.recorded_rows} recorded result rows -> {self.run.recording.recorded_path}")
        if self.run.recording.kept_back:
            write(f"personalens: {self.run.recording.kept_back}")
        for line in self.batch_lines:
            write(redact(f"personalens: {line}"), bold=True)
        if self.run.settings.otel_endpoint:
            from ..run.traces import summary

            for line in summary(self.run.settings, self.run.run_dir):
                write(f"personalens: {line}")
        session = self.session
        if (outcome is None and session is not None and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
                and not session.testscollected and asked_for_personalens(session.config)):
            write("personalens: no PersonaLens case was collected. A suite is a test file whose tests carry "
                  "@pytest.mark.personalens: `personalens init` writes suites/test_personalens.py into this "
                  "repository; then run `pytest suites/`", yellow=True)
