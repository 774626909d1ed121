"""``kind = "command"``: the bot is a subprocess speaking the turn contract as JSON lines.

Each turn, one request object goes to the bot's stdin as one line, with an ``id``; the bot
answers with one response object on one line of stdout, echoing that ``id``. The process is
started on first use and kept for the whole run (one per pytest process); it may log to
stderr, whose last lines are shown when it fails.

No reply is ever read as the answer to another request:

- lines already waiting before a request is sent cannot answer it: they are skipped;
- a line that is not a JSON object (a log line on stdout) is skipped, and noted in the row;
- a response whose ``id`` is not the request's, a line that is not UTF-8 or is too long, a
  response that breaks the contract, or no response in time: the turn is an error and the
  bot is stopped (killed), so nothing it might still write can reach a later request; the
  next turn starts it afresh. A bot that died is reported once, then started afresh too.

Closing its stdin at the end asks it to exit.

Under ``personalens gate`` (a ``sandbox``), the process runs under the gate's user id for the bot with the
environment the gate built (the entry's ``env`` on top), never with this process's: no model credential.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Optional, Protocol

from .. import timebox, untrusted_json
from ..errors import ContractError, ModelError
from ..llm.timeouts import timed_out
from ..llm.env_refs import expand_env
from ..untrusted_json import MAX_ANSWER_VALUES
from .base import AssistantInput, AssistantReply, ContextSwitches
from .contract import max_reply_bytes, parse_reply, request_payload
from .setup_check import AssistantSetupError

if TYPE_CHECKING:
    from .sandbox import Sandbox

_EOF = object()
#: request ids: unique in this process
_ids = itertools.count(1)


class CommandBotEntry(Protocol):
    """What a command bot is run from: a ``kind = "command"`` entry (:mod:`.kinds.command`)."""

    command: list[str]
    cwd: Optional[str]
    env: dict[str, str]
    timeout_s: float
    max_reply_chars: int

    def switches(self) -> ContextSwitches: ...


@dataclass(frozen=True)
class _TooLong:
    """A line longer than the limit (its bytes were read and dropped)."""

    size: int


class CommandAssistant:
    def __init__(self, name: str, entry: CommandBotEntry, root: Path, *, sandbox: Sandbox | None = None) -> None:
        self.name = name
        self.entry = entry
        self.sandbox = sandbox
        self.context = entry.switches()
        self.cwd = root / entry.cwd if entry.cwd else root
        self._process: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[object] = queue.Queue()
        self._turns = threading.Lock()
        self._stderr = tempfile.TemporaryFile("w+b")
        self._line_limit = max_reply_bytes(entry.max_reply_chars)

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

    def _start(self) -> subprocess.Popen[bytes]:
        own = {key: expand_env(value) for key, value in self.entry.env.items()}
        argv = [self._executable(), *self.entry.command[1:]]
        if self.sandbox is not None:
            process = self.sandbox.popen(argv, cwd=self.cwd, env=self.sandbox.environment(extra=own),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        else:
            process = subprocess.Popen(argv, cwd=self.cwd, env={**os.environ, **own},  # noqa: S603
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        self._lines = queue.Queue()
        assert process.stdout is not None
        threading.Thread(target=self._pump, args=(process.stdout, self._lines, self._line_limit),
                         daemon=True, name=f"personalens-bot-{self.name}").start()
        self._process = process
        return process

    @staticmethod
    def _pump(stdout: IO[bytes], lines: queue.Queue[object], limit: int) -> None:
        """Every line of the bot's stdout, as bytes; a line over ``limit`` bytes as :class:`_TooLong`."""
        while True:
            line = stdout.readline(limit + 1)
            if not line:
                lines.put(_EOF)
                return
            if len(line) > limit and not line.endswith(b"\n"):
                size = len(line)
                while line and not line.endswith(b"\n"):  # read past the rest of it, keeping none
                    line = stdout.readline(limit)
                    size += len(line)
                lines.put(_TooLong(size))
            else:
                lines.put(line)

    def _stderr_tail(self, lines: int = 5) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace")
        self._stderr.seek(0, 2)
        tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
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
        """One turn. Turns of concurrent scenarios (``--concurrency``) take turns on the one process."""
        with self._turns:
            return self._reply(turn)

    def _reply(self, turn: AssistantInput) -> AssistantReply:
        if self._process is not None and self._process.poll() is not None:
            raise self._died(self._process)
        process = self._process or self._start()
        skipped = self._waiting_lines()
        request_id = str(next(_ids))
        line = json.dumps({"id": request_id, **request_payload(turn)}, ensure_ascii=False) + "\n"
        assert process.stdin is not None
        try:
            process.stdin.write(line.encode("utf-8"))
            process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died(process) from None
        try:
            reply = self._read_reply(process, request_id, skipped)
        except ContractError:
            self._stop()  # whatever it writes next must not reach a later request
            raise
        if skipped:
            shown = "; ".join(repr(text) for text in skipped[:3]) + (" ..." if len(skipped) > 3 else "")
            reply = reply.with_note(f"the bot wrote {len(skipped)} line(s) on stdout that are not responses "
                                    f"(skipped; log to stderr): {shown}")
        return reply

    def _waiting_lines(self) -> list[str]:
        """Lines written since the last response (before this request existed): none can answer it."""
        skipped = []
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                return skipped
            if item is _EOF:
                self._lines.put(_EOF)
                return skipped
            skipped.append(_shown_line(item))

    def _read_reply(self, process: subprocess.Popen[bytes], request_id: str, skipped: list[str]) -> AssistantReply:
        with timebox.deadline(self.entry.timeout_s, "timeout_s"):
            limit = timebox.nearest_deadline()  # its own, or the scenario's if that comes first
        assert limit is not None
        while True:
            try:
                item = self._lines.get(timeout=max(0.0, limit.left()))
            except queue.Empty:
                self._stop()
                if limit.final:
                    raise timed_out("no reply line", limit, model=self.name) from None
                raise ModelError(f"no reply line within {limit.limit_s:g} s (the bot was stopped)",
                                 model=self.name) from None  # a bot's time limit is its last word: not retried
            if item is _EOF:
                raise self._died(process)
            if isinstance(item, _TooLong):
                raise ContractError(f"the bot wrote a line of {item.size:,} bytes: more than a reply of "
                                    f"max_reply_chars={self.entry.max_reply_chars:,} characters can take",
                                    model=self.name)
            assert isinstance(item, bytes)
            try:
                text = item.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ContractError(f"the bot wrote a line that is not UTF-8 (byte 0x{item[exc.start]:02x} at "
                                    f"position {exc.start}): {_shown_line(item)}", model=self.name) from None
            try:
                answer = untrusted_json.loads(text, max_values=MAX_ANSWER_VALUES)
            except untrusted_json.UntrustedJsonError as exc:
                raise ContractError(f"the bot wrote an answer that cannot be read one way: {exc}: {_shown_line(item)}",
                                    model=self.name) from None
            except ValueError:
                answer = None
            if not isinstance(answer, dict):
                if text.strip():
                    skipped.append(_shown_line(item))
                continue
            if "id" in answer and answer["id"] != request_id:
                raise ContractError(f"the response's id {answer['id']!r} is not the request's id {request_id!r} "
                                    "(an answer to another request)", model=self.name)
            try:
                return parse_reply(answer, self.entry.max_reply_chars)
            except ContractError as exc:
                raise ContractError(f"the bot's answer breaks the turn contract: {exc}", model=self.name) from None

    def _died(self, process: subprocess.Popen[bytes]) -> ModelError:
        try:
            code = process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._process = None
        return ModelError(f"the bot process exited (code {code}); stderr: {self._stderr_tail()}", model=self.name)

    def _stop(self) -> None:
        """Kill the bot at once (after a protocol error or a time-out); the next turn starts it afresh."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=5)

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


def _shown_line(item: object) -> str:
    if isinstance(item, _TooLong):
        return f"<a line of {item.size:,} bytes>"
    text = bytes(item).decode("utf-8", "replace").strip()  # type: ignore[arg-type]
    return text if len(text) <= 120 else text[:120] + "..."
