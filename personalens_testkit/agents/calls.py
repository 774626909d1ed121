"""A log of every model call a scenario makes: who made it, when in the dialogue, cost."""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, TypeVar

from ..errors import DeadlineReached, ModelError, PersonalensError
from ..llm.base import ChatModel, ChatRequest, ChatResponse
from ..llm.retry import RetryPolicy, call_with_retries
from ..timebox import TimeLimit, call_within

CallRole = Literal["user_agent", "assistant", "judge"]
T = TypeVar("T")


@dataclass(frozen=True)
class CallSite:
    """Which call is being made: its role, what for, and the dialogue turn."""

    role: CallRole
    label: str
    turn: int

    def describe(self) -> str:
        return f"{self.role.replace('_', ' ')} ({self.label}" + (f", turn {self.turn})" if self.turn else ")")


#: The call in progress in this thread (the replay layer labels and explains requests with it).
CURRENT_CALL: ContextVar[CallSite | None] = ContextVar("personalens_current_call", default=None)
#: Turns an exception raised inside a call into one of ours (set by the replay layer), or None.
CALL_ERRORS: ContextVar[Callable[[BaseException, CallSite], PersonalensError | None] | None] = ContextVar(
    "personalens_call_errors", default=None
)


@dataclass(frozen=True)
class CallRecord:
    role: CallRole
    #: what the call was for: "opening", "reply", "final reply", or the judged metric
    label: str
    #: the dialogue turn it belongs to (0 for the opening query and for judge calls)
    turn: int
    seconds: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: 1, or more when retryable failures (429, 5xx, timeouts, ...) were retried
    attempts: int = 1
    #: prompt tokens read from / written to the provider's prompt cache (Bedrock reports them)
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # every field is a plain value: no need for asdict's deep copy


@dataclass
class CallLog:
    records: list[CallRecord] = field(default_factory=list)
    #: how failed calls are retried
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(attempts=1))
    #: time.monotonic() after which no call is started (the scenario's time limit), and that limit
    deadline: float | None = None
    time_limit_s: float | None = None

    def add(self, record: CallRecord) -> None:
        self.records.append(record)

    def _within_deadline(self, call: Callable[[], T], site: CallSite) -> Callable[[], T]:
        """The call, bounded while it runs by what is left of the scenario's time (each attempt)."""
        deadline = self.deadline
        if deadline is None:
            return call

        def bounded() -> T:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlineReached(f"{site.describe()} not made: the scenario's time limit of "
                                      f"{self.time_limit_s:g} s ran out")
            try:
                return call_within(call, left, name="call")
            except TimeLimit:
                raise DeadlineReached(f"{site.describe()} given up while it ran: the scenario's time limit of "
                                      f"{self.time_limit_s:g} s ran out") from None

        return bounded

    def run(self, call: Callable[[], T], *, role: CallRole, label: str, turn: int) -> T:
        """Make one call, logging its time and tokens; a failure is re-labelled with the role and turn.
        With a scenario time limit, the call is given up once the limit passes, even while it runs."""
        site = CallSite(role=role, label=label, turn=turn)
        token = CURRENT_CALL.set(site)
        started = time.perf_counter()
        attempts = 1

        def retried(_: BaseException) -> None:
            nonlocal attempts
            attempts += 1

        try:
            result = call_with_retries(self._within_deadline(call, site), self.retry, deadline=self.deadline,
                                       on_retry=retried)
        except Exception as exc:
            explain = CALL_ERRORS.get()
            ours = explain(exc, site) if explain is not None else None
            if ours is not None:
                ours.call_role = role
                raise ours from None
            exc.call_role = role  # type: ignore[attr-defined] - which part of the dialogue failed
            if isinstance(exc, ModelError):
                if attempts > 1:
                    exc.args = (f"{exc.args[0]} (after {attempts} attempts)", *exc.args[1:])
                raise exc.for_role(site.describe()) from exc.__cause__
            raise
        finally:
            CURRENT_CALL.reset(token)
        self.add(CallRecord(
            role=role, label=label, turn=turn, seconds=round(time.perf_counter() - started, 3),
            prompt_tokens=getattr(result, "prompt_tokens", None),
            completion_tokens=getattr(result, "completion_tokens", None), attempts=attempts,
            cache_read_tokens=getattr(result, "cache_read_tokens", None),
            cache_write_tokens=getattr(result, "cache_write_tokens", None),
        ))
        return result

    def chat(self, model: ChatModel, request: ChatRequest, *, role: CallRole, label: str, turn: int) -> ChatResponse:
        return self.run(lambda: model.complete(request), role=role, label=label, turn=turn)
