"""The paper's reference assistant on any chat model (``--assistant reference``).

A general conversational assistant that acts as if it can carry out tasks directly,
concise and natural, tailoring to what it knows; temperature 0. The context switches
choose which user context goes into its prompt (the paper's Table 4 ablation).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..prompts.render import SPEAKER_STOPS, bullet_pairs, dialogue_block, fill, interactions_block, own_message
from ..llm.base import ChatModel, ChatRequest, Message
from .base import AssistantInput, AssistantReply, ContextSwitches

ASSISTANT_TEMPERATURE = 0.0
ASSISTANT_MAX_TOKENS = 800


def context_blocks(turn: AssistantInput) -> str:
    """The user context the assistant may see, as tagged blocks (empty when it sees none)."""
    blocks = []
    if turn.demographics is not None:
        blocks.append(f"<user_demographics>\n{bullet_pairs(turn.demographics.items())}\n</user_demographics>")
    if turn.interactions is not None:
        blocks.append(f"<past_interactions>\n{interactions_block(turn.interactions)}\n</past_interactions>")
    if turn.situation is not None:
        blocks.append(f"<current_situation>\n{bullet_pairs(turn.situation.items())}\n</current_situation>")
    return "".join(block + "\n\n" for block in blocks)


@dataclass
class ReferenceAssistant:
    model: ChatModel
    context: ContextSwitches = ContextSwitches()
    name: str = "reference"

    def reply(self, turn: AssistantInput) -> AssistantReply:
        prompt = fill("assistant_turn", context=context_blocks(turn), dialogue=dialogue_block(turn.messages, style="plain"))
        request = ChatRequest(
            messages=(Message("system", fill("assistant_system")), Message("user", prompt)),
            purpose="assistant", temperature=ASSISTANT_TEMPERATURE, max_tokens=ASSISTANT_MAX_TOKENS,
            stop=SPEAKER_STOPS,
        )
        response = self.model.complete(request)
        return AssistantReply(
            text=own_message(response.text), prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
        )

    def check(self) -> None:
        """The reference assistant's model is checked with the other roles' models."""

    def close(self) -> None:
        self.model.close()
