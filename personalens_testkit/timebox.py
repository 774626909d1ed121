"""Calls bounded in wall time, and a pool of daemon threads.

Python cannot interrupt a call that hangs (a bot stuck in a loop, a client waiting on a
server that never answers). So a bounded call runs in a daemon thread of its own and is
waited for at most its time limit; past it the caller gets :class:`TimeLimit` and the
thread is abandoned: it ends on its own, or never, and its result is dropped. Daemon
threads never hold up the end of the process, and a wait in the main thread is
interrupted by Ctrl-C: a run ends in seconds whatever its bots and models are doing.

Each thread runs in a copy of the caller's context (its cassette, its call label).
"""

from __future__ import annotations

import contextvars
import itertools
import queue
import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

T = TypeVar("T")
_names = itertools.count(1)


class TimeLimit(Exception):
    """A bounded call did not return within its time limit (it may still be running)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
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
