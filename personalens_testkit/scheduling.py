"""xdist scheduling for ``-n N --concurrency K``: each worker evaluates K cases of its own queue at once, so
its queue must hold them. xdist's load scheduler sends a worker a quarter of its share at the start and,
once cases take longer than 0.1 s, tops it up only when fewer than two are left - a worker of long live
cases would run one or two of them at a time. This one keeps each worker's queue ``depth`` cases deep
(twice its lanes) while cases are left, and is otherwise xdist's: the same order, the same shutdown."""

from __future__ import annotations

from typing import Any

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
