"""Each xdist worker's queue of cases, for ``-n N --concurrency K``: the controller's scheduler keeps it deep
enough for the worker's K lanes and writes down what it sends (:class:`LanesScheduling`, through xdist's
``pytest_xdist_make_scheduler`` hook), and the worker reads that to evaluate its next cases ahead
(:func:`worker_queue`, which follows pytest's ``pytest_runtest_logstart`` to know the case under way).

xdist's load scheduler sends a worker a quarter of its share at the start and, once cases take longer than
0.1 s, tops it up only when fewer than two are left - a worker of long live cases would run one or two of them
at a time. :class:`LanesScheduling` keeps each worker's queue ``depth`` cases deep (twice its lanes) while
cases are left, dealing the first ones round the workers; as xdist's, it sends nothing twice and shuts a worker
down once no case is left to send.

xdist tells a worker nothing of its queue but the cases themselves, as they arrive. So the scheduler, which sends
every case itself (through the worker's public ``send_runtest_some``), appends each case's node id to the worker's
queue file in the run's folder before sending it (:data:`QUEUES`), and the worker reads its file: the cases sent
to it after the one pytest runs now. Another scheduler (``--dist worksteal``, which takes queued cases back, or
another plugin's) writes no file: the worker then evaluates each case when pytest runs it - slower, never wrong
(tests/test_concurrency.py pins both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from xdist.scheduler import LoadScheduling

#: the folder of the run's worker queues (one file per worker, named by its id: ``gw0``), in the run's folder
QUEUES = ".queues"


class LanesScheduling(LoadScheduling):
    def __init__(self, config: Any, log: Any = None, *, lanes: int, folder: Path) -> None:
        super().__init__(config, log)
        self.depth = 2 * lanes
        #: where each worker's queue file is written
        self.folder = folder

    def schedule(self) -> None:
        """The first cases dealt round the workers, one at a time, until each holds ``depth`` or none is left (xdist's
        own first deal: a quarter of a share each); afterwards, as xdist, a top-up of every worker."""
        assert self.collection_is_completed
        if self.collection is None:
            collections = list(self.node2collection.values())
            if any(collection != collections[0] for collection in collections):
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = collections[0]
            self.pending[:] = range(len(self.collection))
            self.folder.mkdir(parents=True, exist_ok=True)
            for stale in self.folder.iterdir():  # only this run's sends are a worker's queue
                stale.unlink()
            for _ in range(self.depth):
                for node in self.nodes:
                    if self.pending and not node.shutting_down and len(self.node2pending[node]) < self.depth:
                        self.send(node, 1)
        for node in self.nodes:
            self.check_schedule(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if not self.pending:
            node.shutdown()
            return
        missing = self.depth - len(self.node2pending[node])
        if missing > 0:
            self.send(node, missing)

    def send(self, node: Any, count: int) -> None:
        """Send a worker the next ``count`` pending cases, written to its queue file first."""
        cases = self.pending[:count]
        if not cases:
            return
        del self.pending[:count]
        self.node2pending[node].extend(cases)
        with open(self.folder / str(node.gateway.id), "a", encoding="utf-8") as queue:
            queue.write("".join(f"{self.collection[index]}\n" for index in cases))
        node.send_runtest_some(cases)


def writes_queues(config: Any, concurrency: int) -> bool:
    """The controller's word: whether its scheduler is :class:`LanesScheduling` (``-n N --concurrency K`` with xdist's
    default distribution), which writes each worker's queue file. Handed to the workers (their own ``dist`` option
    says nothing: xdist sets it to ``no`` in a worker)."""
    return concurrency >= 2 and getattr(config.option, "dist", "load") == "load"


def make_scheduler(config: Any, log: Any, concurrency: int, run_dir: Path) -> LanesScheduling | None:
    """The scheduler of a ``-n N --concurrency K`` run with xdist's default distribution (else None: xdist's)."""
    if not writes_queues(config, concurrency):
        return None
    return LanesScheduling(config, log, lanes=concurrency, folder=run_dir / QUEUES)


class _WorkerQueue:
    """What this worker was sent, in order, read from its queue file as it grows; and the case pytest runs now."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sent: list[str] = []
        self.position: dict[str, int] = {}
        self._read = 0  # bytes of the file read so far (whole lines only)
        self.current: str | None = None

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.current = nodeid

    def upcoming(self) -> list[str]:
        try:
            with open(self.path, "rb") as queue:
                queue.seek(self._read)
                fresh = queue.read()
        except FileNotFoundError:
            fresh = b""
        lines = fresh[: fresh.rfind(b"\n") + 1]  # a line being written is read once it is whole
        self._read += len(lines)
        for nodeid in lines.decode("utf-8").splitlines():
            self.position.setdefault(nodeid, len(self.sent))
            self.sent.append(nodeid)
        at = self.position.get(self.current) if self.current is not None else None
        return self.sent if at is None else self.sent[at + 1:]


def worker_queue(session: pytest.Session, run_dir: Path, *, written: bool) -> Callable[[], list[str]] | None:
    """In an xdist worker: a function giving the node ids of the cases queued for it, in order (the next one
    first); None when it cannot be known (``written``: the controller's :func:`writes_queues`)."""
    if not written:
        return None
    queue = _WorkerQueue(run_dir / QUEUES / str(session.config.workerinput.get("workerid", "gw")))
    session.config.pluginmanager.register(queue, "personalens-worker-queue")
    return queue.upcoming
