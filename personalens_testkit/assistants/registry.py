"""``--assistant NAME`` -> the assistant under test.

Search order: the project config's entries (``personalens.toml``, then ``pyproject.toml``'s
``[tool.personalens.assistants]``), then the built-in ``reference``. Each kind builds its own (its module
in :mod:`.kinds`, which imports its adapter only then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..errors import UsageError
from .base import Assistant, ContextSwitches
from .build_context import BuildContext
from .kinds import KINDS, AssistantEntry
from .kinds.reference import ReferenceEntry

BUILTIN = "reference"


@dataclass(frozen=True)
class AssistantCatalogue:
    """The assistants a run can name: configured entries (with where they were read) and the built-in."""

    entries: Mapping[str, AssistantEntry] = field(default_factory=dict)
    #: name -> where the entry came from, e.g. "[tool.personalens.assistants.my-bot] in pyproject.toml"
    sources: Mapping[str, str] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(set(self.entries) | {BUILTIN})

    def entry(self, name: str) -> AssistantEntry | None:
        if name in self.entries:
            return self.entries[name]
        if name == BUILTIN:
            return None
        raise UsageError(f"--assistant: unknown assistant {name!r} (known: {', '.join(self.names())})")

    def where(self, name: str) -> str:
        return self.sources.get(name, "built in")


def build_assistant(
    name: str, catalogue: AssistantCatalogue, ctx: BuildContext, *,
    reference_model: str = "local", reference_context: ContextSwitches = ContextSwitches(),
    reference_prompt: str | None = None,
) -> Assistant:
    """The assistant ``name`` stands for; the built-in ``reference`` takes --assistant-model/-context/-prompt."""
    entry = catalogue.entry(name) or builtin_entry(reference_model, reference_context, reference_prompt)
    return KINDS[entry.kind].build(name, entry, ctx)


def builtin_entry(model: str, context: ContextSwitches, prompt: str | None = None) -> ReferenceEntry:
    """The built-in ``reference`` assistant as an entry."""
    return ReferenceEntry(kind="reference", model=model, prompt=prompt, context=[  # type: ignore[arg-type]
        part for part in ("demographics", "interactions", "situation") if getattr(context, part)])
