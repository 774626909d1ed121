"""Bounded retries with exponential backoff and jitter (tenacity) for calls that failed in a
way worth another try: HTTP 429 and 5xx, timeouts, dropped connections, malformed answers.

A call that still fails after the last attempt raises its last error; errors that are not
retryable (a 400, a bad key, a broken turn contract) and replay misses are never retried.
A scenario deadline stops retrying (and calling) once the scenario has used its time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypeVar

from ..errors import DeadlineReached, ModelError
from ..timebox import deadline
from .base import ChatModel, ChatRequest, ChatResponse, Message, Purpose

if TYPE_CHECKING:
    from tenacity import RetryCallState

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    #: attempts per call, the first included (1: no retry)
    attempts: int = 4
    #: backoff: initial wait, doubling up to max_s, plus up to jitter_s of random jitter
    initial_s: float = 1.0
    max_s: float = 20.0
    jitter_s: float = 1.0


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ModelError) and exc.retryable and not isinstance(exc, DeadlineReached)


def call_with_retries(call: Callable[[], T], policy: RetryPolicy, *, deadline: float | None = None,
                      on_retry: Callable[[BaseException], None] | None = None) -> T:
    """``call()``, retried per ``policy`` while its error is retryable and the deadline allows.

    The first attempt is made directly (most calls succeed, and a replayed call takes well under a
    millisecond: tenacity's bookkeeping would be a good part of it); only a retryable failure goes
    to tenacity, whose first attempt then raises that failure again.
    """
    try:
        return call()
    except Exception as exc:
        if policy.attempts <= 1 or not _retryable(exc):
            raise
        failed: BaseException | None = exc
    # loaded by the first retryable failure (a process whose calls all succeed never needs it)
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

    def again() -> T:
        nonlocal failed
        if failed is not None:
            exc, failed = failed, None
            raise exc
        return call()

    def stop(state: RetryCallState) -> bool:
        out_of_time = deadline is not None and time.monotonic() >= deadline
        return out_of_time or stop_after_attempt(policy.attempts)(state)

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None and state.outcome.exception() is not None:
            on_retry(state.outcome.exception())

    retrying = Retrying(
        stop=stop, retry=retry_if_exception(_retryable), reraise=True, before_sleep=before_sleep,
        wait=wait_exponential_jitter(multiplier=policy.initial_s, max=policy.max_s, jitter=policy.jitter_s),
    )
    return retrying(again)


#: The one message of a preflight call: the cheapest real call that proves a model answers.
PING_TEXT = "This is a connection check before an evaluation run. Reply with the word OK."
#: The preflight's limits, each for all its tries together. PROBE_S: an OpenAI-compatible endpoint gives any HTTP
#: answer (``GET /models``, any status): a port that accepts connections and never answers is reported by then.
#: PING_S: the one-token call answers (lowered by the model's own ``timeout_s``): a live remote model answers one
#: token in a second or two, and one that loads on its first call (an Ollama-style server) within tens of seconds.
PROBE_S = 10.0
PING_S = 30.0
#: the preflight retries a quick failure (a 429, a 5xx, a dropped connection) once, half a second later: not the
#: run's --retries, whose backoff would keep a dead endpoint's one line waiting for minutes
PING_RETRY = RetryPolicy(attempts=2, initial_s=0.5, max_s=0.5, jitter_s=0.25)


def ping(model: ChatModel, purpose: Purpose) -> ChatResponse:
    """The preflight of a model: any HTTP answer within PROBE_S (where the backend can tell), then one minimal real
    call (one answer token) within PING_S - its answer returned (the provider bills it: the run's cost counts it);
    a failure raises its ModelError, naming the limit it ran out of."""
    probe = getattr(model, "probe", None)
    if callable(probe):
        with deadline(PROBE_S, "preflight") as limit:
            call_with_retries(probe, PING_RETRY, deadline=limit.at if limit else None)
    request = ChatRequest(messages=(Message("user", PING_TEXT),), purpose=purpose, temperature=0.0, max_tokens=1)
    with deadline(PING_S, "preflight") as limit:
        return call_with_retries(lambda: model.complete(request), PING_RETRY, deadline=limit.at if limit else None)
