"""Assistant entries of the project config: what ``--assistant NAME`` can name.

    [tool.personalens.assistants.my-bot]     # pyproject.toml
    kind = "http"                            # reference | openai | bedrock | http | python | command
    url = "http://127.0.0.1:8080/reply"
    context = ["interactions"]               # user context the bot is given; default: none

Every kind takes ``context`` (any of ``demographics``, ``interactions``, ``situation``; a real
bot knows only what its own memory holds, so the default is none), ``timeout_s`` (the limit
for one reply, 120 s by default) and ``max_reply_chars`` (the longest reply accepted, 20,000
characters by default).
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import UsageError
from .base import ContextSwitches
from .contract import DEFAULT_MAX_REPLY_CHARS

ContextPart = Literal["demographics", "interactions", "situation"]


class _Entry(BaseModel):
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


class _Sampling(BaseModel):
    """Sampling for bots that are a model behind a chat API (None: the API's own default)."""

    temperature: Optional[float] = Field(default=None, ge=0, le=2)
    max_tokens: Optional[int] = Field(default=None, ge=1)
    top_p: Optional[float] = Field(default=None, gt=0, le=1)
    #: the bot's own system prompt (the user context it is given, if any, follows it)
    system_prompt: Optional[str] = None


class ReferenceEntry(_Entry):
    """The paper's reference assistant on any model (a spec or a [models] name)."""

    kind: Literal["reference"]
    model: str = "local"
    #: the paper's prompt variant: claude, llama or mistral (None: chosen by the model's family, as the paper does)
    prompt: Optional[Literal["claude", "llama", "mistral"]] = None


class OpenAIEntry(_Entry, _Sampling):
    """A model behind an OpenAI-compatible chat-completions endpoint is the bot."""

    kind: Literal["openai"]
    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    #: the name of the environment variable holding the key (never the key itself)
    api_key_env: Optional[str] = None
    #: extra headers; ``${VAR}`` in a value is read from the environment at call time
    headers: dict[str, str] = Field(default_factory=dict)


class BedrockEntry(_Entry, _Sampling):
    """A model on Amazon Bedrock (Converse API) is the bot."""

    kind: Literal["bedrock"]
    model: str = Field(min_length=1)
    region: Optional[str] = None


class HttpEntry(_Entry):
    """Any HTTP endpoint speaking the turn contract (see :mod:`personalens_testkit.assistants.contract`)."""

    kind: Literal["http"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)


class PythonEntry(_Entry):
    """A Python callable ``package.module:function`` (sync or async) taking the turn contract's request."""

    kind: Literal["python"]
    callable: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    #: folders (relative to the project root) put on sys.path before importing
    path: list[str] = Field(default_factory=list)


class CommandEntry(_Entry):
    """A subprocess speaking the turn contract as JSON lines on stdin/stdout (a bot in any language)."""

    kind: Literal["command"]
    command: list[str] = Field(min_length=1)
    #: working folder (relative to the project root); default: the project root
    cwd: Optional[str] = None
    #: extra environment variables; ``${VAR}`` in a value is read from the environment
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        import shlex

        return shlex.split(value) if isinstance(value, str) else value


AssistantEntry = Annotated[
    Union[ReferenceEntry, OpenAIEntry, BedrockEntry, HttpEntry, PythonEntry, CommandEntry],
    Field(discriminator="kind"),
]
ASSISTANT_KINDS = ("reference", "openai", "bedrock", "http", "python", "command")
