"""Model names and spec strings -> chat models. Each backend is a module of :mod:`.backends` (found by itself), which
imports its client only when a model is made.

A role's model is given as a spec string (``local``, ``local:FILE.gguf``, ``openai:MODEL``,
``bedrock:MODEL_ID``) or as the name of a ``[tool.personalens.models.NAME]`` entry; see
:mod:`personalens_testkit.llm.entries` for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .backends import ModelContext, backend_of
from .backends.local import LocalModel, local_settings
from .base import ChatModel
from .entries import ModelEntry, parse_spec
from .local_settings import LocalServerSettings


def resolve(name_or_spec: str, named: Mapping[str, ModelEntry]) -> ModelEntry:
    """A configured model by name, else the model a spec string describes."""
    entry = named.get(name_or_spec)
    return entry if entry is not None else parse_spec(name_or_spec)  # type: ignore[return-value]


def describe(name_or_spec: str, named: Mapping[str, ModelEntry]) -> str:
    """How a model is reported: the spec, or ``name (spec)`` for a configured model."""
    entry = named.get(name_or_spec)
    return f"{name_or_spec} ({entry.spec()})" if entry is not None else name_or_spec


@dataclass(frozen=True)
class RoleModel:
    """A role's model resolved once, for the whole run: as the settings name it (a spec or a ``[models]`` name), the
    entry it stands for and how reports name it. The run carries these; nothing parses a spec again."""

    role: str
    #: as the settings give it: a spec string or the name of a [models] entry
    named: str
    entry: ModelEntry
    #: how it is reported: the spec, or ``name (spec)`` for a configured model
    label: str

    @property
    def spec(self) -> str:
        return self.entry.spec()

    @property
    def embedded(self) -> bool:
        """Whether it is the embedded model (served on loopback by the testkit), not a remote one."""
        return isinstance(self.entry, LocalModel)

    def local(self, base: LocalServerSettings) -> LocalServerSettings | None:
        """The embedded-server settings it runs on, or None for remote backends."""
        return local_settings(self.entry, base) if isinstance(self.entry, LocalModel) else None


def resolve_role(role: str, name_or_spec: str, named: Mapping[str, ModelEntry]) -> RoleModel:
    """A role's model, resolved: its entry parsed and its label made, once."""
    entry = resolve(name_or_spec, named)
    label = f"{name_or_spec} ({entry.spec()})" if name_or_spec in named else name_or_spec
    return RoleModel(role, name_or_spec, entry, label)


def check_spec(name_or_spec: str, named: Mapping[str, ModelEntry] | None = None) -> str:
    """Validate a model name or spec without creating anything (for option parsing)."""
    resolve(name_or_spec, named or {})
    return name_or_spec


def local_settings_for(name_or_spec: str, base: LocalServerSettings,
                       named: Mapping[str, ModelEntry] | None = None) -> LocalServerSettings | None:
    """The embedded-server settings a model runs on, or None for remote backends."""
    return resolve_role("", name_or_spec, named or {}).local(base)


def create_model(name_or_spec: str, ctx: ModelContext, role: str) -> ChatModel:
    """The chat model a name or spec stands for, for one role (``user_agent``, ``assistant`` or ``judge``)."""
    model = resolve_role(role, name_or_spec, ctx.named)
    return create_entry_model(model.entry, model.label, ctx, role)


def create_entry_model(entry: ModelEntry, label: str, ctx: ModelContext, role: str) -> ChatModel:
    """The chat model an entry describes; ``label`` names it in reports and errors."""
    return backend_of(entry).build(label, entry, ctx, role)


