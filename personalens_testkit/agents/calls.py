"""A log of every model call a scenario makes: who made it, when in the dialogue, cost."""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, TypeVar

from ..errors import ModelError, PersonalensError
from ..llm.base import ChatModel, ChatRequest, ChatResponse

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CallLog:
    records: list[CallRecord] = field(default_factory=list)

    def add(self, record: CallRecord) -> None:
        self.records.append(record)

    def run(self, call: Callable[[], T], *, role: CallRole, label: str, turn: int) -> T:
        """Make one call, logging its time and tokens; a failure is re-labelled with the role and turn."""
        site = CallSite(role=role, label=label, turn=turn)
        token = CURRENT_CALL.set(site)
        started = time.perf_counter()
        try:
            result = call()
        except Exception as exc:
            explain = CALL_ERRORS.get()
            ours = explain(exc, site) if explain is not None else None
            if ours is not None:
                raise ours from None
            if isinstance(exc, ModelError):
                raise exc.for_role(site.describe()) from exc.__cause__
            raise
        finally:
            CURRENT_CALL.reset(token)
        self.add(CallRecord(
            role=role, label=label, turn=turn, seconds=round(time.perf_counter() - started, 3),
            prompt_tokens=getattr(result, "prompt_tokens", None),
            completion_tokens=getattr(result, "completion_tokens", None),
        ))
        return result

    def chat(self, model: ChatModel, request: ChatRequest, *, role: CallRole, label: str, turn: int) -> ChatResponse:
        return self.run(lambda: model.complete(request), role=role, label=label, turn=turn)
