"""Model names and spec strings -> chat models. Each backend is a module of :mod:`.backends` (found by itself), which
imports its client only when a model is made.

A role's model is given as a spec string (``local``, ``local:FILE.gguf``, ``openai:MODEL``,
``bedrock:MODEL_ID``) or as the name of a ``[tool.personalens.models.NAME]`` entry; see
:mod:`personalens_testkit.llm.entries` for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from .backends import backend_of
from .backends.local import LocalModel, local_settings
from .base import AnswerSource, ChatModel
from .entries import OPENAI_DEFAULT_URL, ModelEntry, parse_spec
from .local_settings import LocalServerSettings


@dataclass(frozen=True)
class ModelContext:
    """What backends need from the run: resolved settings and the way to the embedded server."""

    #: Returns the base URL of a healthy embedded server for these settings and role (starting it if needed).
    local_url_for: Callable[[LocalServerSettings, str], str]
    local: LocalServerSettings = field(default_factory=LocalServerSettings)
    openai_base_url: str = OPENAI_DEFAULT_URL
    openai_api_key_env: str = "OPENAI_API_KEY"
    named: Mapping[str, ModelEntry] = field(default_factory=dict)
    local_timeout_s: float = 900.0
    #: roles whose calls only replay from cassettes: no server, no credentials needed
    replay_only_roles: frozenset[str] = frozenset()
    #: where OpenAI-compatible clients find a replayed call's answer first (the run's cassettes), if any
    recorded_answer: AnswerSource | None = None


def resolve(name_or_spec: str, named: Mapping[str, ModelEntry]) -> ModelEntry:
    """A configured model by name, else the model a spec string describes."""
    entry = named.get(name_or_spec)
    return entry if entry is not None else parse_spec(name_or_spec)  # type: ignore[return-value]


def describe(name_or_spec: str, named: Mapping[str, ModelEntry]) -> str:
    """How a model is reported: the spec, or ``name (spec)`` for a configured model."""
    entry = named.get(name_or_spec)
    return f"{name_or_spec} ({entry.spec()})" if entry is not None else name_or_spec


def check_spec(name_or_spec: str, named: Mapping[str, ModelEntry] | None = None) -> str:
    """Validate a model name or spec without creating anything (for option parsing)."""
    resolve(name_or_spec, named or {})
    return name_or_spec


def local_settings_for(name_or_spec: str, base: LocalServerSettings,
                       named: Mapping[str, ModelEntry] | None = None) -> LocalServerSettings | None:
    """The embedded-server settings a model runs on, or None for remote backends."""
    entry = resolve(name_or_spec, named or {})
    return local_settings(entry, base) if isinstance(entry, LocalModel) else None


def create_model(name_or_spec: str, ctx: ModelContext, role: str) -> ChatModel:
    """The chat model a name or spec stands for, for one role (``user_agent``, ``assistant`` or ``judge``)."""
    entry = resolve(name_or_spec, ctx.named)
    return create_entry_model(entry, describe(name_or_spec, ctx.named), ctx, role)


def create_entry_model(entry: ModelEntry, label: str, ctx: ModelContext, role: str) -> ChatModel:
    """The chat model an entry describes; ``label`` names it in reports and errors."""
    return backend_of(entry).build(label, entry, ctx, role)


