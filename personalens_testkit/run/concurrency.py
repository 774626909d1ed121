"""Scenarios evaluated ahead of their pytest cases, several at once in threads (``--concurrency K``).

pytest runs cases one after the other; a case here mostly waits for remote models. So when K
is above 1, K cases are under way in a pool of K threads from the moment a case starts - it and
the next ones, and as each ends, the next not yet started - and each case takes its evaluation
when it is done. Without xdist the next cases are the collected
order's; in an xdist worker they are the ones the controller has queued for that worker
(``upcoming``), so ``-n 2 --concurrency 8`` keeps 16 scenarios under way from two processes.
Cassettes are safe to use from threads (see :mod:`personalens_testkit.replay.router`); rows are
still written in case order, by pytest.
"""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import Future
from typing import Callable, Sequence

from ..data.models import Scenario
from ..evaluation import Evaluation
from ..timebox import DaemonPool

#: (case key, scenario, try, the command that re-records it)
Case = tuple[str, Scenario, int, str]


class EvaluateAhead:
    def __init__(self, cases: Sequence[Case], evaluate: Callable[[Scenario, str, int], Evaluation], workers: int,
                 upcoming: Callable[[], list[str]] | None = None,
                 may_start: Callable[[Case], bool] | None = None) -> None:
        """``upcoming()``: the keys of the cases this process will run next, in order (an xdist worker's queue);
        None: the order of ``cases``. ``may_start(case)``: False once the run is told to stop, or when this case may
        not start (its budget) - no case starts ahead then; one already started still gives its case its row."""
        self._may_start = may_start or (lambda _case: True)
        self._cases = list(cases)
        self._position = {key: i for i, (key, *_rest) in enumerate(self._cases)}
        self._evaluate = evaluate
        self._workers = workers
        self._upcoming = upcoming
        self._pool = DaemonPool(workers, name="ahead")
        self._futures: dict[str, Future[Evaluation]] = {}
        self._started: set[str] = set()
        self._current: str | None = None
        self._waited: Future[Evaluation] | None = None
        self._closed = False
        self._lock = threading.RLock()  # a callback of a future already done runs at once, in the caller
        #: the caller's context (the progress hook's ON_PROGRESS, ...): a case started from a done-callback runs on a
        #: pool thread, whose own context would lose it
        self._context = contextvars.copy_context()

    def __contains__(self, key: str) -> bool:
        return key in self._position

    def started(self, key: str) -> bool:
        """Whether this case's evaluation was started ahead (its calls may have been spent)."""
        with self._lock:
            return key in self._started

    def waiting(self) -> bool:
        """Whether a case started ahead still waits for pytest to take its evaluation (and write its row)."""
        with self._lock:
            return bool(self._futures)

    def result(self, key: str) -> Evaluation:
        """The evaluation of this case; meanwhile ``workers`` cases stay under way, from this one on."""
        with self._lock:
            self._current = key
            if key not in self._futures:  # not started ahead: its turn now (or a case run again, with --lf)
                self._started.discard(key)
                self._submit(self._cases[self._position[key]])
            self._waited = future = self._futures.pop(key)
            self._refill()
        return future.result()

    def _window(self) -> list[str]:
        """The cases that may be evaluated now: the running one and the next ones, at most twice the lanes (what
        is done ahead is held until its case runs)."""
        if self._current is None:
            return []
        if self._upcoming is not None:
            keys = [self._current, *self._upcoming()]
        else:
            start = self._position[self._current]
            keys = [key for key, *_rest in self._cases[start: start + 2 * self._workers]]
        return keys[: 2 * self._workers]

    def _refill(self, _done: object = None) -> None:
        """Start cases of the window while fewer than ``workers`` are under way - also when one ends, so a slow
        case does not hold the lanes behind it idle."""
        with self._lock:
            if self._closed:
                return
            running = sum(not f.done() for f in self._futures.values())
            running += self._waited is not None and not self._waited.done()
            for key in self._window():
                if running >= self._workers:
                    break
                if key in self._position and self._submit(self._cases[self._position[key]]):
                    running += 1

    def _submit(self, case: Case) -> bool:
        """Start this case unless it was started; whether it was started now."""
        key, scenario, repeat, rerecord = case
        if key in self._futures or key in self._started or (key != self._current and not self._may_start(case)):
            return False
        self._started.add(key)
        submit = self._pool.submit
        future = self._futures[key] = self._context.copy().run(submit, lambda: self._evaluate(scenario, rerecord, repeat))
        future.add_done_callback(self._refill)
        return True

    def close(self) -> None:
        """Cancel what has not started; never wait for a case under way (Ctrl-C ends the run at once)."""
        with self._lock:
            self._closed = True
        self._pool.close()
