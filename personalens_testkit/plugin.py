"""pytest plugin (registered through the ``pytest11`` entry point): options, parametrization,
fixtures and xdist wiring. Glue only - the work happens in :mod:`personalens_testkit.session`.

A test takes part when it is marked ``@pytest.mark.personalens(task_kind="sd"|"md")`` and
asks for the ``scenario`` argument; the plugin is inert for every other test.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path
from typing import Any, Generator

import pytest

from .config import check_selection, resolve_settings
from .data.models import Scenario, TaskKind, case_id
from .errors import PersonalensError, StorageError
from .evaluation import Evaluation
from .gating.thresholds import ScenarioFloors, shortfalls
from .files import write_atomically
from .secrets import redact, redact_json, register_secret_names
from .report.compare import format_comparison
from .report.summary import failed_gates, format_summary
from .report.results import build_row, describe_replay_change, describe_shortfalls, format_transcript
from .runstop import Breaker
from .session import RunState, new_run_id

STATE = pytest.StashKey[RunState]()
EVALUATION = pytest.StashKey[Evaluation]()
MARKER = "personalens"
WORKER_KEY = "personalens"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("personalens", "PersonaLens personalization benchmark")
    add = group.addoption
    add("--personalens-data", metavar="DIR", default=None,
        help="an upstream PersonaLens checkout (or its data/ folder); default: the bundled 50-profile sample")
    add("--sample", default=None, metavar="{30,50,100,all}",
        help="the benchmark's published profile sample (default 50; 'all' = every profile in the data)")
    add("--profiles", default=None, metavar="IDS", help="run these profiles only, e.g. 7,53 (replaces --sample)")
    add("--domains", default=None, metavar="NAMES",
        help="keep scenarios whose domains are all among these, e.g. Movies,Music")
    add("--task-kind", default=None, metavar="{sd,md,both}", help="single-domain, multi-domain or both (default)")
    add("--max-turns", type=int, default=None, metavar="N",
        help="turn limit per dialogue (default: the benchmark's 20 single-domain, 30 multi-domain)")
    add("--assistant", default=None, metavar="NAME", help="the assistant under test (default: reference)")
    add("--assistant-model", default=None, metavar="SPEC",
        help="model of the reference assistant (default: local)")
    add("--assistant-context", default=None, metavar="PARTS",
        help="user context the reference assistant sees: none (default) or any of demographics,interactions,situation (D,I,S)")
    add("--user-model", default=None, metavar="SPEC", help="user-agent model: local (default), local:FILE.gguf, openai:MODEL")
    add("--judge-model", default=None, metavar="SPEC", help="judge model: local (default), local:FILE.gguf, openai:MODEL")
    add("--thresholds", default=None, metavar="PATH", help="thresholds file (default: ./thresholds.yaml)")
    add("--results-dir", default=None, metavar="DIR", help="where runs write results (default: personalens-results)")
    add("--local-url", default=None, metavar="URL",
        help="use an already running embedded server (see `personalens serve-model`) instead of starting one")
    add("--record-mode", default=None, metavar="{none,once,new_episodes,all}",
        help="cassettes, with vcrpy's meanings: none (default) replays offline and runs only the scenarios that "
             "have a cassette; once records the missing ones live; new_episodes adds unmatched calls; all re-records")
    add("--cassette-dir", default=None, metavar="DIR", help="where cassettes are kept (default: ./cassettes)")
    add("--rejudge", action="store_true", default=None,
        help="replay the recorded dialogues and judge them again (judge live, or from its own cassettes)")
    add("--repeat", type=int, default=None, metavar="K",
        help="run each scenario K times (own cassettes; reports pass^k and each score's spread)")
    add("--turn-level", action="store_true", default=None,
        help="also judge personalization after every assistant turn (the paper's turn-level curve; one judge call per turn)")
    add("--leak-check", action="store_true", default=None,
        help="also judge whether the user agent's opening states preferences it should leave implicit")
    add("--retries", type=int, default=None, metavar="N",
        help="retries of a call that failed in a retryable way: 429, 5xx, timeout, dropped connection (default 3)")
    add("--scenario-timeout", type=float, default=None, metavar="SECONDS",
        help="the most time one scenario may take; later calls are not made and the case is an error (default: none)")
    add("--concurrency", type=int, default=None, metavar="K",
        help="evaluate K scenarios at once in threads of this process (remote models; without -n)")
    add("--max-rps", type=float, default=None, metavar="R",
        help="at most R calls per second to each model endpoint, across all xdist workers")
    add("--max-concurrency", type=int, default=None, metavar="N",
        help="at most N calls in flight to each model endpoint, across all xdist workers")
    add("--stop-after-errors", type=int, default=None, metavar="N",
        help="stop the run after N cases in a row fail with the same error from one model or bot (default 5; 0: never)")
    add("--resume", default=None, metavar="RESULTS",
        help="finish an interrupted run: keep the scored cases of its results.jsonl, run only the others")
    add("--shard", default=None, metavar="I/N",
        help="run the I-th of N deterministic slices of the cases (a CI matrix); `personalens merge` joins them")
    add("--json-report", default=None, metavar="PATH", help="the run report as JSON (default: <run folder>/report.json)")
    add("--junit-report", default=None, metavar="PATH", help="JUnit XML with scores as properties (default: <run folder>/junit.xml)")
    add("--html-report", default=None, metavar="PATH", help="the self-contained HTML report (default: <run folder>/report.html)")
    add("--baseline", default=None, metavar="REPORT",
        help="an earlier run's report.json or results.jsonl: fail if a score drops significantly on the shared scenarios")
    add("--baseline-margin", type=float, default=None, metavar="X",
        help="the drop --baseline tolerates: fail only if the whole CI of the difference is below -X (default 0)")


_OPTION_NAMES = (
    "personalens_data", "sample", "profiles", "domains", "task_kind", "max_turns", "assistant", "assistant_model",
    "assistant_context", "user_model", "judge_model", "thresholds", "results_dir", "local_url",
    "record_mode", "cassette_dir", "rejudge", "repeat", "turn_level", "leak_check", "json_report", "junit_report",
    "html_report", "baseline", "baseline_margin", "retries", "scenario_timeout", "resume", "shard",
    "max_rps", "max_concurrency", "concurrency", "stop_after_errors",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(task_kind): a PersonaLens suite test, parametrized with one scenario per case"
    )
    options = {name: config.getoption(name) for name in _OPTION_NAMES}
    try:
        settings = resolve_settings(options, project_root(config), os.environ)
        register_secret_names(settings.secret_env)
        check_selection(settings)
    except PersonalensError as exc:
        raise pytest.UsageError(redact(str(exc))) from None
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        shared = workerinput.get(WORKER_KEY, {})
        state = RunState(settings, run_id=shared.get("run_id") or new_run_id(), is_controller=False,
                         server_handles=shared.get("servers"))
    else:
        state = RunState(settings, run_id=new_run_id(), is_controller=True)
        config.pluginmanager.register(ControllerHooks(state), "personalens-controller")
        if runs_suites(config):
            try:
                state.thresholds  # noqa: B018 - a broken thresholds file stops the run here, in one line
                state.preflight(reach=not config.option.collectonly)
                state.plan.check_runnable()
                if not config.option.collectonly:
                    state.carry_resumed_rows()
            except PersonalensError as exc:
                raise pytest.UsageError(redact(str(exc))) from None
    config.stash[STATE] = state


#: options whose value is a path: given as a separate argument (``--resume /elsewhere/results.jsonl``),
#: pytest takes it for a test path while it looks for the project folder, before it knows these options
_PATH_OPTIONS = ("--resume", "--baseline", "--thresholds", "--personalens-data", "--results-dir", "--cassette-dir",
                 "--json-report", "--junit-report", "--html-report")
_ROOT_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "personalens.toml")


def project_root(config: pytest.Config) -> Path:
    """The project whose config the run reads: pytest's rootdir, unless pytest took it from the value of one
    of our path options (then the folder pytest would have found from where it was started)."""
    root = config.rootpath
    started = config.invocation_params.dir
    args = [str(arg) for arg in config.invocation_params.args]
    values = [(started / args[i + 1]).resolve() for i, arg in enumerate(args[:-1]) if arg in _PATH_OPTIONS]
    if config.getoption("rootdir", None) or not any(root == v or root in v.parents for v in values):
        return root
    for folder in (started, *started.parents):
        if any((folder / name).is_file() for name in _ROOT_FILES):
            return folder
    return root


def runs_suites(config: pytest.Config) -> bool:
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
                if f"mark.{MARKER}(" in path.read_text(encoding="utf-8", errors="ignore"):
                    return True
            except OSError:
                continue
    return False


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        state.close()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: launch the shared embedded servers once and hand their addresses to the workers."""
    config = node.config
    state = config.stash[STATE]
    launch = not config.option.collectonly and runs_suites(config)
    servers = _or_exit(state.launch_servers) if launch else {}
    node.workerinput[WORKER_KEY] = {"run_id": state.run_id, "servers": servers}


def _or_exit(call: Any) -> Any:
    try:
        return call()
    except PersonalensError as exc:
        pytest.exit(redact(str(exc)), returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or "scenario" not in metafunc.fixturenames:
        return
    kind = TaskKind(marker.kwargs.get("task_kind", marker.args[0] if marker.args else "sd"))
    state = metafunc.config.stash[STATE]
    try:
        cases = state.cases(kind)
        state.thresholds  # noqa: B018 - a broken thresholds file stops the run before any case
    except PersonalensError as exc:
        pytest.fail(redact(str(exc)), pytrace=False)
    if state.settings.repeat == 1:
        metafunc.parametrize("scenario", [s for s, _ in cases], ids=[s.scenario_id for s, _ in cases])
    else:
        metafunc.parametrize(("scenario", "personalens_repeat"), cases,
                             ids=[case_id(s.scenario_id, r) for s, r in cases])


def pytest_collection_finish(session: pytest.Session) -> None:
    """With --concurrency K (and no xdist), evaluate the collected cases ahead, K at a time."""
    config = session.config
    state = config.stash.get(STATE, None)
    if state is None or state.settings.concurrency < 2 or config.option.collectonly:
        return
    if hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        return  # xdist sends each worker one case at a time
    cases = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        scenario = callspec.params.get("scenario") if callspec is not None else None
        if isinstance(scenario, Scenario):
            cases.append((item.nodeid, scenario, callspec.params.get("personalens_repeat", 1)))
    state.evaluate_ahead(cases)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A suite with no scenario selected (e.g. ``--task-kind sd`` for the multi-domain file) is deselected, not skipped."""
    def empty(item: pytest.Item) -> bool:
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("scenario") if callspec is not None else None
        return item.get_closest_marker(MARKER) is not None and not isinstance(param, Scenario)

    dropped = [item for item in items if empty(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not empty(item)]


@pytest.fixture(scope="session")
def personalens_run(request: pytest.FixtureRequest) -> RunState:
    """The run's state in this process (settings, dataset, models)."""
    return request.config.stash[STATE]


@pytest.fixture(scope="session")
def score_floors(personalens_run: RunState) -> ScenarioFloors:
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
                    personalens_run: RunState) -> Evaluation:
    """Run the scenario's dialogue and judge it. A model or parsing failure is an error of the case."""
    evaluation = personalens_run.evaluate_case(request.node.nodeid, scenario, personalens_repeat)
    request.node.stash[EVALUATION] = evaluation
    path = personalens_run.transcript_path(scenario, personalens_repeat)
    if evaluation.error is not None:
        raw = f"\nraw judge answer: {evaluation.error.raw_answer!r}" if evaluation.error.raw_answer is not None else ""
        pytest.fail(redact(f"{evaluation.error.describe()}{raw}\ntranscript so far: {path}"), pytrace=False)
    return evaluation


@pytest.fixture
def check_floors(score_floors: ScenarioFloors, personalens_run: RunState) -> Any:
    """``check_floors(evaluation)``: fail the case, with scores, reasons and transcript path, if a floor is missed."""

    def check(evaluation: Evaluation) -> None:
        assert evaluation.verdict is not None
        changed = personalens_run.replay_differences(evaluation)
        if changed is not None:  # an offline replay of a recording: it must reproduce the recorded scores
            if changed:
                pytest.fail(redact(describe_replay_change(evaluation, changed)), pytrace=False)
            return
        found = shortfalls(score_floors, evaluation.verdict.scores.model_dump())
        if found:
            path = personalens_run.transcript_path(evaluation.scenario, evaluation.repeat)
            pytest.fail(redact(describe_shortfalls(evaluation, found, path)), pytrace=False)

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
    if (report.when == "setup" and report.failed) or report.when == "call":
        state = item.config.stash[STATE]
        status = "error" if report.when == "setup" else ("passed" if report.passed else "failed")
        found = []
        if evaluation.verdict is not None:
            found = shortfalls(state.thresholds.scenario, evaluation.verdict.scores.model_dump())
        try:
            row = build_row(state.run_info(), evaluation, status=status, found=found,
                            transcript_path=state.shown(state.transcript_path(evaluation.scenario, evaluation.repeat)),
                            cassette=state.cassette_of(evaluation.scenario, evaluation.repeat))
            # one JSON line, secrets replaced: an xdist worker sends it to the controller as a single string
            report.personalens_row = redact_json(row.model_dump_json())
            error = row.error
        except Exception as exc:  # the case still gets a row: an error naming what went wrong
            line, error = fallback_row(state.run_info(), evaluation, exc)
            report.personalens_row = redact_json(line)
            report.outcome, report.longrepr = "failed", f"the result row could not be built: {exc!r}"
        # what the controller's circuit breaker reads, without parsing the row
        report.personalens_error = error
    return report


def fallback_row(run: Any, evaluation: Evaluation, exc: BaseException) -> tuple[str, dict[str, Any]]:
    """A minimal error row for a case whose full row could not be built (JSON that always encodes)."""
    scenario = evaluation.scenario
    error = {"kind": type(exc).__name__, "phase": "writing the result row", "source": "internal",
             "message": f"the result row could not be built: {type(exc).__name__}: {exc} (please report it)",
             "raw_answer": None}
    row = {**run.model_dump(), "schema_version": 1, "scenario_id": scenario.scenario_id, "user_id": scenario.user_id,
           "task_id": scenario.task.task_id, "task_kind": scenario.kind.value, "domains": list(scenario.domains),
           "status": "error", "repeat": evaluation.repeat, "scores": None, "reasons": {}, "observations": [],
           "suggestions": [], "shortfalls": [], "error": error, "turns": evaluation.dialogue.turns,
           "max_turns": evaluation.max_turns, "termination": None, "notes": [], "transcript": [],
           "transcript_path": None, "calls": [], "started_at": evaluation.started_at,
           "finished_at": evaluation.finished_at, "seconds": evaluation.seconds}
    return json.dumps(row), error


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A run told to stop (a full disk, a dead endpoint) starts no further case, in any process."""
    state = item.config.stash.get(STATE, None)
    if state is None or item.get_closest_marker(MARKER) is None:
        return None
    reason = state.stop_signal.reason()
    if reason is None:
        return None
    item.session.shouldstop = f"personalens: stopped: {reason}"
    return True  # not run: no report, no row


class ControllerHooks:
    """Hooks of the controlling process only: it alone writes the results file."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.report: dict[str, Any] | None = None
        self.written: dict[str, Any] = {}
        self.recorded_rows = 0
        self.failures: list[str] = []
        self.breaker = Breaker(state.settings.stop_after_errors)
        self.stopped: str | None = None
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, Any]:
        """Before the first case: the results file exists with room reserved, and the stop signal is ready."""
        if not session.config.option.collectonly and any(i.get_closest_marker(MARKER) for i in session.items):
            try:
                self.state.writer.open()
                self.state.stop_signal.prepare()
            except PersonalensError as exc:
                raise pytest.UsageError(redact(f"personalens: {exc}")) from None
        return (yield)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, "personalens_row", None)
        if row is None or self.state.writer is None:
            return
        writer = self.state.writer
        try:
            writer.write_json(row)
        except StorageError as exc:
            self.stop(f"{exc} (the row of {report.nodeid} is lost)")
            return
        if writer.out_of_room is not None:
            self.stop(f"no room left for more result rows: {writer.out_of_room}")
            return
        error = getattr(report, "personalens_error", None)
        reason = self.breaker.observe({"status": "error", "error": error} if error else {})
        if reason is not None:
            self.stop(reason)

    def stop(self, reason: str) -> None:
        """Stop the run after the cases under way, keeping every row: no further case starts."""
        if self.stopped is not None:
            return
        self.stopped = reason
        self.state.stop_signal.raise_(reason)
        message = f"personalens: stopped: {reason}"
        if self.session is not None:
            self.session.shouldstop = message
        dsession = self.state_config_dsession()
        if dsession is not None:
            dsession.shouldstop = message

    def state_config_dsession(self) -> Any:
        config = self.session.config if self.session is not None else None
        return config.pluginmanager.getplugin("dsession") if config is not None else None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Aggregate every worker's rows once: report files, gates, baseline; a failed gate fails the run."""
        try:
            outcome = self.state.finish()
        except PersonalensError as exc:
            self.failures = [str(exc)]
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if outcome is None:
            return
        self.report, self.written, self.recorded_rows = outcome.report, outcome.written, outcome.recorded_rows
        self.failures += outcome.failures
        if self.report["gates_enforced"]:
            self.failures += failed_gates(self.report)
        comparison = self.report.get("comparison")
        if comparison and comparison["failed"]:
            self.failures.append("baseline: a score dropped significantly beyond the margin (see the comparison above)")
        if self.failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        if self.report is not None:
            terminalreporter.section("personalens")
            for line in format_summary(self.report):
                write(line)
            if self.report.get("comparison"):
                write("")
                for line in format_comparison(self.report["comparison"]):
                    write(line)
        for failure in self.failures:
            write(f"personalens: FAILED {failure}", red=True, bold=True)
        writer = self.state.writer
        if writer is not None and writer.count:
            write(f"personalens: {writer.count} result rows -> {writer.path}")
        if self.stopped is not None and writer is not None:
            write(f"personalens: STOPPED early: {self.stopped}; every case run has its row; finish the run with "
                  f"--resume {writer.path}", red=True, bold=True)
        for kind, path in self.written.items():
            write(f"personalens: {kind} report -> {path}")
        if self.recorded_rows:
            write(f"personalens: {self.recorded_rows} recorded result rows -> {self.state.plan.recorded_path}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash[STATE]
    s = state.settings
    return [
        f"personalens: data {s.data_path or 'bundled 50-profile sample'}; assistant {s.assistant}"
        f" (model {s.assistant_model}, context {s.assistant_context.label}); user agent {s.user_model}; judge {s.judge_model}",
        f"personalens: results -> {state.run_dir}",
    ] + ([f"personalens: project {state.settings.rootdir} (pytest took its rootdir, {config.rootpath}, from a path "
          "option given as a separate argument; write it as --option=PATH to keep pytest's own settings too)"]
         if state.settings.rootdir != config.rootpath else []) + ([f"personalens: {line}" for line in _or_exit(state.header_lines)] if runs_suites(config) else [])
