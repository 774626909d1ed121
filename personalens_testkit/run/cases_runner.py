"""Evaluating a run's cases: the evaluator built once on the run's models and assistant, a case's
cassette, the turn-taking on embedded servers, its transcript - and, with ``--concurrency K``,
the next cases evaluated ahead in K threads."""

from __future__ import annotations

import contextlib
import fcntl
import re
import time
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from ..agents.calls import CallLog
from ..agents.judge import Judge
from ..agents.user_agent import UserAgent
from ..assistants.base import Assistant
from ..callsite import CURRENT_CASE, CallRole, step
from ..data.context import build_context
from ..data.loader import Dataset
from ..data.models import Scenario, case_id
from ..errors import PersonalensError, StorageError
from ..evaluation import Evaluation, Evaluator
from ..llm.base import ChatModel
from ..gating.thresholds import ScenarioFloors
from ..secrets import redact
from ..settings import RunSettings
from ..transcript_file import TranscriptFile
from ..transcripts import format_transcript
from .concurrency import Case, EvaluateAhead
from .confirmation import Confirmation, confirm, judgements_for
from .assistant import AssistantUnderTest
from .models import ModelPool
from .recording import Recording
from .rerun import UserAgentRerun
from .batch_judging import Deferring, keeping, kept_for_batch
from .stop import StopSignal

if TYPE_CHECKING:  # --max-cost's machinery loads when a run asks for it
    from .budget import Budget


class CaseRunner:
    def __init__(self, settings: RunSettings, run_dir: Path, dataset: Dataset, models: ModelPool,
                 assistant: AssistantUnderTest, recording: Recording, *, process: str = "main") -> None:
        self.settings = settings
        #: this process's name in the run (its xdist worker's id, or ``main``): its transcripts file's
        self.process = process
        self.run_dir = run_dir
        self.dataset = dataset
        self.models = models
        self.assistant = assistant
        self.recording = recording
        self._built: list[Assistant] = []
        self._ahead: EvaluateAhead | None = None
        #: --max-cost's ledger (None: no budget): a case reserves before it starts and settles when it ends
        self.budget: Budget | None = None
        #: --rerun-user-faults: a dialogue its user agent spoiled run again once, within the budget
        self.reruns = UserAgentRerun(settings.rerun_user_faults, run_dir, budget=lambda: self.budget)

    @cached_property
    def evaluator(self) -> Evaluator:
        s, models = self.settings, self.models
        assistant = self.assistant.build(models)
        self._built.append(assistant)
        return Evaluator(
            dataset=self.dataset, assistant=assistant,
            user_agent=UserAgent(models.chat(s.user_model, "user_agent"), reply_cut=s.reply_cut),
            judge=Judge(self._judging(s.judge_model, "judge"), parallel=models.judge_parallel(),
                        turn_method=s.turn_level_method),
            max_turns=s.max_turns, turn_level=s.turn_level, leak_check=s.leak_check,
            reviewer=Judge(self._judging(s.review_user_model, "reviewer")) if s.review_user else None,
            retest_share=s.judge_retest,
            retry=s.retry, time_limit_s=s.scenario_timeout_s, rerun=self.reruns,
        )

    def _judging(self, spec: str, role: CallRole) -> ChatModel:
        """A judging role's model; under ``--judge-batch submit`` its calls are kept for a batch job, never sent."""
        model = self.models.chat(spec, role)
        return Deferring(model, role, spec) if self.settings.judge_batch == "submit" else model

    @cached_property
    def transcripts(self) -> TranscriptFile:
        """This process's transcripts file: ``transcripts/<xdist worker>.txt``, or ``main.txt`` without xdist (each
        process appends to its own: :mod:`~personalens_testkit.transcript_file`)."""
        return TranscriptFile(self.run_dir / "transcripts" / f"{re.sub(r'[^A-Za-z0-9_-]', '_', self.process)}.txt")

    def evaluate_ahead(self, cases: list[tuple[str, Scenario, int]], upcoming: Callable[[], list[str]] | None = None,
                       *, lanes: int) -> None:
        """Evaluate these cases (node id, scenario, try) ahead of pytest, ``lanes`` at a time (the run's
        ``--concurrency``; ``upcoming``: the node ids an xdist worker will run next)."""
        try:
            self.evaluator  # noqa: B018 - built once, before any thread needs it
        except PersonalensError:
            return  # every case reports it
        self._ahead = EvaluateAhead(
            [(nodeid, scenario, repeat, self.recording.rerecord_command(nodeid)) for nodeid, scenario, repeat in cases],
            self.evaluate, lanes, upcoming, may_start=self._may_start,
        )

    def _may_start(self, case: Case) -> bool:
        """False once the run is told to stop (a budget, a decided verdict, a dead endpoint), or when the budget
        cannot pay for this case: no case starts ahead."""
        _, scenario, repeat, _ = case
        return StopSignal(self.run_dir).reason() is None and self.reserve(scenario, repeat) is None

    def reserve(self, scenario: Scenario, repeat: int = 1) -> str | None:
        """Before a case starts: its expected spend reserved in the budget's ledger; the reason it may not start (the
        run's stop signal is raised with it), or None."""
        if self.budget is None:
            return None
        try:
            reason = self.budget.reserve(case_id(scenario.scenario_id, repeat))
        except OSError as exc:  # a full disk, say: no case starts that the budget cannot count
            reason = f"the budget's ledger cannot be written ({exc}); the cases not started are not run"
        if reason is not None:
            StopSignal(self.run_dir).raise_(reason)
        return reason

    def started(self, nodeid: str) -> bool:
        """Whether this case's evaluation was started ahead of its pytest case."""
        return self._ahead is not None and self._ahead.started(nodeid)

    def waiting_ahead(self) -> bool:
        """Whether a case started ahead still waits for its pytest case (its row is not written yet)."""
        return self._ahead is not None and self._ahead.waiting()

    def evaluate_case(self, nodeid: str, scenario: Scenario, repeat: int = 1) -> Evaluation:
        """A pytest case's evaluation: from the ones under way ahead, or made now; never raises."""
        try:
            if self._ahead is not None and nodeid in self._ahead:
                return self._ahead.result(nodeid)
            return self.evaluate(scenario, self.recording.rerecord_command(nodeid), repeat)
        except Exception as exc:  # (a cancelled evaluation ahead, say): still the case's row
            return Evaluation.failed(scenario, exc, phase="evaluating", max_turns=self.settings.max_turns, repeat=repeat)

    def evaluate(self, scenario: Scenario, rerecord: str = "", repeat: int = 1) -> Evaluation:
        """Evaluate one scenario and keep its transcript; never raises (a failure is the case's error). With a
        budget, the case's live calls settle its reservation."""
        evaluation = self._evaluate(scenario, rerecord, repeat)
        if self.budget is not None:
            try:
                self.budget.settle(case_id(scenario.scenario_id, repeat), evaluation.dialogue.log.records)
            except OSError as exc:  # the ledger cannot be written: the case keeps its row, the run stops
                StopSignal(self.run_dir).raise_(f"the budget's ledger cannot be written ({exc})")
            self.reruns.settle(evaluation)
        try:
            evaluation.transcript_at = self.transcripts.append(case_id(scenario.scenario_id, repeat),
                                                               redact(format_transcript(evaluation)))
        except StorageError as exc:
            if evaluation.error is None:
                evaluation.fail(exc, "writing the transcript")
        return evaluation

    def _evaluate(self, scenario: Scenario, rerecord: str, repeat: int) -> Evaluation:
        """Evaluate one scenario; with embedded models, one scenario at a time across all xdist workers.

        A llama.cpp server of llama-cpp-python serves one request at a time and keeps one
        prompt in its cache: two interleaved dialogues make every call re-read its whole
        prompt (measured: 4.3 s instead of 1.4 s a call), and the CPU is already saturated by
        one dialogue. So scenarios take turns on the shared servers (a file lock in the run
        folder); runs on remote models are not serialised.
        """
        token = CURRENT_CASE.set(scenario.scenario_id)  # the progress display's: whose steps these are
        try:
            try:
                evaluator = self.evaluator
                cassette = self.recording.for_case(scenario, repeat, rerecord)
            except Exception as exc:  # e.g. an embedded server that did not start: an error of every case
                return Evaluation.failed(scenario, exc, phase="starting the models",
                                         max_turns=self.settings.max_turns, repeat=repeat)
            if self.settings.judge_batch != "submit":
                with self._taking_turns():
                    return evaluator.evaluate(scenario, cassette, repeat=repeat)
            with self._taking_turns(), keeping() as kept:
                evaluation = evaluator.evaluate(scenario, cassette, repeat=repeat)
            return kept_for_batch(evaluation, kept, self.run_dir, self.process)
        finally:
            CURRENT_CASE.reset(token)


    @contextlib.contextmanager
    def _taking_turns(self) -> Iterator[None]:
        """With embedded models: one scenario's calls at a time on the shared servers, across xdist workers."""
        if not self.models.uses_embedded:
            yield
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / ".embedded.lock", "w") as lock:
            with step("its turn on the embedded models (one scenario at a time)"):
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def confirm(self, evaluation: Evaluation, floors: ScenarioFloors, missed: Sequence[str], *,
                confidence: float) -> Confirmation:
        """A floor missed on a live judgement, judged again beside the base's dialogue (:mod:`.confirmation`), as
        often as the run's number of cases needs at ``confidence``. Its calls join the case's (its row's calls and
        cost) and the budget's spend; its finding is the evaluation's."""
        scenario, s = evaluation.scenario, self.settings
        judgements = judgements_for(len(self.recording.plan.all_cases), floors, confidence)
        base, why = self.recording.base_case(scenario, evaluation.repeat)
        log = CallLog(retry=s.retry, time_limit_s=s.scenario_timeout_s,
                      deadline=None if s.scenario_timeout_s is None else time.monotonic() + s.scenario_timeout_s)
        found = Confirmation(missed=list(missed), judgements=judgements, without_base=why)
        stopping = StopSignal(self.run_dir).reason()
        if stopping is not None:  # a budget spent, a decided verdict, a dead endpoint: no new call
            found.errors.append(f"not judged again: the run is stopping ({stopping})")
            evaluation.confirmation = found.as_dict()
            return found
        token = CURRENT_CASE.set(scenario.scenario_id)
        try:
            with self._taking_turns():
                found = confirm(self.evaluator.judge, build_context(self.dataset, scenario),
                                evaluation.dialogue.messages, floors, missed, log, judgements=judgements, base=base,
                                without_base=why)
        except Exception as exc:  # noqa: BLE001 - whatever fails here confirms nothing; the case's scores stand
            found.errors.append(redact(f"{type(exc).__name__}: {exc}".splitlines()[0]))
        finally:
            CURRENT_CASE.reset(token)
            evaluation.dialogue.log.records.extend(log.records)
            if self.budget is not None and log.records:
                with contextlib.suppress(OSError):  # the case's row stands; the ledger's next writer says why
                    self.budget.spend_outside(log.records)
        evaluation.confirmation = found.as_dict()
        return found

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
        for assistant in self._built:
            assistant.close()
        self._built.clear()
        if "transcripts" in self.__dict__:
            self.transcripts.close()
