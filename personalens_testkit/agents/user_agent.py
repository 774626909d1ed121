"""The user agent: plays the profile's user, opening the dialogue and answering the assistant.

It sees the demographics, the preferences and past-interaction summaries of the task's
domains, the situation, the task (the task's User Intent) and the dialogue so far. A
follow-up may end with TERMINATE when the task is done; the word is taken out of the
transcript and reported separately (see :func:`split_terminate`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from ..data.context import ScenarioContext
from ..llm.base import ChatModel, ChatRequest, Message
from .calls import CallLog
from ..prompts.render import (
    demographics_block, dialogue_block, fill, interactions_block, preferences_block, kept_reply, reply_stops, situation_block,
)

USER_TEMPERATURE = 0.5
USER_MAX_TOKENS = 800
TERMINATE = "TERMINATE"

_TERMINATE = re.compile(r"\s*\bTERMINATE\b[\s.!]*")


@dataclass(frozen=True)
class Utterance:
    text: str
    #: the agent asked to end the dialogue (TERMINATE)
    terminate: bool


def split_terminate(text: str) -> tuple[str, bool]:
    """Remove every TERMINATE (the exact upper-case word) and say whether there was one."""
    cleaned, count = _TERMINATE.subn(" ", text)
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip(), count > 0


@dataclass
class UserAgent:
    model: ChatModel
    temperature: float = USER_TEMPERATURE
    max_tokens: int = USER_MAX_TOKENS
    #: how a reply the model ran past is kept (prompts/render.REPLY_CUTS)
    reply_cut: str = "speaker"
    #: the last scenario's context and its prompt prefix (a dialogue asks for it every turn)
    _prefix: tuple[ScenarioContext, str] | None = field(default=None, init=False, repr=False, compare=False)

    def prompt_prefix(self, ctx: ScenarioContext) -> str:
        """The part of every user-agent prompt that stays fixed for a scenario."""
        last = self._prefix  # one read: another thread's dialogue may replace it meanwhile
        if last is not None and last[0] is ctx:
            return last[1]
        prefix = fill(
            "user_context",
            demographics=demographics_block(ctx), preferences=preferences_block(ctx),
            interactions=interactions_block(ctx.interactions), situation=situation_block(ctx), task=ctx.scenario.task.user_intent,
        )
        self._prefix = (ctx, prefix)
        return prefix

    def opening(self, ctx: ScenarioContext, log: CallLog) -> Utterance:
        """The opening query. It never ends the dialogue: a stray TERMINATE is removed and only reported."""
        prefix = self.prompt_prefix(ctx)
        text, had_terminate = split_terminate(kept_reply(
            self._ask(prefix + fill("user_opening"), log, label="opening", turn=0, fixed=len(prefix)), self.reply_cut))
        return Utterance(text, terminate=had_terminate)

    def follow_up(self, ctx: ScenarioContext, messages: Sequence[Message], log: CallLog, *, turn: int) -> Utterance:
        prefix = self.prompt_prefix(ctx)
        prompt = prefix + fill("user_followup", dialogue=dialogue_block(messages))
        text, terminate = split_terminate(kept_reply(self._ask(prompt, log, label="reply", turn=turn, fixed=len(prefix)),
                                                     self.reply_cut))
        return Utterance(text, terminate)

    def _ask(self, prompt: str, log: CallLog, *, label: str, turn: int, fixed: int = 0) -> str:
        request = ChatRequest(
            messages=(Message("system", fill("user_system")), Message("user", prompt, cache_prefix=fixed)),
            purpose="user_agent", temperature=self.temperature, max_tokens=self.max_tokens,
            stop=reply_stops(self.reply_cut),
        )
        return log.chat(self.model, request, role="user_agent", label=label, turn=turn).text
