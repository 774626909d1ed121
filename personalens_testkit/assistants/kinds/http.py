"""``kind = "http"``: any HTTP endpoint speaking the turn contract (see :mod:`personalens_testkit.assistants.contract`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from ..entries import Entry
from . import AssistantKind

if TYPE_CHECKING:
    from ..base import Assistant
    from ..build_context import BuildContext


class HttpEntry(Entry):
    """Any HTTP endpoint speaking the turn contract (see :mod:`personalens_testkit.assistants.contract`)."""

    kind: Literal["http"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)


def build(name: str, entry: HttpEntry, ctx: BuildContext) -> Assistant:
    from ..http_bot import HttpAssistant

    return HttpAssistant(name, entry)


KIND = AssistantKind(
    "http", HttpEntry, build, is_bot=True, order=3, address="http://127.0.0.1:8080/reply",
    scaffold='kind = "http"\nurl = "$address"         # POST: the turn contract (see docs/assistants.md)')
