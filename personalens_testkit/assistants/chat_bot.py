"""``kind = "openai"`` / ``"bedrock"``: the bot is a model behind a chat API.

The dialogue goes as chat messages (the simulated user's turns as ``user``, the bot's as
``assistant``), after the entry's own system prompt; user context the entry declares is
appended to that system prompt as tagged blocks.
"""

from __future__ import annotations

from typing import Callable

from ..errors import AssistantSetupError, ContractError, ModelError
from ..llm.base import ChatModel, ChatRequest, Message
from ..llm.retry import ping
from .base import AssistantInput, AssistantReply
from .contract import check_text
from .entries import ChatEntry
from .reference import context_blocks


class ChatModelAssistant:
    def __init__(self, name: str, entry: ChatEntry, model: ChatModel, *, reachable: Callable[[], None]) -> None:
        self.name = name
        self.entry = entry
        self.context = entry.switches()
        self.model = model
        #: raises if the bot's endpoint cannot be reached (AssistantSetupError) or its credentials do not resolve
        #: (ModelError): each kind says how
        self.reachable = reachable

    def check(self) -> None:
        """The endpoint is reachable (or the AWS credentials resolve), then one minimal real call answers."""
        try:
            self.reachable()
            ping(self.model, "assistant")
        except ModelError as exc:
            raise AssistantSetupError(str(exc)) from None

    def reply(self, turn: AssistantInput) -> AssistantReply:
        system = "\n\n".join(part for part in (self.entry.system_prompt or "", context_blocks(turn).strip()) if part)
        messages = ((Message("system", system),) if system else ()) + turn.messages
        response = self.model.complete(ChatRequest(
            messages=messages, purpose="assistant", temperature=self.entry.temperature,
            max_tokens=self.entry.max_tokens, top_p=self.entry.top_p,
        ))
        try:
            text = check_text(response.text.strip(), self.entry.max_reply_chars)
        except ContractError as exc:
            raise ContractError(str(exc), model=self.name) from None
        return AssistantReply(text, response.prompt_tokens, response.completion_tokens)

    def close(self) -> None:
        self.model.close()
