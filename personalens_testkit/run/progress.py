"""Progress of a live run: cases done of the total, their outcomes, an estimate of the time left, and the
turn each running case has reached. A live scenario takes minutes, so a run says how it is going - a
line when a case finishes (at most one every few seconds) and, between finishes, which cases are running
and at which turn. A pure replay (nothing live) takes seconds and stays quiet.

The lines between finishes come from a thread of the controlling process (:class:`Ticker`), written whole
to a duplicate of the terminal's file descriptor taken while pytest's capture is suspended: pytest's capture
of a running case cannot hold them back. Under xdist each worker publishes its running cases' turns in a
small file of a folder the controller made (:class:`TurnChannel`, :class:`Publisher`), which the controller
reads before a line is due."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping

#: seconds between progress lines, for every run (tests use a short one); unset: 5 on a terminal, else 30
INTERVAL_ENV = "PERSONALENS_PROGRESS_INTERVAL_S"
#: a running case: (turns done, turn limit - 0 before its opening is done -, when it started on the monotonic clock,
#: what it waits on now - "" for nothing told -, and since when)
Case = tuple[int, int, float, str, float]


def interval_s(tty: bool, environ: Mapping[str, str] = os.environ) -> float:
    """The seconds between progress lines: ``PERSONALENS_PROGRESS_INTERVAL_S``, else 5 on a terminal, 30 off one."""
    with contextlib.suppress(ValueError):
        value = float(environ.get(INTERVAL_ENV, ""))
        if value > 0:
            return value
    return 5.0 if tty else 30.0


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def scenario_of(case: str) -> str:
    """The scenario id of a case id or node id (``...[user7-SD-Alarm-task-1-r2]`` -> ``user7-SD-Alarm-task-1``)."""
    return case.split("[")[-1].rstrip("]").rsplit("-r", 1)[0]


class Running:
    """The cases running in one process, the turn each has reached and what each waits on, as they tell it (any
    thread; a :class:`~personalens_testkit.callsite.ProgressListener`). A case waits on its latest step still under
    way (its parallel calls end in any order). The empty scenario id is the run itself: what it waits on before or
    between cases (the embedded models starting), shown while it lasts."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.version = 0
        self._cases: dict[str, tuple[int, int, float]] = {}  # turns done, turn limit, started
        self._steps: dict[str, list[tuple[str, float]]] = {}  # what each waits on, since when: the latest last
        self._lock = threading.Lock()

    def on_turn(self, scenario_id: str, turn: int, max_turns: int) -> None:
        with self._lock:
            started = self._cases[scenario_id][2] if scenario_id in self._cases else self.clock()
            self._cases[scenario_id] = (turn, max_turns, started)
            self.version += 1

    def step_started(self, scenario_id: str, doing: str) -> None:
        with self._lock:
            now = self.clock()
            self._cases.setdefault(scenario_id, (0, 0, now))
            self._steps.setdefault(scenario_id, []).append((doing, now))
            self.version += 1

    def step_ended(self, scenario_id: str, doing: str) -> None:
        with self._lock:
            steps = self._steps.get(scenario_id, [])
            for index in range(len(steps) - 1, -1, -1):
                if steps[index][0] == doing:
                    del steps[index]
                    self.version += 1
                    break
            if not steps and not scenario_id:
                self._forget("")

    def finish(self, case: str) -> None:
        with self._lock:
            self._forget(scenario_of(case))

    def _forget(self, scenario_id: str) -> None:
        self._steps.pop(scenario_id, None)
        if self._cases.pop(scenario_id, None) is not None:
            self.version += 1

    def snapshot(self) -> dict[str, Case]:
        with self._lock:
            return {sid: (*case, *(self._steps.get(sid) or [("", case[2])])[-1]) for sid, case in self._cases.items()}


def describe_case(scenario_id: str, case: Case, now: float) -> str:
    """``user7-SD-Alarm-task-1 turn 14 of 20, waiting 3 min for the assistant (reply, turn 15)``; the run's own
    step (the empty id) is only what it waits on."""
    turn, limit, _, doing, since = case
    where = (f"{scenario_id} turn {turn} of {limit}" if limit else f"{scenario_id} starting") if scenario_id else ""
    waiting = f"waiting {_duration(now - since)} for {doing}" if doing else ""
    return ", ".join(part for part in (where, waiting) if part)


class Progress:
    def __init__(self, total: int, *, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.interval_s = interval_s
        self.clock = clock
        self.started = clock()
        self.outcomes: Counter[str] = Counter()
        #: the cases running in this process; those of the xdist workers, by worker (their published snapshots)
        self.running = Running(clock)
        self.remote: dict[str, dict[str, Case]] = {}
        self._finished_at: dict[str, float] = {}
        self._last_line = clock()
        self._lock = threading.Lock()

    @property
    def done(self) -> int:
        return sum(self.outcomes.values())

    def finished(self, scenario_id: str, outcome: str) -> str | None:
        """Record a finished case; the progress line when one is due (the last case always gets one)."""
        self.running.finish(scenario_id)
        with self._lock:
            self._finished_at[scenario_of(scenario_id)] = self.clock()
            self.outcomes[outcome] += 1
            due = self.done >= self.total or self.clock() - self._last_line >= self.interval_s
            if due:
                self._last_line = self.clock()
            return self.line() if due else None

    def due(self) -> bool:
        return self.clock() - self._last_line >= self.interval_s

    def cases_running(self) -> list[tuple[str, Case]]:
        """Every running case, the oldest first: this process's and the workers' (not those finished since)."""
        cases = dict(self.running.snapshot())
        for snapshot in self.remote.values():
            cases.update(snapshot)
        with self._lock:
            finished = dict(self._finished_at)
        alive = [(sid, case) for sid, case in cases.items() if case[2] > finished.get(sid, float("-inf"))]
        return sorted(alive, key=lambda item: (item[1][2], item[0]))

    def tick(self) -> str | None:
        """Between finishes: which cases are running and where, when a line is due and one is running."""
        if not self.due():
            return None
        running = self.cases_running()
        with self._lock:
            if not running or self.clock() - self._last_line < self.interval_s:
                return None
            self._last_line = now = self.clock()
            shown = "; ".join(describe_case(sid, case, now) for sid, case in running[:3])
            more = f" and {len(running) - 3} more" if len(running) > 3 else ""
            return f"{self.line()}; running: {shown}{more}"

    def line(self) -> str:
        done, elapsed = self.done, self.clock() - self.started
        counts = ", ".join(f"{n} {name}" for name, n in sorted(self.outcomes.items()))
        text = f"personalens: {done}/{self.total} cases done" + (f" ({counts})" if counts else "") + f" in {_duration(elapsed)}"
        if 0 < done < self.total:
            text += f", about {_duration(elapsed / done * (self.total - done))} left"
        return text


class TerminalLines:
    """Whole lines to a duplicate of the standard output's descriptor, taken while pytest's capture is suspended
    (then it is the terminal pytest writes to): one write each, under a lock, unbuffered, so the capture of a
    running case cannot hold them back. A line that comes while pytest's current line has text (its progress
    dots) starts a line of its own. Raises AttributeError, OSError or ValueError when the standard output has no
    descriptor (an in-process run under another pytest's capture)."""

    def __init__(self, writer: Any, stdout: Any) -> None:
        self.writer = writer
        self.fd = os.dup(stdout.fileno())
        self._lock = threading.Lock()
        self._width = 0  # pytest's current line's width when the last line was written: nothing of pytest's since

    def __call__(self, text: str) -> None:
        width = getattr(self.writer, "width_of_current_line", 0)
        data = (("\n" if width and width != self._width else "") + text + "\n").encode("utf-8", "replace")
        with self._lock, contextlib.suppress(OSError):
            self._width = width
            while data:
                data = data[os.write(self.fd, data):]

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            os.close(self.fd)


class TurnChannel:
    """xdist workers -> controller: a folder with one small JSON file per worker, its running cases."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def create(cls) -> TurnChannel:
        return cls(Path(tempfile.mkdtemp(prefix="personalens-progress-")))

    def publish(self, worker: str, cases: dict[str, Case]) -> None:
        path = self.folder / f"{worker}.json"
        with contextlib.suppress(OSError):
            path.with_suffix(".tmp").write_text(json.dumps(cases), encoding="utf-8")
            os.replace(path.with_suffix(".tmp"), path)

    def read(self) -> dict[str, dict[str, Case]]:
        found: dict[str, dict[str, Case]] = {}
        with contextlib.suppress(OSError):
            for path in self.folder.glob("*.json"):
                with contextlib.suppress(OSError, ValueError, TypeError):
                    found[path.stem] = {sid: (int(t), int(m), float(s), str(d), float(w)) for sid, (t, m, s, d, w) in
                                        json.loads(path.read_text(encoding="utf-8")).items()}
        return found

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class _Loop:
    """A daemon thread calling ``step`` every ``period_s`` seconds until closed."""

    def __init__(self, step: Callable[[], None], period_s: float, name: str) -> None:
        self.step, self.period_s = step, period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.step()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)


class Publisher(_Loop):
    """An xdist worker's running cases, published when they changed (at most every half second)."""

    def __init__(self, channel: TurnChannel, worker: str, running: Running, period_s: float = 0.5) -> None:
        self.channel, self.worker, self.running = channel, worker, running
        self._published = -1
        super().__init__(self._publish, period_s, "personalens-progress-publish")

    def _publish(self) -> None:
        version = self.running.version
        if version != self._published:
            self._published = version
            self.channel.publish(self.worker, self.running.snapshot())

    def close(self) -> None:
        super().close()
        self.channel.publish(self.worker, {})


class Ticker(_Loop):
    """The controlling process's lines between finishes: which cases run and at which turn, when one is due."""

    def __init__(self, progress: Progress, write: Callable[[str], None], channel: TurnChannel | None = None) -> None:
        self.progress, self.write, self.channel = progress, write, channel
        super().__init__(self._tick, min(1.0, progress.interval_s / 4), "personalens-progress")

    def _tick(self) -> None:
        if not self.progress.due():
            return
        if self.channel is not None:
            self.progress.remote = self.channel.read()
        text = self.progress.tick()
        if text is not None:
            self.write(text)
