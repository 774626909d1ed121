"""Progress of a live run: cases done of the total, their outcomes, an estimate of the time left, and the
turn each running case has reached. A live scenario takes minutes, so a run says how it is going - a
line when a case finishes (at most one every few seconds) and, between finishes, which cases are running
and at which turn. Under xdist the controller learns of cases as they finish; the turns of the cases
running in workers are not shown. A pure replay (nothing live) takes seconds and stays quiet."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Callable


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    def __init__(self, total: int, *, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.interval_s = interval_s
        self.clock = clock
        self.started = clock()
        self.outcomes: Counter[str] = Counter()
        #: the cases running in this process: scenario id -> (turns done, turn limit)
        self.running: dict[str, tuple[int, int]] = {}
        self._last_line = clock()
        self._lock = threading.Lock()

    @property
    def done(self) -> int:
        return sum(self.outcomes.values())

    def on_turn(self, scenario_id: str, turn: int, max_turns: int) -> None:
        with self._lock:
            self.running[scenario_id] = (turn, max_turns)

    def finished(self, scenario_id: str, outcome: str) -> str | None:
        """Record a finished case; the progress line when one is due (the last case always gets one)."""
        with self._lock:
            self.running.pop(scenario_id.split("[")[-1].rstrip("]").rsplit("-r", 1)[0], None)
            self.outcomes[outcome] += 1
            due = self.done >= self.total or self.clock() - self._last_line >= self.interval_s
            if due:
                self._last_line = self.clock()
            return self.line() if due else None

    def tick(self) -> str | None:
        """Between finishes: which cases are running and where, when a line is due and one is running."""
        with self._lock:
            if not self.running or self.clock() - self._last_line < self.interval_s:
                return None
            self._last_line = self.clock()
            running = ", ".join(f"{sid} turn {turn} of {limit}" for sid, (turn, limit) in sorted(self.running.items())[:3])
            more = f" and {len(self.running) - 3} more" if len(self.running) > 3 else ""
            return f"{self.line()}; running: {running}{more}"

    def line(self) -> str:
        done, elapsed = self.done, self.clock() - self.started
        counts = ", ".join(f"{n} {name}" for name, n in sorted(self.outcomes.items()))
        text = f"personalens: {done}/{self.total} cases done" + (f" ({counts})" if counts else "") + f" in {_duration(elapsed)}"
        if 0 < done < self.total:
            text += f", about {_duration(elapsed / done * (self.total - done))} left"
        return text
