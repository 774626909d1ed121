"""``kind = "python"``: a Python callable ``package.module:function`` (sync or async) is the bot."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from ..entries import Entry
from . import AssistantKind
from .command import CommandEntry

if TYPE_CHECKING:
    from ..base import Assistant
    from ..build_context import BuildContext


class PythonEntry(Entry):
    """A Python callable ``package.module:function`` (sync or async) taking the turn contract's request."""

    kind: Literal["python"]
    callable: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    #: folders (relative to the project root) put on sys.path before importing
    path: list[str] = Field(default_factory=list)


def build(name: str, entry: PythonEntry, ctx: BuildContext) -> Assistant:
    if ctx.isolate:  # in a process of its own, speaking the command kind's lines (python_host)
        import sys

        from ..command_bot import CommandAssistant

        host = [sys.executable, "-m", "personalens_testkit.assistants.python_host", entry.callable,
                *(str(ctx.root / folder) for folder in entry.path)]
        fields = entry.model_dump(exclude={"kind", "callable", "path"})
        return CommandAssistant(name, CommandEntry(kind="command", command=host, **fields), ctx.root,
                                sandbox=ctx.sandbox)
    from ..python_bot import PythonAssistant

    return PythonAssistant(name, entry, ctx.root)


KIND = AssistantKind(
    "python", PythonEntry, build, is_bot=True, order=4,
    scaffold='kind = "python"\ncallable = "my_bot:reply"                # module:function taking the request dict\npath = ["."]')
