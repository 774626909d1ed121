"""Which model or bot call is being made, in this thread: the one piece of context the layers share.

The agents set it around each call (:func:`~personalens_testkit.llm.calling.make_call`); the
replay layer reads it to label a recorded request and to explain a miss, and installs an
explainer that turns its own exceptions into one line - without either importing the other.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Literal, get_args

from .errors import PersonalensError

#: the three parts of a dialogue that make calls: the benchmark's user agent and judge, the assistant under test
CallRole = Literal["user_agent", "assistant", "judge"]
ROLES: tuple[CallRole, ...] = get_args(CallRole)


@dataclass(frozen=True)
class CallSite:
    """Which call is being made: its role, what for, and the dialogue turn."""

    role: CallRole
    label: str
    turn: int

    def describe(self) -> str:
        return f"{self.role.replace('_', ' ')} ({self.label}" + (f", turn {self.turn})" if self.turn else ")")


#: The call in progress in this thread (the replay layer labels and explains requests with it).
CURRENT_CALL: ContextVar[CallSite | None] = ContextVar("personalens_current_call", default=None)
#: Turns an exception raised inside a call into one of ours (set by the replay layer), or None.
CALL_ERRORS: ContextVar[Callable[[BaseException, CallSite], PersonalensError | None] | None] = ContextVar(
    "personalens_call_errors", default=None
)
#: The call in progress marks here whether a cassette answered it (a dict, shared with the threads the call
#: runs in: ``{"replayed": bool}``); None outside a call.
CALL_OUTCOME: ContextVar[dict[str, bool] | None] = ContextVar("personalens_call_outcome", default=None)


def mark_replayed() -> None:
    """A cassette answered the call in progress (the ledger counts replayed calls apart from live ones)."""
    outcome = CALL_OUTCOME.get()
    if outcome is not None:
        outcome["replayed"] = True


#: Told of each finished turn of a dialogue (scenario id, turns done, turn limit): the run's progress display,
#: when it shows one.
ON_TURN: ContextVar[Callable[[str, int, int], None] | None] = ContextVar("personalens_on_turn", default=None)
