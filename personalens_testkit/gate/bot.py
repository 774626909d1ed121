"""The bot of a gate run that is a server: started from the pull request's checkout with ``--start``, under the
run's :class:`~personalens_testkit.assistants.sandbox.Sandbox` (its user id and built environment), ready when
``--health-url`` answers, stopped (its whole process group) when the run ends. A bot that exits or does not
answer in time is one line with the last lines of its log - never a run against nothing.

Its output reaches ``bot.log`` through the gate: redacted line by line in every spelling the redaction knows
(the bot's own secrets named with ``--bot-env`` too), and at most :data:`MAX_LOG_BYTES` of it (a bot that
prints without end fills no disk)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO

from ..errors import GateError
from ..secrets import scrub_text, secret_values
from ..assistants.sandbox import Sandbox

#: each try of the health URL
PROBE_TIMEOUT_S = 2.0
#: the longest wait for the bot's process group after SIGTERM before SIGKILL
STOP_GRACE_S = 5.0
#: the most of the bot's output bot.log keeps (the rest is counted, not written)
MAX_LOG_BYTES = 8 << 20
#: what is read at once of the output past the limit (counted only)
LOG_CHUNK_BYTES = 64 << 10


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

    def __init__(self, command: str | None, *, cwd: Path, log: Path, health_url: str | None, timeout_s: float,
                 sandbox: Sandbox | None = None) -> None:
        self.command, self.cwd, self.log, self.health_url, self.timeout_s = command, cwd, log, health_url, timeout_s
        self.sandbox = sandbox or Sandbox()
        self.process: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None

    def __enter__(self) -> StartedBot:
        if self.command:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            self.process = self.sandbox.popen(["/bin/sh", "-c", self.command], cwd=self.cwd,
                                              env=self.sandbox.environment(), stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              start_new_session=True)
            assert self.process.stdout is not None
            self._pump = threading.Thread(target=copy_log, args=(self.process.stdout, self.log), daemon=True,
                                          name="personalens-gate-bot-log")
            self._pump.start()
        if self.health_url:
            self._wait()
        return self

    def _wait(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        problem = "no answer"
        while True:
            if self.process is not None and self.process.poll() is not None:
                self.stop()
                self.flush()
                raise GateError(f"--start: the bot exited (status {self.process.returncode}) before "
                                f"--health-url {self.health_url} answered{_tail(self.log)}")
            problem = _answers(self.health_url or "") or ""
            if not problem:
                return
            if time.monotonic() >= deadline:
                self.stop()
                self.flush()
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
        self.sandbox.end_all()
        self.flush()

    def flush(self, timeout_s: float = STOP_GRACE_S) -> None:
        """Wait for the log's last lines (the pipe ends once every process holding it has ended)."""
        if self._pump is not None:
            self._pump.join(timeout_s)


def copy_log(source: IO[bytes], log: Path, limit: int = MAX_LOG_BYTES) -> None:
    """The bot's output into ``log``: each whole line redacted (the gate's secrets and the bot's own, in every
    spelling the redaction knows), at most ``limit`` bytes of whole lines, then one line with the count of what
    was left out (never a piece of a line: a secret cut in two would pass redaction)."""
    written = dropped = 0
    secrets = secret_values()
    with log.open("wb") as out:
        while True:
            room = limit - written
            line = source.readline(room + 1) if room > 0 else source.read(LOG_CHUNK_BYTES)
            if not line:
                break
            text = scrub_text(line, secrets) if room > 0 else b""
            if room <= 0 or len(line) > room or len(text) > room:
                dropped += len(line)
                written = limit  # nothing more is written, only counted
                continue
            out.write(text)
            out.flush()
            written += len(text)
        if dropped:
            out.write(f"\n[personalens gate: {dropped:,} more bytes of the bot's output left out of this log]\n"
                      .encode())


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
