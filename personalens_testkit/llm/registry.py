"""Model spec strings -> chat models. Backends register by name and import lazily.

    local                    the embedded SmolLM2-135M (llama.cpp server on loopback)
    local:/path/model.gguf   another GGUF file on the same embedded server machinery
    openai:<model>           any OpenAI-compatible endpoint; base URL and key from settings
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..errors import UsageError
from .base import ChatModel
from .embedded import DEFAULT_LOCAL_CAPS, LOCAL_STRING_CHARS, LocalServerSettings


@dataclass(frozen=True)
class ModelContext:
    """What backends need from the run: resolved settings and the way to the embedded server."""

    #: Returns the base URL of a healthy embedded server for these settings and role (starting it if needed).
    local_url_for: Callable[[LocalServerSettings, str], str]
    local: LocalServerSettings = field(default_factory=LocalServerSettings)
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    local_timeout_s: float = 900.0


#: (spec, what follows "backend:", context, the role the model plays) -> model
Factory = Callable[[str, str, ModelContext, str], ChatModel]


def _local(spec: str, rest: str, ctx: ModelContext, role: str) -> ChatModel:
    from .openai_compat import OpenAICompatibleChat

    settings = local_settings_for(spec, ctx.local)
    assert settings is not None
    return OpenAICompatibleChat(
        spec=spec, base_url=ctx.local_url_for(settings, role), model=settings.alias(), json_dialect="llama_cpp",
        timeout_s=ctx.local_timeout_s, max_tokens_cap=DEFAULT_LOCAL_CAPS if not rest else None,
        max_string_chars=LOCAL_STRING_CHARS if not rest else None,
    )


def _openai(spec: str, rest: str, ctx: ModelContext, role: str) -> ChatModel:
    from .openai_compat import OpenAICompatibleChat

    if not rest:
        raise UsageError(f"model spec {spec!r}: name the model, like openai:gpt-4o-mini")
    return OpenAICompatibleChat(
        spec=spec, base_url=ctx.openai_base_url, model=rest, api_key=os.environ.get(ctx.openai_api_key_env),
        json_dialect="openai", timeout_s=ctx.timeout_s,
    )


BACKENDS: dict[str, Factory] = {"local": _local, "openai": _openai}


def check_spec(spec: str) -> str:
    """Validate a spec's form without creating anything (for option parsing)."""
    backend, sep, rest = spec.partition(":")
    if backend not in BACKENDS:
        raise UsageError(f"model spec {spec!r}: unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if sep and not rest:
        raise UsageError(f"model spec {spec!r}: nothing after '{backend}:'")
    if backend == "openai" and not rest:
        raise UsageError(f"model spec {spec!r}: name the model, like openai:gpt-4o-mini")
    return spec


def local_settings_for(spec: str, base: LocalServerSettings) -> LocalServerSettings | None:
    """The embedded-server settings a spec runs on, or None for remote backends."""
    backend, _, rest = spec.partition(":")
    if backend != "local":
        return None
    return replace(base, model_path=Path(rest)) if rest else base


def create_model(spec: str, ctx: ModelContext, role: str) -> ChatModel:
    """The chat model a spec names, for one role (``user_agent``, ``assistant`` or ``judge``)."""
    check_spec(spec)
    backend, _, rest = spec.partition(":")
    return BACKENDS[backend](spec, rest, ctx, role)
