"""Each xdist worker's queue of cases, for ``-n N --concurrency K``: the controller's scheduler keeps it deep
enough for the worker's K lanes (:class:`LanesScheduling`, through xdist's ``pytest_xdist_make_scheduler``
hook), and the worker reads it to evaluate its next cases ahead (:func:`worker_queue`).

xdist's load scheduler sends a worker a quarter of its share at the start and, once cases take longer than
0.1 s, tops it up only when fewer than two are left - a worker of long live cases would run one or two of them
at a time. :class:`LanesScheduling` keeps each worker's queue ``depth`` cases deep (twice its lanes) while
cases are left, and is otherwise xdist's: the same order, the same shutdown.

xdist has no public hook that tells a worker which cases it has been sent: :func:`worker_queue` reads its
worker loop's queue (``torun``, ``nextitem_index``), the one place in the package that reads xdist's
internals. Without them (another xdist, the work-stealing scheduler that takes queued cases back) it gives
None and the worker evaluates each case when pytest runs it: slower, never wrong
(tests/test_concurrency.py pins both).
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from xdist.scheduler import LoadScheduling


class LanesScheduling(LoadScheduling):
    def __init__(self, config: Any, log: Any = None, *, lanes: int) -> None:
        super().__init__(config, log)
        self.depth = 2 * lanes

    def schedule(self) -> None:
        super().schedule()  # the first chunk of each worker (or every case, when there are few)
        for node in self.nodes:
            if self.pending and not node.shutting_down:
                self.check_schedule(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if not self.pending:
            node.shutdown()
            return
        missing = self.depth - len(self.node2pending[node])
        if missing > 0:
            self._send_tests(node, missing)


def make_scheduler(config: Any, log: Any, concurrency: int) -> LanesScheduling | None:
    """The scheduler of a ``-n N --concurrency K`` run with xdist's default distribution (else None: xdist's)."""
    if concurrency < 2 or getattr(config.option, "dist", "load") != "load":
        return None
    return LanesScheduling(config, log, lanes=concurrency)


def worker_queue(session: pytest.Session) -> Callable[[], list[str]] | None:
    """In an xdist worker: a function giving the node ids of the cases queued for it, in order (the next one
    first); None when it cannot be known safely (see the module's text)."""
    if getattr(session.config.option, "dist", "load") == "worksteal":
        return None
    loop = next((p for p in session.config.pluginmanager.get_plugins()
                 if hasattr(p, "torun") and hasattr(p, "nextitem_index")), None)
    if loop is None:
        return None

    def upcoming() -> list[str]:
        with loop.torun.lock() as queued:
            indices = [loop.nextitem_index, *queued]
        items = session.items
        return [items[i].nodeid for i in indices if isinstance(i, int) and 0 <= i < len(items)]

    return upcoming
