"""Every error the testkit raises on purpose, in one tree.

    PersonalensError                 root: one clear line for the user, never a traceback
    ├── UsageError                   a bad option, spec string or selection
    │   ├── AssistantSetupError      the assistant under test cannot be used as configured
    │   └── GateError                the pull-request gate cannot be set up (git, the base, the bot's start)
    ├── DataError                    a benchmark data file is missing or malformed  (path, field)
    ├── ConfigError                  thresholds.yaml or [tool.personalens] is malformed  (path, key)
    ├── CassetteError                a cassette that cannot be read: not xz, truncated, empty, not JSON, not a
    │                                cassette of ours, too large when decompressed  (path, problem)
    ├── StorageError                 a file the run writes cannot be written (path, errno: a full disk)
    ├── ModelError                   a model or bot call failed (transport, HTTP status, server, time)
    │   ├── ModelServerError         the embedded model server could not start or died
    │   ├── DeadlineReached          the scenario's time limit ran out before or during a call
    │   └── ContractError            a bot's answer breaks the turn contract (the bot's fault)
    ├── JudgeAnswerError             a judge answer that cannot be parsed into scores
    ├── BatchPendingError            --judge-batch submit: a case's judge calls went to the batch engine, unscored
    ├── ReplayMissError              a call no cassette can answer in this record mode
    │   └── CassetteMissError        the cassette's own miss (path, request, reason), said again with the
    │                                scenario, the call and the command that records it
    └── ReplyChangedError            in an offline replay, the bot's reply differs from the recording

Backend exceptions (httpx, botocore, json) are translated into these at one boundary
each, with ``raise ... from exc`` so the cause is kept for debugging. Internal signals
never reach a user: ``TimeLimit`` (timebox: a bounded call ran out of time; its caller raises
a ModelError or DeadlineReached instead), ``GrammarError`` (agents.answer_grammar: a judge's
answer outside the grammar; raised as JudgeAnswerError), ``BoundedReadError`` (files.read_xz: an xz
file refused - empty, not xz, truncated, too large; raised as CassetteError, or UsageError for a results
file), ``AnswerTooLarge`` and ``RefusedAnswer`` (llm.deadlines: a model's answer past its byte budget on the
wire, or refused from its head - sent compressed, a head too large; raised as ModelError), ``UntrustedJsonError``
(untrusted_json: JSON with more values than its bound, or a key given twice; raised as ModelError,
ContractError or CassetteError) and ``KnownFailure`` (plugin: never raised at all - the xfail marker of a case expected
to fail names it, so only an explicit xfail of a known failure makes the case xfail).
"""

from __future__ import annotations

import errno as _errno
from typing import Any, Iterable, Literal

#: what a case's error is counted against: "assistant" (the system under test), "user_agent" or "judge" (the
#: benchmark's models), "setup" (data, models that could not start), "storage" (a file the run writes) or
#: "internal" (a bug of the testkit); reports count each apart
ErrorSource = Literal["assistant", "user_agent", "judge", "setup", "storage", "internal"]


def dotted(location: Iterable[object]) -> str:
    """A field's location as ``a.b.3``; a part that is empty or not printable shows quoted, so a
    message stays on one line whatever the keys of a file are."""
    parts = (str(part) for part in location)
    return ".".join(part if part.isprintable() and part.strip() else repr(part) for part in parts)


class PersonalensError(Exception):
    """Root of the testkit's own errors; ``str(err)`` is a one-line message for the user."""

    #: set when the error came out of a model or assistant call: "user_agent", "assistant" or "judge"
    call_role: str | None = None
    #: the error follows from answers the models gave, every call answered and recorded: a recording that ends in
    #: it is kept, and replays to it (one that ends in any other error would only replay as a miss)
    from_answers = False


class UsageError(PersonalensError):
    """A command-line option, spec string or selection is not valid."""


class AssistantSetupError(UsageError):
    """An assistant that cannot be used as configured (the message says what is wrong)."""


class GateError(UsageError):
    """``personalens gate`` cannot run as asked: the base commit, a copy of its files, the bot's start."""


class _FileProblem(PersonalensError):
    """A problem located in a file, and optionally at a field or key inside it: ``path: field: problem``."""

    def __init__(self, path: object, field: str | None, problem: str) -> None:
        self.path = str(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}: {field}" if field else self.path
        super().__init__(f"{where}: {problem}")


class DataError(_FileProblem):
    """A benchmark data file is missing or does not have the expected shape (``field``: where in it)."""


class ConfigError(_FileProblem):
    """A configuration file (thresholds.yaml, [tool.personalens]) is not valid (``field``: the key)."""


class CassetteError(_FileProblem):
    """A cassette that is there but cannot be replayed (``problem``: what is wrong with the file)."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(path, None, problem)

    def with_command(self, command: str) -> "CassetteError":
        """The same error, saying how to record the cassette again."""
        self.args = (f"{self.args[0]}. Re-record it: {command}",)
        return self


class StorageError(PersonalensError):
    """A file the run writes (a cassette, a transcript, a result row, a report) could not be written."""

    def __init__(self, path: object, cause: OSError) -> None:
        self.path = str(path)
        self.errno = cause.errno
        reason = cause.strerror or type(cause).__name__
        super().__init__(f"cannot write {self.path}: {reason}")

    @property
    def disk_full(self) -> bool:
        """No room left (ENOSPC, or a quota): every later write there fails the same way."""
        return self.errno in (_errno.ENOSPC, _errno.EDQUOT, _errno.EFBIG)


class ModelError(PersonalensError):
    """A call to a chat model (or to the bot under test) failed; ``role`` says which part of the
    dialogue made it, ``endpoint`` where it went (what the circuit breaker counts errors by)."""

    def __init__(self, message: str, *, model: str = "", role: str = "", retryable: bool = False,
                 endpoint: str = "") -> None:
        self.model = model
        self.role = role
        self.retryable = retryable
        self.endpoint = endpoint
        super().__init__(message)

    @property
    def cause(self) -> str:
        """The failure itself, without the role, turn or attempt count (the same for every call it hits)."""
        return str(self.args[0]).split(" (after ", 1)[0]

    def for_role(self, role: str) -> ModelError:
        """Return the same error labelled with the dialogue role that made the call."""
        self.role = role
        return self

    def __str__(self) -> str:
        prefix = f"{self.role} call to {self.model}" if self.role else f"call to {self.model}"
        return f"{prefix} failed: {self.args[0]}" if self.model else str(self.args[0])


class ModelServerError(ModelError):
    """The embedded model server could not be started, or stopped answering."""


class DeadlineReached(ModelError):
    """The scenario's time limit ran out: the call was not made, or was given up while it ran."""


class ContractError(ModelError):
    """A bot's answer breaks the turn contract (see :mod:`personalens_testkit.assistants.contract`)."""


class BatchPendingError(PersonalensError):
    """``--judge-batch submit``: a case's judge calls were kept for the batch engine, so the case is not scored (its
    answers come with ``--judge-batch collect``)."""

    call_role = "judge"

    def __init__(self, calls: int) -> None:
        super().__init__(f"judged on the batch engine: this case's {calls} judge call(s) go out as batch jobs at the "
                         "end of the run; collect their answers with --judge-batch collect")


class JudgeAnswerError(PersonalensError):
    """The judge's answer for one dimension could not be parsed into a valid score."""

    from_answers = True

    def __init__(self, dimension: str, raw: str, problem: str) -> None:
        self.dimension = dimension
        self.raw = raw
        self.problem = problem
        #: when the judge answered a dialogue's other dimensions readably: its Verdict with those scores (None
        #: where unreadable) - the case stays the judge's error, and each readable dimension counts in its own
        #: figure, as the paper counts them (agents/judge.py sets it)
        self.partial: Any = None
        #: whether the answer was free text (not one JSON object) that the grammar refused: the judge may be asked
        #: again once, with the format restated (agents/judge.py)
        self.free_text = False
        shown = raw if len(raw) <= 600 else raw[:600] + f"... [{len(raw) - 600} more characters]"
        super().__init__(f"judge answer for {dimension} could not be parsed ({problem}); raw answer: {shown!r}")


class ReplayMissError(PersonalensError):
    """A call that a cassette cannot answer and the record mode does not let through: which
    scenario, which call, why, and the command that re-records it."""


class CassetteMissError(ReplayMissError):
    """A call a cassette has no answer left for, and may not send (``reason``: ``cassette_not_found``,
    ``already_played`` or ``nothing_similar``); the replay layer says it again with the scenario, the call and the
    command that records it (:meth:`~personalens_testkit.replay.cassettes.ScenarioCassettes.explain`)."""

    def __init__(self, path: str, request: object, reason: str, cassette: object = None) -> None:
        super().__init__(f"{path}: no recorded answer left for {request!r} ({reason})")
        self.path = path
        #: the request as it would have been stored (:class:`~personalens_testkit.replay.cassette.Request`)
        self.request = request
        self.reason = reason
        #: the cassette that missed (what the miss's message compares the request with)
        self.cassette = cassette


class ReplyChangedError(PersonalensError):
    """In an offline replay, the bot under test answered a recorded turn differently: the rest of the dialogue
    was never recorded, so the case cannot be scored without calling the models (``--record-mode new_episodes``)."""

    def __init__(self, turn: int, recorded: str, now: str) -> None:
        self.turn = turn
        #: the recorded reply and the new one, whole (the message clips them)
        self.recorded = recorded
        self.now = now
        self.command: str | None = None

        def clip(text: str) -> str:
            return text if len(text) <= 120 else text[:120] + "..."

        self.detail = f"recorded {clip(recorded)!r}, now {clip(now)!r}"
        super().__init__(f"your bot's reply at turn {turn} differs from the recording: not scored ({self.detail})")

    def with_command(self, command: str) -> "ReplyChangedError":
        self.command = command
        self.args = (f"{self.args[0]}; score it with model credentials: {command}",)
        return self
