"""pytest plugin (registered through the ``pytest11`` entry point): options, parametrization, fixtures
and xdist wiring. Glue only - the run is :class:`~personalens_testkit.run.state.Run`, its verdicts are
decided in :mod:`personalens_testkit.gating`.

A test takes part when it is marked ``@pytest.mark.personalens(task_kind="sd"|"md")`` and
asks for the ``scenario`` argument; the plugin is inert for every other test.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Generator

import pytest

from .data.models import Scenario, TaskKind, case_id
from .errors import PersonalensError
from .gating.expectations import case_verdict
from .gating.thresholds import ScenarioFloors, shortfalls
from .plugin_support import (
    STATE, ControllerHooks, expected_of, is_case, or_exit, project_root, quiet_asyncio_default, runs_suites,
    xdist_upcoming,
)
from .plugin_progress import ProgressHooks
from .plugin_reports import KeptReports
from .run.controller import case_row
from .run.early_stop import order_key
from .run.header import check_calibration, header_lines, identity_lines
from .run.state import Run, new_run_id
from .secrets import redact, register_secret_names
from .settings import OPTION_NAMES, SETTINGS, check_selection, resolve_settings
from .transcripts import describe_replay_change, describe_shortfalls

if TYPE_CHECKING:  # the dialogue and judging machinery loads with the first case, not with pytest
    from .evaluation import Evaluation

EVALUATION = pytest.StashKey["Evaluation"]()
#: the floors a case missed, as its own check found them (its row reports exactly those)
SHORTFALLS = pytest.StashKey[list]()
#: the case's verdict against its expectation (gating.expectations.case_verdict)
VERDICT = pytest.StashKey[str]()
MARKER = "personalens"
WORKER_KEY = "personalens"


class KnownFailure(Exception):
    """Never raised: the xfail marker of a case expected to fail names it, so only pytest.xfail() makes the case
    xfail (a regression still fails, and a pass shows as XPASS)."""


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
        check_selection(settings)
    except PersonalensError as exc:
        raise pytest.UsageError(redact(str(exc))) from None
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        shared = workerinput.get(WORKER_KEY, {})
        run = Run(settings, run_id=shared.get("run_id") or new_run_id(), is_controller=False,
                  server_handles=shared.get("servers"))
    else:
        run = Run(settings, run_id=new_run_id(), is_controller=True)
        config.pluginmanager.register(ControllerHooks(run), "personalens-controller")
        config.pluginmanager.register(KeptReports(config, MARKER), "personalens-kept-reports")
        if runs_suites(config, MARKER):
            try:
                run.thresholds  # noqa: B018 - a broken thresholds or expectations file stops the run here, in one line
                run.expectations  # noqa: B018
                run.cases.resumed  # noqa: B018 - a --resume file of another set-up stops the run before any call
                check_calibration(run)
                run.preflight(reach=not config.option.collectonly)
                run.recording.plan.check_runnable()
                if not config.option.collectonly:
                    run.carry_resumed_rows()
            except PersonalensError as exc:
                raise pytest.UsageError(redact(str(exc))) from None
    config.pluginmanager.register(ProgressHooks(run, config), "personalens-progress")  # shown by the controller
    config.stash[STATE] = run


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(STATE, None)
    if run is not None:
        run.close()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: launch the shared embedded servers once and hand their addresses to the workers."""
    config = node.config
    run = config.stash[STATE]
    launch = not config.option.collectonly and runs_suites(config, MARKER)
    servers = or_exit(run.models.launch_servers) if launch else {}
    node.workerinput[WORKER_KEY] = {"run_id": run.run_id, "servers": servers}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or "scenario" not in metafunc.fixturenames:
        return
    kind = TaskKind(marker.kwargs.get("task_kind", marker.args[0] if marker.args else "sd"))
    run = metafunc.config.stash[STATE]
    try:
        cases = run.cases_of(kind)
        run.thresholds  # noqa: B018 - a broken thresholds or expectations file stops the run before any case
        run.expectations  # noqa: B018
    except PersonalensError as exc:
        pytest.fail(redact(str(exc)), pytrace=False)
    if run.settings.repeat == 1:
        metafunc.parametrize("scenario", [s for s, _ in cases], ids=[s.scenario_id for s, _ in cases])
    else:
        metafunc.parametrize(("scenario", "personalens_repeat"), cases,
                             ids=[case_id(s.scenario_id, r) for s, r in cases])


def pytest_collection_finish(session: pytest.Session) -> None:
    """With --concurrency K, evaluate the cases ahead, K at a time (in each xdist worker, from its own queue)."""
    config = session.config
    run = config.stash.get(STATE, None)
    if run is None or run.settings.concurrency < 2 or config.option.collectonly:
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return  # the xdist controller runs no case: its workers evaluate ahead, each from its own queue
    upcoming = xdist_upcoming(session) if hasattr(config, "workerinput") else None
    if hasattr(config, "workerinput") and upcoming is None:
        return  # a work-stealing scheduler takes queued cases back: no case is evaluated before it is run
    cases = [(item.nodeid, *is_case(item)) for item in session.items if is_case(item)]
    run.runner.evaluate_ahead(cases, upcoming)  # type: ignore[arg-type]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A suite with no scenario selected (e.g. ``--task-kind sd`` for the multi-domain file) is deselected, not skipped."""
    def empty(item: pytest.Item) -> bool:
        return item.get_closest_marker(MARKER) is not None and is_case(item) is None

    dropped = [item for item in items if empty(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not empty(item)]
    run = config.stash.get(STATE, None)
    if run is not None and run.settings.stop_when_decided:  # every process sorts alike: xdist sees one order
        items.sort(key=order_key([case for item in items if (case := is_case(item))], run.settings.order_seed, is_case))
    # a whole-run replay checks that each case reproduces its recording, whatever it scored: no expectation applies
    reproducing = run is None or run.recording.plan.checks_reproduction
    expectations = None if reproducing else run.expectations
    for item in items if expectations is not None else ():
        case = is_case(item)
        expectation = expectations.of(case[0].scenario_id) if case else None
        if expectation is not None and expectation.outcome == "fail":  # a pass shows as XPASS
            item.add_marker(pytest.mark.xfail(raises=KnownFailure, strict=False, reason=f"expected: {expectation}"))


@pytest.fixture(scope="session")
def personalens_run(request: pytest.FixtureRequest) -> Run:
    """The run in this process (settings, dataset, models)."""
    return request.config.stash[STATE]


@pytest.fixture(scope="session")
def score_floors(personalens_run: Run) -> ScenarioFloors:
    """The per-scenario floors from thresholds.yaml."""
    try:
        return personalens_run.thresholds.scenario
    except PersonalensError as exc:
        pytest.fail(redact(str(exc)), pytrace=False)


@pytest.fixture
def personalens_repeat() -> int:
    """Which try of its scenario a case is (parametrized by ``--repeat K``; 1 otherwise)."""
    return 1


@pytest.fixture
def judged_dialogue(request: pytest.FixtureRequest, scenario: Scenario, personalens_repeat: int,
                    personalens_run: Run) -> Evaluation:
    """Run the scenario's dialogue and judge it. A model or parsing failure is an error of the case."""
    evaluation = personalens_run.runner.evaluate_case(request.node.nodeid, scenario, personalens_repeat)
    request.node.stash[EVALUATION] = evaluation
    path = personalens_run.runner.transcript_path(scenario, personalens_repeat)
    if evaluation.error is not None:
        raw = f"\nraw judge answer: {evaluation.error.raw_answer!r}" if evaluation.error.raw_answer is not None else ""
        message = redact(f"{evaluation.error.describe()}{raw}\ntranscript so far: {path}")
        verdict = case_verdict(expected_of(personalens_run, scenario), [], evaluation.error.source, evaluation.error.kind)
        request.node.stash[VERDICT] = verdict
        if verdict == "not scored":  # the benchmark's models failed, not the bot: counted apart
            pytest.skip(f"not scored (infrastructure): {message}")
        if verdict == "reply changed":  # the bot changed and no model may be called: honest, not a failure of it
            pytest.skip(f"not scored: {message}")
        if verdict == "expected failure":
            pytest.xfail(f"expected failure: {message}")
        pytest.fail(message, pytrace=False)
    return evaluation


@pytest.fixture
def check_floors(request: pytest.FixtureRequest, score_floors: ScenarioFloors, personalens_run: Run) -> Any:
    """``check_floors(evaluation)``: fail the case, with scores, reasons and transcript path, if a floor is missed.
    The floors are the ``score_floors`` fixture's (override it to change them): the row reports what it found."""

    def check(evaluation: Evaluation) -> None:
        assert evaluation.verdict is not None
        changed = personalens_run.recording.differences(evaluation)
        if changed is not None:  # an offline replay of a recording: it must reproduce the recorded scores
            if changed:
                request.node.stash[VERDICT] = "regression"
                pytest.fail(redact(describe_replay_change(evaluation, changed)), pytrace=False)
            return
        found = shortfalls(score_floors, evaluation.verdict.scores.model_dump())
        request.node.stash[SHORTFALLS] = found
        expectation = expected_of(personalens_run, evaluation.scenario)
        live = evaluation.judged_live and personalens_run.thresholds.aggregate.live_judged_floors == "report"
        verdict = request.node.stash[VERDICT] = case_verdict(expectation, [s.metric for s in found], judged_live=live)
        if found:
            path = personalens_run.runner.transcript_path(evaluation.scenario, evaluation.repeat)
            missed = "; ".join(f"{s.metric} {str(s.value).lower()} below {str(s.floor).lower()}" for s in found)
            if verdict == "expected failure":  # one line: what it missed, as expected, and where to read it
                pytest.xfail(redact(f"expected failure ({expectation}): {missed}; transcript {path}"))
            if verdict == "unconfirmed":  # one live judgement: evidence, not a verdict
                pytest.xfail(redact(f"unconfirmed: {missed} on a live judgement (the judge's noise can explain one "
                                    f"score; the run's gates and baseline decide); transcript {path}"))
            message = redact(describe_shortfalls(evaluation, found, path))
            known = personalens_run.expectations is not None  # without an expectations file, as before: a plain failure
            pytest.fail(message + (f"\nREGRESSION: expected {expectation}" if known else ""), pytrace=False)

    return check


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    evaluation = item.stash.get(EVALUATION, None)
    if evaluation is None:
        return report
    if report.when == "teardown":
        del item.stash[EVALUATION]  # items live as long as the session: thousands of dialogues would stay in memory
        return report
    if (report.when == "setup" and not report.passed) or report.when == "call":
        status = "error" if report.when == "setup" else ("passed" if report.passed else "failed")
        run = item.config.stash[STATE]
        expected = str(expected_of(run, evaluation.scenario))
        verdict = item.stash.get(VERDICT, "pass" if report.passed else "regression")
        report.personalens_row, report.personalens_error, stand_in = case_row(
            run, evaluation, status, item.stash.get(SHORTFALLS, []), expected=expected, verdict=verdict)
        if stand_in:
            report.outcome, report.longrepr = "failed", "the result row could not be built (see its error)"
    return report


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every hook has read the case's row: off the report, which pytest keeps all session (rows of dialogue)."""
    for name in ("personalens_row", "personalens_error"):
        report.__dict__.pop(name, None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A run told to stop (a full disk, a dead endpoint) starts no further case, in any process."""
    run = item.config.stash.get(STATE, None)
    if run is None or item.get_closest_marker(MARKER) is None:
        return None
    reason = run.stop_signal.reason()
    if reason is None or run.runner.started(item.nodeid):  # a case already under way ahead keeps its row
        return None
    item.session.shouldstop = f"personalens: stopped: {reason}"
    return True  # not run: no report, no row


def pytest_report_header(config: pytest.Config) -> list[str]:
    run = config.stash[STATE]
    s = run.settings
    lines = [f"personalens: {line}" for line in or_exit(lambda: identity_lines(run))]
    lines.append(f"personalens: results -> {run.run_dir}")
    if s.rootdir != config.rootpath:
        lines.append(f"personalens: project {s.rootdir} (pytest took its rootdir, {config.rootpath}, from a path "
                     "option given as a separate argument; write it as --option=PATH to keep pytest's own settings too)")
    if runs_suites(config, MARKER):
        workers = getattr(config.option, "numprocesses", None) or 0  # xdist's -n (auto: the cores)
        lines += [f"personalens: {line}" for line in or_exit(lambda: header_lines(run, workers))]
    return lines
