"""The paper's reference assistant on any chat model (``--assistant reference``).

A general conversational assistant, concise and natural, tailoring to what it knows;
temperature 0. The context switches choose which user context goes into its prompt (the
paper's Table 4 ablation).

Its prompt comes in the paper's variants, chosen by the model's family as the paper does
(or named by ``--assistant-prompt`` / an entry's ``prompt``):

- ``claude``: acts as though it can carry out tasks directly, without mentioning limitations
  (the paper's prompt for Claude; also the default for any other family);
- ``llama`` and ``mistral``: the paper's prompt for those models, which does not claim the
  ability to act and asks to be open about limitations (one text, as upstream).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..prompts.render import bullet_pairs, dialogue_block, fill, interactions_block, kept_reply, reply_stops
from ..llm.base import ChatModel, ChatRequest, Message
from .base import AssistantInput, AssistantReply, ContextSwitches

ASSISTANT_TEMPERATURE = 0.0
ASSISTANT_MAX_TOKENS = 800
PROMPT_VARIANTS = ("claude", "llama", "mistral")
#: the template files of each variant (llama and mistral share the paper's one text)
_FILES = {"claude": "claude", "llama": "llama", "mistral": "llama"}


def variant_for(model: str) -> str:
    """The paper's prompt variant for a model (a spec or its description): by family, ``claude`` otherwise."""
    name = model.lower()
    if "llama" in name or "meta." in name:
        return "llama"
    if "mistral" in name or "mixtral" in name:
        return "mistral"
    return "claude"


def _context_parts(turn: AssistantInput) -> list[tuple[str, str, str]]:
    """(tag, heading, text) of each part of the user context the assistant may see."""
    parts = []
    if turn.demographics is not None:
        parts.append(("user_demographics", "User demographics", bullet_pairs(turn.demographics.items())))
    if turn.interactions is not None:
        parts.append(("past_interactions", "Past interactions with the user", interactions_block(turn.interactions)))
    if turn.situation is not None:
        parts.append(("current_situation", "The user's current situation", bullet_pairs(turn.situation.items())))
    return parts


def context_plain(turn: AssistantInput) -> str:
    """The user context as plain headed paragraphs (the layout of the llama/mistral variant)."""
    return "".join(f"{heading}:\n{text}\n\n" for _, heading, text in _context_parts(turn))


def context_blocks(turn: AssistantInput) -> str:
    """The user context the assistant may see, as tagged blocks (empty when it sees none)."""
    return "".join(f"<{tag}>\n{text}\n</{tag}>\n\n" for tag, _, text in _context_parts(turn))


@dataclass
class ReferenceAssistant:
    model: ChatModel
    context: ContextSwitches = ContextSwitches()
    name: str = "reference"
    #: the paper's prompt variant (see the module's docstring)
    variant: str = "claude"
    #: how a reply the model ran past is kept (prompts/render.REPLY_CUTS)
    reply_cut: str = "speaker"

    def reply(self, turn: AssistantInput) -> AssistantReply:
        files = _FILES[self.variant]
        prompt = fill(f"assistant_turn_{files}", context=context_blocks(turn), context_plain=context_plain(turn),
                      dialogue=dialogue_block(turn.messages, style="plain"))
        request = ChatRequest(
            messages=(Message("system", fill(f"assistant_system_{files}")), Message("user", prompt)),
            purpose="assistant", temperature=ASSISTANT_TEMPERATURE, max_tokens=ASSISTANT_MAX_TOKENS,
            stop=reply_stops(self.reply_cut),
        )
        response = self.model.complete(request)
        return AssistantReply(
            text=kept_reply(response.text, self.reply_cut), prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
        )

    def check(self) -> None:
        """The reference assistant's model is checked with the other roles' models."""

    def close(self) -> None:
        self.model.close()
