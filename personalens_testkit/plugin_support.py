"""The pytest-facing pieces the plugin's hooks use: where the project is, whether a run collects suites,
a case's parameters, and the hooks of the controlling process (rows written, an early stop, the
end-of-run summary and verdict). Glue: the work is done by :class:`~personalens_testkit.run.state.Run`."""

from __future__ import annotations

import contextlib
import fnmatch
import re
import warnings
from pathlib import Path
from typing import Any, Generator

import pytest

from .data.models import Scenario
from .errors import PersonalensError
from .gating.expectations import PASS, Expectation
from .report.summary import format_comparison, format_summary, format_verdict, stop_lines
from .run.early_stop import decision_of
from .run.controller import RunController, lanes
from .run.state import Run
from .scheduling import make_scheduler
from .secrets import redact
from .settings import SETTINGS

STATE = pytest.StashKey[Run]()

#: options whose value is a path: given as a separate argument (``--resume /elsewhere/results.jsonl``),
#: pytest takes it for a test path while it looks for the project folder, before it knows these options
_PATH_OPTIONS = frozenset(setting.option for setting in SETTINGS if setting.kind == "path" and setting.option)
_ROOT_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "personalens.toml")


def project_root(config: pytest.Config) -> Path:
    """The project whose config the run reads: pytest's rootdir, unless pytest took it from the value of one
    of our path options (then the folder pytest would have found from where it was started)."""
    root = config.rootpath
    started = config.invocation_params.dir
    args = [str(arg) for arg in config.invocation_params.args]
    values = [(started / args[i + 1]).resolve() for i, arg in enumerate(args[:-1]) if arg in _PATH_OPTIONS]
    if config.getoption("rootdir", None) or not any(root == v or root in v.parents for v in values):
        return _with_config(root)
    for folder in (started, *started.parents):
        if any((folder / name).is_file() for name in _ROOT_FILES):
            return _with_config(folder)
    return _with_config(started)  # no config file anywhere above: pytest itself would have taken this folder


def _with_config(root: Path) -> Path:
    """``root``, or the nearest folder above it with a personalens.toml when ``root`` has none of the testkit's
    config (a suites folder run in a repository whose pytest has no config file of its own)."""
    if (root / "personalens.toml").is_file() or _has_tool_table(root / "pyproject.toml"):
        return root
    return next((folder for folder in root.parents if (folder / "personalens.toml").is_file()), root)


def _has_tool_table(pyproject: Path) -> bool:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return "[tool.personalens" in pyproject.read_text(encoding="utf-8")
    return False


def _asked_for_personalens(config: pytest.Config) -> bool:
    """Whether this run meant to run the benchmark: an option of ours given, or a project config of ours."""
    from .settings import OPTION_NAMES

    root = project_root(config)
    return (any(config.getoption(name, None) not in (None, False) for name in OPTION_NAMES)
            or (root / "personalens.toml").is_file() or _has_tool_table(root / "pyproject.toml"))


def xdist_upcoming(session: pytest.Session) -> Any:
    """In an xdist worker: a function giving the node ids of the cases queued for it, in order (the next one
    first); None when it cannot be known safely (the work-stealing scheduler takes queued cases back)."""
    if getattr(session.config.option, "dist", "load") == "worksteal":
        return None
    interactor = next((p for p in session.config.pluginmanager.get_plugins()
                       if hasattr(p, "torun") and hasattr(p, "nextitem_index")), None)
    if interactor is None:
        return None

    def upcoming() -> list[str]:
        with interactor.torun.lock() as queued:
            indices = [interactor.nextitem_index, *queued]
        items = session.items
        return [items[i].nodeid for i in indices if isinstance(i, int) and 0 <= i < len(items)]

    return upcoming


#: pytest-asyncio's warning, at start-up, that a project leaves its fixtures' loop scope unset
ASYNCIO_SCOPE_UNSET = 'The configuration option "asyncio_default_fixture_loop_scope" is unset'


def quiet_asyncio_default(config: pytest.Config) -> None:
    """pytest-asyncio (a dependency's) warns in every project that does not set its fixtures' loop scope; the suites
    use no async fixture, so that one warning is filtered out for this process (called before pytest-asyncio's
    own configure hook: the filter is in place when it warns). A project's own setting, and every other warning,
    stay as they are."""
    with contextlib.suppress(ValueError, KeyError):  # ValueError: no pytest-asyncio in the environment
        if not config.getini("asyncio_default_fixture_loop_scope"):
            warnings.filterwarnings("ignore", message=re.escape(ASYNCIO_SCOPE_UNSET),
                                    category=pytest.PytestDeprecationWarning)


def runs_suites(config: pytest.Config, marker: str) -> bool:
    """Whether this run collects PersonaLens suites: a test file it collects uses the marker.

    Decides whether to check the assistant and launch embedded servers up front, so an
    unrelated ``pytest`` in the same project never starts a bot or a model.
    """
    args = [arg.split("::", 1)[0] for arg in config.args if not arg.startswith("-")]
    roots = [config.invocation_params.dir / arg for arg in args] or [config.rootpath / p for p in config.getini("testpaths")]
    skipped = config.getini("norecursedirs")
    for root in roots or [config.rootpath]:
        files = [root] if root.is_file() else root.rglob("test*.py") if root.is_dir() else []
        for path in files:
            parts = path.relative_to(root).parts[:-1] if path != root else ()
            if any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in skipped):
                continue  # the folders pytest itself does not collect from (.venv, node_modules, ...)
            try:
                if f"mark.{marker}(" in path.read_text(encoding="utf-8", errors="ignore"):
                    return True
            except OSError:
                continue
    return False


def or_exit(call: Any) -> Any:
    """``call()``, or pytest stopped with its error's one line."""
    try:
        return call()
    except PersonalensError as exc:
        pytest.exit(redact(str(exc)), returncode=pytest.ExitCode.USAGE_ERROR)


def expected_of(run: Run, scenario: Scenario) -> Expectation:
    """The case's expectation; a whole-run replay checks reproduction, whatever was expected."""
    if run.expectations is None or run.recording.plan.checks_reproduction:
        return PASS
    return run.expectations.of(scenario.scenario_id)


def is_case(item: pytest.Item) -> tuple[Scenario, int] | None:
    """(scenario, try) of a suite case; None for any other item."""
    callspec = getattr(item, "callspec", None)
    scenario = callspec.params.get("scenario") if callspec is not None else None
    if not isinstance(scenario, Scenario):
        return None
    return scenario, callspec.params.get("personalens_repeat", 1)


class ControllerHooks:
    """Hooks of the controlling process only: it alone writes the results file and reports the run."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.controller = RunController(run)
        self.outcome: Any = None
        self.failures: list[str] = []
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        self.controller.lanes = lanes(getattr(session.config.option, "numprocesses", None), self.run.settings.concurrency)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """With -n and --concurrency K: xdist's load scheduling, each worker's queue deep enough for its K lanes."""
        return make_scheduler(config, log, self.run.settings.concurrency)

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
        line = getattr(report, "personalens_row", None)
        reason = None if line is None or self.run.writer is None else \
            self.controller.record(line, getattr(report, "personalens_error", None), report.nodeid)
        if reason is not None and self.session is not None:  # no further case starts, here or in a worker
            message = f"personalens: stopped: {reason}"
            self.session.shouldstop = message
            dsession = self.session.config.pluginmanager.getplugin("dsession")
            if dsession is not None:
                dsession.shouldstop = message

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Aggregate every worker's rows once: report files, gates, baseline; the verdict fails the run."""
        try:
            self.outcome = self.run.finish(stopped=self.controller.stopped)
        except PersonalensError as exc:
            self.failures = [str(exc)]
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if self.outcome is None:
            return
        self.failures += self.outcome.failures + self.outcome.verdict.failures
        if decision_of(self.controller.stopped) and session.exitstatus == pytest.ExitCode.INTERRUPTED:  # decided:
            session.exitstatus = pytest.ExitCode.OK  # the verdict says
        nothing_left = session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and bool(self.run.cases.resumed)
        if self.failures and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif nothing_left:  # resuming a complete run: its verdict is the kept rows'
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        outcome = self.outcome
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
        for line, early in stop_lines(self.controller.stopped, outcome.report if outcome else None, writer):
            write(redact(f"personalens: {line}"), red=early, bold=True)
        for kind, path in (outcome.written.items() if outcome is not None else ()):
            write(f"personalens: {kind} report -> {path}")
        if outcome is not None and outcome.recorded_rows:
            write(f"personalens: {outcome.recorded_rows} recorded result rows -> {self.run.recording.recorded_path}")
        if self.run.recording.kept_back:
            write(f"personalens: {self.run.recording.kept_back}")
        session = self.session
        if (outcome is None and session is not None and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
                and not session.testscollected and _asked_for_personalens(session.config)):
            write("personalens: no PersonaLens case was collected. A suite is a test file whose tests carry "
                  "@pytest.mark.personalens: `personalens init` writes suites/test_personalens.py into this "
                  "repository; then run `pytest suites/`", yellow=True)
