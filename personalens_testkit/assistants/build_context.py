"""What building an assistant from its entry may use: the run's models, its root, its sandbox (each kind's
``build`` in :mod:`.kinds` takes one)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ..llm.base import ChatModel
from ..llm.entries import BedrockModel, OpenAIModel

if TYPE_CHECKING:
    from .sandbox import Sandbox

#: (model name or spec, role) -> chat model; for models named by an entry: (entry, label) -> chat model
ModelFactory = Callable[[str, str], ChatModel]
EntryModelFactory = Callable[[OpenAIModel | BedrockModel, str], ChatModel]


@dataclass(frozen=True)
class BuildContext:
    """What a kind's ``build`` may use to make its assistant."""

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
