"""Which model or bot call is being made, in this thread: the one piece of context the layers share.

The agents set it around each call (:func:`~personalens_testkit.llm.calling.make_call`); the
replay layer reads it to label a recorded request and to explain a miss, and installs an
explainer that turns its own exceptions into one line - without either importing the other.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Protocol, get_args

from .errors import PersonalensError

#: the parts of a run that make calls: the benchmark's user agent and judge, the assistant under test - and, with
#: ``--review-user``, the reviewer of the user agent's turns (on a model of its own: ``--review-user-model``)
CallRole = Literal["user_agent", "assistant", "judge", "reviewer"]
ROLES: tuple[CallRole, ...] = get_args(CallRole)
#: the roles a run has only when it asks for them: shown in a ledger or an estimate only then
OPTIONAL_ROLES: frozenset[CallRole] = frozenset({"reviewer"})
#: the roles that judge a finished dialogue: the ones called again when a recording is re-judged (``--rejudge``)
JUDGING_ROLES: frozenset[CallRole] = frozenset({"judge", "reviewer"})


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


class ProgressListener(Protocol):
    """The run's progress display, told what each case is doing (from any thread)."""

    def on_turn(self, scenario_id: str, turn: int, max_turns: int) -> None:
        """A turn of the case's dialogue is done (0: its opening)."""

    def step_started(self, scenario_id: str, doing: str) -> None:
        """The case waits on something (a call, a model server starting, its turn on the embedded models); the
        empty scenario id: the run itself, before or between cases."""

    def step_ended(self, scenario_id: str, doing: str) -> None:
        """What ``step_started`` told is over."""


#: The run's progress display, when it shows one.
ON_PROGRESS: ContextVar[ProgressListener | None] = ContextVar("personalens_on_progress", default=None)
#: The case this thread works for (its scenario id), set by the case runner around the case's work: the progress
#: display learns from it whose step a call or a wait is.
CURRENT_CASE: ContextVar[str] = ContextVar("personalens_current_case", default="")


@contextlib.contextmanager
def step(doing: str) -> Iterator[None]:
    """Tell the progress display, if one listens, that the current case (or the run) waits on ``doing`` while the
    block runs: "the assistant (reply, turn 3)", "the embedded judge model to start"."""
    listener, case = ON_PROGRESS.get(), CURRENT_CASE.get()
    if listener is None:
        yield
        return
    listener.step_started(case, doing)
    try:
        yield
    finally:
        listener.step_ended(case, doing)
