"""``kind = "python"``: the bot is a Python callable ``package.module:function``, sync or async.

It is called with the turn contract's request (a dict) and returns the reply string or the
contract's response dict. Whatever it raises - any exception, ``KeyboardInterrupt``,
``asyncio.CancelledError``, ``SystemExit``, another ``BaseException`` - is the bot's failure: an error
row of the case, never the run's end.

Each call runs in a thread of its own, bounded by the entry's ``timeout_s`` (and by what is left
of the scenario's time limit): a callable that
hangs (sync or async) makes its turn an error after that time, and is abandoned - it may go on
running in the background, but nothing waits for it, and Ctrl-C still ends the run.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Protocol

from ..errors import ContractError, ModelError
from ..llm.timeouts import timed_out
from ..timebox import TimeLimit, call_by_deadline
from .base import AssistantInput, AssistantReply, ContextSwitches
from .contract import parse_reply, request_payload
from .setup_check import AssistantSetupError


def load_callable(target: str, search_path: list[Path]) -> Callable[..., Any]:
    module_name, _, attribute = target.partition(":")
    for folder in reversed(search_path):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise AssistantSetupError(f"cannot import {module_name!r} ({exc})") from None
    except Exception as exc:  # the bot's own module failed while importing
        raise AssistantSetupError(f"importing {module_name!r} failed ({type(exc).__name__}: {exc})") from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise AssistantSetupError(f"{module_name!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AssistantSetupError(f"{target!r} is not callable")
    return obj


class PythonBotEntry(Protocol):
    """What a python bot is run from: a ``kind = "python"`` entry (:mod:`.kinds.python`)."""

    callable: str
    path: list[str]
    timeout_s: float
    max_reply_chars: int

    def switches(self) -> ContextSwitches: ...


class _Raised:
    """What the bot's callable raised, carried out of its thread as a value (never raised in the run's own)."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class PythonAssistant:
    def __init__(self, name: str, entry: PythonBotEntry, root: Path) -> None:
        self.name = name
        self.entry = entry
        self.context = entry.switches()
        self._function = load_callable(entry.callable, [root / p for p in entry.path])
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turns = threading.Lock()

    def check(self) -> None:
        """Loading the callable (in the constructor) is the check."""

    def reply(self, turn: AssistantInput) -> AssistantReply:
        """One turn; concurrent scenarios (``--concurrency``) call the bot one at a time (its event
        loop, and the bot's own state, are not shared between threads)."""
        with self._turns:
            return self._reply(turn)

    def _call(self, request: dict[str, Any]) -> Any:
        """The bot's answer, or what it raised as :class:`_Raised` - any exception, ``KeyboardInterrupt``,
        ``asyncio.CancelledError``, ``SystemExit`` and pytest's outcomes included: the call runs in a thread of its own
        (``call_by_deadline``), where no signal is delivered, so whatever comes out of it is the bot's."""
        try:
            answer = self._function(request)
            if inspect.isawaitable(answer):
                if self._loop is None:
                    self._loop = asyncio.new_event_loop()
                answer = self._loop.run_until_complete(answer)
        except BaseException as exc:  # noqa: BLE001 - the bot's failure, whatever it is (see above)
            return _Raised(exc)
        return answer

    def _reply(self, turn: AssistantInput) -> AssistantReply:
        request = request_payload(turn)
        try:
            answer = call_by_deadline(lambda: self._call(request), self.entry.timeout_s, "timeout_s",
                                      thread=f"bot-{self.name}")
        except TimeLimit as exc:
            self._loop = None  # it may still be running the abandoned call: the next one gets its own
            limit = exc.deadline
            if limit is not None and limit.final:  # the scenario's time ran out first
                raise timed_out(f"{self.entry.callable} did not reply", limit, model=self.name) from None
            raise ModelError(f"{self.entry.callable} did not reply within {exc.seconds:g} s (the call was "
                             "abandoned)", model=self.name) from None
        if isinstance(answer, _Raised):  # a bot calling sys.exit() or raising KeyboardInterrupt fails its turn
            exc = answer.exc
            raise ModelError(f"{self.entry.callable} raised {type(exc).__name__}: {exc}", model=self.name) from exc
        try:
            return parse_reply(answer, self.entry.max_reply_chars)
        except ContractError as exc:
            raise ContractError(f"{self.entry.callable} broke the turn contract: {exc}", model=self.name) from None

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None
