"""Calls bounded in wall time, and a pool of daemon threads.

Python cannot interrupt a call that hangs (a bot stuck in a loop, a client waiting on a
server that never answers). So a bounded call runs in a daemon thread of its own and is
waited for at most its time limit; past it the caller gets :class:`TimeLimit` and the
thread is abandoned: it ends on its own, or never, and its result is dropped. Daemon
threads never hold up the end of the process, and a wait in the main thread is
interrupted by Ctrl-C: a run ends in seconds whatever its bots and models are doing.

Each thread runs in a copy of the caller's context (its cassette, its call label).

Deadlines: a call's time limits are points in ``time.monotonic()`` held in a context variable
(:func:`deadline`), each with the limit it comes from - a call's own ``timeout_s``, the
scenario's time limit, the preflight's. Every wait a call makes (a socket read, a bot's
reply, a thread waited for) takes at most what is left of the nearest one in force
(:func:`time_left`), so a limit bounds a call as a whole, however its answer trickles in, and
an outer limit reaches the waits of every call made under it without being handed down.
"""

from __future__ import annotations

import contextvars
import itertools
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, TypeVar

T = TypeVar("T")
_names = itertools.count(1)


class TimeLimit(Exception):
    """A bounded call did not return within its time limit (it may still be running); ``deadline``: the
    deadline that ran out, where one did (:func:`call_by_deadline`)."""

    def __init__(self, seconds: float, deadline: Deadline | None = None) -> None:
        self.seconds = seconds
        self.deadline = deadline
        super().__init__(f"no answer within {seconds:g} s")


def call_within(call: Callable[[], T], seconds: float | None, *, name: str = "bounded") -> T:
    """``call()``, given up after ``seconds`` (None: no limit, called here)."""
    if seconds is None:
        return call()
    if seconds <= 0:
        raise TimeLimit(0.0)
    context = contextvars.copy_context()
    done = threading.Event()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = context.run(call)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"personalens-{name}-{next(_names)}", daemon=True).start()
    if not done.wait(seconds):
        raise TimeLimit(seconds)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


@dataclass(frozen=True)
class Deadline:
    """A point in ``time.monotonic()`` after which a call is given up, and the limit it comes from."""

    at: float
    #: the limit, in seconds, and what sets it (``timeout_s``, "the scenario's time limit", ...)
    limit_s: float
    name: str
    #: nothing is tried after it: a call it ends is not retried (the scenario's time limit)
    final: bool = False

    def left(self) -> float:
        return self.at - time.monotonic()

    def describe(self) -> str:
        """``the time limit of 2 s (timeout_s)``"""
        return f"the time limit of {self.limit_s:g} s ({self.name})"


_DEADLINES: contextvars.ContextVar[tuple[Deadline, ...]] = contextvars.ContextVar("personalens_deadlines", default=())


class deadline:  # noqa: N801 - used as a function: ``with deadline(...)``
    """A deadline in force in this context (and in the threads started from it) for the ``with`` block:
    ``limit_s`` from when the block starts, or at ``at`` (``time.monotonic()``). None: no limit, nothing added.
    (A class rather than a generator: every model call enters one or two, and a generator's context costs more.)"""

    __slots__ = ("limit_s", "name", "at", "final", "_token")

    def __init__(self, limit_s: float | None, name: str, *, at: float | None = None, final: bool = False) -> None:
        self.limit_s, self.name, self.at, self.final = limit_s, name, at, final
        self._token: contextvars.Token[tuple[Deadline, ...]] | None = None

    def __enter__(self) -> Deadline | None:
        if self._token is not None:
            raise RuntimeError("a deadline's block is already entered")
        if self.limit_s is None:
            return None
        added = Deadline(time.monotonic() + self.limit_s if self.at is None else self.at, self.limit_s, self.name,
                         self.final)
        self._token = _DEADLINES.set((*_DEADLINES.get(), added))
        return added

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            token, self._token = self._token, None
            _DEADLINES.reset(token)


def nearest_deadline() -> Deadline | None:
    """The deadline in force that comes first (None: none in force)."""
    return min(_DEADLINES.get(), key=lambda d: d.at, default=None)


def time_left(cap: float | None = None) -> float | None:
    """How long a wait may take now: ``cap``, lowered to what is left of the nearest deadline in force
    (0 or less: none is left; None: no cap and no deadline)."""
    nearest = nearest_deadline()
    if nearest is None:
        return cap
    left = nearest.left()
    return left if cap is None else min(cap, left)


def call_by_deadline(call: Callable[[], T], limit_s: float, name: str, *, thread: str = "bounded") -> T:
    """``call()`` under a deadline of ``limit_s`` (``name``: what sets it), in a daemon thread waited for what is
    left of the nearest deadline in force; past it :class:`TimeLimit` is raised, its ``deadline`` the one that
    ran out, and the call is abandoned. For calls whose own waits cannot be bounded from outside."""
    with deadline(limit_s, name):
        nearest = nearest_deadline()
        assert nearest is not None
        try:
            return call_within(call, max(0.0, nearest.left()), name=thread)
        except TimeLimit:
            raise TimeLimit(nearest.limit_s, nearest) from None


_STOP = object()


class DaemonPool:
    """A fixed number of daemon threads taking calls from a queue. Unlike the standard library's
    pool, closing it never waits for a call under way: a hung call cannot hold up the run's end."""

    def __init__(self, workers: int, *, name: str = "pool") -> None:
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"personalens-{name}-{i + 1}", daemon=True)
                         for i in range(max(1, workers))]
        for thread in self._threads:
            thread.start()

    def submit(self, call: Callable[[], T]) -> Future[T]:
        """Run ``call`` on a pool thread, in a copy of the caller's context."""
        future: Future[T] = Future()
        if self._closed:
            future.cancel()
            return future
        self._queue.put((future, contextvars.copy_context(), call))
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            future, context, call = item  # type: ignore[misc]
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(context.run(call))
            except BaseException as exc:
                future.set_exception(exc)

    def close(self) -> None:
        """Cancel the calls not started yet and let the threads end; returns at once."""
        self._closed = True
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                item[0].cancel()  # type: ignore[index]
        for _ in self._threads:
            self._queue.put(_STOP)
