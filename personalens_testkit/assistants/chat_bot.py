"""``kind = "openai"`` / ``"bedrock"``: the bot is a model behind a chat API.

The dialogue goes as chat messages (the simulated user's turns as ``user``, the bot's as
``assistant``), after the entry's own system prompt; user context the entry declares is
appended to that system prompt as tagged blocks.
"""

from __future__ import annotations

from typing import Any

from ..llm.base import ChatModel, ChatRequest, Message
from .base import AssistantInput, AssistantReply
from .entries import BedrockEntry, OpenAIEntry
from .reference import context_blocks
from .setup_check import AssistantSetupError, check_reachable


class ChatModelAssistant:
    def __init__(self, name: str, entry: OpenAIEntry | BedrockEntry, model: ChatModel) -> None:
        self.name = name
        self.entry = entry
        self.context = entry.switches()
        self.model = model

    def check(self) -> None:
        if isinstance(self.entry, OpenAIEntry):
            check_reachable(self.entry.base_url)
        else:
            check_aws(self.entry.region)

    def reply(self, turn: AssistantInput) -> AssistantReply:
        system = "\n\n".join(part for part in (self.entry.system_prompt or "", context_blocks(turn).strip()) if part)
        messages = ((Message("system", system),) if system else ()) + turn.messages
        response = self.model.complete(ChatRequest(
            messages=messages, purpose="assistant", temperature=self.entry.temperature,
            max_tokens=self.entry.max_tokens, top_p=self.entry.top_p,
        ))
        return AssistantReply(response.text.strip(), response.prompt_tokens, response.completion_tokens)

    def close(self) -> None:
        self.model.close()


def check_aws(region: str | None) -> None:
    """Credentials and a region must come from the standard AWS chain (no call is made)."""
    import boto3

    session: Any = boto3.Session(region_name=region) if region else boto3.Session()
    if session.region_name is None:
        raise AssistantSetupError("no AWS region: set AWS_DEFAULT_REGION, or region in the entry")
    if session.get_credentials() is None:
        raise AssistantSetupError("no AWS credentials in the standard chain (AWS_* variables, ~/.aws, SSO, instance role)")
