"""Bounded retries with exponential backoff and jitter (tenacity) for calls that failed in a
way worth another try: HTTP 429 and 5xx, timeouts, dropped connections, malformed answers.

A call that still fails after the last attempt raises its last error; errors that are not
retryable (a 400, a bad key, a broken turn contract) and replay misses are never retried.
A scenario deadline stops retrying (and calling) once the scenario has used its time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ..errors import DeadlineReached, ModelError
from .base import ChatModel, ChatRequest, Message, Purpose

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


def ping(model: ChatModel, purpose: Purpose, policy: RetryPolicy) -> None:
    """One minimal real call (one answer token), retried like any call; a failure raises its ModelError."""
    request = ChatRequest(messages=(Message("user", PING_TEXT),), purpose=purpose, temperature=0.0, max_tokens=1)
    call_with_retries(lambda: model.complete(request), policy)
