"""One result row per case: what was run, how it ended, its scores or its error, the dialogue and its calls."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Literal, Mapping, Optional, Protocol, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..data.models import case_id
from ..errors import ErrorSource
from ..scales import Scores
from .identity import RunIdentity
from .judged import ConfirmationRow, RetestRow, check_partial, in_part_on_the_scales, on_the_scales

if TYPE_CHECKING:
    from ..evaluation import Evaluation

Status = Literal["passed", "failed", "error"]
#: a case's verdict against its expectation (:func:`~personalens_testkit.gating.expectations.case_verdict`)
CaseVerdict = Literal["pass", "expected failure", "regression", "unexpected pass", "not scored", "reply changed",
                      "unconfirmed", "inconclusive (user agent)"]
#: a case whose dialogue the user agent, not the bot, spoiled (:mod:`~personalens_testkit.agents.user_faults`): out of
#: every figure and gate, listed with its reason
USER_AGENT_VERDICT: CaseVerdict = "inconclusive (user agent)"


class _Shortfall(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RunInfo(_Part):
    """What every row of a run shares: its id and the parts it was run with. A results file holds it once per run
    (a run record, :func:`run_line`), each row only the ``run_id`` that names it (see :mod:`.runs`)."""

    run_id: str = ""
    assistant: str = ""
    assistant_kind: str = ""
    assistant_context: str = ""
    assistant_model: Optional[str] = None
    #: the reference assistant's prompt variant (claude / llama / mistral); None for a bot
    assistant_prompt: Optional[str] = None
    user_model: str = ""
    judge_model: str = ""
    #: the model of the review of the user agent's turns (``--review-user``; None: no review)
    reviewer_model: Optional[str] = None
    record_mode: Optional[str] = None
    #: what produced the rows (None: not known, as for `personalens judge`'s rows, or rows of older versions)
    identity: Optional[RunIdentity] = None


#: the fields of :class:`RunInfo`: the run's, which a row of an older version repeated (a row of this version holds
#: ``run_id`` only)
RUN_FIELDS = tuple(RunInfo.model_fields)


def run_line(run: RunInfo) -> str:
    """A run's record in a results file: one line of JSON, ``{"run": {...}}``, before its first row."""
    return '{"run":' + run.model_dump_json() + "}"


class RowError(_Part):
    """Why a case has no score: what failed, in which phase, and the source it is counted against."""

    kind: str
    phase: str
    message: str
    raw_answer: Optional[str] = None
    #: what it is counted against: "assistant" (your bot), "user_agent" or "judge" (the benchmark's models), "setup",
    #: "storage", "internal"
    source: ErrorSource = "setup"
    #: the model or bot a call failed on, and the failure without the call's role and turn
    endpoint: Optional[str] = None
    cause: Optional[str] = None
    disk_full: bool = False


class CallRow(_Part):
    role: str
    label: str
    turn: int
    seconds: float
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    attempts: int = 1
    cache_read_tokens: Optional[int] = None
    cache_write_tokens: Optional[int] = None
    #: whether a cassette answered it (False: called live)
    replayed: bool = False


class RoleUsage(_Part):
    """One role's calls and tokens in a case, as the recording keeps them when it drops the call list (what
    ``personalens estimate`` measures a recording by). An older recording's positional list ``[calls, prompt,
    completion, cache-read, cache-write]`` reads as these fields."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @model_validator(mode="before")
    @classmethod
    def _from_a_list(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            if len(value) > len(USAGE_FIELDS):
                raise ValueError(f"at most {len(USAGE_FIELDS)} figures ({', '.join(USAGE_FIELDS)}), got {len(value)}")
            return dict(zip(USAGE_FIELDS, value))
        return value

    def figures(self) -> tuple[int, int, int, int, int]:
        """Calls, prompt, completion, cache-read and cache-write tokens, in that order."""
        return (self.calls, self.prompt_tokens, self.completion_tokens, self.cache_read_tokens,
                self.cache_write_tokens)


USAGE_FIELDS = tuple(RoleUsage.model_fields)


class UserFaultRow(_Part):
    """A rule of the protocol the user agent broke in one of its turns (turn 0: the opening query), the direction of
    the fault (it hindered or helped the bot, or is noted alone) and the turn's first characters."""

    turn: int
    rule: str
    direction: Literal["hindered", "helped", "noted"]
    excerpt: str = ""
    #: what found it: the checks that cost nothing, or a review by a model (``--review-user``)
    source: Literal["check", "review"] = "check"


class FirstDialogueRow(_Part):
    """The dialogue ``--rerun-user-faults`` did not keep: its turns, how it ended, the user agent's faults that had it
    run again, its transcript and how many of the row's calls (the first ones) it made."""

    turns: int = 0
    termination: Optional[str] = None
    user_faults: list[UserFaultRow] = []
    transcript: list[dict[str, str]] = []
    calls: int = 0


class RerunRow(_Part):
    """``--rerun-user-faults``: why the scenario's first dialogue was run again (what its user agent did), and that
    dialogue (``first``); or why it was not (``refused``: the budget, a stopping run)."""

    why: str
    first: Optional[FirstDialogueRow] = None
    refused: Optional[str] = None


class ShortfallRow(_Part):
    metric: str
    value: Any
    floor: Any


class FlagRow(_Part):
    turn: int
    kind: str
    excerpt: str
    removed: bool = False


#: the most characters of each reply a row keeps of a changed turn (a reviewer reads them in the job summary)
REPLY_EXCERPT = 500


def excerpt(text: str, limit: int = REPLY_EXCERPT) -> str:
    """The first ``limit`` characters of a text, saying how many more there were."""
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"


class ReplyChangeRow(_Part):
    """The first turn where the bot's reply differs from the recording: the recorded (old) reply and the new one,
    each cut to :data:`REPLY_EXCERPT` characters."""

    turn: int
    recorded: str
    reply: str


class ReadsScores:
    """How a row's scores are read, for a :class:`ResultRow` and for its digest alike
    (:class:`~.digest.RowDigest`): its case, whether it is scored, a metric's score and the score a figure counts."""

    __slots__ = ()  # reads ``scenario_id``, ``repeat``, ``status``, ``verdict``, ``scores`` and ``partial_scores``

    @property
    def case_id(self) -> str:
        """The scenario id, with ``-r<N>`` for the N-th try of a repeated scenario."""
        return case_id(self.scenario_id, self.repeat)

    @property
    def scored(self) -> bool:
        """A case that has scores: passed or failed (never an error), on a dialogue the user agent did not spoil (a
        case whose verdict is ``inconclusive (user agent)`` counts in no figure)."""
        return self.status in ("passed", "failed") and self.scores is not None and self.verdict != USER_AGENT_VERDICT

    def score(self, metric: str) -> Any:
        """A metric's score (``None`` for a case without scores)."""
        return None if self.scores is None else getattr(self.scores, metric)

    def measured(self, metric: str) -> Any:
        """The metric's score as a figure counts it: a scored case's, or a readable dimension of a case whose judge
        answered other dimensions unreadably (the paper's counting: missing for that dimension only); else None."""
        if self.scored:
            return self.score(metric)
        return None if self.partial_scores is None else getattr(self.partial_scores, metric)


class ResultRow(ReadsScores, _Part):
    #: 2: the run's information is the file's run record (``run``), the row names it by ``run_id``; 1: every row
    #: repeated it (read as the row's ``run`` all the same)
    schema_version: int = 2
    run_id: str = ""
    #: the run that produced the row (one object for every row of the run): never written with the row - a results
    #: file holds it once, as the run's record (:func:`run_line`); None for a row built without one
    run: Optional[RunInfo] = Field(default=None, exclude=True)
    scenario_id: str
    user_id: str = ""
    task_id: str = ""
    task_kind: str = "sd"
    domains: list[str] = []
    status: Status
    cassette: Optional[str] = None
    repeat: int = 1
    scores: Optional[Scores] = None
    #: the dimensions whose judge answer could not be read, and why: the case is the judge's error (never scored)
    unreadable: dict[str, str] = {}
    #: on such a case, the dimensions the judge did answer readably (None where unreadable): each counts in its
    #: own figure, as the paper counts them - an unreadable answer is missing for its dimension only
    partial_scores: Optional[Scores] = None
    reasons: dict[str, str] = {}
    observations: list[str] = []
    suggestions: list[str] = []
    shortfalls: list[ShortfallRow] = []
    #: the case's expected outcome (``pass``, ``fail <floors>``, ``flaky``) and its verdict against it:
    #: pass, expected failure, regression, unexpected pass, or not scored (infrastructure)
    expected: Optional[str] = None
    verdict: Optional[CaseVerdict] = None
    injection_flags: list[FlagRow] = []
    #: the user agent's own faults in the dialogue, found by checks that cost nothing (live or replayed), and by a
    #: review by a model with ``--review-user``
    user_faults: list[UserFaultRow] = []
    #: with ``--review-user``: which side made the dialogue's first critical error (``first_error``: user, assistant or
    #: none) and the review's reason
    user_review: Optional[dict[str, str]] = None
    #: ``--rerun-user-faults``: the first dialogue, which its user agent spoiled and a second replaced (or why none did)
    rerun: Optional[RerunRow] = None
    turn_personalization: Optional[list[int]] = None
    preference_leak: Optional[dict[str, Any]] = None
    #: the optional analyses that failed (``turn_level``, ``leak_check``): why; the row's scores stand
    analysis_errors: dict[str, str] = {}
    #: a second judgement of the dialogue (``--judge-retest``); never a score
    retest: Optional[RetestRow] = None
    #: a floor missed on a live judgement, judged again beside the base's dialogue: confirmed or cleared
    confirmation: Optional[ConfirmationRow] = None
    #: the first turn whose bot reply differs from the recording (None: none did, or nothing was recorded)
    reply_change: Optional[ReplyChangeRow] = None
    error: Optional[RowError] = None
    turns: int = 0
    max_turns: int = 0
    termination: Optional[str] = None
    notes: list[str] = []
    transcript: list[dict[str, str]] = []
    transcript_path: Optional[str] = None
    #: the dialogue's fingerprint (:func:`dialogue_digest`), kept when the recording drops the transcript: two rows
    #: with one digest held the same dialogue (None: a row of an older version, or one without a dialogue)
    dialogue_digest: Optional[str] = None
    calls: list[CallRow] = []
    #: the calls' token counts per role, as the recording keeps them when it drops ``calls``
    usage: Optional[dict[str, RoleUsage]] = None
    started_at: str = ""
    finished_at: str = ""
    seconds: float = 0.0

    _scales = field_validator("scores", mode="before")(on_the_scales)

    _partial = field_validator("partial_scores", mode="before")(in_part_on_the_scales)

    @model_validator(mode="before")
    @classmethod
    def _run_of_an_older_row(cls, value: Any) -> Any:
        """A row of schema 1 (and a row built with the run's fields by name): its run's fields are its ``run``."""
        if isinstance(value, dict) and "run" not in value and any(name in value for name in RUN_FIELDS[1:]):
            return {**value, "run": {name: value[name] for name in RUN_FIELDS if name in value}}
        return value

    @model_validator(mode="after")
    def _one_run_id(self) -> "ResultRow":
        if self.run is not None and self.run.run_id != self.run_id:
            if self.run_id:
                raise ValueError(f"run_id {self.run_id!r} is not its run's ({self.run.run_id!r})")
            self.run_id = self.run.run_id
        return self

    @model_validator(mode="after")
    def _partial_only_beside_unreadable(self) -> "ResultRow":
        check_partial(self.status, self.scores, self.partial_scores, self.unreadable,
                      self.error.kind if self.error else None)
        return self

    @property
    def assistant(self) -> str:
        return self.run.assistant if self.run else ""

    @property
    def assistant_kind(self) -> str:
        return self.run.assistant_kind if self.run else ""

    @property
    def assistant_context(self) -> str:
        return self.run.assistant_context if self.run else ""

    @property
    def assistant_model(self) -> Optional[str]:
        return self.run.assistant_model if self.run else None

    @property
    def assistant_prompt(self) -> Optional[str]:
        return self.run.assistant_prompt if self.run else None

    @property
    def user_model(self) -> str:
        return self.run.user_model if self.run else ""

    @property
    def judge_model(self) -> str:
        return self.run.judge_model if self.run else ""

    @property
    def reviewer_model(self) -> Optional[str]:
        return self.run.reviewer_model if self.run else None

    @property
    def record_mode(self) -> Optional[str]:
        return self.run.record_mode if self.run else None

    @property
    def identity(self) -> Optional[RunIdentity]:
        """What produced the row (None for a row without a run, and in the rows of older versions: they stand for no
        other run's case)."""
        return self.run.identity if self.run else None

    def usage_by_role(self) -> dict[str, RoleUsage]:
        """Each role's calls and tokens: from the calls, or the kept usage."""
        if not self.calls:
            return dict(self.usage or {})
        found: dict[str, list[int]] = {}
        for call in self.calls:
            entry = found.setdefault(call.role, [0, 0, 0, 0, 0])
            for i, value in enumerate((1, call.prompt_tokens, call.completion_tokens, call.cache_read_tokens,
                                       call.cache_write_tokens)):
                entry[i] += value or 0
        return {role: RoleUsage.model_validate(figures) for role, figures in found.items()}


def dialogue_digest(transcript: Sequence[Mapping[str, str]]) -> str | None:
    """A dialogue's fingerprint: every turn's role and text, in order (None for no dialogue)."""
    if not transcript:
        return None
    fingerprint = hashlib.blake2b(digest_size=16)
    for turn in transcript:
        for part in (turn.get("role", ""), turn.get("content", "")):
            text = part.encode("utf-8", "surrogatepass")
            fingerprint.update(len(text).to_bytes(8, "big") + text)  # length-prefixed: no two dialogues alike
    return fingerprint.hexdigest()


def build_row(
    run: RunInfo, evaluation: Evaluation, *, status: Status, found: Sequence[_Shortfall], transcript_path: str | None,
    cassette: str | None = None, expected: str | None = None, verdict: CaseVerdict | None = None,
) -> ResultRow:
    """``verdict``: the case's verdict against its expectation (the judge's verdict is the evaluation's)."""
    case_verdict = verdict
    scenario, dialogue, verdict = evaluation.scenario, evaluation.dialogue, evaluation.verdict
    error = evaluation.error
    transcript = dialogue.transcript()
    return ResultRow(
        run=run, run_id=run.run_id,
        scenario_id=scenario.scenario_id, user_id=scenario.user_id, task_id=scenario.task.task_id,
        task_kind=scenario.kind.value, domains=list(scenario.domains), status=status, cassette=cassette,
        scores=verdict.scores if verdict and not error else None,
        partial_scores=verdict.scores if verdict and error else None,
        unreadable=dict(verdict.unreadable) if verdict and error else {},
        reasons=verdict.reasons if verdict else {},
        observations=verdict.observations if verdict else [],
        suggestions=verdict.suggestions if verdict else [],
        shortfalls=[s.as_dict() for s in found], expected=expected, verdict=case_verdict, repeat=evaluation.repeat,
        turn_personalization=evaluation.turn_personalization, injection_flags=evaluation.injection_flags,
        user_faults=evaluation.user_faults, user_review=evaluation.user_review, rerun=evaluation.rerun,
        preference_leak=evaluation.preference_leak, analysis_errors=dict(evaluation.analysis_errors),
        retest=evaluation.retest, confirmation=evaluation.confirmation,
        reply_change=_reply_change(dialogue.reply_change),
        error=None if error is None else RowError(
            kind=error.kind, phase=error.phase, message=error.message, raw_answer=error.raw_answer, source=error.source,
            endpoint=error.endpoint, cause=error.cause, disk_full=error.disk_full,
        ),
        turns=dialogue.turns, max_turns=evaluation.max_turns,
        termination=dialogue.termination.value if dialogue.termination else None,
        notes=list(dialogue.notes), transcript=transcript, transcript_path=transcript_path,
        dialogue_digest=dialogue_digest(transcript),
        calls=[c.as_dict() for c in dialogue.log.records],
        started_at=evaluation.started_at, finished_at=evaluation.finished_at, seconds=evaluation.seconds,
    )


def _reply_change(change: Any) -> ReplyChangeRow | None:
    if change is None:
        return None
    return ReplyChangeRow(turn=change.turn, recorded=excerpt(change.recorded), reply=excerpt(change.reply))


def error_row(run: RunInfo, evaluation: Evaluation, exc: BaseException) -> ResultRow:
    """A minimal error row for a case whose full row could not be built (it always serialises)."""
    scenario = evaluation.scenario
    return ResultRow(
        run=run, run_id=run.run_id, scenario_id=scenario.scenario_id, user_id=scenario.user_id,
        task_id=scenario.task.task_id, task_kind=scenario.kind.value, domains=list(scenario.domains), status="error",
        repeat=evaluation.repeat,
        error=RowError(kind=type(exc).__name__, phase="writing the result row", source="internal",
                       message=f"the result row could not be built: {type(exc).__name__}: {exc!r} (please report it)"),
        turns=evaluation.dialogue.turns, max_turns=evaluation.max_turns, started_at=evaluation.started_at,
        finished_at=evaluation.finished_at, seconds=evaluation.seconds,
    )
