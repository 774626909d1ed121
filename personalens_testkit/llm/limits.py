"""Rate and concurrency limits per model endpoint that hold across all xdist workers.

Each endpoint gets a folder of lock files under the run folder, which the controller and
every worker share: ``--max-concurrency N`` is N slot files (a call holds an exclusive
``flock`` on one while it runs), ``--max-rps R`` is one file holding the earliest start time
of the next call (read and advanced under its lock). Locks die with their process, so a
crashed worker never holds a slot. A wait for a slot or for the rate takes at most what is left
of the deadlines in force (the call's, the scenario's): past it the call is not made.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..timebox import TimeLimit, nearest_deadline, time_left
from .base import ChatModel, ChatRequest, ChatResponse
from .timeouts import timed_out


@dataclass(frozen=True)
class Limits:
    max_rps: float | None = None
    max_concurrency: int | None = None

    def __bool__(self) -> bool:
        return self.max_rps is not None or self.max_concurrency is not None


class SharedLimiter:
    def __init__(self, folder: Path, endpoint: str, limits: Limits) -> None:
        self.limits = limits
        #: this process's threads queue here for a slot, instead of all polling the slot files
        self._local = threading.BoundedSemaphore(limits.max_concurrency) if limits.max_concurrency else None
        self.folder = folder / hashlib.sha256(endpoint.encode()).hexdigest()[:16]
        self.folder.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a concurrency slot (if limited), then wait for the rate (if limited)."""
        with contextlib.ExitStack() as stack:
            if self.limits.max_concurrency and self._local is not None:
                left = time_left()
                if not self._local.acquire(timeout=None if left is None else max(0.0, left)):
                    _give_up()
                stack.callback(self._local.release)
                stack.enter_context(self._concurrency_slot(self.limits.max_concurrency))
            if self.limits.max_rps:
                self._wait_for_rate(self.limits.max_rps)
            yield

    @contextlib.contextmanager
    def _concurrency_slot(self, slots: int) -> Iterator[None]:
        handles = [open(self.folder / f"slot-{i}", "a+") for i in range(slots)]
        try:
            while True:
                for handle in handles:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    try:
                        yield
                    finally:
                        fcntl.flock(handle, fcntl.LOCK_UN)
                    return
                left = time_left()
                if left is not None and left <= 0:
                    _give_up()
                time.sleep(0.005)
        finally:
            for handle in handles:
                handle.close()

    def _wait_for_rate(self, rps: float) -> None:
        with open(self.folder / "rate", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.seek(0)
                text = handle.read().strip()
                now = time.time()
                start = max(now, float(text) if text else now)
                handle.seek(0)
                handle.truncate()
                handle.write(repr(start + 1.0 / rps))
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        if start > now:
            left = time_left()
            if left is not None and start - now > left:
                _give_up()
            time.sleep(start - now)


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

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def _give_up() -> None:
    """A wait for a slot or for the rate ran past the nearest deadline: the call is not made."""
    nearest = nearest_deadline()
    raise TimeLimit(nearest.limit_s if nearest else 0.0, nearest)


def endpoint_of(model: ChatModel) -> str:
    """What a limit is counted per: the base URL of an HTTP model, the model id on Bedrock."""
    return str(getattr(model, "base_url", None) or getattr(model, "model_id", None) or getattr(model, "spec", "model"))
