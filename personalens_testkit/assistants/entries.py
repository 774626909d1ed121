"""Assistant entries of the project config: what ``--assistant NAME`` can name. What every entry takes is
here; each kind's own schema is in its module of :mod:`.kinds`.

    [tool.personalens.assistants.my-bot]     # pyproject.toml
    kind = "http"                            # one of the kinds (assistants/kinds/: a module each)
    url = "http://127.0.0.1:8080/reply"
    context = ["interactions"]               # user context the bot is given; default: none

Every kind takes ``context`` (any of ``demographics``, ``interactions``, ``situation``; a real
bot knows only what its own memory holds, so the default is none), ``timeout_s`` (the limit
for one reply, 120 s by default) and ``max_reply_chars`` (the longest reply accepted, 20,000
characters by default).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import UsageError
from .base import ContextSwitches
from .contract import DEFAULT_MAX_REPLY_CHARS

ContextPart = Literal["demographics", "interactions", "situation"]


class Entry(BaseModel):
    """What every kind's entry takes (a kind's schema, in its module of :mod:`.kinds`, adds its own fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: user context the assistant is given with every turn
    context: list[ContextPart] = Field(default_factory=list)
    timeout_s: float = Field(default=120.0, gt=0)
    #: the longest reply accepted, in characters (a longer one is an error of the turn)
    max_reply_chars: int = Field(default=DEFAULT_MAX_REPLY_CHARS, ge=1, le=10_000_000)

    @field_validator("context", mode="before")
    @classmethod
    def _letters(cls, value: object) -> object:
        """Also accept the paper's letters and a comma-separated string: ``"D,I"`` or ``["I", "S"]``."""
        if isinstance(value, str):
            value = [value] if value.strip().lower() != "none" else []
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            try:
                switches = ContextSwitches.parse(",".join(value), option="context")
            except UsageError as exc:
                raise ValueError(str(exc).removeprefix("context: ")) from None
            return [name for name in ("demographics", "interactions", "situation") if getattr(switches, name)]
        return value

    def switches(self) -> ContextSwitches:
        return ContextSwitches(**{name: True for name in self.context})


class Sampling(BaseModel):
    """Sampling for bots that are a model behind a chat API (None: the API's own default)."""

    temperature: Optional[float] = Field(default=None, ge=0, le=2)
    max_tokens: Optional[int] = Field(default=None, ge=1)
    top_p: Optional[float] = Field(default=None, gt=0, le=1)
    #: the bot's own system prompt (the user context it is given, if any, follows it)
    system_prompt: Optional[str] = None



class ChatEntry(Entry, Sampling):
    """What every kind whose bot is a model behind a chat API takes (:mod:`.chat_bot` runs it)."""
