"""Scenarios evaluated ahead of their pytest cases, several at once in threads (``--concurrency K``).

pytest runs cases one after the other; a case here mostly waits for remote models. So when K
is above 1, the next K cases are submitted to a pool of K threads as soon as a case starts, and
each case takes its evaluation when it is done. Without xdist the next cases are the collected
order's; in an xdist worker they are the ones the controller has queued for that worker
(``upcoming``), so ``-n 2 --concurrency 8`` keeps 16 scenarios under way from two processes.
Cassettes are safe to use from threads (see :mod:`personalens_testkit.replay.router`); rows are
still written in case order, by pytest.
"""

from __future__ import annotations

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
                 upcoming: Callable[[], list[str]] | None = None) -> None:
        """``upcoming()``: the keys of the cases this process will run next, in order (an xdist worker's queue);
        None: the order of ``cases``."""
        self._cases = list(cases)
        self._position = {key: i for i, (key, *_rest) in enumerate(self._cases)}
        self._evaluate = evaluate
        self._workers = workers
        self._upcoming = upcoming
        self._pool = DaemonPool(workers, name="ahead")
        self._futures: dict[str, Future[Evaluation]] = {}
        self._started: set[str] = set()
        self._submitted = 0
        self._lock = threading.Lock()

    def __contains__(self, key: str) -> bool:
        return key in self._position

    def result(self, key: str) -> Evaluation:
        """The evaluation of this case, keeping the next ``workers`` cases under way."""
        with self._lock:
            if self._upcoming is not None:
                for ahead in [key, *self._upcoming()][: self._workers]:
                    if ahead in self._position:
                        self._submit(self._cases[self._position[ahead]])
            else:
                end = min(len(self._cases), self._position[key] + self._workers)
                while self._submitted < end:
                    self._submit(self._cases[self._submitted])
                    self._submitted += 1
            if key not in self._futures:  # a case run out of order (say, with -x and --lf), or again: on its own
                self._started.discard(key)
                self._submit(self._cases[self._position[key]])
            future = self._futures.pop(key)
        return future.result()

    def _submit(self, case: Case) -> None:
        key, scenario, repeat, rerecord = case
        if key not in self._futures and key not in self._started:
            self._started.add(key)
            self._futures[key] = self._pool.submit(lambda: self._evaluate(scenario, rerecord, repeat))

    def close(self) -> None:
        """Cancel what has not started; never wait for a case under way (Ctrl-C ends the run at once)."""
        self._pool.close()
