"""``kind = "command"``: the bot is a subprocess speaking the turn contract as JSON lines.

Each turn, one request object goes to the bot's stdin as one line; the bot answers with
one response object on one line of stdout. The process is started on first use and kept
for the whole run (one per pytest process); it may log to stderr, whose last lines are
shown when it fails. If it dies, that is an error of the turn that finds it dead, and the
next turn starts it afresh. Closing its stdin at the end asks it to exit.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..errors import ModelError
from ..llm.entries import expand_env
from .base import AssistantInput, AssistantReply
from .contract import ContractError, parse_reply, request_payload
from .entries import CommandEntry
from .setup_check import AssistantSetupError

_EOF = object()


class CommandAssistant:
    def __init__(self, name: str, entry: CommandEntry, root: Path) -> None:
        self.name = name
        self.entry = entry
        self.context = entry.switches()
        self.cwd = root / entry.cwd if entry.cwd else root
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[object] = queue.Queue()
        self._turns = threading.Lock()
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")

    # -- the process -------------------------------------------------------------------
    def _executable(self) -> str:
        program = self.entry.command[0]
        if os.sep in program:  # a path: relative to the entry's working folder
            candidate = self.cwd / program
        else:
            found = shutil.which(program)
            candidate = Path(found) if found else self.cwd / program
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            raise AssistantSetupError(f"command {program!r} not found or not executable")
        return str(candidate)

    def _start(self) -> subprocess.Popen[str]:
        env = {**os.environ, **{key: expand_env(value) for key, value in self.entry.env.items()}}
        process = subprocess.Popen(
            [self._executable(), *self.entry.command[1:]], cwd=self.cwd, env=env, text=True, bufsize=1,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, encoding="utf-8",
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(process, self._lines), daemon=True).start()
        self._process = process
        return process

    @staticmethod
    def _pump(process: subprocess.Popen[str], lines: queue.Queue[object]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(_EOF)

    def _stderr_tail(self, lines: int = 5) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        tail = [line.strip() for line in self._stderr.read().splitlines() if line.strip()][-lines:]
        self._stderr.seek(0, 2)
        return " | ".join(tail) or "(nothing on stderr)"

    def check(self) -> None:
        """Start the bot and see it is still running a moment later; then stop it again."""
        process = self._start()
        time.sleep(0.5)
        code = process.poll()
        self.close()
        if code is not None:
            raise AssistantSetupError(f"the command exited at once with code {code}; stderr: {self._stderr_tail()}")

    # -- turns ---------------------------------------------------------------------------
    def reply(self, turn: AssistantInput) -> AssistantReply:
        """One turn. A bot that died since its last reply is reported once, then started afresh.
        Turns of concurrent scenarios (``--concurrency``) take turns on the one process."""
        with self._turns:
            return self._reply(turn)

    def _reply(self, turn: AssistantInput) -> AssistantReply:
        if self._process is not None and self._process.poll() is not None:
            raise self._died(self._process)
        process = self._process or self._start()
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(request_payload(turn), ensure_ascii=False) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died(process) from None
        try:
            line = self._lines.get(timeout=self.entry.timeout_s)
        except queue.Empty:
            self.close()
            raise ModelError(f"no reply line within {self.entry.timeout_s:.0f} s (the bot was stopped)",
                             model=self.name, retryable=True) from None
        if line is _EOF:
            raise self._died(process)
        try:
            return parse_reply(json.loads(str(line)))
        except json.JSONDecodeError:
            raise ModelError(f"the bot wrote a line that is not JSON: {str(line).strip()[:200]!r} "
                             "(log to stderr, not stdout)", model=self.name) from None
        except ContractError as exc:
            raise ModelError(f"the bot's answer breaks the turn contract: {exc}", model=self.name) from None

    def _died(self, process: subprocess.Popen[str]) -> ModelError:
        try:
            code = process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._process = None
        return ModelError(f"the bot process exited (code {code}); stderr: {self._stderr_tail()}", model=self.name)

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
