"""The bot of a gate run that is a server: started from the pull request's checkout with ``--start``, ready
when ``--health-url`` answers, stopped (its whole process group) when the run ends. A bot that exits or does
not answer in time is one line with the last lines of its log - never a run against nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from ..errors import GateError

#: each try of the health URL
PROBE_TIMEOUT_S = 2.0
#: the longest wait for the bot's process group after SIGTERM before SIGKILL
STOP_GRACE_S = 5.0


def _tail(log: Path, lines: int = 5) -> str:
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - 4096))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    last = [line for line in text.splitlines() if line.strip()][-lines:]
    return f"; last lines of {log}: " + " | ".join(last) if last else f"; {log} is empty"


def _answers(url: str) -> str | None:
    """None when the URL answers 2xx or 3xx; else what happened."""
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:  # noqa: S310 (a URL the team gave)
            return None if response.status < 400 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"


class StartedBot:
    """``with StartedBot(command, cwd=..., log=..., health_url=..., timeout_s=...)``: the bot, up and answering."""

    def __init__(self, command: str | None, *, cwd: Path, log: Path, health_url: str | None, timeout_s: float) -> None:
        self.command, self.cwd, self.log, self.health_url, self.timeout_s = command, cwd, log, health_url, timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> StartedBot:
        if self.command:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("wb") as out:
                self.process = subprocess.Popen(self.command, shell=True, cwd=self.cwd, stdout=out,  # noqa: S602
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                start_new_session=True)
        if self.health_url:
            self._wait()
        return self

    def _wait(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        problem = "no answer"
        while True:
            if self.process is not None and self.process.poll() is not None:
                self.stop()
                raise GateError(f"--start: the bot exited (status {self.process.returncode}) before "
                                f"--health-url {self.health_url} answered{_tail(self.log)}")
            problem = _answers(self.health_url or "") or ""
            if not problem:
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise GateError(f"--health-url {self.health_url}: no good answer within {self.timeout_s:g} s "
                                f"(--start-timeout; last try: {problem}){_tail(self.log) if self.command else ''}")
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None and not group_alive(process.pid):
            return
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=wait)
                if not group_alive(process.pid):
                    break
            except subprocess.TimeoutExpired:
                continue

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (a zombie no init has reaped yet does not count)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False
