"""Rate and concurrency limits per model endpoint that hold across all xdist workers.

Each endpoint gets a folder under the run folder, which the controller and every worker share.

``--max-concurrency N``: N slot files; a call holds an exclusive ``flock`` on one while it runs. The files are opened
once a process (a call costs a few system calls: about as much as a semaphore, measured by ``bench/limits.py``).
When every slot is taken, callers queue: one at a time - the head - holds the ``queue`` lock (a blocking ``flock``,
which the kernel hands on when it is released), and waits on the ``bell`` (a named pipe every release writes a byte
to) for a slot to come free, so a freed slot goes to the longest waiting process, not to whoever polls first, and
nobody sleeps between tries. A caller that finds the queue held goes to its end rather than take a slot past it.

``--max-rps R``: one file holding the earliest start of the next call, read and advanced under its lock.

Locks die with their process, so a crashed worker never holds a slot (a crash between freeing a slot and ringing
the bell costs the head at most :data:`RESCAN_S` before it looks again). A wait for a slot or for the rate takes at
most what is left of the deadlines in force (the call's, the scenario's): past it the call is not made.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import select
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..timebox import TimeLimit, nearest_deadline, time_left
from .base import ChatModel, ChatRequest, ChatResponse
from .timeouts import timed_out

#: the longest a queue's head waits on the bell before it looks at the slots again (a bell a crashed process never
#: rang): not a polling interval - a freed slot rings the bell at once
RESCAN_S = 0.25
#: where the run folder's file system has no named pipes (no bell), how long the head waits before it looks again
NO_BELL_S = 0.01


@dataclass(frozen=True)
class Limits:
    max_rps: float | None = None
    max_concurrency: int | None = None

    def __bool__(self) -> bool:
        return self.max_rps is not None or self.max_concurrency is not None


class SharedLimiter:
    def __init__(self, folder: Path, endpoint: str, limits: Limits) -> None:
        self.limits = limits
        self.folder = folder / hashlib.sha256(endpoint.encode()).hexdigest()[:16]
        self.folder.mkdir(parents=True, exist_ok=True)
        self._slots = Slots(self.folder, limits.max_concurrency) if limits.max_concurrency else None
        self._rate = Rate(self.folder / "rate", limits.max_rps) if limits.max_rps else None

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a concurrency slot (if limited), then wait for the rate (if limited)."""
        held = self._slots.acquire() if self._slots is not None else None
        try:
            if self._rate is not None:
                self._rate.wait()
            yield
        finally:
            if held is not None and self._slots is not None:
                self._slots.release(held)

    def close(self) -> None:
        """Close the files this process holds open (its slots are free then)."""
        for part in (self._slots, self._rate):
            if part is not None:
                part.close()


class Slots:
    """``count`` slots shared by every process of the run (see the module's text)."""

    def __init__(self, folder: Path, count: int) -> None:
        self.folder = folder
        self.count = count
        #: this process's threads queue here for a slot first, instead of all contending across processes
        self._local = threading.BoundedSemaphore(count)
        self._lock = threading.Lock()  # this process's slot files: which of them a thread of it holds
        self._held: set[int] = set()
        self._files: list[int] | None = None
        self._probe = self._bell = -1
        #: where this process starts looking, so that processes spread over the slots
        self._first = os.getpid() % count

    def _open(self) -> list[int]:
        with self._lock:
            if self._files is None:
                self._bell = _bell(self.folder / "bell")
                self._probe = _open(self.folder / "queue")
                self._files = [_open(self.folder / f"slot-{i}") for i in range(self.count)]
            return self._files

    def acquire(self) -> int:
        """A slot, held until :meth:`release`; past the nearest deadline, :class:`TimeLimit`."""
        files = self._files if self._files is not None else self._open()
        if not self._local.acquire(timeout=_left()):
            _give_up()
        try:
            found = self._take(files, queue_free=True)
            return found if found is not None else self._queue(files)
        except BaseException:
            self._local.release()
            raise

    def release(self, slot: int) -> None:
        with self._lock:  # not while :meth:`close` closes the files (their numbers could be others' after)
            if self._files is not None:
                fcntl.flock(self._files[slot], fcntl.LOCK_UN)
            self._held.discard(slot)
            if self._bell >= 0:
                with contextlib.suppress(BlockingIOError):  # a full pipe already says "look again"
                    os.write(self._bell, b"\0")
        self._local.release()

    def _take(self, files: list[int], *, queue_free: bool) -> int | None:
        """A free slot, taken; None when every one is held. ``queue_free``: only if no caller is queued (a caller
        at the head of the queue has a free slot first)."""
        with self._lock:
            if queue_free:
                if not _try(self._probe):
                    return None
                fcntl.flock(self._probe, fcntl.LOCK_UN)
            for step in range(self.count):
                slot = (self._first + step) % self.count
                if slot not in self._held and _try(files[slot]):
                    self._held.add(slot)
                    return slot
        return None

    def _queue(self, files: list[int]) -> int:
        """Wait at the queue for a slot: at its head, for the bell. Its own file: a wait given up (the deadline)
        never leaves another thread's lock taken or freed."""
        queue = _open(self.folder / "queue")
        if not _lock_within(queue, _left()):  # the file is the helper's now: it closes it
            _give_up()
        try:
            try:
                while True:
                    found = self._take(files, queue_free=False)
                    if found is not None:
                        return found
                    left = _left()
                    if left is not None and left <= 0:
                        _give_up()
                    self._wait_for_bell(RESCAN_S if left is None else min(left, RESCAN_S))
            finally:
                fcntl.flock(queue, fcntl.LOCK_UN)
        finally:
            os.close(queue)

    def _wait_for_bell(self, limit_s: float) -> None:
        """Until a release rings the bell (or ``limit_s``); the rings so far are taken off it."""
        if self._bell < 0:  # no named pipe where the run folder is: look again soon
            time.sleep(min(limit_s, NO_BELL_S))
            return
        bell = select.poll()  # poll, not select: a descriptor past 1,024 is fine
        bell.register(self._bell, select.POLLIN)
        if bell.poll(limit_s * 1000):
            with contextlib.suppress(BlockingIOError):
                while os.read(self._bell, 4096):
                    pass

    def close(self) -> None:
        with self._lock:
            for fd in (*(self._files or ()), self._probe, self._bell):
                if fd >= 0:
                    os.close(fd)
            self._files, self._probe, self._bell = None, -1, -1
            self._held.clear()


class Rate:
    """At most ``rps`` call starts a second across the run's processes: the earliest start of the next call, in
    one file read and advanced under its lock."""

    def __init__(self, path: Path, rps: float) -> None:
        self.path = path
        self.rps = rps
        self._file = -1
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            if self._file < 0:
                self._file = _open(self.path)
            fcntl.flock(self._file, fcntl.LOCK_EX)  # held for a read and a write by whoever has it
            try:
                text = os.pread(self._file, 64, 0).strip()
                now = time.time()
                start = max(now, float(text) if text else now)
                os.pwrite(self._file, repr(start + 1.0 / self.rps).ljust(32).encode(), 0)
            finally:
                fcntl.flock(self._file, fcntl.LOCK_UN)
        if start > now:
            left = time_left()
            if left is not None and start - now > left:
                _give_up()
            time.sleep(start - now)

    def close(self) -> None:
        with self._lock:
            if self._file >= 0:
                os.close(self._file)
            self._file = -1


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def _bell(path: Path) -> int:
    """The bell, a named pipe opened to read and write (never blocks, never ENXIO); -1 where the file system has
    no named pipes."""
    try:
        with contextlib.suppress(FileExistsError):
            os.mkfifo(path)
        return os.open(path, os.O_RDWR | os.O_NONBLOCK)
    except OSError:
        return -1


def _try(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _lock_within(fd: int, left: float | None) -> bool:
    """An exclusive lock on ``fd`` within ``left`` seconds (None: however long it takes): a blocking ``flock`` in a
    helper thread, so that the kernel hands the lock on in turn and the wait still ends at the deadline. False: given
    up, and ``fd`` is the helper's from then on - it frees the lock it gets after that and closes the file (closed
    here, the number could be another file's by then)."""
    if _try(fd):
        return True
    got, state = threading.Event(), {"given_up": False}
    guard = threading.Lock()

    def take() -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with guard:
            if state["given_up"]:
                os.close(fd)  # the lock goes with it
                return
            got.set()

    threading.Thread(target=take, name="personalens-limit-queue", daemon=True).start()
    if got.wait(None if left is None else max(0.0, left)):
        return True
    with guard:
        if got.is_set():
            return True
        state["given_up"] = True
    return False


def _left() -> float | None:
    left = time_left()
    return None if left is None else max(0.0, left)


class LimitedChat:
    """A chat model whose calls go through a :class:`SharedLimiter`."""

    def __init__(self, model: ChatModel, limiter: SharedLimiter) -> None:
        self.model = model
        self.limiter = limiter

    def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            with self.limiter.slot():
                return self.model.complete(request)
        except TimeLimit as exc:
            if exc.deadline is None:
                raise
            raise timed_out("no turn at the endpoint's limits (--max-rps, --max-concurrency)", exc.deadline,
                            model=self.model.spec) from None

    def close(self) -> None:
        self.model.close()
        self.limiter.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def _give_up() -> None:
    """A wait for a slot or for the rate ran past the nearest deadline: the call is not made."""
    nearest = nearest_deadline()
    raise TimeLimit(nearest.limit_s if nearest else 0.0, nearest)


def endpoint_of(model: ChatModel) -> str:
    """What a limit is counted per: the base URL of an HTTP model, the model id on Bedrock."""
    return str(getattr(model, "base_url", None) or getattr(model, "model_id", None) or getattr(model, "spec", "model"))
