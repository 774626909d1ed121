"""The assistant under test: its interface, and the paper's reference assistant."""

from .base import Assistant, AssistantInput, AssistantReply, ContextSwitches
from .reference import ReferenceAssistant

__all__ = ["Assistant", "AssistantInput", "AssistantReply", "ContextSwitches", "ReferenceAssistant"]
