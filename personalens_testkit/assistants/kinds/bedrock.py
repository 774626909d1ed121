"""``kind = "bedrock"``: a model on Amazon Bedrock (Converse API) is the bot."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field

from ..entries import ChatEntry
from . import AssistantKind

if TYPE_CHECKING:
    from ..base import Assistant
    from ..build_context import BuildContext


class BedrockEntry(ChatEntry):
    """A model on Amazon Bedrock (Converse API) is the bot."""

    kind: Literal["bedrock"]
    model: str = Field(min_length=1)
    region: Optional[str] = None


def build(name: str, entry: BedrockEntry, ctx: BuildContext) -> Assistant:
    from ...llm.bedrock import check_aws
    from ...llm.entries import BedrockModel
    from ..chat_bot import ChatModelAssistant

    backend = BedrockModel(model=entry.model, region=entry.region, json_mode="none", timeout_s=entry.timeout_s)
    return ChatModelAssistant(name, entry, ctx.entry_model(backend, name),
                              reachable=functools.partial(check_aws, entry.region))


# a fixed model on Bedrock, not code of yours: its calls replay like the benchmark's own models'
KIND = AssistantKind("bedrock", BedrockEntry, build, is_bot=False, order=2)
