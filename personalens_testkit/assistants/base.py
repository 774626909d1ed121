"""The system under test: what an assistant is given each turn and what it returns.

An assistant sees the dialogue so far and, only where its configuration says so, parts
of the user context: demographics (D), past-interaction summaries (I) and the situation
(S) - the paper's ablation switches. Preferences are never given directly: they come
out through the user, or can be inferred from the interaction summaries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Protocol

from ..data.context import ScenarioContext
from ..errors import UsageError
from ..llm.base import Message

_CONTEXT_NAMES = {
    "d": "demographics", "demographics": "demographics",
    "i": "interactions", "interactions": "interactions", "p": "interactions",
    "s": "situation", "situation": "situation",
}


@dataclass(frozen=True)
class ContextSwitches:
    """Which parts of the user context an assistant receives."""

    demographics: bool = False
    interactions: bool = False
    situation: bool = False

    @classmethod
    def parse(cls, text: str, *, option: str = "--assistant-context") -> ContextSwitches:
        """``none``, or any combination of ``demographics,interactions,situation`` (or ``D,I,S``)."""
        words = [w for w in re.split(r"[\s,+]+", text.strip().lower()) if w]
        if words == ["none"] or not words:
            return cls()
        if len(words) == 1 and words[0] not in _CONTEXT_NAMES and set(words[0]) <= {"d", "i", "s"}:
            words = list(words[0])  # "dis" -> d, i, s
        chosen = set()
        for word in words:
            if word not in _CONTEXT_NAMES:
                raise UsageError(
                    f"{option}: {word!r} is not a context part (use none, or any of demographics, interactions, "
                    "situation - or D, I, S)"
                )
            chosen.add(_CONTEXT_NAMES[word])
        return cls(**{name: True for name in chosen})

    @property
    def label(self) -> str:
        """The paper's naming: ``none``, ``D``, ``I``, ``S``, ``D+I``, ... ``D+I+S``."""
        parts = [letter for letter, on in (("D", self.demographics), ("I", self.interactions), ("S", self.situation)) if on]
        return "+".join(parts) or "none"


@dataclass(frozen=True)
class AssistantInput:
    """One turn's input to the assistant under test."""

    scenario_id: str
    turn: int
    #: the dialogue so far, oldest first, ending with the user's latest message
    messages: tuple[Message, ...]
    demographics: dict[str, str] | None = None
    #: past-interaction summary per domain of the task
    interactions: dict[str, str] | None = None
    situation: dict[str, str] | None = None

    @classmethod
    def build(
        cls, ctx: ScenarioContext, switches: ContextSwitches, messages: tuple[Message, ...], turn: int
    ) -> AssistantInput:
        return cls(
            scenario_id=ctx.scenario.scenario_id, turn=turn, messages=messages,
            demographics=dict(ctx.demographics) if switches.demographics else None,
            interactions=dict(ctx.interactions) if switches.interactions else None,
            situation=dict(ctx.situation_pairs) if switches.situation else None,
        )


@dataclass(frozen=True)
class AssistantReply:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: what the adapter noticed about this turn (e.g. log lines a command bot wrote on stdout), kept in the row
    notes: tuple[str, ...] = ()
    #: the reply recorded for this very turn, when this one differs from it (a bot whose reply changed, scored
    #: live from here with ``--record-mode new_episodes``); None: the same reply, or nothing recorded
    recorded: str | None = None

    def with_note(self, note: str) -> AssistantReply:
        return replace(self, notes=(*self.notes, note))


class Assistant(Protocol):
    """An assistant under test. Failures raise :class:`~personalens_testkit.errors.ModelError`."""

    #: the name it was selected by (``--assistant``)
    name: str
    #: what user context it receives
    context: ContextSwitches

    def reply(self, turn: AssistantInput) -> AssistantReply: ...

    def check(self) -> None:
        """Before any case: raise a UsageError saying what is wrong if the assistant cannot be used."""

    def close(self) -> None: ...
