"""The assistant under test: its entry resolved once, with what the run needs to know of it.

``--assistant NAME`` is looked up once, here; everything else asks this object: whether the
assistant is a bot (code that may change behind an unchanged request, so always called live
and its turns recorded apart), where its entry was written, what context it sees, which model
it runs on, and how to build and check it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..assistants.base import Assistant, ContextSwitches
from ..assistants.build_context import BuildContext
from ..assistants.kinds import BOT_KINDS, AssistantEntry
from ..assistants.kinds.reference import ReferenceEntry, reference_variant
from ..assistants.recorded import RecordedBot
from ..assistants.registry import build_assistant, builtin_entry
from ..errors import PersonalensError, UsageError
from ..llm.registry import describe
from ..settings import RunSettings
from .models import ModelPool

if TYPE_CHECKING:
    from ..assistants.sandbox import Sandbox


@dataclass(frozen=True)
class AssistantUnderTest:
    settings: RunSettings

    @property
    def name(self) -> str:
        return self.settings.assistant

    @cached_property
    def entry(self) -> AssistantEntry | None:
        """The config entry (None: the built-in reference assistant, set by the --assistant-* options)."""
        return self.settings.assistants.entries.get(self.name)

    @property
    def kind(self) -> str:
        return self.entry.kind if self.entry is not None else "reference"

    @property
    def is_bot(self) -> bool:
        return self.kind in BOT_KINDS

    @property
    def where(self) -> str:
        return self.settings.assistants.where(self.name)

    @property
    def context(self) -> ContextSwitches:
        return self.settings.assistant_context if self.entry is None else self.entry.switches()

    @property
    def model(self) -> str | None:
        """The model the assistant runs on, as reported (None for a bot: its own business)."""
        model = self.settings.role_models.get("assistant")
        return model.label if model is not None else None

    @property
    def prompt_variant(self) -> str | None:
        """The reference assistant's prompt variant (the paper's claude / llama / mistral); None for other kinds."""
        if self.kind != "reference":
            return None
        entry = self.entry if isinstance(self.entry, ReferenceEntry) else builtin_entry(
            self.settings.assistant_model, self.settings.assistant_context, self.settings.assistant_prompt)
        return reference_variant(entry, lambda spec: describe(spec, self.settings.models))

    @property
    def label(self) -> str:
        """How an error names it: ``assistant 'my-bot' ([tool.personalens.assistants.my-bot] in pyproject.toml)``."""
        return f"assistant {self.name!r} ({self.where})"

    def build(self, models: ModelPool) -> Assistant:
        """The assistant, on the run's models; it owns (and closes) the model it runs on, if any. A bot's
        turns are recorded in the scenario's cassette (and replayed from it when re-judging)."""
        s = self.settings
        context = BuildContext(root=s.bot_root or s.rootdir, isolate=s.isolate_bot or s.bot_sandbox is not None,
                               sandbox=_sandbox(s.bot_sandbox), model=lambda spec, role: models.chat(spec, role, owned=False),
                               entry_model=models.entry_chat, describe=lambda spec: describe(spec, s.models),
                               reply_cut=s.reply_cut)
        assistant = build_assistant(s.assistant, s.assistants, context, reference_model=s.assistant_model,
                                    reference_context=s.assistant_context, reference_prompt=s.assistant_prompt)
        return RecordedBot(assistant, replay=s.rejudge) if self.is_bot else assistant

    def check(self, models: ModelPool, *, reach: bool) -> None:
        """Before any case: the assistant can be built and (with ``reach``) contacted or started once."""
        if self.entry is None or isinstance(self.entry, ReferenceEntry) or self.settings.rejudge:
            return  # the reference assistant's model is checked with the other models; a re-judging replays it
        if not self.is_bot and "assistant" not in models.live_roles:
            return  # a model-backed assistant that only replays needs no credentials
        try:
            assistant = self.build(models)
            try:
                if reach:
                    assistant.check()
            finally:
                assistant.close()
        except PersonalensError as exc:
            raise UsageError(f"{self.label}: {exc}") from None


@functools.lru_cache(maxsize=4)
def _sandbox(path: Path | None) -> Sandbox | None:
    """The gate's sandbox a bot's processes run under (``--bot-sandbox``), read once per process."""
    if path is None:
        return None
    from ..assistants.sandbox import Sandbox

    return Sandbox.load(path)
