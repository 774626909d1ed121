"""``kind = "openai"``: a model behind an OpenAI-compatible chat-completions endpoint is the bot."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field

from ..entries import ChatEntry
from . import AssistantKind

if TYPE_CHECKING:
    from ..base import Assistant
    from ..build_context import BuildContext


class OpenAIEntry(ChatEntry):
    """A model behind an OpenAI-compatible chat-completions endpoint is the bot."""

    kind: Literal["openai"]
    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    #: the name of the environment variable holding the key (never the key itself)
    api_key_env: Optional[str] = None
    #: extra headers; ``${VAR}`` in a value is read from the environment at call time
    headers: dict[str, str] = Field(default_factory=dict)


def build(name: str, entry: OpenAIEntry, ctx: BuildContext) -> Assistant:
    from ...llm.entries import OpenAIModel
    from ..chat_bot import ChatModelAssistant
    from ..setup_check import check_reachable

    backend = OpenAIModel(model=entry.model, base_url=entry.base_url, api_key_env=entry.api_key_env,
                          headers=entry.headers, timeout_s=entry.timeout_s, json_dialect="none")
    return ChatModelAssistant(name, entry, ctx.entry_model(backend, name),
                              reachable=functools.partial(check_reachable, entry.base_url))


KIND = AssistantKind(
    "openai", OpenAIEntry, build, is_bot=True, order=1, address="http://127.0.0.1:8080/v1",
    scaffold='kind = "openai"\nbase_url = "$address"       # an OpenAI-compatible endpoint serving your bot\n'
             'model = "my-bot"')
