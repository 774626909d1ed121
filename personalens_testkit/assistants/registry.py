"""``--assistant NAME`` -> the assistant under test.

Search order: the project config's entries (``personalens.toml``, then ``pyproject.toml``'s
``[tool.personalens.assistants]``), then the built-in ``reference``. Each kind builds its own (its module
in :mod:`.kinds`, which imports its adapter only then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from ..errors import UsageError
from ..llm.base import ChatModel
from ..llm.entries import BedrockModel, OpenAIModel
from .base import Assistant, ContextSwitches
from .kinds import KINDS, AssistantEntry
from .kinds.reference import ReferenceEntry

if TYPE_CHECKING:
    from .sandbox import Sandbox

BUILTIN = "reference"

#: (model name or spec, role) -> chat model; for models named by an entry: (entry, label) -> chat model
ModelFactory = Callable[[str, str], ChatModel]
EntryModelFactory = Callable[[OpenAIModel | BedrockModel, str], ChatModel]


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


@dataclass(frozen=True)
class BuildContext:
    root: Path
    model: ModelFactory
    entry_model: EntryModelFactory
    #: a model spec or [models] name as the model it stands for (its family picks a prompt variant)
    describe: Callable[[str], str] = str
    #: a python bot runs in a process of its own (--isolate-bot)
    isolate: bool = False
    #: the gate's sandbox: a bot's processes run under its user id and environment (None: as this process)
    sandbox: Optional["Sandbox"] = None
    #: how the reference assistant keeps a reply its model ran past (prompts/render.REPLY_CUTS)
    reply_cut: str = "speaker"


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
