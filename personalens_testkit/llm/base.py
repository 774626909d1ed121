"""The one chat-model protocol every backend implements, and the values it exchanges."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from ..callsite import CallRole

Role = Literal["system", "user", "assistant"]

#: What a call is for (the role that makes it); the embedded backend sizes its answers by it.
Purpose = CallRole

#: A model call's exchange with the run's recordings, given by the run: ``(method, url, body, payload, send)`` ->
#: the call's answer as a recording stores it (``{"status": {"code", "message"}, "headers": {name: [values]},
#: "body": {"string": bytes}}``) - a recorded one, or what ``send()`` answered (recorded, when recording).
#: ``payload``: the JSON value ``body`` encodes (None: not known). The replay layer plugs in here, above an HTTP
#: backend's client: it sees the request as the client sends it and the answer as the client reads it.
AnswerSource = Callable[[str, str, bytes, Any, Callable[[], "dict[str, Any]"]], "dict[str, Any]"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    #: how many leading characters stay the same across a scenario's calls (a provider may cache them)
    cache_prefix: int = field(default=0, compare=False)

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    purpose: Purpose
    #: None leaves a sampling setting to the backend's own default
    temperature: float | None = 0.0
    max_tokens: int | None = 800
    top_p: float | None = None
    #: JSON schema the answer must follow; backends that cannot enforce it ignore it
    #: (the caller's parser is tolerant), backends that can, enforce it.
    json_schema: dict[str, Any] | None = None
    schema_name: str = "answer"
    #: strings that end the answer where the backend supports it (at most 4, as OpenAI allows)
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChatResponse:
    text: str
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    #: prompt tokens read from / written to a provider's prompt cache, where it reports them
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: one call, one answer. Errors surface as :class:`~personalens_testkit.errors.ModelError`."""

    #: The spec string the model was made from, as the user wrote it (e.g. ``local``, ``openai:gpt-4o-mini``).
    spec: str

    def complete(self, request: ChatRequest) -> ChatResponse: ...

    def close(self) -> None: ...


def token_count(value: Any) -> int | None:
    """A token count as a server reported it, if it is one (a hostile server may send anything)."""
    return value if type(value) is int and value >= 0 else None
