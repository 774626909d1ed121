"""One scenario end to end: context, dialogue, judgement. Knows nothing of pytest.

:meth:`Evaluator.evaluate` never raises: every failure - the testkit's own errors, and any
other exception (a bug, or a part failing in a way nobody foresaw) - is recorded on the
:class:`Evaluation` with the phase it happened in and what caused it, so the transcript so
far and every call made are kept for the result row. Only Ctrl-C (KeyboardInterrupt) passes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, ContextManager, Protocol, Sequence, TypeVar

from .agents.calls import CallRecord
from .agents.injection import find_injections
from .agents.dialogue import Dialogue, run_dialogue, turn_limit
from .agents.judge import Judge, Verdict
from .agents.user_agent import UserAgent
from .agents.user_faults import UserFault, dialogue_facts, excerpt, find_user_faults
from .assistants.base import Assistant
from .data.context import ScenarioContext, build_context
from .data.loader import Dataset
from .data.models import Scenario, case_id
from .errors import ErrorSource, JudgeAnswerError, ModelError, PersonalensError, StorageError
from .llm.retry import RetryPolicy

if TYPE_CHECKING:
    from .transcript_file import TranscriptAt

T = TypeVar("T")
logger = logging.getLogger("personalens_testkit.evaluation")


@dataclass(frozen=True)
class ErrorInfo:
    """Why a scenario could not be scored: the error's kind, the phase, its one-line message."""

    kind: str
    phase: str
    message: str
    raw_answer: str | None = None
    #: what failed (:data:`~.errors.ErrorSource`); counted apart in reports
    source: ErrorSource = "setup"
    #: the model or bot a call failed on, and the failure itself without the call's role and turn:
    #: the same for every case an endpoint fails (what the circuit breaker counts)
    endpoint: str | None = None
    cause: str | None = None
    #: a write failed for want of room: every later case would fail the same way
    disk_full: bool = False

    def describe(self) -> str:
        return f"{self.phase} failed ({self.kind}): {self.message}"

    @classmethod
    def of(cls, exc: BaseException, phase: str) -> ErrorInfo:
        role: ErrorSource | None = getattr(exc, "call_role", None)
        source: ErrorSource
        if isinstance(exc, PersonalensError):
            message = str(exc)
            source = role or ("judge" if isinstance(exc, JudgeAnswerError) else
                              "storage" if isinstance(exc, StorageError) else "setup")
        else:  # not one of ours: a bug here, or a part that failed in a way nobody foresaw
            message = f"unexpected {type(exc).__name__}: {exc} (please report it)"
            source = role or "internal"
        model = exc if isinstance(exc, ModelError) else None
        return cls(
            kind=type(exc).__name__, phase=phase, message=message,
            raw_answer=exc.raw if isinstance(exc, JudgeAnswerError) else None, source=source,
            endpoint=(model.model or None) if model else None, cause=model.cause if model else None,
            disk_full=isinstance(exc, StorageError) and exc.disk_full,
        )


@dataclass
class Evaluation:
    scenario: Scenario
    max_turns: int
    dialogue: Dialogue = field(default_factory=Dialogue)
    verdict: Verdict | None = None
    #: personalization judged after each assistant turn (``--turn-level``)
    turn_personalization: list[int] | None = None
    #: whether the opening query stated preferences it should leave implicit (``--leak-check``)
    preference_leak: dict[str, object] | None = None
    #: which try of the scenario this is (``--repeat``)
    repeat: int = 1
    #: the optional analyses that failed (``turn_level``, ``leak_check``): why, one line each; the main scores stand
    analysis_errors: dict[str, str] = field(default_factory=dict)
    #: a second judgement of the same dialogue (``--judge-retest``): {"scores": {...}} or {"error": "..."};
    #: it never counts in a score
    retest: dict[str, object] | None = None
    #: a floor missed on this live judgement, judged again beside the base's dialogue
    #: (:mod:`~personalens_testkit.run.confirmation`); it never changes a score
    confirmation: dict[str, object] | None = None
    #: how many of the log's calls made the scores (the calls after them: the second judgement)
    scoring_calls: int | None = None
    #: assistant text addressed to the judge (flagged, and removed from what the judge reads)
    injection_flags: list[dict[str, object]] = field(default_factory=list)
    #: the user agent's own faults in the dialogue (:mod:`~.agents.user_faults`), each as ``UserFault.as_dict``
    user_faults: list[dict[str, object]] = field(default_factory=list)
    #: with ``--review-user``: which side made the first critical error, and the review's reason
    user_review: dict[str, str] | None = None
    #: ``--rerun-user-faults``: why the first dialogue was not kept (``why``) and what it was (``first``: its turns,
    #: end, faults, transcript and how many of the log's calls it made), or why it was not run again (``refused``)
    rerun: dict[str, object] | None = None
    error: ErrorInfo | None = None
    #: where its transcript was kept (None: not written, or not yet)
    transcript_at: TranscriptAt | None = None
    started_at: str = ""
    finished_at: str = ""
    seconds: float = 0.0

    @classmethod
    def failed(cls, scenario: Scenario, exc: BaseException, *, phase: str, max_turns: int | None = None,
               repeat: int = 1) -> Evaluation:
        """An evaluation that could not start, recorded as an error of its case."""
        now = _now()
        return cls(
            scenario=scenario, max_turns=turn_limit(scenario.kind, max_turns), started_at=now, finished_at=now,
            error=ErrorInfo.of(exc, phase), repeat=repeat,
        )

    @property
    def judged_live(self) -> bool:
        """Whether a judge call was made now rather than replayed: its scores are one noisy judgement."""
        records = self.dialogue.log.records[:self.scoring_calls]
        return any(call.role == "judge" and not call.replayed for call in records)

    def fail(self, exc: BaseException, phase: str) -> None:
        """Make this evaluation an error. Its scores are dropped - an error never scores as a case - except the
        dimensions the judge answered readably when others were unreadable (``JudgeAnswerError.partial``):
        those count in their own figures, as the paper counts them, and the case stays the judge's error."""
        self.error = ErrorInfo.of(exc, phase)
        self.verdict = getattr(exc, "partial", None)


def retest_selected(case: str, share: float) -> bool:
    """Whether a case is judged a second time at ``share`` (0..1): by the case id alone, so a recording and its
    replay choose the same cases."""
    if share <= 0:
        return False
    digest = hashlib.sha256(f"judge-retest:{case}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64 < share


def scenario_id_of(evaluation: Evaluation) -> str:
    """The case id a second judgement is chosen by (the scenario's, with its try)."""
    return case_id(evaluation.scenario.scenario_id, evaluation.repeat)


def _analysis(evaluation: Evaluation, name: str, run: Callable[[], T]) -> T | None:
    """An optional analysis (``--turn-level``, ``--leak-check``) in a boundary of its own: its failure is recorded
    as its own, and never changes the dialogue's scores (the paper's Table 3 stays as the judge gave it)."""
    try:
        return run()
    except Exception as exc:  # noqa: BLE001 - recorded as this analysis's failure
        evaluation.analysis_errors[name] = ErrorInfo.of(exc, name.replace("_", "-")).describe()
        return None


def _review(reviewer: Judge, ctx: ScenarioContext, evaluation: Evaluation) -> None:
    """The review's faults join the checks' (``source`` review), its first error and reason kept beside them. A
    review naming a user turn the dialogue does not have is no review (a ValueError: the analysis's failure)."""
    messages = evaluation.dialogue.messages
    said = [m.content for m in messages if m.role == "user"]
    review = reviewer.review_user(ctx, messages, evaluation.dialogue.log)
    wrong = [fault.turn for fault in review.faults if fault.turn >= len(said)]
    if wrong:
        raise ValueError(f"the review names user turn {wrong[0]}; the dialogue has {len(said)} (0 to {len(said) - 1})")
    evaluation.user_faults += [{**UserFault(f.turn, f.rule, f.direction, excerpt(said[f.turn])).as_dict(),
                                "source": "review"} for f in review.faults]
    evaluation.user_review = {"first_error": review.first_error, "justification": review.justification}


def _judge_again(judge: Judge, ctx: ScenarioContext, evaluation: Evaluation, first: Sequence[CallRecord]) -> dict[str, object]:
    """A second judgement of the finished dialogue, in a boundary of its own: whatever fails here is this
    measurement's error, never the case's, and the scores already judged stay as they are. ``first``: the calls
    of the first judgement (its six scoring calls, not the turn-level or leak checks)."""
    log = evaluation.dialogue.log
    before = len(log.records)
    try:
        again = judge.judge(ctx, evaluation.dialogue.messages, log)
    except Exception as exc:  # noqa: BLE001 - recorded as this measurement's failure
        return {"error": ErrorInfo.of(exc, "judging again").describe()}
    first_live = not all(c.replayed for c in first)
    second_live = not all(c.replayed for c in log.records[before:] if c.role == "judge")
    if first_live and not second_live:
        # the first judgement was drawn now and the second played back from the recording just made: that
        # is the first answer again (vcrpy replays a new_episodes recording's own new calls), not a retest
        return {"error": "the second judgement was played back from this run's own recording, not drawn again "
                         "(record with --record-mode all or once to measure the judge's noise)"}
    return {"scores": again.scores.model_dump(), "first": "live" if first_live else "replayed",
            "second": "live" if second_live else "replayed"}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ScenarioCassette(Protocol):
    """Where a scenario's model calls are recorded or replayed (see :mod:`personalens_testkit.replay.cassettes`)."""

    def __enter__(self) -> object: ...
    def __exit__(self, *exc: object) -> None: ...
    def phase(self, name: str) -> ContextManager[None]: ...
    def dialogues(self) -> int | None: ...
    def record_dialogues(self, count: int) -> None: ...


class _NoCassette:
    def __enter__(self) -> object:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def phase(self, name: str) -> ContextManager[None]:
        return contextlib.nullcontext()

    def dialogues(self) -> int | None:
        return None

    def record_dialogues(self, count: int) -> None:
        return None


class RerunPolicy(Protocol):
    """``--rerun-user-faults`` (:mod:`~personalens_testkit.run.rerun`): whether the run asks for it, why a dialogue is
    run again (its user agent spoiled it; None: kept), and why it may not be now (None: it may)."""

    asked: bool

    def why(self, evaluation: Evaluation) -> str | None: ...
    def refused(self, evaluation: Evaluation) -> str | None: ...


def _run_again(policy: RerunPolicy | None, evaluation: Evaluation, cassette: ScenarioCassette) -> bool:
    """Whether the dialogue just run is run again, noted on the evaluation: a replayed dialogue as its recording was
    (``cassette.dialogues()``), a live one when the run asks, its user agent spoiled it and it may be run again."""
    why = policy.why(evaluation) if policy is not None else None
    recorded = cassette.dialogues()
    if recorded is not None:  # replayed: what the recording did, whatever the run asks (the same dialogue is judged)
        if recorded > 1:
            evaluation.rerun = {"why": why or "as recorded"}
        return recorded > 1
    if policy is None or not policy.asked or why is None:
        return False
    refused = policy.refused(evaluation)
    evaluation.rerun = {"why": why} if refused is None else {"why": why, "refused": refused}
    return refused is None


@dataclass
class Evaluator:
    dataset: Dataset
    user_agent: UserAgent
    assistant: Assistant
    judge: Judge
    #: overrides the benchmark's 20 (single-domain) / 30 (multi-domain) turn limit
    max_turns: int | None = None
    #: also judge personalization after every assistant turn
    turn_level: bool = False
    #: also judge whether the opening query leaks the user's preferences
    leak_check: bool = False
    #: also review the user agent's turns, on this judge's model (``--review-user``, ``--review-user-model``)
    reviewer: Judge | None = None
    #: the share of cases judged a second time to measure the judge's noise (``--judge-retest``)
    retest_share: float = 0.0
    #: how failed calls are retried, and the most seconds one scenario may take (None: no limit)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    time_limit_s: float | None = None
    #: ``--rerun-user-faults``: a dialogue its user agent spoiled run again once (None: never; a replay follows its
    #: recording all the same)
    rerun: RerunPolicy | None = None

    def evaluate(self, scenario: Scenario, cassette: ScenarioCassette | None = None, *, repeat: int = 1) -> Evaluation:
        """Run and judge one scenario; with a ``cassette``, its calls are recorded or replayed there.

        A scenario that ends in an error keeps no new recording (it would replay as a miss), unless its error
        follows from answers all recorded (``PersonalensError.from_answers``: its replay is the same error).
        """
        evaluation = Evaluation(scenario=scenario, max_turns=turn_limit(scenario.kind, self.max_turns), repeat=repeat)
        evaluation.started_at = _now()
        started = time.perf_counter()
        log = evaluation.dialogue.log
        log.retry, log.time_limit_s = self.retry, self.time_limit_s
        log.deadline = None if self.time_limit_s is None else time.monotonic() + self.time_limit_s
        phase = "opening the scenario's cassette"
        cassette = cassette if cassette is not None else _NoCassette()
        try:
            with cassette:
                phase = "loading the scenario's data"
                ctx = build_context(self.dataset, scenario)
                phase = "the dialogue"
                with cassette.phase("dialogue"):
                    run_dialogue(evaluation.dialogue, ctx, self.user_agent, self.assistant,
                                 max_turns=evaluation.max_turns)
                    self._check(evaluation, ctx)
                    if _run_again(self.rerun, evaluation, cassette):
                        phase = "the dialogue, run again"
                        self._again(evaluation, ctx)
                    cassette.record_dialogues(2 if evaluation.rerun and "first" in evaluation.rerun else 1)
                phase = "judging"
                logger.info("%s: judging %d turns", scenario.scenario_id, evaluation.dialogue.turns)
                with cassette.phase("judging"):  # one phase: a re-judging cassette is loaded once, for both judgements
                    messages = evaluation.dialogue.messages
                    start = len(log.records)
                    evaluation.verdict = self.judge.judge(ctx, messages, log)
                    first = log.records[start:]
                    if self.turn_level:
                        evaluation.turn_personalization = _analysis(
                            evaluation, "turn_level", lambda: self.judge.turn_level(ctx, messages, log))
                    if self.leak_check:
                        leak = _analysis(evaluation, "leak_check", lambda: self.judge.preference_leak(ctx, messages, log))
                        if leak is not None:
                            evaluation.preference_leak = {"leaked": leak.verdict, "explanation": leak.explanation}
                    if self.reviewer is not None:
                        reviewer = self.reviewer
                        _analysis(evaluation, "user_review", lambda: _review(reviewer, ctx, evaluation))
                    evaluation.scoring_calls = len(log.records)
                    if retest_selected(scenario_id_of(evaluation), self.retest_share):
                        evaluation.retest = _judge_again(self.judge, ctx, evaluation, first)
        except KeyboardInterrupt:  # Ctrl-C: the run ends, and is reported interrupted; this case is not run
            raise
        except BaseException as exc:  # noqa: BLE001 - every other failure (asyncio.CancelledError, SystemExit, an
            # exception of a library's own BaseException kind) is the case's error, with its cause: never a lost row
            evaluation.fail(exc, phase)
        finally:
            evaluation.seconds = round(time.perf_counter() - started, 3)
            evaluation.finished_at = _now()
        return evaluation

    def _check(self, evaluation: Evaluation, ctx: ScenarioContext) -> None:
        """The checks that cost nothing: text addressed to the judge, the user agent's own faults."""
        evaluation.injection_flags = [f.as_dict() for f in find_injections(evaluation.dialogue.messages)]
        evaluation.user_faults = [f.as_dict() for f in find_user_faults(
            dialogue_facts(ctx, evaluation.dialogue, self.user_agent.prompt_prefix(ctx)))]

    def _again(self, evaluation: Evaluation, ctx: ScenarioContext) -> None:
        """The dialogue run again, from the start, with its own time limit: the first is kept on the evaluation
        (``rerun.first``; its calls stay in the log, the first ``calls`` of them), the second is checked and judged."""
        first, rerun = evaluation.dialogue, evaluation.rerun
        assert rerun is not None
        rerun["first"] = {
            "turns": first.turns, "termination": first.termination.value if first.termination else None,
            "user_faults": evaluation.user_faults, "transcript": first.transcript(), "calls": len(first.log.records),
        }
        log = first.log
        log.deadline = None if self.time_limit_s is None else time.monotonic() + self.time_limit_s
        evaluation.dialogue = Dialogue(log=log)
        evaluation.injection_flags, evaluation.user_faults = [], []
        run_dialogue(evaluation.dialogue, ctx, self.user_agent, self.assistant, max_turns=evaluation.max_turns)
        self._check(evaluation, ctx)
