"""A run in one process: its parts, put together once. The pytest plugin holds one :class:`Run` per
process: the controlling process writes the results and decides; xdist workers only evaluate."""

from __future__ import annotations

import contextlib
import functools
import secrets
import shutil
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..data.loader import Dataset
from ..data.models import Scenario, TaskKind
from ..errors import UsageError
from ..gating.expectations import (PASS, Expectation, Expectations, load_expectations, location, row_judged_now,
                                   row_reproduced_now)
from ..gating.thresholds import Thresholds, load_thresholds
from ..gating.user_agent import gated, user_agent_verdict
from ..results.files import ResultsWriter
from ..results.identity import RunIdentity, digest, kept_value
from ..results.rows import RunInfo
from ..settings import RunSettings
from ..settings.table import MODEL_SETTING, NOT_IN_IDENTITY, SETTING
from .assistant import AssistantUnderTest
from .cases import RunCases
from .models import ModelPool
from .recording import Recording
from .stop import Decision, StopSignal

if TYPE_CHECKING:
    from ..costs.estimate import RunEstimate
    from ..calibration.report import CalibrationReport
    from .finish import RunOutcome
    from .cases_runner import CaseRunner


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def run_identity(settings: RunSettings, assistant: AssistantUnderTest, dataset: Dataset,
                 thresholds: Thresholds) -> RunIdentity:
    """What produces a run's rows: the one thing a --resume file's rows must share with it."""
    s, roles = settings, settings.role_models
    floors = thresholds.scenario.model_dump()
    entry = s.assistants.entries.get(s.assistant)  # None: the built-in reference assistant
    return RunIdentity(
        assistant=s.assistant, assistant_kind=assistant.kind,
        assistant_model=roles["assistant"].spec if "assistant" in roles else None,
        assistant_prompt=assistant.prompt_variant, assistant_context=assistant.context.label,
        user_model=roles["user_agent"].spec, judge_model=roles["judge"].spec, data=dataset.identity,
        floors=", ".join(name if value is True else f"{name}>={value}" for name, value in floors.items()
                         if value not in (None, False)) or "none",
        testkit=__version__,
        settings={name: kept_value(value) for name, value in s.resolved.items() if name not in NOT_IN_IDENTITY},
        endpoints={role: _endpoint(roles[role].entry, s) for role in sorted(roles)},
        assistant_entry=digest(entry.model_dump(mode="json")) if entry is not None else "",
    )


def expected_of(run: Run, scenario_id: str) -> Expectation:
    """A case's expectation; a whole-run replay checks reproduction, whatever was expected."""
    if run.expectations is None or run.recording.plan.checks_reproduction:
        return PASS
    return run.expectations.of(scenario_id)


def user_agent_gated(run: Run) -> bool:
    """Whether the user agent's faults change this run's case verdicts (thresholds.yaml's ``user_agent_faults``)."""
    return gated(run.thresholds.aggregate.user_agent_faults, run.settings.role_models["user_agent"].embedded)


def _endpoint(entry: Any, settings: RunSettings) -> str:
    """A role's model as the identity keeps it: its spec, and a digest of its whole entry (its address, a named
    entry's URL included) - of the embedded server's model and context for a local one."""
    local = {"model": settings.local.alias(), "n_ctx": settings.local.n_ctx} if entry.kind == "local" else None
    return f"{entry.spec()} {digest({'entry': entry.model_dump(mode='json'), 'local': local})}"


class Run:
    def __init__(self, settings: RunSettings, *, run_id: str, is_controller: bool,
                 server_handles: dict[str, dict[str, Any]] | None = None) -> None:
        self.settings = settings
        self.run_id = run_id
        self.is_controller = is_controller
        self.run_dir = settings.results_dir / run_id
        self.writer = ResultsWriter(self.run_dir / "results.jsonl") if is_controller else None
        #: raised by the controller to stop the run early (a full disk, a dead endpoint); checked by every process
        self.stop_signal = StopSignal(self.run_dir)
        self.cases = RunCases(settings, identity=lambda: run_identity(settings, self.assistant, self.cases.dataset,
                                                                      self.thresholds))
        self.assistant = AssistantUnderTest(settings)
        self._server_handles = server_handles
        #: the cases pytest collected for this run - its own selection (-k, -m, node ids) may narrow the settings'
        #: - told by the plugin once collected; None: the settings' selection
        self.collected: int | None = None
        #: the run's xdist workers (``-n``; 0: none), told by the plugin (what ``--concurrency auto`` shares out)
        self.workers = 0
        #: in an xdist worker: whether the controller's scheduler writes this worker's queue down (told by the plugin)
        self.queue_written = False
        #: this process's name in the run: its xdist worker's id, ``main`` without xdist (told by the plugin)
        self.process = "main"

    @cached_property
    def recording(self) -> Recording:
        return Recording(self.settings, self.cases.all, assistant_is_bot=self.assistant.is_bot)

    @cached_property
    def models(self) -> ModelPool:
        return ModelPool(self.settings, self.run_dir, live_roles=self.recording.live_roles,
                         is_controller=self.is_controller, server_handles=self._server_handles)

    @cached_property
    def runner(self) -> CaseRunner:
        from .cases_runner import CaseRunner  # the dialogue and judging machinery: loaded when a case runs

        runner = CaseRunner(self.settings, self.run_dir, self.cases.dataset, self.models, self.assistant,
                            self.recording, process=self.process)
        if self.settings.max_cost is not None:  # --max-cost: every process reserves and settles in one ledger
            from .budget import run_budget

            runner.budget = run_budget(self.settings, self.run_dir, bot=self.assistant.is_bot,
                                       estimate=lambda: self.estimate)
        return runner

    @cached_property
    def estimate(self) -> RunEstimate:
        """What the cases this run executes will cost (no model called): worked out once, for the header and the
        budget."""
        from .cost_estimate import run_estimate

        return run_estimate(self.settings, self.cases.dataset, self.recording.plan.runnable)

    @cached_property
    def thresholds(self) -> Thresholds:
        return load_thresholds(self.settings.thresholds_path)

    @cached_property
    def expectations(self) -> Expectations | None:
        """Each scenario's expected outcome, when the project keeps an expectations file (else None: all pass)."""
        path = location(self.settings.expectations, self.settings.cassette_dir, self.settings.assistant)
        if self.settings.expectations is not None and not path.is_file():
            raise UsageError(f"expectations: {path}: no such file (personalens expectations update RESULTS writes one)")
        return load_expectations(path) if path.is_file() else None

    def cases_of(self, kind: TaskKind) -> list[tuple[Scenario, int]]:
        """The (scenario, try) of one suite's cases, in selection order: those this run executes, and those the
        ``--resume`` results already scored (collected, so that a node id naming one is found, then deselected:
        :meth:`~.cases.RunCases.is_done`)."""
        runnable = {(s.scenario_id, r) for s, r in self.recording.plan.runnable}
        return [(s, r) for s, r in self.cases.selected if s.kind is kind
                and ((s.scenario_id, r) in runnable or self.cases.is_done(s, r))]

    @cached_property
    def calibration(self) -> CalibrationReport | None:
        """The judge's calibration report named by --judge-calibration (None: none named)."""
        path = self.settings.judge_calibration
        if path is None:
            return None
        from ..calibration.report import load_calibration  # loaded when a report is named

        return load_calibration(path)

    def preflight(self, *, reach: bool = True) -> None:
        """Before any case: every role's model is usable as configured, and so is the assistant.

        Raises :class:`UsageError` with one line naming the role, the option or config entry, and
        the cause. Without ``reach`` (``--collect-only``: listing what a run would do) nothing is contacted
        and no credentials are needed; with it, credentials are checked, the bot is contacted (or started)
        once and every live remote model gets one minimal real call - a dead endpoint, a wrong key or an
        unknown model fails the run here, not once per case.
        """
        if not reach:
            return
        label = functools.partial(role_label, self.settings, self.assistant)
        self.models.check_credentials(label)
        self.assistant.check(self.models, reach=reach)
        self.models.ping_all(label)
        if self.settings.max_cost is not None and self.models.preflight:  # billed: in the budget's spend too
            try:
                self.runner.budget.spend_outside(self.models.preflight)  # type: ignore[union-attr]
            except OSError as exc:
                raise UsageError(f"--max-cost: the budget's ledger in {self.run_dir} cannot be written ({exc})") from None

    def carry_resumed_rows(self) -> int:
        """Controller, before any case: the resumed rows open this run's results, so it holds the whole run - each
        row's status and verdict worked out again, never read: as this run judges its own cases - by the floors
        (``row_judged_now``), or in a whole-run replay by whether it reproduces its recording (``row_reproduced_now``)."""
        if self.writer is not None:
            for row in self.cases.resumed:
                expectation = expected_of(self, row.scenario_id)
                differing = self.recording.differences(row)
                kept = (row_judged_now(row, self.thresholds, expectation) if differing is None
                        else row_reproduced_now(row, differing, expectation))
                weighed = user_agent_verdict(kept.verdict or "pass", kept.user_faults, is_gated=user_agent_gated(self))
                self.writer.write(kept if weighed == kept.verdict else kept.model_copy(update={"verdict": weighed}))
        return len(self.cases.resumed)

    @cached_property
    def run_info(self) -> RunInfo:
        """What every row of the run shares (built once)."""
        s = self.settings
        return RunInfo(
            run_id=self.run_id, assistant=s.assistant, assistant_kind=self.assistant.kind,
            assistant_context=self.assistant.context.label, assistant_model=self.assistant.model,
            assistant_prompt=self.assistant.prompt_variant,
            user_model=s.role_models["user_agent"].label, judge_model=s.role_models["judge"].label,
            reviewer_model=s.role_models["reviewer"].label if "reviewer" in s.role_models else None,
            record_mode=s.record_mode + (" (re-judging)" if s.rejudge else ""), identity=self.cases.identity,
        )

    def finish(self, stopped: str | None = None, *, interrupted: bool = False,
               decision: Decision = None) -> RunOutcome | None:
        """Controller, at the end: the report over every worker's rows, its files, the verdict (``stopped``: why the
        run stopped early - its cases not started are reported as not run; ``interrupted``: the run was interrupted
        (Ctrl-C, a stop not the testkit's) - its verdict is ``interrupted``, with how many selected cases ran)."""
        if self.writer is None or not self.writer.path.is_file():
            return None
        from .finish import finish_run, settings_snapshot  # the report's machinery: loaded by a controller that ran cases
        from ..gating.verdict import NotRun

        self.writer.close()
        not_run = None
        ran = self.writer.count - len(self.cases.resumed)
        selected = self.collected if self.collected is not None else len(self.recording.plan.runnable)
        left = max(0, selected - ran)
        if stopped is not None:
            not_run = NotRun(left, stopped, needed=False, decision=decision) if decision else NotRun(
                left, f"the run stopped early ({stopped}); finish it with --resume {self.writer.path}")
        elif interrupted:
            not_run = NotRun(left, f"{ran} of the {selected} selected case(s) ran; finish it with --resume "
                                   f"{self.writer.path}", interrupted=True)
        return finish_run(self.settings, self.writer.path, self.run_dir, self.thresholds, self.recording,
                          run=self.run_info.model_dump(), snapshot=settings_snapshot(self.settings, self.recording.shown),
                          expectations=self.expectations, calibration=self.calibration, written=self.writer.written,
                          not_run=not_run, preflight=self.models.preflight)

    def close(self) -> None:
        if "runner" in self.__dict__:
            self.runner.close()
        if "models" in self.__dict__:
            self.models.close()
        if self.writer is not None:
            self.writer.close()
            self._remove_if_unused()

    def _remove_if_unused(self) -> None:
        """A run that evaluated nothing (say, an unrelated ``pytest -n 4`` that launched the servers anyway)
        leaves no folder behind: only server logs would be in it."""
        if self.writer is None or self.writer.count or not self.run_dir.is_dir():
            return
        if all(p.name.startswith(("embedded-server-", ".embedded.lock", ".stop")) for p in self.run_dir.iterdir()):
            shutil.rmtree(self.run_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.run_dir.parent.rmdir()  # only if no other run is in it


def role_label(settings: RunSettings, assistant: AssistantUnderTest, role: str, spec: str) -> str:
    """Where a role's model was chosen: the option, the model entry, or the assistant entry."""
    if role == "assistant" and assistant.entry is not None:
        return assistant.label
    flag = SETTING[MODEL_SETTING[role]].option
    return f"{flag} {spec}" + (f" ({settings.model_sources[spec]})" if spec in settings.model_sources else "")
