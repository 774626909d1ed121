"""The run of each process: its options, its settings, its checks before any case, the embedded servers an
xdist controller shares with its workers and the header; at the end, each process's traces sent (``--otel-endpoint``).
Hooks: ``pytest_addoption``, ``pytest_configure``, ``pytest_sessionfinish``, ``pytest_unconfigure``,
``pytest_configure_node``, ``pytest_report_header``."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import warnings
from typing import Any

import pytest

from ..errors import PersonalensError
from ..run.lanes import of_run
from ..run.state import Run, new_run_id
from ..secrets import redact, register_addresses, register_secret_names
from ..settings import OPTION_NAMES, SETTINGS, check_selection, resolve_settings
from .cases import STATE
from .progress import ProgressHooks
from .project import MARKER, project_root, runs_suites
from .reports import KeptReports

#: the workerinput key of what the controller shares with its xdist workers (the run id, the servers)
WORKER_KEY = "personalens"
#: pytest-asyncio's warning, at start-up, that a project leaves its fixtures' loop scope unset
ASYNCIO_SCOPE_UNSET = 'The configuration option "asyncio_default_fixture_loop_scope" is unset'


def or_exit(call: Any) -> Any:
    """``call()``, or pytest stopped with its error's one line."""
    try:
        return call()
    except PersonalensError as exc:
        pytest.exit(redact(str(exc)), returncode=pytest.ExitCode.USAGE_ERROR)


def quiet_asyncio_default(config: pytest.Config) -> None:
    """pytest-asyncio (a dependency's) warns in every project that does not set its fixtures' loop scope; the suites
    use no async fixture, so that one warning is filtered out for this process (called before pytest-asyncio's
    own configure hook: the filter is in place when it warns). A project's own setting, and every other warning,
    stay as they are."""
    with contextlib.suppress(ValueError, KeyError):  # ValueError: no pytest-asyncio in the environment
        if not config.getini("asyncio_default_fixture_loop_scope"):
            warnings.filterwarnings("ignore", message=re.escape(ASYNCIO_SCOPE_UNSET),
                                    category=pytest.PytestDeprecationWarning)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("personalens", "PersonaLens personalization benchmark")
    for setting in SETTINGS:
        if setting.option is not None:
            group.addoption(setting.option, **setting.option_arguments())


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(task_kind): a PersonaLens suite test, parametrized with one scenario per case"
    )
    quiet_asyncio_default(config)
    options = {name: config.getoption(name) for name in OPTION_NAMES}
    try:
        settings = resolve_settings(options, project_root(config), os.environ)
        register_secret_names(settings.secret_env)
        register_addresses(settings.endpoint_addresses())
        check_selection(settings)
    except PersonalensError as exc:
        raise pytest.UsageError(redact(str(exc))) from None
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        shared = workerinput.get(WORKER_KEY, {})
        run = Run(settings, run_id=shared.get("run_id") or new_run_id(), is_controller=False,
                  server_handles=shared.get("servers"))
        run.workers = int(workerinput.get("workercount") or 0)
        run.queue_written = bool(shared.get("queues"))
        run.process = str(workerinput.get("workerid") or "gw")
    else:
        from .controller import ControllerHooks  # the controlling process's: an xdist worker never loads it

        run = Run(settings, run_id=new_run_id(), is_controller=True)
        run.workers = int(getattr(config.option, "numprocesses", None) or 0)  # xdist's -n (auto: the cores)
        config.pluginmanager.register(ControllerHooks(run), "personalens-controller")
        config.pluginmanager.register(KeptReports(config, MARKER), "personalens-kept-reports")
        if runs_suites(config):
            terminate_as_interrupt(config)  # from here: a wait before the cases (--batch-wait) ends as Ctrl-C does
            try:
                before_cases(run, reach=not config.option.collectonly)
            except PersonalensError as exc:
                raise pytest.UsageError(redact(str(exc))) from None
    config.pluginmanager.register(ProgressHooks(run, config), "personalens-progress")  # shown by the controller
    config.stash[STATE] = run


def terminate_as_interrupt(config: pytest.Config) -> None:
    """SIGTERM (what CI sends a cancelled job, what ``timeout`` sends) ends the run as Ctrl-C does: interrupted, with
    every finished case's row, its report and its cassettes kept - not killed where it stands. Until the run ends
    (the handler before is put back then); the main thread's only (where Python delivers signals)."""
    if threading.current_thread() is not threading.main_thread():
        return
    before = signal.getsignal(signal.SIGTERM)

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)
    config.add_cleanup(lambda: signal.signal(signal.SIGTERM, before))


def before_cases(run: Run, *, reach: bool) -> None:
    """The controller's checks before any case: a broken thresholds or expectations file, a --resume file of
    another set-up, an unusable calibration, a model or bot that cannot be reached (``reach``: not a
    --collect-only) or a selection that cannot run stops the run here, in one line; a resumed run's kept rows
    open its results."""
    from ..run.header import check_calibration

    run.thresholds  # noqa: B018
    run.expectations  # noqa: B018
    if run.settings.otel_endpoint:
        from ..run.traces import check_installed

        check_installed()
    run.cases.resumed  # noqa: B018
    check_calibration(run)
    if reach and run.settings.judge_batch != "off":  # the batch engine's jobs: their answers in, or it is reachable
        from ..run.batch_judging import check_engines, collect

        if run.settings.judge_batch == "collect":
            say(collect(run.settings, run.models.context(), run.recording.plan.cassettes, say=say))
        else:
            check_engines(run.settings, run.models.context())
    run.preflight(reach=reach)
    run.recording.plan.check_runnable()
    if reach:
        run.carry_resumed_rows()


def say(line: str) -> None:
    """A line to the terminal before pytest's own output starts (not captured: a wait's progress is seen live)."""
    print(redact(f"personalens: {line}"), file=sys.__stderr__, flush=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In every process (an xdist worker before it tells the controller it has finished): its traces' last spans
    sent, and what it sent kept for the run's line."""
    run = session.config.stash.get(STATE, None)
    if run is not None and run.settings.otel_endpoint:
        from ..run.traces import finish

        finish(run.run_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(STATE, None)
    if run is not None:
        run.close()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: launch the shared embedded servers once and hand their addresses to the workers."""
    config = node.config
    run = config.stash[STATE]
    launch = not config.option.collectonly and runs_suites(config)
    servers = or_exit(run.models.launch_servers) if launch else {}
    from .xdist_queue import writes_queues  # the controller's only

    node.workerinput[WORKER_KEY] = {"run_id": run.run_id, "servers": servers,
                                    "queues": writes_queues(config, of_run(run))}


def pytest_report_header(config: pytest.Config) -> list[str]:
    from ..run.header import header_lines, identity_lines

    run = config.stash[STATE]
    s = run.settings
    lines = [f"personalens: {line}" for line in or_exit(lambda: identity_lines(run))]
    lines.append(f"personalens: results -> {run.run_dir}")
    if s.rootdir != config.rootpath:
        lines.append(f"personalens: project {s.rootdir} (pytest took its rootdir, {config.rootpath}, from a path "
                     "option given as a separate argument; write it as --option=PATH to keep pytest's own settings too)")
    if runs_suites(config):
        workers = getattr(config.option, "numprocesses", None) or 0  # xdist's -n (auto: the cores)
        lines += [f"personalens: {line}" for line in or_exit(lambda: header_lines(run, workers))]
    return lines
