"""The assistant kinds: one module each in this package, found by its name - a new kind is a new module here.

A kind's module holds everything about it (see :class:`AssistantKind`): its entry's schema (the
``[assistants.NAME]`` table of the project config), how an entry is built into an assistant (the adapter
imported only then), whether it is a bot, and the lines ``personalens init --kind NAME`` writes for it.
It says so in one line, ``KIND = AssistantKind(...)``; nothing else lists the kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, Union

from pydantic import BaseModel, Field

from ...discovery import discover

if TYPE_CHECKING:
    from ..base import Assistant
    from ..build_context import BuildContext


@dataclass(frozen=True)
class AssistantKind:
    """One kind of assistant under test (``kind = "..."`` in its entry)."""

    name: str
    #: the entry's schema: a pydantic model whose ``kind`` field is ``Literal[name]``
    entry: type[BaseModel]
    #: (name, entry, build context) -> the assistant; imports its adapter when called
    build: Callable[[str, Any, "BuildContext"], "Assistant"]
    #: code that may change behind an unchanged request: always called live, its turns recorded apart
    is_bot: bool
    #: where the kind stands when kinds are listed (the built-in first, models, then bots)
    order: int
    #: the entry's lines in a new personalens.toml (``personalens init --kind NAME``; ``$address``: the bot's
    #: address); None: init does not offer the kind
    scaffold: str | None = None
    #: a bot that is a server: its default address (the gate can start it, ``--start`` / ``--health-url``)
    address: str = ""


#: every kind, by name, in listing order
KINDS: dict[str, AssistantKind] = discover(__name__, __path__, "KIND", AssistantKind, lambda k: (k.order, k.name),
                                           group="personalens_testkit.assistant_kinds")
#: the kinds' names, in listing order
ASSISTANT_KINDS: tuple[str, ...] = tuple(KINDS)
#: any kind's entry, told apart by its ``kind``
AssistantEntry = Annotated[Union[tuple(kind.entry for kind in KINDS.values())], Field(discriminator="kind")]  # type: ignore[valid-type]
#: the kinds that are bots
BOT_KINDS = frozenset(name for name, kind in KINDS.items() if kind.is_bot)
#: the kinds init can write an entry for: {name: its lines}
SCAFFOLDS = {name: kind.scaffold for name, kind in KINDS.items() if kind.scaffold}
#: the kinds that are servers: {name: default address}
SERVER_ADDRESSES = {name: kind.address for name, kind in KINDS.items() if kind.address}


def entry_classes() -> dict[str, type[BaseModel]]:
    """Each kind's entry schema by its class name (``HttpEntry``, ...)."""
    return {kind.entry.__name__: kind.entry for kind in KINDS.values()}
