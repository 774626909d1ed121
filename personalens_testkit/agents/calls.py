"""A log of every model call a scenario makes: who made it, when in the dialogue, what it cost.

The call itself is made by :func:`~personalens_testkit.llm.calling.make_call` (labelling,
retries, the scenario's deadline); the log records what it returns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from ..callsite import CALL_OUTCOME, CallRole, CallSite, step
from ..llm.base import ChatModel, ChatRequest, ChatResponse
from ..llm.calling import make_call
from ..llm.retry import RetryPolicy

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
    #: 1, or more when retryable failures (429, 5xx, timeouts, ...) were retried
    attempts: int = 1
    #: prompt tokens read from / written to the provider's prompt cache (Bedrock reports them)
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    #: whether a cassette answered it (False: the model or bot was called live)
    replayed: bool = False
    #: when it began (seconds since the epoch; 0: not known) and the model that answered, as it said (None: not
    #: said) - for a trace (run/traces.py), not in the row
    started: float = field(default=0.0, compare=False)
    response_model: str | None = field(default=None, compare=False)
    #: a call that failed (kept apart, :attr:`CallLog.failed`): its error's kind and message
    error: str | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        found = dict(vars(self))  # every field is a plain value: no need for asdict's deep copy
        del found["started"], found["response_model"], found["error"]
        return found


@dataclass
class CallLog:
    records: list[CallRecord] = field(default_factory=list)
    #: how failed calls are retried
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(attempts=1))
    #: time.monotonic() after which no call is made or waited for (the scenario's time limit), and that limit
    deadline: float | None = None
    time_limit_s: float | None = None
    #: the calls that failed, retries spent (not in the row's calls, which are the answered ones; a trace shows them)
    failed: list[CallRecord] = field(default_factory=list)

    def add(self, record: CallRecord) -> None:
        self.records.append(record)

    def run(self, call: Callable[[], T], *, role: CallRole, label: str, turn: int) -> T:
        """Make one call (see :func:`~personalens_testkit.llm.calling.make_call`) and log its time and tokens."""
        started, began = time.perf_counter(), time.time()
        outcome = {"replayed": False}
        token = CALL_OUTCOME.set(outcome)
        site = CallSite(role=role, label=label, turn=turn)
        try:
            with step(f"the {site.describe()}"):
                result, attempts = make_call(call, site, policy=self.retry, deadline=self.deadline,
                                             time_limit_s=self.time_limit_s)
        except Exception as exc:
            self.failed.append(CallRecord(**self._call_of(site, started, began, outcome),
                                          error=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            CALL_OUTCOME.reset(token)
        self.add(CallRecord(
            **self._call_of(site, started, began, outcome),
            prompt_tokens=getattr(result, "prompt_tokens", None),
            completion_tokens=getattr(result, "completion_tokens", None), attempts=attempts,
            cache_read_tokens=getattr(result, "cache_read_tokens", None),
            cache_write_tokens=getattr(result, "cache_write_tokens", None),
            response_model=_text_or_none(getattr(result, "model", None)),
        ))
        return result

    @staticmethod
    def _call_of(site: CallSite, started: float, began: float, outcome: dict[str, bool]) -> dict[str, Any]:
        """What a call's record holds whether it was answered or failed: where, how long, replayed, when."""
        return {"role": site.role, "label": site.label, "turn": site.turn,
                "seconds": round(time.perf_counter() - started, 3), "replayed": outcome["replayed"], "started": began}

    def chat(self, model: ChatModel, request: ChatRequest, *, role: CallRole, label: str, turn: int) -> ChatResponse:
        return self.run(lambda: model.complete(request), role=role, label=label, turn=turn)


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
