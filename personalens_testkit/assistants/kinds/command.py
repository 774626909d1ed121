"""``kind = "command"``: a subprocess speaking the turn contract as JSON lines on stdin/stdout (a bot in any language)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field, field_validator

from ..entries import Entry
from . import AssistantKind

if TYPE_CHECKING:
    from ..base import Assistant
    from ..build_context import BuildContext


class CommandEntry(Entry):
    """A subprocess speaking the turn contract as JSON lines on stdin/stdout (a bot in any language)."""

    kind: Literal["command"]
    command: list[str] = Field(min_length=1)
    #: working folder (relative to the project root); default: the project root
    cwd: Optional[str] = None
    #: extra environment variables; ``${VAR}`` in a value is read from the environment
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        import shlex

        return shlex.split(value) if isinstance(value, str) else value


def build(name: str, entry: CommandEntry, ctx: BuildContext) -> Assistant:
    from ..command_bot import CommandAssistant

    return CommandAssistant(name, entry, ctx.root, sandbox=ctx.sandbox)


KIND = AssistantKind(
    "command", CommandEntry, build, is_bot=True, order=5,
    scaffold='kind = "command"\ncommand = ["python3", "my_bot.py"]       # JSON lines on stdin and stdout')
