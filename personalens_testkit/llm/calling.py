"""One call at a call site: labelled, bounded by the scenario's deadline, retried by the policy.

The agents and the dialogue make every model and bot call through :func:`make_call`; the call
log (:mod:`personalens_testkit.agents.calls`) only records what it returns.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from .. import timebox
from ..callsite import CALL_ERRORS, CURRENT_CALL, CallSite
from ..errors import DeadlineReached, ModelError
from .retry import RetryPolicy, call_with_retries

T = TypeVar("T")


def make_call(call: Callable[[], T], site: CallSite, *, policy: RetryPolicy, deadline: float | None = None,
              time_limit_s: float | None = None) -> tuple[T, int]:
    """``call()`` at ``site``: returns its result and the attempts it took. Retryable failures are retried
    per ``policy``; with a ``deadline`` (``time.monotonic()``) each attempt is given up once it passes,
    even while it runs (every wait of the call is bounded by it). A failure is raised re-labelled with
    the role and turn (and the attempts), or as the one-line error the replay layer's explainer gives it."""
    token = CURRENT_CALL.set(site)
    attempts = 1

    def retried(_: BaseException) -> None:
        nonlocal attempts
        attempts += 1

    try:
        return call_with_retries(_bounded(call, site, deadline, time_limit_s), policy, deadline=deadline,
                                 on_retry=retried), attempts
    except Exception as exc:
        explain = CALL_ERRORS.get()
        ours = explain(exc, site) if explain is not None else None
        if ours is not None:
            ours.call_role = site.role
            raise ours from None
        exc.call_role = site.role  # type: ignore[attr-defined] - which part of the dialogue failed
        if isinstance(exc, ModelError):
            if attempts > 1:
                exc.args = (f"{exc.args[0]} (after {attempts} attempts)", *exc.args[1:])
            raise exc.for_role(site.describe()) from exc.__cause__
        raise
    finally:
        CURRENT_CALL.reset(token)


def _bounded(call: Callable[[], T], site: CallSite, deadline: float | None, limit_s: float | None) -> Callable[[], T]:
    """The call under the scenario's deadline (each attempt): not made once it has passed; while it runs, the
    deadline is in force (:func:`~personalens_testkit.timebox.deadline`), so each of the call's waits - a socket
    read, a bot's reply, a thread waited for - takes at most what is left of it, and a call it cuts off ends in
    :class:`DeadlineReached`. No thread per call: a replayed call costs a context variable, not a thread."""
    if deadline is None:
        return call

    def bounded() -> T:
        left = deadline - time.monotonic()
        limit = limit_s if limit_s is not None else max(left, 0.0)
        if left <= 0:
            raise DeadlineReached(f"{site.describe()} not made: the scenario's time limit of {limit:g} s ran out")
        with timebox.deadline(limit, "the scenario's time limit", at=deadline, final=True):
            try:
                return call()
            except (DeadlineReached, timebox.TimeLimit) as exc:
                if isinstance(exc, timebox.TimeLimit) and not (exc.deadline and exc.deadline.final):
                    raise
                raise DeadlineReached(f"{site.describe()} given up while it ran: the scenario's time limit of "
                                      f"{limit:g} s ran out") from None

    return bounded
