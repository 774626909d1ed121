"""A log of every model call a scenario makes: who made it, when in the dialogue, cost."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, TypeVar

from ..errors import ModelError
from ..llm.base import ChatModel, ChatRequest, ChatResponse

CallRole = Literal["user_agent", "assistant", "judge"]
T = TypeVar("T")


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
        started = time.perf_counter()
        try:
            result = call()
        except ModelError as exc:
            where = f"{role.replace('_', ' ')} ({label}" + (f", turn {turn})" if turn else ")")
            raise exc.for_role(where) from exc.__cause__
        self.add(CallRecord(
            role=role, label=label, turn=turn, seconds=round(time.perf_counter() - started, 3),
            prompt_tokens=getattr(result, "prompt_tokens", None),
            completion_tokens=getattr(result, "completion_tokens", None),
        ))
        return result

    def chat(self, model: ChatModel, request: ChatRequest, *, role: CallRole, label: str, turn: int) -> ChatResponse:
        return self.run(lambda: model.complete(request), role=role, label=label, turn=turn)
