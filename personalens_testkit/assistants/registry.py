"""``--assistant NAME`` -> the assistant under test.

Search order: the project config's entries (``personalens.toml``, then ``pyproject.toml``'s
``[tool.personalens.assistants]``), then the built-in ``reference``. Builders are
registered by kind and import their adapters lazily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import UsageError
from ..llm.base import ChatModel
from ..llm.entries import BedrockModel, OpenAIModel
from .base import Assistant, ContextSwitches
from .entries import (
    AssistantEntry, BedrockEntry, CommandEntry, HttpEntry, OpenAIEntry, PythonEntry, ReferenceEntry,
)

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


def reference_variant(entry: ReferenceEntry, describe: Callable[[str], str] = str) -> str:
    """The reference assistant's prompt variant: the entry's, or the one for its model's family."""
    from .reference import variant_for

    return entry.prompt or variant_for(describe(entry.model))


def _reference(name: str, entry: ReferenceEntry, ctx: BuildContext) -> Assistant:
    from .reference import ReferenceAssistant

    return ReferenceAssistant(ctx.model(entry.model, "assistant"), context=entry.switches(), name=name,
                              variant=reference_variant(entry, ctx.describe))


def _chat(name: str, entry: OpenAIEntry | BedrockEntry, ctx: BuildContext) -> Assistant:
    from .chat_bot import ChatModelAssistant

    backend: OpenAIModel | BedrockModel
    if isinstance(entry, OpenAIEntry):
        backend = OpenAIModel(model=entry.model, base_url=entry.base_url, api_key_env=entry.api_key_env,
                              headers=entry.headers, timeout_s=entry.timeout_s, json_dialect="none")
    else:
        backend = BedrockModel(model=entry.model, region=entry.region, json_mode="none", timeout_s=entry.timeout_s)
    return ChatModelAssistant(name, entry, ctx.entry_model(backend, name))


def _http(name: str, entry: HttpEntry, ctx: BuildContext) -> Assistant:
    from .http_bot import HttpAssistant

    return HttpAssistant(name, entry)


def _python(name: str, entry: PythonEntry, ctx: BuildContext) -> Assistant:
    if ctx.isolate:  # in a process of its own, speaking the command kind's lines (python_host)
        import sys

        from .command_bot import CommandAssistant

        host = [sys.executable, "-m", "personalens_testkit.assistants.python_host", entry.callable,
                *(str(ctx.root / folder) for folder in entry.path)]
        fields = entry.model_dump(exclude={"kind", "callable", "path"})
        return CommandAssistant(name, CommandEntry(kind="command", command=host, **fields), ctx.root)
    from .python_bot import PythonAssistant

    return PythonAssistant(name, entry, ctx.root)


def _command(name: str, entry: CommandEntry, ctx: BuildContext) -> Assistant:
    from .command_bot import CommandAssistant

    return CommandAssistant(name, entry, ctx.root)


BUILDERS: dict[str, Callable[[str, Any, BuildContext], Assistant]] = {
    "reference": _reference, "openai": _chat, "bedrock": _chat, "http": _http, "python": _python, "command": _command,
}


def build_assistant(
    name: str, catalogue: AssistantCatalogue, ctx: BuildContext, *,
    reference_model: str = "local", reference_context: ContextSwitches = ContextSwitches(),
    reference_prompt: str | None = None,
) -> Assistant:
    """The assistant ``name`` stands for; the built-in ``reference`` takes --assistant-model/-context/-prompt."""
    entry = catalogue.entry(name) or builtin_entry(reference_model, reference_context, reference_prompt)
    return BUILDERS[entry.kind](name, entry, ctx)


def builtin_entry(model: str, context: ContextSwitches, prompt: str | None = None) -> ReferenceEntry:
    """The built-in ``reference`` assistant as an entry."""
    return ReferenceEntry(kind="reference", model=model, prompt=prompt, context=[  # type: ignore[arg-type]
        part for part in ("demographics", "interactions", "situation") if getattr(context, part)])
