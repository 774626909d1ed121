"""Model names and spec strings -> chat models. Backends register by kind and import lazily.

A role's model is given as a spec string (``local``, ``local:FILE.gguf``, ``openai:MODEL``,
``bedrock:MODEL_ID``) or as the name of a ``[tool.personalens.models.NAME]`` entry; see
:mod:`personalens_testkit.llm.entries` for both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping

from .base import AnswerSource, ChatModel
from .local_settings import DEFAULT_LOCAL_CAPS, LOCAL_STRING_CHARS, LocalServerSettings
from .entries import OPENAI_DEFAULT_URL, BedrockModel, LocalModel, ModelEntry, OpenAIModel, expand_env, parse_spec


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
    return entry if entry is not None else parse_spec(name_or_spec)


def describe(name_or_spec: str, named: Mapping[str, ModelEntry]) -> str:
    """How a model is reported: the spec, or ``name (spec)`` for a configured model."""
    entry = named.get(name_or_spec)
    return f"{name_or_spec} ({entry.spec()})" if entry is not None else name_or_spec


def _local(label: str, entry: LocalModel, ctx: ModelContext, role: str) -> ChatModel:
    from .openai_compat import OpenAICompatibleChat

    settings = local_settings(entry, ctx.local)
    bundled = settings.model_path is None
    return OpenAICompatibleChat(
        spec=label, base_url=ctx.local_url_for(settings, role), model=settings.alias(), json_dialect="llama_cpp",
        timeout_s=ctx.local_timeout_s, timeout_name="the embedded model's limit",
        max_tokens_cap=DEFAULT_LOCAL_CAPS if bundled else None,
        max_string_chars=LOCAL_STRING_CHARS if bundled else None, answers=ctx.recorded_answer,
    )


def _openai(label: str, entry: OpenAIModel, ctx: ModelContext, role: str) -> ChatModel:
    from .openai_compat import OpenAICompatibleChat

    key_env = entry.api_key_env or ctx.openai_api_key_env
    return OpenAICompatibleChat(
        spec=label, base_url=entry.base_url or ctx.openai_base_url, model=entry.model,
        api_key=os.environ.get(key_env), json_dialect=entry.json_dialect, timeout_s=entry.timeout_s,
        headers={name: expand_env(value) for name, value in entry.headers.items()}, answers=ctx.recorded_answer,
    )


def _bedrock(label: str, entry: BedrockModel, ctx: ModelContext, role: str) -> ChatModel:
    from .bedrock import BedrockChat

    replay_only = role in ctx.replay_only_roles
    return BedrockChat(spec=label, model_id=entry.model, region=entry.region, json_mode=entry.json_mode,
                       read_timeout_s=entry.timeout_s, endpoint_url=entry.endpoint_url, replay_only=replay_only,
                       prompt_cache=entry.prompt_cache)


Factory = Callable[[str, ModelEntry, ModelContext, str], ChatModel]
BACKENDS: dict[str, Factory] = {"local": _local, "openai": _openai, "bedrock": _bedrock}  # type: ignore[dict-item]


def check_spec(name_or_spec: str, named: Mapping[str, ModelEntry] | None = None) -> str:
    """Validate a model name or spec without creating anything (for option parsing)."""
    resolve(name_or_spec, named or {})
    return name_or_spec


def local_settings(entry: LocalModel, base: LocalServerSettings) -> LocalServerSettings:
    return replace(base, model_path=Path(entry.model_path)) if entry.model_path else base


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
    return BACKENDS[entry.kind](label, entry, ctx, role)


