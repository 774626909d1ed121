"""The dialogue loop: user agent and assistant take turns until TERMINATE or the turn limit.

As in the paper: the user agent opens; each turn the assistant replies and the user
agent answers. When the user's answer carries TERMINATE, the word is removed, the
assistant replies once more, and the dialogue ends. Otherwise it ends after
``max_turns`` assistant replies (20 single-domain, 30 multi-domain).

:func:`run_dialogue` fills a :class:`Dialogue` in place, so a caller that catches an
error still holds the transcript up to the failed call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import Enum

from ..assistants.base import Assistant, AssistantInput
from ..callsite import ON_PROGRESS
from ..data.context import ScenarioContext
from ..data.models import TaskKind
from ..errors import ReplyChangedError
from ..llm.base import Message
from .calls import CallLog
from .user_agent import UserAgent

MAX_TURNS = {TaskKind.SD: 20, TaskKind.MD: 30}
logger = logging.getLogger("personalens_testkit.dialogue")


class Termination(str, Enum):
    USER_TERMINATED = "user_terminated"
    MAX_TURNS = "max_turns"
    ERROR = "error"


@dataclass(frozen=True)
class ReplyChange:
    """The first turn where the bot under test answered differently from its recording: the recorded reply and
    the new one (offline the case ends there, not scored; with ``new_episodes`` the models are live from there)."""

    turn: int
    recorded: str
    reply: str


@dataclass
class Dialogue:
    messages: list[Message] = field(default_factory=list)
    #: assistant replies so far (the final reply after TERMINATE included)
    turns: int = 0
    termination: Termination | None = None
    log: CallLog = field(default_factory=CallLog)
    #: protocol notes worth keeping, e.g. a TERMINATE the user agent put in its opening query
    notes: list[str] = field(default_factory=list)
    #: the first turn whose bot reply differs from the recording, if one did
    reply_change: ReplyChange | None = None
    #: the user agent put TERMINATE in its opening query (removed: an opening never ends the dialogue)
    opening_terminate: bool = False

    def transcript(self) -> list[dict[str, str]]:
        return [m.as_dict() for m in self.messages]


def turn_limit(kind: TaskKind, override: int | None = None) -> int:
    return override if override is not None else MAX_TURNS[kind]


def _tell(scenario_id: str, turn: int, max_turns: int) -> None:
    listener = ON_PROGRESS.get()
    if listener is not None:
        listener.on_turn(scenario_id, turn, max_turns)


def run_dialogue(
    dialogue: Dialogue, ctx: ScenarioContext, user: UserAgent, assistant: Assistant, *, max_turns: int
) -> Dialogue:
    try:
        opening = user.opening(ctx, dialogue.log)
        if opening.terminate:
            dialogue.opening_terminate = True
            dialogue.notes.append("the opening query contained TERMINATE: removed (an opening never ends the dialogue)")
        dialogue.messages.append(Message("user", opening.text))
        _tell(ctx.scenario.scenario_id, 0, max_turns)
        for turn in range(1, max_turns + 1):
            _assistant_turn(dialogue, ctx, assistant, turn, label="reply")
            answer = user.follow_up(ctx, dialogue.messages, dialogue.log, turn=turn)
            dialogue.messages.append(Message("user", answer.text))
            logger.info("%s: turn %d of at most %d done%s", ctx.scenario.scenario_id, turn, max_turns,
                        " (the user said TERMINATE)" if answer.terminate else "")
            _tell(ctx.scenario.scenario_id, turn, max_turns)
            if answer.terminate:
                _assistant_turn(dialogue, ctx, assistant, turn + 1, label="final reply")
                dialogue.termination = Termination.USER_TERMINATED
                return dialogue
        dialogue.termination = Termination.MAX_TURNS
        return dialogue
    except BaseException:
        dialogue.termination = Termination.ERROR
        raise


def _assistant_turn(dialogue: Dialogue, ctx: ScenarioContext, assistant: Assistant, turn: int, *, label: str) -> None:
    request = AssistantInput.build(ctx, assistant.context, tuple(dialogue.messages), turn)
    try:
        reply = dialogue.log.run(lambda: assistant.reply(request), role="assistant", label=label, turn=turn)
    except ReplyChangedError as exc:  # offline: the case ends here, not scored
        if dialogue.reply_change is None:
            dialogue.reply_change = ReplyChange(exc.turn, exc.recorded, exc.now)
        raise
    if reply.recorded is not None and dialogue.reply_change is None:  # new_episodes: live from here
        dialogue.reply_change = ReplyChange(turn, reply.recorded, reply.text)
    dialogue.messages.append(Message("assistant", reply.text))
    dialogue.notes.extend(f"assistant turn {turn}: {note}" for note in reply.notes)
    dialogue.turns += 1
